"""SPIR-V reflection: kernels compiled by glslang, a few hand-assembled modules, malformed input and a fuzz run; the
walk over a module's instructions that reflection and the tinygrad plugin's rewriters share."""

from __future__ import annotations

import random
import shutil
import struct
import subprocess
import time
from pathlib import Path

import pytest

from vkbackend.errors import BackendError, ErrorStatus
from vkbackend.spirv import BufferBinding, ProgramInfo, PushMember, module_words, reflect
from vkbackend.spirv import instructions as walk

GLSLANG = shutil.which("glslangValidator")
NO_GLSLANG = "glslangValidator not on PATH (apt-get install glslang-tools)"
needs_glslang = pytest.mark.skipif(GLSLANG is None, reason=NO_GLSLANG)


def compile_comp(tmp_path: Path, source: str, target_env: str = "vulkan1.2", *extra: str) -> bytes:
    """Compiles with glslangValidator directly (not compile_glsl), so these tests also cover other target envs."""
    if GLSLANG is None:
        pytest.skip(NO_GLSLANG)
    src, out = tmp_path / "k.comp", tmp_path / "k.spv"
    src.write_text(source)
    result = subprocess.run(
        [GLSLANG, "-V", "--target-env", target_env, "-S", "comp", *extra, "-o", str(out), str(src)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return out.read_bytes()


def expect_error(spirv: bytes, *fragments: str, entry_point: str = "main") -> BackendError:
    with pytest.raises(BackendError) as caught:
        reflect(spirv, entry_point)
    assert caught.value.status is ErrorStatus.KernelCompilation
    for fragment in fragments:
        assert fragment in caught.value.context
    return caught.value


# A tiny assembler for modules glslang never emits (bool push constants, hand-placed decorations).


def inst(opcode: int, *operands: int) -> list[int]:
    return [((len(operands) + 1) << 16) | opcode, *operands]


def literal(text: str) -> list[int]:
    raw = text.encode() + b"\0"
    raw += b"\0" * (-len(raw) % 4)
    return list(struct.unpack(f"<{len(raw) // 4}I", raw))


def assemble(body: list[int], version: int = 0x00010500, bound: int = 100) -> bytes:
    words = [0x07230203, version, 0, bound, 0, *inst(17, 1), *inst(14, 0, 1), *body]
    return struct.pack(f"<{len(words)}I", *words)


def words_of(spirv: bytes) -> list[int]:
    return list(struct.unpack(f"<{len(spirv) // 4}I", spirv))


def pack(words: list[int]) -> bytes:
    return struct.pack(f"<{len(words)}I", *words)


def instructions(words: list[int]):
    """Yields (index, opcode, operands) of every instruction after the header."""
    index = 5
    while index < len(words):
        length = words[index] >> 16
        yield index, words[index] & 0xFFFF, words[index + 1 : index + length]
        index += length


SAXPY_LIKE = """
#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) readonly buffer X { float x[]; } xs;
layout(set = 0, binding = 1) buffer Y { float y[]; } ys;
layout(push_constant) uniform Params { float a; uint n; } params;
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < params.n) ys.y[i] += params.a * xs.x[i];
}
"""


# Buffers


@needs_glslang
def test_buffers_sorted_by_binding_with_access_and_names(tmp_path):
    spirv = compile_comp(
        tmp_path,
        """
#version 450
layout(local_size_x = 1) in;
layout(set = 0, binding = 5) buffer Both { float c[]; } both;
layout(set = 0, binding = 0) writeonly buffer Out { float b[]; } outs;
layout(set = 0, binding = 2) readonly buffer In { float a[]; };
void main() { outs.b[0] = a[0]; both.c[0] += 1.0; }
""",
    )
    assert reflect(spirv).buffers == (
        BufferBinding(binding=0, name="outs", readable=False, writable=True),
        BufferBinding(binding=2, name="In", readable=True, writable=False),  # anonymous instance: the block name
        BufferBinding(binding=5, name="both", readable=True, writable=True),
    )


@needs_glslang
def test_readonly_on_only_some_members_keeps_buffer_writable(tmp_path):
    spirv = compile_comp(
        tmp_path,
        """
#version 450
layout(local_size_x = 1) in;
layout(set = 0, binding = 0) buffer Mixed { readonly float head; float tail[]; } mixed;
void main() { mixed.tail[0] = mixed.head; }
""",
    )
    assert reflect(spirv).buffers == (BufferBinding(0, "mixed", readable=True, writable=True),)


@needs_glslang
def test_old_style_uniform_buffer_block_is_a_storage_buffer(tmp_path):
    # SPIR-V 1.0 has no StorageBuffer class: glslang emits Uniform variables whose block is decorated BufferBlock.
    spirv = compile_comp(tmp_path, SAXPY_LIKE, "vulkan1.0")
    assert words_of(spirv)[1] == 0x00010000
    info = reflect(spirv)
    assert info.buffers == (
        BufferBinding(0, "xs", readable=True, writable=False),
        BufferBinding(1, "ys", readable=True, writable=True),
    )
    assert info.push_constants == (PushMember("a", 0, "f", 4), PushMember("n", 4, "I", 4))


def test_variable_level_access_decorations():
    # NonWritable/NonReadable on the variable itself (not on members), in a hand-assembled module.
    ro, wo = 20, 21
    body = [
        *inst(15, 5, 1, *literal("main"), ro, wo),
        *inst(16, 1, 17, 1, 1, 1),
        *inst(5, ro, *literal("ro")),
        *inst(5, wo, *literal("wo")),
        *inst(71, 11, 2),  # Block
        *inst(72, 11, 0, 35, 0),  # Offset 0
        *inst(71, ro, 34, 0),
        *inst(71, ro, 33, 7),
        *inst(71, ro, 24),  # set 0, binding 7, NonWritable
        *inst(71, wo, 34, 0),
        *inst(71, wo, 33, 3),
        *inst(71, wo, 25),  # set 0, binding 3, NonReadable
        *inst(19, 2),
        *inst(33, 3, 2),  # void, fn type
        *inst(22, 10, 32),
        *inst(30, 11, 10),
        *inst(32, 12, 12, 11),  # float, struct, StorageBuffer pointer
        *inst(59, 12, ro, 12),
        *inst(59, 12, wo, 12),
        *inst(54, 2, 1, 0, 3),
        *inst(248, 4),
        *inst(253),
        *inst(56),
    ]
    assert reflect(assemble(body)).buffers == (
        BufferBinding(3, "wo", readable=False, writable=True),
        BufferBinding(7, "ro", readable=True, writable=False),
    )


# Push constants


@needs_glslang
def test_push_constant_members_of_every_scalar_type(tmp_path):
    spirv = compile_comp(
        tmp_path,
        """
#version 450
#extension GL_EXT_shader_explicit_arithmetic_types : require
layout(local_size_x = 1) in;
layout(set = 0, binding = 0) buffer Out { double o[]; };
layout(push_constant) uniform Params {
    int i; uint u; float f; double d; int64_t l; uint64_t ul; int16_t s; float16_t h; uint16_t us;
} p;
void main() {
    o[0] = double(p.i) + double(p.u) + double(p.f) + p.d + double(p.l) + double(p.ul) + double(p.s)
         + double(p.h) + double(p.us);
}
""",
    )
    info = reflect(spirv)
    assert info.push_constants == (
        PushMember("i", 0, "i", 4),
        PushMember("u", 4, "I", 4),
        PushMember("f", 8, "f", 4),
        PushMember("d", 16, "d", 8),
        PushMember("l", 24, "q", 8),
        PushMember("ul", 32, "Q", 8),
        PushMember("s", 40, "h", 2),
        PushMember("h", 42, "e", 2),
        PushMember("us", 44, "H", 2),
    )
    assert info.push_constant_size == 48  # 46 bytes spanned, rounded up to 4


@needs_glslang
def test_push_constant_size_is_rounded_up_to_four(tmp_path):
    spirv = compile_comp(
        tmp_path,
        """
#version 450
#extension GL_EXT_shader_explicit_arithmetic_types : require
layout(local_size_x = 1) in;
layout(set = 0, binding = 0) buffer Out { int o[]; };
layout(push_constant) uniform Params { int a; int8_t b; } p;
void main() { o[0] = p.a + int(p.b); }
""",
    )
    info = reflect(spirv)
    assert info.push_constants == (PushMember("a", 0, "i", 4), PushMember("b", 4, "b", 1))
    assert info.push_constant_size == 8


@needs_glslang
def test_glsl_bool_push_member_is_lowered_to_uint(tmp_path):
    # GLSL bools in a block have no storage size; glslang lays them out as 32-bit uint, so they pack as 'I'.
    spirv = compile_comp(
        tmp_path,
        """
#version 450
layout(local_size_x = 1) in;
layout(set = 0, binding = 0) buffer Out { float o[]; };
layout(push_constant) uniform Params { float x; bool flag; } p;
void main() { o[0] = p.flag ? p.x : 0.0; }
""",
    )
    info = reflect(spirv)
    assert info.push_constants == (PushMember("x", 0, "f", 4), PushMember("flag", 4, "I", 4))
    assert info.push_constant_size == 8


def _push_constant_module(member_type: list[int], member_type_id: int) -> bytes:
    """A module whose push-constant block has one member of the given (hand-assembled) type."""
    pc = 20
    body = [
        *inst(15, 5, 1, *literal("main"), pc),
        *inst(16, 1, 17, 1, 1, 1),
        *inst(71, 11, 2),
        *inst(72, 11, 0, 35, 0),
        *inst(19, 2),
        *inst(33, 3, 2),
        *member_type,
        *inst(30, 11, member_type_id),
        *inst(32, 12, 9, 11),
        *inst(59, 12, pc, 9),
        *inst(54, 2, 1, 0, 3),
        *inst(248, 4),
        *inst(253),
        *inst(56),
    ]
    return assemble(body)


def test_unnamed_push_member_gets_positional_name():
    info = reflect(_push_constant_module(inst(21, 10, 32, 1), 10))
    assert info.push_constants == (PushMember("m0", 0, "i", 4),)
    assert info.push_constant_size == 4


def test_opbool_push_member_is_rejected():
    expect_error(_push_constant_module(inst(20, 10), 10), "bool", "int or uint")


@needs_glslang
def test_vec4_push_member_is_rejected(tmp_path):
    spirv = compile_comp(
        tmp_path,
        """
#version 450
layout(local_size_x = 1) in;
layout(set = 0, binding = 0) buffer Out { float o[]; };
layout(push_constant) uniform Params { float a; vec4 v; } p;
void main() { o[0] = p.v.x + p.a; }
""",
    )
    expect_error(spirv, "'v'", "vector", "only scalar")


@needs_glslang
def test_array_push_member_is_rejected(tmp_path):
    spirv = compile_comp(
        tmp_path,
        """
#version 450
layout(local_size_x = 1) in;
layout(set = 0, binding = 0) buffer Out { float o[]; };
layout(push_constant) uniform Params { float w[4]; } p;
void main() { o[0] = p.w[1]; }
""",
    )
    expect_error(spirv, "'w'", "array", "only scalar")


# Workgroup size


@needs_glslang
def test_literal_local_size(tmp_path):
    spirv = compile_comp(
        tmp_path,
        """
#version 450
layout(local_size_x = 8, local_size_y = 4, local_size_z = 2) in;
layout(set = 0, binding = 0) buffer Out { float o[]; };
void main() { o[gl_LocalInvocationIndex] = 1.0; }
""",
    )
    assert reflect(spirv).local_size == (8, 4, 2)


SPEC_LOCAL_SIZE = """
#version 450
layout(local_size_x_id = 0, local_size_x = 64, local_size_y = 2) in;
layout(constant_id = 0) const int X = 64;
layout(set = 0, binding = 0) buffer Out { float o[]; };
void main() { o[gl_GlobalInvocationID.x] = float(X); }
"""


@needs_glslang
def test_local_size_from_specialization_constant_via_workgroup_size_builtin(tmp_path):
    # Vulkan 1.2 target: LocalSize 64 2 1 plus a WorkgroupSize spec-constant composite, whose defaults win.
    assert reflect(compile_comp(tmp_path, SPEC_LOCAL_SIZE)).local_size == (64, 2, 1)


@needs_glslang
def test_local_size_id_resolved_through_spec_constant_defaults(tmp_path):
    # Vulkan 1.3 target (SPIR-V 1.6): glslang emits OpExecutionModeId LocalSizeId and no WorkgroupSize built-in.
    spirv = compile_comp(tmp_path, SPEC_LOCAL_SIZE, "vulkan1.3")
    assert 331 in {opcode for _, opcode, _ in instructions(words_of(spirv))}
    assert reflect(spirv).local_size == (64, 2, 1)


@needs_glslang
def test_local_size_id_without_default_is_one(tmp_path):
    # glslang gives local_size_x_id its own spec constant defaulting to 1; the constant_id = 0 constant X shares
    # the SpecId but not its default. Without specialization the driver runs 1x1x1 workgroups, so that is reported.
    spirv = compile_comp(
        tmp_path,
        """
#version 450
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const int X = 64;
layout(set = 0, binding = 0) buffer Out { float o[]; };
void main() { o[gl_GlobalInvocationID.x] = float(X); }
""",
    )
    assert reflect(spirv).local_size == (1, 1, 1)


@needs_glslang
def test_workgroup_size_builtin_overrides_local_size_mode(tmp_path):
    spirv = compile_comp(
        tmp_path,
        """
#version 450
layout(local_size_x = 8, local_size_y = 4, local_size_z = 2) in;
layout(set = 0, binding = 0) buffer Out { uint o[]; };
void main() { o[0] = gl_WorkGroupSize.x; }
""",
    )
    words = words_of(spirv)
    for index, opcode, operands in instructions(words):
        if opcode == 16 and operands[1] == 17:  # OpExecutionMode %main LocalSize 8 4 2
            words[index + 3 : index + 6] = [1, 1, 1]
    assert reflect(pack(words)).local_size == (8, 4, 2)


def test_missing_local_size_is_an_error():
    body = [
        *inst(15, 5, 1, *literal("main")),
        *inst(19, 2),
        *inst(33, 3, 2),
        *inst(54, 2, 1, 0, 3),
        *inst(248, 4),
        *inst(253),
        *inst(56),
    ]
    expect_error(assemble(body), "no workgroup size", "local_size_x")


# Shared memory


@needs_glslang
def test_shared_memory_bytes(tmp_path):
    spirv = compile_comp(
        tmp_path,
        """
#version 450
layout(local_size_x = 16, local_size_y = 16) in;
layout(set = 0, binding = 0) buffer Out { float o[]; };
shared float tile[16][16];
shared vec4 extra[3];
shared double total;
void main() {
    tile[gl_LocalInvocationID.y][gl_LocalInvocationID.x] = 1.0;
    extra[0] = vec4(1.0);
    total = 2.0;
    barrier();
    o[0] = tile[0][0] + extra[0].x + float(total);
}
""",
    )
    info = reflect(spirv)
    assert info.shared_memory_bytes == 16 * 16 * 4 + 3 * 16 + 8
    assert reflect(compile_comp(tmp_path, SAXPY_LIKE)).shared_memory_bytes == 0


@pytest.mark.parametrize("version, expected", [(0x00010500, (64, 16)), (0x00010300, (80, 80))])
def test_shared_memory_per_entry_point(version, expected):
    # From SPIR-V 1.4 an entry point's interface lists the globals it uses, so each entry point counts its own
    # Workgroup variables; before 1.4 interfaces hold only Input/Output, so every Workgroup variable counts.
    big, small = 30, 31
    body = [
        *inst(15, 5, 1, *literal("a"), big),
        *inst(15, 5, 2, *literal("b"), small),
        *inst(16, 1, 17, 1, 1, 1),
        *inst(16, 2, 17, 1, 1, 1),
        *inst(19, 3),
        *inst(33, 4, 3),
        *inst(22, 10, 32),
        *inst(21, 11, 32, 0),
        *inst(43, 11, 12, 16),
        *inst(43, 11, 13, 4),
        *inst(28, 14, 10, 12),
        *inst(28, 15, 10, 13),  # float[16], float[4]
        *inst(32, 16, 4, 14),
        *inst(32, 17, 4, 15),  # Workgroup pointers
        *inst(59, 16, big, 4),
        *inst(59, 17, small, 4),
    ]
    for function in (1, 2):
        body += [*inst(54, 3, function, 0, 4), *inst(248, 40 + function), *inst(253), *inst(56)]
    spirv = assemble(body, version=version)
    assert (reflect(spirv, "a").shared_memory_bytes, reflect(spirv, "b").shared_memory_bytes) == expected


# The whole picture, entry points and byte order


@needs_glslang
def test_program_info_of_saxpy(tmp_path):
    assert reflect(compile_comp(tmp_path, SAXPY_LIKE)) == ProgramInfo(
        entry_point="main",
        local_size=(64, 1, 1),
        buffers=(
            BufferBinding(0, "xs", readable=True, writable=False),
            BufferBinding(1, "ys", readable=True, writable=True),
        ),
        push_constants=(PushMember("a", 0, "f", 4), PushMember("n", 4, "I", 4)),
        push_constant_size=8,
        shared_memory_bytes=0,
    )


@needs_glslang
def test_named_entry_point(tmp_path):
    spirv = compile_comp(tmp_path, SAXPY_LIKE, "vulkan1.2", "-e", "saxpy", "--source-entrypoint", "main")
    assert reflect(spirv, "saxpy").entry_point == "saxpy"
    expect_error(spirv, "'main' not found", "'saxpy'")


@needs_glslang
def test_byte_swapped_module_reflects_the_same(tmp_path):
    spirv = compile_comp(tmp_path, SAXPY_LIKE)
    swapped = struct.pack(f">{len(spirv) // 4}I", *words_of(spirv))
    assert swapped[:4] == b"\x07\x23\x02\x03"
    assert reflect(swapped) == reflect(spirv)


@needs_glslang
def test_accepts_bytearray_and_memoryview(tmp_path):
    spirv = compile_comp(tmp_path, SAXPY_LIKE)
    assert reflect(bytearray(spirv)) == reflect(memoryview(spirv)) == reflect(spirv)


def test_non_compute_entry_point_is_rejected():
    body = [
        *inst(15, 0, 1, *literal("main")),
        *inst(19, 2),
        *inst(33, 3, 2),  # Vertex model
        *inst(54, 2, 1, 0, 3),
        *inst(248, 4),
        *inst(253),
        *inst(56),
    ]
    expect_error(assemble(body), "not a compute shader")


# Malformed input and unsupported interfaces


def test_bad_magic():
    expect_error(b"#version 450\nvoid main() {}\n", "magic number", "not GLSL source")
    expect_error(b"", "magic number")


def test_not_whole_words():
    expect_error(b"\x03\x02\x23\x07" + b"\0" * 17, "whole number of 32-bit words")


def test_shorter_than_header():
    expect_error(b"\x03\x02\x23\x07" + b"\0" * 8, "header")


def test_not_bytes():
    expect_error("#version 450", "bytes-like")  # type: ignore[arg-type]


@needs_glslang
def test_truncated_stream(tmp_path):
    spirv = compile_comp(tmp_path, SAXPY_LIKE)
    words = words_of(spirv)
    # Cut inside an instruction: the first multi-word instruction after the header loses its tail.
    starts = [index for index, _, operands in instructions(words) if len(operands) >= 2]
    cut = starts[len(starts) // 2] + 2
    expect_error(pack(words[:cut]), "truncated")


def test_zero_word_count_instruction():
    expect_error(assemble([0]), "word count 0")


@needs_glslang
def test_unknown_entry_point(tmp_path):
    expect_error(compile_comp(tmp_path, SAXPY_LIKE), "'nope' not found", "'main'", entry_point="nope")


@needs_glslang
def test_uniform_buffer_is_unsupported(tmp_path):
    spirv = compile_comp(
        tmp_path,
        """
#version 450
layout(local_size_x = 1) in;
layout(set = 0, binding = 0) buffer Out { float o[]; };
layout(set = 0, binding = 1) uniform Consts { float k; } consts;
void main() { o[0] = consts.k; }
""",
    )
    expect_error(spirv, "unsupported resource", "'consts'", "uniform buffer")


@needs_glslang
def test_sampler_is_unsupported(tmp_path):
    spirv = compile_comp(
        tmp_path,
        """
#version 450
layout(local_size_x = 1) in;
layout(set = 0, binding = 0) buffer Out { vec4 o[]; };
layout(set = 0, binding = 1) uniform sampler2D tex;
void main() { o[0] = textureLod(tex, vec2(0.5), 0.0); }
""",
    )
    expect_error(spirv, "unsupported resource", "'tex'")


@needs_glslang
def test_descriptor_set_one_is_unsupported(tmp_path):
    spirv = compile_comp(
        tmp_path,
        """
#version 450
layout(local_size_x = 1) in;
layout(set = 1, binding = 0) buffer Out { float o[]; } outs;
void main() { outs.o[0] = 1.0; }
""",
    )
    expect_error(spirv, "unsupported resource", "'outs'", "descriptor set 1")


@needs_glslang
def test_duplicate_binding(tmp_path):
    spirv = compile_comp(
        tmp_path,
        """
#version 450
layout(local_size_x = 1) in;
layout(set = 0, binding = 0) buffer A { float a[]; } first;
layout(set = 0, binding = 0) buffer B { float b[]; } second;
void main() { first.a[0] = second.b[0]; }
""",
    )
    expect_error(spirv, "'first' and 'second' both use binding 0")


@needs_glslang
def test_array_of_buffers_is_unsupported(tmp_path):
    spirv = compile_comp(
        tmp_path,
        """
#version 450
layout(local_size_x = 1) in;
layout(set = 0, binding = 0) buffer A { float a[]; } many[2];
void main() { many[0].a[0] = many[1].a[0]; }
""",
    )
    expect_error(spirv, "arrays of storage buffers")


# The walk over a module's instructions


@needs_glslang
def test_the_walk_yields_every_instruction_once_in_order(tmp_path):
    spirv = compile_comp(tmp_path, SAXPY_LIKE)
    words = module_words(spirv)
    assert words == tuple(words_of(spirv))
    walked = list(walk(words))
    expected = list(instructions(words_of(spirv)))  # the test's own walk
    assert [(offset, opcode, list(operands)) for offset, opcode, _, operands in walked] == expected
    assert all(count == len(operands) + 1 == words[offset] >> 16 for offset, _, count, operands in walked)
    assert walked[-1][0] + walked[-1][2] == len(words)  # the last instruction ends the module
    swapped = struct.pack(f">{len(spirv) // 4}I", *words)
    assert module_words(swapped) == words


def _walk_error(words: tuple[int, ...], walked: int) -> str:
    """Walks ``words``: ``walked`` instructions are yielded, then the walk raises; returns the error's context."""
    steps = walk(words)
    for _ in range(walked):
        next(steps)
    with pytest.raises(BackendError) as caught:
        next(steps)
    assert caught.value.status is ErrorStatus.KernelCompilation
    return caught.value.context


def test_the_walk_stops_at_a_zero_word_count():
    # assemble() starts the body with OpCapability and OpMemoryModel: both are yielded, the zero word is not
    context = _walk_error(module_words(assemble([0, *inst(71, 1, 33, 0)])), 2)
    assert "malformed SPIR-V" in context and "word count 0" in context


def test_the_walk_stops_at_a_truncated_instruction():
    words = module_words(assemble(inst(71, 1, 33, 0)))[:-1]
    assert "word count 4 but 3 words remain" in _walk_error(words, 2)


def test_module_words_refuses_what_is_not_a_module():
    for data, fragment in ((b"#version 450\n", "magic number"), (b"\x03\x02\x23\x07" + b"\0" * 8, "header")):
        with pytest.raises(BackendError) as caught:
            module_words(data)
        assert caught.value.status is ErrorStatus.KernelCompilation and fragment in caught.value.context


# Fuzzing: corrupt modules must only ever raise BackendError(KernelCompilation), and quickly.

FUZZ_BASE = """
#version 450
#extension GL_EXT_shader_explicit_arithmetic_types : require
layout(local_size_x_id = 0, local_size_x = 32, local_size_y = 2) in;
layout(constant_id = 0) const int X = 32;
layout(set = 0, binding = 2) readonly buffer A { float a[]; } ins;
layout(set = 0, binding = 0) writeonly buffer B { float b[]; } outs;
layout(push_constant) uniform Params { int i; float f; double d; uint64_t n; int16_t s; bool flag; } p;
shared float tile[32][2];
void main() {
    uint g = gl_GlobalInvocationID.x;
    tile[gl_LocalInvocationID.x][gl_LocalInvocationID.y] = ins.a[g];
    barrier();
    outs.b[g] = tile[0][0] * p.f + float(p.i) + float(p.d) + float(p.n) + float(p.s) + (p.flag ? 1.0 : 0.0);
}
"""


def _mutate(rng: random.Random, data: bytes) -> bytes:
    mutated = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        words = len(mutated) // 4
        if words == 0:
            break
        at = 4 * rng.randrange(words)
        kind = rng.randrange(7)
        if kind == 0:  # a random word
            mutated[at : at + 4] = rng.getrandbits(32).to_bytes(4, "little")
        elif kind == 1:  # a small word: plausible ids, opcodes, decorations
            mutated[at : at + 4] = rng.randrange(256).to_bytes(4, "little")
        elif kind == 2:  # one flipped bit
            mutated[at + rng.randrange(4)] ^= 1 << rng.randrange(8)
        elif kind == 3:  # truncation at any byte
            del mutated[rng.randrange(len(mutated)) :]
        elif kind == 4:  # a dropped word
            del mutated[at : at + 4]
        elif kind == 5:  # an inserted word
            mutated[at:at] = rng.getrandbits(32).to_bytes(4, "little")
        else:  # a changed word count, keeping the opcode
            mutated[at + 2 : at + 4] = rng.randrange(8).to_bytes(2, "little")
    return bytes(mutated)


@needs_glslang
def test_fuzzed_modules_only_raise_kernel_compilation(tmp_path):
    base = compile_comp(tmp_path, FUZZ_BASE)
    assert reflect(base).local_size == (32, 2, 1)
    rng = random.Random(20240607)
    outcomes = {"reflected": 0, "rejected": 0}
    started = time.perf_counter()
    for _ in range(2000):
        try:
            reflect(_mutate(rng, base))
            outcomes["reflected"] += 1
        except BackendError as error:
            assert error.status is ErrorStatus.KernelCompilation
            assert "reflection failed" not in error.context  # the last-resort guard in reflect() never fires
            outcomes["rejected"] += 1
    elapsed = time.perf_counter() - started
    assert outcomes["reflected"] > 0 and outcomes["rejected"] > 0  # the mutations reach both outcomes
    assert elapsed < 5.0, f"2000 reflections took {elapsed:.2f} s"


def test_pathological_nesting_is_fast():
    # 50,000 nested arrays of 2**32 elements and a decoration group applied 60,000 times: linear, no huge integers.
    body = [
        *inst(15, 5, 1, *literal("main")),
        *inst(16, 1, 17, 1, 1, 1),
        *inst(21, 2, 32, 0),
        *inst(43, 2, 3, 0xFFFFFFFF),
    ]
    for level in range(50_000):
        body += inst(28, 1000 + level, 2 if level == 0 else 999 + level, 3)
    body += inst(32, 900, 4, 50_999) + inst(59, 900, 901, 4)  # a Workgroup variable of the innermost type
    body += inst(73, 5) + [word for decoration in range(40) for word in inst(71, 5, decoration, 0)]
    body += inst(74, 5, *range(100_000, 160_000))
    started = time.perf_counter()
    info = reflect(assemble(body, version=0x00010300, bound=200_000))
    assert time.perf_counter() - started < 2.0
    assert info.local_size == (1, 1, 1)
    assert info.shared_memory_bytes == 0  # too large to be real: reported as unknown
