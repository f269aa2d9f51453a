"""A graph's replay of a program released after the graph was made, and a live launch after it in the same window
(tests/test_graph.py; run with ``VKBACKEND_PUSH_DESCRIPTORS`` 1 and 0)."""

import os

import numpy as np
from isolated import KERNELS, outcome, report

import vkbackend

result = {}
with open(os.path.join(KERNELS, "fill.comp")) as f:
    src = f.read()
dev = vkbackend.devices()[0]
pool = dev.memory_pool
released = dev.compile(vkbackend.compile_glsl(src))
live_prog = dev.compile(vkbackend.compile_glsl(src.replace("p.value", "p.value + 0.0")))
a, b = pool.allocate(1024), pool.allocate(1024)
graph = dev.graph([(released, [a], [1.0, 256], (4, 1, 1))])
dev.release_program(released)
pool.host_to_pool(np.zeros(256, np.float32), b)
dev.sync()
graph.launch()  # a replay of the released program...
dev.launch(live_prog, [b], [7.0, 256], (4, 1, 1))  # ...and a live launch after it, in the same window
out = np.empty(256, np.float32)
status, _ = outcome(pool.pool_to_host, b, out)
result["status"] = status
pool.pool_to_host(b, out)
result["value"] = float(out[0])
graph.close()
dev.close()
report(result)
