"""The values an index expression takes across lanes: tinygrad's integer UOps evaluated lane by lane.

The renderer's passes that reason about memory access (:mod:`~vkbackend.tinygrad.renderer.local_layout`,
:mod:`~vkbackend.tinygrad.renderer.stream_staging`) evaluate a load's or store's index for many invocations at once:
each local id is a list with one entry per lane, group ids are 0, and loops and variables sit at their least value
unless the caller fixes them. An index computed from loaded data, or by an op not listed here, cannot be evaluated.

Plain Python integers, not numpy: the passes evaluate a few hundred lanes of a few dozen UOps per kernel, and
tinygrad's compile workers, each a new process that renders a handful of kernels, would otherwise each import numpy
(about 0.14 s on the H200's host, more than a worker's first compile).
"""

from __future__ import annotations

import operator

from tinygrad.dtype import dtypes
from tinygrad.uop.ops import AddrSpace, Ops, UOp

__all__ = ["Lanes", "Unknown", "evaluate"]

Lanes = list[int]  # one value per lane
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


class Unknown(Exception):
    """An index that cannot be evaluated (one computed from loaded data, or by an op this module does not know)."""


def _cdiv(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return -q if (a < 0) != (b < 0) else q


def _shift(shift):
    def fn(a: int, b: int) -> int:
        if not 0 <= b < 64:  # undefined in the kernel's language; a huge count would also make a huge integer here
            raise Unknown(f"a shift by {b}")
        return shift(a, b)

    return fn


_ALU = {
    Ops.ADD: operator.add,
    Ops.SUB: operator.sub,
    Ops.MUL: operator.mul,
    Ops.NEG: operator.neg,
    Ops.SHL: _shift(operator.lshift),
    Ops.SHR: _shift(operator.rshift),
    Ops.AND: operator.and_,
    Ops.OR: operator.or_,
    Ops.XOR: operator.xor,
    Ops.MAX: max,
    Ops.CMPLT: lambda a, b: int(a < b),
    Ops.CMPNE: lambda a, b: int(a != b),
    Ops.CMPEQ: lambda a, b: int(a == b),
    Ops.WHERE: lambda c, a, b: a if c else b,
    Ops.CDIV: _cdiv,
    Ops.CMOD: lambda a, b: a - b * _cdiv(a, b),
    Ops.FLOORDIV: operator.floordiv,
    Ops.FLOORMOD: operator.mod,
    Ops.MULACC: lambda a, b, c: a * b + c,
}
_DIVISIONS = (Ops.CDIV, Ops.CMOD, Ops.FLOORDIV, Ops.FLOORMOD)


def _checked(values: Lanes) -> Lanes:
    if values and (min(values) < INT64_MIN or max(values) > INT64_MAX):
        raise OverflowError("an index value past int64")
    return values


def _same(value: int, n: int) -> Lanes:
    """``value`` in each of ``n`` lanes."""
    _checked([value])
    return [value] * n


def evaluate(u: UOp, lidx: list[Lanes], memo: dict, at: dict[UOp, int] | None = None) -> Lanes:
    """``u``'s value for each lane: local dimension ``i`` is ``lidx[i]`` (lists of one length), group ids are 0, and
    loops and variables are at their least, but for the loops ``at`` fixes. ``memo`` keeps values between calls that
    share ``lidx`` and ``at``; the lists returned are shared with it, not to be changed. Raises :class:`Unknown` where
    ``u`` cannot be evaluated, OverflowError where a value leaves int64 (the widest index a kernel computes)."""
    found = memo.get(u)
    if found is not None:
        return found
    n = len(lidx[0])
    if at and u in at:
        val = _same(at[u], n)
    elif u.op is Ops.CONST:
        if not isinstance(u.arg, (int, bool)):
            raise Unknown(u.op)
        val = _same(int(u.arg), n)
    elif u.op is Ops.SPECIAL:
        val = lidx[int(u.arg[-1])] if u.arg[0] == "l" else [0] * n
    elif u.op is Ops.RANGE or (u.op is Ops.PARAM and u.addrspace is not AddrSpace.GLOBAL):  # a loop, a variable
        val = _same(int(u.vmin), n)
    elif (
        u.op is Ops.CAST and dtypes.is_int(u.dtype) and (dtypes.is_int(u.src[0].dtype) or u.src[0].dtype == dtypes.bool)
    ):
        val = evaluate(u.src[0], lidx, memo, at)
    elif u.op in _ALU:
        args = [evaluate(s, lidx, memo, at) for s in u.src]
        if u.op in _DIVISIONS and 0 in args[1]:
            raise Unknown(u.op)
        fn = _ALU[u.op]
        val = _checked([fn(*lane) for lane in zip(*args)])
    else:
        raise Unknown(u.op)
    memo[u] = val
    return val
