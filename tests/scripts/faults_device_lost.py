"""A lost device, wherever the loss is seen: the first call that sees it and every later one, close(), and a fresh
device after it (tests/test_faults.py). Arguments: the Vulkan function that reports the loss, and "timed" (the loss
is met by launch_timed) or "sync" (by launches and sync points)."""

import sys
import time

import numpy as np
from _reliability import AFFINE, groups
from isolated import outcome, report

import vkbackend
from vkbackend import testing

function, timed = sys.argv[1], sys.argv[2] == "timed"
result = {}
dev = vkbackend.devices()[0]
pool = dev.memory_pool
spirv = vkbackend.compile_glsl(AFFINE)
prog = dev.compile(spirv)
buf = pool.allocate(1024)
x = np.arange(256, dtype=np.uint32)
pool.host_to_pool(x, buf)
dev.sync()


def launch_twice_and_sync() -> None:
    """Two launches (on a GPU the express lane submits and polls a lone one in C, so the second brings the worker's
    own polls and waits into play), a pause for the worker to poll its fences on its own, a sync point: the loss is
    seen at whichever comes after the worker met it."""
    dev.launch(prog, [buf], [256, 3, 1], groups(256))
    dev.launch(prog, [buf], [256, 3, 1], groups(256))
    time.sleep(0.002)
    dev.sync()


testing.inject(function, "VK_ERROR_DEVICE_LOST")
first = []
for _ in range(200):  # a fence may be polled or waited on: go on until the fault has fired and been reported
    if timed:
        status, _ = outcome(dev.launch_timed, prog, [buf], [256, 3, 1], groups(256))
    else:
        status, _ = outcome(launch_twice_and_sync)
    if status != "ok":
        first.append(status)
        break
result["fired"] = not testing.pending()
testing.clear()
result["first"] = first
out = np.empty(256, np.uint32)
calls = {
    "launch": lambda: dev.launch(prog, [buf], [256, 3, 1], groups(256)),
    "launch_timed": lambda: dev.launch_timed(prog, [buf], [256, 3, 1], groups(256)),
    "sync": dev.sync,
    "compile": lambda: dev.compile(spirv),
    "allocate": lambda: pool.allocate(64),
    "host_to_pool": lambda: pool.host_to_pool(x, buf),
    "pool_to_host": lambda: pool.pool_to_host(buf, out),
    "pool_to_pool": lambda: pool.pool_to_pool(pool, buf, buf),
}
result["later"] = {name: outcome(fn) for name, fn in calls.items()}
result["release"] = outcome(pool.release, buf)[0]
result["close"] = outcome(dev.close)
result["live_after_close"] = testing.live_objects()
dev = vkbackend.devices()[0]  # a fresh device
pool = dev.memory_pool
prog = dev.compile(spirv)
buf = pool.allocate(1024)
pool.host_to_pool(x, buf)
dev.launch(prog, [buf], [256, 3, 1], groups(256))
pool.pool_to_host(buf, out)
result["fresh_ok"] = bool((out == x * 3 + 1).all())
dev.close()
result["live_end"] = testing.live_objects()
report(result)
