"""Isolation between buffers: small buffers are sub-allocated side by side in one VkBuffer per chunk, so a kernel that
writes past its buffer's end could corrupt a neighbour. With robustBufferAccess on (the default, VKBACKEND_ROBUST=1)
an out-of-bounds write must never change another buffer: not the neighbours in the chunk, not the parent's bytes
outside a view.

Note on the guarantee: core robustBufferAccess only promises that out-of-bounds writes stay within "the memory bound
to the buffer", which for a sub-allocated buffer is the whole chunk; the descriptor range is what lavapipe and the
common desktop drivers check against, and VK_EXT_robustness2's robustBufferAccess2 is what guarantees it (writes
discarded). docs/reliability.md records what was measured.
"""

from __future__ import annotations

import numpy as np
import pytest
from _reliability import SCRIBBLE, groups, run_isolated

import vkbackend

WORDS = 64  # each small buffer: 256 bytes, one buddy block
# (first index, count) of the scribbles: just past the end, far past it, and an index that wraps to the top of memory
SCRIBBLES = [(0, WORDS + 1), (WORDS, 1), (0, 64 * WORDS), (WORDS * 16, 4096), (1 << 22, 64), (0xFFFFFF00, 256)]


@pytest.fixture(scope="module")
def scribble(device):
    if not device.info.robust_buffer_access:
        pytest.skip(f"{device.info.name} runs without robustBufferAccess (VKBACKEND_ROBUST=0 or not supported)")
    prog = device.compile(vkbackend.compile_glsl(SCRIBBLE))
    yield prog
    device.release_program(prog)


def neighbours(pool, run: int = 5):
    """``run`` small buffers that lie side by side in one chunk, found through the pool's bookkeeping (the buddy
    allocator hands out neighbours when blocks are split; trim() first so that no cached block comes back instead)."""
    pool.trim()
    taken = []
    for _ in range(512):
        taken.append(pool.allocate(WORDS * 4))
        spots = sorted((id(pool.entries[b].chunk), pool.entries[b].offset, b) for b in taken)
        for i in range(len(spots) - run + 1):
            window = spots[i : i + run]
            if all(c == window[0][0] and o == window[0][1] + k * WORDS * 4 for k, (c, o, _) in enumerate(window)):
                found = [b for _, _, b in window]
                for b in taken:
                    if b not in found:
                        pool.release(b)
                return found
    raise AssertionError("no buffers side by side in one chunk after 512 allocations")


def test_out_of_bounds_writes_never_reach_a_neighbour(device, pool, scribble):
    rng = np.random.default_rng(3)
    device.sync()
    bufs = neighbours(pool)
    target = bufs[len(bufs) // 2]
    expect = {}
    for buf in bufs:
        expect[buf] = rng.integers(0, 2**32, WORDS, dtype=np.uint32)
        pool.host_to_pool(expect[buf], buf)
    for first, count in SCRIBBLES:
        value = 0xDEAD0000 | first & 0xFFFF
        device.launch(scribble, [target], [first, count, value], groups(count))
        expect[target] = expect[target].copy()
        lo, hi = first, min(first + count, WORDS)
        if lo < WORDS:
            expect[target][lo:hi] = value  # the in-bounds part is written
        for buf in bufs:
            out = np.empty(WORDS, np.uint32)
            pool.pool_to_host(buf, out)
            where = "the target" if buf == target else f"neighbour at {bufs.index(buf) - bufs.index(target):+d}"
            np.testing.assert_array_equal(out, expect[buf], err_msg=f"{where} after a[{first}:+{count}] = {value:#x}")
    for buf in bufs:
        pool.release(buf)


def test_out_of_bounds_writes_through_a_view_stay_inside_it(device, pool, scribble):
    parent = pool.allocate(64 * WORDS)
    base = np.arange(16 * WORDS, dtype=np.uint32) + 7
    pool.host_to_pool(base, parent)
    offset_words = 4 * WORDS
    view = pool.view(parent, offset_words * 4, WORDS * 4)
    expect = base.copy()
    for first, count in SCRIBBLES:
        device.launch(scribble, [view], [first, count, 0xBEEF], groups(count))
        if first < WORDS:
            expect[offset_words + first : offset_words + min(first + count, WORDS)] = 0xBEEF
        out = np.empty(16 * WORDS, np.uint32)
        pool.pool_to_host(parent, out)
        np.testing.assert_array_equal(out, expect, err_msg=f"the parent after a[{first}:+{count}] through the view")
    pool.release(view)
    pool.release(parent)


def test_what_lavapipe_does_without_robustness(device):
    """Not a guarantee, a record: with VKBACKEND_ROBUST=0 an out-of-bounds write is undefined behaviour. The result is
    printed for docs/reliability.md (lavapipe bounds-checks storage buffer accesses whether or not the feature is
    on)."""
    if "llvmpipe" not in device.info.name:
        pytest.skip("a record of lavapipe's behaviour")
    r = run_isolated("isolation_without_robustness", env={"VKBACKEND_ROBUST": "0"})
    assert r["robust"] is False
    print(
        f"\nlavapipe without robustBufferAccess: an out-of-bounds write "
        f"{'changed' if r['neighbour_changed'] else 'did not change'} the neighbouring buffer"
    )
    assert r["validation"] == ""
