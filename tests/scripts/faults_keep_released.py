"""A buffer released while a running batch uses it, and the submit of the work queued behind that batch fails: the
buffer must outlive the running batch (tests/test_faults.py). ``SPIN_GRIDS``: the grid of a launch of about half a
second. Its argument: ``window``, the express lane off, so the work behind waits in the worker's window and fails as the
sync point submits it; ``lane``, the lane forced on (a GPU's settings), so the park submits the spin and then fails
to submit the launch behind it."""

import json
import os
import sys
import time

import numpy as np
from _reliability import (
    AFFINE,
    SPIN,
    SPIN_INNER,
    express_lane_armed_within,
    groups,
    lane_served,
    set_express_lane,
    worker_held,
)
from isolated import outcome, report

import vkbackend
from vkbackend import testing

result = {}
lane = sys.argv[1] == "lane"
dev = vkbackend.devices()[0]
set_express_lane(dev, 100_000, 30_000_000_000, lane)
pool = dev.memory_pool
spin, affine = dev.compile(vkbackend.compile_glsl(SPIN)), dev.compile(vkbackend.compile_glsl(AFFINE))
busy = pool.allocate(17 << 20)  # its own memory: freeing it early is a vkFreeMemory in use
other = pool.allocate(1024)
pool.host_to_pool(np.zeros(256, np.uint32), busy)
dev.sync()
if lane and not express_lane_armed_within(dev, 10):
    raise AssertionError("the worker did not arm its express lane")
served = lane_served(dev)
before = dev.stats()["batches"]
dev.launch(spin, [busy], [SPIN_INNER], json.loads(os.environ["SPIN_GRIDS"])[0])  # about half a second
deadline = time.monotonic() + 10
while dev.stats()["batches"] == before and time.monotonic() < deadline:  # until it has been submitted
    time.sleep(0.001)
if lane:  # the park submits the next launch at once: it fails there
    testing.inject("vkQueueSubmit", "VK_ERROR_OUT_OF_HOST_MEMORY")
    dev.launch(affine, [other], [256, 1, 1], groups(256))
    pool.release(busy)  # its free waits for the GPU
else:
    with worker_held(dev):  # the launch and the free go in one window behind the running batch
        dev.launch(affine, [other], [256, 1, 1], groups(256))
        pool.release(busy)  # its free waits for the GPU
        testing.inject("vkQueueSubmit", "VK_ERROR_OUT_OF_HOST_MEMORY")  # ... and the window it waits with fails
result["sync"] = outcome(dev.sync)[0]
result["by_lane"] = lane_served(dev) - served
pool.release(other)
result["after"] = outcome(dev.sync)[0]
dev.close()
result["live_end"] = testing.live_objects()
report(result)
