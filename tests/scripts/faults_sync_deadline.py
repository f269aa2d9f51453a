"""Waits behind kernels that outlive the sync deadline: sync points and read-backs time out, later ones succeed once
the kernel is done, and close() behind a long kernel abandons the device (tests/test_faults.py). ``SPIN_GRIDS``: the
grids of two launches of several seconds; ``VKBACKEND_SYNC_TIMEOUT_S``: the deadline."""

import json
import os
import time

import numpy as np
from _reliability import SPIN, SPIN_INNER
from isolated import outcome, report

import vkbackend
from vkbackend import testing

result = {}
dev = vkbackend.devices()[0]
pool = dev.memory_pool
prog = dev.compile(vkbackend.compile_glsl(SPIN))
buf, spare = pool.allocate(4096), pool.allocate(1024)
x = np.arange(256, dtype=np.uint32)
pool.host_to_pool(np.zeros(1024, np.uint32), buf)
pool.host_to_pool(x, spare)
dev.sync()
out = np.empty(256, np.uint32)
grids = json.loads(os.environ["SPIN_GRIDS"])
dev.launch(prog, [buf], [SPIN_INNER], grids[0])  # seconds: far past the deadline
result["sync"] = outcome(dev.sync)
# more timed-out read-backs than the staging ring has slots: each must give its slot back
result["reads"] = [outcome(pool.pool_to_host, spare, out) for _ in range(len(dev.memory_pool.transfers.ring.free) + 2)]
until = time.monotonic() + 40  # the kernel goes on: sync points time out until it is done, then succeed
while (sync_after := outcome(dev.sync))[0] != "ok" and time.monotonic() < until:
    pass
result["sync_after"] = sync_after
result["read_after"] = outcome(pool.pool_to_host, spare, out)
result["read_ok"] = bool((out == x).all())
dev.launch(prog, [buf], [SPIN_INNER], grids[1])
result["sync2"] = outcome(dev.sync)
result["close"] = outcome(dev.close)  # its own drain times out too: the device is abandoned, not destroyed
result["abandoned"] = testing.abandoned(dev)
report(result)
