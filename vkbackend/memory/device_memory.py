"""DeviceMemory: memory types, raw allocations (one VkDeviceMemory bound to one VkBuffer, or memory alone for a
sparse buffer's pieces), the largest allocation the pool makes, and what they hold.

Buffers live in DEVICE_LOCAL memory, the type with the fewest other properties: plain VRAM on a discrete GPU. On the
H200 the first HOST_VISIBLE|HOST_COHERENT type is system memory, and kernels reading it ran 21x slower. The chunks
that small buffers are blocks of go where the host can map them too, in the same heap: a DEVICE_LOCAL|HOST_VISIBLE|
HOST_COHERENT type whose heap is the device-local one (all of VRAM behind a resizable BAR, as on the H200, or memory
the host shares, as on lavapipe), so that a small read-back reads them straight (MemoryPool.pool_to_host). Staging
memory is HOST_VISIBLE|HOST_COHERENT, HOST_CACHED where offered and never DEVICE_LOCAL: large read-backs stream
through it, never through the BAR, whose uncached reads are slow.

Creating memory objects is thread-safe in Vulkan (only queues and command pools need one owner), so allocations are
made in the caller's thread; the counters here are kept under the memory pool's lock.
"""

from __future__ import annotations

from typing import Any

from ..discovery import memory_budget
from ..errors import BackendError, ErrorStatus, check
from ..structs import new_struct

__all__ = ["DeviceMemory"]


class DeviceMemory:
    """The raw allocations of one device, and the bytes and objects they hold."""

    def __init__(self, ctx) -> None:
        self.ctx = ctx
        lib = ctx.lib
        self.allocations = 0  # VkDeviceMemory objects held
        self.held = 0  # bytes of them
        self._sizes: dict[int, int] = {}  # each one's size as allocated, by handle (drivers may round up)
        self.device_type = self.pick_type(
            required=lib.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, preferred=0, avoid=lib.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT
        )
        self.heap_index = ctx.handles.physical.memory_types[self.device_type][1]
        self.heap_size = ctx.handles.physical.heaps[self.heap_index][0]
        self.chunk_type = self._mappable_local_type() if ctx.config.resolved_direct_access() else None
        """The memory type of small buffers' chunks where the host can map them (mapped, small read-backs and uploads
        reach them straight); None: they are in ``device_type``, unmapped."""
        self._budget_ext = "VK_EXT_memory_budget" in ctx.handles.extensions
        self.addressable = ctx.info.buffer_device_address  # every buffer gets a device address
        # The largest single allocation made here: the device's, or the configured cap where that is lower.
        cap = ctx.allocation_cap
        self.max_allocation = min(ctx.info.max_memory_allocation_size, cap or ctx.info.max_memory_allocation_size)
        self.capped = cap is not None and cap < ctx.info.max_memory_allocation_size
        # What every buffer is for (external.py's exported and imported ones too).
        self.usage = (
            lib.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT
            | lib.VK_BUFFER_USAGE_TRANSFER_SRC_BIT
            | lib.VK_BUFFER_USAGE_TRANSFER_DST_BIT
            | (lib.VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT if self.addressable else 0)
        )

    def pick_type(self, required: int, preferred: int, avoid: int) -> int:
        """The memory type with all of ``required``; then most of ``preferred``, fewest of ``avoid``, fewest bits."""
        lib = self.ctx.lib
        ignore = lib.VK_MEMORY_PROPERTY_PROTECTED_BIT | lib.VK_MEMORY_PROPERTY_LAZILY_ALLOCATED_BIT
        best, best_key = None, None
        for index, (flags, _heap) in enumerate(self.ctx.handles.physical.memory_types):
            if flags & required != required or flags & ignore:
                continue
            key = (bin(flags & preferred).count("1"), -bin(flags & avoid).count("1"), -bin(flags).count("1"))
            if best_key is None or key > best_key:
                best, best_key = index, key
        if best is None:
            raise BackendError(
                ErrorStatus.Initialization, f"{self.ctx.info.name} has no memory type with flags {required:#x}"
            )
        return best

    def host_type(self) -> int:
        """The type of memory the GPU writes and the host reads (staging, the completion marker):
        HOST_VISIBLE|HOST_COHERENT, HOST_CACHED where offered, DEVICE_LOCAL where nothing else is."""
        lib = self.ctx.lib
        return self.pick_type(
            required=lib.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | lib.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
            preferred=lib.VK_MEMORY_PROPERTY_HOST_CACHED_BIT,
            avoid=lib.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT,
        )

    def _mappable_local_type(self) -> int | None:
        """A DEVICE_LOCAL|HOST_VISIBLE|HOST_COHERENT type in the heap of ``device_type`` (``device_type`` itself where
        it is one); None where the host reaches device memory only through a smaller window, or not at all."""
        lib = self.ctx.lib
        mappable = (
            lib.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT
            | lib.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT
            | lib.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
        )
        ignore = lib.VK_MEMORY_PROPERTY_PROTECTED_BIT | lib.VK_MEMORY_PROPERTY_LAZILY_ALLOCATED_BIT
        types = self.ctx.handles.physical.memory_types
        candidates = [self.device_type] + [i for i in range(len(types)) if i != self.device_type]
        for index in candidates:
            flags, heap = types[index]
            if heap == self.heap_index and flags & mappable == mappable and not flags & ignore:
                return index
        return None

    def local_type_for(self, allowed: int, what: str) -> int:
        """The memory type for a buffer whose memoryTypeBits are ``allowed``: the pool's device-local type where it is
        allowed, else the first device-local type that is; ``Initialization`` error ending in ``what`` without one."""
        if allowed >> self.device_type & 1:
            return self.device_type
        lib = self.ctx.lib
        for index, (flags, _heap) in enumerate(self.ctx.handles.physical.memory_types):
            if allowed >> index & 1 and flags & lib.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT:
                return index
        raise BackendError(ErrorStatus.Initialization, f"{self.ctx.info.name} offers no device-local memory {what}")

    def limit_text(self) -> str:
        """Where ``max_allocation`` comes from, for error messages."""
        if self.capped:
            return (
                f"{self.max_allocation} bytes, the cap VKBACKEND_MAX_ALLOCATION_BYTES or "
                "VulkanConfig.max_allocation_bytes sets"
            )
        return f"{self.max_allocation} bytes, maxMemoryAllocationSize of {self.ctx.info.name}"

    @property
    def free_bytes(self) -> int:
        """Bytes this process can still allocate on the device heap: the driver's budget (VK_EXT_memory_budget) less
        what is in use, or without that extension the heap's size less what is held here."""
        budget, usage = memory_budget(self.ctx.handles.physical, self._budget_ext)[self.heap_index]
        return max(0, budget - (usage if self._budget_ext else self.held))

    def create(self, size: int, type_index: int, what: str):
        """``(memory, buffer, address)``: one VkDeviceMemory of ``size`` bytes bound to one VkBuffer covering all of it,
        and the buffer's device address (0 where the device has none)."""
        ctx = self.ctx
        ffi, lib = ctx.ffi, ctx.lib
        if size > self.max_allocation:
            raise BackendError(
                ErrorStatus.MemoryAllocation,
                f"{what}: {size} bytes exceed the largest allocation ({self.limit_text()}); split the "
                "data into smaller buffers",
            )
        self._check_count(what)
        binfo = new_struct("VkBufferCreateInfo", size=size, usage=self.usage, sharingMode=lib.VK_SHARING_MODE_EXCLUSIVE)
        buf = ffi.new("VkBuffer*")
        mem = ffi.new("VkDeviceMemory*")
        try:  # on any failure, an interrupt (Ctrl-C) included, nothing made here is left behind
            check(
                lib.vkCreateBuffer(ctx.device, binfo, ffi.NULL, buf),
                f"vkCreateBuffer ({what}, {size} bytes)",
                ErrorStatus.MemoryAllocation,
            )
            req = ffi.new("VkMemoryRequirements*")
            lib.vkGetBufferMemoryRequirements(ctx.device, buf[0], req)
            if type_index == self.chunk_type and not req.memoryTypeBits >> type_index & 1:
                # the device's buffers cannot live in that type (Vulkan promises only some device-local type):
                # chunks stay in device_type, unmapped, and read-backs go through staging
                type_index, self.chunk_type = self.device_type, None
            ainfo = new_struct(
                "VkMemoryAllocateInfo",
                pNext=self.address_flags(),
                allocationSize=req.size,
                memoryTypeIndex=type_index,
            )
            check(
                lib.vkAllocateMemory(ctx.device, ainfo, ffi.NULL, mem),
                f"vkAllocateMemory ({what}, {req.size} bytes; {self.free_bytes} bytes free)",
                ErrorStatus.MemoryAllocation,
            )
            check(
                lib.vkBindBufferMemory(ctx.device, buf[0], mem[0], 0),
                f"vkBindBufferMemory ({what})",
                ErrorStatus.MemoryAllocation,
            )
            address = self.address(buf[0])
            key, held = int(ffi.cast("uintptr_t", mem[0])), req.size
        except BaseException:
            if mem[0] != ffi.NULL:
                lib.vkFreeMemory(ctx.device, mem[0], ffi.NULL)
            if buf[0] != ffi.NULL:
                lib.vkDestroyBuffer(ctx.device, buf[0], ffi.NULL)
            raise
        # No call from here to the caller's use of the handles, so an interrupt cannot land in between.
        self.allocations += 1
        self.held += held
        self._sizes[key] = held
        return mem[0], buf[0], address

    def _check_count(self, what: str) -> None:
        """``MemoryAllocation`` when every allocation the device allows is in use."""
        info = self.ctx.info
        if self.allocations >= info.max_memory_allocation_count:
            raise BackendError(
                ErrorStatus.MemoryAllocation,
                f"{what}: {info.name} allows {info.max_memory_allocation_count} memory allocations "
                "(maxMemoryAllocationCount) and all are in use; release buffers",
            )

    def allocate(self, size: int, type_index: int, what: str) -> Any:
        """One VkDeviceMemory of ``size`` bytes (at most ``max_allocation``) of memory type ``type_index``, bound to
        nothing yet, with the device-address flag where buffers have addresses; counted until :meth:`free`."""
        ctx = self.ctx
        ffi, lib = ctx.ffi, ctx.lib
        if size > self.max_allocation:
            raise BackendError(
                ErrorStatus.MemoryAllocation,
                f"{what}: {size} bytes exceed the largest allocation ({self.limit_text()})",
            )
        self._check_count(what)
        ainfo = new_struct(
            "VkMemoryAllocateInfo", pNext=self.address_flags(), allocationSize=size, memoryTypeIndex=type_index
        )
        mem = ffi.new("VkDeviceMemory*")
        check(
            lib.vkAllocateMemory(ctx.device, ainfo, ffi.NULL, mem),
            f"vkAllocateMemory ({what}, {size} bytes; {self.free_bytes} bytes free)",
            ErrorStatus.MemoryAllocation,
        )
        self.count(mem[0], size)
        return mem[0]

    def free(self, memory: Any) -> None:
        """Free an :meth:`allocate`'s memory (no submitted work may use it, and whatever it is bound to is gone)."""
        ffi = self.ctx.ffi
        self.ctx.lib.vkFreeMemory(self.ctx.device, memory, ffi.NULL)
        self.allocations -= 1
        self.held -= self._sizes.pop(int(ffi.cast("uintptr_t", memory)))

    def address_flags(self) -> object:
        """The end of a VkMemoryAllocateInfo's pNext chain, for ``new_struct``: device-address allocation flags where
        buffers have device addresses, else None (NULL)."""
        if not self.addressable:
            return None
        return new_struct("VkMemoryAllocateFlagsInfo", flags=self.ctx.lib.VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT)

    def address(self, buffer) -> int:
        """The device address of a buffer (0 where the device has no buffer device addresses)."""
        if not self.addressable:
            return 0
        info = new_struct("VkBufferDeviceAddressInfo", buffer=buffer)
        return int(self.ctx.lib.vkGetBufferDeviceAddress(self.ctx.device, info))

    def count(self, memory, size: int) -> None:
        """Count a memory object made outside ``create`` (external.py's exported and imported memory, and
        ``allocate``'s), so that ``destroy`` or ``free`` frees it like one of ours."""
        self.allocations += 1
        self.held += size
        self._sizes[int(self.ctx.ffi.cast("uintptr_t", memory))] = size

    def destroy(self, memory, buffer, size: int) -> None:
        """Destroy a ``create``'s buffer and free its memory (no submitted work may use it)."""
        ffi, lib = self.ctx.ffi, self.ctx.lib
        lib.vkDestroyBuffer(self.ctx.device, buffer, ffi.NULL)
        lib.vkFreeMemory(self.ctx.device, memory, ffi.NULL)
        self.allocations -= 1
        self.held -= self._sizes.pop(int(ffi.cast("uintptr_t", memory)), size)

    def map(self, memory, size: int, what: str):
        """A ``char*`` to the first ``size`` bytes of host-visible ``memory``."""
        ffi, lib = self.ctx.ffi, self.ctx.lib
        ptr = ffi.new("void**")
        check(
            lib.vkMapMemory(self.ctx.device, memory, 0, size, 0, ptr),
            f"vkMapMemory ({what})",
            ErrorStatus.MemoryAllocation,
        )
        return ffi.cast("char*", ptr[0])

    def unmap(self, memory) -> None:
        self.ctx.lib.vkUnmapMemory(self.ctx.device, memory)
