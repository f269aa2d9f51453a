#!/usr/bin/env python3
"""The host (CPU) cost of the paths tinygrad's step times run through, for the vkbackend tree given (default: this
checkout), on the first Vulkan device: a JIT replay of a GPT-2-shaped decode step (``VKGraph.__call__`` per token), a
read-back of 8 bytes (``pool_to_host``), allocate + release of 4 KiB and 10,000 tiny launches then a sync (dependent,
and round robin over 64 buffers), each timed in ``--repeat`` repetitions
(min / median / max of the repetitions); and three round trips through the public API, each timed one by one
``--round-trips`` times (min / median / p99 / max): ``sync_idle`` (a sync with nothing queued), ``launch_sync`` (one
tiny launch, then a sync) and ``readback_small`` (one tiny launch, then a 4-byte read-back). One JSON line per path
with ``--json``.

    python3 scripts/host-costs.py                      # this checkout
    python3 scripts/host-costs.py --tree /tmp/before   # another checkout (its native module built), to compare

Compare two trees by alternating them in one session: the figures move with the machine's load.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

INC = """
#version 450
layout(local_size_x = 64) in;
layout(std430, binding = 0) buffer Y { float y[]; };
void main() { y[gl_GlobalInvocationID.x] += 1.0; }
"""


def _summary(samples: list[float], p99: bool = False) -> dict[str, float]:
    out = {"min": min(samples), "median": statistics.median(samples)}
    if p99:
        out["p99"] = sorted(samples)[min(len(samples) - 1, int(0.99 * len(samples)))]
    return {**out, "max": max(samples)}


def alloc_release(pool, repeat: int, n: int = 20000) -> list[float]:
    """Microseconds per allocate + release of 4 KiB."""
    allocate, release = pool.allocate, pool.release
    release(allocate(4096))
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        for _ in range(n):
            release(allocate(4096))
        out.append((time.perf_counter() - t) / n * 1e6)
    return out


def read_back(pool, repeat: int, n: int = 500) -> list[float]:
    """Microseconds per read-back of 8 bytes (a sync point)."""
    import numpy as np

    buf = pool.allocate(256)
    pool.host_to_pool(np.zeros(64, np.float32), buf)
    out_array = np.empty(2, np.float32)
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        for _ in range(n):
            pool.pool_to_host(buf, out_array)
        out.append((time.perf_counter() - t) / n * 1e6)
    pool.release(buf)
    return out


def round_trips(dev, count: int) -> dict[str, list[float]]:
    """Microseconds of each of ``count`` round trips of each kind, after as many unmeasured ones."""
    import numpy as np

    import vkbackend

    pool = dev.memory_pool
    prog = dev.compile(vkbackend.compile_glsl(INC))
    buf = pool.allocate(256)
    pool.host_to_pool(np.zeros(64, np.float32), buf)
    word = np.empty(1, np.float32)
    launch, sync, clock = dev.launch, dev.sync, time.perf_counter_ns
    bufs, grid = [buf], (1, 1, 1)

    def sync_idle() -> None:
        sync()

    def launch_sync() -> None:
        launch(prog, bufs, (), grid)
        sync()

    def readback_small() -> None:
        launch(prog, bufs, (), grid)
        pool.pool_to_host(buf, word)

    out = {}
    for name, fn in (
        ("sync_idle_us", sync_idle),
        ("launch_sync_us", launch_sync),
        ("readback_small_us", readback_small),
    ):
        samples = []
        for i in range(2 * count):
            t = clock()
            fn()
            if i >= count:
                samples.append((clock() - t) / 1e3)
        out[name] = samples
    expected = float(4 * count)
    if word[0] != expected:
        sys.exit(f"round trips: the buffer holds {word[0]}, expected {expected}")
    pool.release(buf)
    return out


def launches(dev, repeat: int, n: int = 10000) -> dict[str, list[float]]:
    """Microseconds per launch of ``n`` tiny launches then one sync: dependent (one buffer) and independent (64
    buffers round robin), as ``bench``'s launch_chain and launch_independent."""
    import numpy as np

    import vkbackend

    pool = dev.memory_pool
    prog = dev.compile(vkbackend.compile_glsl(INC))
    bufs = [pool.allocate(256) for _ in range(64)]
    for buf in bufs:
        pool.host_to_pool(np.zeros(64, np.float32), buf)
    launch, grid = dev.launch, (1, 1, 1)
    out = {}
    for name, bound in (("launch_chain_us", [[bufs[0]]]), ("launch_independent_us", [[b] for b in bufs])):
        samples = []
        for i in range(repeat + 1):
            t = time.perf_counter()
            for j in range(n):
                launch(prog, bound[j % len(bound)], (), grid)
            dev.sync()
            if i:
                samples.append((time.perf_counter() - t) / n * 1e6)
        out[name] = samples
    for buf in bufs:
        pool.release(buf)
    return out


def graph_replay(repeat: int, tokens: int = 16) -> list[float]:
    """Microseconds per token spent in ``VKGraph.__call__`` while decoding a 12-layer, 64-wide GPT-2-shaped model."""
    import numpy as np
    from tinygrad import Tensor, TinyJit, dtypes
    from tinygrad.helpers import DEV
    from tinygrad.uop.ops import UOp

    import vkbackend.tinygrad  # noqa: F401 - the VK device
    import vkbackend.tinygrad.runtime.graph as graph
    from vkbackend.bench.tinygrad.models import GPT2Decoder, load_seeded

    DEV.value = "VK"
    steps = 8 + repeat * tokens
    model = GPT2Decoder(12, 64, 2, 512, 64, steps)
    load_seeded(model, 0)
    step = TinyJit(lambda tok, pos: model(tok, pos).realize())
    pos = UOp.variable("pos", 0, steps - 1)
    ids = np.random.default_rng(0).integers(0, 512, steps)
    spent: list[float] = []
    call = graph.VKGraph.__call__

    def timed(self, *args, **kwargs):
        t = time.perf_counter()
        result = call(self, *args, **kwargs)
        spent.append(time.perf_counter() - t)
        return result

    graph.VKGraph.__call__ = timed
    out, position = [], 0
    for i in range(8):  # capture and warm up
        step(Tensor([[int(ids[position])]], dtype=dtypes.int32), pos.bind(position)).tolist()
        position += 1
    for _ in range(repeat):
        spent.clear()
        for _ in range(tokens):
            step(Tensor([[int(ids[position])]], dtype=dtypes.int32), pos.bind(position)).tolist()
            position += 1
        out.append(sum(spent) / tokens * 1e6)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--tree",
        type=Path,
        default=Path(__file__).resolve().parent.parent,
        help="the vkbackend checkout to import (its native module built)",
    )
    parser.add_argument("--repeat", type=int, default=7, help="repetitions of each timing")
    parser.add_argument("--round-trips", type=int, default=2000, help="timed round trips of each kind")
    parser.add_argument("--only-round-trips", action="store_true", help="time the round trips alone")
    parser.add_argument("--json", action="store_true", help="one JSON line per path")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(args.tree))
    import vkbackend

    if not Path(vkbackend.__file__).resolve().is_relative_to(args.tree.resolve()):
        sys.exit(f"vkbackend came from {vkbackend.__file__}, not from {args.tree}")
    dev = vkbackend.devices()[0]
    results = round_trips(dev, args.round_trips)
    if not args.only_round_trips:
        results.update(launches(dev, args.repeat))
        results["alloc_release_us"] = alloc_release(dev.memory_pool, args.repeat)
        results["read_back_us"] = read_back(dev.memory_pool, args.repeat)
        try:
            results["graph_replay_us_per_token"] = graph_replay(args.repeat)
        except ImportError as error:
            print(f"graph_replay: skipped ({error}); it needs tinygrad 0.14.0", file=sys.stderr)
    for name, samples in results.items():
        summary = {k: round(v, 2) for k, v in _summary(samples, p99=len(samples) >= 100).items()}
        if args.json:
            print(json.dumps({"path": name, "tree": str(args.tree), **summary}))
        else:
            print(f"{name:28s} " + "  ".join(f"{k} {v:9.2f}" for k, v in summary.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
