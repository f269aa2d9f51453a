"""Exported and imported memory: buffers that another API or process shares with vkbackend through a file descriptor.

VK_KHR_external_memory_fd exports a VkDeviceMemory as an *opaque* file descriptor, which only the same driver on the
same physical device can import, and imports memory from one. On NVIDIA, CUDA imports such an fd
(``cuImportExternalMemory``), so a buffer vkbackend allocates becomes a CUDA device pointer, a PyTorch tensor or a CuPy
array without a copy (vkbackend/interop/cuda.py). Each exported or imported buffer has a VkDeviceMemory of its own,
dedicated to its VkBuffer, never a block of the pool's shared chunks: an importer maps the whole memory object, and
Vulkan's import of a dedicated export must be dedicated too.

Once made, they are buffers like any other: ``Device.launch`` binds them, or reaches them by device address where
the device has addresses (they get the pool's usage and allocation flags), ``view`` cuts them, ``release`` frees
them once the GPU is done with them (a Vulkan import holds a reference of its own on the memory). The file
descriptor of an export is its :class:`ExportedMemory`'s, which closes it. Ordering with the other API is the
caller's: vkbackend's work on a buffer is done once ``Device.sync()`` returns, and the other API's work must be
finished (its stream synchronized) before a launch that reads what it wrote.
"""

from __future__ import annotations

import os
import weakref
from typing import Any, Protocol

from .._ffi import vulkan
from ..errors import BackendError, ErrorStatus, check, index_argument
from ..ids import label
from ..structs import new_struct
from .device_memory import DeviceMemory

__all__ = ["BufferOwner", "Export", "ExportedMemory", "Import"]

EXTENSION = "VK_KHR_external_memory_fd"


class ExportedMemory:
    """A buffer whose memory other APIs can import, and the file descriptor that shares it. Made by
    ``MemoryPool.allocate_exportable``, not by users.

    - ``buffer``: the buffer id (reference count 1 when made), launched, copied and released (``pool.release``)
      like any other; ``pool``: its MemoryPool;
    - ``fd``: the opaque file descriptor, owned by this object: :meth:`close`, the end of a ``with`` block or the
      object's collection closes it, once. Give an importer that takes ownership of what it is given (CUDA's
      ``cuImportExternalMemory``, Vulkan's import) ``os.dup(exported.fd)``;
    - ``nbytes``: the buffer's size; ``size``: the memory object's, which importers need (drivers may round up);
    - ``memory_type_index``, ``memory_type_flags``: the Vulkan memory type (a Vulkan import needs the index);
    - ``device_uuid``: the Vulkan device's UUID (16 bytes), which CUDA reports for the same GPU (``cuDeviceGetUuid``).

    The memory is always a dedicated allocation (CUDA: ``CUDA_EXTERNAL_MEMORY_DEDICATED``).
    """

    __slots__ = (
        "pool",
        "buffer",
        "nbytes",
        "size",
        "memory_type_index",
        "memory_type_flags",
        "device_uuid",
        "_fd",
        "_finalizer",
        "__weakref__",
    )

    def __init__(
        self,
        pool: BufferOwner,
        buffer: int,
        nbytes: int,
        size: int,
        memory_type_index: int,
        memory_type_flags: int,
        device_uuid: bytes,
        fd: int,
    ) -> None:
        """What ``allocate_exportable`` made; the new object owns ``fd``."""
        self.pool = pool
        self.buffer = buffer
        self.nbytes = nbytes
        self.size = size
        self.memory_type_index = memory_type_index
        self.memory_type_flags = memory_type_flags
        self.device_uuid = device_uuid
        self._fd = fd
        self._finalizer = weakref.finalize(self, os.close, fd)

    @property
    def fd(self) -> int:
        """The opaque file descriptor of the memory, while the object is open."""
        if not self._finalizer.alive:
            raise BackendError(
                ErrorStatus.InvalidArgument,
                f"the file descriptor of {label(self.buffer)}'s memory was closed; export another "
                "buffer, or pass os.dup(exported.fd) to importers before closing it",
            )
        return self._fd

    @property
    def closed(self) -> bool:
        """True once the file descriptor was closed."""
        return not self._finalizer.alive

    def close(self) -> None:
        """Close the file descriptor (idempotent). The buffer stays: release it with ``pool.release(buffer)``."""
        self._finalizer()

    def __enter__(self) -> ExportedMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"fd {self._fd}"
        return f"<vkbackend.ExportedMemory of {label(self.buffer)}: {self.size} bytes, {state}>"


Made = tuple[Any, Any, int]  # (memory, buffer, device address) of a buffer made here, as the pool adopts it


class BufferOwner(Protocol):
    """What users of an ExportedMemory (interop/cuda.py) need of the pool its buffer belongs to: a MemoryPool."""

    def retain(self, buf: int) -> None: ...

    def release(self, buf: int) -> None: ...

    def is_live(self, buf: object) -> bool: ...


class Export:
    """An export in the making (``MemoryPool.allocate_exportable``): the request, checked when made; :meth:`create`,
    which the pool calls under its lock, makes the memory and its file descriptor; :meth:`wrap` hands the result over
    in an ExportedMemory, and :meth:`abandon` closes a descriptor that the pool could not take."""

    def __init__(self, ctx: Any, memory: DeviceMemory, nbytes: int) -> None:
        """Check the request (``InvalidArgument``, ``MemoryAllocation``, ``Initialization`` saying what is wrong)."""
        _, lib = vulkan()
        self.ctx, self.memory = ctx, memory
        self.nbytes = _check_request(ctx, memory, nbytes, "allocate_exportable")
        if not _features(ctx, memory) & lib.VK_EXTERNAL_MEMORY_FEATURE_EXPORTABLE_BIT:
            raise BackendError(
                ErrorStatus.Initialization,
                f"{ctx.info.name} cannot export storage buffers as opaque file descriptors; share them "
                "through host copies (pool_to_host, host_to_pool) instead",
            )
        self._fd = ctx.ffi.new("int*", -1)  # written by the driver; closed by abandon unless an ExportedMemory owns it
        self._made: tuple[int, int] | None = None  # (size, memory type) of what create() made

    def create(self) -> Made:
        """The exportable memory, its buffer and address, and (kept here) its file descriptor."""
        ctx, lib = self.ctx, self.ctx.lib
        memory, buffer, address, size, type_index = _make(ctx, self.memory, self.nbytes, None)
        try:
            info = new_struct("VkMemoryGetFdInfoKHR", memory=memory, handleType=_handle_type(lib))
            check(
                lib.vkGetMemoryFdKHR(ctx.device, info, self._fd),
                f"vkGetMemoryFdKHR ({self.nbytes} bytes)",
                ErrorStatus.MemoryAllocation,
            )
        except BaseException:
            self.memory.destroy(memory, buffer, size)
            raise
        self._made = (size, type_index)
        return memory, buffer, address

    def abandon(self) -> None:
        """The pool could not take the buffer (and freed it): close the descriptor, which nobody else has."""
        if self._fd[0] >= 0:
            os.close(self._fd[0])
            self._fd[0] = -1

    def wrap(self, owner: BufferOwner, buf_id: int) -> ExportedMemory:
        """The ExportedMemory of buffer ``buf_id`` of ``owner``, which takes the descriptor."""
        assert self._made is not None, "wrap() before create()"
        size, type_index = self._made
        physical = self.ctx.handles.physical
        vulkan11: Any = physical.vulkan11  # VkPhysicalDeviceVulkan11Properties (cdata)
        return ExportedMemory(
            owner,
            buf_id,
            self.nbytes,
            size,
            type_index,
            physical.memory_types[type_index][0],
            bytes(vulkan11.deviceUUID),
            self._fd[0],
        )


class Import:
    """An import in the making (``MemoryPool.import_memory``): the request, checked when made, with a duplicate of
    the caller's descriptor; :meth:`create`, which the pool calls under its lock, imports it; :meth:`abandon` closes
    the duplicate when the pool gave up before ``create`` took it."""

    def __init__(
        self,
        ctx: Any,
        memory: DeviceMemory,
        fd: int,
        size: int,
        nbytes: int | None,
        memory_type_index: int | None,
        dedicated: bool,
    ) -> None:
        """Check the request (``InvalidArgument``, ``MemoryAllocation``, ``Initialization`` saying what is wrong)."""
        _, lib = vulkan()
        self.ctx, self.memory = ctx, memory
        fd = index_argument(fd, "import_memory: the file descriptor")
        if fd < 0:
            raise BackendError(ErrorStatus.InvalidArgument, f"import_memory needs an open file descriptor, got {fd}")
        self.size = size = _check_request(ctx, memory, size, "import_memory")
        self.nbytes = size if nbytes is None else index_argument(nbytes, "import_memory: nbytes")
        if memory_type_index is not None:
            memory_type_index = index_argument(memory_type_index, "import_memory: memory_type_index")
        self.memory_type_index, self.dedicated = memory_type_index, dedicated
        if not 0 < self.nbytes <= size:
            raise BackendError(
                ErrorStatus.InvalidArgument,
                f"import_memory: nbytes {self.nbytes!r} must be a byte count in 1..{size} (the memory's size)",
            )
        features = _features(ctx, memory)
        if not features & lib.VK_EXTERNAL_MEMORY_FEATURE_IMPORTABLE_BIT:
            raise BackendError(
                ErrorStatus.Initialization,
                f"{ctx.info.name} cannot import storage buffers from opaque file descriptors",
            )
        if not dedicated and features & lib.VK_EXTERNAL_MEMORY_FEATURE_DEDICATED_ONLY_BIT:
            raise BackendError(
                ErrorStatus.InvalidArgument,
                f"import_memory: {ctx.info.name} imports opaque file descriptors only as dedicated "
                "allocations; pass dedicated=True",
            )
        try:
            self._owned = os.dup(fd)  # a successful import takes the descriptor it is given: the caller's stays theirs
        except OSError as error:
            raise BackendError(ErrorStatus.InvalidArgument, f"import_memory: file descriptor {fd}: {error}") from None
        self._consumed = False

    def create(self) -> Made:
        """The imported memory, its buffer and address."""
        self._consumed = True  # from here on _make closes the duplicate or hands it to the driver, whatever happens
        memory, buffer, address, _, _ = _make(
            self.ctx, self.memory, self.nbytes, (self._owned, self.size, self.memory_type_index, self.dedicated)
        )
        return memory, buffer, address

    def abandon(self) -> None:
        """The pool gave up: close the duplicate unless ``create`` already took it."""
        if not self._consumed:
            self._consumed = True
            os.close(self._owned)


def _handle_type(lib: Any) -> int:
    return int(lib.VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT)


def _check_request(ctx: Any, memory: DeviceMemory, nbytes: int, what: str) -> int:
    ctx.ensure_usable()
    info = ctx.info
    if EXTENSION not in ctx.handles.extensions:
        raise BackendError(
            ErrorStatus.Initialization,
            f"{what}: {info.name} has no {EXTENSION}, which sharing memory through a file descriptor "
            "needs. NVIDIA's, AMD's, Intel's and Mesa's Linux drivers have it: update the driver, or "
            "share the data through host copies (pool_to_host, host_to_pool)",
        )
    nbytes = index_argument(nbytes, f"{what}: the byte count")
    if nbytes <= 0:
        raise BackendError(ErrorStatus.InvalidArgument, f"{what} needs a positive byte count, got {nbytes}")
    if nbytes > memory.max_allocation:  # its memory is one allocation, which an importer maps whole
        raise BackendError(
            ErrorStatus.MemoryAllocation,
            f"{what}: {nbytes} bytes exceed the largest allocation ({memory.limit_text()}); share smaller buffers",
        )
    return nbytes


def _features(ctx: Any, memory: DeviceMemory) -> int:
    """What the device can do with opaque-fd memory of the pool's buffers (VkExternalMemoryFeatureFlags)."""
    ffi, lib = vulkan()
    query = new_struct("VkPhysicalDeviceExternalBufferInfo", usage=memory.usage, handleType=_handle_type(lib))
    props = new_struct("VkExternalBufferProperties")
    lib.vkGetPhysicalDeviceExternalBufferProperties(ctx.handles.physical.handle, query, props)
    return int(props.externalMemoryProperties.externalMemoryFeatures)


def _memory_type(ctx: Any, memory: DeviceMemory, allowed: int, wanted: int | None) -> int:
    """The memory type of an external buffer: ``wanted`` (an import's), else the device-local type
    ``DeviceMemory.local_type_for`` picks among ``allowed`` (the buffer's memoryTypeBits)."""
    types = ctx.handles.physical.memory_types
    if wanted is not None:
        if (
            isinstance(wanted, bool)
            or not isinstance(wanted, int)
            or not 0 <= wanted < len(types)
            or not allowed >> wanted & 1
        ):
            raise BackendError(
                ErrorStatus.InvalidArgument,
                f"import_memory: memory type {wanted!r} cannot hold a storage buffer of "
                f"{ctx.info.name} (allowed: mask {allowed:#x}); pass the exporter's "
                "memory_type_index",
            )
        return wanted
    return memory.local_type_for(allowed, "for external storage buffers")


def _make(
    ctx: Any, memory: DeviceMemory, nbytes: int, imported: tuple[int, int, int | None, bool] | None
) -> tuple[Any, Any, int, int, int]:
    """``(memory, buffer, device address, size, memory type)``: a VkBuffer of ``nbytes`` bytes bound to memory of its
    own, exportable as an opaque fd, or imported from ``imported = (fd, size, memory type or None, dedicated)``. An
    imported fd is the driver's once the allocation succeeded and closed here when it failed. Counted in
    ``memory``."""
    ffi, lib = vulkan()
    handle_type = _handle_type(lib)
    binfo = new_struct(
        "VkBufferCreateInfo",
        pNext=new_struct("VkExternalMemoryBufferCreateInfo", handleTypes=handle_type),
        size=nbytes,
        usage=memory.usage,
        sharingMode=lib.VK_SHARING_MODE_EXCLUSIVE,
    )
    buf = ffi.new("VkBuffer*")
    mem = ffi.new("VkDeviceMemory*")
    what = "imported" if imported else "exportable"
    try:  # on any failure, an interrupt (Ctrl-C) included, nothing made here is left behind
        check(
            lib.vkCreateBuffer(ctx.device, binfo, ffi.NULL, buf),
            f"vkCreateBuffer ({what}, {nbytes} bytes)",
            ErrorStatus.MemoryAllocation,
        )
        req = ffi.new("VkMemoryRequirements*")
        lib.vkGetBufferMemoryRequirements(ctx.device, buf[0], req)
        tail = memory.address_flags()  # device addresses, as every buffer of the pool has
        dedicated = new_struct("VkMemoryDedicatedAllocateInfo", pNext=tail, buffer=buf[0])
        if imported is None:
            size, type_index = req.size, _memory_type(ctx, memory, req.memoryTypeBits, None)
            head = new_struct("VkExportMemoryAllocateInfo", pNext=dedicated, handleTypes=handle_type)
        else:
            fd, size, wanted, is_dedicated = imported
            if size < req.size:
                raise BackendError(
                    ErrorStatus.InvalidArgument,
                    f"import_memory: a buffer of {nbytes} bytes needs memory of {req.size} bytes, "
                    f"and the memory to import has {size}",
                )
            type_index = _memory_type(ctx, memory, req.memoryTypeBits, wanted)
            head = new_struct(
                "VkImportMemoryFdInfoKHR",
                pNext=dedicated if is_dedicated else tail,
                handleType=handle_type,
                fd=fd,
            )
        ainfo = new_struct("VkMemoryAllocateInfo", pNext=head, allocationSize=size, memoryTypeIndex=type_index)
        check(
            lib.vkAllocateMemory(ctx.device, ainfo, ffi.NULL, mem),
            f"vkAllocateMemory ({what}, {size} bytes, memory type {type_index})",
            ErrorStatus.MemoryAllocation,
        )
        check(
            lib.vkBindBufferMemory(ctx.device, buf[0], mem[0], 0),
            f"vkBindBufferMemory ({what})",
            ErrorStatus.MemoryAllocation,
        )
        address = memory.address(buf[0])
    except BaseException:
        if mem[0] != ffi.NULL:
            lib.vkFreeMemory(ctx.device, mem[0], ffi.NULL)  # an imported fd goes with the memory that took it
        elif imported is not None:
            os.close(imported[0])
        if buf[0] != ffi.NULL:
            lib.vkDestroyBuffer(ctx.device, buf[0], ffi.NULL)
        raise
    memory.count(mem[0], size)
    return mem[0], buf[0], address, size, type_index
