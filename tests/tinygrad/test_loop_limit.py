"""Kernels whose loops would pass lavapipe's per-invocation iteration limit: unrolled under it, or refused by name.

gallivm (lavapipe's compiler) leaves every loop of an invocation once 65,535 iterations have run, all loops together,
without an error; tinygrad renders a reduction over a length with no small divisor as one loop in one invocation.
The renderer knows the limit from the arch (``loops65535``); the device tests check results exactly against numpy
on whatever device runs them."""

from __future__ import annotations

import dataclasses
import shutil
import sys
import types

import numpy as np
import pytest
from tinygrad import Tensor, Variable, dtypes
from tinygrad.device import Compiled
from tinygrad.helpers import Context
from tinygrad.runtime.ops_null import NullAllocator, NullProgram

from vkbackend.tinygrad.compiler.kernel_format import unpack_lib
from vkbackend.tinygrad.renderer.caps import DeviceCaps, make_arch, parse_arch
from vkbackend.tinygrad.renderer.loop_limit import LoopLimitError
from vkbackend.tinygrad.runtime.device_caps import caps_from_info, is_lavapipe

RNG = np.random.default_rng(1)
BASE = DeviceCaps(f16=True, f64=True, i8=True, i16=True, i64=True, local_threads=1024, shared_max=32768)
SEEN: list = []


def _render_device(name: str, caps: DeviceCaps) -> str:
    """A tinygrad device that renders and compiles for ``caps`` and runs nothing (kernels recorded in SEEN)."""

    class Program(NullProgram):
        def __init__(self, dev, obj):
            super().__init__(dev, obj)
            SEEN.append(unpack_lib(obj.lib))

    class Device(Compiled):
        def __init__(self, device: str):
            super().__init__(device, NullAllocator(self), [VKRenderer], Program, arch=make_arch(caps))

    from vkbackend.tinygrad.renderer.renderer import VKRenderer  # noqa: PLC0415

    module = types.ModuleType(f"tinygrad.runtime.ops_{name.lower()}")
    setattr(module, f"{name}Device", Device)
    sys.modules[module.__name__] = module
    return name


LIMITED = _render_device("VKLOOPS", dataclasses.replace(BASE, loop_limit=65535))
UNLIMITED = _render_device("VKNOLOOPS", BASE)
TINY = _render_device("VKTINYLOOPS", dataclasses.replace(BASE, loop_limit=1000))


def _kernels(dev: str, fn) -> list:
    start = len(SEEN)
    with Context(DEV=dev, CACHELEVEL=0):
        fn(dev)
    return SEEN[start:]


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
    (plain,) = _kernels(UNLIMITED, _long_sum)
    (unrolled,) = _kernels(LIMITED, _long_sum)
    assert "for (int Ridx0 = 0; Ridx0 < 262147; Ridx0++)" in plain.source and "Ridx0_u" not in plain.source
    # 32,768 iterations of 8 copies, then a tail loop of 3
    assert "for (int Ridx0_u = 0; Ridx0_u < 262144; Ridx0_u += 8) {" in unrolled.source
    assert unrolled.source.count("int Ridx0 = Ridx0_u+") == 8
    assert "for (int Ridx0 = 262144; Ridx0 < 262147; Ridx0++) {" in unrolled.source


def test_short_loops_are_unchanged(glslang):
    short = lambda dev: Tensor.empty(4099, dtype=dtypes.int32, device=dev).sum().realize()  # noqa: E731
    assert [k.source for k in _kernels(LIMITED, short)] == [k.source for k in _kernels(UNLIMITED, short)]


def test_a_symbolic_bound_is_unrolled_for_its_largest_value(glslang):
    def fn(dev):
        v = Variable("n", 1, 300000).bind(262147)
        Tensor.empty(300000, dtype=dtypes.int32, device=dev)[:v].sum().realize()

    (k,) = _kernels(LIMITED, fn)
    assert "Ridx0_u += 8) {" in k.source and "/8*8)" in k.source  # main loop to the bound's multiple of 8, then a tail


def test_a_kernel_unrolling_cannot_fix_is_refused_by_name(glslang):
    with pytest.raises(LoopLimitError, match=r"at most 1,000 loop iterations per invocation.*LP_MAX_TGSI_LOOP"):
        _kernels(TINY, lambda dev: _long_sum(dev, 16777259))  # a 32,768-fold unroll would be needed


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
@pytest.mark.skipif(shutil.which("clang") is None, reason="tinygrad's CPU device needs clang (apt-get install clang)")
def test_masked_select_nested_loops(on_vk):
    # tinygrad's test_masked_select: a prefix sum of 320 elements in 20*320*320 nested loop iterations per invocation
    x = RNG.uniform(-2, 2, (32, 10)).astype(np.float32)
    np.testing.assert_equal(Tensor(x).masked_select(Tensor(x) > 0.5).numpy(), x[x > 0.5])
    np.testing.assert_equal(Tensor(x).masked_select(Tensor(True)).numpy(), x.reshape(-1))
