#!/usr/bin/env python3
"""The GPU time of each kernel of ``bench --tinygrad``'s ResNet-50 forward on one tinygrad device, and two devices'
kernels side by side: what a workload's VK/CUDA ratio is made of.

Each kernel of the captured JIT is launched alone and timed by its device (``vkbackend.bench.tinygrad.kernels``:
``Device.launch_timed`` on VK, CUDA events on CUDA), ``--passes`` times; the median of each is kept. With ``--json``
the figures go to a file, and ``--compare`` reads two such files, pairs their kernels by launch order (each row keeps
its index), lists the ``--top`` pairs that differ most either way, and gives each device's total. tinygrad gives both
devices the same kernels where their limits agree; a pair whose names differ is listed with both names, and lists of
different lengths are paired only up to the shorter (the totals are of each whole list).

    python3 scripts/kernel-times.py VK --json vk.json
    python3 scripts/kernel-times.py CUDA --json cuda.json
    python3 scripts/kernel-times.py --compare vk.json cuda.json --top 25
    python3 scripts/kernel-times.py VK --quick          # the small ResNet of bench --tinygrad --quick

Run it from a checkout (tinygrad 0.14.0 installed); a CUDA run needs nvrtc on the loader's path.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("device", nargs="?", help="the tinygrad device to time: VK, CUDA, ...")
    parser.add_argument("--passes", type=int, default=5, help="timed passes over the kernels (default 5)")
    parser.add_argument("--quick", action="store_true", help="the small ResNet of bench --tinygrad --quick")
    parser.add_argument("--json", metavar="FILE", help="also write the figures to FILE")
    parser.add_argument("--compare", nargs=2, metavar="FILE", help="two --json files: their kernels side by side")
    parser.add_argument("--top", type=int, default=20, help="--compare: kernels listed (default 20)")
    args = parser.parse_args(argv)
    if args.top < 1:
        parser.error("--top must be at least 1")
    if args.compare:
        if args.device or args.json:
            parser.error("--compare reads two files: it takes no device and writes no --json")
        return compare(*(json.loads(Path(f).read_text()) for f in args.compare), top=args.top)
    if not args.device:
        parser.error("name a device, or --compare two files")
    if args.passes < 1:
        parser.error("--passes must be at least 1")
    times = time_kernels(args.device, args.passes, args.quick)
    total = sum(us for _, us in times)
    print(f"{args.device}: {len(times)} kernels, {total:.1f} us in all (median of {args.passes} passes each)")
    for name, us in sorted(times, key=lambda t: -t[1])[:10]:
        print(f"  {us:10.1f} us  {name}")
    if args.json:
        Path(args.json).write_text(json.dumps({"device": args.device, "kernels": times}))
    return 0


def time_kernels(device: str, passes: int, quick: bool) -> list[tuple[str, float]]:
    """(name, median GPU microseconds) of each kernel of the captured ResNet forward on ``device``, in launch order."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    os.environ["DEV"] = device
    if device == "VK":
        import vkbackend.tinygrad  # noqa: F401, PLC0415 - the VK device, for a checkout that was never installed
    from vkbackend.bench.tinygrad.cases import warm_resnet_jit  # noqa: PLC0415 - imports tinygrad: after DEV
    from vkbackend.bench.tinygrad.kernels import kernel_times  # noqa: PLC0415

    forward, x = warm_resnet_jit(device, quick)
    runs = [kernel_times(forward, x) for _ in range(passes)]
    return [(name, statistics.median(run[i][1] for run in runs) * 1e6) for i, (name, _) in enumerate(runs[0])]


def compare(a: dict, b: dict, top: int) -> int:
    """Print two devices' kernels side by side: the ``top`` pairs that differ most either way, then the totals."""
    ka, kb = a["kernels"], b["kernels"]
    da, db = a["device"], b["device"]
    if len(ka) != len(kb):
        print(f"{da} has {len(ka)} kernels and {db} {len(kb)}: paired in launch order up to the shorter")
    rows = [(na, ta, nb, tb) for (na, ta), (nb, tb) in zip(ka, kb)]
    print(f"{'index':>5} {da + ' us':>10} {db + ' us':>10} {'ratio':>6}  kernel")
    for i in sorted(range(len(rows)), key=lambda i: -abs(rows[i][1] - rows[i][3]))[:top]:
        na, ta, nb, tb = rows[i]
        name = na if na == nb else f"{na} | {nb}"
        print(f"{i:5d} {ta:10.1f} {tb:10.1f} {ta / tb if tb else float('inf'):6.2f}  {name}")
    ta, tb = sum(t for _, t in ka), sum(t for _, t in kb)
    ratio = f" ({ta / tb:.3f}x)" if tb else ""
    same = sum(r[0] == r[2] for r in rows)
    print(f"total {ta:.1f} us on {da}, {tb:.1f} on {db}{ratio}; {same} of {len(rows)} pairs named alike")
    return 0


if __name__ == "__main__":
    sys.exit(main())
