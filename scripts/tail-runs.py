#!/usr/bin/env python3
"""The slow runs of ``bench --tinygrad``'s ``add`` and ``sum``, and what fell inside them: the same jitted calls on
the same inputs, timed as the bench times them (runs of ``--calls`` calls, the device synchronised before and after
each run), many more runs than the bench makes. It prints one line per case (us per call, min / median / p90 / p99 /
max, and how many runs took more than ``--over`` times the median), then for each such run the host time of each of
its calls, its closing sync, the batches it took and the interpreter's garbage collections that overlapped it.

    python3 scripts/tail-runs.py                      # VK, 300 runs of 10 calls on 64 Mi floats
    DEV=CUDA python3 scripts/tail-runs.py             # tinygrad's CUDA device, to compare
    python3 scripts/tail-runs.py --floats 65536 --runs 20   # small (lavapipe)

Run it from a checkout (tinygrad 0.14.0 installed); a CUDA run needs nvrtc on the loader's path.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

CASES = {"add": (lambda x, y: (x + y).realize(), 2), "sum": (lambda x: x.sum().realize(), 1)}  # fn, inputs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", nargs="+", choices=sorted(CASES), default=["add", "sum"])
    parser.add_argument("--runs", type=int, default=300, help="timed runs per case (default 300)")
    parser.add_argument("--calls", type=int, default=10, help="jitted calls per run (default 10, as the bench)")
    parser.add_argument("--floats", type=int, default=64 << 20, help="elements per array (default 64 Mi)")
    parser.add_argument("--over", type=float, default=1.5, help="a run this many times the median is shown")
    args = parser.parse_args(argv)
    device = os.environ.setdefault("DEV", "VK")  # before tinygrad is imported
    if device == "VK":
        import vkbackend.tinygrad  # noqa: F401 - the VK device, for a checkout that was never installed
    import numpy as np
    from tinygrad import Device, Tensor, TinyJit

    dev = Device[device]
    vk = getattr(dev, "vk", None)
    collections: list[tuple[float, float, int]] = []  # (start, end, generation) of each garbage collection
    began = [0.0]

    def on_gc(phase: str, info: dict) -> None:
        if phase == "start":
            began[0] = time.perf_counter()
        else:
            collections.append((began[0], time.perf_counter(), info["generation"]))

    rng = np.random.default_rng(0)
    a, b = (Tensor(rng.random(args.floats, dtype=np.float32)).realize() for _ in range(2))
    gc.callbacks.append(on_gc)
    try:
        for name in args.cases:
            fn, n_inputs = CASES[name]
            inputs, jit = (a, b)[:n_inputs], TinyJit(fn)
            for _ in range(4):  # capture, then replays
                out = jit(*inputs)
            dev.synchronize()
            runs = []
            for _ in range(args.runs):
                dev.synchronize()
                batches = vk.stats()["batches"] if vk is not None else 0
                start = time.perf_counter()
                calls = []
                for _ in range(args.calls):
                    t = time.perf_counter()
                    out = jit(*inputs)
                    calls.append(time.perf_counter() - t)
                synced = time.perf_counter()
                dev.synchronize()
                end = time.perf_counter()
                batches = vk.stats()["batches"] - batches if vk is not None else None
                runs.append((start, end, (end - start) / args.calls, calls, end - synced, batches))
            report(name, device, runs, collections, args.over)
            expected = fn(*inputs).numpy()  # the same function, eagerly
            if not np.allclose(out.numpy(), expected, rtol=1e-4):
                print(f"  WRONG: the last call's result differs from the eager {name}")
                return 1
    finally:
        gc.callbacks.remove(on_gc)
    return 0


def report(name: str, device: str, runs: list, collections: list, over: float) -> None:
    per_call = sorted(r[2] * 1e6 for r in runs)
    median = statistics.median(per_call)

    def pick(q: float) -> float:
        return per_call[min(len(per_call) - 1, int(q * len(per_call)))]

    slow = [(i, r) for i, r in enumerate(runs) if r[2] * 1e6 > over * median]
    print(
        f"{device} {name}: us per call min {per_call[0]:.1f} median {median:.1f} p90 {pick(0.9):.1f} "
        f"p99 {pick(0.99):.1f} max {per_call[-1]:.1f}; {len(slow)} of {len(runs)} runs over {over}x the median"
    )
    for i, (start, end, call_s, calls, sync_s, batches) in slow:
        inside = [f"generation {g} {(e - s) * 1e3:.2f} ms" for s, e, g in collections if s < end and e > start]
        print(
            f"  run {i}: {call_s * 1e6:.1f} us per call; host us per call {[round(c * 1e6) for c in calls]}; "
            f"closing sync {sync_s * 1e6:.0f} us"
            + ("" if batches is None else f"; {batches} batches")
            + f"; garbage collections inside: {', '.join(inside) or 'none'}"
        )


if __name__ == "__main__":
    sys.exit(main())
