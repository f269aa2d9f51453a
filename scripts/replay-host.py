#!/usr/bin/env python3
"""The host's time in each of a GPT-2 decoder's graph replays on VK, the launch itself left out: tinygrad's
``VKGraph.__call__`` with ``LaunchGraph.launch`` a no-op, each of the JIT's graphs called again and again with one
token's inputs and the position variable moving, so only the update path is timed (new variables, grids and input
buffers into the graph's records). Microseconds a call, median [min-max] over 5 rounds of ``--calls`` calls. Also per
graph: the barriers its launches take in order (a launch that reads or writes what one since the last barrier wrote,
or writes what one read) and its longest chain of launches each of which depends on the one before: no order of its
launches takes fewer barriers than that chain.

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
    print(f"{len(calls)} graphs; us a call, median [min-max] of 5 rounds of {args.calls}; barriers, longest chain")
    for runner, input_uops, var_vals in calls.values():
        barriers, chain = _barriers_and_chain(runner)
        rounds = []
        for _ in range(5):
            start = time.perf_counter_ns()
            for k in range(args.calls):
                runner(input_uops, dict.fromkeys(var_vals, k % 200 + 1))
            rounds.append((time.perf_counter_ns() - start) / args.calls / 1e3)
        print(
            f"  {len(runner.calls):4d} kernels: {statistics.median(rounds):7.1f} [{min(rounds):.1f}-{max(rounds):.1f}]"
            f"; {barriers} barriers, a chain of {chain} launches"
        )
    return 0


def _barriers_and_chain(runner) -> tuple[int, int]:
    """The barriers a VKGraph's launches take in order, as the recorder places them, and the length of its longest
    chain of dependent launches (reads after writes, writes after reads or writes, of one buffer or its views)."""
    graph, device = runner.graph, runner.dev.vk
    pool = device.memory_pool

    def root(buf: int) -> int:
        entry = pool.entries[buf]
        return entry.root.id if entry.root is not None else buf

    epoch, barriers, read, written = 0, 0, {}, {}
    level_read: dict[int, int] = {}
    level_written: dict[int, int] = {}
    chain = 0
    for target, held in zip(graph._targets, graph._held):
        if target is None:
            continue
        info = device.program_info(target[0])
        access = [(b.readable, b.writable) for b in (*info.buffers, *info.addresses)]
        uses = [(root(buf), r, w) for buf, (r, w) in zip(held, access)]
        if any(written.get(b) == epoch or (w and read.get(b) == epoch) for b, _, w in uses):
            epoch, barriers = epoch + 1, barriers + 1
        level = 0
        for b, _, w in uses:
            level = max(level, level_written.get(b, 0) + 1, level_read.get(b, 0) + 1 if w else 0)
        for b, r, w in uses:
            if r:
                read[b], level_read[b] = epoch, max(level_read.get(b, 0), level)
            if w:
                written[b], level_written[b] = epoch, max(level_written.get(b, 0), level)
        chain = max(chain, level)
    return barriers, chain


if __name__ == "__main__":
    sys.exit(main())
