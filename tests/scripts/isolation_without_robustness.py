"""An out-of-bounds write into a neighbouring buffer of the same chunk, run with ``VKBACKEND_ROBUST=0``: whether the
neighbour changed (tests/test_isolation.py: a record of what lavapipe does, not a guarantee)."""

import numpy as np
from _reliability import SCRIBBLE, groups
from isolated import report

import vkbackend

result = {}
dev = vkbackend.devices()[0]
pool = dev.memory_pool
prog = dev.compile(vkbackend.compile_glsl(SCRIBBLE))
bufs = [pool.allocate(256) for _ in range(3)]
for b in bufs:
    pool.host_to_pool(np.zeros(64, np.uint32), b)
bufs.sort(key=lambda b: pool.entries[b].offset)
dev.launch(prog, [bufs[1]], [0, 64 * 64, 0xDEAD], groups(64 * 64))
out = np.empty(64, np.uint32)
pool.pool_to_host(bufs[2], out)
result["robust"] = dev.info.robust_buffer_access
result["neighbour_changed"] = bool(out.any())
dev.close()
report(result)
