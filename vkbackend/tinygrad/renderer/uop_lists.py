"""Rebuilding a kernel's linearised uops: the helpers the renderer's passes over the list share.

A pass that changes a uop rebuilds every uop that reads it (uops are immutable, and each names its sources), and
writes the new list in an order the renderer can follow: each value after what it reads, inside the loops and IFs it
was in. :class:`Placement` appends uops that way, :func:`live` drops the values nothing reads any more, and
:func:`scoped` checks that no value is read outside the scope it is declared in.
"""

from __future__ import annotations

from tinygrad.dtype import dtypes
from tinygrad.uop.ops import GroupOp, Ops, UOp

__all__ = ["Placement", "index_const", "live", "rebuilt", "scoped", "substitute"]

# what only orders: the sources of these are not read as values
_ORDERING = (Ops.END, Ops.ENDIF, Ops.SINK, Ops.GROUP, Ops.NOOP, Ops.BARRIER)
_VALUES = {*GroupOp.ALU, Ops.CAST, Ops.BITCAST, Ops.INDEX, Ops.SHRINK, Ops.LOAD, Ops.STACK, Ops.AFTER, Ops.CONST}


def index_const(v: int) -> UOp:
    """The index constant ``v`` as tinygrad writes one in linearised uops: CAST(int, CONST weakint)."""
    return UOp(Ops.CAST, dtypes.int, (UOp(Ops.CONST, dtypes.weakint, arg=v),))


def constant_value(u: UOp) -> int | None:
    """The value of an integer constant written as :func:`index_const` writes one (or a bare CONST), else None."""
    while u.op is Ops.CAST and dtypes.is_int(u.dtype):
        u = u.src[0]
    return u.arg if u.op is Ops.CONST and type(u.arg) is int else None


class Placement:
    """A new uop list, written in order: :meth:`place` appends a uop after whichever of its sources (and theirs) are
    not in the list yet."""

    def __init__(self) -> None:
        self.uops: list[UOp] = []
        self._placed: set[UOp] = set()

    def place(self, u: UOp) -> None:
        placed = self._placed
        if u in placed:
            return
        for s in u.src:
            if s not in placed:
                break
        else:  # the common case, every source in place: no walk
            placed.add(u)
            self.uops.append(u)
            return
        for v in u.toposort(gate=lambda v: v not in placed):
            placed.add(v)
            self.uops.append(v)


def rebuilt(u: UOp, swap: dict[UOp, UOp]) -> UOp:
    """``u`` with its sources replaced as ``swap`` says, recorded in ``swap``; ``u`` itself where none is replaced."""
    for s in u.src:
        if s in swap:
            break
    else:
        return u
    swap[u] = new = u.replace(src=tuple(swap.get(s, s) for s in u.src))
    return new


def substitute(u: UOp, swap: dict[UOp, UOp]) -> UOp:
    """``u`` rebuilt with the uops in ``swap`` replaced, at any depth (tinygrad's ``substitute`` rewrites linearised
    uops badly)."""
    if u in swap:
        return swap[u]
    src = tuple(substitute(s, swap) for s in u.src)
    swap[u] = new = u.replace(src=src) if src != u.src else u
    return new


def live(uops: list[UOp]) -> list[UOp]:
    """``uops`` without the values nothing reads any more."""
    used: set[UOp] = set()
    keep = []
    for u in reversed(uops):
        if u in used or u.op not in _VALUES:
            used.update(u.src)
            keep.append(u)
    return keep[::-1]


def scoped(uops: list[UOp]) -> bool:
    """Whether every uop of ``uops`` reads only values placed in a loop or IF still open around it, or in none (what
    only orders, the sources of END, SINK, GROUP, BARRIER and all but the first of AFTER, is not read; constants
    belong to no scope)."""
    scope: dict[UOp, tuple[UOp, ...]] = {}
    open_: tuple[UOp, ...] = ()
    for u in uops:
        if u.op in (Ops.END, Ops.ENDIF):
            open_ = open_[:-1]
        read = () if u.op in _ORDERING else u.src[:1] if u.op is Ops.AFTER else u.src
        for s in read:
            where = scope.get(s, ())
            if open_[: len(where)] != where:
                return False
        # constants are written where they are read, never declared
        scope[u] = () if u.op is Ops.CONST or (u.op is Ops.CAST and u.src[0].op is Ops.CONST) else open_
        if u.op in (Ops.RANGE, Ops.IF):
            open_ = (*open_, u)
    return True
