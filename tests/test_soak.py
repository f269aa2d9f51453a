"""Soak: many launches and allocate/release cycles on one device; what the process and the device hold must end where
it started. Prints resident memory, device memory held by the pool and the live Vulkan objects (from the native
layer's counts of successful create and destroy calls) at the start and the end.

The pool caches: after a burst of releases it keeps the chunks the burst needed (the peak is printed) until
``MemoryPool.trim()`` gives them back, so both snapshots are taken after a sync and a trim. Fences and command buffers
are recycled through a small spare pool whose size follows the most batches ever in flight: they may end a few above
the start, never more.

CI runs 100,000 launches and 10,000 cycles; ``VKBACKEND_FULL=1`` runs 1,000,000 and 100,000.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from _reliability import AFFINE, FILL, FULL, groups

import vkbackend

LAUNCHES = 1_000_000 if FULL else 100_000
CYCLES = 100_000 if FULL else 10_000
COUNTERS = 4  # buffers the launches increment, round robin
N = 256
# sizes of the allocate/release cycles: sub-allocated ones of every order, and one over the sub-allocation limit
SIZES = [4, 256, 1000, 4096, 65536, 1 << 20, 4 << 20]
BIG = (17 << 20) + 12345  # its own VkDeviceMemory, of a size drivers round up: allocated and freed every time
BIG_EVERY = 500


def rss_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def snapshot(device) -> dict:
    device.sync()
    peak = device.memory_pool.stats()["held_bytes"]
    device.memory_pool.trim()
    stats = device.stats()
    return {
        "rss": rss_bytes(),
        "pool": device.memory_pool.stats(),
        "live": stats["live_objects"],
        "dispatches": stats["dispatches"],
        "batches": stats["batches"],
        "cached": peak,
    }


def describe(name: str, snap: dict) -> str:
    pool = snap["pool"]
    live = ", ".join(f"{k} {v}" for k, v in snap["live"].items())
    return (
        f"{name}: RSS {snap['rss'] / 2**20:.1f} MiB; pool held {snap['cached'] / 2**20:.0f} MiB before trim(), "
        f"{pool['held_bytes'] / 2**20:.0f} MiB after, in "
        f"{pool['memory_objects']} memory objects ({pool['chunks']} chunks), {pool['live_buffers']} live buffers; "
        f"live Vulkan objects: {live}"
    )


@pytest.fixture(scope="module")
def progs(device):
    ids = {
        "affine": device.compile(vkbackend.compile_glsl(AFFINE)),
        "fill": device.compile(vkbackend.compile_glsl(FILL)),
    }
    yield ids
    for prog in ids.values():
        device.release_program(prog)


def soak_round(device, progs, counters, launches: int, cycles: int, rng) -> int:
    """``launches`` increments spread over the counters, interleaved with ``cycles`` allocate/(fill)/release cycles.
    Returns the number of fill launches (extra launches)."""
    pool = device.memory_pool
    per_cycle = max(1, launches // max(1, cycles))
    done = fills = cycle = 0
    sizes = rng.choice(SIZES, size=cycles)
    while done < launches or cycle < cycles:
        for _ in range(min(per_cycle, launches - done)):
            device.launch(progs["affine"], [counters[done % COUNTERS]], [N, 1, 1], groups(N))
            done += 1
        if cycle < cycles:
            size = BIG if cycle % BIG_EVERY == BIG_EVERY - 1 else int(sizes[cycle])
            buf = pool.allocate(size)
            if size <= 65536 and size % 4 == 0:
                device.launch(progs["fill"], [buf], [size // 4, cycle, 3], groups(size // 4))  # then released at once
                fills += 1
            pool.release(buf)
            cycle += 1
    return fills


def test_soak_ends_flat(device, progs):
    pool = device.memory_pool
    rng = np.random.default_rng(5)
    counters = [pool.allocate(N * 4) for _ in range(COUNTERS)]
    for buf in counters:
        pool.host_to_pool(np.zeros(N, np.uint32), buf)
    warm = max(5000, LAUNCHES // 20)
    soak_round(device, progs, counters, warm, warm // 10, rng)  # warm up: the spare batches, the staging ring
    start = snapshot(device)
    started = time.perf_counter()
    fills = soak_round(device, progs, counters, LAUNCHES // 2, CYCLES // 2, rng)
    half = snapshot(device)
    fills += soak_round(device, progs, counters, LAUNCHES - LAUNCHES // 2, CYCLES - CYCLES // 2, rng)
    elapsed = time.perf_counter() - started
    end = snapshot(device)
    print(
        f"\nsoak: {LAUNCHES} launches (+{fills} fills) and {CYCLES} allocate/release cycles in {elapsed:.1f} s "
        f"({end['batches'] - start['batches']} batches)"
    )
    print(describe("start", start))
    print(describe("half ", half))
    print(describe("end  ", end))
    # nothing lost: every increment landed
    total = warm + LAUNCHES
    for i, buf in enumerate(counters):
        out = np.empty(N, np.uint32)
        pool.pool_to_host(buf, out)
        expect = total // COUNTERS + (1 if i < total % COUNTERS else 0)
        assert (out == expect).all(), f"counter {i}: {out[:4]}..., expected {expect}"
    assert end["dispatches"] - start["dispatches"] == LAUNCHES + fills
    # flat: the same Vulkan objects, the same device memory, the same buffers
    recycled = ("fences",)
    assert {k: v for k, v in end["live"].items() if k not in recycled} == {
        k: v for k, v in start["live"].items() if k not in recycled
    }, (start["live"], end["live"])
    assert end["live"]["fences"] <= start["live"]["fences"] + 4, (start["live"], end["live"])
    assert end["pool"] == start["pool"], (start["pool"], end["pool"])
    # A leak grows with the work done, so the second half, which repeats the first, must not grow the process. The
    # first half may: the first time the pool's cache reaches its peak (4 GiB on an H200, which runs the launches
    # far ahead of the releases' frees), the driver's and the C library's heaps grow with it and keep what they took.
    growth = end["rss"] - half["rss"]
    assert growth < (16 << 20), f"resident memory grew by {growth / 2**20:.1f} MiB in the second half"
    growth = end["rss"] - start["rss"]
    assert growth < (128 << 20), f"resident memory grew by {growth / 2**20:.1f} MiB"
    for buf in counters:
        pool.release(buf)
