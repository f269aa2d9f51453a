"""Ctrl-C (a SIGALRM handler raising KeyboardInterrupt) at random moments inside uploads, read-backs, allocations and
releases, until 80 have landed; then what the staging ring, the transfers and the pool hold (tests/test_hostile.py).
"""

import random
import signal

import numpy as np
from isolated import report

import vkbackend
import vkbackend.memory.pool
from vkbackend import testing

vkbackend.memory.pool.DIRECT_WRITE_MAX = 0  # the uploads go through staging, whose leases the interrupts must not lose


def interrupt(signum, frame):
    """The SIGALRM handler: an interrupt where the timer found the main thread."""
    raise KeyboardInterrupt


result = {}
signal.signal(signal.SIGALRM, interrupt)
cfg = vkbackend.VulkanConfig(staging_buffers=3, staging_buffer_bytes=1 << 16)
dev = vkbackend.devices(cfg)[0]
pool = dev.memory_pool
ring = pool.transfers.ring
buf = pool.allocate(4 << 20)
data = np.arange(1 << 20, dtype=np.uint32)
out = np.empty(1 << 20, np.uint32)
rng = random.Random(5)
ops = [
    lambda: pool.host_to_pool(data, buf),
    lambda: pool.pool_to_host(buf, out),
    lambda: pool.release(pool.allocate(rng.choice([256, 4096, 20 << 20]))),
]
landed = 0
for i in range(2400):  # until 80 interrupts have landed: how many of 240 land varied from 44 to 103 with the load
    if landed >= 80:
        break
    try:
        signal.setitimer(signal.ITIMER_REAL, rng.uniform(0.0002, 0.02))
        ops[i % 3]()
        signal.setitimer(signal.ITIMER_REAL, 0)
    except KeyboardInterrupt:
        landed += 1
signal.setitimer(signal.ITIMER_REAL, 0)
dev.sync()  # after it, the give-backs that interrupted transfers deferred have run
result["landed"] = landed
result["staging_free"] = [len(ring.free), ring.count]
result["transfers"] = pool.transfers.active
pool.host_to_pool(data, buf)
pool.pool_to_host(buf, out)
result["data_ok"] = bool((out == data).all())
for b in list(pool.entries):  # buffers whose id an interrupt took from the caller (between allocate and release)
    pool.release(b)
dev.sync()
pool.trim()
result["pool"] = pool.stats()
dev.close()
result["live_end"] = testing.live_objects()
report(result)
