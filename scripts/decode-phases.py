#!/usr/bin/env python3
"""Where the caller's time goes in each GPT-2 decode token on one tinygrad device, untraced and unprofiled:
``bench --tinygrad``'s gpt2_decode workload after two untimed passes, each token split into tinygrad's preparation of
the JIT's inputs (``_prepare_jit_inputs``), the graph replays (each graph runner's ``__call__``), the copy-out of the
token's result (the allocator's ``_copyout``, which waits for the GPU) and the rest (tinygrad's own Python around
them); on VK also the worker's loop rounds per token, and then the time its C calls spent recording and submitting
(``Device.stats()``'s ``submit_ns``) a token and a dispatch. Microseconds, median [p10-p90]. Then the GPU time of each
of the JIT's graphs for one token, each run whole and alone through tinygrad's executor (``wait=True``: vkbackend's
timed replay on VK, events around the CUDA graph on CUDA), median of 20 tokens.

    python3 scripts/decode-phases.py VK
    python3 scripts/decode-phases.py CUDA
    python3 scripts/decode-phases.py VK --tokens 512 --quick

On the H200's hosts a process is sometimes slow as a whole (docs/performance.md): compare the phases within each
process, and run several. Run it from a checkout (tinygrad 0.14.0 installed); a CUDA run needs nvrtc on the
loader's path.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from vkbackend.bench.tinygrad.decoding import warm_decoder_from_argv

    args, token, seeded = warm_decoder_from_argv(__doc__, argv, 256, "tokens timed")
    import tinygrad.engine.jit as jit
    from tinygrad import Device

    from vkbackend.bench.tinygrad.call_times import CallTimes
    from vkbackend.bench.tinygrad.cases import graph_runner_types

    spent = CallTimes()

    spent.wrap(jit, "_prepare_jit_inputs", "prepare the JIT's inputs")
    runners = graph_runner_types()
    for cls in runners:
        spent.wrap(cls, "__call__", "graph replays")
    spent.wrap(type(Device[args.device].allocator), "_copyout", "copy-out, with its wait")
    vk = Device[args.device].vk if args.device == "VK" else None
    progress = vk._worker.progress if vk is not None else None
    recorded = vk.stats() if vk is not None else None
    rows = []
    for k in range(args.tokens):
        spent.clear()
        i = k % len(seeded)
        turns = progress.worker_turns if progress is not None else 0
        start = time.perf_counter()
        token(i, seeded[i])
        total = time.perf_counter() - start
        row = {key: value * 1e6 for key, value in spent.seconds.items()}
        row["the rest"] = total * 1e6 - sum(row.values())
        row["token"] = total * 1e6
        if progress is not None:
            row["worker rounds (count)"] = (progress.worker_turns - turns) & 0xFFFFFFFF
        rows.append(row)
    recording = ""
    if vk is not None and recorded is not None:
        now = vk.stats()
        dispatches, spent_ns = now["dispatches"] - recorded["dispatches"], now["submit_ns"] - recorded["submit_ns"]
        recording = (
            f"  the worker's recording and submits: {spent_ns / 1e3 / args.tokens:.1f} us a token, "
            f"{spent_ns / 1e3 / max(dispatches, 1):.2f} us a dispatch ({dispatches / args.tokens:.0f} a token)"
        )
    graph_us = graph_times(jit, token.__closure__, args.device)
    names = ", ".join(sorted(c.__name__ for c in runners)) or "none"
    print(f"{args.device} (graph runners: {names}): {args.tokens} tokens, us, median [p10-p90]")
    for key in rows[0]:
        values = sorted(row[key] for row in rows)
        p10, p90 = values[len(values) // 10], values[9 * len(values) // 10]
        print(f"  {key:28s} {statistics.median(values):9.1f} [{p10:.1f}-{p90:.1f}]")
    if recording:
        print(recording)
    if graph_us:
        print(
            f"  GPU us per graph, run alone: {', '.join(f'{us:.1f}' for us in graph_us)}; {sum(graph_us):.1f} a token"
        )
    return 0


def graph_times(jit, closure, device: str) -> list[float]:
    """Median GPU microseconds of each call of the decoder's captured JIT (graphs, or kernels where there is no graph
    runner), over 20 tokens at positions 0, 5, 10, ..."""
    from tinygrad import Tensor, dtypes
    from tinygrad.engine.realize import ExecContext, pm_exec

    # the decoder's step (a TinyJit) and position variable, from the closure of cases.py's gpt2_decoder token function
    cells = {type(c.cell_contents).__name__: c.cell_contents for c in closure or ()}
    step, pos = cells.get("_TinyJit"), cells.get("UOp")
    if step is None or pos is None or step.captured is None:
        return []
    per_token = []
    for k in range(20):
        inputs = (Tensor([[9]], dtype=dtypes.int32, device=device), pos.bind((5 * k) % (pos.vmax + 1)))
        input_uops, var_vals, _, _ = jit._prepare_jit_inputs(inputs, {})
        ctx = ExecContext(var_vals, tuple(input_uops), update_stats=False, jit=True, wait=True)
        per_token.append(
            [sum(t or 0.0 for t in (pm_exec.rewrite(c, ctx) or [])) * 1e6 for c in step.captured.linear.src]
        )
    return [statistics.median(column) for column in zip(*per_token)]


if __name__ == "__main__":
    sys.exit(main())
