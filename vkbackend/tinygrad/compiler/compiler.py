"""GLSL -> SPIR-V for tinygrad, through :func:`vkbackend.compile_glsl` (glslang).

The compiler turns a rendered kernel into the binary of kernel_format.py. Kernels on global ids (tinygrad's
``NOLOCALS``) take their work-group size from specialization constants 0-2; :func:`with_local_size` writes a size into
their defaults, so one compiled module serves every size tinygrad tries. Kernels with cooperative matrices (tinygrad's
tensor cores) are SPIR-V 1.6, and those with bfloat16 inputs are retyped after glslang (see bf16_spirv.py); the
kernel's metadata says so.
"""

from __future__ import annotations

import struct

from tinygrad.device import CompileError, Compiler

from vkbackend.spirv import (
    DEC_SPEC_ID,
    MODE_LOCAL_SIZE,
    OP_DECORATE,
    OP_EXECUTION_MODE,
    OP_SPEC_CONSTANT,
    instructions,
    module_words,
)
from vkbackend.tinygrad.compiler.bf16_spirv import retype_cooperative_matrices
from vkbackend.tinygrad.compiler.kernel_format import pack_lib, read_meta, unpack_lib

__all__ = ["VKCompiler", "compile_variant", "with_local_size"]

CACHE_KEY = "compile_vk_glsl_v1"


def compile_variant(source: str, views: bool) -> bytes:
    """SPIR-V for one variant of a rendered kernel; glslang's message becomes tinygrad's ``CompileError``."""
    from vkbackend.errors import BackendError  # noqa: PLC0415
    from vkbackend.glsl import compile_glsl  # noqa: PLC0415

    meta = read_meta(source)
    try:
        spirv = compile_glsl(
            source, {"VK_VIEWS": "1" if views else "0"}, target_env=meta.get("target_env", "vulkan1.2")
        )
    except BackendError as e:
        raise CompileError(f"GLSL compilation failed: {e}\n{source}") from e
    if not meta.get("bf16_coopmat"):
        return spirv
    try:
        return retype_cooperative_matrices(spirv)
    except ValueError as e:
        raise CompileError(f"retyping the bfloat16 cooperative matrices failed: {e}\n{source}") from e


def with_local_size(spirv: bytes, local: tuple[int, int, int]) -> bytes:
    """``spirv`` with the defaults of specialization constants 0, 1, 2 (``local_size_{x,y,z}_id``) set to ``local``.

    This stands in for a specialization API: the driver sees one module per size, as it would see one pipeline per
    specialization.  The literal LocalSize execution mode is rewritten too (the WorkgroupSize built-in overrides it,
    but tools that read only the mode then agree). Raises ValueError for a module whose size is not set by those
    constants, ``BackendError(KernelCompilation)`` for a malformed one."""
    words = module_words(spirv)
    out = list(words)
    spec_ids: dict[int, int] = {}  # result id -> SpecId
    for pos, opcode, count, operands in instructions(words):
        if opcode == OP_DECORATE and count == 4 and operands[1] == DEC_SPEC_ID and operands[2] < 3:
            spec_ids[operands[0]] = operands[2]
        elif opcode == OP_EXECUTION_MODE and count == 6 and operands[1] == MODE_LOCAL_SIZE:
            out[pos + 3 : pos + 6] = local
        elif opcode == OP_SPEC_CONSTANT and count == 4 and operands[1] in spec_ids:
            out[pos + 3] = local[spec_ids[operands[1]]]
    if len(spec_ids) != 3:
        raise ValueError("not a kernel whose work-group size is set by specialization constants 0-2")
    return struct.pack(f"<{len(out)}I", *out)


class VKCompiler(Compiler):
    def __init__(self):
        super().__init__(CACHE_KEY)

    def compile(self, src: str) -> bytes:
        meta = read_meta(src)
        return pack_lib(meta, compile_variant(src, views=False), src)

    def disassemble(self, lib: bytes):
        import subprocess  # noqa: E401, PLC0415
        import tempfile

        with tempfile.NamedTemporaryFile(suffix=".spv") as f:
            f.write(unpack_lib(lib).spirv)
            f.flush()
            print(subprocess.run(["spirv-dis", f.name], capture_output=True, text=True, check=False).stdout)
