"""Transfers through 32 MiB staging buffers (a GPU's, where lavapipe's are 8 MiB), so that their parts shrink toward
an upload's end and a download's start (transfers.part_sizes): the copies each queued, and whether every byte
arrived, from and into arrays at odd addresses (tests/test_memory.py)."""

import numpy as np
from isolated import report

import vkbackend
from vkbackend.memory.transfers import part_sizes

STAGING = 32 << 20
result = {}
dev = vkbackend.devices(vkbackend.VulkanConfig(staging_buffer_bytes=STAGING))[0]
pool = dev.memory_pool
result["staging"] = pool.transfers.ring.buffer_bytes
nbytes = 2 * STAGING + (1 << 20) + 61
data = np.random.default_rng(5).integers(0, 256, nbytes + 3, np.uint8)
out = np.zeros(nbytes + 5, np.uint8)
buf = pool.allocate(nbytes)
result["parts"] = len(part_sizes(nbytes, STAGING))
before = dev.stats()["copies"]
pool.host_to_pool(data[3:], buf)
dev.sync()
result["upload_copies"] = dev.stats()["copies"] - before
before = dev.stats()["copies"]
pool.pool_to_host(buf, out[5:])
result["download_copies"] = dev.stats()["copies"] - before
result["right"] = bool(np.array_equal(out[5:], data[3:])) and not out[:5].any()
pool.release(buf)
dev.close()
report(result)
