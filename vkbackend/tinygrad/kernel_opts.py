"""Realize a tinygrad computation with the optimisations of its last kernel chosen by hand.

tinygrad picks a kernel's optimisations itself (its heuristics, or BEAM search); these run one kernel under a given
list of them, as BEAM times a candidate: to reproduce what a search picked, or to check the renderer under
optimisations the heuristics would not take (``tests/tinygrad``, ``scripts/fuzz-tensor-cores.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np
from tinygrad import Tensor
from tinygrad.codegen.opt import Opt
from tinygrad.device import Buffer
from tinygrad.dtype import _to_np_dtype, dtypes
from tinygrad.engine.realize import run_linear
from tinygrad.uop.ops import Ops, UOp, buffers

from vkbackend.tinygrad import bfloat16_bits

__all__ = ["last_kernel", "run_with_opts"]


def last_kernel(out: Tensor) -> UOp:
    """The AST (an ``Ops.SINK``) of the last kernel that realizing ``out`` would run, before any optimisation.
    Scheduling binds ``out`` to its buffers: to realize the computation, build the tensor again."""
    return out.schedule_linear().src[-1].src[0]


def run_with_opts(out: Tensor, opts: Sequence[Opt]) -> np.ndarray:
    """Realize ``out`` with the optimisations of its last kernel replaced by ``opts`` (tinygrad's ``Opt`` list, as
    ``KernelInfo.applied_opts`` holds them); returns that kernel's output buffer, flat. The kernels before it run as
    tinygrad optimises them; a bfloat16 output is returned as float32. Raises tinygrad's ``KernelOptError`` where an
    optimisation does not apply."""
    linear, var_vals = Tensor.linear_with_vars(out)
    run_linear(UOp(Ops.LINEAR, src=linear.src[:-1]), var_vals)
    last = linear.src[-1]
    ast = last.src[0]
    bufs = [s.buffer for s in last.src[1:] if not s.is_bound_var]
    # the outputs (the AST's first sources) go to fresh buffers, so that nothing tinygrad holds is written
    bufs = [Buffer(b.device, b.size, b.dtype).allocate() if i < len(ast.src) else b for i, b in enumerate(bufs)]
    buf_uops = [UOp.new_buffer(b.device, b.size, b.dtype) for b in bufs]
    for u, b in zip(buf_uops, bufs):
        b.ensure_allocated()
        buffers[u] = b
    ast = ast.replace(arg=replace(ast.arg, opts_to_apply=tuple(opts)))
    run_linear(UOp(Ops.LINEAR, src=(ast.call(*buf_uops),)))
    out_buf = bufs[0]
    if out_buf.dtype == dtypes.bfloat16:  # numpy has no bfloat16
        return bfloat16_bits.to_float32(np.frombuffer(out_buf.as_memoryview(), np.uint16))
    return np.frombuffer(out_buf.as_memoryview(), _to_np_dtype(out_buf.dtype)).copy()
