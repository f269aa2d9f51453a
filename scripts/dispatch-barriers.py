#!/usr/bin/env python3
"""GPU time per dispatch inside one batch, with and without a barrier before each: 64 launches of ``y += 1`` on one
buffer (each depends on the one before: a barrier between them) against 64 on 64 buffers (independent: none), on
256 floats (one work group) and on 1 Mi floats. VK times each as a LaunchGraph run alone between timestamps
(``launch_timed``); CUDA as a PyTorch CUDA graph between events. Per dispatch is (T64 - T1) / 63, each T the median
of 40 runs.

    python3 scripts/dispatch-barriers.py VK
    python3 scripts/dispatch-barriers.py CUDA
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

RUNS, WARM, LAUNCHES = 40, 5, 64
SIZES = (256, 1 << 20)


def median_of(run: Callable[[], float]) -> float:
    for _ in range(WARM):
        run()
    return statistics.median(run() for _ in range(RUNS))


def report(name: str, n: int, t: dict[str, float]) -> None:
    per = {k: (t[k] - t["one"]) / (LAUNCHES - 1) for k in ("dependent", "independent")}
    print(
        f"{name} {n:>8} floats: alone {t['one']:.2f} us; per dispatch dependent {per['dependent']:.3f} us, "
        f"independent {per['independent']:.3f} us (64 of them: {t['dependent']:.1f} and {t['independent']:.1f} us)"
    )


def vk() -> None:
    import vkbackend  # noqa: PLC0415 - after the checkout is on the path
    from vkbackend.bench import kernels  # noqa: PLC0415

    dev = vkbackend.devices()[0]
    pool = dev.memory_pool
    prog = dev.compile(kernels.inc(), robust=False)
    for n in SIZES:
        bufs = [pool.allocate(4 * n) for _ in range(LAUNCHES)]
        grid = ((n + 255) // 256, 1, 1)
        graphs = {
            "one": dev.graph([(prog, [bufs[0]], [n], grid)]),
            "dependent": dev.graph([(prog, [bufs[0]], [n], grid)] * LAUNCHES),
            "independent": dev.graph([(prog, [b], [n], grid) for b in bufs]),
        }
        report(dev.info.name, n, {k: median_of(lambda g=g: g.launch_timed() / 1e3) for k, g in graphs.items()})
        for graph in graphs.values():
            graph.close()
        for buf in bufs:
            pool.release(buf)


def cuda() -> None:
    import torch  # noqa: PLC0415

    def captured(ops: Callable[[], None]) -> torch.cuda.CUDAGraph:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                ops()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            ops()
        return graph

    def timed(graph: torch.cuda.CUDAGraph) -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) * 1e3

    for n in SIZES:
        ys = [torch.zeros(n, device="cuda") for _ in range(LAUNCHES)]
        graphs = {
            "one": captured(lambda: ys[0].add_(1)),
            "dependent": captured(lambda: [ys[0].add_(1) for _ in range(LAUNCHES)]),
            "independent": captured(lambda: [y.add_(1) for y in ys]),
        }
        report("CUDA graph", n, {k: median_of(lambda g=g: timed(g)) for k, g in graphs.items()})


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("device", choices=["VK", "CUDA"], help="vkbackend's first device, or PyTorch's CUDA")
    if parser.parse_args(argv).device == "VK":
        vk()
    else:
        cuda()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
