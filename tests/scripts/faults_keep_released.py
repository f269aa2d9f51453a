"""A buffer released while a running batch uses it, and the submit of the next window fails: the buffer must outlive
the running batch (tests/test_faults.py). ``SPIN_GRIDS``: the grid of a launch of about half a second."""

import json
import os
import time

import numpy as np
from _reliability import AFFINE, SPIN, SPIN_INNER, groups
from isolated import outcome, report

import vkbackend
from vkbackend import testing

result = {}
dev = vkbackend.devices()[0]
pool = dev.memory_pool
spin, affine = dev.compile(vkbackend.compile_glsl(SPIN)), dev.compile(vkbackend.compile_glsl(AFFINE))
busy = pool.allocate(17 << 20)  # its own memory: freeing it early is a vkFreeMemory in use
other = pool.allocate(1024)
pool.host_to_pool(np.zeros(256, np.uint32), busy)
dev.sync()
before = dev.stats()["batches"]
dev.launch(spin, [busy], [SPIN_INNER], json.loads(os.environ["SPIN_GRIDS"])[0])  # about half a second
deadline = time.monotonic() + 10
while dev.stats()["batches"] == before and time.monotonic() < deadline:  # until the worker has submitted it
    time.sleep(0.001)
dev.launch(affine, [other], [256, 1, 1], groups(256))  # waits in the window behind the running batch
pool.release(busy)  # its free waits for the GPU
testing.inject("vkQueueSubmit", "VK_ERROR_OUT_OF_HOST_MEMORY")  # ... and the window it waits with fails
result["sync"] = outcome(dev.sync)[0]
pool.release(other)
result["after"] = outcome(dev.sync)[0]
dev.close()
result["live_end"] = testing.live_objects()
report(result)
