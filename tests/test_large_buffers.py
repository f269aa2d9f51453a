"""Buffers past maxStorageBufferRange: kernels reach them by device address (GLSL buffer_reference members of the push
constants), with the launch taking the buffers themselves, so their accesses are ordered like bound ones."""
from __future__ import annotations

import numpy as np
import pytest

from vkbackend import ErrorStatus
from vkbackend.errors import BackendError


def need_past_the_range(info, extra: int) -> None:
    """Skip, saying why, where no buffer can be ``extra`` bytes past the storage range: a device whose largest
    allocation is the range itself (an H200: both 4 GiB) has no buffer that needs an address to be reached."""
    if info.max_storage_buffer_range + extra > info.max_memory_allocation_size:
        pytest.skip(f"{info.name}: the largest allocation ({info.max_memory_allocation_size} B) is not past "
                    f"maxStorageBufferRange ({info.max_storage_buffer_range} B) by {extra} B, so no buffer is")


@pytest.fixture
def addressed(device, kernel):
    if not device.info.buffer_device_address:
        pytest.skip(f"{device.info.name} has no buffer device addresses (bufferDeviceAddress)")
    return kernel("axpy_address")


def test_reflection_finds_the_address_members(device, addressed):
    info = device.program_info(addressed)
    assert [(a.name, a.offset, a.readable, a.writable) for a in info.addresses] == [
        ("src", 0, True, False), ("dst", 16, True, True)]
    assert [m.name for m in info.push_constants] == ["a", "first", "n"]
    assert info.buffers == ()


def test_a_kernel_reaches_the_last_element_of_a_buffer_past_the_storage_range(device, pool, addressed):
    limit = device.info.max_storage_buffer_range
    n = limit // 4 + 4096                       # past the range by 16 KiB
    need_past_the_range(device.info, 4 * n - limit)
    x = np.arange(n, dtype=np.float32) % 1000
    xb, yb = pool.allocate(4 * n), pool.allocate(4 * n)
    pool.host_to_pool(x, xb)
    pool.host_to_pool(np.ones(n, dtype=np.float32), yb)
    per_launch = 65535 * 256
    for first in range(0, n, per_launch):       # two launches: the second depends on nothing, the third on the first
        device.launch(addressed, [xb, yb], [2.0, first, n], (min(65535, -(-(n - first) // 256)), 1, 1))
    device.launch(addressed, [xb, yb], [1.0, n - 8, n], (1, 1, 1))   # the tail again: a write after write
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
    device.launch(addressed, [x1, y1], [1.0, 0, 1024], (4, 1, 1))   # after the uploads: one barrier
    device.launch(addressed, [x2, y2], [1.0, 0, 1024], (4, 1, 1))   # independent of the first: none
    device.launch(addressed, [x1, y1], [1.0, 0, 1024], (4, 1, 1))   # writes what the first wrote: one
    device.sync()
    assert device.stats()["barriers"] - before == 2
    out = np.empty(1024, dtype=np.float32)
    pool.pool_to_host(y1, out)
    assert (out == 3).all()
    for b in bufs:
        pool.release(b)
