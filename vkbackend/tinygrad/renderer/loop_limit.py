"""Keeping a kernel's loop iterations under a driver's per-invocation limit, by unrolling.

Mesa's lavapipe (llvmpipe) compiles loops with one iteration counter per invocation, shared by every loop of the
kernel and never reset (gallivm's ``LP_MAX_TGSI_LOOP_ITERATIONS``, 65,535): once it is spent, every loop is left at
its next test, with no error, and the kernel computes a wrong result.  tinygrad renders a reduction whose length has
no small divisor (a prime, say) as one loop over all of it in a single invocation, so such a sum over 262,147 elements
comes out short.

Only loop back edges count, so straight-line code is free: a loop of ``n`` iterations becomes a main loop of
``n // u`` iterations whose body is ``u`` copies of the original body, then a tail loop for the last ``n % u``.  The
factors are chosen from tinygrad's RANGE ops (constant bounds, or the largest value of a symbolic one; a nested loop
runs once per iteration of every loop around it), the smallest that bring the worst-case total under the limit
within a bound on the source's size.  A kernel that cannot be brought under it is refused by name (never run to a
wrong result).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tinygrad.dtype import dtypes
from tinygrad.uop.ops import Ops, UOp, axis_letters, range_str

__all__ = ["LoopLimitError", "bound_loops", "iterations"]

# Unrolled sources past this many lines are refused rather than compiled: glslang and LLVM take seconds per few
# thousand lines, and a kernel that needs more copies than this is better split by its author.
MAX_LINES = 16384

_HEADER = re.compile(r"^(\s*)for \((\S+) (\w+) = 0; \3 < (.+); \3\+\+\) \{$")


class LoopLimitError(RuntimeError):
    """A kernel whose loops would run past the device's per-invocation iteration limit, even unrolled."""


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

    def cost(self, u: int | None = None) -> int:
        """Back edges gallivm counts for one entry into the loop, unrolled by ``u`` (one more per loop, for its exit
        test, which matches what lavapipe was seen to allow)."""
        u = self.u if u is None else u
        if u == 1:
            return self.n + 1
        if not self.const:
            return self.n // u + 1 + u  # main loop, and a tail loop of at most u - 1
        main = 0 if self.n // u <= 1 else self.n // u + 1
        return main + (self.n % u + 1 if self.n % u else 0)

    def next_u(self) -> int | None:
        """The next unroll factor to try: double, up to a full unroll of a constant loop; None when it does not pay."""
        nxt = min(self.u * 2, self.n) if self.const else self.u * 2
        return nxt if nxt > self.u and self.cost(nxt) < self.cost() else None


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


def _loops(tree: list, outer: int = 1):
    """Every loop of ``tree`` with the number of times it is entered (the trip counts of the loops around it)."""
    for x in tree:
        if isinstance(x, Loop):
            yield x, outer
            yield from _loops(x.body, outer * x.n)


def iterations(tree: list) -> int:
    """The worst-case loop iterations gallivm counts for one invocation running ``tree``."""
    return sum(entries * loop.cost() for loop, entries in _loops(tree))


def _size(tree: list) -> int:
    """Lines of GLSL ``tree`` renders to."""
    n = 0
    for x in tree:
        if not isinstance(x, Loop):
            n += 1
            continue
        body = _size(x.body)
        n += body + 2 if x.u == 1 else x.u * (body + 3) + 2 + (body + 2 if not x.const or x.n % x.u else 0)
    return n


def _indent(lines: list[str], by: str) -> list[str]:
    return [by + ln for ln in lines]


def _emit(tree: list) -> list[str]:
    out: list[str] = []
    for x in tree:
        if not isinstance(x, Loop):
            out.append(x)
            continue
        body = _emit(x.body)
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


def bound_loops(name: str, kernel: list[str], uops: list[UOp], limit: int) -> list[str]:
    """``kernel`` (the rendered lines of a kernel's body) with its loops unrolled just enough that one invocation runs
    at most ``limit`` loop iterations, all loops together; unchanged when it already does.  Raises
    :class:`LoopLimitError` when no unrolling within :data:`MAX_LINES` lines does."""
    # tinygrad's loops without a bound (dtype void, ``for (;;)``) are not matched, and so not counted
    ranges = {
        f"{axis_letters[u.arg[-1]]}idx{range_str(u)}": u for u in uops if u.op is Ops.RANGE and u.dtype != dtypes.void
    }
    lines = [ln for item in kernel for ln in item.split("\n")]
    tree, _ = _parse(lines, 0, None, ranges)
    before = total = iterations(tree)
    if total <= limit:
        return kernel
    loops = [loop for loop, _ in _loops(tree)]
    while total > limit:
        # unroll further the loop that costs the most, among those where it still pays
        steps = [(entries * loop.cost(), loop, u) for loop, entries in _loops(tree) if (u := loop.next_u())]
        if not steps:
            break
        _, loop, loop.u = max(steps, key=lambda s: s[0])
        total = iterations(tree)
        if _size(tree) > MAX_LINES:
            break
    if total > limit or _size(tree) > MAX_LINES:
        raise LoopLimitError(
            f"{name}: this device (lavapipe/llvmpipe) runs at most {limit:,} loop iterations per invocation, all loops "
            f"together (gallivm's LP_MAX_TGSI_LOOP_ITERATIONS), and silently leaves loops past that; this kernel "
            f"needs up to {before:,} ({len(loops)} loops), more than unrolling within {MAX_LINES:,} lines of GLSL "
            f"can bring under the limit"
        )
    return _emit(tree)
