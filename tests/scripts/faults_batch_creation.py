"""A batch that cannot be made (its command buffer or its fence), on a fresh device, and the launches after it
(tests/test_faults.py). ``FAULT_FUNCTION``: the Vulkan function that fails."""

import os

import numpy as np
from _reliability import groups
from isolated import affine_scene, outcome, report

import vkbackend.memory.pool
from vkbackend import testing

vkbackend.memory.pool.DIRECT_WRITE_MAX = 0  # the uploads are copies in the batches, not written straight into memory
result = {}
dev, pool, prog, buf, x = affine_scene()
# A fresh device has no spare batch, so its first submission calls both (a later one may reuse a batch)
function = os.environ["FAULT_FUNCTION"]
testing.inject(function, "VK_ERROR_OUT_OF_DEVICE_MEMORY")
pool.host_to_pool(x + 100, buf)
dev.launch(prog, [buf], [256, 1, 1], groups(256))
result["fault"] = [function, outcome(dev.sync)[0], not testing.pending()]
pool.host_to_pool(x, buf)
dev.launch(prog, [buf], [256, 1, 1], groups(256))
got = np.empty(256, np.uint32)
pool.pool_to_host(buf, got)
result["after"] = got.tolist()[:4]
dev.close()
result["live_end"] = testing.live_objects()
report(result)
