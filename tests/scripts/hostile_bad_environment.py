"""Bad VKBACKEND_* settings in the environment: what devices() raises for each and how soon, what is left behind,
and then a good setting that opens a working device (tests/test_hostile.py)."""

import os
import time

import numpy as np
from isolated import report

import vkbackend
from vkbackend import testing
from vkbackend.errors import BackendError

result = {}
bad = [("VKBACKEND_SYNC_TIMEOUT_S", v) for v in ("nan", "inf", "1e400", "0", "-3", "soon")] + [
    ("VKBACKEND_SWITCH_INTERVAL_S", "nan"),
    ("VKBACKEND_ROBUST", "maybe"),
    ("VKBACKEND_PUSH_DESCRIPTORS", "2"),
    ("VKBACKEND_MAX_ALLOCATION_BYTES", "64MiB"),
    ("VKBACKEND_MAX_ALLOCATION_BYTES", "4096"),
]
result["bad"] = []
for name, value in bad:
    os.environ[name] = value
    started = time.monotonic()
    try:
        vkbackend.devices()
        result["bad"].append([name, "opened"])
    except BackendError as error:
        result["bad"].append([name, error.status.value, name in error.context, time.monotonic() - started])
    del os.environ[name]
result["live_after_bad"] = testing.live_objects()
os.environ["VKBACKEND_SYNC_TIMEOUT_S"] = "2.5"
dev = vkbackend.devices()[0]
result["timeout"] = dev._ctx.sync_timeout_s  # the deadline the device resolved when it opened
buf = dev.memory_pool.allocate(64)
dev.memory_pool.host_to_pool(np.ones(16, np.uint32), buf)
out = np.zeros(16, np.uint32)
dev.memory_pool.pool_to_host(buf, out)
result["works"] = int(out.sum())
dev.close()
report(result)
