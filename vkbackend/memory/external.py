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
from typing import TYPE_CHECKING, Any

from .._ffi import vulkan
from ..errors import BackendError, ErrorStatus, check, index_argument

if TYPE_CHECKING:
    from .pool import MemoryPool

__all__ = ["ExportedMemory", "export_buffer", "import_buffer"]

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

    __slots__ = ("pool", "buffer", "nbytes", "size", "memory_type_index", "memory_type_flags", "device_uuid",
                 "_fd", "_finalizer", "__weakref__")

    def __init__(self, pool: MemoryPool, buffer: int, nbytes: int, size: int, memory_type_index: int,
                 memory_type_flags: int, device_uuid: bytes, fd: int) -> None:
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
            raise BackendError(ErrorStatus.InvalidArgument,
                               f"the file descriptor of buffer {self.buffer}'s memory was closed; export another "
                               "buffer, or pass os.dup(exported.fd) to importers before closing it")
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
        return f"<vkbackend.ExportedMemory of buffer {self.buffer}: {self.size} bytes, {state}>"


def export_buffer(pool: MemoryPool, nbytes: int) -> ExportedMemory:
    """A new buffer of ``nbytes`` bytes in exportable memory of its own, and its opaque file descriptor
    (``MemoryPool.allocate_exportable``)."""
    ctx = pool.ctx
    ffi, lib = vulkan()
    nbytes = _check_request(pool, nbytes, "allocate_exportable")
    if not _features(pool) & lib.VK_EXTERNAL_MEMORY_FEATURE_EXPORTABLE_BIT:
        raise BackendError(ErrorStatus.Initialization,
                           f"{ctx.info.name} cannot export storage buffers as opaque file descriptors; share them "
                           "through host copies (pool_to_host, host_to_pool) instead")
    fd = ffi.new("int*", -1)            # written by the driver; closed here unless an ExportedMemory owns it
    made: list[tuple[int, int]] = []    # (size, memory type) of what create() made

    def create() -> tuple[Any, Any, int]:
        memory, buffer, address, size, type_index = _make(pool, nbytes, None)
        try:
            info = ffi.new("VkMemoryGetFdInfoKHR*", {"sType": lib.VK_STRUCTURE_TYPE_MEMORY_GET_FD_INFO_KHR,
                                                      "memory": memory, "handleType": _handle_type(lib)})
            check(lib.vkGetMemoryFdKHR(ctx.device, info, fd), f"vkGetMemoryFdKHR ({nbytes} bytes)",
                  ErrorStatus.MemoryAllocation)
        except BaseException:
            pool.memory.destroy(memory, buffer, size)
            raise
        made.append((size, type_index))
        return memory, buffer, address

    try:
        buf_id = pool._adopt_dedicated(nbytes, create)
    except BaseException:
        if fd[0] >= 0:  # exported, but the pool could not take the buffer (and freed it): nobody has the descriptor
            os.close(fd[0])
        raise
    (size, type_index), = made
    vulkan11: Any = ctx.handles.physical.vulkan11   # VkPhysicalDeviceVulkan11Properties (cdata)
    return ExportedMemory(pool, buf_id, nbytes, size, type_index, ctx.handles.physical.memory_types[type_index][0],
                          bytes(vulkan11.deviceUUID), fd[0])


def import_buffer(pool: MemoryPool, fd: int, size: int, nbytes: int | None, memory_type_index: int | None,
                  dedicated: bool) -> int:
    """A new buffer id for memory imported from an opaque file descriptor (``MemoryPool.import_memory``)."""
    _, lib = vulkan()
    fd = index_argument(fd, "import_memory: the file descriptor")
    if fd < 0:
        raise BackendError(ErrorStatus.InvalidArgument, f"import_memory needs an open file descriptor, got {fd}")
    size = _check_request(pool, size, "import_memory")
    nbytes = size if nbytes is None else index_argument(nbytes, "import_memory: nbytes")
    if memory_type_index is not None:
        memory_type_index = index_argument(memory_type_index, "import_memory: memory_type_index")
    if not 0 < nbytes <= size:
        raise BackendError(ErrorStatus.InvalidArgument,
                           f"import_memory: nbytes {nbytes!r} must be a byte count in 1..{size} (the memory's size)")
    features = _features(pool)
    if not features & lib.VK_EXTERNAL_MEMORY_FEATURE_IMPORTABLE_BIT:
        raise BackendError(ErrorStatus.Initialization,
                           f"{pool.ctx.info.name} cannot import storage buffers from opaque file descriptors")
    if not dedicated and features & lib.VK_EXTERNAL_MEMORY_FEATURE_DEDICATED_ONLY_BIT:
        raise BackendError(ErrorStatus.InvalidArgument,
                           f"import_memory: {pool.ctx.info.name} imports opaque file descriptors only as dedicated "
                           "allocations; pass dedicated=True")
    try:
        owned = os.dup(fd)  # a successful import takes the descriptor it is given: the caller's stays the caller's
    except OSError as error:
        raise BackendError(ErrorStatus.InvalidArgument, f"import_memory: file descriptor {fd}: {error}") from None
    consumed = False

    def create() -> tuple[Any, Any, int]:
        nonlocal consumed
        consumed = True  # from here on _make closes the duplicate or hands it to the driver, whatever happens
        memory, buffer, address, _, _ = _make(pool, nbytes, (owned, size, memory_type_index, dedicated))
        return memory, buffer, address

    try:
        return pool._adopt_dedicated(nbytes, create)
    except BaseException:
        if not consumed:
            os.close(owned)
        raise


def _handle_type(lib: Any) -> int:
    return int(lib.VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT)


def _check_request(pool: MemoryPool, nbytes: int, what: str) -> int:
    ctx = pool.ctx
    ctx.ensure_usable()
    info = ctx.info
    if EXTENSION not in ctx.handles.extensions:
        raise BackendError(ErrorStatus.Initialization,
                           f"{what}: {info.name} has no {EXTENSION}, which sharing memory through a file descriptor "
                           "needs. NVIDIA's, AMD's, Intel's and Mesa's Linux drivers have it: update the driver, or "
                           "share the data through host copies (pool_to_host, host_to_pool)")
    nbytes = index_argument(nbytes, f"{what}: the byte count")
    if nbytes <= 0:
        raise BackendError(ErrorStatus.InvalidArgument, f"{what} needs a positive byte count, got {nbytes}")
    if nbytes > info.max_memory_allocation_size:
        raise BackendError(ErrorStatus.MemoryAllocation,
                           f"{what}: {nbytes} bytes exceed maxMemoryAllocationSize ({info.max_memory_allocation_size}) "
                           f"of {info.name}; share smaller buffers")
    return nbytes


def _features(pool: MemoryPool) -> int:
    """What the device can do with opaque-fd memory of the pool's buffers (VkExternalMemoryFeatureFlags)."""
    ffi, lib = vulkan()
    query = ffi.new("VkPhysicalDeviceExternalBufferInfo*", {
        "sType": lib.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_BUFFER_INFO, "usage": pool.memory.usage,
        "handleType": _handle_type(lib)})
    props = ffi.new("VkExternalBufferProperties*", {"sType": lib.VK_STRUCTURE_TYPE_EXTERNAL_BUFFER_PROPERTIES})
    lib.vkGetPhysicalDeviceExternalBufferProperties(pool.ctx.handles.physical.handle, query, props)
    return int(props.externalMemoryProperties.externalMemoryFeatures)


def _memory_type(pool: MemoryPool, allowed: int, wanted: int | None) -> int:
    """The memory type of an external buffer: ``wanted`` (an import's), else the pool's device-local type, else the
    first device-local type that ``allowed`` (the buffer's memoryTypeBits) has."""
    _, lib = vulkan()
    types = pool.ctx.handles.physical.memory_types
    if wanted is not None:
        if isinstance(wanted, bool) or not isinstance(wanted, int) or not 0 <= wanted < len(types) \
                or not allowed >> wanted & 1:
            raise BackendError(ErrorStatus.InvalidArgument,
                               f"import_memory: memory type {wanted!r} cannot hold a storage buffer of "
                               f"{pool.ctx.info.name} (allowed: mask {allowed:#x}); pass the exporter's "
                               "memory_type_index")
        return wanted
    if allowed >> pool.memory.device_type & 1:
        return pool.memory.device_type
    local = [i for i, (flags, _) in enumerate(types)
             if allowed >> i & 1 and flags & lib.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT]
    if not local:
        raise BackendError(ErrorStatus.Initialization,
                           f"{pool.ctx.info.name} offers no device-local memory for external storage buffers")
    return local[0]


def _make(pool: MemoryPool, nbytes: int,
          imported: tuple[int, int, int | None, bool] | None) -> tuple[Any, Any, int, int, int]:
    """``(memory, buffer, device address, size, memory type)``: a VkBuffer of ``nbytes`` bytes bound to memory of its
    own, exportable as an opaque fd, or imported from ``imported = (fd, size, memory type or None, dedicated)``. An
    imported fd is the driver's once the allocation succeeded and closed here when it failed. Counted in
    ``pool.memory``."""
    ctx = pool.ctx
    ffi, lib = vulkan()
    handle_type = _handle_type(lib)
    external = ffi.new("VkExternalMemoryBufferCreateInfo*", {
        "sType": lib.VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO, "handleTypes": handle_type})
    binfo = ffi.new("VkBufferCreateInfo*", {"sType": lib.VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, "pNext": external,
                                            "size": nbytes, "usage": pool.memory.usage,
                                            "sharingMode": lib.VK_SHARING_MODE_EXCLUSIVE})
    buf = ffi.new("VkBuffer*")
    mem = ffi.new("VkDeviceMemory*")
    what = "imported" if imported else "exportable"
    try:  # on any failure, an interrupt (Ctrl-C) included, nothing made here is left behind
        check(lib.vkCreateBuffer(ctx.device, binfo, ffi.NULL, buf), f"vkCreateBuffer ({what}, {nbytes} bytes)",
              ErrorStatus.MemoryAllocation)
        req = ffi.new("VkMemoryRequirements*")
        lib.vkGetBufferMemoryRequirements(ctx.device, buf[0], req)
        tail = pool.memory.address_flags()   # device addresses, as every buffer of the pool has
        dedicated = ffi.new("VkMemoryDedicatedAllocateInfo*", {
            "sType": lib.VK_STRUCTURE_TYPE_MEMORY_DEDICATED_ALLOCATE_INFO, "pNext": tail, "buffer": buf[0]})
        if imported is None:
            size, type_index = req.size, _memory_type(pool, req.memoryTypeBits, None)
            head = ffi.new("VkExportMemoryAllocateInfo*", {"sType": lib.VK_STRUCTURE_TYPE_EXPORT_MEMORY_ALLOCATE_INFO,
                                                           "pNext": dedicated, "handleTypes": handle_type})
        else:
            fd, size, wanted, is_dedicated = imported
            if size < req.size:
                raise BackendError(ErrorStatus.InvalidArgument,
                                   f"import_memory: a buffer of {nbytes} bytes needs memory of {req.size} bytes, "
                                   f"and the memory to import has {size}")
            type_index = _memory_type(pool, req.memoryTypeBits, wanted)
            head = ffi.new("VkImportMemoryFdInfoKHR*", {"sType": lib.VK_STRUCTURE_TYPE_IMPORT_MEMORY_FD_INFO_KHR,
                                                         "pNext": dedicated if is_dedicated else tail,
                                                         "handleType": handle_type, "fd": fd})
        ainfo = ffi.new("VkMemoryAllocateInfo*", {"sType": lib.VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, "pNext": head,
                                                  "allocationSize": size, "memoryTypeIndex": type_index})
        check(lib.vkAllocateMemory(ctx.device, ainfo, ffi.NULL, mem),
              f"vkAllocateMemory ({what}, {size} bytes, memory type {type_index})", ErrorStatus.MemoryAllocation)
        check(lib.vkBindBufferMemory(ctx.device, buf[0], mem[0], 0), f"vkBindBufferMemory ({what})",
              ErrorStatus.MemoryAllocation)
        address = pool.memory.address(buf[0])
    except BaseException:
        if mem[0] != ffi.NULL:
            lib.vkFreeMemory(ctx.device, mem[0], ffi.NULL)  # an imported fd goes with the memory that took it
        elif imported is not None:
            os.close(imported[0])
        if buf[0] != ffi.NULL:
            lib.vkDestroyBuffer(ctx.device, buf[0], ffi.NULL)
        raise
    pool.memory.count(mem[0], size)
    return mem[0], buf[0], address, size, type_index
