"""Buffers of a forked parent, closed and dropped in the child, and buffers of a closed device: what the finalizers
did and raised (tests/test_buffer.py)."""

import gc
import os
import sys

import numpy as np
from isolated import report

import vkbackend
from vkbackend import Buffer

result = {}
unraisable = []  # what a finalizer raised: Python only prints it
sys.unraisablehook = lambda failure: unraisable.append(repr(failure.exc_value))
dev = vkbackend.devices()[0]
kept = Buffer.from_numpy(dev, np.arange(64, dtype=np.float32))
dropped, closed = Buffer(dev, 64), Buffer(dev, 64)
pid = os.fork()
if pid == 0:  # the parent's buffers: closing and dropping them does nothing here
    closed.close()
    del dropped
    os._exit(10 + len(unraisable) if closed.closed else 1)
result["fork_exit"] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
result["after_fork"] = dev.memory_pool.stats()["live_buffers"]
dev.close()
closed.close()  # the device freed it when it closed
del dropped
gc.collect()
result["closed"] = closed.closed
result["unraisable"] = unraisable
report(result)
