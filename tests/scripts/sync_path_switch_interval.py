"""The interpreter's switch interval while a device is open, after the last close, and after a close when the
program set its own meanwhile (tests/test_sync_path.py; run with ``VKBACKEND_SWITCH_INTERVAL_S``); with the argument
``default``, whether a device opened without that setting leaves it alone."""

import os
import sys

from isolated import report

import vkbackend

result = {}
if sys.argv[1:] == ["default"]:
    os.environ.pop("VKBACKEND_SWITCH_INTERVAL_S", None)
    before = sys.getswitchinterval()
    dev = vkbackend.devices()[0]
    result["left_alone"] = sys.getswitchinterval() == before  # while the device is open
    dev.close()
    report(result)
    sys.exit()
before = sys.getswitchinterval()
dev = vkbackend.devices()[0]
result["open"] = sys.getswitchinterval()
dev.close()
result["restored"] = sys.getswitchinterval() == before
dev = vkbackend.devices()[0]
sys.setswitchinterval(0.001)  # the program's own choice, while a device is open: kept at close
dev.close()
result["kept"] = sys.getswitchinterval()
report(result)
