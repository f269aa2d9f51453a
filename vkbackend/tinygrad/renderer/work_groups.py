"""How a kernel's work groups map onto the device's grid: narrow groups merged into wider ones (:func:`widen_groups`),
and a grid longer along x than the device allows folded onto another axis (:func:`fold_groups`).

Both rewrite the lines tinygrad renders for its group (or, on global ids, invocation) indices, ``int gidx0 =
int(gl_WorkGroupID.x);``, and tell the program how to launch the result (``widen`` and ``fold`` in the kernel's
metadata, read by ``VKProgram.grid``).
"""

from __future__ import annotations

import math

from tinygrad.uop.ops import UOp

__all__ = ["GRID_X", "MANY_GROUPS", "NARROW_GROUP", "WIDE_GROUP", "fold_groups", "widen_groups"]

WIDE_GROUP = 32  # invocations per work group of a widened one-invocation kernel: a warp on NVIDIA, a wave32 on AMD
NARROW_GROUP = 128  # work groups of fewer invocations than this are merged, several to a group, up to it...
MANY_GROUPS = 4096  # ...when there are at least this many, about what a large GPU holds at once (an H200: 132 SMs x
# 32): far fewer all run at once anyway, and merged they would leave multiprocessors idle


def widen_groups(
    kernel: list[str], gidx0: UOp | None, local: list[int], local_max: tuple[int, ...], groups: int | None = None
) -> tuple[list[str], int, int]:
    """A kernel of narrow work groups run as wider ones: ``(kernel, factor, axis)``, where each new work group runs
    ``factor`` of the old ones along x, the old group's index along the local ``axis`` (z, whose size was 1); factor
    1: left as it is.

    A GPU holds only so many work groups on a multiprocessor at once (32 on NVIDIA's Hopper), so groups of one
    invocation (as tinygrad makes for the 50,257 rows of GPT-2's LM head: no local size divides them) keep a few
    percent of its lanes busy, and groups of 32 (tinygrad's elementwise kernels) half of them, too few memory requests
    in flight for a kernel that streams. One-invocation groups are merged up to WIDE_GROUP, other groups of fewer than
    NARROW_GROUP invocations up to it where the kernel has ``groups`` (all work groups, None when not constant) of at
    least MANY_GROUPS: with fewer, all are on the GPU at once, and merging them would only leave multiprocessors idle
    (a reduction's first stage of 512 groups). The old group's index takes local z, the outermost axis (lanes are
    numbered x first), so a warp's lanes keep the layout they had. Widened, the grid along x is
    ``ceil(size / factor)`` (``VKProgram.grid``) and the invocations past ``size`` return at once. Only kernels that
    cannot tell the difference are widened: without shared memory or barriers (the caller leaves out tensor-core
    kernels: cooperative matrices need every invocation of a subgroup, which the guard's early return would break,
    and staged ones use both), with a constant size along x, and without a use of local z."""
    size = gidx0.src[0].ssimplify() if gidx0 is not None else None
    threads = math.prod(local)
    if (
        not isinstance(size, int)
        or threads >= NARROW_GROUP
        or (threads > 1 and (groups or 0) < MANY_GROUPS)
        or local[2] != 1
        or any("barrier()" in ln or ln.lstrip().startswith("shared ") for ln in kernel)
    ):
        return kernel, 1, 0
    factor = min((WIDE_GROUP if threads == 1 else NARROW_GROUP) // threads, size, local_max[2])
    if factor < 2 or any("gl_LocalInvocationID.z" in ln for ln in kernel):
        return kernel, 1, 0
    head = "int gidx0 = int(gl_WorkGroupID.x);"
    for i, line in enumerate(kernel):
        if line.strip().startswith(head):
            guard = f"  if (gidx0 >= {size}) return;" if size % factor else None
            merged = line.replace("gl_WorkGroupID.x", f"gl_WorkGroupID.x * {factor}u + gl_LocalInvocationID.z")
            return [*kernel[:i], merged, *([guard] if guard else []), *kernel[i + 1 :]], factor, 2
    return kernel, 1, 0


# The grid along x that tinygrad is told it may use. Many devices allow 65,535 work groups per axis, and tinygrad splits
# a longer axis only by a divisor that fits, so a kernel over a prime number of rows past it (100,003) could not be
# made; fold_groups folds what passes the device's own limit instead.
GRID_X = 2**31 - 1


def fold_groups(
    kernel: list[str], specials: dict[str, UOp], widen: int, grid_max: tuple[int, int, int]
) -> tuple[list[str], tuple[int, int, int] | None]:
    """A kernel whose grid along x may pass the device's ``grid_max[0]``, folded into rows along another axis:
    ``(kernel, (axis, rows, limit))``, or ``(kernel, None)`` when it fits (or its length along x is not constant: the
    launch checks that grid against the device's limits).

    The kernel's index along x becomes ``gl_WorkGroupID.x + row * gl_NumWorkGroups.x``, and what lies past the end
    returns at once: a whole work group (barriers and subgroups stay uniform), or on global ids (``NOLOCALS``: no
    shared memory, no barriers) an invocation. The row is the group's index along an axis the kernel does not use;
    there ``rows`` is 0 and the launch takes ``ceil(groups / limit)`` of them. Where the kernel uses both, the row is
    the group's index along one of them modulo ``rows``, fixed here, and the kernel's own index there the quotient.
    ``widen`` is :func:`widen_groups`' factor, applied first. Raises RuntimeError where no axis has room."""
    gid = any(name[0] == "i" for name in specials)
    prefix, builtin = ("idx", "gl_GlobalInvocationID") if gid else ("gidx", "gl_WorkGroupID")
    first = specials.get(f"{prefix}0")
    size = first.src[0].ssimplify() if first is not None else None
    if not isinstance(size, int):
        return kernel, None
    length = -(-size // widen)  # groups along x; on global ids invocations, as many groups at worst (one each)
    limit = grid_max[0]
    if length <= limit:
        return kernel, None
    rows = -(-length // limit)
    sizes = {axis: specials[f"{prefix}{axis}"].src[0].ssimplify() for axis in (1, 2) if f"{prefix}{axis}" in specials}
    # on global ids a launch of wider groups needs fewer rows: its own grid check has the last word
    free = [axis for axis in (1, 2) if axis not in sizes and (gid or rows <= grid_max[axis])]
    shared = [axis for axis, n in sizes.items() if isinstance(n, int) and rows * n <= grid_max[axis]]
    if not free and not shared:
        raise RuntimeError(
            f"vkbackend: a kernel's grid ({length} along x, {dict(sizes)} along y/z) does not fit this device's "
            f"maxComputeWorkGroupCount {tuple(grid_max)}: make the tensor smaller, or split the computation"
        )
    axis = (free or shared)[0]
    a = "xyz"[axis]
    row = f"gl_WorkGroupID.{a}" if free else f"(gl_WorkGroupID.{a} % {rows}u)"
    index = f"gl_WorkGroupID.x + {row} * gl_NumWorkGroups.x"
    if gid:
        index = f"({index}) * gl_WorkGroupSize.x + gl_LocalInvocationID.x"
    own = f"(gl_WorkGroupID.{a} / {rows}u)"
    if gid:
        own = f"({own} * gl_WorkGroupSize.{a} + gl_LocalInvocationID.{a})"
    out, folded = [], False
    for line in kernel:
        if line.strip().startswith(f"int {prefix}0 = "):
            line, folded = line.replace(f"{builtin}.x", "vk_group_x"), True
        elif not free and line.strip().startswith(f"int {prefix}{axis} = "):
            line = line.replace(f"{builtin}.{a}", own)
        out.append(line)
    if not folded:
        raise RuntimeError(f"vkbackend: no {prefix}0 line to fold in a kernel of {length} along x")
    guard = [f"  uint vk_group_x = {index};", f"  if (vk_group_x >= {length}u) return;"]
    return [*guard, *out], (axis, 0 if free else rows, limit)
