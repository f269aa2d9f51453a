"""GPU time of every kernel of a captured ``TinyJit``, one launch at a time, through tinygrad 0.14.0's own executor.

``DEBUG=2`` makes tinygrad time each kernel too, but only prints the figures. Here the captured JIT's calls are
replayed with ``engine.realize.exec_kernel`` under an ``ExecContext(wait=True)``: the path ``DEBUG=2`` and BEAM use,
where each device's program returns its own time for the launch (``Device.launch_timed`` on VK, CUDA events on
CUDA, the wall time of the call on CPU). Graph batches (CUDA graphs) are taken apart so that every kernel is
timed on its own; copies run untimed, in their place, so later kernels read what they expect.
"""

from __future__ import annotations

from collections.abc import Iterator

from tinygrad.engine.jit import _prepare_jit_inputs, _TinyJit
from tinygrad.engine.realize import ExecContext, exec_kernel, pm_exec
from tinygrad.helpers import ansistrip
from tinygrad.uop.ops import Ops, UOp


def _calls(linear: UOp) -> Iterator[UOp]:
    """The CALLs of a captured linear, with graph batches replaced by the calls they hold (same inputs, same
    order)."""
    for call in linear.src:
        ast = call.src[0]
        if ast.op is Ops.CUSTOM_FUNCTION and ast.arg == "graph":
            yield from ast.src[0].src
        else:
            yield call


def kernel_times(jit: _TinyJit, *args: object) -> list[tuple[str, float]]:
    """(kernel name, GPU seconds) for each kernel of ``jit`` (already captured) run on ``args``, in launch order.

    This runs the step once more, kernel by kernel, so it changes what the step changes (weights, optimiser state);
    unlike a JIT call it does not copy inputs the step writes first (a training step's inputs are only read).
    """
    captured = jit.captured
    if captured is None:
        raise RuntimeError("kernel_times needs a captured TinyJit (call it at least twice first)")
    input_uops, var_vals, _, _ = _prepare_jit_inputs(args, {})
    ctx = ExecContext(var_vals, tuple(input_uops), update_stats=False, jit=True, wait=True)
    times: list[tuple[str, float]] = []
    for call in _calls(captured.linear):
        ast = call.src[0]
        if ast.op is Ops.PROGRAM:
            seconds = exec_kernel(ctx, call, ast)
            times.append((ansistrip(ast.arg.name), float(sum(s or 0.0 for s in seconds))))
        else:
            pm_exec.rewrite(call, ctx)
    return times
