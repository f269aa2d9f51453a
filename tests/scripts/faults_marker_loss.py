"""A device lost while a sync point waits on the completion marker of a batch that signals no fence: the wait asks
the loss probe (csrc/marker.c), so the sync raises DeviceLost rather than returning once the kernel is done
(tests/test_faults.py). ``SPIN_GRIDS``: the grid of one launch of about half a second."""

import json
import os

from _reliability import SPIN, SPIN_INNER
from isolated import outcome, report

import vkbackend
from vkbackend import testing
from vkbackend._ffi import success_counts

result = {}
dev = vkbackend.devices()[0]
prog = dev.compile(vkbackend.compile_glsl(SPIN))
buf = dev.memory_pool.allocate(1024)
dev.launch(prog, [buf], [SPIN_INNER], (1, 1, 1))
dev.sync()
calls = success_counts()
testing.inject("vkGetFenceStatus", "VK_ERROR_DEVICE_LOST")
dev.launch(prog, [buf], [SPIN_INNER], json.loads(os.environ["SPIN_GRIDS"])[0])
result["sync"] = outcome(dev.sync)[0]
result["fired"] = not testing.pending()
testing.clear()
after = success_counts()
result["fence_resets"] = after["vkResetFences"] - calls["vkResetFences"]  # no batch signalled its fence
result["close"] = outcome(dev.close)[0]
result["live_end"] = testing.live_objects()
report(result)
