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
from _reliability import in_one_window, run_isolated

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


def test_a_graph_sets_the_scalars_of_a_kernel_that_reaches_buffers_by_address(device, pool, addressed):
    """The addresses share the push constants with the scalars, so a graph repacks them together."""
    n = 512
    xb, yb = pool.allocate(4 * n), pool.allocate(4 * n)
    pool.host_to_pool(np.arange(n, dtype=np.float32), xb)
    pool.host_to_pool(np.zeros(n, dtype=np.float32), yb)
    with device.graph([(addressed, [xb, yb], [2.0, 0, n], (2, 1, 1))]) as graph:
        graph.launch()
        graph.set_scalars(0, [3.0, 256, n], (1, 1, 1))  # the second half only
        graph.launch()
        out = np.empty(n, dtype=np.float32)
        pool.pool_to_host(yb, out)
    x = np.arange(n, dtype=np.float32)
    np.testing.assert_array_equal(out, np.where(x < 256, 2 * x, 5 * x))
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
    """The recorder orders buffers reached by address from the launch's buffer list: in one window (a graph), a
    barrier before a launch that depends on an earlier one, none between independent ones."""
    bufs = [pool.allocate(4096) for _ in range(4)]
    for b in bufs:
        pool.host_to_pool(np.ones(1024, dtype=np.float32), b)
    x1, y1, x2, y2 = bufs
    device.sync()  # the uploads' window ends: its end orders the launches after it
    before = device.stats()["barriers"]
    launches = [
        (addressed, [x1, y1], [1.0, 0, 1024], (4, 1, 1)),
        (addressed, [x2, y2], [1.0, 0, 1024], (4, 1, 1)),  # independent of the first: none
        (addressed, [x1, y1], [1.0, 0, 1024], (4, 1, 1)),  # writes what the first wrote: one
    ]
    in_one_window(device, launches)
    assert device.stats()["barriers"] - before == 1
    out = np.empty(1024, dtype=np.float32)
    pool.pool_to_host(y1, out)
    assert (out == 3).all()
    for b in bufs:
        pool.release(b)


# ----- buffers past the largest allocation --------------------------------------------------------------------------


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
    result = run_isolated("large_buffers_capped", timeout=120, env={"VKBACKEND_MAX_ALLOCATION_BYTES": str(cap)})
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


def run_sparse(device, nbytes: int, cap: int | None, timeout: float) -> dict:
    """Run tests/scripts/large_buffers_sparse.py in a child process for a buffer of ``nbytes`` with the allocation
    cap ``cap`` (None: the device's limit), after skipping, saying why, where the device cannot hold it."""
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
    return run_isolated("large_buffers_sparse", timeout=timeout, env=env)


def check_sparse(result: dict, nbytes: int, pieces: int) -> None:
    """What tests/scripts/large_buffers_sparse.py found for a buffer of ``nbytes`` bound to ``pieces`` allocations."""
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


@pytest.mark.parametrize("gib", [5, 20])
def test_a_buffer_past_the_devices_allocation_limit(device, gib):
    """Buffers past the device's own maxMemoryAllocationSize (4 GiB on an H200): the same checks, with no cap; at
    20 GiB the last word's index is past 2^32. Skips where the device has no sparse binding or too little free
    memory."""
    limit = device.memory_pool.allocation_limit
    nbytes = gib * GiB
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
