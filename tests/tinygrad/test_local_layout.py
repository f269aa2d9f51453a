"""Local dimensions laid on the work group's axes for its warps (vkbackend.tinygrad.renderer.local_layout): the order
the cost picks, a kernel that reads each ``lidx`` from its axis in a group sized to match, and unchanged results. The
renderer knows the warp's size from the arch (``lanes32``); a CPU device (lavapipe) leaves the layout alone unless
``VKBACKEND_TINYGRAD_LOCAL_LAYOUT=1``, so the device tests here turn it on through ``DEV=VK::<arch>``."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
from _render_only import BASE, kernels, render_device
from _shared_checks import (
    archs_with_subgroup_lanes,
    check_arch_token,
    check_matmul_and_1x1_convolution,
    check_on_but_on_cpu,
    check_same_bits_on_and_off,
    check_this_device_unless_cpu,
)
from tinygrad import Context, Tensor, dtypes
from tinygrad.uop.ops import Ops, UOp

from vkbackend.tinygrad.renderer import renderer
from vkbackend.tinygrad.renderer.local_layout import apply_axes, choose_axes, layout_costs
from vkbackend.tinygrad.runtime.device_caps import lays_out_locals

RNG = np.random.default_rng(5)
LAID = render_device("VKLAIDOUT", dataclasses.replace(BASE, warp_lanes=32))
PLAIN = render_device("VKNOTLAIDOUT", BASE)
LIDX = re.compile(r"int lidx(\d) = int\(gl_LocalInvocationID\.([xyz])\); /\* (\d+) \*/")
LAYOUT = re.compile(r"layout\(local_size_x=(\d+), local_size_y=(\d+), local_size_z=(\d+)\) in;")


def _axes(source: str) -> dict[int, str]:
    """The axis each ``lidx`` of a kernel's source is read from, by dimension."""
    return {int(d): a for d, a, _ in LIDX.findall(source)}


def _consistent(source: str) -> bool:
    """Whether the work group's size on each axis is the size of the ``lidx`` read from it (1 where none is)."""
    sizes = [int(n) for n in LAYOUT.search(source).groups()]
    want = [1, 1, 1]
    for _, axis, n in LIDX.findall(source):
        want["xyz".index(axis)] = int(n)
    return sizes == want


def _matmul(dev: str) -> None:
    (Tensor.empty(256, 256, device=dev) @ Tensor.empty(256, 256, device=dev)).realize()


# ----- rendering (no GPU) ------------------------------------------------------------------------------------------


def test_the_warp_size_travels_in_the_arch():
    check_arch_token(BASE, "warp_lanes", "lanes", 32)


def test_every_device_but_a_cpu_one_lays_out_locals_unless_asked(monkeypatch):
    check_on_but_on_cpu(lays_out_locals, "VKBACKEND_TINYGRAD_LOCAL_LAYOUT", monkeypatch)


def test_a_matmul_gets_its_loads_neighbours_in_one_warp(glslang, monkeypatch):
    # tinygrad puts lidx0 on x; the matmul's lidx0 steps its loads 4 KiB apart, its lidx1 by a vector: lidx1 goes on x
    seen = []
    choose = renderer.choose_axes

    def record(uops, local, lanes, local_max):
        axes = choose(uops, local, lanes, local_max)
        costs = layout_costs(uops, local, [tuple(range(len(axes))), axes], lanes)
        # where the device's work groups cannot be as wide along x as lidx1, tinygrad's order is the one left
        narrow = choose(uops, local, lanes, (local[0], 1024, 64))
        seen.append((costs, axes, narrow))
        return axes

    monkeypatch.setattr(renderer, "choose_axes", record)
    (laid,) = kernels(LAID, _matmul)
    (plain,) = kernels(PLAIN, _matmul)
    assert _axes(plain.source) == {0: "x", 1: "y"} and _consistent(plain.source)
    assert _axes(laid.source) == {0: "y", 1: "x"} and _consistent(laid.source)
    assert laid.meta["local"] == [int(n) for n in LAYOUT.search(laid.source).groups()]
    ((costs, axes, narrow),) = seen
    assert axes == (1, 0) and costs[1] < costs[0], costs  # the cheaper order, by the count it reports
    assert narrow == (0, 1)


def test_kernels_with_fewer_than_two_local_dimensions_keep_their_layout(glslang):
    def row_sum(dev: str) -> None:
        Tensor.empty(64, 1000, device=dev).sum(1).realize()

    for k in kernels(LAID, row_sum):
        assert set(_axes(k.source).values()) <= {"x"}, k.source
    limits = (1024, 1024, 64)
    assert choose_axes([], [8, 1, 1], 32, limits) == (0,) and choose_axes([], [8, 16, 1], 1, limits) == (0, 1)


def test_an_index_computed_from_loaded_data_keeps_tinygrads_layout():
    table, data = UOp.param(0, dtypes.int32, (64,)), UOp.param(1, dtypes.float, (1024,))
    lidx0 = UOp(Ops.SPECIAL, dtypes.int32, (UOp.const(8, dtypes.int32),), "lidx0")
    gathered = UOp(Ops.LOAD, dtypes.int32, (UOp(Ops.INDEX, dtypes.int32, (table, lidx0)),))
    load = UOp(Ops.LOAD, dtypes.float, (UOp(Ops.INDEX, dtypes.float, (data, gathered)),))
    assert layout_costs([load], [8, 16, 1], [(0, 1), (1, 0)], 32) is None
    assert choose_axes([load], [8, 16, 1], 32, (1024, 1024, 64)) == (0, 1)
    # an index past int64 (a constant, or a loop's bound) cannot be counted either
    huge = UOp.const(2**64 - 1, dtypes.uint64)
    far = UOp(Ops.LOAD, dtypes.float, (UOp(Ops.INDEX, dtypes.float, (data, huge)),))
    assert layout_costs([far], [8, 16, 1], [(0, 1), (1, 0)], 32) is None


def test_apply_axes_rewrites_the_lidx_declarations_and_the_sizes():
    kernel = [
        "void main() {",
        "  int lidx0 = int(gl_LocalInvocationID.x); /* 8 */",
        "  int lidx1 = int(gl_LocalInvocationID.y); /* 16 */",
        "  data0[lidx0] = 1.0;",
    ]
    out, sizes = apply_axes(kernel, [8, 16, 1], (1, 0))
    assert out[1:3] == [
        "  int lidx0 = int(gl_LocalInvocationID.y); /* 8 */",
        "  int lidx1 = int(gl_LocalInvocationID.x); /* 16 */",
    ]
    assert out[3] == kernel[3] and sizes == [16, 8, 1]
    assert apply_axes(kernel, [8, 16, 1], (0, 1)) == (kernel, [8, 16, 1])
    # a kernel that reads the local ids elsewhere too (a merged group's index) is left to its own layout
    assert apply_axes([*kernel, "  int g = int(gl_LocalInvocationID.z);"], [8, 16, 1], (1, 0)) is None
    # and so is one whose results depend on which invocations share a subgroup
    assert apply_axes([*kernel, "  uint s = gl_SubgroupInvocationID;"], [8, 16, 1], (1, 0)) is None


# ----- on the device -----------------------------------------------------------------------------------------------


def test_this_device_lays_out_locals_unless_it_is_a_cpu_one(vk_device, monkeypatch):
    check_this_device_unless_cpu(vk_device, "warp_lanes", "VKBACKEND_TINYGRAD_LOCAL_LAYOUT", monkeypatch)


def _convolutions() -> list[np.ndarray]:
    """A matmul, a 1x1 and a padded 3x3 convolution, on tinygrad's default device (the same inputs every call)."""
    rng = np.random.default_rng(11)
    a, b = rng.uniform(-1, 1, (256, 256)).astype(np.float32), rng.uniform(-1, 1, (256, 256)).astype(np.float32)
    x, w = rng.uniform(-1, 1, (8, 64, 7, 7)).astype(np.float32), rng.uniform(-1, 1, (128, 64, 1, 1)).astype(np.float32)
    x3 = rng.uniform(-1, 1, (4, 32, 14, 14)).astype(np.float32)
    w3 = rng.uniform(-1, 1, (32, 32, 3, 3)).astype(np.float32)
    return [
        (Tensor(a) @ Tensor(b)).numpy(),
        Tensor(x).conv2d(Tensor(w)).numpy(),
        Tensor(x3).conv2d(Tensor(w3), padding=1).numpy(),
    ]


def test_laid_out_kernels_compute_what_tinygrads_layout_does(vk_device, kernel_sources):
    _, laid_sources = check_same_bits_on_and_off(vk_device, "warp_lanes", _convolutions, kernel_sources)
    with Context(DEV=archs_with_subgroup_lanes(vk_device, "warp_lanes")[0]):
        check_matmul_and_1x1_convolution(RNG, (256, 256, 256), (8, 64, 7, 7), 128, rtol=1e-4)
    assert any(_axes(src).get(0, "x") != "x" for src in laid_sources), "no kernel was laid out"
    # (a widened kernel's z axis holds merged groups, not a local dimension)
    assert all(_consistent(src) for src in laid_sources if '"widen":1' in src.split("\n", 1)[0])
