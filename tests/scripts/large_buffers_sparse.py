"""A sparse buffer of ``LARGE_BYTES`` bytes past the allocation limit (the cap ``VKBACKEND_MAX_ALLOCATION_BYTES``,
or the device's): a bind that fails, the buffer's pieces, words on either side of each boundary read by the kernel
``PROBE_KERNEL``, a view across a boundary, copies (of the whole buffer too where ``COPY_WHOLE=1``) and its release
(tests/test_large_buffers.py)."""

import os

import numpy as np
from isolated import report

import vkbackend
from vkbackend import testing
from vkbackend.errors import BackendError

result = {}
nbytes = int(os.environ["LARGE_BYTES"])
dev = vkbackend.devices()[0]
pool = dev.memory_pool
limit = pool.allocation_limit
with open(os.environ["PROBE_KERNEL"]) as f:
    probe = dev.compile(vkbackend.compile_glsl(f.read()))
dev.sync()
before = pool.stats()

# A bind that fails leaves nothing behind.
testing.inject("vkQueueBindSparse", "VK_ERROR_OUT_OF_DEVICE_MEMORY")
try:
    pool.allocate(nbytes)
    result["failed_bind"] = "made"
except BackendError as error:
    result["failed_bind"] = [error.status.value, "vkQueueBindSparse" in error.context]
finally:
    testing.clear()
dev.sync()
result["failed_bind_left"] = {k: v - before[k] for k, v in pool.stats().items()}

big = pool.allocate(nbytes)
made = pool.stats()
result["made"] = {k: made[k] - before[k] for k in made}
n = nbytes // 4
pattern = np.arange(n, dtype=np.uint32)
pool.host_to_pool(pattern, big)

# Words on either side of each boundary between allocations, and at both ends (not the last word, which the kernel
# writes).
words = limit // 4
probes = sorted(
    {0, 1, n - 2} | {k * words + d for k in range(1, nbytes // limit + 1) for d in (-1, 0) if 0 < k * words + d < n - 1}
)
at, found = pool.allocate(8 * len(probes)), pool.allocate(4 * len(probes))
pool.host_to_pool(np.array(probes, dtype=np.uint64), at)
mark = 0xC0FFEE
dev.launch(probe, [big, at, found], [len(probes), mark, n - 1], (1, 1, 1))
values = np.empty(len(probes), dtype=np.uint32)
pool.pool_to_host(found, values)
result["probes"] = len(probes)
expected = np.array(probes, dtype=np.uint64).astype(np.uint32)  # the pattern's words: their index, modulo 2^32
result["probes_read"] = bool(np.array_equal(values, expected))
wrong = [(p, int(v)) for p, v, e in zip(probes, values, expected) if e != v][:6]
detail = result["detail"] = {"limit": limit, "wrong_probes": wrong}

out = np.empty_like(pattern)
pool.pool_to_host(big, out)
result["last_word"] = int(out[-1]) == mark
result["rest_intact"] = bool(np.array_equal(out[:-1], pattern[:-1]))
bad = np.flatnonzero(out[:-1] != pattern[:-1])
detail["wrong_words"] = [int(bad.size), *(int(i) for i in bad[:3])]
del bad
del out

# A view across the first boundary, and a copy of it into a small buffer.
align = dev.info.min_storage_buffer_offset_alignment
start = (limit - 4096) // align * align
view = pool.view(big, start, 8192)
small = pool.allocate(8192)
pool.pool_to_pool(pool, view, small)
window = np.empty(2048, dtype=np.uint32)
pool.pool_to_host(small, window)
result["view_copied"] = bool(np.array_equal(window, pattern[start // 4 : start // 4 + 2048]))

if os.environ.get("COPY_WHOLE") == "1":  # a copy between two sparse buffers
    other = pool.allocate(nbytes)
    pool.pool_to_pool(pool, big, other)
    out = np.empty_like(pattern)
    pool.pool_to_host(other, out)
    result["whole_copied"] = bool(out[-1] == mark and np.array_equal(out[:-1], pattern[:-1]))
    del out
    pool.release(other)

for buf in (view, big, at, found, small):
    pool.release(buf)
dev.sync()
pool.trim()  # the chunk the small buffers were blocks of
result["released"] = {k: v - before[k] for k, v in pool.stats().items()}
report(result)
