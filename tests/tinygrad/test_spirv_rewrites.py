"""The plugin's two SPIR-V rewrites, compiler.with_local_size and bf16_spirv.retype_cooperative_matrices, on the
modules tinygrad's renderer and glslang produce: their outputs equal, byte for byte, those of the straightforward
implementations kept below (each a loop of its own over the words), and malformed modules raise the package's
KernelCompilation error instead of looping or slicing past the end."""

from __future__ import annotations

import struct

import pytest
from test_renderer import DEV, kernels
from test_tensor_cores import F16_F32, _render_matmul, _tc_arch
from tinygrad import Tensor, dtypes
from tinygrad.helpers import Context

from vkbackend.errors import BackendError, ErrorStatus
from vkbackend.tinygrad.compiler.bf16_spirv import retype_cooperative_matrices
from vkbackend.tinygrad.compiler.compiler import compile_variant, with_local_size
from vkbackend.tinygrad.compiler.kernel_format import read_meta
from vkbackend.tinygrad.renderer.caps import TCShape

# ----- the reference implementations ---------------------------------------------------------------------------------


def reference_with_local_size(spirv: bytes, local: tuple[int, int, int]) -> bytes:
    """Defaults of spec constants 0-2 (SpecId decorations) and the literal LocalSize mode set to ``local``."""
    words = list(struct.unpack(f"<{len(spirv) // 4}I", spirv))
    spec_ids: dict[int, int] = {}
    pos = 5
    while pos < len(words):
        opcode, count = words[pos] & 0xFFFF, words[pos] >> 16
        if opcode == 71 and count == 4 and words[pos + 2] == 1 and words[pos + 3] < 3:  # OpDecorate SpecId
            spec_ids[words[pos + 1]] = words[pos + 3]
        elif opcode == 16 and count == 6 and words[pos + 2] == 17:  # OpExecutionMode LocalSize
            words[pos + 3 : pos + 6] = local
        elif opcode == 50 and count == 4 and words[pos + 2] in spec_ids:  # OpSpecConstant
            words[pos + 3] = local[spec_ids[words[pos + 2]]]
        pos += max(count, 1)
    if len(spec_ids) != 3:
        raise ValueError("not a kernel whose work-group size is set by specialization constants 0-2")
    return struct.pack(f"<{len(words)}I", *words)


def _instruction(opcode: int, operands: list[int]) -> list[int]:
    return [(len(operands) + 1) << 16 | opcode, *operands]


def reference_retype(spirv: bytes) -> bytes:
    """float16 A/B cooperative-matrix types given a new bfloat16 OpTypeFloat, and a pointer type to it per storage
    class their components are reached through, which those access chains take; a value stored to a component is
    bitcast to bfloat16 just before, and a component loaded as bfloat16 is bitcast back to float16 under the load's
    old id; capabilities and extension added."""
    words = list(struct.unpack(f"<{len(spirv) // 4}I", spirv))
    instructions: list[list[int]] = []
    pos = 5
    while pos < len(words):
        count = words[pos] >> 16
        if count == 0:
            raise ValueError("an instruction of zero words")
        instructions.append(words[pos : pos + count])
        pos += count
    half = {ins[1] for ins in instructions if ins[0] & 0xFFFF == 22 and ins[2:] == [16]}  # OpTypeFloat 16
    constants = {ins[2]: ins[3] for ins in instructions if ins[0] & 0xFFFF == 43 and len(ins) == 4}  # OpConstant
    # OpTypeCooperativeMatrixKHR of float16, MatrixAKHR (0) or MatrixBKHR (1)
    matrices = {
        ins[1] for ins in instructions if ins[0] & 0xFFFF == 4456 and ins[2] in half and constants.get(ins[6]) in (0, 1)
    }
    pointer_class = {ins[1]: ins[2] for ins in instructions if ins[0] & 0xFFFF == 32}  # OpTypePointer
    to_matrix = {ins[1] for ins in instructions if ins[0] & 0xFFFF == 32 and ins[3] in matrices}
    variables = {ins[2] for ins in instructions if ins[0] & 0xFFFF == 59 and ins[1] in to_matrix}  # OpVariable
    chains = {ins[2]: ins[1] for ins in instructions if ins[0] & 0xFFFF in (65, 66) and ins[3] in variables}
    bf16 = words[3]
    classes = sorted({pointer_class[t] for t in chains.values()})
    new_pointer = {c: bf16 + 1 + i for i, c in enumerate(classes)}
    fresh = bf16 + 1 + len(classes)
    out: list[list[int]] = []
    retyped = 0
    for ins in instructions:
        op = ins[0] & 0xFFFF
        if op == 4456 and ins[1] in matrices:
            if not retyped:
                out.append(_instruction(22, [bf16, 16, 0]))  # OpTypeFloat 16 BFloat16KHR
                out += [_instruction(32, [new_pointer[c], c, bf16]) for c in classes]
            ins = [ins[0], ins[1], bf16, *ins[3:]]
            retyped += 1
        elif op in (65, 66) and ins[2] in chains:
            ins = [ins[0], new_pointer[pointer_class[ins[1]]], *ins[2:]]
        elif op == 62 and ins[1] in chains:  # OpStore pointer, object
            out.append(_instruction(124, [bf16, fresh, ins[2]]))  # OpBitcast
            ins = [ins[0], ins[1], fresh, *ins[3:]]
            fresh += 1
        elif op == 61 and ins[3] in chains:  # OpLoad type, result, pointer
            out.append([ins[0], bf16, fresh, *ins[3:]])
            ins = _instruction(124, [ins[1], ins[2], fresh])
            fresh += 1
        out.append(ins)
    if not retyped:
        raise ValueError("the module has no float16 A or B cooperative-matrix type to make bfloat16")
    last_capability = max(i for i, ins in enumerate(out) if ins[0] & 0xFFFF == 17)
    extension = list(struct.unpack("<5I", b"SPV_KHR_bfloat16\0\0\0\0"))
    out[last_capability + 1 : last_capability + 1] = [
        _instruction(17, [5116]),
        _instruction(17, [5118]),
        _instruction(10, extension),
    ]
    header = [*words[:3], fresh, words[4]]
    body = [w for ins in out for w in ins]
    return struct.pack(f"<{len(header) + len(body)}I", *header, *body)


# ----- representative modules ----------------------------------------------------------------------------------------


def _variants(lib) -> list[bytes]:
    """Both variants of a rendered kernel, as VKProgram compiles them."""
    return [lib.spirv, compile_variant(lib.source, views=True)]


# The shapes below are this file's own: tinygrad keeps the programs it compiled for the process, and a kernel another
# test compiled first would not be compiled (and seen) again, here or there.


def _global_id_modules() -> list[bytes]:
    a = Tensor.ones(41, 83, device=DEV).contiguous()
    b = Tensor.ones(24, 8, 5, dtype=dtypes.half, device=DEV).contiguous()
    with Context(DEV=DEV, NOLOCALS=1):
        libs = kernels(lambda: (a * 2 + 1).sum(1).realize())
        libs += kernels(lambda: (b.float().exp2() * 3).permute(2, 0, 1).contiguous().realize())
    gid = [lib for lib in libs if lib.meta["gid"]]
    assert len(gid) >= 2, [lib.source for lib in libs]
    return [spirv for lib in gid for spirv in _variants(lib)]


def _glsl(source: str) -> bytes:
    import vkbackend

    return vkbackend.compile_glsl(source)


SPEC_AND_MORE = """#version 450
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(constant_id = 3) const uint K = 7;
layout(constant_id = 4) const int J = -2;
layout(set = 0, binding = 0) buffer B { uint b[]; };
void main() { b[gl_GlobalInvocationID.x] = K * gl_WorkGroupSize.x + uint(J); }
"""
LITERAL = """#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) buffer B { uint b[]; };
void main() { b[gl_GlobalInvocationID.x] = 1u; }
"""
ONE_SPEC = """#version 450
layout(local_size_x_id = 0, local_size_y = 2) in;
layout(set = 0, binding = 0) buffer B { uint b[]; };
void main() { b[gl_GlobalInvocationID.x] = 1u; }
"""
SIZES = ((1, 1, 1), (37, 1, 1), (8, 4, 2), (1024, 1, 1), (3, 5, 7))


def _same(new, reference, *args) -> None:
    """``new(*args)`` returns what ``reference(*args)`` returns, or raises the same exception type and message."""
    try:
        expected = reference(*args)
    except ValueError as error:
        with pytest.raises(ValueError) as caught:
            new(*args)
        assert str(caught.value) == str(error)
        return
    assert new(*args) == expected


def test_with_local_size_matches_the_reference_on_rendered_kernels():
    modules = _global_id_modules()
    for spirv in modules:
        for local in SIZES:
            _same(with_local_size, reference_with_local_size, spirv, local)
    assert with_local_size(modules[0], (8, 4, 2)) != modules[0]


def test_with_local_size_matches_the_reference_on_glslang_modules(glslang):
    for source in (SPEC_AND_MORE, LITERAL, ONE_SPEC):
        for local in SIZES:
            _same(with_local_size, reference_with_local_size, _glsl(source), local)
    with pytest.raises(ValueError):
        with_local_size(_glsl(LITERAL), (2, 1, 1))


def _before_retyping(lib) -> list[bytes]:
    """Both variants of a tensor-core kernel as glslang writes them, before any retyping."""
    import vkbackend

    meta = read_meta(lib.source)
    return [
        vkbackend.compile_glsl(lib.source, {"VK_VIEWS": views}, target_env=meta["target_env"]) for views in ("0", "1")
    ]


@pytest.mark.parametrize("layout", ["chunk", "nv"])  # staged; straight from registers (bfloat16 components written)
@pytest.mark.parametrize(
    "shape",
    [TCShape(16, 16, 16, "bf16", "f32"), TCShape(16, 8, 16, "bf16", "f32"), TCShape(16, 8, 8, "f16", "f16"), F16_F32],
    ids=TCShape.token,
)
def test_retyping_matches_the_reference_on_tensor_core_kernels(glslang, shape, layout):
    from vkbackend import glsl

    if glsl._find_compiler((13, 0)) is None:
        pytest.skip("no glslangValidator 13 or newer (pip install 'vkbackend[glsl]')")
    lib = _render_matmul(_tc_arch(shape, layout=layout), 32, 48, 32, shape.dtype_in, shape.dtype_out)
    for spirv in _before_retyping(lib):
        _same(retype_cooperative_matrices, reference_retype, spirv)
    if shape.dtype_in == "bf16":
        assert lib.spirv == reference_retype(_before_retyping(lib)[0])


@pytest.mark.parametrize(
    "shapes",
    [
        [TCShape(16, 16, 16, "bf16", "f32")],
        [TCShape(16, 8, 16, "bf16", "f32")],
        [TCShape(16, 16, 16, "bf16", "f32"), TCShape(16, 8, 16, "bf16", "f32")],
    ],
    ids=lambda shapes: "+".join(map(TCShape.token, shapes)),
)
def test_retyping_matches_the_reference_on_the_layout_probe(glslang, shapes):
    """The layout probe reads its bfloat16 matrices' components back (runtime/coopmat_layout.py), one shape or several
    in one module: the loads' bitcasts too are as the reference makes them."""
    import vkbackend
    from vkbackend import glsl
    from vkbackend.tinygrad.runtime import coopmat_layout

    if glsl._find_compiler((13, 0)) is None:
        pytest.skip("no glslangValidator 13 or newer (pip install 'vkbackend[glsl]')")
    spirv = vkbackend.compile_glsl(coopmat_layout._source(shapes), target_env="vulkan1.3")
    _same(retype_cooperative_matrices, reference_retype, spirv)
    assert coopmat_layout._probe_spirv(shapes) == reference_retype(spirv)


def test_retyping_a_module_without_float16_matrices_fails_as_the_reference_does(glslang):
    for source in (LITERAL, SPEC_AND_MORE):
        _same(retype_cooperative_matrices, reference_retype, _glsl(source))


# ----- malformed modules ---------------------------------------------------------------------------------------------


def _malformed(spirv: bytes) -> list[bytes]:
    """The module cut inside its last instruction of three words or more, and with a zero word count in the middle of
    its stream."""
    words = list(struct.unpack(f"<{len(spirv) // 4}I", spirv))
    starts, pos = [], 5
    while pos < len(words):
        starts.append(pos)
        pos += words[pos] >> 16
    cut = [start for start in starts if words[start] >> 16 >= 3][-1] + 2
    middle = starts[len(starts) // 2]
    zero = [*words[:middle], words[middle] & 0xFFFF, *words[middle + 1 :]]
    return [spirv[: 4 * cut], struct.pack(f"<{len(zero)}I", *zero)]


@pytest.mark.parametrize(
    "rewrite",
    [lambda spirv: with_local_size(spirv, (8, 4, 2)), retype_cooperative_matrices],
    ids=["with_local_size", "retype_cooperative_matrices"],
)
def test_malformed_modules_raise_kernel_compilation(glslang, rewrite):
    for spirv in _malformed(_glsl(SPEC_AND_MORE)):
        with pytest.raises(BackendError) as caught:
            rewrite(spirv)
        assert caught.value.status is ErrorStatus.KernelCompilation and "malformed SPIR-V" in caught.value.context
