"""The GLSL renderer on representative kernels, without a GPU.

A render-only tinygrad device (``VKRENDER``: vkbackend's renderer and compiler, tinygrad's NULL allocator and
program) runs real tinygrad pipelines; every kernel is compiled by glslang and checked by ``spirv-val`` where present,
and the GLSL is checked for the spellings the known traps need."""

from __future__ import annotations

import pickle
import re
import shutil
import subprocess
import tempfile

import numpy as np
import pytest
from _render_only import kernels as device_kernels
from _render_only import render_device
from tinygrad import Tensor, Variable, dtypes
from tinygrad.helpers import Context, Target

from vkbackend.tinygrad.compiler.kernel_format import read_meta
from vkbackend.tinygrad.renderer.caps import DeviceCaps, make_arch, parse_arch
from vkbackend.tinygrad.renderer.renderer import VKRenderer

FULL = DeviceCaps(
    f16=True,
    f64=True,
    i8=True,
    i16=True,
    i64=True,
    global_max=(65535, 65535, 65535),
    local_max=(1024, 1024, 64),
    local_threads=1024,
    shared_max=32768,
)
DEV = render_device("VKRENDER", FULL)


def kernels(fn) -> list:
    """Run ``fn`` (which realizes tensors on VKRENDER, or on a device it names) and return the kernels it compiled
    (GLSL source + SPIR-V)."""
    return device_kernels(None, lambda _: fn())


def spirv_val(spirv: bytes):
    if shutil.which("spirv-val") is None:
        return
    with tempfile.NamedTemporaryFile(suffix=".spv") as f:
        f.write(spirv)
        f.flush()
        r = subprocess.run(
            ["spirv-val", "--target-env", "vulkan1.2", f.name], capture_output=True, text=True, check=False
        )
    assert r.returncode == 0, r.stdout + r.stderr


def body(lib) -> str:
    return lib.source.split("void main() {", 1)[1]


@pytest.fixture(autouse=True)
def _on_vkrender(glslang):
    with Context(DEV=DEV):
        yield


def test_arch_roundtrip():
    assert parse_arch(make_arch(FULL)) == FULL
    assert parse_arch("") == DeviceCaps()
    assert ":" not in make_arch(FULL) and "+" not in make_arch(FULL)
    r = VKRenderer(Target("VK", arch=make_arch(FULL)))
    r2 = pickle.loads(pickle.dumps(r))  # tinygrad's compile workers get the renderer pickled
    assert r2.caps == FULL and r2.supported_dtypes() == r.supported_dtypes()
    assert dtypes.bool not in VKRenderer(Target("VK", arch="")).supported_dtypes()
    assert dtypes.float64 not in VKRenderer(Target("VK", arch="f64")).supported_dtypes()  # double needs int64 too


def test_elementwise_layout():
    libs = kernels(
        lambda: (Tensor.ones(64, device=DEV).contiguous() + Tensor.ones(64, device=DEV).contiguous()).realize()
    )
    add = libs[-1]
    meta = read_meta(add.source)
    assert add.meta == meta and meta["nvars"] == 0 and not meta["gid"]
    assert f"local_size_x={meta['local'][0]}" in add.source
    # one declaration per binding and variant (a vec4 array in the usual one, scalar in the VK_VIEWS one)
    assert sorted(set(re.findall(r"layout\(set=0, binding=(\d), std430\)", add.source))) == ["0", "1", "2"]
    assert len(re.findall(r"readonly buffer VKB1 ", add.source)) >= 1 and "readonly buffer VKB0 " not in add.source
    assert "gl_WorkGroupID" in add.source or "gl_LocalInvocationID" in add.source
    for lib in libs:
        spirv_val(lib.spirv)


def test_signed_mod_avoids_smod():
    libs = kernels(
        lambda: (
            Tensor([-7, 7, -8, 9], dtype=dtypes.int32, device=DEV)
            % Tensor([3, -3, 5, -4], dtype=dtypes.int32, device=DEV)
        ).realize()
    )
    src = body(libs[-1])
    assert "%" not in src, src  # glslang turns signed % into OpSMod (sign of the divisor); C needs a-b*(a/b)
    spirv_val(libs[-1].spirv)


def test_bool_ops_are_logical():
    a = Tensor([True, False, True, False], device=DEV)
    b = Tensor([True, True, False, False], device=DEV)
    libs = kernels(lambda: ((a & b) | (a ^ b)).realize())
    src = body(libs[-1])
    assert "&&" in src or "||" in src or "^^" in src, src
    assert re.search(r"[^&]&[^&]", src.replace("&&", "")) is None, src
    assert "uint8_t data" in libs[-1].source  # tinygrad's bool is one byte in memory
    spirv_val(libs[-1].spirv)


def test_double_constants_and_software_transcendentals():
    x = Tensor([0.1, 0.5, 2.0], dtype=dtypes.float64, device=DEV)
    libs = kernels(lambda: ((x * 0.3).exp2() + x.log2() + x.sin()).realize())
    src = body(libs[-1])
    assert re.search(r"\d(\.\d*)?(e[-+]?\d+)?lf", src), src  # double literals carry the lf suffix
    assert not re.search(r"\b(exp2|log2|sin)\(", src), src  # no double exp2/log2/sin in GLSL: tinygrad's software ones
    spirv_val(libs[-1].spirv)


def test_float_to_small_int_goes_through_int32():
    x = Tensor([1.5, -2.5, 100.0], device=DEV)
    for dt, name in (
        (dtypes.int8, "int8_t"),
        (dtypes.uint8, "uint8_t"),
        (dtypes.int16, "int16_t"),
        (dtypes.uint16, "uint16_t"),
    ):
        libs = kernels(lambda: x.cast(dt).realize())
        assert f"{name}(int(" in body(libs[-1]), body(libs[-1])
        spirv_val(libs[-1].spirv)


def test_a_widening_of_int32_to_64_bits_is_arithmetic_where_the_arch_says_so():
    """``sext64`` (Mesa's drivers: device_caps.is_mesa) widens by arithmetic on the zero extension; elsewhere, and for
    other sources, the conversion stays GLSL's."""
    import dataclasses
    import types

    from vkbackend.tinygrad.runtime.device_caps import is_mesa

    caps = dataclasses.replace(FULL, sext64=True)
    assert "sext64" in make_arch(caps).split(",") and parse_arch(make_arch(caps)) == caps
    assert "sext64" not in make_arch(FULL)
    assert is_mesa(types.SimpleNamespace(driver_info="Mesa 22.3.6 (LLVM 15.0.6)"))
    assert not is_mesa(types.SimpleNamespace(driver_info="580.159.04"))
    for dev, arithmetic in ((DEV, False), (render_device("VKRSEXT", caps), True)):
        for wide in (dtypes.int64, dtypes.uint64):
            libs = device_kernels(dev, lambda d: Tensor.empty(2, dtype=dtypes.int32, device=d).cast(wide).realize())
            assert ("^0x80000000l)-0x80000000l)" in body(libs[-1])) == arithmetic, body(libs[-1])
            spirv_val(libs[-1].spirv)
        libs = device_kernels(dev, lambda d: Tensor.empty(2, dtype=dtypes.int16, device=d).cast(dtypes.int64).realize())
        assert "0x80000000l" not in body(libs[-1])


@pytest.mark.parametrize(
    "src,dst,lanes,sext64,expected",
    [
        (dtypes.int32, dtypes.uint32, 4, False, "uvec4(v)"),  # GLSL's constructor converts each lane as C does
        (dtypes.int32, dtypes.int64, 4, False, "i64vec4(v)"),
        (dtypes.int32, dtypes.uint32, 8, False, "uint[8](uint((v)[0]),"),  # an array: no converting constructor
        (dtypes.float32, dtypes.uint32, 4, False, "uvec4(((v)[0]<0.0f?uint(int((v)[0])):uint((v)[0])),"),
        (dtypes.int32, dtypes.bool, 4, False, "bvec4(((v)[0]!=int(0)),"),
        (dtypes.bool, dtypes.int8, 2, False, "i8vec2(int8_t((v)[0]?1:0),"),
        (dtypes.int32, dtypes.int64, 4, True, "i64vec4(((int64_t(uint((v)[0]))^0x80000000l)-0x80000000l),"),
    ],
)
def test_a_vector_conversion_converts_every_lane_as_a_scalar_one(src, dst, lanes, sext64, expected):
    """A CAST of a vector: the vector type's constructor where it converts as ``glsl_types.cast`` does, else lane by
    lane; each result compiles as the type the renderer declares for it."""
    import dataclasses

    from tinygrad.uop.ops import Ops, UOp

    from vkbackend.glsl import compile_glsl
    from vkbackend.tinygrad.renderer.renderer import _render_cast

    ren = VKRenderer(Target("VK", arch=make_arch(dataclasses.replace(FULL, sext64=sext64))))
    value = UOp(Ops.STACK, src, src=tuple(UOp.const(j % 2, src) for j in range(lanes)))
    cast = UOp(Ops.CAST, dst, src=(value,))
    ren.r = {value: "v"}
    expr = _render_cast(ren, cast)
    assert expr is not None and expr.startswith(expected), expr
    lane = "o[0] != 0u" if src == dtypes.bool else f"{ren.render_type(value.src[0])}(o[0])"
    src_type, dst_type = ren.render_type(value), ren.render_type(cast)
    compile_glsl(
        "#version 450\n#extension GL_EXT_shader_explicit_arithmetic_types : require\n"
        "layout(local_size_x = 1) in;\nlayout(std430, binding = 0) buffer B { uint o[]; };\n"
        f"void main() {{ {src_type} v = {src_type}({', '.join([lane] * lanes)});\n"
        f"  {dst_type} r = {expr};\n  o[1] = uint(r[{lanes - 1}]); }}\n"
    )


@pytest.mark.parametrize(
    "dt",
    [
        dtypes.int8,
        dtypes.uint8,
        dtypes.int16,
        dtypes.uint16,
        dtypes.int64,
        dtypes.uint64,
        dtypes.float16,
        dtypes.float64,
        dtypes.uint32,
        dtypes.bool,
    ],
)
def test_dtypes_compile(dt):
    base = Tensor(np.arange(16, dtype=np.float32) - 5, device=DEV)

    def run():
        t = base.cast(dt)
        (t + t).realize()
        (t.cast(dtypes.float32) * 2).realize()
        if dt != dtypes.bool:
            (t.max() - t.min()).realize()
        if dtypes.is_int(dt):
            ((t // 3) * (t % 5)).realize()
        if dtypes.is_float(dt):
            (t.exp() + t.sqrt() + t.sin()).realize()

    libs = kernels(run)
    assert libs
    for lib in libs:
        spirv_val(lib.spirv)


def test_bitcasts_compile():
    x = Tensor(np.linspace(-3, 3, 16, dtype=np.float32), device=DEV)
    libs = kernels(lambda: (x.bitcast(dtypes.uint32) >> 3).bitcast(dtypes.float32).realize())
    src = body(libs[-1])
    assert "floatBitsToUint" in src and "uintBitsToFloat" in src, src
    libs += kernels(lambda: x.cast(dtypes.float16).bitcast(dtypes.int16).realize())
    libs += kernels(lambda: x.cast(dtypes.float64).bitcast(dtypes.int64).realize())
    for lib in libs:
        spirv_val(lib.spirv)


def test_shared_memory_at_file_scope():
    # a full reduction of 4096 elements gets GROUPTOP: partial sums in shared memory, then a barrier
    libs = kernels(lambda: Tensor.ones(4096, device=DEV).contiguous().sum().realize())
    shared = [lib for lib in libs if "shared " in lib.source]
    assert shared, [lib.source for lib in libs]
    for lib in shared:
        head, main = lib.source.split("void main() {", 1)
        assert re.search(r"^shared \w+ \w+\[\d+\];$", head, re.M), head
        assert "shared " not in main and "barrier();" in main
        spirv_val(lib.spirv)


def test_variables_are_push_constants():
    i = Variable("i", 1, 10)
    ones = Tensor.ones(10, device=DEV).contiguous()
    libs = kernels(lambda: (ones[: i.bind(5)] + 1).realize())
    lib = [lib for lib in libs if lib.meta["nvars"]][-1]
    assert re.search(r"layout\(push_constant\) uniform VKPC \{ int data\d+_;", lib.source), lib.source
    spirv_val(lib.spirv)


def test_views_variant_compiles():
    from vkbackend.tinygrad.compiler.compiler import compile_variant

    libs = kernels(lambda: (Tensor.ones(64, device=DEV).contiguous() * 3).realize())
    lib = libs[-1]
    spv = compile_variant(lib.source, views=True)
    assert spv != lib.spirv
    spirv_val(spv)
    assert "vk_off0" in lib.source and "#if VK_VIEWS" in lib.source


# ----- vector loads and stores (supports_float4) ---------------------------------------------------------------------


def _both_variants(lib):
    """spirv-val the kernel as tinygrad compiled it and its VK_VIEWS=1 variant."""
    from vkbackend.tinygrad.compiler.compiler import compile_variant

    spirv_val(lib.spirv)
    spirv_val(compile_variant(lib.source, views=True))


def _variant(src: str, views: bool) -> str:
    """The declarations and macros of one variant (``#if VK_VIEWS`` ... ``#else`` ... ``#endif`` resolved by hand)."""
    out, stack = [], []
    for ln in src.split("\n"):
        if ln == "#if VK_VIEWS":
            stack.append(views)
        elif ln == "#else" and stack:
            stack[-1] = not stack[-1]
        elif ln == "#endif" and stack:
            stack.pop()
        elif all(stack):
            out.append(ln)
    return "\n".join(out)


@pytest.mark.parametrize("dt,vec", [(dtypes.float32, "vec4"), (dtypes.float16, "f16vec4"), (dtypes.int32, "ivec4")])
def test_vector_loads_and_stores(dt, vec):
    a = Tensor.ones(1024, dtype=dt, device=DEV).contiguous()
    libs = kernels(lambda: (a * 3 + a).realize())
    lib = libs[-1]
    usual, views = _variant(lib.source, False), _variant(lib.source, True)
    # the usual variant declares every buffer as an array of vectors and reads/writes whole vectors
    assert re.search(rf"buffer VKB1 {{ {vec} data1_1024\[\]; }}", usual), usual
    assert re.search(r"#define VK_V1_4\(i\) \(data1_1024\[\(i\)>>2\]\)", usual), usual
    assert re.search(r"#define VK_S0_4\(i, v\) data0_1024\[\(i\)>>2\] = \(v\);", usual), usual
    # the views variant (per-binding offsets that need not be multiples of 4 elements) composes them from scalars
    assert re.search(rf"buffer VKB1 {{ {TYPE[dt]} data1_1024\[\]; }}", views), views
    assert re.search(rf"#define VK_V1_4\(i\) \({vec}\(data1_1024\[VK_I1_\d\(i\)\], ", views), views
    assert f"{vec} val" in body(lib) and "VK_S0_4(" in body(lib)
    _both_variants(lib)


TYPE = {dtypes.float32: "float", dtypes.float16: "float16_t", dtypes.int32: "int"}


def test_mixed_widths_compose_vectors():
    # a padded 3x3 convolution reads its input both 4 and 1 element at a time: declared scalar, vectors composed
    x, w = Tensor.ones(1, 8, 32, 32, device=DEV).contiguous(), Tensor.ones(16, 8, 3, 3, device=DEV).contiguous()
    libs = kernels(lambda: x.conv2d(w, padding=1).realize())
    conv = [lib for lib in libs if "VK_V" in body(lib)]
    assert conv, [lib.source for lib in libs]
    for lib in conv:
        usual = _variant(lib.source, False)
        for m in re.finditer(r"#define VK_V(\d+)_(\d)\(i\) \((.*)\)$", usual, re.M):
            decl = re.search(rf"binding=\d+, std430\) readonly buffer VKB\d+ {{ (\w+) data{m[1]}_", usual)
            if decl and decl[1] == "float":  # scalar declaration: the vector is composed of scalar reads
                assert m[3].startswith("vec4(") and m[3].count("VK_I") == 4, m[0]
        _both_variants(lib)


def _with_opts(out: Tensor, opts: tuple) -> str:
    """The GLSL of the last kernel of ``out`` with tinygrad's optimizations replaced by ``opts``."""
    from dataclasses import replace

    from tinygrad import Device
    from tinygrad.codegen import to_program

    from vkbackend.tinygrad.kernel_opts import last_kernel

    ast = last_kernel(out)
    return to_program(ast.replace(arg=replace(ast.arg, opts_to_apply=opts)), renderer=Device[DEV].renderer).src[2].arg


def _val_both(src: str):
    from vkbackend.tinygrad.compiler.compiler import compile_variant

    spirv_val(compile_variant(src, views=False))
    spirv_val(compile_variant(src, views=True))


def test_shared_memory_vectors():
    from tinygrad.codegen.opt import Opt, OptOps

    x, y = Tensor.ones(1, 128, device=DEV).contiguous(), Tensor.ones(128, 128, device=DEV).contiguous()
    src = _with_opts((x @ y).relu(), (Opt(OptOps.GROUP, 0, 8), Opt(OptOps.LOCAL, 0, 4), Opt(OptOps.UPCAST, 0, 4)))
    assert re.search(r"^shared vec4 buf\d+\[\d+\];$", src, re.M), src  # partial sums go through shared memory as vec4
    assert re.search(r"buf\d+\[.*>>2\] = vec4\(", src), src
    _val_both(src)


def test_half8_is_two_f16vec4(monkeypatch):
    # ALLOW_HALF8=1 makes tinygrad group 8 halves; GLSL has no 8-lane vector: an array value, two f16vec4 accesses
    from tinygrad.codegen.late import coalesce
    from tinygrad.codegen.opt import Opt, OptOps

    monkeypatch.setattr(coalesce, "getenv", lambda k, d=0: 1 if k == "ALLOW_HALF8" else d)
    a = Tensor.ones(1024, dtype=dtypes.float16, device=DEV).contiguous()
    src = _with_opts(a + 1, (Opt(OptOps.UPCAST, 0, 8),))
    usual = _variant(src, False)
    assert "float16_t[8] val0 = VK_V1_8(" in src and "f16vec4 data1_1024[]" in usual, src
    assert "#define VK_S0_8(i, v) { float16_t[8] vk_t = (v); data0_1024[(i)>>2] = f16vec4(" in usual, usual
    _val_both(src)


# ----- kernels on global ids (NOLOCALS) ------------------------------------------------------------------------------


def test_global_id_kernels_take_their_local_size_from_spec_constants():
    from vkbackend.spirv import reflect
    from vkbackend.tinygrad.compiler.compiler import with_local_size

    a = Tensor.ones(37, 91, device=DEV).contiguous()
    with Context(NOLOCALS=1):
        libs = kernels(lambda: (a * 2 + 1).sum(1).realize())
    gid = [lib for lib in libs if lib.meta["gid"]]
    assert gid, [lib.source for lib in libs]
    for lib in gid:
        assert "layout(local_size_x_id=0, local_size_y_id=1, local_size_z_id=2) in;" in lib.source
        assert "gl_GlobalInvocationID" in body(lib)
        assert reflect(lib.spirv).local_size == (1, 1, 1)
        for local in ((37, 1, 1), (8, 4, 2)):
            spv = with_local_size(lib.spirv, local)
            assert reflect(spv).local_size == local
            spirv_val(spv)
    usual = kernels(lambda: (Tensor.ones(64, device=DEV).contiguous() * 5).realize())[-1]
    with pytest.raises(ValueError):  # a literal local size is not rewritten
        with_local_size(usual.spirv, (2, 1, 1))


def test_where_is_a_select():
    # glslang makes ``c ? a : b`` a branch unless both sides are plain variables; tinygrad's WHERE on computed values
    # (relu, masks, max) is rendered mix(b, a, c), an OpSelect
    x = Tensor.ones(256, device=DEV).contiguous()
    libs = kernels(lambda: ((x * 3 - 1).relu() + (x < 2).where(x * 5, x - 7)).realize())
    src = body(libs[-1])
    assert "mix(" in src and "?" not in src, src
    spirv_val(libs[-1].spirv)
    dis = _disassemble(libs[-1].spirv)
    if dis is not None:
        assert "OpSelect" in dis and "OpBranchConditional" not in dis, dis


def test_gated_loads_stay_branches():
    # a padded convolution's out-of-range reads must not happen: ``gate ? load : 0`` stays a conditional
    x, w = Tensor.ones(1, 4, 8, 8, device=DEV).contiguous(), Tensor.ones(4, 4, 3, 3, device=DEV).contiguous()
    libs = kernels(lambda: x.conv2d(w, padding=1).realize())
    gated = r"\(\(?\w+(&&\w+)*\)?\?(data\d+_\d+\[|VK_V)"
    assert any(re.search(gated, body(lib)) for lib in libs), [body(lib) for lib in libs]


def _disassemble(spirv: bytes) -> str | None:
    if shutil.which("spirv-dis") is None:
        return None
    with tempfile.NamedTemporaryFile(suffix=".spv") as f:
        f.write(spirv)
        f.flush()
        return subprocess.run(["spirv-dis", f.name], capture_output=True, text=True, check=True).stdout


# ----- arguments past the storage range: reached by device address ---------------------------------------------------

BY_ADDRESS = FULL.__class__(**{**FULL.__dict__, "addresses": True, "storage_range": 1 << 20})

render_device("VKADDRESS", BY_ADDRESS)


def test_arch_carries_addresses_and_the_storage_range():
    assert parse_arch(make_arch(BY_ADDRESS)) == BY_ADDRESS
    assert parse_arch(make_arch(FULL)) == FULL and not FULL.addresses


def test_arguments_past_the_storage_range_are_reached_by_address():
    """A 4 MiB argument on a device with a 1 MiB storage range: a buffer_reference in the push constants, passed after
    the bound arguments (meta "address"); the small output stays bound."""
    libs = kernels(lambda: Tensor.empty(1 << 20, device="VKADDRESS").sum().realize())
    big = [lib for lib in libs if any(b["address"] for b in lib.meta["bindings"])]
    assert big, [lib.source for lib in libs]
    lib = big[0]
    assert "#extension GL_EXT_buffer_reference : require" in lib.source
    assert re.search(r"layout\(buffer_reference, std430, buffer_reference_align=\d+\) readonly buffer VKR1", lib.source)
    assert re.search(r"layout\(push_constant\) uniform VKPC \{ VKR1 vk_ref1;", lib.source), lib.source
    assert "layout(set=0, binding=0, std430) buffer VKB0" in lib.source  # the bound output keeps binding 0
    assert "VK_E1" not in lib.source  # 32-bit indices suffice
    _both_variants(lib)


def test_arguments_of_2_31_elements_or_more_use_64_bit_addresses():
    libs = kernels(lambda: (Tensor.empty(3 * 2**30, device="VKADDRESS") * 2).sum().realize())
    lib = libs[0]
    assert "#extension GL_EXT_buffer_reference2 : require" in lib.source
    assert "#define VK_E1(i) (VKE1(uint64_t(vk_ref1) + uint64_t(i) *" in lib.source
    assert "int(alu" not in lib.source  # no 64-bit index is cut to 32 bits
    _both_variants(lib)


def test_arguments_of_2_gib_or_more_use_64_bit_addresses():
    """An array index into a buffer reference is 32-bit, and so is the byte offset NVIDIA computes from it (the H200
    read and wrote the wrong words past 4 GiB): 2 GiB and more of float32 (fewer than 2**31 elements) is reached by
    64-bit address arithmetic; just under 2 GiB by the array."""

    def source(numel):
        libs = kernels(lambda: (Tensor.empty(numel, device="VKADDRESS") * 2).sum().realize())
        return next(lib.source for lib in libs if any(b["address"] for b in lib.meta["bindings"]))

    assert "#define VK_E1(i) (VKE1(uint64_t(vk_ref1) + uint64_t(i) *" in source(2**29)
    assert "VK_E1" not in source(2**29 - 1024)


# ----- IEEE special values: SignedZeroInfNanPreserve where the kernel relies on them -------------------------------

PRESERVE = FULL.__class__(**{**FULL.__dict__, "preserve_widths": (16, 32, 64)})

render_device("VKPRESERVE", PRESERVE)
MODE = 'spirv_execution_mode(extensions = ["SPV_KHR_float_controls"], capabilities = [4466], 4461, 32);'


def test_kernels_that_rely_on_special_values_ask_to_keep_them():
    """sin(+-inf) and sin(NaN) came out finite on NVIDIA, whose compiler may assume no value is infinite or NaN unless
    the kernel asks otherwise: kernels with an infinity or NaN constant, or an x != x test, ask; others do not."""
    assert parse_arch(make_arch(PRESERVE)) == PRESERVE
    a = Tensor([0.5, 2.0], device="VKPRESERVE").realize()
    big = Tensor.empty(4096, device="VKPRESERVE")
    for make in (lambda: a.sin(), lambda: a != a, lambda: big.max()):  # a NaN constant, a NaN test, -inf
        lib = kernels(lambda: make().realize())[-1]
        assert MODE in lib.source, lib.source
        _both_variants(lib)
    plain = kernels(lambda: (a * 2 + 1).realize())[-1]
    assert "spirv_execution_mode" not in plain.source
    on_full = kernels(lambda: Tensor([0.5], device=DEV).sin().realize())[-1]  # a device that cannot keep them
    assert "spirv_execution_mode" not in on_full.source
