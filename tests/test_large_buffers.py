"""Large buffers.

Past maxStorageBufferRange, kernels reach buffers by device address (GLSL buffer_reference members of the push
constants), with the launch taking the buffers themselves, so their accesses are ordered like bound ones.

Past the largest allocation (maxMemoryAllocationSize, or the cap VKBACKEND_MAX_ALLOCATION_BYTES sets), a buffer is one
sparse VkBuffer bound to several allocations where the device has sparse binding, and refused with an error saying
what to do elsewhere. lavapipe has no sparse binding and a large allocation limit: the cap, in a child process, is how
it covers the refusal. The tests of sparse buffers skip, saying why, where the device has no sparse binding or too
little free memory; on a GPU that has it (an H200) they run in child processes, a 1 GiB buffer bound to allocations
of 256 MiB and a 5 GiB one past the device's own limit::

    python3 -m pytest -q -p no:cacheprovider -rs tests/test_large_buffers.py
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from _reliability import run_isolated

from vkbackend import ErrorStatus
from vkbackend.errors import BackendError

MiB, GiB = 1 << 20, 1 << 30
PROBE_KERNEL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kernels", "probe_address.comp")


def need_past_the_range(info, extra: int) -> None:
    """Skip, saying why, where no buffer can be ``extra`` bytes past the storage range: a device whose largest
    allocation is the range itself (an H200: both 4 GiB) has no buffer that needs an address to be reached."""
    if info.max_storage_buffer_range + extra > info.max_memory_allocation_size:
        pytest.skip(
            f"{info.name}: the largest allocation ({info.max_memory_allocation_size} B) is not past "
            f"maxStorageBufferRange ({info.max_storage_buffer_range} B) by {extra} B, so no buffer is"
        )


@pytest.fixture
def addressed(device, kernel):
    if not device.info.buffer_device_address:
        pytest.skip(f"{device.info.name} has no buffer device addresses (bufferDeviceAddress)")
    return kernel("axpy_address")


def test_reflection_finds_the_address_members(device, addressed):
    info = device.program_info(addressed)
    assert [(a.name, a.offset, a.readable, a.writable) for a in info.addresses] == [
        ("src", 0, True, False),
        ("dst", 16, True, True),
    ]
    assert [m.name for m in info.push_constants] == ["a", "first", "n"]
    assert info.buffers == ()


def test_a_kernel_reaches_the_last_element_of_a_buffer_past_the_storage_range(device, pool, addressed):
    limit = device.info.max_storage_buffer_range
    n = limit // 4 + 4096  # past the range by 16 KiB
    need_past_the_range(device.info, 4 * n - limit)
    x = np.arange(n, dtype=np.float32) % 1000
    xb, yb = pool.allocate(4 * n), pool.allocate(4 * n)
    pool.host_to_pool(x, xb)
    pool.host_to_pool(np.ones(n, dtype=np.float32), yb)
    per_launch = 65535 * 256
    for first in range(0, n, per_launch):  # two launches: the second depends on nothing, the third on the first
        device.launch(addressed, [xb, yb], [2.0, first, n], (min(65535, -(-(n - first) // 256)), 1, 1))
    device.launch(addressed, [xb, yb], [1.0, n - 8, n], (1, 1, 1))  # the tail again: a write after write
    out = np.empty(n, dtype=np.float32)
    pool.pool_to_host(yb, out)
    expected = 2 * x + 1
    expected[-8:] += x[-8:]
    np.testing.assert_array_equal(out, expected)
    assert out[-1] == expected[-1]
    for buf in (xb, yb):
        pool.release(buf)


def test_a_buffer_past_the_range_cannot_be_bound_and_says_how_to_reach_it(device, pool, kernel):
    need_past_the_range(device.info, 256)
    big = pool.allocate(device.info.max_storage_buffer_range + 256)
    fill = kernel("fill")
    with pytest.raises(BackendError) as error:
        device.launch(fill, [big], [1.0, 16], (1, 1, 1))
    assert error.value.status is ErrorStatus.InvalidArgument and "device address" in error.value.context
    pool.release(big)


def test_address_members_take_live_buffers_in_order(device, pool, addressed):
    a, b = pool.allocate(1024), pool.allocate(1024)
    with pytest.raises(BackendError, match="takes 2 buffers .*by address: src, dst"):
        device.launch(addressed, [a], [1.0, 0, 256], (1, 1, 1))
    pool.release(b)
    with pytest.raises(BackendError, match="not a live buffer"):
        device.launch(addressed, [a, b], [1.0, 0, 256], (1, 1, 1))
    assert pool.address(a) % 4 == 0 and pool.address(a) != 0
    view = pool.view(a, device.info.min_storage_buffer_offset_alignment, 256)
    assert pool.address(view) == pool.address(a) + device.info.min_storage_buffer_offset_alignment
    pool.release(view)
    pool.release(a)


def test_accesses_by_address_are_ordered_like_bound_ones(device, pool, addressed):
    """The recorder orders buffers reached by address from the launch's buffer list: a barrier before a launch that
    depends on an earlier one, none between independent ones."""
    bufs = [pool.allocate(4096) for _ in range(4)]
    for b in bufs:
        pool.host_to_pool(np.ones(1024, dtype=np.float32), b)
    x1, y1, x2, y2 = bufs
    device.sync()
    before = device.stats()["barriers"]
    device.launch(addressed, [x1, y1], [1.0, 0, 1024], (4, 1, 1))  # after the uploads: one barrier
    device.launch(addressed, [x2, y2], [1.0, 0, 1024], (4, 1, 1))  # independent of the first: none
    device.launch(addressed, [x1, y1], [1.0, 0, 1024], (4, 1, 1))  # writes what the first wrote: one
    device.sync()
    assert device.stats()["barriers"] - before == 2
    out = np.empty(1024, dtype=np.float32)
    pool.pool_to_host(y1, out)
    assert (out == 3).all()
    for b in bufs:
        pool.release(b)


# ----- buffers past the largest allocation --------------------------------------------------------------------------
CAPPED = """
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
result["above_the_device"] = [vkbackend.devices(huge)[0].memory_pool.allocation_limit,
                              vkbackend.devices()[0].info.max_memory_allocation_size]
"""


def test_past_the_allocation_cap_a_device_without_sparse_binding_says_what_to_do(device):
    """With the cap at 64 MiB, a device without sparse binding (lavapipe) refuses a larger buffer with an error naming
    the limit, the size asked for and what to do, and changes nothing; buffers up to the cap work, and the pool's
    statistics count them. A VulkanConfig's cap wins over the variable; a cap above the device's limit is the
    device's."""
    if device.info.sparse_binding:
        pytest.skip(
            f"{device.info.name} has sparse binding, so a buffer past the cap is made: "
            "test_a_sparse_buffer_bound_to_allocations_of_the_cap covers it"
        )
    cap = 64 * MiB
    result = run_isolated(CAPPED, timeout=120, env={"VKBACKEND_MAX_ALLOCATION_BYTES": str(cap)})
    assert result["limit"] == cap
    status, message = result["past"]
    assert status == "MemoryAllocation"
    for part in (str(cap + 4096), str(cap), "VKBACKEND_MAX_ALLOCATION_BYTES", "no sparse binding", "split the data"):
        assert part in message, (part, message)
    assert result["refused_unchanged"]
    made = result["made"]
    assert made["live_buffers"] == 3
    assert made["memory_objects"] == 2 + made["chunks"]  # the two dedicated buffers, and a chunk for the block
    assert made["held_bytes"] >= cap + cap // 2 + made["chunks"] * result["chunk_bytes"]
    assert result["chunk_bytes"] <= cap
    assert result["round_trip"]
    released = result["released"]
    assert released["live_buffers"] == 0 and released["memory_objects"] == released["chunks"]
    assert result["config_wins"] == cap // 2
    assert result["above_the_device"][0] == result["above_the_device"][1]
    assert result["validation"] == ""


SPARSE = """
from vkbackend import testing
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
probes = sorted({0, 1, n - 2} | {k * words + d for k in range(1, nbytes // limit + 1) for d in (-1, 0)
                                 if 0 < k * words + d < n - 1})
at, found = pool.allocate(8 * len(probes)), pool.allocate(4 * len(probes))
pool.host_to_pool(np.array(probes, dtype=np.uint64), at)
mark = 0xC0FFEE
dev.launch(probe, [big, at, found], [len(probes), mark, n - 1], (1, 1, 1))
values = np.empty(len(probes), dtype=np.uint32)
pool.pool_to_host(found, values)
expected = np.array(probes, dtype=np.uint64).astype(np.uint32)  # the pattern's words: their index, modulo 2^32
result["probes"] = len(probes)
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
result["view_copied"] = bool(np.array_equal(window, pattern[start // 4:start // 4 + 2048]))

if os.environ.get("COPY_WHOLE") == "1":   # a copy between two sparse buffers
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
pool.trim()   # the chunk the small buffers were blocks of
result["released"] = {k: v - before[k] for k, v in pool.stats().items()}
"""


def run_sparse(device, nbytes: int, cap: int | None, timeout: float) -> dict:
    """Run SPARSE in a child process for a buffer of ``nbytes`` with the allocation cap ``cap`` (None: the device's
    limit), after skipping, saying why, where the device cannot hold it."""
    info = device.info
    if not info.sparse_binding:
        pytest.skip(
            f"{info.name} has no sparse binding (sparseBinding on its compute queue): buffers past the largest "
            "allocation are refused there (test_past_the_allocation_cap_a_device_without_sparse_binding...)"
        )
    if not info.buffer_device_address:
        pytest.skip(f"{info.name} has no buffer device addresses, which the probe kernel uses")
    free = device.memory_pool.free_bytes
    if free < nbytes + nbytes // 4 + GiB:
        pytest.skip(f"{info.name} has {free} bytes of device memory free; a {nbytes}-byte buffer needs more")
    env = {
        "LARGE_BYTES": str(nbytes),
        "PROBE_KERNEL": PROBE_KERNEL,
        "VKBACKEND_MAX_ALLOCATION_BYTES": str(cap or ""),
        "COPY_WHOLE": "1" if 2 * nbytes + GiB <= free else "0",
    }
    return run_isolated(SPARSE, timeout=timeout, env=env)


def check_sparse(result: dict, nbytes: int, pieces: int) -> None:
    """What SPARSE found for a buffer of ``nbytes`` bound to ``pieces`` allocations."""
    assert result["failed_bind"] == ["MemoryAllocation", True]
    assert result["failed_bind_left"] == {"live_buffers": 0, "memory_objects": 0, "held_bytes": 0, "chunks": 0}
    made = result["made"]
    assert made["live_buffers"] == 1  # one buffer, however many allocations
    assert made["memory_objects"] == pieces  # (the chunks made before are reused: no new one)
    assert made["held_bytes"] >= nbytes
    assert result["probes"] >= 3 + 2 * (pieces - 1)
    checks = {k: result.get(k) for k in ("probes_read", "last_word", "rest_intact", "view_copied", "whole_copied")}
    assert all(v is not False for v in checks.values()) and None not in list(checks.values())[:4], {
        **checks,
        **result["detail"],
    }
    assert result["released"] == {"live_buffers": 0, "memory_objects": 0, "held_bytes": 0, "chunks": 0}
    assert result["validation"] == ""


def test_a_sparse_buffer_bound_to_allocations_of_the_cap(device):
    """With the cap at 256 MiB, a 1 GiB buffer is one sparse buffer bound to four allocations: an upload, a kernel
    that reads words of each allocation and writes the last word, a download, a view across a boundary, copies, and
    its release, after which the pool holds what it held before. A failed bind leaves nothing behind."""
    nbytes, cap = GiB, 256 * MiB
    check_sparse(run_sparse(device, nbytes, cap, timeout=300), nbytes, pieces=4)


def test_a_buffer_past_the_devices_allocation_limit(device):
    """A 5 GiB buffer, past the device's own maxMemoryAllocationSize (4 GiB on an H200): the same checks, with no cap.
    Skips where the device has no sparse binding or too little free memory."""
    limit = device.memory_pool.allocation_limit
    nbytes = 5 * GiB
    if nbytes <= limit:
        pytest.skip(f"{device.info.name}'s largest allocation ({limit} bytes) holds {nbytes} bytes: not past it")
    check_sparse(run_sparse(device, nbytes, None, timeout=600), nbytes, pieces=-(-nbytes // limit))


def test_a_sparse_buffer_is_cut_into_pieces_as_large_as_the_limit_allows():
    """The allocations behind a sparse buffer: as large as the limit allows in whole multiples of the buffer's
    alignment (sparse binds of a buffer must be), the last one the rest; a limit under the alignment says what to do."""
    from vkbackend.memory.sparse import piece_sizes

    align = 64 << 10
    assert piece_sizes(GiB, align, 256 * MiB) == [256 * MiB] * 4
    assert piece_sizes(5 * GiB, align, 0xFFE00000) == [0xFFE00000, 5 * GiB - 0xFFE00000]  # an H200's limit
    assert piece_sizes(GiB, align, 300 * MiB + 1000) == [300 * MiB] * 3 + [GiB - 900 * MiB]
    with pytest.raises(BackendError, match="smaller than a sparse buffer's alignment"):
        piece_sizes(GiB, align, align - 1)


def test_a_sparse_bind_hands_the_driver_every_piece_at_its_offset():
    """What vkQueueBindSparse is given, checked on any device (a driver stand-in records it): one bind of the buffer,
    each piece at the offset where the one before ends, the structs alive through a garbage collection."""
    import gc
    from types import SimpleNamespace

    from vkbackend._ffi import ffi, lib
    from vkbackend.memory.sparse import LargeBuffer, bind

    seen: dict = {}

    class Driver:
        def __getattr__(self, name):
            return getattr(lib, name)

        def vkCreateFence(self, device, info, allocator, out):
            seen["fence"] = info.sType
            out[0] = ffi.cast("VkFence", 7)
            return 0

        def vkQueueBindSparse(self, queue, count, info, fence):
            gc.collect()
            buffer_bind = info.pBufferBinds[0]
            binds = [buffer_bind.pBinds[i] for i in range(buffer_bind.bindCount)]
            seen["bind"] = (info.sType, info.bufferBindCount, int(ffi.cast("uintptr_t", buffer_bind.buffer)))
            seen["pieces"] = [
                (b.resourceOffset, b.size, int(ffi.cast("uintptr_t", b.memory)), b.memoryOffset) for b in binds
            ]
            return 0

        def vkWaitForFences(self, device, count, fences, wait_all, timeout):
            return 0

        def vkDestroyFence(self, device, fence, allocator):
            seen["destroyed"] = int(ffi.cast("uintptr_t", fence))

    ctx = SimpleNamespace(
        ffi=ffi,
        lib=Driver(),
        device=ffi.NULL,
        handles=SimpleNamespace(queue=ffi.NULL),
        sync_timeout_ns=10**9,
        sync_timeout_s=1.0,
    )
    large = LargeBuffer(ffi.cast("VkBuffer", 0x99), 600, 640, 64)
    for handle, size in [(0x10, 256), (0x20, 256), (0x30, 128)]:
        large.pieces.append(ffi.cast("VkDeviceMemory", handle))
        large.piece_sizes.append(size)
    bind(SimpleNamespace(ctx=ctx, address=lambda buffer: 0), large)
    assert seen["fence"] == lib.VK_STRUCTURE_TYPE_FENCE_CREATE_INFO
    assert seen["bind"] == (lib.VK_STRUCTURE_TYPE_BIND_SPARSE_INFO, 1, 0x99)
    assert seen["pieces"] == [(0, 256, 0x10, 0), (256, 256, 0x20, 0), (512, 128, 0x30, 0)]
    assert seen["destroyed"] == 7 and not large.pending
