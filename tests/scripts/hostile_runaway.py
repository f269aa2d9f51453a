"""A kernel that runs far past the sync deadline: the sync, then close() ("close") or the interpreter's exit alone
("exit"), the argument (tests/test_hostile.py). ``SPIN_GRIDS``: the grid of the runaway launch;
``VKBACKEND_SYNC_TIMEOUT_S``: the deadline. The line EXIT_HANDLERS_DONE on stderr stamps the end of the exit
handlers (CLOCK_MONOTONIC, the same clock in every process)."""

import atexit
import json
import os
import sys
import time

from _reliability import SPIN, SPIN_INNER
from isolated import outcome, report

import vkbackend
from vkbackend import testing

close = sys.argv[1] == "close"
# Registered before the first device opens, so it runs after vkbackend's exit handler (atexit runs last-in first-out):
# the moment the interpreter's own exit work was done.
atexit.register(lambda: print(f"EXIT_HANDLERS_DONE {time.monotonic()}", file=sys.stderr, flush=True))
result = {}
dev = vkbackend.devices()[0]
pool = dev.memory_pool
spin = dev.compile(vkbackend.compile_glsl(SPIN))
buf = pool.allocate(4096)
dev.launch(spin, [buf], [SPIN_INNER], json.loads(os.environ["SPIN_GRIDS"])[0])
result["sync"] = outcome(dev.sync)
if close:
    result["close"] = outcome(dev.close)
    result["abandoned"] = testing.abandoned(dev)
report(result)
