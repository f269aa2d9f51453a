"""Unrolling a kernel's innermost loops, so that each invocation has more loads in flight; on by default on every
device but a CPU one (:func:`vkbackend.tinygrad.runtime.device_caps.unrolls`).

NVIDIA's Vulkan compiler does not unroll tinygrad's reduction loops: that is inferred from timing, on the H200,
variants with the loops marked ``[[dont_unroll]]``, which matched the build as written within 3.5 % (whether
tinygrad's CUDA backend gets them unrolled was not checked). A kernel that runs few work groups per multiprocessor,
such as ResNet-50's last 1x1 convolutions, then waits on each iteration's loads in turn (inferred from what unrolling
gained, not profiled). Each innermost loop with a constant trip count whose body loads from global memory is unrolled
by the largest power of two up to :data:`MAX_FACTOR`, and up to its trip count, that keeps the lanes those copies
load within :data:`LANE_BUDGET` (each loaded value holds a register until it is used); a loop with a barrier
(shared-memory staging, tensor cores) keeps its schedule. What it gains was measured on NVIDIA only:
see docs/performance.md.
"""

from __future__ import annotations

from tinygrad.uop.ops import Ops, UOp

from vkbackend.tinygrad.renderer.loops import enclosing_ranges, loops, range_name
from vkbackend.tinygrad.renderer.memory_access import global_load_lanes

__all__ = ["LANE_BUDGET", "MAX_FACTOR", "unroll_factors", "unroll_for_loads"]

LANE_BUDGET = 64  # lanes of global loads the copies of one loop body may issue together
MAX_FACTOR = 8


def unroll_factors(uops: list[UOp], budget: int = LANE_BUDGET) -> dict[str, int]:
    """The unroll factor of each innermost loop worth unrolling, by its variable's name (loops with factor 1 are
    left out): from the lanes its body loads from global memory, per iteration."""
    lanes: dict[UOp, int] = {}
    skip: set[UOp] = set()  # loops with a loop, a barrier or a tensor-core op inside
    for u, around in enclosing_ranges(uops):
        if u.op is Ops.RANGE:
            skip.update(around[-1:])
            lanes[u] = 0
        elif u.op is not Ops.END and around:
            if u.op in (Ops.BARRIER, Ops.WMMA):
                skip.update(around)
            lanes[around[-1]] += global_load_lanes(u)
    factors = {}
    for r, n in lanes.items():
        bound = r.src[0]
        if r in skip or not n or bound.vmin != bound.vmax:
            continue
        u = 1
        while u < MAX_FACTOR and 2 * u <= bound.vmax and 2 * u * n <= budget:
            u *= 2
        if u > 1:
            factors[range_name(r)] = u
    return factors


def unroll_for_loads(tree: list, uops: list[UOp], budget: int = LANE_BUDGET) -> None:
    """Set the unroll factor of the innermost loops of ``tree`` (:func:`vkbackend.tinygrad.renderer.loops.parse`)
    rendered from ``uops``, as :func:`unroll_factors` chooses."""
    # unroll_factors names only loops with no RANGE inside and a constant bound: innermost and constant in the tree too
    factors = unroll_factors(uops, budget)
    for loop, _ in loops(tree):
        if loop.name in factors:
            loop.u = factors[loop.name]
