"""Zero-copy sharing with CUDA: a vkbackend buffer as a CUDA device pointer, a PyTorch tensor or a CuPy array.

**Not yet run on a GPU.** It follows NVIDIA's documented driver API, and on a machine without CUDA it has only run
against a stand-in for libcuda (tests/test_interop_cuda.py), which checks the bookkeeping, not CUDA. Until this has
passed on an NVIDIA GPU (with its Vulkan driver, and PyTorch with CUDA), treat the module as untested::

    python3 scripts/cuda-interop-check.py --gib 1

shares a 1 GiB buffer both ways (vkbackend writes and PyTorch checks, PyTorch writes and vkbackend checks, all on the
GPU), checks that the tensor's pointer is the mapped memory, times each step and prints a JSON line
(docs/plugin-guide.md, "Zero-copy with CUDA").

How: ``pool.allocate_exportable(n)`` gives a buffer in dedicated, exportable Vulkan memory and its opaque file
descriptor. :func:`import_to_cuda` finds the CUDA device whose UUID is the Vulkan device's, imports a duplicate of the
descriptor (``cuImportExternalMemory``, which takes it) and maps the memory (``cuExternalMemoryGetMappedBuffer``) in
that device's primary context, the one PyTorch and CuPy use. The :class:`CudaMemory` it returns makes
:class:`CudaArray` views that have ``__cuda_array_interface__``, which ``torch.as_tensor`` and ``cupy.asarray`` take
without a copy (:func:`as_torch`, :func:`as_cupy`). libcuda.so.1, the NVIDIA driver's library, is opened on the first
call; torch and cupy are imported only by their functions.

Lifetimes: a CudaMemory holds a reference on the Vulkan buffer (``pool.retain``), and each CudaArray, so each tensor
or array made from one, holds its CudaMemory. When the last of them goes, the mapping, the CUDA import and that
reference go too; ``pool.release(exported.buffer)`` and ``exported.close()`` may come right after the import.

Ordering: nothing orders CUDA's work with vkbackend's (no shared semaphores). Before CUDA reads what a launch wrote,
call ``device.sync()``; before a launch reads what CUDA wrote, synchronize CUDA (``torch.cuda.synchronize()``,
``cupy.cuda.Device().synchronize()``).
"""

from __future__ import annotations

import ctypes
import logging
import os
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Union

import numpy as np
import numpy.typing as npt

from ..errors import BackendError, ErrorStatus, InvalidArgumentTypeError
from ..memory.external import ExportedMemory
from .cuda_driver import CudaDriver, device_with_uuid, driver
from .dlpack import not_in_numpy, numpy_name

if TYPE_CHECKING:
    import cupy
    import torch

__all__ = ["CudaArray", "CudaMemory", "as_cupy", "as_torch", "import_to_cuda"]

log = logging.getLogger("vkbackend")

CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD = 1
CUDA_EXTERNAL_MEMORY_DEDICATED = 0x1

Shape = Union[int, Sequence[int], None]


class _HandleUnion(ctypes.Union):
    """The handle union of CUDA_EXTERNAL_MEMORY_HANDLE_DESC: an fd, or Windows' (handle, name) pair, its largest."""

    _fields_ = [("fd", ctypes.c_int), ("win32", ctypes.c_void_p * 2)]


class _HandleDesc(ctypes.Structure):
    """CUDA_EXTERNAL_MEMORY_HANDLE_DESC (cuda.h)."""

    _fields_ = [
        ("type", ctypes.c_int),
        ("handle", _HandleUnion),
        ("size", ctypes.c_ulonglong),
        ("flags", ctypes.c_uint),
        ("reserved", ctypes.c_uint * 16),
    ]


class _BufferDesc(ctypes.Structure):
    """CUDA_EXTERNAL_MEMORY_BUFFER_DESC (cuda.h)."""

    _fields_ = [
        ("offset", ctypes.c_ulonglong),
        ("size", ctypes.c_ulonglong),
        ("flags", ctypes.c_uint),
        ("reserved", ctypes.c_uint * 16),
    ]


class CudaMemory:
    """A Vulkan buffer's memory mapped into CUDA: ``ptr`` (a CUdeviceptr) to its ``nbytes`` bytes on CUDA device
    ``device`` (an ordinal, as ``torch.device("cuda", device)`` takes it). Made by :func:`import_to_cuda`.

    It is unmapped once it and every CudaArray of it are gone, or by :meth:`close`.
    """

    __slots__ = ("ptr", "nbytes", "device", "_finalizer", "__weakref__")

    def __init__(self, ptr: int, nbytes: int, device: int, *unmap: Any) -> None:
        """What :func:`import_to_cuda` mapped; ``unmap``: the arguments that undo it, at the end."""
        self.ptr, self.nbytes, self.device = ptr, nbytes, device
        self._finalizer = weakref.finalize(self, _unmap, *unmap)
        self._finalizer.atexit = False  # at exit the driver and the Vulkan device free everything themselves

    def array(self, dtype: npt.DTypeLike = "uint8", shape: Shape = None) -> CudaArray:
        """A view of the memory as a C-ordered array of ``dtype`` (anything ``numpy.dtype`` takes) and ``shape``
        (default: every whole element), for ``torch.as_tensor``, ``cupy.asarray`` or any CUDA array consumer."""
        if not self._finalizer.alive:
            raise BackendError(ErrorStatus.InvalidArgument, "this CudaMemory was closed; import the buffer again")
        return CudaArray(self, dtype, shape)

    def close(self) -> None:
        """Unmap now (idempotent); only when no array, tensor or kernel still uses the memory."""
        self._finalizer()


class CudaArray:
    """A typed view of a :class:`CudaMemory` with ``__cuda_array_interface__`` (version 3); it keeps the memory
    mapped while it lives, so a tensor or array made from it does too."""

    __slots__ = ("memory", "shape", "dtype")

    def __init__(self, memory: CudaMemory, dtype: npt.DTypeLike, shape: Shape) -> None:
        """The view of ``memory`` that :meth:`CudaMemory.array` describes."""
        try:
            dt = np.dtype(dtype)
        except TypeError as error:
            missing = not_in_numpy(
                "CudaMemory.array", dtype, "cuda.as_torch(exported, '{ints}', shape).view(torch.{name})"
            )  # bfloat16, float8: as integers, then a view
            if missing is not None:
                raise missing from None
            named = numpy_name(dtype)  # torch.float32 and the like: numpy wants its own name
            hint = f"; pass numpy's name for it, {named!r}" if named else ""
            raise InvalidArgumentTypeError(
                ErrorStatus.InvalidArgument, f"{dtype!r} is not a numpy dtype: {error}{hint}"
            ) from None
        if dt.hasobject or not dt.itemsize or dt.fields is not None:
            raise InvalidArgumentTypeError(ErrorStatus.InvalidArgument, f"dtype {dt} is not a plain number type")
        if shape is None:
            shape = (memory.nbytes // dt.itemsize,)
        dims = (shape,) if isinstance(shape, int) else tuple(shape)
        if (
            any(isinstance(d, bool) or not isinstance(d, int) or d < 0 for d in dims)
            or int(np.prod(dims, dtype=np.int64)) * dt.itemsize > memory.nbytes
        ):
            raise BackendError(
                ErrorStatus.InvalidArgument,
                f"shape {shape!r} of {dt} does not fit the {memory.nbytes} bytes of the memory",
            )
        self.memory, self.shape, self.dtype = memory, dims, dt

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        """The CUDA array interface (version 3): shape, type, the device pointer; C order, no stream to wait on."""
        return {
            "shape": self.shape,
            "typestr": self.dtype.str,
            "data": (self.memory.ptr, False),
            "strides": None,
            "version": 3,
        }


def import_to_cuda(exported: ExportedMemory) -> CudaMemory:
    """Map an exported buffer (``MemoryPool.allocate_exportable``) into CUDA on the same GPU; see the module's notes
    on lifetimes and ordering. Raises ``DyLibNotFoundError`` without the NVIDIA driver, ``InvalidArgumentError``
    when no CUDA device is the Vulkan device."""
    if not isinstance(exported, ExportedMemory):
        raise InvalidArgumentTypeError(
            ErrorStatus.InvalidArgument,
            f"import_to_cuda takes what MemoryPool.allocate_exportable returns, got {type(exported).__name__}",
        )
    pool, buffer, fd = exported.pool, exported.buffer, exported.fd
    drv = driver()
    ordinal, device = device_with_uuid(drv, exported.device_uuid)
    pool.retain(buffer)  # raises for a released buffer, whose memory may be gone
    context = ctypes.c_void_p()
    memory, ptr = ctypes.c_void_p(), ctypes.c_uint64()
    try:
        drv.call("cuDevicePrimaryCtxRetain", ctypes.byref(context), device)
    except BaseException:
        pool.release(buffer)
        raise
    try:
        with drv.current(context):
            desc = _HandleDesc(
                type=CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD, size=exported.size, flags=CUDA_EXTERNAL_MEMORY_DEDICATED
            )  # vkbackend's exports are always dedicated
            desc.handle.fd = os.dup(fd)
            try:
                drv.call("cuImportExternalMemory", ctypes.byref(memory), ctypes.byref(desc))
            except BaseException:
                os.close(desc.handle.fd)  # CUDA takes the descriptor only when the import succeeds
                raise
            try:
                drv.call(
                    "cuExternalMemoryGetMappedBuffer",
                    ctypes.byref(ptr),
                    memory,
                    ctypes.byref(_BufferDesc(offset=0, size=exported.nbytes, flags=0)),
                )
            except BaseException:
                drv.lib.cuDestroyExternalMemory(memory)
                raise
    except BaseException:
        drv.lib.cuDevicePrimaryCtxRelease_v2(device)
        pool.release(buffer)
        raise
    return CudaMemory(int(ptr.value or 0), exported.nbytes, ordinal, drv, device, context, memory, ptr, pool, buffer)


def as_torch(exported: ExportedMemory, dtype: npt.DTypeLike = "float32", shape: Shape = None) -> torch.Tensor:
    """A PyTorch CUDA tensor on the exported buffer's memory, no copy (``torch.as_tensor`` of
    ``import_to_cuda(exported).array(dtype, shape)``). dtype is numpy's (for bfloat16, ``"int16"`` then
    ``.view(torch.bfloat16)``)."""
    import torch

    # No device argument: torch places a __cuda_array_interface__ tensor where its pointer is, and a device that
    # differed (another numbering of the GPUs) would make as_tensor copy.
    return torch.as_tensor(import_to_cuda(exported).array(dtype, shape))


def as_cupy(exported: ExportedMemory, dtype: npt.DTypeLike = "float32", shape: Shape = None) -> cupy.ndarray:
    """A CuPy array on the exported buffer's memory, no copy (``cupy.asarray`` of
    ``import_to_cuda(exported).array(dtype, shape)``)."""
    import cupy

    mapped = import_to_cuda(exported)
    with cupy.cuda.Device(mapped.device):
        return cupy.asarray(mapped.array(dtype, shape))


def _unmap(
    drv: CudaDriver,
    device: ctypes.c_int,
    context: ctypes.c_void_p,
    memory: ctypes.c_void_p,
    ptr: ctypes.c_uint64,
    pool: Any,
    buffer: int,
) -> None:
    """The finalizer of a CudaMemory: unmap, drop the import and the context, release the Vulkan buffer."""
    try:
        with drv.current(context):
            drv.call("cuCtxSynchronize")  # kernels queued on the memory may still run when the last tensor goes
            drv.call("cuMemFree_v2", ptr)
            drv.call("cuDestroyExternalMemory", memory)
        drv.call("cuDevicePrimaryCtxRelease_v2", device)
    except BackendError as error:  # a finalizer's error belongs to no caller
        log.warning("unmapping Vulkan memory from CUDA failed: %s", error)
    pool.release_from_finalizer(buffer)
