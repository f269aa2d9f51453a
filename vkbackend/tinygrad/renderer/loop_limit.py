"""Keeping a kernel's loop iterations under a driver's per-invocation limit, by unrolling.

Mesa's lavapipe (llvmpipe) compiles loops with one iteration counter per invocation, shared by every loop of the
kernel and never reset (gallivm's ``LP_MAX_TGSI_LOOP_ITERATIONS``, 65,535): once it is spent, every loop is left at
its next test, with no error, and the kernel computes a wrong result.  tinygrad renders a reduction whose length has
no small divisor (a prime, say) as one loop over all of it in a single invocation, so such a sum over 262,147 elements
comes out short.

Only loop back edges count, so straight-line code is free: a loop of ``n`` iterations becomes a main loop of
``n // u`` iterations whose body is ``u`` copies of the original body, then a tail loop for the last ``n % u``.  The
worst-case total is counted from tinygrad's RANGE ops (constant bounds, or the largest value of a symbolic one; a
nested loop runs once per iteration of every loop around it) on the loops as they come to this pass, that is with the
factors the unroll pass (:mod:`~vkbackend.tinygrad.renderer.unroll`) set where it is on; while the total is past the
limit, the factor of the loop that costs the most is doubled (up to a full unroll), within a bound on the source's
size.  A kernel that cannot be brought under it is refused by name (never run to a wrong result).
"""

from __future__ import annotations

from vkbackend.tinygrad.renderer.loops import Loop, loops, source_lines

__all__ = ["LoopLimitError", "bound_loops", "iterations"]

# Unrolled sources past this many lines are refused rather than compiled: glslang and LLVM take seconds per few
# thousand lines, and a kernel that needs more copies than this is better split by its author.
MAX_LINES = 16384


class LoopLimitError(RuntimeError):
    """A kernel whose loops would run past the device's per-invocation iteration limit, even unrolled."""


def cost(loop: Loop, u: int | None = None) -> int:
    """Back edges gallivm counts for one entry into ``loop``, unrolled by ``u`` (its own factor when None; one more
    per loop, for its exit test, which matches what lavapipe was seen to allow)."""
    u = loop.u if u is None else u
    if u == 1:
        return loop.n + 1
    if not loop.const:
        return loop.n // u + 1 + u  # main loop, and a tail loop of at most u - 1
    main = 0 if loop.n // u <= 1 else loop.n // u + 1
    return main + (loop.n % u + 1 if loop.n % u else 0)


def _next_u(loop: Loop) -> int | None:
    """The next unroll factor to try: double, up to a full unroll of a constant loop; None when it does not pay."""
    nxt = min(loop.u * 2, loop.n) if loop.const else loop.u * 2
    return nxt if nxt > loop.u and cost(loop, nxt) < cost(loop) else None


def iterations(tree: list) -> int:
    """The worst-case loop iterations gallivm counts for one invocation running ``tree``."""
    return sum(entries * cost(loop) for loop, entries in loops(tree))


def bound_loops(name: str, tree: list, limit: int) -> None:
    """Unroll the loops of ``tree`` (:func:`vkbackend.tinygrad.renderer.loops.parse`, with any factors already set)
    further, until one invocation runs at most ``limit`` loop iterations, all loops together; nothing changes when it
    already does. Raises :class:`LoopLimitError` when no unrolling within :data:`MAX_LINES` lines does."""
    before = total = iterations(tree)
    if total <= limit:
        return
    while total > limit:
        # unroll further the loop that costs the most, among those where it still pays
        steps = [(entries * cost(loop), loop, u) for loop, entries in loops(tree) if (u := _next_u(loop))]
        if not steps:
            break
        _, loop, loop.u = max(steps, key=lambda s: s[0])
        total = iterations(tree)
        if source_lines(tree) > MAX_LINES:
            break
    if total > limit or source_lines(tree) > MAX_LINES:
        raise LoopLimitError(
            f"{name}: this device (lavapipe/llvmpipe) runs at most {limit:,} loop iterations per invocation, all loops "
            f"together (gallivm's LP_MAX_TGSI_LOOP_ITERATIONS), and silently leaves loops past that; this kernel's "
            f"{sum(1 for _ in loops(tree))} loops, as rendered (unrolled for loads where that is on), would run up to "
            f"{before:,}, more than unrolling them further within {MAX_LINES:,} lines of GLSL can bring under the limit"
        )
