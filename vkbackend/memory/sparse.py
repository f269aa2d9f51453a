"""Large buffers: one VkBuffer past the largest allocation, bound to several allocations by sparse binding.

Where the device has ``sparseBinding`` and the queue family in use binds sparse memory, a buffer larger than the
largest allocation (``maxMemoryAllocationSize``, or the configured cap: ``DeviceMemory.max_allocation``) is one
VkBuffer created with ``SPARSE_BINDING``. Its memory is pieces of at most that size, each a multiple of the buffer's
memory alignment, bound back to back by one ``vkQueueBindSparse`` (one bind info, one ``VkSparseMemoryBind`` per
piece). Kernels, copies, views and the device address see one contiguous buffer; only its memory is in pieces.

The queue is externally synchronised, and only the worker submits to it, so :func:`bind` runs on the worker
(``Worker.call``) and waits there for the bind's fence: no later submission can overtake the bind, and the buffer
is bound before its id is handed out. The pieces are allocated like every other (device-address flag, counted in
DeviceMemory); :func:`destroy` destroys the buffer, then frees the pieces.
"""

from __future__ import annotations

from typing import Any

from ..errors import BackendError, ErrorStatus, check
from ..structs import new_struct
from .device_memory import DeviceMemory

__all__ = ["LargeBuffer", "make", "bind", "destroy", "piece_sizes"]


class LargeBuffer:
    """One sparse VkBuffer of ``size`` bytes and the allocations (``pieces``, in buffer order) bound to it."""

    __slots__ = ("buffer", "size", "bound_size", "alignment", "pieces", "piece_sizes", "address", "pending", "fence")

    def __init__(self, buffer: Any, size: int, bound_size: int, alignment: int) -> None:
        self.buffer, self.size, self.bound_size, self.alignment = buffer, size, bound_size, alignment
        self.pieces: list[Any] = []  # VkDeviceMemory, listed as each is made
        self.piece_sizes: list[int] = []
        self.address = 0  # its device address once bound (0 where the device has none)
        self.pending = False  # a bind was queued and not yet seen complete
        self.fence = None  # that bind's fence, which the queue may still signal


def piece_sizes(bound_size: int, alignment: int, limit: int) -> list[int]:
    """The sizes of the allocations that back ``bound_size`` bytes (the buffer's memory requirement): as large as
    ``limit`` allows, each a multiple of ``alignment`` (sparse binds of a buffer must be), the last the rest."""
    piece = limit // alignment * alignment
    if piece <= 0:
        raise BackendError(
            ErrorStatus.MemoryAllocation,
            f"the largest allocation ({limit} bytes) is smaller than a sparse buffer's alignment "
            f"({alignment} bytes); raise VKBACKEND_MAX_ALLOCATION_BYTES",
        )
    sizes = [piece] * (bound_size // piece)
    if bound_size % piece:
        sizes.append(bound_size % piece)
    return sizes


def make(memory: DeviceMemory, nbytes: int) -> LargeBuffer:
    """A sparse VkBuffer of ``nbytes`` bytes and its allocations, not yet bound (:func:`bind` binds them). On any
    failure, an interrupt included, nothing made here is left behind."""
    ctx = memory.ctx
    ffi, lib = ctx.ffi, ctx.lib
    binfo = new_struct(
        "VkBufferCreateInfo",
        flags=lib.VK_BUFFER_CREATE_SPARSE_BINDING_BIT,
        size=nbytes,
        usage=memory.usage,
        sharingMode=lib.VK_SHARING_MODE_EXCLUSIVE,
    )
    buf = ffi.new("VkBuffer*")
    large = None
    try:
        check(
            lib.vkCreateBuffer(ctx.device, binfo, ffi.NULL, buf),
            f"vkCreateBuffer (sparse, {nbytes} bytes)",
            ErrorStatus.MemoryAllocation,
        )
        req = ffi.new("VkMemoryRequirements*")
        lib.vkGetBufferMemoryRequirements(ctx.device, buf[0], req)
        large = LargeBuffer(buf[0], nbytes, int(req.size), int(req.alignment))
        type_index = memory.local_type_for(
            int(req.memoryTypeBits),
            f"for sparse buffers (memoryTypeBits {int(req.memoryTypeBits):#x}); split the data into buffers of at most "
            f"{memory.max_allocation} bytes",
        )
        for size in piece_sizes(large.bound_size, large.alignment, memory.max_allocation):
            large.pieces.append(memory.allocate(size, type_index, f"a piece of a {nbytes}-byte sparse buffer"))
            large.piece_sizes.append(size)
    except BaseException:
        if large is not None:
            destroy(memory, large)
        elif buf[0] != ffi.NULL:
            lib.vkDestroyBuffer(ctx.device, buf[0], ffi.NULL)
        raise
    return large


def bind(memory: DeviceMemory, large: LargeBuffer) -> None:
    """On the worker (the queue's only user): bind every piece of ``large`` at its offset with one
    ``vkQueueBindSparse``, wait for its fence, and read the buffer's device address. Where it fails with
    ``large.pending`` set, the bind was queued and may still run: nothing of ``large`` may be freed before the device
    is idle."""
    ctx = memory.ctx
    ffi, lib = ctx.ffi, ctx.lib
    n = len(large.pieces)
    binds, offset = [], 0
    for piece, size in zip(large.pieces, large.piece_sizes):
        binds.append({"resourceOffset": offset, "size": size, "memory": piece, "memoryOffset": 0})
        offset += size
    info = new_struct(
        "VkBindSparseInfo",
        bufferBindCount=1,
        pBufferBinds={"buffer": large.buffer, "bindCount": n, "pBinds": binds},
    )
    fence = ffi.new("VkFence*")
    check(
        lib.vkCreateFence(ctx.device, new_struct("VkFenceCreateInfo"), ffi.NULL, fence),
        "vkCreateFence (sparse bind)",
        ErrorStatus.MemoryAllocation,
    )
    try:
        check(
            lib.vkQueueBindSparse(ctx.handles.queue, 1, info, fence[0]),
            f"vkQueueBindSparse ({n} allocations, {large.bound_size} bytes)",
            ErrorStatus.MemoryAllocation,
        )
        large.pending = True
        check(
            lib.vkWaitForFences(ctx.device, 1, fence, 1, ctx.sync_timeout_ns),
            f"vkWaitForFences (a sparse bind of {large.bound_size} bytes, within {ctx.sync_timeout_s:.1f} s: "
            "VKBACKEND_SYNC_TIMEOUT_S)",
            ErrorStatus.KernelSync,
        )
        large.pending = False
    finally:
        if large.pending:  # the queue may still signal it: destroyed with the buffer, once the device is idle
            large.fence = fence[0]
        else:
            lib.vkDestroyFence(ctx.device, fence[0], ffi.NULL)
    large.address = memory.address(large.buffer)


def destroy(memory: DeviceMemory, large: LargeBuffer) -> None:
    """Destroy the buffer, then free its pieces (no submitted work may use them, and no bind may be running)."""
    ctx = memory.ctx
    if large.fence is not None:
        fence, large.fence = large.fence, None
        ctx.lib.vkDestroyFence(ctx.device, fence, ctx.ffi.NULL)
    if large.buffer is not None:
        buffer, large.buffer = large.buffer, None  # cleared first: destroying twice is a no-op
        ctx.lib.vkDestroyBuffer(ctx.device, buffer, ctx.ffi.NULL)
    while large.pieces:
        memory.free(large.pieces.pop())
        large.piece_sizes.pop()
