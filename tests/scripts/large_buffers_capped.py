"""Buffers up to and past the allocation cap ``VKBACKEND_MAX_ALLOCATION_BYTES`` on a device without sparse binding,
and the cap a VulkanConfig sets, or one above the device's limit (tests/test_large_buffers.py)."""

import os

import numpy as np
from isolated import report

import vkbackend
from vkbackend.errors import BackendError

result = {}
dev = vkbackend.devices()[0]
pool = dev.memory_pool
cap = int(os.environ["VKBACKEND_MAX_ALLOCATION_BYTES"])
result["limit"] = pool.allocation_limit
before = pool.stats()
try:
    pool.allocate(cap + 4096)
    result["past"] = "made"
except BackendError as error:
    result["past"] = [error.status.value, error.context]
result["refused_unchanged"] = pool.stats() == before
at_cap, dedicated, block = pool.allocate(cap), pool.allocate(cap // 2), pool.allocate(4096)
made = pool.stats()
result["made"] = {k: made[k] - before[k] for k in made}
result["chunk_bytes"] = pool.chunk_bytes
pattern = np.arange(cap // 4, dtype=np.uint32)
pool.host_to_pool(pattern, at_cap)
out = np.empty_like(pattern)
pool.pool_to_host(at_cap, out)
result["round_trip"] = bool(np.array_equal(out, pattern))
for buf in (at_cap, dedicated, block):
    pool.release(buf)
dev.sync()
after = pool.stats()
result["released"] = {k: after[k] - before[k] for k in after}
dev.close()
halved = vkbackend.VulkanConfig(max_allocation_bytes=cap // 2)
result["config_wins"] = vkbackend.devices(halved)[0].memory_pool.allocation_limit
vkbackend.devices()[0].close()
huge = vkbackend.VulkanConfig(max_allocation_bytes=1 << 62)
result["above_the_device"] = [
    vkbackend.devices(huge)[0].memory_pool.allocation_limit,
    vkbackend.devices()[0].info.max_memory_allocation_size,
]
report(result)
