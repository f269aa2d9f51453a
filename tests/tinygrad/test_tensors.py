"""tinygrad tensors on ``DEV=VK`` compared with numpy: elementwise, reductions, matmul, casts, views, transfers."""

from __future__ import annotations

import os
import re
import shutil

import numpy as np
import pytest
from tinygrad import Device, Tensor, TinyJit, Variable, dtypes, nn
from tinygrad.helpers import Context

from vkbackend.tinygrad import bfloat16_bits
from vkbackend.tinygrad.kernel_opts import run_with_opts

RNG = np.random.default_rng(0)


# Some of tinygrad's work runs on its CPU device even under DEV=VK, and that device compiles with clang (a machine
# whose cc is gcc cannot serve it).
needs_cpu_device = pytest.mark.usefixtures("tinygrad_cpu_device")


@pytest.fixture(autouse=True)
def _on_vk(vk_device):
    with Context(DEV="VK"):
        yield


def rand(*shape, dtype=np.float32, lo=-2.0, hi=2.0):
    return RNG.uniform(lo, hi, size=shape).astype(dtype)


def supports(dt) -> bool:
    return dt in Device["VK"].renderer.supported_dtypes()


def test_opening_the_device_begins_glslangs_set_up():
    """The VK device's process compiles GLSL (the layout probe, tinygrad's kernels it lowers itself), so opening the
    device starts glslang's set-up on its thread (vkbackend.glslang_lib.set_up_in_background)."""
    from vkbackend import glslang_lib

    assert glslang_lib._set_up_thread is not None


# ----- elementwise -------------------------------------------------------------------------------------------------

UNARY = {
    "neg": (lambda t: -t, lambda a: -a, rand(257)),
    "relu": (lambda t: t.relu(), lambda a: np.maximum(a, 0), rand(257)),
    "exp": (lambda t: t.exp(), np.exp, rand(257)),
    "log": (lambda t: t.log(), np.log, rand(257, lo=0.01, hi=100)),
    "sqrt": (lambda t: t.sqrt(), np.sqrt, rand(257, lo=0, hi=100)),
    "sin": (lambda t: t.sin(), np.sin, rand(257, lo=-10, hi=10)),
    "reciprocal": (lambda t: t.reciprocal(), lambda a: 1 / a, rand(257, lo=0.5, hi=3)),
    "sigmoid": (lambda t: t.sigmoid(), lambda a: 1 / (1 + np.exp(-a)), rand(257)),
    "trunc": (lambda t: t.trunc(), np.trunc, rand(257, lo=-20, hi=20)),
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(name):
    fn, ref, a = UNARY[name]
    np.testing.assert_allclose(fn(Tensor(a)).numpy(), ref(a), rtol=1e-5, atol=1e-5)


def test_binary_and_where():
    a, b = rand(33, 65), rand(33, 65)
    ta, tb = Tensor(a), Tensor(b)
    np.testing.assert_allclose((ta + tb).numpy(), a + b, rtol=1e-6)
    np.testing.assert_allclose((ta * tb - ta).numpy(), a * b - a, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose((ta / (tb.abs() + 1)).numpy(), a / (np.abs(b) + 1), rtol=1e-5)
    np.testing.assert_allclose(ta.maximum(tb).numpy(), np.maximum(a, b))
    np.testing.assert_allclose((ta < tb).where(ta, tb * 2).numpy(), np.where(a < b, a, b * 2))
    np.testing.assert_allclose((ta + 1.5).numpy(), a + 1.5, rtol=1e-6)


def test_special_values():
    v = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -1.0, 2.0], dtype=np.float32)
    t = Tensor(v)
    with np.errstate(all="ignore"):
        np.testing.assert_equal((t != t).numpy(), np.isnan(v))
        np.testing.assert_allclose(t.exp2().numpy(), np.exp2(v))
        np.testing.assert_allclose(t.sqrt().numpy(), np.sqrt(v))
        np.testing.assert_allclose(t.reciprocal().numpy(), 1 / v)
        np.testing.assert_allclose(t.log2().numpy()[[0, 1, 2, 3, 4, 5]], np.log2(v)[[0, 1, 2, 3, 4, 5]])


@pytest.mark.parametrize(
    "dt",
    [dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16, dtypes.int32, dtypes.uint32, dtypes.int64, dtypes.uint64],
)
def test_integer_ops(dt):
    if not supports(dt):
        pytest.skip(f"{dt} is not supported by this device")
    npdt = np.dtype(dt.fmt)
    info = np.iinfo(npdt)
    lo, hi = max(info.min, -100), min(info.max, 100)
    a = RNG.integers(lo, hi, size=129).astype(npdt)
    b = RNG.integers(1, min(hi, 13), size=129).astype(npdt)
    if info.min < 0:
        b = np.where(RNG.random(129) < 0.5, -b, b).astype(npdt)
    ta, tb = Tensor(a), Tensor(b)
    np.testing.assert_equal((ta + tb).numpy(), a + b)
    np.testing.assert_equal((ta * tb).numpy(), a * b)
    np.testing.assert_equal((ta // tb).numpy(), a // b)  # floor division, like Python and numpy
    np.testing.assert_equal((ta % tb).numpy(), a % b)  # the trap: glslang's OpSMod has the divisor's sign
    np.testing.assert_equal((ta & tb).numpy(), a & b)
    np.testing.assert_equal((ta ^ tb).numpy(), a ^ b)
    np.testing.assert_equal((ta < tb).numpy(), a < b)
    np.testing.assert_equal(ta.maximum(tb).numpy(), np.maximum(a, b))


@pytest.mark.parametrize("wide", [dtypes.int64, dtypes.uint64])
def test_32_bit_integers_widened_to_64_keep_their_sign(wide):
    """``int32`` cast to 64 bits, then compared with constants, shifted and floor-divided (whose rounding compares
    the operands' signs with zero): lavapipe took the widened value's upper half for zero in all three
    (DeviceCaps.sext64)."""
    if not supports(wide):
        pytest.skip(f"{wide} is not supported by this device")
    a = np.array([-5, -7, 5, -1, -100, 7, -8, 9, -(2**31), 2**31 - 1, 0, -2], np.int32)
    b = np.array([2, 3, 2, 4, 7, 2, 4, 5, 3, 5, 3, -7], np.int32)
    x, y = Tensor(a).cast(wide), Tensor(b).cast(wide)
    npx, npy = a.astype(np.dtype(wide.fmt)), b.astype(np.dtype(wide.fmt))
    np.testing.assert_equal((x < 1).numpy(), npx < 1)
    np.testing.assert_equal((x > 0).numpy(), npx > 0)
    np.testing.assert_equal((x >> 63).numpy(), npx >> 63)
    if wide == dtypes.int64:
        np.testing.assert_equal(x.maximum(-3).numpy(), np.maximum(npx, -3))
        np.testing.assert_equal((x // y).numpy(), npx // npy)


def test_bool_ops():
    a, b = RNG.random(77) < 0.5, RNG.random(77) < 0.5
    ta, tb = Tensor(a), Tensor(b)
    np.testing.assert_equal((ta & tb).numpy(), a & b)
    np.testing.assert_equal((ta | tb).numpy(), a | b)
    np.testing.assert_equal((ta ^ tb).numpy(), a ^ b)
    np.testing.assert_equal(ta.logical_not().numpy(), ~a)
    np.testing.assert_equal((ta < tb).numpy(), a < b)
    np.testing.assert_equal(ta.where(1, 2).numpy(), np.where(a, 1, 2))


def test_float64():
    if not supports(dtypes.float64):
        pytest.skip("float64 is not supported by this device")
    a = rand(100, dtype=np.float64, lo=0.1, hi=3)
    t = Tensor(a)
    np.testing.assert_allclose((t * 0.1 + 1e-12).numpy(), a * 0.1 + 1e-12, rtol=1e-15)
    np.testing.assert_allclose(t.exp().numpy(), np.exp(a), rtol=1e-12)  # software exp2 in double
    np.testing.assert_allclose(t.log().numpy(), np.log(a), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(t.sin().numpy(), np.sin(a), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(t.sqrt().numpy(), np.sqrt(a), rtol=1e-15)


def test_float16():
    if not supports(dtypes.float16):
        pytest.skip("float16 is not supported by this device")
    a, b = rand(64, 32, dtype=np.float16), rand(32, 16, dtype=np.float16)
    np.testing.assert_allclose(
        (Tensor(a) @ Tensor(b)).numpy(), a.astype(np.float32) @ b.astype(np.float32), rtol=2e-2, atol=2e-2
    )
    np.testing.assert_allclose(Tensor(a).exp().numpy(), np.exp(a.astype(np.float32)).astype(np.float16), rtol=2e-3)


# ----- reductions and matmul ---------------------------------------------------------------------------------------


def test_reductions():
    a = rand(37, 129)
    t = Tensor(a)
    # a GPU adds in another order than numpy: the bound is on the magnitudes summed, not on the (small) sum
    np.testing.assert_allclose(t.sum().numpy(), a.astype(np.float64).sum(), atol=np.abs(a).sum() * 2**-18)
    np.testing.assert_allclose(t.sum(axis=0).numpy(), a.sum(axis=0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(t.sum(axis=1).numpy(), a.sum(axis=1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(t.max(axis=1).numpy(), a.max(axis=1))
    np.testing.assert_allclose(t.min().numpy(), a.min())
    np.testing.assert_allclose(t.mean(axis=0).numpy(), a.mean(axis=0), rtol=1e-5, atol=1e-6)
    np.testing.assert_equal(t.argmax(axis=1).numpy(), a.argmax(axis=1))
    np.testing.assert_allclose(
        t.softmax(axis=1).numpy(), np.exp(a) / np.exp(a).sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-6
    )


def test_big_reduction():
    a = rand(1 << 18, lo=0, hi=1)
    np.testing.assert_allclose(Tensor(a).sum().numpy(), a.astype(np.float64).sum(), rtol=1e-4)
    np.testing.assert_equal(Tensor.ones(100_000, dtype=dtypes.int32).sum().item(), 100_000)


@pytest.mark.parametrize("shape", [(64, 64, 64), (33, 17, 65), (1, 256, 128), (128, 1, 3)])
def test_matmul(shape):
    m, k, n = shape
    a, b = rand(m, k), rand(k, n)
    np.testing.assert_allclose((Tensor(a) @ Tensor(b)).numpy(), a @ b, rtol=1e-4, atol=1e-4)


def test_batched_matmul_and_conv():
    a, b = rand(4, 16, 24), rand(4, 24, 8)
    np.testing.assert_allclose((Tensor(a) @ Tensor(b)).numpy(), a @ b, rtol=1e-4, atol=1e-4)
    x, w = rand(2, 3, 12, 12), rand(5, 3, 3, 3)
    out = Tensor(x).conv2d(Tensor(w)).numpy()
    ref = np.zeros((2, 5, 10, 10), np.float32)
    for i in range(10):
        for j in range(10):
            ref[:, :, i, j] = np.einsum("bchw,ochw->bo", x[:, :, i : i + 3, j : j + 3], w)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


# ----- casts -------------------------------------------------------------------------------------------------------

ALL = [
    dtypes.bool,
    dtypes.int8,
    dtypes.uint8,
    dtypes.int16,
    dtypes.uint16,
    dtypes.int32,
    dtypes.uint32,
    dtypes.int64,
    dtypes.uint64,
    dtypes.float16,
    dtypes.float32,
    dtypes.float64,
]


@pytest.mark.parametrize("src", ALL, ids=str)
@pytest.mark.parametrize("dst", ALL, ids=str)
def test_cast(src, dst):
    if not (supports(src) and supports(dst)):
        pytest.skip(f"{src} or {dst} is not supported by this device")
    # values every type holds exactly, so numpy's astype is the reference whatever the pair
    vals = np.array([0, 1, 2, 3, 7, 42, 100, 127], dtype=np.float64)
    if src != dtypes.bool and dtypes.is_float(src) and dtypes.is_int(dst):
        vals = vals + 0.75  # truncation toward zero
    if (
        src in (dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64, dtypes.float16, dtypes.float32, dtypes.float64)
        and dst not in dtypes.uints
        and dst != dtypes.bool
    ):
        vals = np.concatenate([vals, -vals])
    a = vals.astype(src.fmt)
    np.testing.assert_equal(Tensor(a).cast(dst).numpy(), a.astype(dst.fmt))


def test_bfloat16_conversions_round_as_tinygrads_own():
    # float32 to bfloat16 rounds to nearest even and keeps a NaN a NaN; bfloat16 to float32 is exact: every bfloat16
    # pattern, and float32 patterns at every exponent with ties, their neighbours, NaN payloads in either half
    if not supports(dtypes.bfloat16):
        pytest.skip("no bfloat16")
    exponents = np.arange(256, dtype=np.uint32) << 23
    low = np.array([0, 1, 0x7FFF, 0x8000, 0x8001, 0xFFFF, 0x10000, 0x17FFF, 0x18000, 0x18001, 0x7FFFFF], np.uint32)
    bits = (exponents[:, None] | low[None, :]).ravel()
    bits = np.concatenate([bits, bits | 0x80000000, RNG.integers(0, 1 << 32, 4096, dtype=np.uint32)])
    got = Tensor(bits.view(np.float32)).cast(dtypes.bfloat16).bitcast(dtypes.uint16).numpy()
    np.testing.assert_equal(got, bfloat16_bits.from_float32(bits.view(np.float32)))
    patterns = np.arange(1 << 16, dtype=np.uint32)
    back = Tensor(patterns.astype(np.uint16)).bitcast(dtypes.bfloat16).cast(dtypes.float32).bitcast(dtypes.uint32)
    np.testing.assert_equal(back.numpy(), patterns << 16)
    # other types convert through float32
    ints = np.array([-100, -3, 0, 1, 7, 127], dtype=np.int8)
    np.testing.assert_equal(Tensor(ints).cast(dtypes.bfloat16).cast(dtypes.int32).numpy(), ints.astype(np.int32))
    if supports(dtypes.float16):
        halves = np.array([0.5, -2.0, 3.0, 1024.0], dtype=np.float16)  # exact in both
        np.testing.assert_equal(Tensor(halves).cast(dtypes.bfloat16).cast(dtypes.float16).numpy(), halves)


def test_bitcast():
    a = rand(64)
    np.testing.assert_equal(Tensor(a).bitcast(dtypes.uint32).numpy(), a.view(np.uint32))
    np.testing.assert_equal(Tensor(a.view(np.int32)).bitcast(dtypes.float32).numpy(), a)
    if supports(dtypes.float16):
        h = a.astype(np.float16)
        np.testing.assert_equal(Tensor(h).bitcast(dtypes.int16).numpy(), h.view(np.int16))


# ----- views, slices, copies ----------------------------------------------------------------------------------------


def test_slices_and_views():
    a = np.arange(100, dtype=np.float32)
    t = Tensor(a).realize()
    for lo, hi in ((0, 10), (3, 7), (1, 100), (17, 31), (64, 65)):
        np.testing.assert_equal(t[lo:hi].numpy(), a[lo:hi])  # a buffer view at byte offset 4*lo
        np.testing.assert_equal((t[lo:hi] * 2 + 1).numpy(), a[lo:hi] * 2 + 1)  # a kernel reading the view
    np.testing.assert_equal(t[::3].numpy(), a[::3])
    np.testing.assert_equal(t.reshape(10, 10)[2:5, 3:8].numpy(), a.reshape(10, 10)[2:5, 3:8])
    np.testing.assert_equal(t.reshape(10, 10).T.contiguous().numpy(), a.reshape(10, 10).T)


def test_unaligned_byte_views():
    a = np.arange(64, dtype=np.uint8)
    t = Tensor(a).realize()
    for lo in (1, 3, 5, 13):
        np.testing.assert_equal(t[lo : lo + 9].numpy(), a[lo : lo + 9])
        np.testing.assert_equal((t[lo : lo + 9] + 1).numpy(), a[lo : lo + 9] + 1)


def test_write_into_view():
    t = Tensor.zeros(16).contiguous().realize()
    t[3:9] = Tensor.arange(6).float()
    ref = np.zeros(16, np.float32)
    ref[3:9] = np.arange(6)
    np.testing.assert_equal(t.numpy(), ref)


@needs_cpu_device
def test_to_and_from_cpu():
    a = rand(1000)
    t = Tensor(a, device="CPU").to("VK")
    assert t.device == "VK"
    back = (t * 3).to("CPU")
    assert back.device == "CPU"
    np.testing.assert_allclose(back.numpy(), a * 3, rtol=1e-6)
    np.testing.assert_equal(Tensor(a).to("CPU").numpy(), a)


def test_between_two_vk_devices(vk_devices_count):
    # with one GPU, VK:1 is a second tinygrad device on the same GPU (like tinygrad's CPU:1): the copy path is the same
    a = rand(4096)
    t1 = Tensor(a, device="VK:0").to("VK:1")
    assert t1.device == "VK:1"
    np.testing.assert_allclose((t1 + 1).to("VK:0").numpy(), a + 1, rtol=1e-6)


# ----- tinygrad features --------------------------------------------------------------------------------------------


@needs_cpu_device  # tinygrad binds the variable through a kernel of its CPU device
def test_symbolic_variable():
    i = Variable("i", 1, 10)
    t = Tensor.arange(10).float().contiguous().realize()
    for n in (2, 5, 10):
        np.testing.assert_equal((t[: i.bind(n)] + 1).contiguous()[:n].numpy(), np.arange(n) + 1)
        assert (t[: i.bind(n)]).sum().item() == sum(range(n))


def test_jit():
    @TinyJit
    def f(x: Tensor, y: Tensor) -> Tensor:
        return (x * y + 1).realize()

    for _ in range(4):
        a, b = rand(256), rand(256)
        # float32 on a GPU: a fused multiply-add rounds once where numpy rounds twice
        np.testing.assert_allclose(f(Tensor(a), Tensor(b)).numpy(), a * b + 1, rtol=1e-5, atol=1e-6)  # a GPU's fma


def test_jit_replays_as_one_graph():
    # several kernels per call: tinygrad batches them into one VKGraph, replayed with new inputs and variable values
    from vkbackend.tinygrad.runtime.graph import VKGraph

    assert Device["VK"].graph is VKGraph

    @TinyJit
    def f(x: Tensor, w: Tensor, n: Variable) -> Tensor:
        h = (x @ w).relu().contiguous()
        y = (h @ w + 1).contiguous()
        return (y[:n] * 2).sum(axis=0).realize()

    graphs_before = len([g for g in _graph_runners()])
    v = Variable("n", 1, 32)
    for n in (32, 7, 20, 1, 32):
        x, w = rand(32, 32), rand(32, 32)
        want = ((np.maximum(x @ w, 0) @ w + 1)[:n] * 2).sum(axis=0)
        got = f(Tensor(x), Tensor(w), v.bind(n)).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)
    assert len(_graph_runners()) > graphs_before


def test_jit_graph_binds_only_the_buffers_a_kernel_still_reads():
    # a comparison tinygrad folds only while it makes the kernel (the minimum of x % 2 is never below -3): the call
    # still passes x, the kernel no longer reads it; the graph binds what each program takes, and the inputs of the
    # other kernel where they are
    graphs_before = len(_graph_runners())

    @TinyJit
    def f(x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
        folded, other = ((x % 2).min(axis=1) < -3).contiguous(), (y * 3 + x).contiguous()
        Tensor.realize(folded, other)
        return folded, other

    for i in range(4):
        x, y = (np.arange(12, dtype=np.int32).reshape(3, 4) * (i + 1), np.full((3, 4), i, np.int32))
        folded, other = f(Tensor(x), Tensor(y))
        np.testing.assert_equal(folded.numpy(), np.zeros(3, bool))
        np.testing.assert_equal(other.numpy(), y * 3 + x)
    assert len(_graph_runners()) > graphs_before


def test_jit_replay_writes_new_variables_and_grids_in_place(monkeypatch):
    """A replay writes the variables into every kernel whose grid stays (GraphVariables.set), writes the kernels whose
    variable and grid changed over their records (LaunchGraph.set_scalars) and repacks those whose inputs changed:
    attention over the first p keys, p bound anew each call, against numpy."""
    calls = _count_graph_writes(monkeypatch)
    # values again: grids the program has worked out before
    _check_attention(64, 16, (5, 9, 17, 3, 40, 64, 1, 33, 9, 64, 5))
    assert calls["variables"] and calls["scalars and grid"] and calls["whole"], calls


def test_jit_replay_feeds_kernels_the_variables_cannot_one_by_one(monkeypatch):
    """A kernel whose variable scalar the graph's variables cannot feed (here: one program's, refused as a scalar of
    another type would be) is left out of them and gets its scalars written at each replay, the others still from the
    variables: the same attention, against numpy."""
    from vkbackend.launch import Launcher

    refused: list[int] = []
    variable_slot = Launcher.variable_slot

    def refusing(self, prog, scalar):
        if not refused:
            refused.append(prog)
        return None if prog == refused[0] else variable_slot(self, prog, scalar)

    monkeypatch.setattr(Launcher, "variable_slot", refusing)
    calls = _count_graph_writes(monkeypatch)
    _check_attention(48, 8, (4, 11, 30, 2, 48, 7, 19))
    assert refused and calls["variables"] and calls["scalars"], (refused, calls)


def test_jit_replay_keeps_the_bindings_of_an_input_in_the_same_buffer(monkeypatch):
    """A replay whose input lies in the buffer the last one's did writes only what changed, and one whose input lies
    elsewhere binds it anew (a whole update): inputs kept alive together, one buffer assigned new contents, and a new
    tensor each call, the last one freed, whose buffer tinygrad's allocator hands back (as a decoder's token's); each
    against numpy."""
    calls = _count_graph_writes(monkeypatch)
    w = rand(16, 16)
    wt = Tensor(w).realize()

    @TinyJit
    def f(x: Tensor) -> Tensor:  # two kernels: a graph
        return ((x @ wt).relu().contiguous() @ wt + 1).realize()

    def check(x: Tensor, a: np.ndarray) -> None:
        np.testing.assert_allclose(f(x).numpy(), np.maximum(a @ w, 0) @ w + 1, rtol=1e-4, atol=1e-4)

    for _ in range(3):  # the JIT captures its graph on the second call
        a = rand(16)
        check(Tensor(a).realize(), a)
    inputs = [rand(16) for _ in range(4)]
    kept = [Tensor(a).realize() for a in inputs]  # alive together: four buffers
    before = calls["whole"]
    for x, a in zip(kept, inputs):
        check(x, a)
    assert calls["whole"] - before >= 3, calls  # each binds its own buffer
    x = kept[0]
    before = calls["whole"]
    check(x, inputs[0])  # back to the first buffer: bound anew
    assert calls["whole"] - before == 1, calls
    before = calls["whole"]
    for a in inputs[1:]:
        x.assign(Tensor(a)).realize()  # the same buffer, new contents
        check(x, a)
    assert calls["whole"] == before, calls
    del x, kept
    for a in inputs:  # a new tensor each call, the last one freed: the allocator hands its buffer back
        check(Tensor(a).realize(), a)
    before = calls["whole"]
    for a in inputs:
        check(Tensor(a).realize(), a)
    assert calls["whole"] == before, calls


def _count_graph_writes(monkeypatch) -> dict[str, int]:
    """Count what the graph runner writes at its replays: scalars through GraphVariables.set, launches through
    LaunchGraph.set_scalars (with a new grid or without) and through LaunchGraph.update (whole)."""
    from vkbackend.graph import GraphVariables, LaunchGraph

    calls = {"variables": 0, "scalars": 0, "scalars and grid": 0, "whole": 0}
    set_variables, set_scalars, update = GraphVariables.set, LaunchGraph.set_scalars, LaunchGraph.update

    def counted_set_variables(self, values):
        calls["variables"] += len(self._pairs)  # scalars written
        return set_variables(self, values)

    def counted_set_scalars(self, index, scalars, grid=None):
        calls["scalars" if grid is None else "scalars and grid"] += 1
        return set_scalars(self, index, scalars, grid)

    def counted_update(self, index, launch):
        calls["whole"] += 1
        return update(self, index, launch)

    monkeypatch.setattr(GraphVariables, "set", counted_set_variables)
    monkeypatch.setattr(LaunchGraph, "set_scalars", counted_set_scalars)
    monkeypatch.setattr(LaunchGraph, "update", counted_update)
    return calls


def _check_attention(length: int, width: int, positions: tuple[int, ...]) -> None:
    """A jitted attention over the first p of ``length`` keys of ``width``, p bound anew for each of ``positions``
    (kernels whose grid follows p), against numpy."""
    keys, values = rand(length, width), rand(length, width)
    k, v = Tensor(keys).realize(), Tensor(values).realize()

    @TinyJit
    def attend(q: Tensor, p: Variable) -> Tensor:
        return ((k[:p] @ q).softmax() @ v[:p]).realize()

    bound = Variable("p", 1, length)
    for p in positions:
        q = rand(width)
        scores = keys[:p] @ q
        weights = np.exp(scores - scores.max())
        want = (weights / weights.sum()) @ values[:p]
        np.testing.assert_allclose(attend(Tensor(q), bound.bind(p)).numpy(), want, rtol=1e-4, atol=1e-5)


def _graph_runners() -> list:
    import gc

    from vkbackend.tinygrad.runtime.graph import VKGraph

    return [o for o in gc.get_objects() if isinstance(o, VKGraph)]


@needs_cpu_device  # tinygrad seeds its random numbers with a kernel of its CPU device
def test_rand_and_arange():
    r = Tensor.rand(10000).numpy()
    assert 0 <= r.min() and r.max() < 1 and abs(r.mean() - 0.5) < 0.02
    np.testing.assert_equal(Tensor.arange(1000).numpy(), np.arange(1000))


def test_beam_search_times_kernels():
    # BEAM times candidate kernels with wait=True, which is Device.launch_timed (GPU seconds)
    a, b = rand(1024), rand(1024)
    with Context(BEAM=1, IGNORE_BEAM_CACHE=1):
        np.testing.assert_allclose((Tensor(a) + Tensor(b)).numpy(), a + b, rtol=1e-6)


def test_training_step_loss_falls():
    Tensor.manual_seed(0)
    x = Tensor(rand(64, 8))
    y = Tensor((RNG.random(64) * 3).astype(np.int32))
    l1, l2 = nn.Linear(8, 32), nn.Linear(32, 3)
    opt = nn.optim.Adam(nn.state.get_parameters([l1, l2]), lr=0.05)
    losses = []
    with Context(TRAINING=1):
        for _ in range(20):
            opt.zero_grad()
            loss = l2(l1(x).relu()).sparse_categorical_crossentropy(y).backward()
            opt.step()
            losses.append(loss.item())
    assert losses[-1] < losses[0] * 0.7, losses


def test_pointer_bitcast_view():
    # a kernel reading a uint32 buffer through a uint64 view that starts at element 1 (byte 4): GLSL has no pointer
    # casts, so the renderer composes the load from the buffer's own elements
    from tinygrad.device import Buffer
    from tinygrad.engine.realize import run_linear
    from tinygrad.uop.ops import KernelInfo, Ops, UOp, buffers

    val = 0x1122334455667788
    src, out = UOp.param(0, dtypes.uint32, (4,)), UOp.param(1, dtypes.uint64, (1,))
    ibuf = Buffer("VK", 4, dtypes.uint32, initial_value=np.array([0, 0x55667788, 0x11223344, 0], np.uint32).tobytes())
    obuf = Buffer("VK", 1, dtypes.uint64).allocate()
    buf_uops = [UOp.new_buffer(b.device, b.size, b.dtype) for b in (ibuf, obuf)]
    for u, b in zip(buf_uops, (ibuf, obuf)):
        buffers[u] = b
    store = out.index(0).store(src.shrink(((1, 3),)).bitcast(dtypes.uint64).index(0))
    run_linear(UOp(Ops.LINEAR, src=(UOp.sink(store, arg=KernelInfo()).call(*buf_uops),)))
    assert np.frombuffer(obuf.as_memoryview(), dtype=np.uint64)[0] == val


@pytest.mark.parametrize(
    "dt,value",
    [(dtypes.uint32, 0), (dtypes.float32, 3), (dtypes.bool, 1), (dtypes.int64, -2)],
    ids=["uint32", "float32", "bool", "int64"],
)
def test_an_index_constant_stored_upcast_is_converted_as_a_vector(dt, value):
    # tinygrad can leave a constant of its index type (weakint) stored into another type: upcast by 4, the conversion
    # is a vector's (ivec4 to uvec4 or vec4; tinygrad folds the bool and int64 ones itself, and stores 8 lanes as two
    # vectors of 4). Every lane kind of conversion: test_renderer.py
    from tinygrad.codegen.opt import Opt, OptOps
    from tinygrad.device import Buffer
    from tinygrad.engine.realize import run_linear
    from tinygrad.uop.ops import KernelInfo, Ops, UOp, buffers

    if not supports(dt):
        pytest.skip(f"no {dt}")
    np_dt = {dtypes.uint32: np.uint32, dtypes.float32: np.float32, dtypes.bool: np.bool_, dtypes.int64: np.int64}[dt]
    r = UOp.range(384, 0)
    store = UOp.param(0, dt, (384,)).index(r).store(UOp.const(value, dtypes.weakint)).end(r)
    for opts in [(Opt(OptOps.UPCAST, 0, 4), Opt(OptOps.LOCAL, 0, 32)), (Opt(OptOps.UPCAST, 0, 8),)]:
        out = Buffer("VK", 384, dt, initial_value=np.full(384, 7 if dt != dtypes.bool else 0, np_dt).tobytes())
        buf = UOp.new_buffer(out.device, out.size, out.dtype)
        buffers[buf] = out
        run_linear(UOp(Ops.LINEAR, src=(UOp.sink(store, arg=KernelInfo(opts_to_apply=opts)).call(buf),)))
        np.testing.assert_array_equal(np.frombuffer(out.as_memoryview(), dtype=np_dt), np.full(384, value, np_dt))


# ----- vector loads and stores --------------------------------------------------------------------------------------


@pytest.mark.parametrize("dt", [np.float32, np.float16, np.int32])
def test_vector_access_on_views(dt):
    # a realized contiguous slice is a view of its base buffer; kernels read and write it 4 elements at a time: through
    # vec4 arrays when the view is 16-byte aligned, composed from scalars (the VK_VIEWS variant) otherwise
    if dt == np.float16 and not supports(dtypes.float16):
        pytest.skip("no float16")
    a = np.arange(256).astype(dt)
    for lo in (0, 1, 2, 3, 4, 16, 33):
        t = Tensor(a).realize()
        v = t[lo : lo + 128].contiguous().realize()
        np.testing.assert_equal((v * 2 + 1).numpy(), a[lo : lo + 128] * 2 + 1)
        v.assign(v * 3).realize()  # a store into the view
        np.testing.assert_equal(v.numpy(), a[lo : lo + 128] * 3)
        whole = t.numpy()  # the neighbours of the view are untouched
        np.testing.assert_equal(whole[:lo], a[:lo])
        np.testing.assert_equal(whole[lo + 128 :], a[lo + 128 :])


@pytest.mark.parametrize("dt", [dtypes.bfloat16, dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16], ids=str)
def test_narrow_vector_access_on_views(dt):
    # bfloat16, 8- and 16-bit elements are read and written as vectors where the index is a multiple of the lanes
    # (renderer/narrow_vectors.py), one at a time elsewhere; views start at every offset, and tails are left over
    if not supports(dt):
        pytest.skip(f"no {dt}")
    a = (np.arange(301) % 41).astype(np.float32)  # exact in all of these types, and so are a * 2 + 1 and a * 3
    for lo, n in ((0, 128), (1, 128), (2, 128), (3, 131), (6, 257)):
        v = Tensor(a).cast(dt).realize()[lo : lo + n].contiguous().realize()  # a view: the store below goes into it
        np.testing.assert_equal((v * 2 + 1).cast(dtypes.float32).numpy(), a[lo : lo + n] * 2 + 1)
        v.assign(v * 3).realize()  # a store into the view
        np.testing.assert_equal(v.cast(dtypes.float32).numpy(), a[lo : lo + n] * 3)
    whole = Tensor(a).cast(dt).realize()
    view = whole[5:105]
    view.assign(view + 1).realize()  # into a view at an odd offset: its neighbours untouched
    np.testing.assert_equal(whole.cast(dtypes.float32).numpy(), np.concatenate([a[:5], a[5:105] + 1, a[105:]]))


@pytest.mark.parametrize("dt", [dtypes.bfloat16, dtypes.int8, dtypes.int16], ids=str)
def test_narrow_matmuls_under_optimisations(dt):
    # matmuls reading bfloat16, 8- and 16-bit inputs upcast, unrolled, with local dimensions and with partial sums in
    # shared memory behind barriers, B also transposed: their grouped loads (renderer/narrow_vectors.py) read the
    # elements the single ones did
    from tinygrad.codegen.opt import Opt, OptOps

    if not supports(dt):
        pytest.skip(f"no {dt}")
    a, b = (np.arange(16 * 32) % 5).reshape(16, 32), (np.arange(32 * 16) % 3).reshape(32, 16)
    out_dt = dtypes.float32 if dt == dtypes.bfloat16 else dtypes.int32

    def on_device(x):  # bfloat16 rounded from float32 on the device: these small integers are exact in every type
        return Tensor(x.astype(np.float32)).cast(dt).realize()

    all_opts = [
        (Opt(OptOps.UPCAST, 0, 4), Opt(OptOps.UPCAST, 1, 4)),
        (Opt(OptOps.GROUP, 0, 8), Opt(OptOps.UPCAST, 1, 4)),
        (Opt(OptOps.LOCAL, 0, 4), Opt(OptOps.UPCAST, 1, 4), Opt(OptOps.UNROLL, 0, 4)),
    ]
    for opts in all_opts:
        got = run_with_opts(on_device(a).matmul(on_device(b), dtype=out_dt), opts)
        np.testing.assert_equal(got, (a @ b).ravel(), err_msg=str(opts))
    got = run_with_opts(on_device(a).matmul(on_device(b.T.copy()).T, dtype=out_dt), all_opts[0])
    np.testing.assert_equal(got, (a @ b).ravel())


def test_shared_memory_vectors():
    from tinygrad.codegen.opt import Opt, OptOps

    x, y = rand(1, 128), rand(128, 128)
    opts = (Opt(OptOps.GROUP, 0, 8), Opt(OptOps.LOCAL, 0, 4), Opt(OptOps.UPCAST, 0, 4))  # vec4 partial sums in shared
    got = run_with_opts((Tensor(x) @ Tensor(y)).relu(), opts)
    np.testing.assert_allclose(got, np.maximum(x @ y, 0).ravel(), rtol=1e-5, atol=1e-5)


def test_half8_vectors(monkeypatch):
    from tinygrad.codegen.late import coalesce
    from tinygrad.codegen.opt import Opt, OptOps

    if not supports(dtypes.float16):
        pytest.skip("no float16")
    monkeypatch.setattr(coalesce, "getenv", lambda k, d=0: 1 if k == "ALLOW_HALF8" else d)  # 8 halves at a time
    a = rand(1024).astype(np.float16)
    got = run_with_opts(Tensor(a) * 2 + 1, (Opt(OptOps.UPCAST, 0, 8),))
    np.testing.assert_equal(got, a * 2 + 1)


def test_a_kernel_run_with_opts_gives_a_bfloat16_output_as_float32():
    from tinygrad.codegen.opt import Opt, OptOps

    if not supports(dtypes.bfloat16):
        pytest.skip("no bfloat16")
    a = np.arange(-64, 64, dtype=np.float32) * 0.5  # exact in bfloat16, and so is a * 3
    got = run_with_opts(Tensor(a).cast(dtypes.bfloat16) * 3, (Opt(OptOps.UPCAST, 0, 4),))
    assert got.dtype == np.float32
    np.testing.assert_equal(got, a * 3)


# ----- kernels on global ids ----------------------------------------------------------------------------------------


def test_fit_local_size():
    from vkbackend.tinygrad.runtime.ops_vk import VKProgram

    fit = VKProgram.fit_local_size
    assert fit((256, 1, 1), (64, 1, 1), (1024, 1024, 64), 1024) == (64, 1, 1)  # divides: as asked
    assert fit((3367, 1, 1), (256, 1, 1), (1024, 1024, 64), 1024) == (91, 1, 1)  # 3367 = 7*13*37: the largest below
    assert fit((1009, 1, 1), (32, 1, 1), (1024, 1024, 64), 1024) == (1, 1, 1)  # a prime
    assert fit((4, 8, 128), (1, 1, 128), (1024, 1024, 64), 1024) == (1, 1, 64)  # the device's z limit
    assert fit((64, 64, 1), (64, 64, 1), (1024, 1024, 64), 1024) == (32, 32, 1)  # at most max_threads invocations


def test_global_id_kernels():
    # NOLOCALS: kernels on gl_GlobalInvocationID; tinygrad times candidate local sizes, each a variant of one module
    a, m, n = rand(37, 91), rand(64, 48), rand(48, 80)
    p = rand(1009)
    with Context(NOLOCALS=1):
        np.testing.assert_allclose((Tensor(a) * 2 + 1).numpy(), a * 2 + 1, rtol=1e-6)
        np.testing.assert_allclose(Tensor(a).sum(1).numpy(), a.sum(1), rtol=1e-5, atol=1e-5)  # sums near 0
        np.testing.assert_allclose((Tensor(m) @ Tensor(n)).numpy(), m @ n, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose((Tensor(p) - 1).numpy(), p - 1, rtol=1e-6)  # a prime number of invocations


def test_tensors_reached_by_64_bit_address_arithmetic(vk_device, kernel_sources):
    """Arguments of 2 GiB or more are reached by 64-bit address arithmetic (``VK_E``), whose element stride must be
    the declared element's: a vector of 4 lanes is 16 bytes of int32 (a 20 GiB tensor on the H200 read and wrote the
    wrong words when it was 4). Here every argument past 4 KiB is reached so, and the results match numpy."""
    from dataclasses import replace

    from tinygrad import Context

    from vkbackend.tinygrad.renderer.caps import make_arch

    caps = vk_device.renderer.caps
    if not caps.addresses:
        pytest.skip(f"{vk_device.vk.info.name} has no buffer device addresses")
    arch = make_arch(replace(caps, storage_range=4096, wide_bytes=4096))
    a = RNG.integers(-1000, 1000, 1 << 16, dtype=np.int32)
    f = RNG.random(3 * 4099, dtype=np.float32)
    with Context(DEV=f"VK::{arch}"):
        t = Tensor(a)
        np.testing.assert_array_equal((t + 1).numpy(), a + 1)
        np.testing.assert_array_equal((t[-1000:] * 3).numpy(), a[-1000:] * 3)
        assert t.sum(dtype="int64").item() == int(a.sum(dtype=np.int64))
        np.testing.assert_allclose(
            (Tensor(f).reshape(3, 4099) * 2).sum(1).numpy(), (f.reshape(3, 4099) * 2).sum(1), rtol=1e-5
        )
    wide = [src for src in kernel_sources if "#define VK_E" in src]
    assert wide, "no kernel reached an argument by 64-bit address arithmetic"
    assert any(re.search(r"\bVK_E\d+\(i\) .*\* 16ul", src) for src in wide), "no 4-lane access was wide"


def test_tensors_past_the_storage_range_reduce_correctly(vk_device):
    """A tensor larger than maxStorageBufferRange (128 MiB on lavapipe) cannot be bound: its kernels reach it by device
    address. It failed with "larger than maxStorageBufferRange"."""
    info = vk_device.vk.info
    if not info.buffer_device_address:
        pytest.skip(f"{info.name} has no buffer device addresses")
    # About 4 MiB past the range, in a multiple of 2**16 elements: tinygrad then splits each reduction over work
    # groups. At an awkward length it is one invocation's loop, which on a GPU runs for a minute over 4 GiB (and on
    # the H200, with the suite's other processes on the GPU, ended in VK_ERROR_DEVICE_LOST within 7 s).
    n = (info.max_storage_buffer_range // 4 + (1 << 20)) >> 16 << 16
    if 4 * n > info.max_memory_allocation_size and not info.sparse_binding:
        pytest.skip(
            f"{info.name}: the largest allocation ({info.max_memory_allocation_size} B) is not 4 MiB past "
            f"maxStorageBufferRange ({info.max_storage_buffer_range} B), and without sparse binding no "
            "tensor is"
        )
    assert (Tensor.ones(n) * 2).sum().item() == 2 * n  # exact: every partial sum is a small integer
    a = RNG.random(n, dtype=np.float32)
    t = Tensor(a)
    np.testing.assert_allclose(t.sum().item(), a.astype(np.float64).sum(), rtol=1e-6)
    assert (t * 3).max().item() == (a * 3).max()
    tail = (t[-1000:] + 1).numpy()  # a view at the far end, by address too
    np.testing.assert_array_equal(tail, a[-1000:] + 1)
    spread = (Tensor([1.5]).expand(n) * 2).contiguous()  # a big output (by address) before a bound input
    assert spread.sum().item() == 3 * n and spread[-1].item() == 3


def test_each_vk_device_opens_its_gpu_alone(vk_device, tmp_path):
    """On a machine with two Vulkan devices (lavapipe's manifest and a copy of it), VK:0 opens the first alone (a
    process on one GPU of several holds nothing on the others), VK:1 the second, and VK:2 is another tinygrad device
    on the first; with VKBACKEND_DEVICE_IDS=1 VK:0 runs on the second and the first is never opened."""
    from _reliability import run_isolated

    lavapipe = "/usr/share/vulkan/icd.d/lvp_icd.x86_64.json"
    if "llvmpipe" not in vk_device.vk.info.name or not os.path.exists(lavapipe):
        pytest.skip("needs lavapipe's driver manifest, listed twice for two devices")
    copy = tmp_path / "lvp_copy.json"  # the loader loads a manifest named twice once
    shutil.copy(lavapipe, copy)
    env = {"VK_DRIVER_FILES": f"{lavapipe}:{copy}", "VK_ICD_FILENAMES": f"{lavapipe}:{copy}"}
    r = run_isolated("tinygrad_devices_opened", env=env, timeout=120)
    assert r["devices"] == 2, r
    assert (r["VK"], r["VK:1"], r["VK:2"]) == (0, 1, 0) and r["opened"] == [[0], [0, 1], [0, 1]], r
    assert r["copy"] and r["validation"] == "", r
    r = run_isolated("tinygrad_devices_opened", env={**env, "VKBACKEND_DEVICE_IDS": "1"}, timeout=120)
    assert (r["VK"], r["VK:1"], r["VK:2"]) == (1, 1, 1) and r["opened"] == [[1], [1], [1]], r
