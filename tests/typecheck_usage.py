"""Code that uses the whole public API as a user would, with annotations a user would write.

mypy checks it under ``--strict`` (pyproject.toml's ``[tool.mypy]``); ``assert_type`` pins what each call returns, so
a return type that decays to ``Any`` or ``dict`` fails the check. tests/test_typing.py also runs it on the device, so
what it claims holds at run time too.
"""

from __future__ import annotations

import array
from typing import Any

import numpy as np
import numpy.typing as npt
from typing_extensions import assert_type

import vkbackend
from vkbackend import (
    BackendError,
    Buffer,
    BufferBinding,
    CooperativeMatrixShape,
    Device,
    DeviceInfo,
    DeviceLostError,
    DLPackExportError,
    DType,
    DyLibNotFoundError,
    ErrorStatus,
    ExportedMemory,
    GraphVariables,
    GridArg,
    InitializationError,
    InvalidArgumentError,
    InvalidArgumentTypeError,
    KernelCompilationError,
    KernelLaunchError,
    KernelSyncError,
    LaunchGraph,
    MemoryAllocationError,
    MemoryHeap,
    MemoryPool,
    ProgramInfo,
    PushMember,
    VulkanConfig,
    compile_glsl,
    devices,
)
from vkbackend.types import DeviceStats, HostBuffer, PoolStats, Scalar, SupportsDLPack

AXPY = """#version 450
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) buffer Y { float y[]; };
layout(push_constant) uniform P { uint n; float a; } p;
void main() { uint i = gl_GlobalInvocationID.x; if (i < p.n) y[i] += p.a * x[i]; }
"""


def upload(pool: MemoryPool, data: HostBuffer, nbytes: int) -> int:
    """A new buffer holding ``data``."""
    buf = assert_type(pool.allocate(nbytes), int)
    pool.host_to_pool(data, buf)
    return buf


def describe(info: DeviceInfo) -> str:
    heaps = assert_type(info.memory_heaps, tuple[MemoryHeap, ...])
    local = sum(assert_type(heap.size, int) for heap in heaps if assert_type(heap.device_local, bool))
    caps = assert_type(info.dtype_capabilities, dict[DType, frozenset[str]])
    floats = [d for d, ops in caps.items() if assert_type(d.is_float, bool) and "add" in ops]
    assert_type(info.max_local_work_dims, tuple[int, int, int])
    shapes = assert_type(info.cooperative_matrix_shapes, tuple[CooperativeMatrixShape, ...])
    assert all(isinstance(s.m * s.n * s.k, int) and isinstance(s.a_type, str) for s in shapes)
    return f"{info.name} ({info.device_type}): {local} B device-local, {len(floats)} float types, {info.api_version}"


def reflect(dev: Device, prog: int) -> tuple[int, ...]:
    program = assert_type(dev.program_info(prog), ProgramInfo)
    bindings = assert_type(program.buffers, tuple[BufferBinding, ...])
    members = assert_type(program.push_constants, tuple[PushMember, ...])
    return (
        *assert_type(program.local_size, tuple[int, int, int]),
        len(bindings),
        len(members),
        sum(assert_type(m.size, int) for m in members),
    )


def exercise(dev: Device, n: int = 256) -> float:
    """Every public entry point once; returns y[1] after y += 2x, twice, then graph replays of y += 0.5x."""
    pool = assert_type(dev.memory_pool, MemoryPool)
    assert describe(assert_type(dev.info, DeviceInfo))
    spirv = assert_type(compile_glsl(AXPY, {"UNUSED": None}, entry_point="main"), bytes)
    prog = assert_type(dev.compile(spirv), int)
    assert reflect(dev, prog) == (64, 1, 1, 2, 2, 8)
    x = upload(pool, np.arange(n, dtype=np.float32), 4 * n)  # a numpy array, on every Python version
    y = upload(pool, array.array("f", [0.0] * n), 4 * n)
    scalars: list[Scalar] = [n, 2.0]
    dev.launch(prog, [x, y], scalars, (n // 64, 1, 1))
    dev.launch(prog, [x, y], [np.uint32(n), np.float32(2.0)], [GridArg(0)] if n <= 64 else (n // 64,))
    graph = assert_type(dev.graph([(prog, [x, y], [n, 0.5], (n // 64, 1, 1)), None]), LaunchGraph)
    graph.launch()
    graph.set_scalars(0, [n, 0.5], (n // 64, 1, 1))  # the same values: the replay below adds 0.5x again
    assert_type(graph.bind_variables([[(0, 0)]]), GraphVariables).set([n])  # n again
    gpu_ns = assert_type(graph.launch_timed(), int)
    graph.close()
    view = assert_type(pool.view(y, 0, 4 * (n // 2)), int)
    out = bytearray(4 * (n // 2))
    pool.pool_to_host(view, out)
    dev.sync()
    stats = assert_type(dev.stats(), DeviceStats)
    pool_stats = assert_type(pool.stats(), PoolStats)
    assert gpu_ns >= 0 and stats["dispatches"] >= 3 and pool_stats["live_buffers"] >= 3
    assert stats["live_objects"]["devices"] >= 1 and assert_type(pool.free_bytes, int) > 0
    assert assert_type(pool.size_of(view), int) == 2 * n
    for buf in (view, x, y):
        pool.release(buf)
    dev.release_program(prog)
    return float(memoryview(out).cast("f")[1])


def buffers(dev: Device) -> list[float]:
    """Buffers that own their ids: from numpy and DLPack, a view written, read back; closed by ``with`` and close();
    returns [a value the view wrote, a value written as bytes, GPU-computed 2 * x[3] + 1]."""
    data = np.arange(64, dtype=np.float32)
    source: SupportsDLPack = data
    with Buffer.from_numpy(dev, data) as buf, Buffer.from_dlpack(dev, source) as copy, Buffer(dev, 256) as out:
        assert assert_type(buf.nbytes, int) == 256 and assert_type(buf.device, Device) is dev
        view = assert_type(buf.view(0, 128), Buffer)
        view.write(np.ones(4, np.float32), offset=16)
        view.close()
        assert assert_type(view.closed, bool)
        copy.write(np.float32(5).tobytes())
        prog = dev.compile(compile_glsl(AXPY))
        out.write(np.ones(64, np.float32))
        dev.launch(prog, [copy.id, out.id], [64, 2.0], (1, 1, 1))  # out += 2 * copy
        grid = assert_type(buf.to_numpy(np.float32, (8, 8)), npt.NDArray[Any])
        first = copy.to_numpy(DType.float32, 1)
        result = out.to_numpy("float32", offset=12)
        assert assert_type(buf.__dlpack_device__(), tuple[int, int])[0] == 7
        host = np.from_dlpack(buf, device="cpu")  # a host copy, on request
        dev.release_program(prog)
    try:
        np.from_dlpack(buf)
    except DLPackExportError as error:  # closed, and no in-place export anyway
        assert isinstance(error, BufferError) and host.nbytes == 256
    return [float(grid[0, 4]), float(first[0]), float(result[0])]


def shared(dev: Device) -> list[int]:
    """A buffer exported through a file descriptor and imported again; returns what the import reads back."""
    pool = dev.memory_pool
    with assert_type(pool.allocate_exportable(16), ExportedMemory) as exported:
        assert assert_type(exported.size, int) >= assert_type(exported.nbytes, int) == 16
        assert assert_type(exported.device_uuid, bytes) and assert_type(exported.memory_type_flags, int)
        pool.host_to_pool(np.arange(4, dtype=np.int32), assert_type(exported.buffer, int))
        imported = assert_type(
            pool.import_memory(
                assert_type(exported.fd, int),
                exported.size,
                nbytes=16,
                memory_type_index=exported.memory_type_index,
                dedicated=True,
            ),
            int,
        )
        out = np.empty(4, np.int32)
        pool.pool_to_host(imported, out)
        for buf in (imported, exported.buffer):
            pool.release(buf)
    assert assert_type(exported.closed, bool)
    return [int(v) for v in out]


def errors(dev: Device) -> list[str]:
    """Errors carry a status and are caught by their subclass or the built-in type they also are."""
    seen: list[str] = []
    try:
        assert_type(devices(VulkanConfig(device_ids=[1 << 20])), list[Device])
    except InvalidArgumentError as error:
        status = assert_type(error.status, ErrorStatus)
        seen.append(f"{status.value}: {assert_type(error.context, str)}")
    try:
        dev.memory_pool.allocate(1 << 62)
    except MemoryError as error:
        seen.append(type(error).__name__)
    try:
        compile_glsl(b"not a str")  # type: ignore[arg-type]  # the mistake this checks at run time
    except TypeError as error:
        seen.append(type(error).__name__)
    families: tuple[type[BackendError], ...] = (
        DyLibNotFoundError,
        InitializationError,
        MemoryAllocationError,
        KernelCompilationError,
        KernelLaunchError,
        KernelSyncError,
        DeviceLostError,
        InvalidArgumentTypeError,
    )
    seen += [BackendError(ErrorStatus.KernelSync, "x").__class__.__name__, str(len(families))]
    return seen


VERSION = assert_type(vkbackend.__version__, str)
