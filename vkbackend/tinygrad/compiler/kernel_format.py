"""The formats a rendered kernel travels in: its metadata line, and the "binary" tinygrad caches.

The renderer writes a JSON header on the first line of every kernel's source (name, local size, whether it runs on
global ids, its bindings and number of variables); the compiler reads it. The binary tinygrad caches and hands to
:class:`vkbackend.tinygrad.runtime.ops_vk.VKProgram` is a small container: that metadata, the SPIR-V of the common
variant (``VK_VIEWS=0``: no per-binding offsets), and the GLSL source, from which the rarely needed ``VK_VIEWS=1``
variant is compiled on first use.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass

__all__ = ["META_PREFIX", "with_meta", "read_meta", "VKLib", "pack_lib", "unpack_lib"]

META_PREFIX = "// vkbackend-tinygrad "
MAGIC = b"VKTG\x01"


def with_meta(meta: dict, source: str) -> str:
    """``source`` with ``meta`` as its first line."""
    return META_PREFIX + json.dumps(meta, separators=(",", ":")) + "\n" + source


def read_meta(source: str) -> dict:
    """The metadata on the first line of a rendered kernel."""
    first = source.split("\n", 1)[0]
    if not first.startswith(META_PREFIX):
        raise ValueError("not a vkbackend-tinygrad kernel (no metadata line)")
    return json.loads(first[len(META_PREFIX) :])


@dataclass(frozen=True)
class VKLib:
    """A compiled kernel: its metadata, the SPIR-V of its common variant, and its GLSL source."""

    meta: dict
    spirv: bytes
    source: str


def pack_lib(meta: dict, spirv: bytes, source: str) -> bytes:
    """The binary of a compiled kernel."""
    m = json.dumps(meta, separators=(",", ":")).encode()
    return MAGIC + struct.pack("<II", len(m), len(spirv)) + m + spirv + source.encode()


def unpack_lib(lib: bytes) -> VKLib:
    """The parts of a binary made by :func:`pack_lib`."""
    if not lib.startswith(MAGIC):
        raise ValueError("not a vkbackend-tinygrad binary")
    ml, sl = struct.unpack_from("<II", lib, len(MAGIC))
    o = len(MAGIC) + 8
    return VKLib(json.loads(lib[o : o + ml]), bytes(lib[o + ml : o + ml + sl]), lib[o + ml + sl :].decode())
