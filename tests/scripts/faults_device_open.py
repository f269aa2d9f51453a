"""Faults while a device opens: for each, what devices() raised, whether the fault fired, whether anything was left
behind (Vulkan objects, an open device, a thread); then a device that opens and works, and a close() that goes on
through a lost device (tests/test_faults.py). Arguments: pairs of a Vulkan function and the VkResult it fails with."""

import sys
import threading

from isolated import outcome, report, round_trip

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
result["works"] = round_trip(dev)
testing.inject("vkDeviceWaitIdle", "VK_ERROR_DEVICE_LOST")  # close() goes on regardless
result["close"] = outcome(dev.close)[0]
result["live_end"] = testing.live_objects()
report(result)
