#!/usr/bin/env python3
"""Where the host's time goes in one GPT-2 decode token, on one tinygrad device: ``bench --tinygrad``'s gpt2_decode
workload (GPT-2-small shape, batch 1, one TinyJit step per token, each token's result read back), profiled with
cProfile over one pass of its tokens after an untimed pass, and printed per token: the wall time, then the functions
with the most time of their own and the most time under them.

    python3 scripts/decode-profile.py VK          # tinygrad's VK device (vkbackend)
    python3 scripts/decode-profile.py CUDA        # tinygrad's CUDA device, to compare
    python3 scripts/decode-profile.py VK --quick  # the small model bench --tinygrad --quick decodes
    python3 scripts/decode-profile.py VK --only vkbackend   # only vkbackend's own functions

From Python 3.12 cProfile sees every thread, vkbackend's worker included; a profiled token is slower than a plain
one. Run it from a checkout (tinygrad 0.14.0 installed); a CUDA run needs nvrtc on the loader's path.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("device", help="the tinygrad device: VK, CUDA, CPU, ...")
    parser.add_argument("--quick", action="store_true", help="the small model of bench --tinygrad --quick")
    parser.add_argument("--top", type=int, default=15, help="functions listed in each table")
    parser.add_argument("--only", default="", help="list only functions whose file's path contains this (vkbackend)")
    args = parser.parse_args(argv)
    os.environ["DEV"] = args.device  # before tinygrad is imported: the model's weights are made there
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    if args.device == "VK":
        import vkbackend.tinygrad  # noqa: F401 - the VK device, for a checkout that was never installed
    from vkbackend.bench.tinygrad.cases import TinygradWorkloads
    from vkbackend.bench.tinygrad.spec import TgSizes

    sizes = TgSizes.quick() if args.quick else TgSizes.full()
    decode = TinygradWorkloads(args.device, sizes).gpt2_decode()
    decode()  # compilation and JIT capture
    start = time.perf_counter()
    decode()
    plain = (time.perf_counter() - start) / sizes.gpt2_tokens
    profile = cProfile.Profile()
    profile.enable()
    start = time.perf_counter()
    decode()
    profiled = (time.perf_counter() - start) / sizes.gpt2_tokens
    profile.disable()
    tokens = sizes.gpt2_tokens
    print(
        f"{args.device}: {plain * 1e3:.2f} ms a token ({1 / plain:.1f} tokens/s) over {tokens} tokens; "
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
