"""vkCreateInstance failing once with the result the argument names, before this process has an instance: what
devices() gives then, and whether the next devices() opens a device that works (tests/test_faults.py)."""

import sys

from isolated import outcome, report, round_trip

import vkbackend
from vkbackend import testing

result = {}
testing.inject("vkCreateInstance", sys.argv[1])
result["first"] = outcome(vkbackend.devices)[0]
result["fired"] = not testing.pending()
testing.clear()
result["then"] = outcome(vkbackend.devices)[0]
dev = vkbackend.devices()[0]
result["works"] = round_trip(dev)
result["close"] = outcome(dev.close)[0]
report(result)
