"""GLSL -> SPIR-V for tinygrad, through :func:`vkbackend.compile_glsl` (glslang).

The "binary" tinygrad caches and hands to :class:`vkbackend.tinygrad.ops_vk.VKProgram` is a small container: the
kernel's metadata (local size, bindings, number of variables), the SPIR-V of the common variant (``VK_VIEWS=0``: no
per-binding offsets), and the GLSL source, from which the rarely needed ``VK_VIEWS=1`` variant is compiled on first use.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass

from tinygrad.device import CompileError, Compiler

from vkbackend.tinygrad.renderer import read_meta

__all__ = ["VKCompiler", "VKLib", "pack_lib", "unpack_lib", "compile_variant"]

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
