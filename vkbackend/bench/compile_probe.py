"""The compile cases' fresh process: open one device, time ``Device.compile`` of every ``*.spv`` in a folder.

``python -m vkbackend.bench.compile_probe --device N SPV_DIR`` prints one JSON line: ``ms`` (all compiles, device
bring-up excluded), ``programs`` (distinct program ids) and ``cache_bytes`` (the pipeline-cache files found in
``VKBACKEND_CACHE_DIR`` before compiling). With ``--glsl K`` it first compiles K of the bench's GLSL kernels to SPIR-V
with ``compile_glsl`` and adds ``glsl_ms`` (those K, the first one's opening of libglslang included) and
``glsl_in_process`` (false: glslangValidator ran, libglslang could not be opened). The parent (cases.py) sets the
cache folder and turns the drivers' own shader caches off, so "cold" is cold and "warm" is warm only through our
pipeline cache.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

from ..config import VulkanConfig, cache_dir
from ..device import devices
from .child import emit

DRIVER_CACHES_OFF = {
    "MESA_SHADER_CACHE_DISABLE": "true",  # Mesa (lavapipe, RADV, ANV)
    "__GL_SHADER_DISK_CACHE": "0",  # NVIDIA (OpenGL and Vulkan)
}
"""Environment that turns off the drivers' own on-disk shader caches, leaving ours as the only one."""


def cache_bytes() -> int:
    folder = cache_dir()
    return sum(p.stat().st_size for p in folder.glob("*.bin")) if folder.is_dir() else 0


def glsl_timing(count: int) -> dict[str, object]:
    """``glsl_ms`` and ``glsl_in_process`` for ``count`` distinct GLSL kernels compiled in this fresh process."""
    from .. import glslang_lib  # noqa: PLC0415
    from .kernels import compile_set  # noqa: PLC0415

    start = time.perf_counter()
    compile_set(count)
    return {"glsl_ms": (time.perf_counter() - start) * 1e3, "glsl_in_process": glslang_lib.available()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vkbackend.bench.compile_probe")
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--glsl", type=int, default=0, metavar="K", help="also time compile_glsl of K kernels")
    parser.add_argument("spv_dir", type=Path)
    args = parser.parse_args(argv)
    glsl = glsl_timing(args.glsl) if args.glsl else {}
    modules = [p.read_bytes() for p in sorted(args.spv_dir.glob("*.spv"))]
    found = cache_bytes()
    config = dataclasses.replace(VulkanConfig.from_env(), device_ids=[args.device])
    dev = devices(config)[0]
    start = time.perf_counter()
    ids = [dev.compile(spirv) for spirv in modules]
    ms = (time.perf_counter() - start) * 1e3
    dev.close()  # saves the pipeline cache for the next process
    emit(ms=ms, programs=len(set(ids)), cache_bytes=found, **glsl)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
