"""A fence that cannot be reset, and the launches after it (tests/test_faults.py)."""

import time

import numpy as np
from _reliability import groups
from isolated import affine_scene, outcome, report

from vkbackend import testing

result = {}
dev, pool, prog, buf, x = affine_scene()
pool.host_to_pool(x, buf)
dev.sync()
testing.inject("vkResetFences", "VK_ERROR_OUT_OF_DEVICE_MEMORY")
launched, first = 0, "ok"
for _ in range(64):  # most batches signal no fence (vkbackend/submit.py): until one that does has been reset
    dev.launch(prog, [buf], [256, 1, 1], groups(256))
    launched += 1
    first = outcome(dev.sync)[0]
    if first != "ok":
        break
result["fired"] = not testing.pending()
result["first"] = first
for _ in range(20):
    dev.launch(prog, [buf], [256, 1, 1], groups(256))
    launched += 1
    time.sleep(0.001)
out = np.empty(256, np.uint32)
result["read"] = outcome(pool.pool_to_host, buf, out)[0]
result["ok"] = bool((out == x + launched).all())
result["close"] = outcome(dev.close)[0]
result["live_end"] = testing.live_objects()
report(result)
