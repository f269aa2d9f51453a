"""csrc/copy.c, the host copy of every transfer: memcpy, or (a download's) streaming stores from STREAM_MIN bytes with a
head up to a cache line and a tail copied apart; parts split over threads. Every byte arrives, at any alignment, and
none around it is touched."""

from __future__ import annotations

import numpy as np
import pytest

from vkbackend._ffi import ffi, lib

STREAM_MIN = 1 << 20  # copy.c's VKB_STREAM_MIN, from which vkb_copy_streaming streams
SPLIT_MIN = 8 << 20  # copy.c splits a copy over threads from two parts of 4 MiB
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
