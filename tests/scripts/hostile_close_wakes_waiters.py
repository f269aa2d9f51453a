"""close() while other threads wait behind GPU work: for a staging buffer, a read-back and a sync; what each waiter
got and how long after the close (tests/test_hostile.py). ``SPIN_GRIDS``: the grid of a launch of a few seconds."""

import json
import os
import threading
import time

import numpy as np
from _reliability import SPIN, SPIN_INNER
from isolated import outcome, report

import vkbackend
from vkbackend.errors import BackendError

result = {}
cfg = vkbackend.VulkanConfig(staging_buffers=2, staging_buffer_bytes=1 << 16)
dev = vkbackend.devices(cfg)[0]
pool = dev.memory_pool
spin = dev.compile(vkbackend.compile_glsl(SPIN))
busy, target = pool.allocate(4096), pool.allocate(1 << 20)
dev.launch(spin, [busy], [SPIN_INNER], json.loads(os.environ["SPIN_GRIDS"])[0])  # GPU work every copy queues behind
errors = {}


def waiter(name, fn, *args):
    """Record what ``fn(*args)`` ends with: "ok", or its status, whether it says closed, and when it came."""
    try:
        fn(*args)
        errors[name] = ["ok"]
    except BackendError as error:
        errors[name] = [error.status.value, "closed" in error.context, time.monotonic()]


threads = [
    threading.Thread(target=waiter, args=a)
    for a in [
        ("upload", pool.host_to_pool, np.ones(1 << 18, np.uint32), target),  # 16 chunks, 2 staging buffers: it waits
        ("read", pool.pool_to_host, target, np.empty(1 << 18, np.uint32)),
        ("sync", dev.sync),
    ]
]
for t in threads:
    t.start()
time.sleep(0.5)
closing = time.monotonic()
result["close"] = outcome(dev.close)
for t in threads:
    t.join(10)
result["waiters"] = {k: v[:2] + [round(v[2] - closing, 3)] if len(v) == 3 else v for k, v in errors.items()}
report(result)
