"""Faults while a device opens: for each, what devices() raised, whether the fault fired, whether anything was left
behind (Vulkan objects, an open device, a thread); then a device that opens and works, and a close() that goes on
through a lost device (tests/test_faults.py). Arguments: pairs of a Vulkan function and the VkResult it fails with."""

import sys
import threading

import numpy as np
from isolated import outcome, report

import vkbackend
from vkbackend import discovery, testing

cases = list(zip(sys.argv[1::2], sys.argv[2::2]))
result = {}
baseline = testing.live_objects()
opened = {}
for function, code in cases:
    testing.inject(function, code)
    status, _ = outcome(vkbackend.devices)
    none_open = not discovery.Instance._current._devices  # the instance's table of open devices: none was listed
    opened[function] = [
        status,
        not testing.pending(),
        testing.live_objects() == baseline,
        none_open,
        threading.active_count(),
    ]
    testing.clear()
result["opened"] = opened
dev = vkbackend.devices()[0]
pool = dev.memory_pool
buf = pool.allocate(1024)
x = np.arange(256, dtype=np.uint32)
pool.host_to_pool(x, buf)
out = np.empty(256, np.uint32)
pool.pool_to_host(buf, out)
result["works"] = bool((out == x).all())
testing.inject("vkDeviceWaitIdle", "VK_ERROR_DEVICE_LOST")  # close() goes on regardless
result["close"] = outcome(dev.close)[0]
result["live_end"] = testing.live_objects()
report(result)
