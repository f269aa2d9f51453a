#!/usr/bin/env python3
"""Upload and download speed of one buffer at several sizes, on the first Vulkan device: GB/s as median [min-max] of
5, into a host array that is reused and, for downloads, also into a fresh ``np.empty`` (whose page faults count).

    python3 scripts/transfer-sizes.py                     # 64 MiB, 1, 4 and 16 GiB
    python3 scripts/transfer-sizes.py 1 16                # sizes in MiB

An upload is timed to the sync after it (the data is on the device); a download is a sync point by itself. A 256 MiB
transfer first warms the host's memory up: a virtual machine's memory grows as it is first touched.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import vkbackend  # noqa: E402 - after the checkout is on the path


def spread(values: list[float]) -> str:
    values = sorted(values)
    return f"{values[len(values) // 2]:6.1f} [{values[0]:.1f}-{values[-1]:.1f}]"


def main(argv: list[str]) -> int:
    sizes = [int(float(x) * (1 << 20)) for x in (argv or ["64", "1024", "4096", "16384"])]
    dev = vkbackend.devices()[0]
    pool = dev.memory_pool
    warm = np.ones(1 << 28, np.uint8)
    buf = pool.allocate(warm.nbytes)
    pool.host_to_pool(warm, buf)
    pool.pool_to_host(buf, warm)
    pool.release(buf)
    del warm
    print(f"{dev.info.name}: GB/s, median [min-max] of 5")
    print("   MiB  upload              download (reused)   download (fresh)")
    status = 0
    for n in sizes:
        src, dst = np.full(n, 7, np.uint8), np.zeros(n, np.uint8)
        buf = pool.allocate(n)
        up, down, fresh = [], [], []
        exact = True
        for _ in range(5):
            start = time.perf_counter()
            pool.host_to_pool(src, buf)
            dev.sync()
            up.append(n / (time.perf_counter() - start) / 1e9)
            start = time.perf_counter()
            pool.pool_to_host(buf, dst)
            down.append(n / (time.perf_counter() - start) / 1e9)
            start = time.perf_counter()
            out = np.empty(n, np.uint8)
            pool.pool_to_host(buf, out)
            fresh.append(n / (time.perf_counter() - start) / 1e9)
            exact &= bool(out[0] == 7 and out[-1] == 7 and dst[n // 2] == 7)
            del out
        print(
            f"{n >> 20:6d}  {spread(up)}  {spread(down)}  {spread(fresh)}  {'exact' if exact else 'WRONG'}", flush=True
        )
        status |= not exact
        pool.release(buf)
        del src, dst
    dev.close()
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
