"""The interpreter exits while a daemon thread is inside host_to_pool (tests/test_hostile.py: how the process ends is
the point)."""

import threading
import time

import numpy as np
from isolated import report

import vkbackend
from vkbackend.errors import BackendError

dev = vkbackend.devices()[0]
pool = dev.memory_pool
buf = pool.allocate(32 << 20)
data = np.ones(8 << 20, np.uint32)
started = threading.Event()


def upload_forever():
    """Upload until the device goes away under it."""
    try:
        while True:
            pool.host_to_pool(data, buf)
            started.set()
    except BackendError:
        pass


threading.Thread(target=upload_forever, daemon=True).start()
started.wait(20)
time.sleep(0.05)
report({})
