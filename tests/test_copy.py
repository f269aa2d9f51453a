"""csrc/copy.c, the host copy of every transfer: memcpy, or (a download's) streaming stores from STREAM_MIN bytes with a
head up to a cache line and a tail copied apart; parts split over the copy crew's threads (or threads of its own, where
another copy is using the crew). Every byte arrives, at any alignment, and none around it is touched; and
transfers.part_sizes, how a transfer is cut into parts."""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest
from _reliability import forked_checks_while_busy

from vkbackend._ffi import ffi, lib
from vkbackend.memory.transfers import SMALLEST_PART, part_sizes

STREAM_MIN = 1 << 20  # copy.c's VKB_STREAM_MIN, from which vkb_copy_streaming streams
SPLIT_MIN = 2 << 20  # copy.c splits a copy over threads from two parts of 1 MiB
GUARD = 80  # bytes around the destination that must keep their value
_SOURCE = np.random.default_rng(0).integers(0, 256, 3 * SPLIT_MIN + 4096, np.uint8)


def _check(copy, nbytes: int, src_offset: int, dst_offset: int, threads: int) -> None:
    src = _SOURCE[src_offset : src_offset + nbytes]
    dst = np.full(GUARD + dst_offset + nbytes + GUARD, 0xA5, np.uint8)
    copy(ffi.cast("char*", dst.ctypes.data) + GUARD + dst_offset, ffi.cast("char*", src.ctypes.data), nbytes, threads)
    inside = dst[GUARD + dst_offset : GUARD + dst_offset + nbytes]
    where = f"{nbytes} bytes, offsets {src_offset}/{dst_offset}, {threads} threads"
    assert np.array_equal(inside, src), f"{where}: byte {np.flatnonzero(inside != src)[0]} differs"
    assert (dst[: GUARD + dst_offset] == 0xA5).all() and (dst[GUARD + dst_offset + nbytes :] == 0xA5).all(), where


@pytest.mark.parametrize("copy", [lib.vkb_copy_streaming, lib.vkb_copy], ids=["vkb_copy_streaming", "vkb_copy"])
@pytest.mark.parametrize("nbytes", [STREAM_MIN - 1, STREAM_MIN, STREAM_MIN + 1, STREAM_MIN + 63, STREAM_MIN + 100])
def test_a_copy_at_every_alignment(copy, nbytes):
    for src_offset in range(18):
        for dst_offset in range(18):
            _check(copy, nbytes, src_offset, dst_offset, 1)


@pytest.mark.parametrize("nbytes", [0, 1, 15, 17, 63, 64, 65, 4099])
def test_small_copies(nbytes):
    for offset in range(18):
        _check(lib.vkb_copy_streaming, nbytes, offset, 17 - offset, 1)


@pytest.mark.parametrize("threads", [2, 3, 16, 64])
# SPLIT_MIN + 1 over 2 threads and 3 * SPLIT_MIN + 3 over 6 (16 or 64 asked for): sizes whose share per thread,
# rounded down, is a whole number of pages; the parts must still reach the last byte
@pytest.mark.parametrize(
    "nbytes", [SPLIT_MIN - 1, SPLIT_MIN, SPLIT_MIN + 1, SPLIT_MIN + 4096 * 3 + 13, 3 * SPLIT_MIN + 3, 3 * SPLIT_MIN + 7]
)
def test_a_copy_split_over_threads(nbytes, threads):
    for src_offset, dst_offset in ((0, 0), (3, 5), (16, 1), (7, 64)):
        _check(lib.vkb_copy_streaming, nbytes, src_offset, dst_offset, threads)


def test_a_round_trip_through_staging_at_odd_offsets(pool):
    """Upload from and download into arrays at odd addresses, in several staging buffers' worth, the last one odd."""
    nbytes = 2 * pool.transfers.ring.buffer_bytes + STREAM_MIN + 61
    data = np.random.default_rng(1).integers(0, 256, nbytes + 3, np.uint8)
    out = np.zeros(nbytes + 5, np.uint8)
    buf = pool.allocate(nbytes)
    try:
        pool.host_to_pool(data[3:], buf)
        pool.pool_to_host(buf, out[5:])
    finally:
        pool.release(buf)
    assert np.array_equal(out[5:], data[3:]) and not out[:5].any()


def _crew() -> tuple[int, int, int]:
    """The copy crew's threads, the split copies it served, and those that started threads of their own."""
    members, served, alone = ffi.new("int*"), ffi.new("uint64_t*"), ffi.new("uint64_t*")
    lib.vkb_copy_crew_counts(members, served, alone)
    return members[0], served[0], alone[0]


def test_split_copies_keep_the_crew_they_started():
    """The crew's threads are started once and serve every later split copy of one thread: none starts its own."""
    _check(lib.vkb_copy, 3 * SPLIT_MIN + 3, 0, 0, 16)  # 6 parts: 5 for the crew (at least)
    members, served, alone = _crew()
    assert members >= 5
    for i in range(10):
        _check(lib.vkb_copy_streaming if i % 2 else lib.vkb_copy, 3 * SPLIT_MIN + 3, i, 2 * i, 16)
    _check(lib.vkb_copy, SPLIT_MIN - 1, 0, 0, 16)  # not split: the crew is not asked
    assert _crew() == (members, served + 10, alone)


def test_split_copies_from_several_threads_at_once():
    """Copies that find the crew busy start threads of their own (rounds until one has); all arrive whole."""
    failures: list[BaseException] = []

    def copies(seed: int) -> None:
        try:
            for i in range(12):
                _check(lib.vkb_copy, SPLIT_MIN + 4096 * (seed + i) + seed, seed, i, 4)
        except BaseException as error:  # reported by the main thread
            failures.append(error)

    _, _, alone = _crew()
    for _ in range(20):
        threads = [threading.Thread(target=copies, args=(seed,)) for seed in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not failures, failures[0]
        if _crew()[2] > alone:
            break
    assert _crew()[2] > alone, "no copy ever found the crew busy"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")  # the point of the test
def test_a_forked_child_copies_with_a_crew_of_its_own():
    """A child forked while the parent's crew copies (best effort: its lock may be held at the fork) starts from an
    empty crew and copies."""

    def busy() -> None:
        _check(lib.vkb_copy, 3 * SPLIT_MIN, 0, 0, 8)

    def child() -> bool:  # from an empty crew, a split copy, with a crew of its own
        empty = _crew() == (0, 0, 0)
        _check(lib.vkb_copy, 3 * SPLIT_MIN, 1, 3, 8)
        return empty and min(_crew()[:2]) > 0

    answers = forked_checks_while_busy(busy, child)
    assert all(answers), f"a child's copy hung, failed, or found the parent's crew: {answers}"


@pytest.mark.parametrize("largest", [4096, 1 << 20, 8 << 20, 32 << 20, 64 << 20])
def test_part_sizes_cover_a_transfer_and_shrink_at_its_end(largest):
    mib = 1 << 20
    for nbytes in [1, 4095, SMALLEST_PART - 1, SMALLEST_PART, 2 * SMALLEST_PART + 1, 32 * mib, 64 * mib + 61, 1 << 30]:
        sizes = part_sizes(nbytes, largest)
        assert sum(sizes) == nbytes and all(0 < n <= largest for n in sizes), (nbytes, largest)
        assert sizes == sorted(sizes, reverse=True), "largest first: an upload's last part is its smallest"
        if nbytes >= 2 * SMALLEST_PART and largest >= 2 * SMALLEST_PART:
            assert sizes[-1] < 2 * SMALLEST_PART and min(sizes) > SMALLEST_PART // 2, (nbytes, largest, sizes)


def test_part_sizes_of_64_mib_through_32_mib_buffers():
    mib = 1 << 20
    assert part_sizes(64 * mib, 32 * mib) == [32 * mib, 16 * mib, 8 * mib, 8 * mib]
    assert part_sizes(10 * mib, 32 * mib) == [10 * mib]
