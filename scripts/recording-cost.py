#!/usr/bin/env python3
"""What recording a dispatch costs the worker, by the kind of launch: graphs of 117 launches (a GPT-2 decode token's
largest) of tiny kernels, each replayed and synchronised ``--replays`` times in 5 rounds, and the time the worker's C
calls spent recording and submitting them (``Device.stats()``'s ``submit_ns``: the records walked, the driver's
``vkCmd*`` calls, ``vkQueueSubmit``) divided by the dispatches; median of the rounds, with the wall time of a replay
and its sync. The kinds: one program on distinct buffers (no barrier between launches), on one buffer (a barrier
before each), with three bindings, eight programs in turn (a pipeline bound before each), with and without barriers,
and eight programs of five bindings and four push-constant words in a chain (a decode's kernels look like this).

    python3 scripts/recording-cost.py
    VKBACKEND_PUSH_DESCRIPTORS=0 python3 scripts/recording-cost.py    # descriptor sets instead of push descriptors

The GPU work is a few microseconds a launch, so on a GPU the wall time is mostly recording, submitting and barriers.
Run it from a checkout; the kernels are compiled with glslang.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

LAUNCHES, ROUNDS, WORDS = 117, 5, 256
FIVE = """#version 450
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) buffer X { float x[]; };
layout(std430, set = 0, binding = 1) readonly buffer A { float a[]; };
layout(std430, set = 0, binding = 2) readonly buffer B { float b[]; };
layout(std430, set = 0, binding = 3) readonly buffer C { float c[]; };
layout(std430, set = 0, binding = 4) readonly buffer D { float d[]; };
layout(push_constant) uniform PC { uint n; uint m; uint k; uint l; } pc;
void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i < pc.n) x[i] += a[i % pc.m] + b[i % pc.k] + c[i % pc.l] + d[i] + float(VARIANT);
}
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replays", type=int, default=200, help="replays of each graph a round (default 200)")
    args = parser.parse_args(argv)
    import vkbackend
    from vkbackend.bench import kernels

    dev = vkbackend.devices()[0]
    pool = dev.memory_pool
    inc = dev.compile(kernels.inc(), robust=False)
    add = dev.compile(kernels.add_vec4(), robust=False)
    two = [dev.compile(spirv, robust=False) for spirv in kernels.compile_set(8)]
    five = [dev.compile(vkbackend.compile_glsl(FIVE, {"VARIANT": i}), robust=False) for i in range(8)]
    b = [pool.allocate(4 * WORDS) for _ in range(5 * LAUNCHES)]
    one, n, L = (1, 1, 1), WORDS, range(LAUNCHES)
    kinds = {
        "one program, distinct buffers (1 binding)": [(inc, [b[i]], [n], one) for i in L],
        "one program, one buffer (a barrier each)": [(inc, [b[0]], [n], one)] * LAUNCHES,
        "one program, distinct buffers (3 bindings)": [(add, b[3 * i : 3 * i + 3], [n // 4], one) for i in L],
        "8 programs in turn (2 bindings)": [(two[i % 8], b[2 * i : 2 * i + 2], [n, 1.0], one) for i in L],
        "8 programs in turn, chained (a barrier each)": [(two[i % 8], b[:2], [n, 1.0], one) for i in L],
        "8 programs in turn, 5 bindings, 4 words, chained": [
            (five[i % 8], [b[0], *b[1 + 4 * i : 5 + 4 * i]], [n, n, n, n], one) for i in L
        ],
    }
    print(f"{dev.info.name}: graphs of {LAUNCHES} launches, median of {ROUNDS} rounds of {args.replays} replays")
    print(f"{'launches':50s} {'us a dispatch':>14s} {'replay + sync us':>17s}")
    for name, launches in kinds.items():
        with dev.graph(launches) as graph:
            for _ in range(10):
                graph.launch()
            dev.sync()
            per_dispatch, wall = [], []
            for _ in range(ROUNDS):
                before, start = dev.stats(), time.perf_counter()
                for _ in range(args.replays):
                    graph.launch()
                    dev.sync()
                took, after = time.perf_counter() - start, dev.stats()
                dispatches = max(after["dispatches"] - before["dispatches"], 1)
                per_dispatch.append((after["submit_ns"] - before["submit_ns"]) / dispatches)
                wall.append(took / args.replays)
        print(f"{name:50s} {statistics.median(per_dispatch) / 1e3:14.3f} {statistics.median(wall) * 1e6:17.1f}")
    for buf in b:
        pool.release(buf)
    for prog in (inc, add, *two, *five):
        dev.release_program(prog)
    return 0


if __name__ == "__main__":
    sys.exit(main())
