"""The memory pool: allocation, reference counts, views, transfers, limits, threads."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from _reliability import run_isolated, worker_held

import vkbackend
from vkbackend import BackendError, ErrorStatus


def roundtrip(pool, data: bytes) -> bytes:
    buf = pool.allocate(len(data))
    try:
        pool.host_to_pool(data, buf)
        out = bytearray(len(data))
        pool.pool_to_host(buf, out)
        return bytes(out)
    finally:
        pool.release(buf)


@pytest.mark.parametrize("size", [1, 4096 + 3, (1 << 20) + 1, (64 << 20) + 7])
def test_roundtrip_awkward_sizes(pool, size):
    data = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8).tobytes()
    assert roundtrip(pool, data) == data


def test_roundtrip_at_offsets(pool):
    rng = np.random.default_rng(1)
    buf = pool.allocate(10_000)
    whole = rng.integers(0, 256, 10_000, dtype=np.uint8)
    pool.host_to_pool(whole, buf)
    patch = rng.integers(0, 256, 333, dtype=np.uint8)
    pool.host_to_pool(patch, buf, 1234)
    whole[1234 : 1234 + 333] = patch
    part = np.empty(500, dtype=np.uint8)
    pool.pool_to_host(buf, part, 1200)
    assert np.array_equal(part, whole[1200:1700])
    pool.release(buf)


def test_memmap_source(pool, tmp_path):
    path = tmp_path / "data.bin"
    n = (40 << 20) // 4 + 5  # several staging chunks, not a multiple of anything
    np.random.default_rng(2).random(n, dtype=np.float32).tofile(path)
    src = np.memmap(path, dtype=np.float32, mode="r")
    buf = pool.allocate(src.nbytes)
    pool.host_to_pool(src, buf)
    out = np.empty(n, dtype=np.float32)
    pool.pool_to_host(buf, out)
    assert np.array_equal(out, np.asarray(src))
    pool.release(buf)


def test_thousands_of_buffers(pool):
    before = pool.stats()
    sizes = np.random.default_rng(3).integers(1, 20_000, 3000)
    ids = [pool.allocate(int(s)) for s in sizes]
    assert len(set(ids)) == len(ids)
    for i in ids[::2]:
        pool.release(i)
    more = [pool.allocate(int(s)) for s in sizes[:1000]]
    for i in ids[1::2] + more:
        pool.release(i)
    after = pool.stats()
    assert after["live_buffers"] == before["live_buffers"]


def test_buffers_do_not_overlap(pool):
    ids = [pool.allocate(1000 + i) for i in range(50)]
    for n, b in enumerate(ids):
        pool.host_to_pool(np.full(1000, n, dtype=np.uint8), b)
    for n, b in enumerate(ids):
        out = np.empty(1000, dtype=np.uint8)
        pool.pool_to_host(b, out)
        assert (out == n).all()
        pool.release(b)


def test_refcounts(pool):
    buf = pool.allocate(16)
    pool.retain(buf)
    pool.release(buf)
    pool.host_to_pool(b"x" * 16, buf)  # still alive after one release of two references
    pool.release(buf)
    with pytest.raises(BackendError) as info:
        pool.release(buf)
    assert info.value.status is ErrorStatus.InvalidArgument
    with pytest.raises(BackendError):
        pool.host_to_pool(b"x", buf)


@pytest.mark.parametrize("bad", [0, 123456789, -1, "a", None])
def test_bad_ids(pool, bad):
    for call in (
        lambda: pool.release(bad),
        lambda: pool.retain(bad),
        lambda: pool.pool_to_host(bad, bytearray(1)),
        lambda: pool.host_to_pool(b"a", bad),
        lambda: pool.view(bad, 0, 1),
    ):
        with pytest.raises(BackendError) as info:
            call()
        assert info.value.status is ErrorStatus.InvalidArgument


def test_sizes_are_checked(pool):
    buf = pool.allocate(100)
    for call in (
        lambda: pool.host_to_pool(bytes(101), buf),
        lambda: pool.host_to_pool(bytes(10), buf, 95),
        lambda: pool.pool_to_host(buf, bytearray(101)),
        lambda: pool.pool_to_host(buf, bytearray(1), 100),
        lambda: pool.pool_to_host(buf, bytes(10)),
        lambda: pool.allocate(0),
        lambda: pool.allocate(-5),
    ):
        with pytest.raises(BackendError) as info:
            call()
        assert info.value.status is ErrorStatus.InvalidArgument
    pool.release(buf)


def test_views(pool, device):
    align = device.info.min_storage_buffer_offset_alignment
    buf = pool.allocate(8 * align)
    data = np.arange(8 * align, dtype=np.uint8)
    pool.host_to_pool(data, buf)
    view = pool.view(buf, 2 * align, 3 * align)
    out = np.empty(3 * align, dtype=np.uint8)
    pool.pool_to_host(view, out)
    assert np.array_equal(out, data[2 * align : 5 * align])
    pool.host_to_pool(np.zeros(align, dtype=np.uint8), view, align)
    pool.release(buf)  # the view keeps the parent alive
    whole = np.empty(3 * align, dtype=np.uint8)
    pool.pool_to_host(view, whole)
    assert (whole[align : 2 * align] == 0).all() and np.array_equal(whole[:align], data[2 * align : 3 * align])
    if align > 1:
        with pytest.raises(BackendError):
            pool.view(view, 1, 1)
    with pytest.raises(BackendError):
        pool.view(view, 0, 3 * align + 1)
    pool.release(view)


def test_over_budget_allocation_fails_cleanly(pool):
    keep = pool.allocate(1000)
    pool.host_to_pool(b"k" * 1000, keep)
    with pytest.raises(BackendError) as info:
        pool.allocate(pool.free_bytes + (1 << 30))
    assert info.value.status is ErrorStatus.MemoryAllocation
    if not pool.ctx.info.sparse_binding:  # where it has, such a buffer is made (tests/test_large_buffers.py)
        with pytest.raises(BackendError) as info:
            pool.allocate(pool.allocation_limit + 1)
        assert info.value.status is ErrorStatus.MemoryAllocation
    out = bytearray(1000)
    pool.pool_to_host(keep, out)  # the pool still works and kept its contents
    assert out == b"k" * 1000
    pool.release(keep)


def test_pool_to_pool_within_a_device(pool):
    a, b = pool.allocate(5000), pool.allocate(6000)
    data = np.random.default_rng(4).integers(0, 256, 5000, dtype=np.uint8)
    pool.host_to_pool(data, a)
    pool.pool_to_pool(pool, a, b)
    out = np.empty(5000, dtype=np.uint8)
    pool.pool_to_host(b, out)
    assert np.array_equal(out, data)
    with pytest.raises(BackendError):
        pool.pool_to_pool(pool, b, a)  # 6000 bytes do not fit in 5000
    pool.release(a)
    pool.release(b)


def test_release_while_work_is_queued(device, pool):
    """A buffer released right after a copy into it is freed only after the copy ran; the caller never waits."""
    stats = pool.stats()
    for _ in range(20):
        src = pool.allocate(1 << 20)
        dst = pool.allocate(1 << 20)
        pool.host_to_pool(np.ones(1 << 20, dtype=np.uint8), src)
        pool.pool_to_pool(pool, src, dst)
        pool.release(src)
        pool.release(dst)
    device.sync()
    assert pool.stats()["live_buffers"] == stats["live_buffers"]


_LENGTH_KERNEL = """#version 450
layout(local_size_x = 1) in;
layout(std430, binding = 0) buffer Data { uint words[]; };
void main() { words[0] = uint(words.length()); }
"""


def _length_seen(device, pool, prog: int, buf: int) -> int:
    """The length in words a kernel sees for ``buf`` (its descriptor's range)."""
    device.launch(prog, [buf])
    out = np.zeros(1, np.uint32)
    pool.pool_to_host(buf, out)
    return int(out[0])


@pytest.mark.parametrize("busy", [False, True])
def test_a_released_block_is_the_next_buffer_of_its_order(device, pool, busy):
    """A small buffer's released block is kept as a spare, with its slot, for the next buffer whose size rounds to
    the same block, whether it was released while the worker was free or behind it (then once it is done). The new
    buffer has a new id and its own size, which a kernel sees as its array's length, in either direction. Trimming
    gives the spares back."""
    prog = device.compile(vkbackend.compile_glsl(_LENGTH_KERNEL))

    def release(buf: int) -> None:  # and wait until its block is free
        if busy:
            with worker_held(device):  # the worker is inside a call: the release waits behind it
                pool.release(buf)
                assert not pool.is_live(buf)
        else:
            pool.release(buf)
        device.sync()

    pool.trim()  # no spares left by earlier tests: the first buffer's block is the only one
    first = pool.allocate(8192)
    assert _length_seen(device, pool, prog, first) == 2048
    where = (pool.entries[first].slot, pool.entries[first].offset, pool.entries[first].vk_buffer)
    release(first)
    second = pool.allocate(5000)  # 8192 bytes of block, as the first
    assert second != first and not pool.is_live(first)
    entry = pool.entries[second]
    assert (entry.slot, entry.offset, entry.vk_buffer) == where
    assert pool.size_of(second) == 5000
    assert _length_seen(device, pool, prog, second) == 1250
    release(second)
    third = pool.allocate(8192)
    assert (pool.entries[third].slot, pool.entries[third].offset) == where[:2]
    assert _length_seen(device, pool, prog, third) == 2048
    spare = pool.entries[third]
    release(third)
    pool.trim()  # the spare's block goes back to its chunk: the next buffer is made anew
    fourth = pool.allocate(8192)
    assert pool.entries[fourth] is not spare
    assert _length_seen(device, pool, prog, fourth) == 2048
    pool.release(fourth)


def test_eight_threads(pool):
    errors = []

    def work(seed: int) -> None:
        rng = np.random.default_rng(seed)
        try:
            for _ in range(10):
                data = rng.integers(0, 256, int(rng.integers(1, 200_000)), dtype=np.uint8)
                buf = pool.allocate(data.nbytes)
                pool.host_to_pool(data, buf)
                out = np.empty_like(data)
                pool.pool_to_host(buf, out)
                pool.release(buf)
                if not np.array_equal(out, data):
                    errors.append(f"thread {seed}: mismatch")
        except Exception as error:  # collected and asserted below
            errors.append(repr(error))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors
    assert not any(t.is_alive() for t in threads)


def test_host_buffers_of_python_objects_are_refused(pool):
    """An object array's bytes are pointers: a read-back into one overwrote them and crashed the process."""
    buf = pool.allocate(64)
    objects = np.empty(8, dtype=object)
    with pytest.raises(TypeError, match="Python objects"):
        pool.pool_to_host(buf, objects)
    with pytest.raises(TypeError, match="Python objects"):
        pool.host_to_pool(objects, buf)
    pool.release(buf)


def test_sizes_and_offsets_take_numpy_integers(pool, device):
    """``allocate(np.prod(shape) * 4)`` is an ordinary call: anything ``operator.index`` takes is a size or offset."""
    align = device.info.min_storage_buffer_offset_alignment
    shape = (16, 64)
    buf = pool.allocate(np.prod(shape) * 4)
    assert pool.size_of(buf) == 4096
    data = np.arange(256, dtype=np.uint32)
    pool.host_to_pool(data, buf, np.int64(align))
    view = pool.view(buf, np.uint32(align), np.int32(1024))
    out = np.empty(256, dtype=np.uint32)
    pool.pool_to_host(view, out, np.intp(0))
    assert np.array_equal(out, data)
    pool.pool_to_host(buf, out, np.int16(align))
    assert np.array_equal(out, data)
    pool.release(view)
    pool.release(buf)


def test_sizes_and_offsets_of_the_wrong_type_or_value(pool):
    from vkbackend import InvalidArgumentError, InvalidArgumentTypeError

    buf = pool.allocate(256)
    for call in (
        lambda: pool.allocate(4096.0),
        lambda: pool.allocate(np.float64(64)),
        lambda: pool.allocate("64"),
        lambda: pool.allocate(True),
        lambda: pool.view(buf, 0.0, 64),
        lambda: pool.view(buf, 0, 64.0),
        lambda: pool.host_to_pool(bytes(4), buf, 1.0),
        lambda: pool.pool_to_host(buf, bytearray(4), 1.0),
    ):
        with pytest.raises(InvalidArgumentTypeError, match="must be an integer.*got (float|float64|str|bool)"):
            call()
    for call, value in (
        (lambda: pool.allocate(np.int64(0)), "got 0"),
        (lambda: pool.allocate(np.int8(-4)), "got -4"),
        (lambda: pool.view(buf, np.int64(-64), 64), "offset -64"),
        (lambda: pool.host_to_pool(bytes(4), buf, np.int64(-1)), "offset -1"),
    ):
        with pytest.raises(InvalidArgumentError, match=value) as info:
            call()
        assert not isinstance(info.value, TypeError)
    pool.release(buf)


def test_closed_and_released_host_buffers_are_invalid_arguments(pool):
    import mmap

    from vkbackend import InvalidArgumentError

    buf = pool.allocate(64)
    closed = mmap.mmap(-1, 64)
    closed.close()
    released = memoryview(bytearray(64))
    released.release()
    for host, why in ((closed, "mmap closed"), (released, "released memoryview")):
        for call in (lambda: pool.host_to_pool(host, buf), lambda: pool.pool_to_host(buf, host)):
            with pytest.raises(InvalidArgumentError, match=f"host buffer .*cannot be used: .*{why}"):
                call()
    pool.release(buf)


def test_releases_behind_a_queued_free_join_it(device, pool, monkeypatch):
    """Releases while the worker is busy wait for it; a release that finds the last free it queued still waiting,
    with nothing queued after it, joins that free instead of queueing its own, so a loop of them adds one item to the
    worker's queue; a sync point then leaves every buffer freed."""
    worker = device._worker
    device.sync()
    before = pool.stats()["live_buffers"]
    frees = []
    defer = worker.defer
    monkeypatch.setattr(worker, "defer", lambda fn, nbytes=0, wake=True: (frees.append(fn), defer(fn, nbytes, wake)))
    with worker_held(device):
        for _ in range(500):  # the worker is inside a call: nothing is quiet, and it takes nothing meanwhile
            pool.release(pool.allocate(4096))
        queued = len(frees)
    device.sync()
    monkeypatch.undo()
    assert queued == 1, queued
    assert pool.stats()["live_buffers"] == before
    assert not pool._dying  # freed by the time the sync point returned, not merely released


@pytest.mark.parametrize("direct", ["1", "0"])
def test_small_read_backs_read_mapped_memory_straight(direct):
    """A read-back of at most DIRECT_READ_MAX bytes from a small buffer in memory the host can map (all of lavapipe's)
    is its sync point and a copy from the mapping: no copy command. It waits for the launch before it, through a view
    too; one byte more goes through staging; after a launch whose submit failed it raises that, and the buffer holds
    what it held. VKBACKEND_DIRECT_ACCESS=0 sends every read-back through staging."""
    r = run_isolated("memory_direct_reads", env={"VKBACKEND_DIRECT_ACCESS": direct})
    assert r["mapped"] is (direct == "1")
    assert r["right"] == [True, True, True]
    assert r["copies"] == (0 if direct == "1" else 3)
    assert r["more_copies"] == 1 and r["more_right"]
    assert r["after_failure"] == "KernelLaunch" and r["kept"]
    assert r["validation"] == ""


def test_transfers_through_large_staging_buffers_move_in_shrinking_parts():
    """Through 32 MiB staging buffers (a GPU's) a transfer of two of them and a bit moves in parts that shrink toward
    an upload's end and a download's start, a copy each, and every byte arrives, from and into odd addresses."""
    r = run_isolated("memory_transfer_parts")
    assert r["staging"] == 32 << 20
    assert r["parts"] > 3  # a whole staging buffer, then parts that halve
    assert r["upload_copies"] == r["parts"] and r["download_copies"] == r["parts"]
    assert r["right"]
    assert r["validation"] == ""


@pytest.mark.parametrize("direct", ["1", "0"])
def test_uploads_into_a_quiet_device_write_mapped_memory_straight(direct):
    """An upload into a small buffer in memory the host can map, while nothing is queued or running, is a copy into
    the mapping: no copy command; into a view too, and 12 MiB split over threads. One behind a launch still queued
    goes through staging, after the launch; so does one into a buffer with memory of its own.
    VKBACKEND_DIRECT_ACCESS=0 sends every upload through staging."""
    r = run_isolated("memory_direct_writes", env={"VKBACKEND_DIRECT_ACCESS": direct})
    assert r["mapped"] is (direct == "1") and r["quiet_before_each"]
    assert r["quiet_copies"] == (0 if direct == "1" else 1)
    assert r["view_copies"] == (0 if direct == "1" else 1)
    assert r["block_copies"] == (0 if direct == "1" else r["block_parts"])
    assert r["queued_copies"] == 1 and r["over_copies"] == r["over_parts"]
    assert r["quiet_right"] and r["queued_right"] and r["view_right"] and r["block_right"] and r["over_right"]
    assert r["validation"] == ""


def test_a_device_closed_during_a_direct_read_is_a_clean_error():
    """A close from another thread between a direct read's sync point and its copy: close() frees the chunks only
    once no read is copying from their mapping, and the read raises the closed error instead of reading unmapped
    memory."""
    r = run_isolated("memory_direct_read_close")
    assert r["mapped"] and r["synced"] and r["joined"]
    assert r["read"] == "InvalidArgument" and r["close"] == "ok"
    assert r["validation"] == ""
