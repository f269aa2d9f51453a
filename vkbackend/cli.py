"""``python -m vkbackend info`` and ``demo`` (``doctor`` is in doctor.py), and the checks of the outputs ``bench`` is
asked to write.

Conventions: results go to stdout, errors to stderr with the exit status 1 (2 when an argument is wrong, as argparse
does); ``--json`` writes machine-readable output.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .config import VulkanConfig
from .errors import NO_DEVICE_HINT, BackendError, KernelCompilationError

if TYPE_CHECKING:
    from .device import Device


def _bytes(n: int) -> str:
    """A size in the binary unit that fits it: 128 MiB, 2 GiB, 32 KiB."""
    from .bench.units import binary

    return binary(n, "B")


NVIDIA = 0x10DE


def driver_version(vendor_id: int, version: int) -> str:
    """``driverVersion`` decoded as vulkaninfo decodes it: NVIDIA packs 10.8.8.6 bits (580.159.4.0), Intel's Windows
    driver 18.14 bits, every other driver (Mesa's among them) Vulkan's version packing (VK_API_VERSION_*)."""
    if vendor_id == NVIDIA:
        return f"{version >> 22 & 0x3FF}.{version >> 14 & 0xFF}.{version >> 6 & 0xFF}.{version & 0x3F}"
    if vendor_id == 0x8086 and sys.platform == "win32":
        return f"{version >> 14}.{version & 0x3FFF}"
    from .discovery import version_string

    return version_string(version)


def driver_text(name: str, info: str, vendor_id: int, version: int) -> str:
    """The driver as people name it: its own name and version text where it gives them (``llvmpipe, Mesa 22.3.6
    (LLVM 15.0.6)``), and its driverVersion decoded (:func:`driver_version`)."""
    own = ", ".join(part for part in (name, info) if part)
    decoded = driver_version(vendor_id, version)
    return f"{own} (version {decoded})" if own else f"version {decoded}"


def info(as_json: bool = False) -> int:
    """Print every device with its key limits, memory heaps and dtype support; ``as_json``: as a JSON list with one
    object per device (``index``, ``free_bytes`` and every field of :class:`~vkbackend.DeviceInfo`)."""
    from . import devices

    try:
        found = devices()
    except BackendError as error:
        print(f"vkbackend: {error}", file=sys.stderr)
        return 1
    if not found:
        if VulkanConfig.from_env().device_ids == []:
            print(
                "vkbackend: VKBACKEND_DEVICE_IDS is empty, which configures every device out; unset it or name "
                "devices (VKBACKEND_DEVICE_IDS=0)",
                file=sys.stderr,
            )
        else:
            print(f"vkbackend: no Vulkan device: {NO_DEVICE_HINT}", file=sys.stderr)
        return 1
    if as_json:
        print(json.dumps([_json_device(dev) for dev in found], indent=1))
        return 0
    for dev in found:
        i = dev.info
        print(f"device {dev.index}: {i.name} ({i.device_type}, vendor {i.vendor_id:#06x}, device {i.device_id:#06x})")
        driver = driver_text(i.driver_name, i.driver_info, i.vendor_id, i.driver_version)
        print(f"  Vulkan {i.api_version}, driver {driver}")
        print(
            f"  work groups: max count {i.max_global_work_dims}, max size {i.max_local_work_dims}, "
            f"max threads {i.max_local_threads}, subgroup {i.subgroup_size} (up to {i.max_subgroup_size})"
        )
        print(
            f"  shared memory {_bytes(i.local_mem_size)}, push constants {i.max_push_constants_size} B, "
            f"storage buffers per kernel {i.max_storage_buffers}"
        )
        print(
            f"  buffers: max allocation {_bytes(i.max_memory_allocation_size)}, max storage range "
            f"{_bytes(i.max_storage_buffer_range)}, offset alignment {i.min_storage_buffer_offset_alignment} B, "
            f"max allocations {i.max_memory_allocation_count}; larger buffers: "
            + (
                f"bound to several allocations (sparse binding, {_bytes(i.sparse_address_space_size)} in all)"
                if i.sparse_binding
                else "no (no sparse binding)"
            )
        )
        for n, heap in enumerate(i.memory_heaps):
            local = " device-local" if heap.device_local else ""
            print(f"  heap {n}: {_bytes(heap.size)}{local}, budget {_bytes(heap.budget)}")
        print(
            f"  timestamps: {'yes, ' + str(i.timestamp_period_ns) + ' ns/tick' if i.timestamps else 'no'}; "
            f"push descriptors: {'yes' if i.push_descriptors else 'no'}; robust buffer access: "
            f"{'on' if i.robust_buffer_access else 'off'}"
        )
        print(f"  free device memory: {_bytes(dev.memory_pool.free_bytes)}")
        supported = [d.name for d, ops in i.dtype_capabilities.items() if ops]
        unsupported = [d.name for d, ops in i.dtype_capabilities.items() if not ops]
        print(f"  dtypes: {', '.join(supported)}" + (f" (not: {', '.join(unsupported)})" if unsupported else ""))
        limited = [
            f"{d.name} without {', '.join(sorted(_missing(ops)))}"
            for d, ops in i.dtype_capabilities.items()
            if ops and d.is_float and _missing(ops)
        ]
        if limited:
            print(f"  limited: {'; '.join(limited)}")
        shapes = [
            f"{c.m}x{c.n}x{c.k} {c.a_type}*{c.b_type}+{c.c_type}->{c.result_type} ({c.scope})"
            for c in i.cooperative_matrix_shapes
        ]
        print(f"  cooperative matrices: {'; '.join(shapes) or 'none'}")
        print(f"  features: {', '.join(sorted(i.features))}")
    return 0


def _json_device(dev: Device) -> dict[str, Any]:
    """``info --json``'s object for one device: ``index``, every field of its DeviceInfo (``driver_version`` the raw
    number), ``driver_version_text`` (decoded as the text output decodes it), ``free_bytes`` and the
    ``vkbackend_version`` that described it."""
    from . import __version__

    info = dev.info
    return {
        "index": dev.index,
        **_jsonable(info),
        "driver_version_text": driver_version(info.vendor_id, info.driver_version),
        "free_bytes": dev.memory_pool.free_bytes,
        "vkbackend_version": __version__,
    }


def _jsonable(value: Any) -> Any:
    """A DeviceInfo (or a part of one) as JSON values: dataclasses as objects, sets sorted, DType keys by name."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {getattr(k, "name", k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (frozenset, set)):
        return sorted(value)
    if isinstance(value, (tuple, list)):
        return [_jsonable(v) for v in value]
    return value


def _missing(ops: frozenset[str]) -> set[str]:
    from .dtypes import TRANSCENDENTAL_OPS

    return set(TRANSCENDENTAL_OPS - ops)


SAXPY = """#version 450
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) buffer Y { float y[]; };
layout(push_constant) uniform P { uint n; float a; } p;
void main() { uint i = gl_GlobalInvocationID.x; if (i < p.n) y[i] = p.a * x[i] + y[i]; }
"""

REDUCE = """#version 450
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer S { float partial[]; };
layout(push_constant) uniform P { uint n; } p;
shared float tile[256];
void main() {
  uint i = gl_GlobalInvocationID.x, l = gl_LocalInvocationID.x;
  tile[l] = i < p.n ? x[i] : 0.0;
  barrier();
  for (uint s = 128; s > 0; s >>= 1) { if (l < s) tile[l] += tile[l + s]; barrier(); }
  if (l == 0) partial[gl_WorkGroupID.x] = tile[0];
}
"""

MATMUL = """#version 450
#define T 16
layout(local_size_x = T, local_size_y = T) in;
layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer B { float b[]; };
layout(std430, binding = 2) writeonly buffer C { float c[]; };
layout(push_constant) uniform P { uint n; } p;
shared float ta[T][T], tb[T][T];
void main() {
  uint row = gl_GlobalInvocationID.y, col = gl_GlobalInvocationID.x;
  uint ly = gl_LocalInvocationID.y, lx = gl_LocalInvocationID.x;
  float acc = 0.0;
  for (uint k0 = 0; k0 < p.n; k0 += T) {
    ta[ly][lx] = (row < p.n && k0 + lx < p.n) ? a[row * p.n + k0 + lx] : 0.0;
    tb[ly][lx] = (col < p.n && k0 + ly < p.n) ? b[(k0 + ly) * p.n + col] : 0.0;
    barrier();
    for (uint k = 0; k < T; k++) acc += ta[ly][k] * tb[k][lx];
    barrier();
  }
  if (row < p.n && col < p.n) c[row * p.n + col] = acc;
}
"""


def demo(index: int = 0, n: int | None = None) -> int:
    """Compile GLSL kernels, run a dependent chain of launches, check every result against numpy, print speed.

    ``index`` is the device's number as ``info`` lists it. Returns 0 when every result matches, 1 when one does not,
    the device cannot be opened or the kernels cannot be compiled (no glslang), 2 when there is no device ``index``.
    """
    import numpy as np

    from . import compile_glsl, devices
    from .bench.units import binary, quantity

    try:
        dev = devices(dataclasses.replace(VulkanConfig.from_env(), device_ids=[index]))[0]
    except BackendError as error:
        print(f"vkbackend demo: cannot open device {index}: {error}", file=sys.stderr)
        return 2 if isinstance(error, ValueError) else 1  # InvalidArgument: there is no such device
    pool = dev.memory_pool
    print(f"device {index}: {dev.info.name}")
    rng = np.random.default_rng(0)
    try:
        saxpy, reduce, matmul = (dev.compile(compile_glsl(src)) for src in (SAXPY, REDUCE, MATMUL))
    except KernelCompilationError as error:  # no glslangValidator: the message says how to install one
        print(f"vkbackend demo: {error.context}", file=sys.stderr)
        return 1
    ok = True

    def check(name: str, got: np.ndarray | np.floating, want: np.ndarray | np.floating, rtol: float = 1e-4) -> None:
        nonlocal ok
        good = np.allclose(got, want, rtol=rtol, atol=1e-3)
        ok &= bool(good)
        print(f"  {name:<34} {'ok' if good else 'WRONG'}")

    # A dependent chain: y = a*x + y, 200 times on the same buffer, each launch reading what the last wrote.
    gpu = dev.info.device_type in ("discrete_gpu", "integrated_gpu")
    n = n or (1 << 24 if gpu else 1 << 18)
    steps, a = 200, 0.5
    x = rng.random(n, dtype=np.float32)
    y = rng.random(n, dtype=np.float32)
    bx, by = pool.allocate(x.nbytes), pool.allocate(y.nbytes)
    t0 = time.perf_counter()
    pool.host_to_pool(x, bx)
    pool.host_to_pool(y, by)
    t_up = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(steps):
        dev.launch(saxpy, [bx, by], [n, a], ((n + 255) // 256, 1, 1))
    dev.sync()
    t_chain = time.perf_counter() - t0
    got = np.empty_like(y)
    t0 = time.perf_counter()
    pool.pool_to_host(by, got)
    t_down = time.perf_counter() - t0
    check(f"saxpy chain ({steps} launches)", got, y + steps * np.float32(a) * x)

    # A reduction with shared memory, two levels.
    groups = (n + 255) // 256
    bpart, btotal = pool.allocate(groups * 4), pool.allocate(4 * ((groups + 255) // 256))
    dev.launch(reduce, [bx, bpart], [n], (groups, 1, 1))
    dev.launch(reduce, [bpart, btotal], [groups], ((groups + 255) // 256, 1, 1))
    totals = np.empty((groups + 255) // 256, dtype=np.float32)
    pool.pool_to_host(btotal, totals)
    check("reduction (shared memory)", totals.sum(dtype=np.float64), x.sum(dtype=np.float64), rtol=1e-4)

    # A tiled matmul.
    m = 1024 if gpu else 128
    A, B = rng.random((m, m), dtype=np.float32), rng.random((m, m), dtype=np.float32)
    ba, bb, bc = pool.allocate(A.nbytes), pool.allocate(B.nbytes), pool.allocate(A.nbytes)
    pool.host_to_pool(A, ba)
    pool.host_to_pool(B, bb)
    ns = dev.launch_timed(matmul, [ba, bb, bc], [m], ((m + 15) // 16, (m + 15) // 16, 1))
    C = np.empty_like(A)
    pool.pool_to_host(bc, C)
    check(f"tiled matmul {m}x{m}", C, A @ B, rtol=1e-3)

    for b in (bx, by, bpart, btotal, ba, bb, bc):
        pool.release(b)
    for p in (saxpy, reduce, matmul):
        dev.release_program(p)
    print(f"  launches/s (dependent chain): {steps / t_chain:,.0f}")
    print(f"  saxpy (3 x {binary(x.nbytes, 'B')} per launch): {quantity(steps * 3 * x.nbytes / t_chain / 1e9, 'GB/s')}")
    print(
        f"  upload: {quantity(2 * x.nbytes / t_up / 1e9, 'GB/s')}   download: "
        f"{quantity(y.nbytes / t_down / 1e9, 'GB/s')}"
    )
    print(f"  matmul GPU time: {quantity(ns / 1e3, 'us')} ({quantity(2 * m**3 / ns, 'GFLOP/s')})")
    print("demo: all results match numpy" if ok else "demo: MISMATCH")
    return 0 if ok else 1


def unwritable_outputs(outputs: dict[str, str | None]) -> list[str]:
    """Why each requested output file (``{option: path}``, None where not asked for) cannot be written, checked before
    a long run rather than after it: a missing directory, a directory in the way, no permission, and for ``--plot``
    no matplotlib."""
    problems = []
    for option, path in outputs.items():
        if path is None:
            continue
        if path == "-":
            problems.append(f"{option} -: {option} writes a file; only --json can go to stdout")
            continue
        target = Path(path)
        parent = target.parent
        if target.is_dir():
            problems.append(f"{option} {path} is a directory")
        elif not parent.is_dir():
            problems.append(f"{option} {path}: the directory {parent} does not exist")
        elif not os.access(target if target.exists() else parent, os.W_OK):
            problems.append(f"{option} {path}: no permission to write there")
        elif option == "--plot":
            try:
                importlib.import_module("matplotlib")
            except ImportError:
                problems.append(f"{option} {path}: the plot needs matplotlib (pip install 'vkbackend[bench]')")
    return problems


def output_stamps(outputs: dict[str, str | None]) -> dict[str, tuple[int, int] | None]:
    """Each requested output file's (mtime in ns, size) before a run, or None where it does not exist yet."""
    stamps: dict[str, tuple[int, int] | None] = {}
    for path in outputs.values():
        if path is not None:
            stamps[path] = (os.stat(path).st_mtime_ns, os.stat(path).st_size) if os.path.isfile(path) else None
    return stamps


def unwritten_outputs(outputs: dict[str, str | None], before: dict[str, tuple[int, int] | None]) -> list[str]:
    """The requested output files that a run did not write: still missing, or as they were (``output_stamps``)."""
    unwritten = []
    for option, path in outputs.items():
        if path is not None and (not os.path.isfile(path) or output_stamps({option: path})[path] == before[path]):
            unwritten.append(f"{option} {path} was not written")
    return unwritten
