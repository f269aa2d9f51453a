"""Kernels whose loops would pass lavapipe's per-invocation iteration limit: unrolled under it, or refused by name.

gallivm (lavapipe's compiler) leaves every loop of an invocation once 65,535 iterations have run, all loops together,
without an error; tinygrad renders a reduction over a length with no small divisor as one loop in one invocation.
The renderer knows the limit from the arch (``loops65535``); the device tests check results exactly against numpy
on whatever device runs them."""

from __future__ import annotations

import dataclasses
import types

import numpy as np
import pytest
from _render_only import BASE, kernels, render_device
from tinygrad import Tensor, Variable, dtypes
from tinygrad.helpers import Context

from vkbackend.tinygrad.renderer.caps import make_arch, parse_arch
from vkbackend.tinygrad.renderer.loop_limit import LoopLimitError
from vkbackend.tinygrad.runtime.device_caps import caps_from_info, is_lavapipe

RNG = np.random.default_rng(1)
# unrolling for loads left off, so that only the limit unrolls
LIMITED = render_device("VKLOOPS", dataclasses.replace(BASE, loop_limit=65535))
UNLIMITED = render_device("VKNOLOOPS", BASE)
TINY = render_device("VKTINYLOOPS", dataclasses.replace(BASE, loop_limit=1000))


def _long_sum(dev: str, n: int = 262147):
    Tensor.empty(n, dtype=dtypes.int32, device=dev).cast(dtypes.int64).sum().realize()


# ----- rendering (no GPU) ------------------------------------------------------------------------------------------


def test_the_limit_travels_in_the_arch_and_only_lavapipe_has_it():
    caps = dataclasses.replace(BASE, loop_limit=65535)
    assert "loops65535" in make_arch(caps).split(",") and parse_arch(make_arch(caps)) == caps
    assert "loops" not in make_arch(BASE) and parse_arch(make_arch(BASE)).loop_limit == 0
    assert is_lavapipe(types.SimpleNamespace(name="llvmpipe (LLVM 15.0.6, 256 bits)"))
    assert not is_lavapipe(types.SimpleNamespace(name="NVIDIA H200"))


def test_a_long_loop_is_unrolled_only_where_the_limit_is(glslang):
    (plain,) = kernels(UNLIMITED, _long_sum)
    (unrolled,) = kernels(LIMITED, _long_sum)
    assert "for (int Ridx0 = 0; Ridx0 < 262147; Ridx0++)" in plain.source and "Ridx0_u" not in plain.source
    # 32,768 iterations of 8 copies, then a tail loop of 3
    assert "for (int Ridx0_u = 0; Ridx0_u < 262144; Ridx0_u += 8) {" in unrolled.source
    assert unrolled.source.count("int Ridx0 = Ridx0_u+") == 8
    assert "for (int Ridx0 = 262144; Ridx0 < 262147; Ridx0++) {" in unrolled.source


def test_short_loops_are_unchanged(glslang):
    short = lambda dev: Tensor.empty(4099, dtype=dtypes.int32, device=dev).sum().realize()  # noqa: E731
    assert [k.source for k in kernels(LIMITED, short)] == [k.source for k in kernels(UNLIMITED, short)]


def test_a_symbolic_bound_is_unrolled_for_its_largest_value(glslang):
    def fn(dev):
        v = Variable("n", 1, 300000).bind(262147)
        Tensor.empty(300000, dtype=dtypes.int32, device=dev)[:v].sum().realize()

    (k,) = kernels(LIMITED, fn)
    assert "Ridx0_u += 8) {" in k.source and "/8*8)" in k.source  # main loop to the bound's multiple of 8, then a tail


def test_a_kernel_unrolling_cannot_fix_is_refused_by_name(glslang):
    with pytest.raises(LoopLimitError, match=r"at most 1,000 loop iterations per invocation.*LP_MAX_TGSI_LOOP"):
        kernels(TINY, lambda dev: _long_sum(dev, 16777259))  # a 32,768-fold unroll would be needed


# ----- on the device -----------------------------------------------------------------------------------------------


@pytest.fixture
def on_vk(vk_device):
    with Context(DEV="VK"):
        yield vk_device


def test_this_device_declares_the_limit_when_it_is_lavapipe(on_vk):
    info = on_vk.vk.info
    assert caps_from_info(info).loop_limit == (65535 if is_lavapipe(info) else 0)


@pytest.mark.parametrize("n", [262147, 1000003, 16777259])
def test_int64_sum_of_an_odd_length_is_exact(on_vk, n):
    a = RNG.integers(-(2**31), 2**31, n, dtype=np.int64).astype(np.int32)
    assert Tensor(a).cast(dtypes.int64).sum().item() == int(a.astype(np.int64).sum())


@pytest.mark.parametrize("n", [262147, 1000003])
def test_float_sum_of_an_odd_length(on_vk, n):
    a = RNG.uniform(0.0, 1.0, n).astype(np.float32)
    np.testing.assert_allclose(Tensor(a).sum().item(), a.astype(np.float64).sum(), rtol=1e-4)


def test_symbolic_sum_past_the_limit(on_vk):
    a = RNG.integers(-1000, 1000, 300000, dtype=np.int32)
    v = Variable("n", 1, 300000).bind(262147)
    assert Tensor(a)[:v].sum().item() == int(a[:262147].sum())


# masked_select's result size is computed on tinygrad's CPU device, which compiles with clang
@pytest.mark.usefixtures("tinygrad_cpu_device")
def test_masked_select_nested_loops(on_vk):
    # tinygrad's test_masked_select: a prefix sum of 320 elements in 20*320*320 nested loop iterations per invocation
    x = RNG.uniform(-2, 2, (32, 10)).astype(np.float32)
    np.testing.assert_equal(Tensor(x).masked_select(Tensor(x) > 0.5).numpy(), x[x > 0.5])
    np.testing.assert_equal(Tensor(x).masked_select(Tensor(True)).numpy(), x.reshape(-1))
