#!/usr/bin/env python3
"""Uploads into a small buffer on the first Vulkan device, each after a sync (the device quiet, unless the worker is
still finishing its loop: the copy commands counted say so): ``host_to_pool`` alone and to the sync after it, at 4 B,
1, 16 and 64 KiB and 1, 4 and 16 MiB; then a decoding step's skeleton: upload a 4-byte token, launch a kernel that
reads it, read 8 bytes back. Microseconds as min / median / p99 / max of 2,000 (after 200
untimed; 200 after 20 from 1 MiB), each result checked, and the copy commands the uploads queued (none where they were
written straight into mapped memory).

    python3 scripts/small-uploads.py
    VKBACKEND_DIRECT_ACCESS=0 python3 scripts/small-uploads.py   # every upload through staging, to compare
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import vkbackend  # noqa: E402 - after the checkout is on the path

TOKEN = """#version 450
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer A { uint token[]; };
layout(std430, binding = 1) buffer B { uint y[]; };
void main() { uint i = gl_GlobalInvocationID.x; if (i < 2) y[i] = token[0] * 3u + i; }
"""
ROUNDS, UNTIMED = 2200, 200


def spread(ns: list[int]) -> str:
    ns = sorted(ns)
    n = len(ns)
    return f"{ns[0] / 1e3:.2f} / {ns[n // 2] / 1e3:.2f} / {ns[int(n * 0.99)] / 1e3:.2f} / {ns[-1] / 1e3:.2f}"


def main() -> int:
    dev = vkbackend.devices()[0]
    pool = dev.memory_pool
    print(f"{dev.info.name}: us, min / median / p99 / max")
    exact = True
    for n in (4, 1 << 10, 16 << 10, 64 << 10, 1 << 20, 4 << 20, 16 << 20):
        rounds, untimed = (ROUNDS, UNTIMED) if n < 1 << 20 else (ROUNDS // 10, UNTIMED // 10)
        buf = pool.allocate(n)
        data, back = np.arange(n // 4, dtype=np.uint32), np.empty(n // 4, np.uint32)
        calls, synced = [], []
        copies = dev.stats()["copies"]
        for i in range(rounds):
            data[0] = i
            dev.sync()
            start = time.perf_counter_ns()
            pool.host_to_pool(data, buf)
            called = time.perf_counter_ns()
            dev.sync()
            if i >= untimed:
                calls.append(called - start)
                synced.append(time.perf_counter_ns() - start)
        copies = dev.stats()["copies"] - copies
        pool.pool_to_host(buf, back)
        exact &= bool((back == data).all())
        print(
            f"upload {n:8d} B: the call {spread(calls)}; to the sync after it {spread(synced)}; {copies} copy commands"
        )
        pool.release(buf)
    prog = dev.compile(vkbackend.compile_glsl(TOKEN))
    token, out = pool.allocate(4), pool.allocate(8)
    word, result = np.zeros(1, np.uint32), np.empty(2, np.uint32)
    trips = []
    for i in range(ROUNDS):
        word[0] = i
        start = time.perf_counter_ns()
        pool.host_to_pool(word, token)
        dev.launch(prog, [token, out], [], (1, 1, 1))
        pool.pool_to_host(out, result)
        if i >= UNTIMED:
            trips.append(time.perf_counter_ns() - start)
        exact &= bool(result[0] == 3 * i and result[1] == 3 * i + 1)
    print(f"upload 4 B, launch, read 8 B back: {spread(trips)}")
    print("every result exact" if exact else "WRONG RESULTS")
    dev.close()
    return 0 if exact else 1


if __name__ == "__main__":
    sys.exit(main())
