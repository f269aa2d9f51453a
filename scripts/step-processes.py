#!/usr/bin/env python3
"""The synchronised MLP training step of ``bench --tinygrad`` (``mlp_step``: 784-1024-1024-10, batch 512, Adam,
TinyJit) in several fresh processes, so that a figure that moves from process to process shows: each process warms
up, times ``--steps`` steps, each followed by a sync, and prints one line of min / median / p90 / max ms.

    python3 scripts/step-processes.py VK --processes 5
    python3 scripts/step-processes.py CUDA --processes 2     # tinygrad's CUDA device, to compare
    python3 scripts/step-processes.py VK --pipelined         # --steps steps, one sync: ms per step, 5 samples

Run it from a checkout (tinygrad 0.14.0 installed); a CUDA run needs nvrtc on the loader's path.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def one_process(device: str, steps: int, pipelined: bool, quick: bool) -> dict:
    """Runs in the child: the timed steps of one process."""
    os.environ["DEV"] = device  # before tinygrad is imported: the model's weights are made there
    sys.path.insert(0, str(ROOT))
    if device == "VK":
        import vkbackend.tinygrad  # noqa: F401 - the VK device, for a checkout that was never installed
    from vkbackend.bench.tinygrad.cases import TinygradWorkloads
    from vkbackend.bench.tinygrad.spec import TgSizes

    work = TinygradWorkloads(device, TgSizes.quick() if quick else TgSizes.full())
    step = work.mlp_step()
    for _ in range(5):
        step()
        work.sync()
    ms: list[float] = []
    if pipelined:
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(steps):
                step()
            work.sync()
            ms.append((time.perf_counter() - start) * 1e3 / steps)
    else:
        for _ in range(steps):
            start = time.perf_counter()
            step()
            work.sync()
            ms.append((time.perf_counter() - start) * 1e3)
    ms.sort()
    return {
        "device": device,
        "pipelined": pipelined,
        "min": round(ms[0], 3),
        "median": round(statistics.median(ms), 3),
        "p90": round(ms[int(0.9 * len(ms))], 3),
        "max": round(ms[-1], 3),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("device", help="the tinygrad device: VK, CUDA, CPU, ...")
    parser.add_argument("--processes", type=int, default=5, help="fresh processes, one line each")
    parser.add_argument("--steps", type=int, default=100, help="timed steps a process")
    parser.add_argument("--pipelined", action="store_true", help="one sync after all the steps")
    parser.add_argument("--quick", action="store_true", help="the small model of bench --tinygrad --quick")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(one_process(args.device, args.steps, args.pipelined, args.quick)), flush=True)
        return 0
    child = [sys.executable, __file__, args.device, "--child", "--steps", str(args.steps)]
    child += ["--pipelined"] * args.pipelined + ["--quick"] * args.quick
    status = 0
    for _ in range(args.processes):
        proc = subprocess.run(child, capture_output=True, text=True)
        lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
        if proc.returncode or not lines:
            print(f"a process failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}", file=sys.stderr)
            status = 1
            continue
        print(lines[-1], flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
