"""Uploads with direct access as the environment sets it (tests/test_memory.py): the copies each upload queued, and
what the buffer holds after an upload while the device was quiet, one behind a launch still queued, one into a view,
one of 12 MiB into a block (copied by several threads), and one into a buffer past DIRECT_WRITE_MAX, which has memory
of its own."""

import numpy as np
from _reliability import groups, quiet_within, worker_held
from isolated import affine_scene, report

from vkbackend.memory.pool import DIRECT_WRITE_MAX, SUBALLOC_MAX
from vkbackend.memory.transfers import part_sizes

result = {}
dev, pool, prog, buf, x = affine_scene()
result["mapped"] = pool.memory.chunk_type is not None
got = np.empty(256, np.uint32)


def copies_of(upload) -> int:
    """The copy commands ``upload()``, made once the device is quiet, queued (counted as they are submitted: by the
    sync point after it)."""
    result["quiet_before_each"] = result.get("quiet_before_each", True) and quiet_within(dev, 10)
    before = dev.stats()["copies"]
    upload()
    dev.sync()
    return dev.stats()["copies"] - before


dev.sync()
result["quiet_copies"] = copies_of(lambda: pool.host_to_pool(x, buf))
pool.pool_to_host(buf, got)
result["quiet_right"] = bool((got == x).all())

copies = dev.stats()["copies"]
with worker_held(dev):  # the launch stays queued: the upload must go behind it, not into memory the launch then reads
    dev.launch(prog, [buf], [256, 3, 1], groups(256))
    pool.host_to_pool(np.full(4, 7, np.uint32), buf, 16)
dev.sync()
result["queued_copies"] = dev.stats()["copies"] - copies
want = x * 3 + 1
want[4:8] = 7
pool.pool_to_host(buf, got)
result["queued_right"] = bool((got == want).all())

view = pool.view(buf, 256, 256)
result["view_copies"] = copies_of(lambda: pool.host_to_pool(np.arange(4, dtype=np.uint32) + 100, view, 8))
want[66:70] = np.arange(4) + 100
pool.pool_to_host(buf, got)
result["view_right"] = bool((got == want).all())

block = pool.allocate(12 << 20)
data = np.random.default_rng(3).integers(0, 1 << 32, 3 << 20, dtype=np.uint32)
result["block_copies"] = copies_of(lambda: pool.host_to_pool(data, block))
result["block_parts"] = len(part_sizes(data.nbytes, pool.transfers.ring.buffer_bytes))  # its copies through staging
back = np.empty_like(data)
pool.pool_to_host(block, back)
result["block_right"] = bool((back == data).all())
assert DIRECT_WRITE_MAX >= 12 << 20 and SUBALLOC_MAX >= 12 << 20

big = pool.allocate(DIRECT_WRITE_MAX + 4)
words = np.arange((DIRECT_WRITE_MAX + 4) // 4, dtype=np.uint32)
result["over_copies"] = copies_of(lambda: pool.host_to_pool(words, big))
result["over_parts"] = len(part_sizes(words.nbytes, pool.transfers.ring.buffer_bytes))
back = np.empty_like(words)
pool.pool_to_host(big, back)
result["over_right"] = bool((back == words).all())
for b in (view, buf, block, big):
    pool.release(b)
dev.close()
report(result)
