"""Loads whose lanes each walk a run of their own, staged through shared memory a tile at a time
(vkbackend.tinygrad.renderer.stream_staging): which kernels, what the staged kernel looks like, and results that are
tinygrad's bit for bit. The renderer knows the warp's size from the arch (``stage32``); a CPU device (lavapipe) leaves
the staging off unless ``VKBACKEND_TINYGRAD_STAGE_STREAMS=1``, so the device tests here turn it on through
``DEV=VK::<arch>``."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest
from _render_only import BASE, kernels, render_device
from _shared_checks import (
    check_arch_token,
    check_on_but_on_cpu,
    check_same_bits_on_and_off,
    check_this_device_unless_cpu,
)
from tinygrad import Tensor, dtypes
from tinygrad.helpers import PARALLEL
from tinygrad.uop.ops import AxisType, Ops, UOp

from vkbackend.tinygrad.renderer import renderer
from vkbackend.tinygrad.renderer.index_values import evaluate
from vkbackend.tinygrad.renderer.stream_staging import (
    SHARED_BUDGET,
    _alu,
    _lane_and_step,
    plan_staging,
    stage_streams,
)
from vkbackend.tinygrad.renderer.uop_lists import index_const
from vkbackend.tinygrad.runtime.device_caps import stages_streams

STAGED = render_device("VKSTAGED", dataclasses.replace(BASE, stage_lanes=32))
PLAIN = render_device("VKNOTSTAGED", BASE)
# a device whose shared memory cannot hold a tile of sum's first kernel (4 loads x 32 rows x 9 vec4: 18 KiB)
SMALL = render_device("VKSTAGEDSMALL", dataclasses.replace(BASE, stage_lanes=32, shared_max=16384))
# a device whose staging declines every plan (the test below makes it so): its own name, so its kernels render anew
DECLINED = render_device("VKSTAGEDDECLINED", dataclasses.replace(BASE, stage_lanes=32))
SUM_FLOATS = 64 << 20  # tinygrad's first kernel: 512 groups of 32, each invocation summing 4,096 floats of its own


def _sum(dev: str) -> None:
    Tensor.empty(SUM_FLOATS, device=dev).sum().realize()


def _plans(monkeypatch) -> list:
    """The plans :func:`plan_staging` makes from here on, in the order of the kernels rendered (in this process:
    tinygrad's compile workers would not see the patch)."""
    seen = []
    plan = renderer.plan_staging

    def record(uops, lanes, shared_max):
        seen.append(plan(uops, lanes, shared_max))
        return seen[-1]

    monkeypatch.setattr(renderer, "plan_staging", record)
    monkeypatch.setattr(PARALLEL, "value", 0)
    return seen


# ----- rendering (no GPU) ------------------------------------------------------------------------------------------


def test_the_warp_size_for_staging_travels_in_the_arch():
    check_arch_token(BASE, "stage_lanes", "stage", 32)


def test_every_device_but_a_cpu_one_stages_streams_unless_asked(monkeypatch):
    check_on_but_on_cpu(stages_streams, "VKBACKEND_TINYGRAD_STAGE_STREAMS", monkeypatch)


def test_sums_first_kernel_loads_a_line_of_each_run_per_tile(glslang, monkeypatch):
    plans = _plans(monkeypatch)
    first, *_ = kernels(STAGED, _sum)
    # (tinygrad keeps each device's programs: the kernels of ``_sum`` render once a device)
    # the second stage reads neighbouring floats with neighbouring lanes; the last has its own shared memory
    assert len(plans) == 3 and plans[1:] == [None, None]
    plan = plans[0]
    assert plan is not None and (plan.tile, len(plan.loads), plan.lanes, plan.group) == (8, 4, 4, 32)
    assert int(plan.loop.src[0].vmax) == 256 and plan.shared_elements() * 4 <= SHARED_BUDGET
    src = first.source
    # one shared buffer, a row of 9 vec4 (8 and a pad) per invocation and load
    assert re.search(r"shared vec4 \w+\[1152\];", src), src
    # the tiles' loop holds the two barriers and the loads of the tile; the tile's 8 iterations are unrolled whole
    tiles = re.search(r"for \(int (\w+) = 0; \1 < 32; \1\+\+\) \{", src)
    assert tiles, src
    body = src[tiles.end() :]
    assert body.count("barrier();") == 2 and body.count("VK_V1_4(") == 32
    assert "for (" not in body and len(re.findall(r"int Ridx\d+ = \d;", body)) == 8
    (plain,) = kernels(PLAIN, _sum)[:1]
    assert "shared" not in plain.source and "barrier" not in plain.source


def test_loads_of_neighbouring_lanes_are_not_staged(glslang, monkeypatch):
    plans = _plans(monkeypatch)

    def add(dev: str) -> None:
        (Tensor.empty(1 << 20, device=dev) + Tensor.empty(1 << 20, device=dev)).realize()

    for k in kernels(STAGED, add):
        assert "shared" not in k.source
    assert plans and not any(plans)


def test_a_tile_that_does_not_fit_the_shared_memory_is_not_staged(glslang, monkeypatch):
    plans = _plans(monkeypatch)
    first, *_ = kernels(SMALL, _sum)
    assert "shared" not in first.source and plans[0] is None


def _loop_kernel(index_of, view: bool = False, after=None) -> list[UOp]:
    """A linear kernel of one local dimension (32) and one loop (256): ``out[lidx0] += data[index_of(lidx0, r)]``
    (through a pointer view of ``out`` with ``view``), then ``out[after(lidx0)] = 1`` with ``after``."""
    data, out = UOp.param(1, dtypes.float, (1 << 20,)), UOp.param(0, dtypes.float, (32,))
    table = UOp.param(2, dtypes.int32, (1 << 13,))
    lidx0 = UOp(Ops.SPECIAL, dtypes.int32, (UOp.const(32, dtypes.int32),), "lidx0")
    r = UOp(Ops.RANGE, dtypes.int32, (UOp.const(256, dtypes.int32),), (0, AxisType.REDUCE))
    index = index_of(lidx0, r, table)
    load = UOp(Ops.LOAD, dtypes.float, (UOp(Ops.INDEX, dtypes.float, (data, index)),))
    target = UOp(Ops.BITCAST, dtypes.float, (out,)) if view else out
    store = UOp(Ops.STORE, dtypes.void, (UOp(Ops.INDEX, dtypes.float, (target, lidx0)), load))
    end = UOp(Ops.END, dtypes.void, (store, r))
    uops = [*dict.fromkeys([lidx0, r, *index.toposort(), load, *store.toposort()]), end]
    if after is not None:
        one = UOp(
            Ops.STORE, dtypes.void, (UOp(Ops.INDEX, dtypes.float, (out, after(lidx0))), UOp.const(1.0, dtypes.float))
        )
        uops += [u for u in one.toposort() if u not in uops]
    return uops


def test_a_run_of_its_own_per_lane_is_planned_and_a_gathered_index_is_not():
    def run(lidx0, r, table):
        return lidx0 * 4096 + r  # each lane 16 KiB from its neighbour, one float an iteration

    def gathered(lidx0, r, table):
        # the table is read by neighbouring lanes (not a candidate); the data at what it holds cannot be evaluated
        return UOp(Ops.LOAD, dtypes.int32, (UOp(Ops.INDEX, dtypes.int32, (table, r * 32 + lidx0)),))

    def neighbours(lidx0, r, table):
        return r * 32 + lidx0

    plan = plan_staging(_loop_kernel(run), 32, 32768)
    assert plan is not None and (plan.tile, plan.lanes, plan.group, len(plan.loads)) == (32, 1, 32, 1)
    assert plan_staging(_loop_kernel(gathered), 32, 32768) is None
    assert plan_staging(_loop_kernel(neighbours), 32, 32768) is None
    assert plan_staging(_loop_kernel(run), 0, 32768) is None
    # a store through a pointer view: which argument it writes is not followed, so nothing is staged
    assert plan_staging(_loop_kernel(run, view=True), 32, 32768) is None


def test_a_value_the_staging_would_declare_in_the_loop_and_the_kernel_reads_after_it_stops_the_staging():
    # the tile's loads compute ``lidx0 & 31`` (the iteration each reads) inside the loop; read again after the loop,
    # that declaration would be out of scope there
    def run(lidx0, r, table):
        return lidx0 * 4096 + r

    uops = _loop_kernel(run, after=lambda lidx0: _alu(Ops.AND, lidx0, index_const(31)))
    plan = plan_staging(uops, 32, 32768)
    assert plan is not None and stage_streams(uops, plan) is None
    staged = stage_streams(_loop_kernel(run), plan_staging(_loop_kernel(run), 32, 32768))
    assert staged is not None and any(u.op is Ops.BARRIER for u in staged[0])


def test_the_renderer_renders_unstaged_where_the_staging_declines(glslang, monkeypatch):
    monkeypatch.setattr(renderer, "stage_streams", lambda uops, plan: None)
    monkeypatch.setattr(PARALLEL, "value", 0)  # rendered in this process, where the patch is
    first, *_ = kernels(DECLINED, _sum)
    assert "shared" not in first.source and "barrier" not in first.source


@pytest.mark.parametrize("group,tile", [(32, 8), (32, 32), (8, 8), (4, 8), (2, 32)])
def test_the_tiles_loads_cover_every_run_and_iteration_once(group, tile):
    # invocation lidx's i-th load of a tile reads run ``run`` at iteration ``step`` of the tile: together, every
    # (run, step) of the tile exactly once, whether a round of loads covers several runs or a run takes several rounds
    lidx = UOp(Ops.SPECIAL, dtypes.int32, (UOp.const(group, dtypes.int32),), "lidx0")
    lanes = list(range(group))
    seen = []
    for i in range(tile):
        run, step = _lane_and_step(lidx, i, group, tile)
        seen += zip(evaluate(run, [lanes], {}), evaluate(step, [lanes], {}))
    assert sorted(seen) == [(r, t) for r in range(group) for t in range(tile)]


# ----- on the device -----------------------------------------------------------------------------------------------


def test_this_device_stages_streams_unless_it_is_a_cpu_one(vk_device, monkeypatch):
    check_this_device_unless_cpu(vk_device, "stage_lanes", "VKBACKEND_TINYGRAD_STAGE_STREAMS", monkeypatch)


def _reductions() -> list[np.ndarray]:
    """Reductions whose kernels walk a run per lane, on tinygrad's default device (the same inputs every call)."""
    rng = np.random.default_rng(17)
    flat = rng.uniform(-1, 1, 1 << 24).astype(np.float32)
    rows = rng.uniform(-1, 1, (4096, 4096)).astype(np.float32)
    ints = rng.integers(-1000, 1000, 1 << 24, dtype=np.int32)
    vec = rng.uniform(-1, 1, 4096).astype(np.float32)
    return [
        Tensor(flat).sum().numpy(),
        Tensor(rows).sum(1).numpy(),
        Tensor(rows).max(1).numpy(),
        Tensor(ints).sum().numpy(),
        (Tensor(rows) @ Tensor(vec)).numpy(),
    ]


def test_staged_reductions_are_tinygrads_bit_for_bit(vk_device, kernel_sources):
    staged, staged_sources = check_same_bits_on_and_off(vk_device, "stage_lanes", _reductions, kernel_sources)
    # the first kernel of each sum, and the row reductions' and the matrix-vector product's one kernel
    staged_count = sum(bool(re.search(r"^shared i?vec4 ", s, re.M)) and "barrier();" in s for s in staged_sources)
    assert staged_count >= 5, f"{staged_count} kernels were staged"
    rng = np.random.default_rng(17)
    flat = rng.uniform(-1, 1, 1 << 24).astype(np.float32)
    np.testing.assert_allclose(staged[0], flat.astype(np.float64).sum(), rtol=1e-4, atol=1e-2)
