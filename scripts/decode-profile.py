#!/usr/bin/env python3
"""Where the host's time goes in one GPT-2 decode token, on one tinygrad device: ``bench --tinygrad``'s gpt2_decode
workload (GPT-2-small shape, batch 1, one TinyJit step per token, each token's result read back), profiled with
cProfile over one pass of its tokens after an untimed pass, and printed per token: the wall time, then the functions
with the most time of their own and the most time under them. With ``--passes N`` it first times N plain passes
and prints each one's tokens/s and min / median / p90 / max ms a token: on the H200's hosts a process's passes
switch between two speeds (docs/performance.md), so one pass says little.

    python3 scripts/decode-profile.py VK          # tinygrad's VK device (vkbackend)
    python3 scripts/decode-profile.py CUDA        # tinygrad's CUDA device, to compare
    python3 scripts/decode-profile.py VK --quick  # the small model bench --tinygrad --quick decodes
    python3 scripts/decode-profile.py VK --only vkbackend   # only vkbackend's own functions
    python3 scripts/decode-profile.py VK --passes 8         # 8 timed passes before the profiled one

From Python 3.12 cProfile sees every thread, vkbackend's worker included; a profiled token is slower than a plain
one. Run it from a checkout (tinygrad 0.14.0 installed); a CUDA run needs nvrtc on the loader's path.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import statistics
import sys
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("device", help="the tinygrad device: VK, CUDA, CPU, ...")
    parser.add_argument("--quick", action="store_true", help="the small model of bench --tinygrad --quick")
    parser.add_argument("--top", type=int, default=15, help="functions listed in each table")
    parser.add_argument("--only", default="", help="list only functions whose file's path contains this (vkbackend)")
    parser.add_argument("--passes", type=int, default=1, help="plain passes timed token by token before profiling")
    args = parser.parse_args(argv)
    if args.passes < 1:
        parser.error("--passes must be at least 1")
    os.environ["DEV"] = args.device  # before tinygrad is imported: the model's weights are made there
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    if args.device == "VK":
        import vkbackend.tinygrad  # noqa: F401 - the VK device, for a checkout that was never installed
    from vkbackend.bench.tinygrad.cases import TinygradWorkloads
    from vkbackend.bench.tinygrad.spec import TgSizes

    sizes = TgSizes.quick() if args.quick else TgSizes.full()
    token, seeded = TinygradWorkloads(args.device, sizes).gpt2_decoder()

    def decode() -> list[float]:
        """One pass over the seeded tokens: ms per token."""
        ms = []
        for i, t in enumerate(seeded):
            start = time.perf_counter()
            token(i, t)
            ms.append((time.perf_counter() - start) * 1e3)
        return ms

    decode()  # compilation and JIT capture
    tokens = sizes.gpt2_tokens
    plain = 0.0
    for n in range(args.passes):
        ms = sorted(decode())
        plain += sum(ms) / 1e3 / tokens / args.passes
        print(
            f"pass {n}: {tokens / sum(ms) * 1e3:.1f} tokens/s; ms a token min {ms[0]:.2f} median "
            f"{statistics.median(ms):.2f} p90 {ms[int(0.9 * len(ms))]:.2f} max {ms[-1]:.2f}"
        )
    profile = cProfile.Profile()
    profile.enable()
    start = time.perf_counter()
    decode()
    profiled = (time.perf_counter() - start) / sizes.gpt2_tokens
    profile.disable()
    print(
        f"{args.device}: {plain * 1e3:.2f} ms a token ({1 / plain:.1f} tokens/s) over {args.passes} x {tokens} tokens; "
        f"{profiled * 1e3:.2f} ms a token while profiled"
    )
    stats = pstats.Stats(profile)
    for key, title in (("tottime", "own time"), ("cumulative", "time under the function")):
        print(f"\nus per token, by {title}:")
        rows = sorted(
            (kv for kv in stats.stats.items() if args.only in kv[0][0]),
            key=lambda kv: kv[1][2 if key == "tottime" else 3],
            reverse=True,
        )
        for (file, line, name), (_, calls, own, under, _) in rows[: args.top]:
            where = f"{Path(file).parent.name}/{Path(file).name}:{line}({name})" if file != "~" else name
            print(
                f"  {own / tokens * 1e6:9.1f} own {under / tokens * 1e6:9.1f} under {calls / tokens:7.1f} calls  "
                f"{where}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
