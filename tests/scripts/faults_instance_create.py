"""vkCreateInstance failing once with the result the argument names, before this process has an instance: what
devices() gives then, whether it logged creating the instance without VK_KHR_portability_enumeration, and whether
the next devices() opens a device that works (tests/test_faults.py)."""

import logging
import sys

from isolated import outcome, report, round_trip

import vkbackend
from vkbackend import testing

logged: list[str] = []
handler = logging.Handler(logging.DEBUG)
handler.emit = lambda record: logged.append(record.getMessage())
log = logging.getLogger("vkbackend")
log.addHandler(handler)
log.setLevel(logging.DEBUG)
result = {}
testing.inject("vkCreateInstance", sys.argv[1])
result["first"] = outcome(vkbackend.devices)[0]
result["without_portability"] = any("created without it" in message for message in logged)
result["fired"] = not testing.pending()
testing.clear()
result["then"] = outcome(vkbackend.devices)[0]
dev = vkbackend.devices()[0]
result["works"] = round_trip(dev)
result["close"] = outcome(dev.close)[0]
report(result)
