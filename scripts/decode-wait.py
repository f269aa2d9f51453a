#!/usr/bin/env python3
"""How long a GPT-2 decode token's result takes after its first graph replay, on one tinygrad device: per token, from
the first replay's start to the end of the copy-out of the result (which waits for the GPU), and the copy-out alone
when the GPU is already done (a 4 ms sleep before it); ``bench --tinygrad``'s gpt2_decode workload after two untimed
passes, medians [p10-p90] over the tokens, each way twice. The first figure less the second is the GPU's work after
the first replay plus the latency of getting it there and back.

    python3 scripts/decode-wait.py VK
    python3 scripts/decode-wait.py CUDA --tokens 128

Run it from a checkout (tinygrad 0.14.0 installed); a CUDA run needs nvrtc on the loader's path.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

SLEEP_S = 0.004  # before the copy-out, in the second way: longer than a token's GPU work


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from vkbackend.bench.tinygrad.decoding import warm_decoder_from_argv

    args, token, seeded = warm_decoder_from_argv(__doc__, argv, 128, "tokens timed each way")
    from tinygrad import Device

    from vkbackend.bench.tinygrad.cases import graph_runner_types

    marks: dict[str, float | None] = {"first": None, "sleep": 0.0, "copy_start": 0.0, "copy_end": 0.0}
    for cls in graph_runner_types():
        _first_call(cls, marks)
    _timed_copyout(type(Device[args.device].allocator), marks)
    for _ in range(2):
        for way, sleep in (("first replay to result", 0.0), ("copy-out alone, the GPU done", SLEEP_S)):
            marks["sleep"] = sleep
            took = []
            for k in range(args.tokens):
                marks["first"] = None
                token(k % len(seeded), seeded[k % len(seeded)])
                first, start, end = marks["first"], marks["copy_start"], marks["copy_end"]
                assert first is not None and start is not None and end is not None
                took.append((end - (start if sleep else first)) * 1e6)
            took.sort()
            p10, p90 = took[len(took) // 10], took[9 * len(took) // 10]
            print(f"{args.device}: {way:30s} {statistics.median(took):8.1f} us [{p10:.1f}-{p90:.1f}]", flush=True)
    return 0


def _first_call(cls, marks) -> None:
    """Note when a token's first graph replay begins."""
    call = cls.__call__

    def wrapper(self, *args, **kwargs):
        if marks["first"] is None:
            marks["first"] = time.perf_counter()
        return call(self, *args, **kwargs)

    cls.__call__ = wrapper


def _timed_copyout(cls, marks) -> None:
    """Time the allocator's copy-out, after the sleep the current way asks for."""
    copyout = cls._copyout

    def wrapper(self, *args, **kwargs):
        if marks["sleep"]:
            time.sleep(marks["sleep"])
        marks["copy_start"] = time.perf_counter()
        try:
            return copyout(self, *args, **kwargs)
        finally:
            marks["copy_end"] = time.perf_counter()

    cls._copyout = wrapper


if __name__ == "__main__":
    sys.exit(main())
