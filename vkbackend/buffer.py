"""Buffer: one device buffer as a Python object that owns its reference, and DLPack for host data.

A framework's allocator uses the id API (``MemoryPool.allocate``/``view``/``release``); a Buffer is the same buffer for
code that would rather have Python manage the reference. It keeps the device and the id and nothing else: size,
contents and lifetime stay the pool's, so Buffers and the id API mix (``buf.id`` is what ``Device.launch`` binds).
"""
from __future__ import annotations

import logging
import weakref
from collections.abc import Sequence
from typing import Any, Union

import numpy as np
import numpy.typing as npt

from .device import Device
from .dtypes import DType
from .errors import (BackendError, DLPackExportError, ErrorStatus, InvalidArgumentError, InvalidArgumentTypeError,
                     index_argument)
from .types import HostBuffer, SupportsDLPack

log = logging.getLogger("vkbackend")

KDL_CPU, KDL_VULKAN = 1, 7   # DLPack's DLDeviceType codes for host memory and for Vulkan
_DLPACK_DEVICES = {2: "CUDA", 3: "CUDA host", 4: "OpenCL", 7: "Vulkan", 8: "Metal", 10: "ROCm", 11: "ROCm host",
                   13: "CUDA managed", 14: "oneAPI", 15: "WebGPU"}

Shape = Union[int, Sequence[int]]


class Buffer:
    """A device buffer that owns one reference to its id: ``with`` or :meth:`close` releases it, and so does a
    finalizer when neither ran. Made with ``Buffer(device, nbytes)``, :meth:`from_numpy` or :meth:`from_dlpack`.

    Every method is as thread-safe as the pool it calls, but closing a Buffer while another thread still uses it
    is a use after close for that thread. A Buffer dropped without ``close`` is released at once, or, when the cyclic
    garbage collector is what finds it, at the pool's next call (``MemoryPool.release_from_finalizer``). In a forked
    child closing does nothing
    (the buffer is the parent's); at interpreter exit the devices close and free every buffer, so no finalizer runs.

    DLPack: a Buffer imports anything on the CPU (:meth:`from_dlpack` uploads a copy). It cannot be exported without
    a copy: its bytes live in device-local Vulkan memory, which has no host pointer, and the common consumers (numpy,
    PyTorch, JAX, CuPy) import nothing of DLPack's Vulkan device type. So ``__dlpack_device__`` tells the truth,
    ``(7, device.index)`` (kDLVulkan), and ``__dlpack__`` makes a host copy only when the consumer asks for one on the
    CPU (``numpy.from_dlpack(buf, device="cpu")``: the array API 2023.12 argument ``dl_device=(1, 0)``); any other
    request raises :class:`DLPackExportError`, a ``BufferError``. A consumer that names no device expects shared
    memory, which a copy is not. For typed data, ``buf.to_numpy(dtype, shape)`` is the host copy, and it exports
    through DLPack itself (``torch.from_dlpack(buf.to_numpy(np.float32))``).
    """

    __slots__ = ("_device", "_id", "_finalizer", "__weakref__")

    def __init__(self, device: Device, nbytes: int) -> None:
        """A new buffer of ``nbytes`` bytes on ``device``; its contents are undefined until written."""
        if not isinstance(device, Device):
            raise InvalidArgumentTypeError(ErrorStatus.InvalidArgument,
                                           f"a Buffer needs a vkbackend.Device (vkbackend.devices()[i]), "
                                           f"got {type(device).__name__}")
        self._own(device, device.memory_pool.allocate(nbytes))

    def _own(self, device: Device, buf_id: int) -> None:
        self._device, self._id = device, buf_id
        self._finalizer = weakref.finalize(self, device.memory_pool.release_from_finalizer, buf_id)
        self._finalizer.atexit = False  # at exit the devices close, which frees every buffer at once

    @classmethod
    def from_numpy(cls, device: Device, array: npt.NDArray[Any]) -> Buffer:
        """A new buffer holding ``array``'s bytes in C order (a non-contiguous array is laid out in C order first).

        Returns once the array has been read; ``to_numpy(array.dtype, array.shape)`` reads it back.
        """
        if not isinstance(array, np.ndarray):
            raise InvalidArgumentTypeError(ErrorStatus.InvalidArgument,
                                           f"Buffer.from_numpy takes a numpy array, got {type(array).__name__}; use "
                                           "numpy.asarray first, or Buffer.from_dlpack for another library's tensor")
        if not array.nbytes:
            raise BackendError(ErrorStatus.InvalidArgument,
                               f"Buffer.from_numpy: the array has no bytes (shape {array.shape}); a device buffer "
                               "needs at least one")
        buf = cls(device, array.nbytes)
        try:
            buf.write(array)
        except BaseException:
            buf.close()
            raise
        return buf

    @classmethod
    def from_dlpack(cls, device: Device, obj: SupportsDLPack) -> Buffer:
        """A new buffer holding a copy of a DLPack producer's data on the CPU (a numpy array, a PyTorch CPU tensor),
        as :meth:`from_numpy` would hold it. Data on another device raises ``InvalidArgument``: copy it to the host
        first (``tensor.cpu()``)."""
        if not hasattr(obj, "__dlpack__"):
            raise InvalidArgumentTypeError(ErrorStatus.InvalidArgument,
                                           f"Buffer.from_dlpack takes an object with __dlpack__ (a numpy array, a "
                                           f"PyTorch tensor), got {type(obj).__name__}")
        if hasattr(obj, "__dlpack_device__"):
            kind, index = obj.__dlpack_device__()
            if kind != KDL_CPU:
                raise BackendError(ErrorStatus.InvalidArgument,
                                   f"Buffer.from_dlpack: the {type(obj).__name__} lives on DLPack device "
                                   f"({int(kind)}, {index}) ({_DLPACK_DEVICES.get(int(kind), 'not the CPU')}); only "
                                   "host (CPU) data can be imported, so copy it to the host first (PyTorch: "
                                   "tensor.cpu())")
        try:
            host = np.from_dlpack(obj)
        except (BufferError, RuntimeError, TypeError, ValueError) as error:  # what numpy raises for what it refuses
            raise BackendError(ErrorStatus.InvalidArgument,
                               f"Buffer.from_dlpack: numpy cannot import the {type(obj).__name__}: {error}") from error
        return cls.from_numpy(device, host)

    @property
    def id(self) -> int:
        """The buffer id, for the id API (``Device.launch``, ``MemoryPool``), while the Buffer is open."""
        if not self._finalizer.alive:
            raise BackendError(ErrorStatus.InvalidArgument,
                               f"Buffer {self._id} is closed: its reference was released. Keep it open (inside its "
                               "with block) while it is used, or make a new one")
        return self._id

    @property
    def device(self) -> Device:
        """The device whose memory holds the buffer."""
        return self._device

    @property
    def nbytes(self) -> int:
        """The size in bytes."""
        return self._device.memory_pool.size_of(self.id)

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran (or the finalizer did)."""
        return not self._finalizer.alive

    def write(self, data: HostBuffer, offset: int = 0) -> None:
        """Copy host data (a numpy array, laid out in C order first, or any buffer-protocol object) into the buffer
        at byte ``offset``. Returns once ``data`` has been read; the copy is ordered after earlier launches."""
        if isinstance(data, np.ndarray):
            _numpy_dtype(data.dtype, "Buffer.write")
            data = np.ascontiguousarray(data)
        self._device.memory_pool.host_to_pool(data, self.id, offset)

    def to_numpy(self, dtype: npt.DTypeLike | DType = "uint8", shape: Shape | None = None,
                 offset: int = 0) -> npt.NDArray[Any]:
        """A new host array of ``dtype`` and ``shape`` read from byte ``offset``: a sync point (it waits for the
        launches queued before it and raises the first asynchronous error).

        Without a shape it reads every byte from ``offset`` on, as a 1-D array (the bytes must be whole elements).
        ``dtype`` is anything ``numpy.dtype`` takes, or a :class:`DType`.
        """
        dt = _numpy_dtype(dtype, "Buffer.to_numpy")
        buf_id, pool = self.id, self._device.memory_pool
        if shape is None:
            nbytes = pool.size_of(buf_id)
            offset = index_argument(offset, "Buffer.to_numpy: the offset")
            if not 0 <= offset <= nbytes:
                raise BackendError(ErrorStatus.InvalidArgument,
                                   f"Buffer.to_numpy: offset {offset!r} is not a byte offset in 0..{nbytes}")
            shape, rest = divmod(nbytes - offset, dt.itemsize)
            if rest:
                raise BackendError(ErrorStatus.InvalidArgument,
                                   f"Buffer.to_numpy: the {nbytes - offset} bytes from offset {offset} are not whole "
                                   f"{dt} elements of {dt.itemsize} bytes; pass a shape")
        try:
            out = np.empty(shape, dtype=dt)
        except (TypeError, ValueError) as error:
            raise BackendError(ErrorStatus.InvalidArgument, f"Buffer.to_numpy: bad shape {shape!r}: {error}") from None
        pool.pool_to_host(buf_id, out, offset)
        return out

    def view(self, offset: int, nbytes: int) -> Buffer:
        """A Buffer for ``nbytes`` bytes of this one from byte ``offset``, a multiple of
        ``device.info.min_storage_buffer_offset_alignment``. It holds a reference on this buffer's memory, so it stays
        valid after this Buffer is closed; close it like any other."""
        view = object.__new__(type(self))
        view._own(self._device, self._device.memory_pool.view(self.id, offset, nbytes))
        return view

    def close(self) -> None:
        """Release the Buffer's reference; idempotent. The memory is freed once no queued GPU work uses it (never
        blocks); a closed device has freed it already."""
        if self._finalizer.detach() is None:  # closed already, or being finalized
            return
        try:
            self._device.memory_pool.release(self._id)
        except InvalidArgumentError:
            if not self._device.closed:  # a closed device freed every buffer when it closed
                raise

    def __enter__(self) -> Buffer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<vkbackend.Buffer {self._id} on {self._device.info.name}{' (closed)' if self.closed else ''}>"

    def __dlpack_device__(self) -> tuple[int, int]:
        """``(7, device.index)``: DLPack's kDLVulkan, where the bytes are (see the class's notes on DLPack)."""
        return KDL_VULKAN, self._device.index

    def __dlpack__(self, *, stream: object = None, max_version: tuple[int, int] | None = None,
                   dl_device: tuple[int, int] | None = None, copy: bool | None = None) -> Any:
        """A DLPack capsule of a host copy of every byte (uint8), only for a consumer that asks for the CPU
        (``dl_device=(1, 0)``); a sync point. Anything else raises :class:`DLPackExportError` (a ``BufferError``)."""
        if dl_device is None or tuple(dl_device) != (KDL_CPU, 0):
            where = "in place" if dl_device is None else f"to DLPack device {tuple(dl_device)}"
            raise DLPackExportError(ErrorStatus.InvalidArgument,
                                    f"Buffer {self._id} cannot be exported through DLPack {where}: it is device-local "
                                    "Vulkan memory, which has no host pointer; ask for a host copy "
                                    "(numpy.from_dlpack(buf, device='cpu')) or read it with buf.to_numpy(dtype, shape)")
        if copy is False:
            raise DLPackExportError(ErrorStatus.InvalidArgument,
                                    "a host export of a Buffer is always a copy (its memory is device-local), and "
                                    "copy=False forbids one")
        if stream is not None:
            raise DLPackExportError(ErrorStatus.InvalidArgument,
                                    f"a host (CPU) DLPack export takes no stream, got {stream!r}")
        # The unversioned capsule whatever max_version allows: the protocol lets a producer answer with an older one.
        return self.to_numpy().__dlpack__()


def _numpy_dtype(dtype: npt.DTypeLike | DType, what: str) -> np.dtype[Any]:
    """The numpy dtype, refusing those that are not plain data: device bytes are never Python objects."""
    try:
        dt = np.dtype(dtype.value[1] if isinstance(dtype, DType) else dtype)
    except TypeError as error:
        raise InvalidArgumentTypeError(ErrorStatus.InvalidArgument,
                                       f"{what}: {dtype!r} is not a numpy dtype: {error}") from None
    if dt.hasobject or not dt.itemsize:
        raise InvalidArgumentTypeError(ErrorStatus.InvalidArgument,
                                       f"{what}: dtype {dt} is not plain data (it holds Python objects or has no "
                                       "size); use a numeric dtype")
    return dt
