"""Which of a kernel's local dimensions goes on which axis of the work group, so that the lanes of one warp touch few
cache lines and pages; on by default on every device but a CPU one
(:func:`vkbackend.tinygrad.runtime.device_caps.lays_out_locals`).

A GPU runs a work group's invocations in subgroups (warps) of consecutive local invocation indices, numbered along x
first. tinygrad names a kernel's local dimensions ``lidx0``, ``lidx1``, ``lidx2`` and puts ``lidx0`` on x, so its
choice decides which invocations share a warp, and so how many cache lines and pages one warp-wide load touches. Many
of its kernels load along ``lidx0`` with large strides (a batch dimension) and along ``lidx1`` contiguously, or not
at all. Under CUDA the L1 cache makes up for it: the warps of a group that load the same addresses find them there.
Under NVIDIA's Vulkan driver it does not (the H200 runs CUDA's own code for such a kernel as slowly when CUDA is told
to give shared memory the most room, which suggests the driver leaves L1 small), and there the order of the
dimensions alone moves some of ResNet-50's kernels by over 3x (docs/performance.md, "Warps and the local layout").

For each order of the local dimensions on the axes, :func:`choose_axes` counts, over the kernel's loads and stores of
global memory, the distinct 128-byte lines and 64 KiB pages that the lanes of the group's first warp touch, each access
weighted by the trip counts of the loops around it; it picks the cheapest order, and keeps tinygrad's on a tie, or
for the whole kernel where one index cannot be evaluated (computed from loaded data, or by an op it does not know).
Accesses through pointer views (read element by element) are not counted, and gated accesses count every lane. Each
invocation computes what it does in tinygrad's layout: only which invocations share a warp changes. Kernels on global
ids, with tensor cores (cooperative matrices need their subgroups as laid out) or with a single local dimension keep
their layout.
"""

from __future__ import annotations

import itertools
import math
import re

from tinygrad.uop.ops import UOp

from vkbackend.tinygrad.renderer.glsl_types import storage_dtype
from vkbackend.tinygrad.renderer.index_values import Unknown, evaluate
from vkbackend.tinygrad.renderer.loops import enclosing_ranges
from vkbackend.tinygrad.renderer.memory_access import global_param_access

__all__ = ["LINE_BYTES", "PAGE_BYTES", "apply_axes", "choose_axes", "layout_costs"]

LINE_BYTES = 128  # an L1/L2 cache line
# 64 KiB, NVIDIA's big page: counted beside the lines, the cost picks the orders the H200 ran fastest, where lines
# alone tie on some kernels (ResNet-50's r_32_7_7_8_16_4_4_512_256_4; docs/performance.md)
PAGE_BYTES = 64 << 10

_LIDX = re.compile(r"^(\s*int lidx(\d) = int\(gl_LocalInvocationID\.)([xyz])(\);.*)$")


def _accesses(uops: list[UOp]) -> list[tuple[UOp, int, int, int]]:
    """Every load and store of a global argument: ``(index, bytes an element, elements, weight)``, the weight being
    the product of the trip counts (the largest a symbolic bound allows) of the loops around it."""
    out = []
    for u, around in enclosing_ranges(uops):
        if (access := global_param_access(u)) is None:
            continue  # not one, or local or register memory, or a pointer view (read element by element)
        buf, index, lanes = access
        # capped: a symbolic bound can be astronomically large, and the weights only rank the orders
        weight = min(math.prod(max(1, int(r.src[0].vmax)) for r in around), 1 << 32)
        out.append((index, storage_dtype(buf.dtype).itemsize, lanes, weight))
    return out


def layout_costs(uops: list[UOp], local: list[int], orders: list[tuple[int, ...]], lanes: int) -> list[int] | None:
    """For each order in ``orders`` (local dimension ``i``, of size ``local[i]``, on axis ``order[i]``): the distinct
    lines and pages (LINE_BYTES, PAGE_BYTES) that the first ``lanes`` invocations of a work group touch, summed over
    the kernel's global accesses weighted by their loops' trip counts; None where an index cannot be evaluated. All
    orders are evaluated at once, a row of lanes each."""
    lidx: list[list[int]] = [[], [], []]
    width = 0  # every order puts the same invocations in the first warp's count
    for axes in orders:
        sizes = [1, 1, 1]
        for dim, axis in enumerate(axes):
            sizes[axis] = local[dim]
        width = min(lanes, math.prod(sizes))
        for flat in range(width):
            coords = (flat % sizes[0], (flat // sizes[0]) % sizes[1], flat // (sizes[0] * sizes[1]))
            for dim in range(3):
                lidx[dim].append(coords[axes[dim]] if dim < len(axes) else 0)
    memo: dict = {}
    total = [0] * len(orders)
    try:
        for index, size, elements, weight in _accesses(uops):
            values = evaluate(index, lidx, memo)
            span = elements * size - 1  # at most 32 bytes on: no access spans more than two lines or pages
            for row in range(len(orders)):
                first = [v * size for v in values[row * width : (row + 1) * width]]
                for unit in (LINE_BYTES, PAGE_BYTES):
                    total[row] += weight * len({f // unit for f in first} | {(f + span) // unit for f in first})
    except (Unknown, OverflowError):  # (a constant or bound past int64)
        return None
    return total


def choose_axes(uops: list[UOp], local: list[int], lanes: int, local_max: tuple[int, ...]) -> tuple[int, ...]:
    """The axis each local dimension goes on (tinygrad's: dimension i on axis i) that :func:`layout_costs` finds
    cheapest for warps of ``lanes``, among the orders that keep each axis within the device's ``local_max``
    (maxComputeWorkGroupSize); tinygrad's order on a tie, or where a cost cannot be found. Only the axes the kernel
    uses are reordered (an unused z stays free for :func:`~vkbackend.tinygrad.renderer.work_groups.widen_groups`)."""
    used = max((i + 1 for i, n in enumerate(local) if n > 1), default=0)
    same = tuple(range(used))
    if used < 2 or lanes < 2:
        return same
    # tinygrad's own order first: min keeps the first of equal costs
    orders = [o for o in itertools.permutations(range(used)) if all(local[d] <= local_max[a] for d, a in enumerate(o))]
    if len(orders) < 2:
        return same
    costs = layout_costs(uops, local, orders, lanes)
    if costs is None:
        return same
    return orders[min(range(len(orders)), key=costs.__getitem__)]


def apply_axes(kernel: list[str], local: list[int], axes: tuple[int, ...]) -> tuple[list[str], list[int]] | None:
    """The rendered ``kernel`` with local dimension ``i`` read from axis ``axes[i]``, and the work group's size on each
    axis; None where the kernel reads the local ids other than through its ``lidx`` declarations, or anything that
    depends on which invocations share a subgroup."""
    if axes == tuple(range(len(axes))):
        return kernel, local
    out, found = [], set()
    for line in kernel:
        m = _LIDX.match(line)
        if m and int(m.group(2)) < len(axes) and m.group(3) == "xyz"[int(m.group(2))]:
            dim = int(m.group(2))
            found.add(dim)
            line = m.group(1) + "xyz"[axes[dim]] + m.group(4)
        out.append(line)
    used = {i for i, n in enumerate(local[: len(axes)]) if n > 1}
    if not used <= found or sum(ln.count("gl_LocalInvocationID") for ln in kernel) != len(found):
        return None
    if any("gl_LocalInvocationIndex" in ln or "gl_Subgroup" in ln or "subgroup" in ln for ln in kernel):
        return None
    sizes = list(local)
    for dim, axis in enumerate(axes):
        sizes[axis] = local[dim]
    return out, sizes
