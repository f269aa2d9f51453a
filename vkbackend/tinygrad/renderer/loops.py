"""A rendered kernel's loops as a tree, to unroll them: parsed from the GLSL lines, changed, and written back.

The renderer writes each of tinygrad's RANGE ops as ``for (int Ridx0 = 0; Ridx0 < bound; Ridx0++) { ... }``;
:func:`parse` finds those loops (by the RANGE's name, with its constant bound or the largest value of a symbolic
one) and :func:`emit` writes the tree back, each loop unrolled by its factor ``u``: a main loop over ``u`` copies of
the body, each in its own block so the copies' declarations do not clash, then a tail loop for the iterations left
(none for a constant bound that ``u`` divides), or straight-line copies when one round of the main loop is all.
Two passes set the factors, in this order: :mod:`~vkbackend.tinygrad.renderer.unroll` (more loads in flight, on every
device but a CPU one) and :mod:`~vkbackend.tinygrad.renderer.loop_limit` (lavapipe's iteration limit).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from tinygrad.dtype import dtypes
from tinygrad.uop.ops import Ops, UOp, axis_letters, range_str

__all__ = ["Loop", "emit", "enclosing_ranges", "loops", "parse", "range_name", "source_lines"]

_HEADER = re.compile(r"^(\s*)for \((\S+) (\w+) = 0; \3 < (.+); \3\+\+\) \{$")


@dataclass
class Loop:
    """One rendered ``for`` loop: its header's parts, its body (lines and inner loops) and its unroll factor."""

    indent: str
    type: str
    name: str
    bound: str
    n: int  # the trip count, or the largest a symbolic bound allows
    const: bool  # whether the bound is a constant
    body: list = field(default_factory=list)
    u: int = 1


def range_name(u: UOp) -> str:
    """The loop variable the renderer names a RANGE op by (``Ridx0``, ``Lidx3``, ...)."""
    return f"{axis_letters[u.arg[-1]]}idx{range_str(u)}"


def _parse(lines: list[str], pos: int, indent: str | None, ranges: dict[str, UOp]) -> tuple[list, int]:
    """The lines from ``pos`` up to the ``}`` that closes a loop at ``indent`` (the whole list when None), with every
    loop in them as a :class:`Loop`; and the position after that ``}``."""
    out: list = []
    while pos < len(lines):
        line = lines[pos]
        if indent is not None and line == indent + "}":
            return out, pos + 1
        m = _HEADER.match(line)
        if m and m.group(3) in ranges:
            bound = ranges[m.group(3)].src[0]
            loop = Loop(m.group(1), m.group(2), m.group(3), m.group(4), int(bound.vmax), bound.vmin == bound.vmax)
            loop.body, pos = _parse(lines, pos + 1, loop.indent, ranges)
            out.append(loop)
        else:
            out.append(line)
            pos += 1
    return out, pos


def enclosing_ranges(uops: list[UOp]) -> Iterator[tuple[UOp, tuple[UOp, ...]]]:
    """Each of the linearised ``uops`` with the RANGE ops open around it, outermost first (a RANGE's own are those
    around it, not itself; an END's are those it closes and any around them)."""
    open_ranges: tuple[UOp, ...] = ()
    for u in uops:
        yield u, open_ranges
        if u.op is Ops.RANGE:
            open_ranges = (*open_ranges, u)
        elif u.op is Ops.END:
            ended = set(u.src[1:])
            open_ranges = tuple(r for r in open_ranges if r not in ended)


def parse(kernel: list[str], uops: list[UOp]) -> list:
    """The tree of ``kernel`` (a kernel body's rendered lines, as the renderer keeps them) rendered from ``uops``."""
    # tinygrad's loops without a bound (dtype void, ``for (;;)``) are not matched, and so stay plain lines
    ranges = {range_name(u): u for u in uops if u.op is Ops.RANGE and u.dtype != dtypes.void}
    lines = [ln for item in kernel for ln in item.split("\n")]
    return _parse(lines, 0, None, ranges)[0]


def loops(tree: list, outer: int = 1) -> Iterator[tuple[Loop, int]]:
    """Every loop of ``tree`` with the number of times it is entered (the trip counts of the loops around it)."""
    for x in tree:
        if isinstance(x, Loop):
            yield x, outer
            yield from loops(x.body, outer * x.n)


def source_lines(tree: list) -> int:
    """Lines of GLSL ``tree`` renders to."""
    n = 0
    for x in tree:
        if not isinstance(x, Loop):
            n += 1
            continue
        body = source_lines(x.body)
        n += body + 2 if x.u == 1 else x.u * (body + 3) + 2 + (body + 2 if not x.const or x.n % x.u else 0)
    return n


def _indent(lines: list[str], by: str) -> list[str]:
    return [by + ln for ln in lines]


def emit(tree: list) -> list[str]:
    """The GLSL lines of ``tree``, each loop unrolled by its factor."""
    out: list[str] = []
    for x in tree:
        if not isinstance(x, Loop):
            out.append(x)
            continue
        body = emit(x.body)
        ind, ty, r = x.indent, x.type, x.name
        if x.u == 1:
            out += [f"{ind}for ({ty} {r} = 0; {r} < {x.bound}; {r}++) {{", *body, f"{ind}}}"]
            continue

        def copy(first: str, k: int, pad: str) -> list[str]:
            # its own block, so the body's declarations do not clash between copies
            return [f"{ind}{pad}{{", f"{ind}{pad}  {ty} {r} = {first}{k};", *_indent(body, pad), f"{ind}{pad}}}"]

        main_end = str(x.n // x.u * x.u) if x.const else f"(({x.bound})/{x.u}*{x.u})"
        if x.const and x.n // x.u <= 1:  # fully unrolled: straight-line copies
            for k in range(x.n // x.u * x.u):
                out += copy("", k, "")
        else:
            out.append(f"{ind}for ({ty} {r}_u = 0; {r}_u < {main_end}; {r}_u += {x.u}) {{")
            for k in range(x.u):
                out += copy(f"{r}_u+", k, "  ")
            out.append(f"{ind}}}")
        if not x.const or x.n % x.u:
            out += [f"{ind}for ({ty} {r} = {main_end}; {r} < {x.bound}; {r}++) {{", *body, f"{ind}}}"]
    return out
