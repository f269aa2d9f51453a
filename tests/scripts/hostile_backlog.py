"""Launching faster than the GPU runs, with the worker's queue bounds and batches in flight shrunk, while another
thread compiles: the most the queue and the batches in flight held, the throttle count, and whether every launch ran
exactly once (tests/test_hostile.py). ``SPIN_GRIDS``: the grid of a launch of a few seconds, queued first."""

import json
import os
import threading

import numpy as np
from _reliability import AFFINE, FILL, SPIN, SPIN_INNER
from isolated import report

import vkbackend
from vkbackend import worker

result = {}
worker.MAX_IN_FLIGHT = 2
dev = vkbackend.devices(vkbackend.VulkanConfig(window_launches=256))[0]
dev._worker.queue_high, dev._worker.queue_low = 3000, 1000  # small bounds, to see them hold
pool = dev.memory_pool
prog = dev.compile(vkbackend.compile_glsl(AFFINE))
buf = pool.allocate(4 * 4096)
pool.host_to_pool(np.zeros(4096, np.uint32), buf)
spin, busy = dev.compile(vkbackend.compile_glsl(SPIN)), pool.allocate(1024)
dev.sync()
stop = threading.Event()


def compile_meanwhile():
    """Compile and release kernels until told to stop: one thread launches in a loop while another compiles."""
    i = 0
    while not stop.is_set():
        source = FILL.replace("base + i * step", f"base + i * step + {i}u")
        dev.release_program(dev.compile(vkbackend.compile_glsl(source)))
        i += 1


compiler = threading.Thread(target=compile_meanwhile)
compiler.start()
most_queued = most_in_flight = 0
n = 60000
dev.launch(spin, [busy], [SPIN_INNER], json.loads(os.environ["SPIN_GRIDS"])[0])  # the GPU is busy: the queue grows
for i in range(n):
    dev.launch(prog, [buf], [4096, 1, 1], (64, 1, 1))
    most_queued = max(most_queued, len(dev._worker.queue))
    most_in_flight = max(most_in_flight, dev._submitter.in_flight)
stop.set()
compiler.join()
out = np.empty(4096, np.uint32)
pool.pool_to_host(buf, out)
result.update(
    most_queued=most_queued,
    most_in_flight=most_in_flight,
    throttled=dev.stats()["throttled"],
    exact=bool((out == n).all()),
    launches=n,
)
dev.close()
report(result)
