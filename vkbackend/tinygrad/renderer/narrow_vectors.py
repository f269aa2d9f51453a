"""Vector loads and stores of bfloat16 and of 8- and 16-bit integers, which tinygrad's memory coalescing leaves one
element at a time.

tinygrad's coalescing (codegen/late/coalesce.py) turns runs of 2 or 4 consecutive float, half, int and uint accesses
into vector accesses (LOAD or STORE of ``SHRINK(buffer, idx, n)``, rendered as memory_access.py says) and leaves every
other type element by element: a bfloat16 matmul's kernel reads its A operand one ``uint16_t`` at a time where the
float16 one reads ``f16vec2`` pairs, and a bfloat16 elementwise kernel moves 2 bytes an access where float16's moves
8. This pass, over the linearised uops before they are rendered, groups those accesses as tinygrad groups the others:

- loads, or stores, of one global argument (not a pointer view of one) whose element is bfloat16 or an 8- or 16-bit
  integer, none gated, through the same buffer uop (so ordered after the same stores), at indices ``root + c`` of one
  ``root`` and consecutive constants ``c``;
- 4 or 2 of them at a time where the first one's index is provably a multiple of that many (:func:`known_factor`;
  the renderer reads such a vector as one element of the buffer declared as vectors), else left alone;
- all in one block (the same loops and IFs open around them), with no store or barrier between a group's first and
  last load, and no other access to memory, barrier or reader of the stores between a group's first and last store.
  The vector load takes the place of the group's first load and the vector store the place of its last store, so no
  load moves past a store or barrier, and no store past any other access to memory.

Every lane reads or writes the element it did, with the value it did: the kernel computes what it computed.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from tinygrad.dtype import dtypes
from tinygrad.uop.ops import Ops, UOp

from vkbackend.tinygrad.renderer.memory_access import global_param_access
from vkbackend.tinygrad.renderer.uop_lists import (
    Placement,
    constant_value,
    index_const,
    live,
    rebuilt,
    scoped,
    substitute,
)

__all__ = ["NARROW", "group_narrow_accesses", "known_factor"]

NARROW = (dtypes.bfloat16, dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16)
WIDTHS = (4, 2)  # GLSL's vectors, as tinygrad's coalescing makes them where a renderer has float4
_FACTOR_CAP = 1 << 16  # enough for any width, and small enough to survive 32-bit index arithmetic wrapping


@dataclass(frozen=True)
class _Access:
    u: UOp  # the LOAD or STORE
    pos: int  # its place in the list


@dataclass(frozen=True)
class _Group:
    accesses: tuple[_Access, ...]  # in the order of their offsets: lane i is accesses[i]

    @property
    def first(self) -> int:
        return min(a.pos for a in self.accesses)

    @property
    def last(self) -> int:
        return max(a.pos for a in self.accesses)


def known_factor(u: UOp, cache: dict[UOp, int] | None = None) -> int:
    """A power of two (at most 2**16) that the integer ``u`` is a multiple of whatever its variables hold: the largest
    that its constants, sums, products and left shifts by constants prove (a lower bound: ``(4x + 2) + 2`` gives 2);
    1 for anything else."""
    cache = {} if cache is None else cache
    if u in cache:
        return cache[u]
    factor = 1
    if (value := constant_value(u)) is not None:
        factor = _FACTOR_CAP if value == 0 else min(value & -value, _FACTOR_CAP)
    elif u.op is Ops.CAST and dtypes.is_int(u.dtype) and dtypes.is_int(u.src[0].dtype):
        factor = min(known_factor(u.src[0], cache), 1 << (8 * u.dtype.itemsize - 1))
    elif u.op is Ops.ADD:
        factor = min(known_factor(u.src[0], cache), known_factor(u.src[1], cache))
    elif u.op is Ops.MUL:
        factor = min(known_factor(u.src[0], cache) * known_factor(u.src[1], cache), _FACTOR_CAP)
    elif u.op is Ops.SHL and (shift := constant_value(u.src[1])) is not None and 0 <= shift < 32:
        factor = min(known_factor(u.src[0], cache) << shift, _FACTOR_CAP)
    cache[u] = factor
    return factor


def _root_and_offset(idx: UOp) -> tuple[UOp | None, int]:
    """``idx`` as ``root + c`` (root None: a constant index)."""
    if (value := constant_value(idx)) is not None:
        return None, value
    if idx.op is Ops.ADD:
        for root, c in (idx.src, idx.src[::-1]):
            if (value := constant_value(c)) is not None:
                return root, value
    return idx, 0


def _candidates(uops: list[UOp]) -> dict[tuple, dict[int, list[_Access]]]:
    """The ungated narrow accesses of global arguments, by (op, buffer uop, root, block), then by offset."""
    out: dict[tuple, dict[int, list[_Access]]] = defaultdict(lambda: defaultdict(list))
    block: tuple[UOp, ...] = ()
    for pos, u in enumerate(uops):
        if u.op is Ops.END:
            block = tuple(b for b in block if b not in u.src[1:])
        elif u.op is Ops.ENDIF:  # closes the innermost IF
            block = block[: max((i for i, b in enumerate(block) if b.op is Ops.IF), default=0)]
        access = global_param_access(u)
        if access is not None and access[2] == 1 and access[0].dtype in NARROW:
            mop = u.src[0]
            if mop.op is Ops.INDEX and len(mop.src) == 2 and len(u.src) == (1 if u.op is Ops.LOAD else 2):
                root, offset = _root_and_offset(mop.src[1])
                out[(u.op, mop.src[0], root, block)][offset].append(_Access(u, pos))
        if u.op in (Ops.RANGE, Ops.IF):
            block = (*block, u)
    return out


def _uninterrupted(uops: list[UOp], group: _Group) -> bool:
    """Whether nothing between the group's first and last access keeps them from being made at once (see the module's
    docstring)."""
    members = {a.u for a in group.accesses}
    stores = group.accesses[0].u.op is Ops.STORE
    blocking = (Ops.STORE, Ops.BARRIER, Ops.LOAD) if stores else (Ops.STORE, Ops.BARRIER)
    for u in uops[group.first + 1 : group.last]:
        if u in members:
            continue
        if u.op in blocking or (stores and any(s in members for s in u.src)):
            return False
    return True


def _groups(uops: list[UOp]) -> list[_Group]:
    out: list[_Group] = []
    factors: dict[UOp, int] = {}
    for (_, _, root, _), by_offset in _candidates(uops).items():
        if any(len(accesses) > 1 for accesses in by_offset.values()):
            continue  # two stores of one element: left as they are
        root_factor = _FACTOR_CAP if root is None else known_factor(root, factors)
        offsets = sorted(by_offset)
        i = 0
        while i < len(offsets):
            for n in WIDTHS:
                run = offsets[i : i + n]
                start = run[0]
                aligned = min(root_factor, _FACTOR_CAP if start == 0 else start & -start) >= n
                if len(run) == n and run[-1] - start == n - 1 and aligned:
                    group = _Group(tuple(by_offset[c][0] for c in run))
                    if _uninterrupted(uops, group):
                        out.append(group)
                        i += n
                        break
            else:
                i += 1
    return out


def group_narrow_accesses(uops: list[UOp]) -> list[UOp]:
    """``uops`` with runs of narrow accesses made vector accesses (see the module's docstring); ``uops`` itself where
    there are none."""
    groups = _groups(uops)
    if not groups:
        return uops
    at: dict[int, _Group] = {}  # a group by the place its vector access takes
    member: set[UOp] = set()
    for g in groups:
        at[g.first if g.accesses[0].u.op is Ops.LOAD else g.last] = g
        member.update(a.u for a in g.accesses)
    swap: dict[UOp, UOp] = {}
    out = Placement()
    for pos, u in enumerate(uops):
        if (g := at.get(pos)) is not None:
            out.place(_vector_access(g, swap))
        elif u not in member:
            out.place(swap[u] if u in swap else rebuilt(u, swap))
    grouped = live(out.uops)
    return grouped if scoped(grouped) else uops


def _vector_access(g: _Group, swap: dict[UOp, UOp]) -> UOp:
    """The vector LOAD or STORE of ``g``, its members' replacements recorded in ``swap``: each load by its lane of the
    vector, each store by the vector store."""
    first = g.accesses[0].u
    mop = first.src[0]
    n = len(g.accesses)
    shrink = UOp(Ops.SHRINK, mop.dtype, (substitute(mop.src[0], swap), substitute(mop.src[1], swap), index_const(n)))
    if first.op is Ops.LOAD:
        vector = UOp(Ops.LOAD, first.dtype, (shrink,))
        for lane, a in enumerate(g.accesses):
            swap[a.u] = UOp(Ops.INDEX, first.dtype, (vector, index_const(lane)))
        return vector
    values = tuple(swap.get(a.u.src[1], a.u.src[1]) for a in g.accesses)
    vector = UOp(Ops.STORE, dtypes.void, (shrink, UOp(Ops.STACK, values[0].dtype, values)))
    for a in g.accesses:
        swap[a.u] = vector
    return vector
