"""Buffer: one device buffer as a Python object that owns its reference, and DLPack for host data.

A framework's allocator uses the id API (``MemoryPool.allocate``/``view``/``release``); a Buffer is the same buffer for
code that would rather have Python manage the reference. It keeps the device, the id, and the dtype and shape its bytes
are read back as: size, contents and lifetime stay the pool's, so Buffers and the id API mix (``buf.id`` is what
``Device.launch`` binds).
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
from .errors import (
    BackendError,
    DLPackExportError,
    ErrorStatus,
    InvalidArgumentError,
    InvalidArgumentTypeError,
    index_argument,
)
from .ids import number
from .interop.dlpack import NOT_IN_NUMPY, not_in_numpy, numpy_name, producer_dtype, what_to_do
from .types import HostBuffer, SupportsDLPack

log = logging.getLogger("vkbackend")

KDL_CPU, KDL_VULKAN = 1, 7  # DLPack's DLDeviceType codes for host memory and for Vulkan
_DLPACK_DEVICES = {
    2: "CUDA",
    3: "CUDA host",
    4: "OpenCL",
    7: "Vulkan",
    8: "Metal",
    10: "ROCm",
    11: "ROCm host",
    13: "CUDA managed",
    14: "oneAPI",
    15: "WebGPU",
}

Shape = Union[int, Sequence[int]]


class Buffer:
    """A device buffer that owns one reference to its id: ``with`` or :meth:`close` releases it, and so does a
    finalizer when neither ran. Made with ``Buffer(device, nbytes)``, ``Buffer(device, shape=..., dtype=...)``,
    :meth:`from_numpy` or :meth:`from_dlpack`.

    It has a :attr:`dtype` and a :attr:`shape`: those of the array it was made from, or the caller's, or bytes
    (``uint8``, one per byte) by default. They say how its bytes read back (:meth:`to_numpy`, ``numpy.asarray(buf)``,
    DLPack); kernels see bytes whatever they are.

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
    memory, which a copy is not. ``device=`` needs numpy 2.1; on every numpy, ``numpy.asarray(buf)`` and
    ``buf.to_numpy()`` make the same host copy, which exports through DLPack itself
    (``torch.from_dlpack(numpy.asarray(buf))``).
    """

    __slots__ = ("_device", "_id", "_dtype", "_shape", "_finalizer", "__weakref__")

    def __init__(
        self,
        device: Device,
        nbytes: int | None = None,
        *,
        dtype: npt.DTypeLike | DType = "uint8",
        shape: Shape | None = None,
    ) -> None:
        """A new buffer on ``device`` of ``nbytes`` bytes, or of ``shape`` elements of ``dtype`` (give either, or
        both when they agree); its contents are undefined until written. Without a shape it is 1-D: every whole
        element of its bytes."""
        if not isinstance(device, Device):
            raise InvalidArgumentTypeError(
                ErrorStatus.InvalidArgument,
                f"a Buffer needs a vkbackend.Device (vkbackend.devices()[i]), got {type(device).__name__}",
            )
        dt, dims, nbytes = _layout(nbytes, dtype, shape, "Buffer")
        self._own(device, device.memory_pool.allocate(nbytes), dt, dims)

    def _own(self, device: Device, buf_id: int, dtype: np.dtype[Any], shape: tuple[int, ...]) -> None:
        self._device, self._id, self._dtype, self._shape = device, buf_id, dtype, shape
        self._finalizer = weakref.finalize(self, device.memory_pool.release_from_finalizer, buf_id)
        self._finalizer.atexit = False  # at exit the devices close, which frees every buffer at once

    @classmethod
    def from_numpy(cls, device: Device, array: npt.NDArray[Any]) -> Buffer:
        """A new buffer holding ``array``'s bytes in C order (a non-contiguous array is laid out in C order first),
        with its dtype and shape.

        Returns once the array has been read; ``to_numpy()`` (or ``numpy.asarray(buf)``) reads it back.
        """
        if not isinstance(array, np.ndarray):
            raise InvalidArgumentTypeError(
                ErrorStatus.InvalidArgument,
                f"Buffer.from_numpy takes a numpy array, got {type(array).__name__}; use "
                "numpy.asarray first, or Buffer.from_dlpack for another library's tensor",
            )
        if not array.nbytes:
            raise BackendError(
                ErrorStatus.InvalidArgument,
                f"Buffer.from_numpy: the array has no bytes (shape {array.shape}); a device buffer needs at least one",
            )
        buf = cls(device, array.nbytes, dtype=array.dtype, shape=array.shape)
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
        first (``tensor.cpu()``). A type numpy lacks (bfloat16, the float8s) raises ``InvalidArgumentTypeError``
        saying how to move its bytes as integers of its width."""
        if isinstance(obj, np.ndarray):  # host data already, and numpy before 1.25 exports no bool through DLPack
            return cls.from_numpy(device, obj)
        if not hasattr(obj, "__dlpack__"):
            raise InvalidArgumentTypeError(
                ErrorStatus.InvalidArgument,
                f"Buffer.from_dlpack takes an object with __dlpack__ (a numpy array, a "
                f"PyTorch tensor), got {type(obj).__name__}",
            )
        if hasattr(obj, "__dlpack_device__"):
            kind, index = obj.__dlpack_device__()
            if kind != KDL_CPU:
                raise BackendError(
                    ErrorStatus.InvalidArgument,
                    f"Buffer.from_dlpack: the {type(obj).__name__} lives on DLPack device "
                    f"({int(kind)}, {index}) ({_DLPACK_DEVICES.get(int(kind), 'not the CPU')}); only "
                    "host (CPU) data can be imported, so copy it to the host first (PyTorch: "
                    "tensor.cpu())",
                )
        try:
            host = np.from_dlpack(obj)
        except (BufferError, RuntimeError, TypeError, ValueError) as error:  # what numpy raises for what it refuses
            holds = producer_dtype(obj)  # numpy's message ("Unsupported dtype") does not say which type it met
            if holds in NOT_IN_NUMPY:
                raise InvalidArgumentTypeError(
                    ErrorStatus.InvalidArgument,
                    f"Buffer.from_dlpack: the {type(obj).__name__} holds {holds}: {what_to_do(holds)}",
                ) from error
            elements = f" (its elements: {holds})" if holds else ""
            raise BackendError(
                ErrorStatus.InvalidArgument,
                f"Buffer.from_dlpack: numpy cannot import the {type(obj).__name__}{elements}: {error}",
            ) from error
        return cls.from_numpy(device, host)

    @property
    def id(self) -> int:
        """The buffer id, for the id API (``Device.launch``, ``MemoryPool``), while the Buffer is open."""
        if not self._finalizer.alive:
            raise BackendError(
                ErrorStatus.InvalidArgument,
                f"{self._name()} is closed: its reference was released. Keep it open (inside its "
                "with block) while it is used, or make a new one",
            )
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
    def dtype(self) -> np.dtype[Any]:
        """The numpy dtype its bytes read back as (``uint8`` unless it was made with another)."""
        return self._dtype

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape its bytes read back as, in C order: ``dtype.itemsize`` times its elements is :attr:`nbytes`."""
        return self._shape

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

    def to_numpy(
        self, dtype: npt.DTypeLike | DType | None = None, shape: Shape | None = None, offset: int = 0
    ) -> npt.NDArray[Any]:
        """A new host array of ``dtype`` and ``shape`` read from byte ``offset``: a sync point (it waits for the
        launches queued before it and raises the first asynchronous error).

        With no arguments it is the Buffer's own :attr:`dtype` and :attr:`shape` (``numpy.asarray(buf)`` is the same).
        Otherwise, without a shape it reads every byte from ``offset`` on, as a 1-D array (the bytes must be whole
        elements). ``dtype`` is anything ``numpy.dtype`` takes, or a :class:`DType`; None is the Buffer's.
        """
        dt = self._dtype if dtype is None else _numpy_dtype(dtype, "Buffer.to_numpy")
        buf_id, pool = self.id, self._device.memory_pool
        if shape is None and dtype is None and offset == 0:
            shape = self._shape
        elif shape is None:
            nbytes = pool.size_of(buf_id)
            offset = index_argument(offset, "Buffer.to_numpy: the offset")
            if not 0 <= offset <= nbytes:
                raise BackendError(
                    ErrorStatus.InvalidArgument,
                    f"Buffer.to_numpy: offset {offset!r} is not a byte offset in 0..{nbytes}",
                )
            shape, rest = divmod(nbytes - offset, dt.itemsize)
            if rest:
                raise BackendError(
                    ErrorStatus.InvalidArgument,
                    f"Buffer.to_numpy: the {nbytes - offset} bytes from offset {offset} are not whole "
                    f"{dt} elements of {dt.itemsize} bytes; pass a shape",
                )
        try:
            out = np.empty(shape, dtype=dt)
        except (TypeError, ValueError) as error:
            raise BackendError(ErrorStatus.InvalidArgument, f"Buffer.to_numpy: bad shape {shape!r}: {error}") from None
        pool.pool_to_host(buf_id, out, offset)
        return out

    def view(
        self, offset: int, nbytes: int, *, dtype: npt.DTypeLike | DType | None = None, shape: Shape | None = None
    ) -> Buffer:
        """A Buffer for ``nbytes`` bytes of this one from byte ``offset``, a multiple of
        ``device.info.min_storage_buffer_offset_alignment``. It holds a reference on this buffer's memory, so it stays
        valid after this Buffer is closed; close it like any other.

        Its dtype is ``dtype``, or this Buffer's where ``nbytes`` is whole elements of it, else bytes (``uint8``);
        its shape is ``shape`` (``nbytes`` in all), or 1-D.
        """
        if dtype is None:
            dtype = (
                self._dtype if index_argument(nbytes, "Buffer.view: nbytes") % self._dtype.itemsize == 0 else np.uint8
            )
        dt, dims, nbytes = _layout(nbytes, dtype, shape, "Buffer.view")
        view = object.__new__(type(self))
        view._own(self._device, self._device.memory_pool.view(self.id, offset, nbytes), dt, dims)
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

    def _name(self) -> str:
        """The Buffer as messages name it: ``Buffer #12 (float32 (3, 4))``, #12 as the pool's messages number it."""
        return f"Buffer #{number(self._id)} ({self._dtype} {self._shape})"

    def __repr__(self) -> str:
        return (
            f"<vkbackend.Buffer #{number(self._id)} {self._dtype} {self._shape} on {self._device.info.name}"
            f"{' (closed)' if self.closed else ''}>"
        )

    def __array__(self, dtype: npt.DTypeLike | None = None, copy: bool | None = None) -> npt.NDArray[Any]:
        """``numpy.asarray(buf)``: a host copy of :attr:`dtype` and :attr:`shape` (converted to ``dtype`` when numpy
        asks for one), on every numpy; a sync point. ``copy=False`` raises ``InvalidArgumentError`` (a
        ``ValueError``, which numpy expects): device memory has no host view."""
        if copy is False:
            raise InvalidArgumentError(
                ErrorStatus.InvalidArgument,
                f"{self._name()} lives in device-local memory, so a numpy array of it is "
                "always a copy, and copy=False forbids one; use numpy.asarray(buf)",
            )
        host = self.to_numpy()
        return host if dtype is None else host.astype(dtype, copy=False)

    def __dlpack_device__(self) -> tuple[int, int]:
        """``(7, device.index)``: DLPack's kDLVulkan, where the bytes are (see the class's notes on DLPack)."""
        return KDL_VULKAN, self._device.index

    def __dlpack__(
        self,
        *,
        stream: object = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> Any:
        """A DLPack capsule of a host copy (:attr:`dtype`, :attr:`shape`), only for a consumer that asks for the CPU
        (``dl_device=(1, 0)``); a sync point. Anything else raises :class:`DLPackExportError` (a ``BufferError``)."""
        if dl_device is None or tuple(dl_device) != (KDL_CPU, 0):
            where = "in place" if dl_device is None else f"to DLPack device {tuple(dl_device)}"
            raise DLPackExportError(
                ErrorStatus.InvalidArgument,
                f"{self._name()} cannot be exported through DLPack {where}: it is device-local "
                "Vulkan memory, which has no host pointer. Make a host copy: numpy.asarray(buf) "
                "or buf.to_numpy() on any numpy, numpy.from_dlpack(buf, device='cpu') on numpy "
                "2.1 or later; other libraries import that array (torch.from_dlpack(array))",
            )
        if copy is False:
            raise DLPackExportError(
                ErrorStatus.InvalidArgument,
                "a host export of a Buffer is always a copy (its memory is device-local), and copy=False forbids one",
            )
        if stream is not None:
            raise DLPackExportError(
                ErrorStatus.InvalidArgument, f"a host (CPU) DLPack export takes no stream, got {stream!r}"
            )
        # The unversioned capsule whatever max_version allows: the protocol lets a producer answer with an older one.
        return self.to_numpy().__dlpack__()


def _layout(
    nbytes: int | None, dtype: npt.DTypeLike | DType, shape: Shape | None, what: str
) -> tuple[np.dtype[Any], tuple[int, ...], int]:
    """(dtype, shape, nbytes) of a new Buffer from what the caller gave: nbytes, a shape, or both when they agree."""
    dt = _numpy_dtype(dtype, what)
    if shape is None:
        if nbytes is None:
            raise InvalidArgumentTypeError(
                ErrorStatus.InvalidArgument, f"{what}: give its size, nbytes, or its shape (and dtype)"
            )
        nbytes = index_argument(nbytes, f"{what}: nbytes")
        count, rest = divmod(nbytes, dt.itemsize)
        if rest:
            raise BackendError(
                ErrorStatus.InvalidArgument,
                f"{what}: {nbytes} bytes are not whole {dt} elements of {dt.itemsize} bytes; give a "
                "size that is, or dtype='uint8'",
            )
        return dt, (count,), nbytes
    dims = tuple(
        index_argument(d, f"{what}: a shape entry") for d in ((shape,) if not isinstance(shape, Sequence) else shape)
    )
    if any(d < 0 for d in dims):
        raise BackendError(ErrorStatus.InvalidArgument, f"{what}: shape {dims} has a negative entry")
    size = int(np.prod(dims, dtype=np.int64)) * dt.itemsize
    if nbytes is not None and index_argument(nbytes, f"{what}: nbytes") != size:
        raise BackendError(
            ErrorStatus.InvalidArgument,
            f"{what}: shape {dims} of {dt} is {size} bytes, not the {nbytes} given; give one of the two, "
            "or both when they agree",
        )
    return dt, dims, size


def _numpy_dtype(dtype: npt.DTypeLike | DType, what: str) -> np.dtype[Any]:
    """The numpy dtype, refusing those that are not plain data: device bytes are never Python objects."""
    try:
        dt = np.dtype(dtype.value[1] if isinstance(dtype, DType) else dtype)
    except TypeError as error:
        missing = not_in_numpy(what, dtype)  # bfloat16, float8: how to move them as integers instead
        if missing is not None:
            raise missing from None
        named = numpy_name(dtype)  # another library's dtype object, torch.float32: numpy wants its own name
        hint = f"; pass numpy's name for it, {named!r}" if named else ""
        raise InvalidArgumentTypeError(
            ErrorStatus.InvalidArgument, f"{what}: {dtype!r} is not a numpy dtype: {error}{hint}"
        ) from None
    if dt.hasobject or not dt.itemsize:
        raise InvalidArgumentTypeError(
            ErrorStatus.InvalidArgument,
            f"{what}: dtype {dt} is not plain data (it holds Python objects or has no size); use a numeric dtype",
        )
    return dt
