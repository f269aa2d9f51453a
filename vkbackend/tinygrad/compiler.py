"""GLSL -> SPIR-V for tinygrad, through :func:`vkbackend.compile_glsl` (glslang).

The "binary" tinygrad caches and hands to :class:`vkbackend.tinygrad.ops_vk.VKProgram` is a small container: the
kernel's metadata (local size, bindings, number of variables), the SPIR-V of the common variant (``VK_VIEWS=0``: no
per-binding offsets), and the GLSL source, from which the rarely needed ``VK_VIEWS=1`` variant is compiled on first use.

Kernels on global ids (tinygrad's ``NOLOCALS``) take their work-group size from specialization constants 0-2;
:func:`with_local_size` writes a size into their defaults, so one compiled module serves every size tinygrad tries.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass

from tinygrad.device import CompileError, Compiler

from vkbackend.tinygrad.renderer import read_meta

__all__ = ["VKCompiler", "VKLib", "pack_lib", "unpack_lib", "compile_variant", "with_local_size"]

MAGIC = b"VKTG\x01"
CACHE_KEY = "compile_vk_glsl_v1"


@dataclass(frozen=True)
class VKLib:
    meta: dict
    spirv: bytes
    source: str


def pack_lib(meta: dict, spirv: bytes, source: str) -> bytes:
    m = json.dumps(meta, separators=(",", ":")).encode()
    return MAGIC + struct.pack("<II", len(m), len(spirv)) + m + spirv + source.encode()


def unpack_lib(lib: bytes) -> VKLib:
    if not lib.startswith(MAGIC):
        raise ValueError("not a vkbackend-tinygrad binary")
    ml, sl = struct.unpack_from("<II", lib, len(MAGIC))
    o = len(MAGIC) + 8
    return VKLib(json.loads(lib[o : o + ml]), bytes(lib[o + ml : o + ml + sl]), lib[o + ml + sl :].decode())


def compile_variant(source: str, views: bool) -> bytes:
    """SPIR-V for one variant of a rendered kernel; glslang's message becomes tinygrad's ``CompileError``."""
    from vkbackend.errors import BackendError  # noqa: PLC0415
    from vkbackend.glsl import compile_glsl  # noqa: PLC0415

    try:
        return compile_glsl(source, {"VK_VIEWS": "1" if views else "0"})
    except BackendError as e:
        raise CompileError(f"GLSL compilation failed: {e}\n{source}") from e


_OP_EXECUTION_MODE, _MODE_LOCAL_SIZE = 16, 17
_OP_SPEC_CONSTANT, _OP_DECORATE, _DEC_SPEC_ID = 50, 71, 1


def with_local_size(spirv: bytes, local: tuple[int, int, int]) -> bytes:
    """``spirv`` with the defaults of specialization constants 0, 1, 2 (``local_size_{x,y,z}_id``) set to ``local``.

    This stands in for a specialization API: the driver sees one module per size, as it would see one pipeline per
    specialization.  The literal LocalSize execution mode is rewritten too (the WorkgroupSize built-in overrides it,
    but tools that read only the mode then agree)."""
    words = list(struct.unpack(f"<{len(spirv) // 4}I", spirv))
    spec_ids: dict[int, int] = {}  # result id -> SpecId
    pos = 5
    while pos < len(words):
        opcode, count = words[pos] & 0xFFFF, words[pos] >> 16
        if opcode == _OP_DECORATE and count == 4 and words[pos + 2] == _DEC_SPEC_ID and words[pos + 3] < 3:
            spec_ids[words[pos + 1]] = words[pos + 3]
        elif opcode == _OP_EXECUTION_MODE and count == 6 and words[pos + 2] == _MODE_LOCAL_SIZE:
            words[pos + 3 : pos + 6] = local
        elif opcode == _OP_SPEC_CONSTANT and count == 4 and words[pos + 2] in spec_ids:
            words[pos + 3] = local[spec_ids[words[pos + 2]]]
        pos += max(count, 1)
    if len(spec_ids) != 3:
        raise ValueError("not a kernel whose work-group size is set by specialization constants 0-2")
    return struct.pack(f"<{len(words)}I", *words)


class VKCompiler(Compiler):
    def __init__(self):
        super().__init__(CACHE_KEY)

    def compile(self, src: str) -> bytes:
        meta = read_meta(src)
        return pack_lib(meta, compile_variant(src, views=False), src)

    def disassemble(self, lib: bytes):
        import subprocess, tempfile  # noqa: E401, PLC0415

        with tempfile.NamedTemporaryFile(suffix=".spv") as f:
            f.write(unpack_lib(lib).spirv)
            f.flush()
            print(subprocess.run(["spirv-dis", f.name], capture_output=True, text=True, check=False).stdout)
