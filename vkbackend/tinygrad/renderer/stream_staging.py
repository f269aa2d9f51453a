"""Loads whose lanes each walk a run of their own, staged through shared memory a tile at a time; on by default on
every device but a CPU one (:func:`vkbackend.tinygrad.runtime.device_caps.stages_streams`).

tinygrad often gives each invocation a run of memory of its own to walk: the first kernel of a float32 ``sum`` has
each of a work group's 32 invocations add up 4,096 consecutive floats, 16 KiB from its neighbour's, four vectors an
iteration. One warp-wide load then touches a cache line per lane, and the rest of each line is read by the same lane
in its next iterations. Under CUDA the L1 cache keeps those lines; under NVIDIA's Vulkan driver it does not (see
:mod:`~vkbackend.tinygrad.renderer.local_layout`), and that kernel reads at about 60 % of the bandwidth of one whose
lanes read neighbouring vectors.

This pass splits such a loop into tiles of ``T`` iterations, ``T`` vectors making a cache line (:data:`LINE_BYTES`).
At the start of each tile the work group loads the tile of every invocation's runs together, neighbouring invocations
reading neighbouring vectors of one run, into shared memory; after a barrier each invocation runs its ``T``
iterations as before, reading its own vectors from there (rows padded by one vector so that the lanes' reads fall on
different banks), and a second barrier at the next tile keeps the tile until all have read it. Every invocation
computes what it computed, from the same values, in the same order: the results are tinygrad's bit for bit.

A load is staged when it sits, unconditionally, in an innermost loop whose constant trip count ``T`` divides, reads
32-bit elements of a global argument the kernel does not write, is not gated, and its index (evaluated by
:mod:`~vkbackend.tinygrad.renderer.index_values`) advances by exactly the load's width each iteration and puts each
lane of the first warp on a cache line of its own. The barriers need every invocation of the group to run the tiles
together, so the kernel has one local dimension (a power of two), the loop and the loops around it constant bounds,
and no ``IF`` around it; kernels on global ids, with tensor cores, or with shared memory or barriers of their own are
left as they are, as are kernels that store through a pointer view (which argument such a store writes is not
followed), loops whose tile would not fit in :data:`SHARED_BUDGET` bytes, and kernels where a value the staging
computes inside the loop is one the kernel also reads after it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tinygrad.dtype import dtypes
from tinygrad.uop.ops import AddrSpace, AxisType, Ops, ParamArg, UOp

from vkbackend.tinygrad.renderer.glsl_types import storage_dtype
from vkbackend.tinygrad.renderer.index_values import Unknown, evaluate
from vkbackend.tinygrad.renderer.loops import enclosing_ranges, range_name
from vkbackend.tinygrad.renderer.memory_access import base_buffer, global_param_access
from vkbackend.tinygrad.renderer.uop_lists import Placement, index_const, live, rebuilt, scoped, substitute

__all__ = ["LINE_BYTES", "SHARED_BUDGET", "StreamStaging", "plan_staging", "stage_streams"]

LINE_BYTES = 128  # what each lane's run gives a tile: one cache line
# shared memory one work group may spend on a tile: the H200 ran sum's first kernel (18 KiB a tile of 32 lanes)
# 1.4x faster, and slower with tiles of 34 KiB (docs/performance.md)
SHARED_BUDGET = 24 << 10


@dataclass(frozen=True)
class StreamStaging:
    """What :func:`stage_streams` does to a kernel: ``loop`` split into tiles of ``tile`` iterations, and ``loads``
    (each ``lanes`` wide) read from shared memory, for a work group of ``group`` invocations."""

    loop: UOp
    tile: int
    loads: tuple[UOp, ...]
    lanes: int
    group: int

    def shared_elements(self) -> int:
        """Elements of the shared buffer: a row of ``tile + 1`` vectors per invocation and load."""
        return len(self.loads) * self.group * (self.tile + 1) * self.lanes


def _uniform_loops(uops: list[UOp]) -> dict[UOp, tuple[UOp, ...]]:
    """The innermost loops of constant bound that every invocation runs alike (constant bounds around them too, no IF
    around them), each with the uops its body runs unconditionally (its END excluded)."""
    out: dict[UOp, tuple[UOp, ...]] = {}
    ifs, inner = 0, set()
    bodies: dict[UOp, list[UOp]] = {}
    ends: dict[UOp, UOp] = {}
    for u, around in enclosing_ranges(uops):
        if u.op is Ops.IF:
            ifs += 1
        elif u.op is Ops.ENDIF:
            ifs -= 1
        elif u.op is Ops.END:
            for r in u.src[1:]:
                ends[r] = u
        elif u.op is Ops.RANGE:
            inner.update(around)  # a loop with a loop inside is not innermost
            bodies[u] = []
            if ifs or any(r.src[0].vmin != r.src[0].vmax for r in (*around, u)):
                inner.add(u)
        elif around and not ifs:
            bodies[around[-1]].append(u)
    for r, body in bodies.items():
        # closed by an END of its own (one closing several loops is not split)
        if r not in inner and r in ends and tuple(ends[r].src[1:]) == (r,):
            out[r] = tuple(body)
    return out


def _written(uops: list[UOp]) -> set[UOp] | None:
    """The global arguments the kernel stores to; None where it stores through a pointer view of one (which argument
    is not followed)."""
    out: set[UOp] = set()
    for u in uops:
        if u.op is not Ops.STORE:
            continue
        if (access := global_param_access(u)) is not None:
            out.add(access[0])
            continue
        base = base_buffer(u.src[0].src[0] if u.src[0].op in (Ops.INDEX, Ops.SHRINK) else u.src[0])
        if base.op is not Ops.BUFFER:  # registers and shared memory are BUFFERs; anything else may be a view
            return None
    return out


def plan_staging(uops: list[UOp], lanes: int, shared_max: int) -> StreamStaging | None:
    """The loop and loads of ``uops`` worth staging for warps of ``lanes`` invocations (see the module's docstring),
    within ``shared_max`` bytes of shared memory; None where nothing is."""
    specials = [u for u in uops if u.op is Ops.SPECIAL]
    local = [u for u in specials if u.arg[0] == "l"]
    if (
        lanes < 2
        or len(local) != 1
        or local[0].arg != "lidx0"
        or any(u.arg[0] == "i" for u in specials)
        or any(u.op in (Ops.BARRIER, Ops.WMMA) for u in uops)
        or any(u.op is Ops.BUFFER and u.addrspace is AddrSpace.LOCAL for u in uops)
    ):
        return None
    group = int(local[0].src[0].vmax)
    if group < 2 or group & (group - 1) or local[0].src[0].vmin != group:
        return None
    if (written := _written(uops)) is None:
        return None
    warp = list(range(min(lanes, group)))
    lidx = [warp, [0] * len(warp), [0] * len(warp)]
    best: StreamStaging | None = None
    for loop, body in _uniform_loops(uops).items():
        trips = int(loop.src[0].vmax)
        streams: list[tuple[UOp, int, int]] = []  # (load, lanes, itemsize)
        for u in body:
            access = global_param_access(u)
            if u.op is not Ops.LOAD or len(u.src) != 1 or access is None or access[0] in written:
                continue
            buf, index, width = access
            element = storage_dtype(buf.dtype)
            if element not in (dtypes.float32, dtypes.int32, dtypes.uint32):
                continue  # shared memory of 32-bit types only: 8- and 16-bit ones there need more of the device
            size = element.itemsize
            try:
                first = evaluate(index, lidx, {}, {loop: 0})
                second = evaluate(index, lidx, {}, {loop: 1})
            except (Unknown, OverflowError):
                continue
            lines = {a * size // LINE_BYTES for a in first}  # each lane of the warp on a line of its own
            if any(b - a != width for a, b in zip(first, second)) or len(lines) != len(warp):
                continue
            streams.append((u, width, size))
        if not streams or len({(w, s, u.dtype) for u, w, s in streams}) != 1:
            continue  # one shared buffer: all of one width and type
        width, size = streams[0][1], streams[0][2]
        tile = LINE_BYTES // (width * size)
        if tile < 2 or tile & (tile - 1) or trips % tile:
            continue
        plan = StreamStaging(loop, tile, tuple(u for u, _, _ in streams), width, group)
        if plan.shared_elements() * size > min(shared_max, SHARED_BUDGET):
            continue
        if best is None or len(plan.loads) > len(best.loads):
            best = plan
    return best


def _alu(op: Ops, a: UOp, b: UOp) -> UOp:
    return UOp(op, dtypes.int, (a, b))


def _lane_and_step(lidx: UOp, i: int, group: int, tile: int) -> tuple[UOp, UOp]:
    """Which invocation's run, and which iteration of the tile, the ``i``-th cooperative load of invocation ``lidx``
    reads: element ``k = i * group + lidx`` of the tile, ``k // tile`` and ``k % tile`` (both powers of two)."""
    if tile <= group:
        per = group // tile  # runs one round of loads covers
        run = _alu(Ops.SHR, lidx, index_const(int(math.log2(tile))))
        run = _alu(Ops.ADD, run, index_const(i * per)) if i else run
        return run, _alu(Ops.AND, lidx, index_const(tile - 1))
    rounds = tile // group  # rounds of loads one run takes
    step = _alu(Ops.ADD, lidx, index_const((i % rounds) * group)) if i % rounds else lidx
    return index_const(i // rounds), step


def stage_streams(uops: list[UOp], plan: StreamStaging) -> tuple[list[UOp], str] | None:
    """``uops`` with ``plan``'s loop split into tiles and its loads read from shared memory, and the name of the loop
    over one tile's iterations (which the renderer unrolls whole); None where a value the staging computes inside the
    loop is also one the kernel reads after it (a GLSL variable would be out of scope there)."""
    loop, tile, group, width = plan.loop, plan.tile, plan.group, plan.lanes
    lidx = next(u for u in uops if u.op is Ops.SPECIAL and u.arg == "lidx0")
    start = uops.index(loop)
    body_end = next(i for i in range(start + 1, len(uops)) if uops[i].op is Ops.END and uops[i].src[1:] == (loop,))
    ids = [u.arg[0] for u in uops if u.op is Ops.RANGE]
    slots = [u.arg.slot for u in uops if u.op is Ops.BUFFER]
    row = (tile + 1) * width  # elements of one invocation's row: padded by a vector
    dtype = plan.loads[0].dtype
    stage = UOp(
        Ops.BUFFER,
        dtype,
        (index_const(plan.shared_elements()),),
        arg=ParamArg(max(slots, default=-1) + 1, dtype, addrspace=AddrSpace.LOCAL),
    )
    outer = UOp(
        Ops.RANGE,
        dtypes.int,
        (index_const(int(loop.src[0].vmax) // tile), *loop.src[1:]),
        (max(ids) + 1, AxisType.REDUCE),
    )
    inner = UOp(Ops.RANGE, dtypes.int, (index_const(tile), outer), (max(ids) + 2, AxisType.REDUCE))
    first_iteration = _alu(Ops.MUL, outer, index_const(tile))

    def access(mop: UOp, buf: UOp, index: UOp) -> UOp:
        return mop.replace(src=(buf, index, *mop.src[2:]))

    def row_of(s: int, run: UOp) -> UOp:
        return _alu(Ops.MUL, _alu(Ops.ADD, run, index_const(s * group)) if s else run, index_const(row))

    # the tile: each invocation loads ``tile`` vectors of each stream, neighbouring invocations neighbouring vectors
    tile_ops: list[UOp] = [UOp(Ops.BARRIER, dtypes.void, (outer,))]
    stores = []
    for s, load in enumerate(plan.loads):
        mop = load.src[0]
        for i in range(tile):
            run, step = _lane_and_step(lidx, i, group, tile)
            at = _alu(Ops.ADD, first_iteration, step)
            index = substitute(mop.src[1], {lidx: run, loop: at})
            value = load.replace(src=(access(mop, mop.src[0], index),))
            offset = _alu(Ops.ADD, row_of(s, run), _alu(Ops.MUL, step, index_const(width)) if width > 1 else step)
            stores.append(UOp(Ops.STORE, dtypes.void, (access(mop, stage, offset), value)))
    tile_ops += stores
    barrier = UOp(Ops.BARRIER, dtypes.void, tuple(stores))
    tile_ops.append(barrier)
    ready = UOp(Ops.AFTER, dtype, (stage, barrier))

    # the iterations of one tile: the loop's body, reading the staged loads from shared memory
    at = _alu(Ops.ADD, first_iteration, inner)
    swap: dict[UOp, UOp] = {loop: at}
    for s, load in enumerate(plan.loads):
        mop = load.src[0]
        offset = _alu(Ops.ADD, row_of(s, lidx), _alu(Ops.MUL, inner, index_const(width)) if width > 1 else inner)
        swap[load] = load.replace(src=(access(mop, ready, offset),))
    body = []
    for u in uops[start + 1 : body_end]:
        if u in swap:
            body.append(swap[u])
            continue
        # an AFTER orders on the loop itself: it now orders on the tile's loop
        body.append(rebuilt(u, {**swap, loop: inner} if u.op is Ops.AFTER else swap))
        swap[u] = body[-1]
    end = uops[body_end]
    inner_end = UOp(Ops.END, dtypes.void, (swap.get(end.src[0], end.src[0]), inner))
    outer_end = UOp(Ops.END, dtypes.void, (inner_end, outer))
    swap[end] = outer_end

    out = Placement()
    for u in (*uops[:start], stage, outer, *tile_ops, inner, *body, inner_end, outer_end):
        out.place(u)
    swap[loop] = outer  # after the loop, what orders on it orders on the tiles' loop
    for u in uops[body_end + 1 :]:
        out.place(rebuilt(u, swap))
    staged = live(out.uops)
    return (staged, range_name(inner)) if scoped(staged) else None
