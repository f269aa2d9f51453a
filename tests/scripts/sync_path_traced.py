"""Launches, sync points and read-backs, 20 of each, traced to the file ``VKBACKEND_TRACE`` names
(tests/test_sync_path.py)."""

import numpy as np
from _reliability import AFFINE, groups
from isolated import report

import vkbackend

result = {}
prog = vkbackend.compile_glsl(AFFINE)
dev = vkbackend.devices()[0]
p = dev.compile(prog)
pool = dev.memory_pool
buf = pool.allocate(1024)
pool.host_to_pool(np.zeros(256, np.uint32), buf)
out = np.empty(256, np.uint32)
for i in range(20):
    dev.launch(p, [buf], [256, 1, 1], groups(256))
    dev.sync()
    dev.launch(p, [buf], [256, 1, 1], groups(256))
    pool.pool_to_host(buf, out)
result["value"] = int(out[0])
result["calibrated"] = "VK_EXT_calibrated_timestamps" in dev.info.extensions
pool.release(buf)
dev.close()
report(result)
