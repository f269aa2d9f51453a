"""A descriptor pool that cannot be reset, on a device without push descriptors (run with
``VKBACKEND_PUSH_DESCRIPTORS=0``): the read-back behind it, and the completions of its batch (tests/test_faults.py)."""

import numpy as np
from _reliability import AFFINE, groups
from isolated import outcome, report

import vkbackend
from vkbackend import testing

result = {}
dev = vkbackend.devices()[0]
pool = dev.memory_pool
prog = dev.compile(vkbackend.compile_glsl(AFFINE))
buf = pool.allocate(1024)
pool.host_to_pool(np.zeros(256, np.uint32), buf)
dev.launch(prog, [buf], [256, 1, 1], groups(256))
dev.sync()
testing.inject("vkResetDescriptorPool", "VK_ERROR_OUT_OF_HOST_MEMORY")
dev.launch(prog, [buf], [256, 1, 1], groups(256))
out = np.empty(256, np.uint32)
result["first"] = outcome(pool.pool_to_host, buf, out)
result["fired"] = not testing.pending()
result["second"] = outcome(pool.pool_to_host, buf, out)
result["value"] = int(out[0])
result["staging_free"] = [len(pool.transfers.ring.free), pool.transfers.ring.count]
result["close"] = outcome(dev.close)[0]
result["live_end"] = testing.live_objects()
report(result)
