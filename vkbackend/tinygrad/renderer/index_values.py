"""The values an index expression takes across lanes: tinygrad's integer UOps evaluated with numpy.

The renderer's passes that reason about memory access (:mod:`~vkbackend.tinygrad.renderer.local_layout`,
:mod:`~vkbackend.tinygrad.renderer.stream_staging`) evaluate a load's or store's index for many invocations at once:
each local id is an array with one entry per lane, group ids are 0, and loops and variables sit at their least value
unless the caller fixes them. An index computed from loaded data, or by an op not listed here, cannot be evaluated.
"""

from __future__ import annotations

import numpy as np
from tinygrad.dtype import dtypes
from tinygrad.uop.ops import AddrSpace, Ops, UOp

__all__ = ["Unknown", "evaluate"]


class Unknown(Exception):
    """An index that cannot be evaluated (one computed from loaded data, or by an op this module does not know)."""


def _cdiv(a, b):
    q = np.abs(a) // np.abs(b)
    return np.where((a < 0) != (b < 0), -q, q)


def _cmod(a, b):
    return a - b * _cdiv(a, b)


_ALU = {
    Ops.ADD: np.add,
    Ops.SUB: np.subtract,
    Ops.MUL: np.multiply,
    Ops.NEG: np.negative,
    Ops.SHL: np.left_shift,
    Ops.SHR: np.right_shift,
    Ops.AND: np.bitwise_and,
    Ops.OR: np.bitwise_or,
    Ops.XOR: np.bitwise_xor,
    Ops.MAX: np.maximum,
    Ops.CMPLT: np.less,
    Ops.CMPNE: np.not_equal,
    Ops.CMPEQ: np.equal,
    Ops.WHERE: np.where,
    Ops.CDIV: _cdiv,
    Ops.CMOD: _cmod,
    Ops.FLOORDIV: np.floor_divide,
    Ops.FLOORMOD: np.mod,
    Ops.MULACC: lambda a, b, c: a * b + c,
}


def evaluate(u: UOp, lidx: list[np.ndarray], memo: dict, at: dict[UOp, int] | None = None) -> np.ndarray:
    """``u``'s value for each lane (int64 arrays): local dimension ``i`` is ``lidx[i]``, group ids are 0, and loops
    and variables are at their least, but for the loops ``at`` fixes. ``memo`` keeps values between calls that share
    ``lidx`` and ``at``. Raises :class:`Unknown` where ``u`` cannot be evaluated, OverflowError past int64."""
    found = memo.get(u)
    if found is not None:
        return found
    if at and u in at:
        val = np.full_like(lidx[0], at[u])
    elif u.op is Ops.CONST:
        if not isinstance(u.arg, (int, bool)):
            raise Unknown(u.op)
        val = np.full_like(lidx[0], int(u.arg))
    elif u.op is Ops.SPECIAL:
        val = lidx[int(u.arg[-1])] if u.arg[0] == "l" else np.zeros_like(lidx[0])
    elif u.op is Ops.RANGE or (u.op is Ops.PARAM and u.addrspace is not AddrSpace.GLOBAL):  # a loop, a variable
        val = np.full_like(lidx[0], int(u.vmin))
    elif (
        u.op is Ops.CAST and dtypes.is_int(u.dtype) and (dtypes.is_int(u.src[0].dtype) or u.src[0].dtype == dtypes.bool)
    ):
        val = evaluate(u.src[0], lidx, memo, at)
    elif u.op in _ALU:
        args = [evaluate(s, lidx, memo, at) for s in u.src]
        if u.op in (Ops.CDIV, Ops.CMOD, Ops.FLOORDIV, Ops.FLOORMOD) and (args[1] == 0).any():
            raise Unknown(u.op)
        val = np.asarray(_ALU[u.op](*args), dtype=np.int64)
    else:
        raise Unknown(u.op)
    memo[u] = val
    return val
