"""Buffers in memory shared through opaque file descriptors (VK_KHR_external_memory_fd), on lavapipe.

Exported buffers are buffers like any other (launches, copies, views, release); a second Vulkan memory object
imported from the fd sees the same bytes; the descriptor is closed exactly once; nothing leaks.
"""

from __future__ import annotations

import gc
import os
import weakref

import numpy as np
import pytest

import vkbackend
from vkbackend import (
    ExportedMemory,
    InitializationError,
    InvalidArgumentError,
    InvalidArgumentTypeError,
    MemoryAllocationError,
)
from vkbackend.memory.pool import MemoryPool

N = 4096  # floats


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def _counts(device) -> tuple[dict, dict]:
    """The pool's counters and the process's live memory objects and buffers, once released memory is freed (on the
    worker, after a sync) and chunks kept for reuse are given back (trim)."""
    device.sync()
    device.memory_pool.trim()
    live = device.stats()["live_objects"]
    return device.memory_pool.stats(), {kind: live[kind] for kind in ("device_memory", "buffers")}


@pytest.fixture
def exporting(device):
    """The device, skipped where it cannot export; and a check that the test left no buffer, memory or fd behind."""
    if "VK_KHR_external_memory_fd" not in device.info.extensions:
        pytest.skip(f"{device.info.name} has no VK_KHR_external_memory_fd")
    exported: list = []  # weak references to every ExportedMemory the test made
    allocate_exportable = MemoryPool.allocate_exportable

    def recording(pool, nbytes):
        ext = allocate_exportable(pool, nbytes)
        exported.append(weakref.ref(ext))
        return ext

    before = _counts(device)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(MemoryPool, "allocate_exportable", recording)
        yield device
    gc.collect()
    assert _counts(device) == before
    # The descriptors the test was given are closed (one dropped unclosed is closed by its finalizer: collected here).
    # Not the process's count of open descriptors: a driver opens descriptors of its own (the NVIDIA driver does).
    assert all(ref() is None or ref().closed for ref in exported)


def test_export_gives_a_valid_descriptor_and_describes_the_memory(exporting):
    pool = exporting.memory_pool
    with pool.allocate_exportable(4 * N) as ext:
        assert isinstance(ext, ExportedMemory) and ext.pool is pool and ext.nbytes == 4 * N
        assert _is_open(ext.fd) and not ext.closed
        assert ext.size >= ext.nbytes and pool.size_of(ext.buffer) == ext.nbytes
        flags, _heap = pool.ctx.handles.physical.memory_types[ext.memory_type_index]
        assert ext.memory_type_flags == flags and flags & pool.ctx.lib.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT
        assert len(ext.device_uuid) == 16 and f"fd {ext.fd}" in repr(ext)
        assert pool.stats()["memory_objects"] == _counts(exporting)[0]["memory_objects"]  # counted as the pool's
        pool.release(ext.buffer)
    assert ext.closed and "closed" in repr(ext)


def test_an_exported_buffer_runs_kernels_and_round_trips_data(exporting, kernel):
    pool, axpy = exporting.memory_pool, kernel("axpy_inplace")
    x = np.arange(N, dtype=np.float32)
    with pool.allocate_exportable(4 * N) as ext:
        xs = pool.allocate(4 * N)
        pool.host_to_pool(x, xs)
        pool.host_to_pool(np.ones(N, np.float32), ext.buffer)
        exporting.launch(axpy, [xs, ext.buffer], [3.0, N], (N // 64, 1, 1))  # y = 3y + x
        view = pool.view(ext.buffer, 4 * 64, 4 * 64)  # views of it work too
        exporting.launch(axpy, [xs, view], [0.0, 64], (1, 1, 1))  # y[64:128] = x[:64]
        out = np.empty(N, np.float32)
        pool.pool_to_host(ext.buffer, out)
        expected = 3 + x
        expected[64:128] = x[:64]
        assert np.array_equal(out, expected)
        for buf in (view, xs, ext.buffer):
            pool.release(buf)


def test_memory_imported_from_the_descriptor_sees_the_same_bytes(exporting):
    pool = exporting.memory_pool
    data = np.random.default_rng(0).integers(0, 2**32, N, dtype=np.uint32)
    with pool.allocate_exportable(data.nbytes) as ext:
        try:
            imported = pool.import_memory(ext.fd, ext.size, nbytes=ext.nbytes, memory_type_index=ext.memory_type_index)
        except vkbackend.BackendError as error:
            pool.release(ext.buffer)
            pytest.skip(f"{exporting.info.name} does not import its own opaque fds: {error}")
        assert imported != ext.buffer and _is_open(ext.fd)  # a duplicate was imported: the fd is still ours
        out = np.empty_like(data)
        pool.host_to_pool(data, ext.buffer)
        pool.pool_to_host(imported, out)
        assert np.array_equal(out, data)
        pool.host_to_pool(data[::-1].copy(), imported)  # and written through the import
        pool.pool_to_host(ext.buffer, out)
        assert np.array_equal(out, data[::-1])
        pool.release(ext.buffer)  # the import keeps the memory alive
        pool.pool_to_host(imported, out)
        assert np.array_equal(out, data[::-1])
        pool.release(imported)


def test_exported_and_imported_buffers_have_device_addresses_like_any_buffer(exporting, kernel):
    if not exporting.info.buffer_device_address:
        pytest.skip(f"{exporting.info.name} has no buffer device addresses (bufferDeviceAddress)")
    pool, axpy = exporting.memory_pool, kernel("axpy_address")  # y[i] = a * x[i] + y[i], both reached by address
    x = np.arange(N, dtype=np.float32)
    with pool.allocate_exportable(4 * N) as ext:
        imported = pool.import_memory(ext.fd, ext.size, nbytes=ext.nbytes, memory_type_index=ext.memory_type_index)
        assert pool.address(ext.buffer) and pool.address(imported)
        pool.host_to_pool(x, ext.buffer)
        ys = pool.allocate(4 * N)
        pool.host_to_pool(np.ones(N, np.float32), ys)
        exporting.launch(axpy, [imported, ys], [2.0, 0, N], (N // 256, 1, 1))  # reads the export through the import
        out = np.empty(N, np.float32)
        pool.pool_to_host(ys, out)
        assert np.array_equal(out, 2 * x + 1)
        for buf in (ys, imported, ext.buffer):
            pool.release(buf)


def test_the_descriptor_is_closed_exactly_once(exporting):
    pool = exporting.memory_pool
    ext = pool.allocate_exportable(4096)
    fd = ext.fd
    pool.release(ext.buffer)
    ext.close()
    assert not _is_open(fd) and ext.closed
    with pytest.raises(InvalidArgumentError, match="was closed"):
        ext.fd
    reused = os.open(os.devnull, os.O_RDONLY)  # most likely the same number
    try:
        ext.close()
        del ext
        gc.collect()
        assert _is_open(reused), "a second close closed someone else's descriptor"
    finally:
        os.close(reused)


def test_a_dropped_export_closes_its_descriptor(exporting):
    pool = exporting.memory_pool
    ext = pool.allocate_exportable(4096)
    fd, buf = ext.fd, ext.buffer
    del ext
    gc.collect()
    assert not _is_open(fd)
    assert pool.is_live(buf)  # the buffer is the pool's, released by its owner
    pool.release(buf)


def test_import_errors_leave_the_callers_descriptor_open(exporting):
    pool = exporting.memory_pool
    with pool.allocate_exportable(8192) as ext:
        fds = set(os.listdir("/proc/self/fd"))
        with pytest.raises(InvalidArgumentError, match="memory type"):  # found after the duplicate was made
            pool.import_memory(ext.fd, ext.size, memory_type_index=len(pool.ctx.handles.physical.memory_types))
        with pytest.raises(InvalidArgumentError, match="nbytes"):
            pool.import_memory(ext.fd, ext.size, nbytes=ext.size + 1)
        with pytest.raises(InvalidArgumentError, match="open file descriptor"):
            pool.import_memory(-1, ext.size)
        with pytest.raises(InvalidArgumentTypeError, match="file descriptor"):
            pool.import_memory(str(ext.fd), ext.size)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgumentError, match="positive byte count"):
            pool.import_memory(ext.fd, 0)
        assert set(os.listdir("/proc/self/fd")) == fds and _is_open(ext.fd)
        pool.release(ext.buffer)


def test_bad_sizes_are_refused(exporting):
    pool = exporting.memory_pool
    for bad in (0, -1, np.int64(0)):
        with pytest.raises(InvalidArgumentError, match="positive byte count"):
            pool.allocate_exportable(bad)
    for bad in (1.5, True):
        with pytest.raises(InvalidArgumentTypeError, match="must be an integer"):
            pool.allocate_exportable(bad)
    with pytest.raises(MemoryAllocationError, match="maxMemoryAllocationSize"):
        pool.allocate_exportable(exporting.info.max_memory_allocation_size + 1)


def test_a_device_without_the_extension_says_so(exporting, monkeypatch):
    pool = exporting.memory_pool
    with pool.allocate_exportable(4096) as ext:
        monkeypatch.setattr(pool.ctx.handles, "extensions", frozenset())
        for call in (lambda: pool.allocate_exportable(4096), lambda: pool.import_memory(ext.fd, ext.size)):
            with pytest.raises(InitializationError, match="no VK_KHR_external_memory_fd.*update the driver"):
                call()
        pool.release(ext.buffer)
