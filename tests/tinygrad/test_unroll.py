"""Innermost loops unrolled on GPUs (vkbackend.tinygrad.renderer.unroll): which loops, by how much, and that the
results stay exact. The renderer knows the lane budget from the arch (``unroll64``); a CPU device (lavapipe) leaves
it off unless ``VKBACKEND_TINYGRAD_UNROLL=1``, so the device tests here turn it on through ``DEV=VK::<arch>``."""

from __future__ import annotations

import dataclasses
import re
import types

import numpy as np
import pytest
from _render_only import BASE, kernels, render_device
from tinygrad import Context, Tensor, dtypes

from vkbackend.tinygrad.renderer.caps import TCShape, make_arch, parse_arch
from vkbackend.tinygrad.renderer.unroll import LANE_BUDGET, MAX_FACTOR
from vkbackend.tinygrad.runtime.device_caps import caps_from_info, unrolls

RNG = np.random.default_rng(3)
UNROLLED = render_device("VKUNROLL", dataclasses.replace(BASE, unroll_lanes=LANE_BUDGET))
PLAIN = render_device("VKNOUNROLL", BASE)
LOOP = re.compile(r"for \(int (\w+) = 0; \1 < (\d+); \1\+\+\) \{")


def _loops(source: str) -> dict[str, int]:
    """The constant loops of a kernel's source, by variable: their trip counts."""
    return {name: int(n) for name, n in LOOP.findall(source)}


def _factors(source: str) -> dict[str, int]:
    """The unrolled loops of a kernel's source, by variable: their factors."""
    return {name: int(u) for name, u in re.findall(r"for \(int (\w+)_u = 0; \1_u < \S+; \1_u \+= (\d+)\)", source)}


def _row_sum(dev: str) -> None:
    Tensor.empty(64, 1000, device=dev).sum(1).realize()


def _matmul(dev: str) -> None:
    (Tensor.empty(256, 256, device=dev) @ Tensor.empty(256, 256, device=dev)).realize()


# ----- rendering (no GPU) ------------------------------------------------------------------------------------------


def test_the_budget_travels_in_the_arch():
    caps = dataclasses.replace(BASE, unroll_lanes=LANE_BUDGET)
    assert f"unroll{LANE_BUDGET}" in make_arch(caps).split(",") and parse_arch(make_arch(caps)) == caps
    assert "unroll" not in make_arch(BASE) and parse_arch(make_arch(BASE)).unroll_lanes == 0


def test_gpus_unroll_and_a_cpu_device_does_not_unless_asked(monkeypatch):
    monkeypatch.delenv("VKBACKEND_TINYGRAD_UNROLL", raising=False)
    gpu, cpu = types.SimpleNamespace(device_type="discrete_gpu"), types.SimpleNamespace(device_type="cpu")
    assert unrolls(gpu) and not unrolls(cpu)
    monkeypatch.setenv("VKBACKEND_TINYGRAD_UNROLL", "1")
    assert unrolls(cpu)
    monkeypatch.setenv("VKBACKEND_TINYGRAD_UNROLL", "0")
    assert not unrolls(gpu)


def test_a_loop_of_scalar_loads_is_unrolled_by_the_largest_factor_with_a_tail(glslang):
    (plain,) = kernels(PLAIN, _row_sum)
    (unrolled,) = kernels(UNROLLED, _row_sum)
    (name, n), *_ = _loops(plain.source).items()
    assert not _factors(plain.source)
    # a few scalar loads an iteration: the largest factor; a tail loop for the iterations the factor does not divide
    assert _factors(unrolled.source) == {name: MAX_FACTOR}
    assert unrolled.source.count(f"int {name} = {name}_u+") == MAX_FACTOR
    if n % MAX_FACTOR:
        assert f"for (int {name} = {n // MAX_FACTOR * MAX_FACTOR}; {name} < {n}; {name}++) {{" in unrolled.source


def test_the_factor_keeps_the_copies_loads_within_the_budget(glslang):
    (plain,) = kernels(PLAIN, _matmul)
    (unrolled,) = kernels(UNROLLED, _matmul)
    ((name, u),) = _factors(unrolled.source).items()
    body = plain.source.split(f"{name}++) {{", 1)[1].split("\n  }", 1)[0]
    lanes = len(re.findall(r"data\d+_\d+\[", body)) + sum(int(w) for w in re.findall(r"VK_V\d+_(\d+)\(", body))
    assert lanes * u <= LANE_BUDGET < lanes * u * 2, (lanes, u)


@pytest.mark.parametrize("layout", ["chunk", "nv"])
def test_loops_around_tensor_cores_are_left_alone(glslang, layout):
    # chunk: the tiles staged through shared memory (barriers in the loop); nv: registers straight into the matrices
    tc = dataclasses.replace(BASE, tc_threads=32, tc_shapes=(TCShape(16, 16, 16, "f16", "f32"),), tc_layout=layout)
    plain = render_device(f"VKTC{layout.upper()}", tc)
    # a budget that the loop's loads would fit many times over
    unrolled = render_device(f"VKTCUNROLL{layout.upper()}", dataclasses.replace(tc, unroll_lanes=64 * LANE_BUDGET))

    def fn(dev):
        (
            Tensor.empty(256, 256, dtype=dtypes.half, device=dev)
            @ Tensor.empty(256, 256, dtype=dtypes.half, device=dev)
        ).realize()

    (k,) = kernels(unrolled, fn)
    assert "coopMat" in k.source and _loops(k.source), "not a tensor-core kernel with a loop"
    assert [k.source] == [x.source for x in kernels(plain, fn)]


def test_short_and_unloaded_loops_are_unchanged(glslang):
    short = lambda dev: Tensor.empty(3, 1, device=dev).sum(1).realize()  # noqa: E731
    assert [k.source for k in kernels(UNROLLED, short)] == [k.source for k in kernels(PLAIN, short)]


# ----- on the device -----------------------------------------------------------------------------------------------


@pytest.fixture
def unrolled_vk(vk_device):
    """tinygrad's VK device with unrolling on (also on lavapipe, where it is off by default)."""
    caps = dataclasses.replace(vk_device.renderer.caps, unroll_lanes=LANE_BUDGET)
    with Context(DEV=f"VK::{make_arch(caps)}"):
        yield vk_device


def test_this_device_unrolls_where_it_is_a_gpu(vk_device):
    info = vk_device.vk.info
    assert (caps_from_info(info).unroll_lanes == LANE_BUDGET) == unrolls(info)


def test_unrolled_reductions_are_exact(unrolled_vk, kernel_sources):
    a = RNG.integers(-1000, 1000, (64, 1003), dtype=np.int32)  # 1003: a tail loop after the unrolled main loop
    b = RNG.integers(-1000, 1000, 262147, dtype=np.int32)  # past lavapipe's loop limit: both passes unroll it
    np.testing.assert_array_equal(Tensor(a).sum(1).numpy(), a.sum(1))
    np.testing.assert_array_equal(Tensor(a).max(1).numpy(), a.max(1))
    assert Tensor(b).cast(dtypes.int64).sum().item() == int(b.astype(np.int64).sum())
    assert any(_factors(src) for src in kernel_sources), "no kernel was unrolled"


def test_unrolled_matmul_and_convolution_match_numpy(unrolled_vk, kernel_sources):
    a, b = RNG.uniform(-1, 1, (96, 160)).astype(np.float32), RNG.uniform(-1, 1, (160, 72)).astype(np.float32)
    np.testing.assert_allclose((Tensor(a) @ Tensor(b)).numpy(), a @ b, rtol=1e-5, atol=1e-5)
    x, w = RNG.uniform(-1, 1, (2, 64, 7, 7)).astype(np.float32), RNG.uniform(-1, 1, (32, 64, 1, 1)).astype(np.float32)
    want = np.einsum("bchw,oc->bohw", x, w[:, :, 0, 0])
    np.testing.assert_allclose(Tensor(x).conv2d(Tensor(w)).numpy(), want, rtol=1e-5, atol=1e-5)
    assert any(_factors(src) for src in kernel_sources), "no kernel was unrolled"
