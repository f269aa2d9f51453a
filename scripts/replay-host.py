#!/usr/bin/env python3
"""The host's time in each of a GPT-2 decoder's graph replays on VK, the launch itself left out: tinygrad's
``VKGraph.__call__`` with ``LaunchGraph.launch`` a no-op, each of the JIT's graphs called again and again with one
token's inputs and the position variable moving, so only the update path is timed (new variables, grids and input
buffers into the graph's records). Microseconds a call, median [min-max] over 5 rounds of ``--calls`` calls.

    python3 scripts/replay-host.py                 # bench --tinygrad --quick's decoder with 12 layers
    python3 scripts/replay-host.py --full          # bench --tinygrad's decoder

Run it from a checkout (tinygrad 0.14.0 installed); it needs no GPU (lavapipe serves), since nothing is launched.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--full", action="store_true", help="bench --tinygrad's decoder, not the quick one")
    parser.add_argument("--calls", type=int, default=2000, help="calls of each graph a round (default 2000)")
    args = parser.parse_args(argv)
    os.environ["DEV"] = "VK"
    import vkbackend.tinygrad  # noqa: F401, PLC0415 - the VK device, for a checkout that was never installed
    from vkbackend.bench.tinygrad.cases import TinygradWorkloads  # noqa: PLC0415 - imports tinygrad: after DEV
    from vkbackend.bench.tinygrad.spec import TgSizes  # noqa: PLC0415
    from vkbackend.graph import LaunchGraph  # noqa: PLC0415
    from vkbackend.tinygrad.runtime.graph import VKGraph  # noqa: PLC0415

    sizes = TgSizes.full() if args.full else dataclasses.replace(TgSizes.quick(), gpt2_layers=12, gpt2_tokens=16)
    token, seeded = TinygradWorkloads("VK", sizes).gpt2_decoder()
    for _ in range(2):  # the JIT captures its graphs on the second call
        for i, t in enumerate(seeded):
            token(i, t)
    calls: dict[int, tuple] = {}  # per graph runner, one token's call
    replay = VKGraph.__call__

    def seen(self, input_uops, var_vals, wait=False):
        calls.setdefault(id(self), (self, input_uops, dict(var_vals)))
        return replay(self, input_uops, var_vals, wait)

    VKGraph.__call__ = seen
    token(3, seeded[3])
    VKGraph.__call__ = replay
    LaunchGraph.launch = lambda self: None
    print(f"{len(calls)} graphs; us a call, median [min-max] of 5 rounds of {args.calls}")
    for runner, input_uops, var_vals in calls.values():
        rounds = []
        for _ in range(5):
            start = time.perf_counter_ns()
            for k in range(args.calls):
                runner(input_uops, dict.fromkeys(var_vals, k % 200 + 1))
            rounds.append((time.perf_counter_ns() - start) / args.calls / 1e3)
        print(
            f"  {len(runner.calls):4d} kernels: {statistics.median(rounds):7.1f} [{min(rounds):.1f}-{max(rounds):.1f}]"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
