"""MemoryPool: device buffers with reference counts, sub-allocated from device-local memory, and transfers.

Where memory lives and why:
- Buffers live in DEVICE_LOCAL memory (the type with the fewest other properties, so the plain VRAM type on a
  discrete GPU). The original backend took the first HOST_VISIBLE+HOST_COHERENT type, which on the H200 is system
  memory: kernels then read over PCIe, 21x slower.
- Small buffers share 64 MiB chunks (one VkDeviceMemory + one VkBuffer each, buddy-allocated, so an allocation is
  bookkeeping, not a driver call); large ones get their own memory. Limits each give their own clear error.
- Transfers stream through a ring of staging buffers in host memory (HOST_CACHED where offered, so read-backs never
  read through the BAR); the memcpy of one chunk runs with the GIL released while the DMA of another is in flight.

Threads: allocation happens in the caller's thread under the pool's lock (creating memory objects is thread-safe
in Vulkan; only queues and command pools need one owner). Freeing goes through the worker, which holds a buffer
until every batch that used it has completed; the caller never waits.
"""
from __future__ import annotations

import functools
import logging
import struct
import threading
import time
from collections import deque
from dataclasses import dataclass

from .context import WAKE_S, DeviceContext, Signal, next_id
from .discovery import memory_budget
from .errors import BackendError, ErrorStatus, InvalidArgumentTypeError, check
from .types import HostBuffer, PoolStats

log = logging.getLogger("vkbackend")

CHUNK_BYTES = 64 << 20        # sub-allocation chunk
MIN_BLOCK = 256               # smallest block; also >= every driver's minStorageBufferOffsetAlignment we know of
SUBALLOC_MAX = 16 << 20       # larger buffers get their own VkDeviceMemory
RECENT_PER_ORDER = 64         # freed blocks kept per size for O(1) reuse
LAZY_FREE_BYTES = 16 << 20    # a release of this much, or with this many buffers waiting, wakes the worker to free them
LAZY_FREE_BUFFERS = 1024
COPY_RECORD = struct.Struct("<9I")


# Interrupts (Ctrl-C). A KeyboardInterrupt lands in the caller's thread between bytecodes, after any call, at a
# `with` block's exit and at a loop's back edge. The transfers and the pool keep every staging buffer and every block
# either listed or owned by something a handler or the worker gives back, by taking and recording them in
# statements with no call in between. A try block must not open with a loop: CPython 3.11 raises an interrupt
# taken at the loop's back edge from the instruction before the loop's head, outside the try, so neither the
# handlers nor the finally run.


def _order_of(nbytes: int) -> int:
    return max(0, (max(nbytes, MIN_BLOCK) - 1).bit_length() - MIN_BLOCK.bit_length() + 1)


class _Chunk:
    """One VkDeviceMemory bound to one VkBuffer, carved up by a buddy allocator."""

    def __init__(self, memory, buffer, size: int) -> None:
        self.memory, self.buffer, self.size = memory, buffer, size
        self.top = _order_of(size)
        self.free: list[set[int]] = [set() for _ in range(self.top + 1)]
        self.free[self.top].add(0)
        self.used = 0

    def take(self, order: int) -> int | None:
        k = order
        while k <= self.top and not self.free[k]:
            k += 1
        if k > self.top:
            return None
        offset = self.free[k].pop()
        while k > order:  # split, keeping the upper halves free
            k -= 1
            self.free[k].add(offset + (MIN_BLOCK << k))
        self.used += MIN_BLOCK << order
        return offset

    def give(self, offset: int, order: int) -> None:
        self.used -= MIN_BLOCK << order
        while order < self.top:
            buddy = offset ^ (MIN_BLOCK << order)
            if buddy not in self.free[order]:
                break
            self.free[order].remove(buddy)
            offset = min(offset, buddy)
            order += 1
        self.free[order].add(offset)


@dataclass(eq=False)
class _Buffer:
    """A live buffer or view, as the pool knows it."""

    id: int
    slot: int
    size: int
    vk_buffer: object
    offset: int                   # of the buffer's bytes inside vk_buffer
    root: "_Buffer"               # itself, or the parent for a view (hazards and lifetime follow the root)
    chunk: _Chunk | None = None   # sub-allocated: its chunk and order; dedicated: None
    order: int = 0
    memory: object = None         # dedicated VkDeviceMemory
    refcount: int = 1
    views: int = 0                # live views of this root: each holds one of its references


class _StagingRing:
    """Fixed-size staging buffers in host memory, each a slot of the buffer table, handed out one at a time."""

    def __init__(self, pool: "MemoryPool", chunk_bytes: int, count: int) -> None:
        ctx = pool.ctx
        lib = ctx.lib
        self.chunk_bytes = chunk_bytes
        props = lib.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | lib.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
        type_index = pool._pick_type(required=props, preferred=lib.VK_MEMORY_PROPERTY_HOST_CACHED_BIT,
                                     avoid=lib.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT)
        self.memory, self.buffer = pool._create_memory(chunk_bytes * count, type_index, "staging ring")
        try:
            self.mapped = pool._map(self.memory, chunk_bytes * count)
        except BackendError:
            pool._destroy_memory(self.memory, self.buffer, chunk_bytes * count)
            raise
        self.ctx = ctx
        # Free (slot, host pointer) pairs. Taken and given back under a plain Lock, whose `with` an interrupt cannot
        # split (Condition's can), and only in statements without a call between taking a pair and recording who
        # holds it: a KeyboardInterrupt lands between bytecodes, and here it cannot lose one.
        self.lock = threading.Lock()
        self.free: list[tuple[int, object]] = []
        self.freed = Signal()  # set when a pair comes back
        self.slots = []
        for i in range(count):
            slot = pool._new_slot(self.buffer, i * chunk_bytes, chunk_bytes, None)
            self.slots.append(slot)
            self.free.append((slot, self.mapped + i * chunk_bytes))

    def acquire(self, lease: "_Lease", block: bool = True) -> bool:
        """Fill ``lease`` with a free staging buffer; False when ``block`` is false and none is free. Blocking, it
        raises ``KernelSync`` when none frees up within the sync deadline (they come back as the GPU finishes their
        copies), and the closed error as soon as the device is closed."""
        ctx = self.ctx
        deadline = time.monotonic() + ctx.sync_timeout_s
        while True:
            if ctx.closed:
                raise ctx.closed_error()
            with self.lock:
                if self.free:
                    lease.slot, lease.host = self.free[-1]
                    del self.free[-1]
                    return True
            if not block:
                return False
            left = deadline - time.monotonic()
            if left <= 0:
                raise BackendError(ErrorStatus.KernelSync,
                                   f"no staging buffer came free within {ctx.sync_timeout_s:.1f} s "
                                   "(VKBACKEND_SYNC_TIMEOUT_S): earlier copies have not completed on the GPU")
            self.freed.take(min(WAKE_S, left))


class _Lease:
    """One staging buffer while a transfer holds it, and which part of the transfer it carries.

    Giving it back is idempotent, so a transfer interrupted (Ctrl-C) or failing while it holds one can hand the
    give-back to the worker, to run after everything queued so far has completed, whether or not its copy was queued.
    """

    __slots__ = ("ring", "slot", "host", "pos", "n", "ticket")

    def __init__(self, ring: _StagingRing, pos: int = 0, n: int = 0) -> None:
        self.ring, self.pos, self.n = ring, pos, n
        self.slot = self.host = self.ticket = None

    def give_back(self) -> None:
        ring = self.ring
        with ring.lock:
            slot, self.slot = self.slot, None
            if slot is not None:
                ring.free.append((slot, self.host))
        ring.freed.set()


class MemoryPool:
    """Device buffers of one device, named by integer ids, with reference counts.

    ``allocate`` starts a buffer at count 1; ``retain``/``release`` move it; at zero it is freed once no submitted
    GPU work uses it. Transfers are ordered against launches on the same device.
    """

    def __init__(self, ctx: DeviceContext) -> None:
        self.ctx = ctx
        lib = ctx.lib
        info = ctx.info
        self._lock = threading.Lock()
        self._entries: dict[int, _Buffer] = {}
        self.slot_of: dict[int, int] = {}        # bindable live ids -> slot; Device.launch reads this directly
        self._free_slots: deque[int] = deque()   # FIFO: a released slot is reused as late as possible
        self._next_slot = 1                      # slot 0 stays empty so a zeroed record never names a buffer
        self._chunks: list[_Chunk] = []
        self._recent: dict[int, list[tuple[_Chunk, int]]] = {}
        self._allocations = 0                    # VkDeviceMemory objects we hold
        self._sizes: dict[int, int] = {}         # their sizes as allocated, by handle
        # Released buffers waiting to be freed on the worker, with their release numbers: a free scheduled after
        # release n frees every buffer up to n, so one whose scheduling an interrupt lost goes with the next.
        self._dying: deque[tuple[int, _Buffer]] = deque()
        self._released = 0
        self._destroyed = False
        # Threads inside a transfer may be copying into or out of the mapped staging ring with the GIL released:
        # close() waits for them to leave before it unmaps it. A plain Lock, whose `with` an interrupt cannot split
        # (see Signal).
        self._transfer_lock = threading.Lock()
        self._transfers: list[object] = []
        self._held = 0                           # bytes of device memory we hold
        self.alignment = max(MIN_BLOCK, info.min_storage_buffer_offset_alignment)
        self.device_type = self._pick_type(required=lib.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, preferred=0,
                                           avoid=lib.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT)
        self.heap_index = ctx.handles.physical.memory_types[self.device_type][1]
        heap_size = ctx.handles.physical.heaps[self.heap_index][0]
        self.chunk_bytes = min(CHUNK_BYTES, info.max_memory_allocation_size, max(heap_size // 16, 1 << 20))
        self.chunk_bytes = 1 << (self.chunk_bytes.bit_length() - 1)
        self._budget_ext = "VK_EXT_memory_budget" in ctx.handles.extensions
        cfg = ctx.config
        chunk = cfg.staging_chunk_bytes or ((32 << 20) if info.device_type in ("discrete_gpu", "integrated_gpu") else (8 << 20))
        self._staging = _StagingRing(self, max(1 << 16, chunk), max(2, cfg.staging_slots))
        self.copy_threads = cfg.resolved_copy_threads()

    # ----- memory types and raw allocations -------------------------------------------------------------------
    def _pick_type(self, required: int, preferred: int, avoid: int) -> int:
        """The memory type with all of ``required``; then most of ``preferred``, fewest of ``avoid``, fewest bits."""
        lib = self.ctx.lib
        ignore = lib.VK_MEMORY_PROPERTY_PROTECTED_BIT | lib.VK_MEMORY_PROPERTY_LAZILY_ALLOCATED_BIT
        best, best_key = None, None
        for index, (flags, heap) in enumerate(self.ctx.handles.physical.memory_types):
            if flags & required != required or flags & ignore:
                continue
            key = (bin(flags & preferred).count("1"), -bin(flags & avoid).count("1"), -bin(flags).count("1"))
            if best_key is None or key > best_key:
                best, best_key = index, key
        if best is None:
            raise BackendError(ErrorStatus.Initialization, f"{self.ctx.info.name} has no memory type with flags {required:#x}")
        return best

    def _create_memory(self, size: int, type_index: int, what: str):
        """One VkDeviceMemory bound to one VkBuffer covering all of it."""
        ctx = self.ctx
        ffi, lib = ctx.ffi, ctx.lib
        info = ctx.info
        if size > info.max_memory_allocation_size:
            raise BackendError(ErrorStatus.MemoryAllocation,
                               f"{what}: {size} bytes exceed maxMemoryAllocationSize ({info.max_memory_allocation_size}) of "
                               f"{info.name}; split the data into smaller buffers")
        if self._allocations >= info.max_memory_allocation_count:
            raise BackendError(ErrorStatus.MemoryAllocation,
                               f"{what}: {info.name} allows {info.max_memory_allocation_count} memory allocations "
                               "(maxMemoryAllocationCount) and all are in use; release buffers")
        usage = (lib.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | lib.VK_BUFFER_USAGE_TRANSFER_SRC_BIT
                 | lib.VK_BUFFER_USAGE_TRANSFER_DST_BIT)
        binfo = ffi.new("VkBufferCreateInfo*", {"sType": lib.VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, "size": size,
                                                "usage": usage, "sharingMode": lib.VK_SHARING_MODE_EXCLUSIVE})
        buf = ffi.new("VkBuffer*")
        mem = ffi.new("VkDeviceMemory*")
        try:  # on any failure, an interrupt (Ctrl-C) included, nothing made here is left behind
            check(lib.vkCreateBuffer(ctx.device, binfo, ffi.NULL, buf), f"vkCreateBuffer ({what}, {size} bytes)",
                  ErrorStatus.MemoryAllocation)
            req = ffi.new("VkMemoryRequirements*")
            lib.vkGetBufferMemoryRequirements(ctx.device, buf[0], req)
            ainfo = ffi.new("VkMemoryAllocateInfo*", {"sType": lib.VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                                                      "allocationSize": req.size, "memoryTypeIndex": type_index})
            check(lib.vkAllocateMemory(ctx.device, ainfo, ffi.NULL, mem),
                  f"vkAllocateMemory ({what}, {req.size} bytes; {self.free_bytes} bytes free)", ErrorStatus.MemoryAllocation)
            check(lib.vkBindBufferMemory(ctx.device, buf[0], mem[0], 0), f"vkBindBufferMemory ({what})",
                  ErrorStatus.MemoryAllocation)
            key, held = int(ffi.cast("uintptr_t", mem[0])), req.size
        except BaseException:
            if mem[0] != ffi.NULL:
                lib.vkFreeMemory(ctx.device, mem[0], ffi.NULL)
            if buf[0] != ffi.NULL:
                lib.vkDestroyBuffer(ctx.device, buf[0], ffi.NULL)
            raise
        # No call from here to the caller's use of the handles, so an interrupt cannot land in between.
        self._allocations += 1
        self._held += held
        self._sizes[key] = held  # the driver may round up: give back what was held
        return mem[0], buf[0]

    def _destroy_memory(self, memory, buffer, size: int) -> None:
        ffi, lib = self.ctx.ffi, self.ctx.lib
        lib.vkDestroyBuffer(self.ctx.device, buffer, ffi.NULL)
        lib.vkFreeMemory(self.ctx.device, memory, ffi.NULL)
        self._allocations -= 1
        self._held -= self._sizes.pop(int(ffi.cast("uintptr_t", memory)), size)

    def _map(self, memory, size: int):
        ffi, lib = self.ctx.ffi, self.ctx.lib
        ptr = ffi.new("void**")
        check(lib.vkMapMemory(self.ctx.device, memory, 0, size, 0, ptr), "vkMapMemory (staging ring)",
              ErrorStatus.MemoryAllocation)
        return ffi.cast("char*", ptr[0])

    def _new_slot(self, vk_buffer, offset: int, size: int, root_slot: int | None) -> int:
        slot = self._free_slots.popleft() if self._free_slots else None
        if slot is None:
            slot, self._next_slot = self._next_slot, self._next_slot + 1
        root = slot if root_slot is None else root_slot
        if self.ctx.lib.vkb_slots_set(self.ctx.slots, slot, vk_buffer, offset, size, root) != 0:
            raise BackendError(ErrorStatus.MemoryAllocation, "too many live buffers (16 Mi slots); release some")
        return slot

    # ----- public API -------------------------------------------------------------------------------------------
    @property
    def free_bytes(self) -> int:
        """Bytes this process can still allocate on the device: the driver's budget for the heap (VK_EXT_memory_budget)
        less what is in use, or without that extension the heap's size less what this pool holds."""
        budget, usage = memory_budget(self.ctx.handles.physical, self._budget_ext)[self.heap_index]
        if self._budget_ext:
            return max(0, budget - usage)
        return max(0, budget - self._held)

    def allocate(self, nbytes: int) -> int:
        """A new device buffer of ``nbytes`` bytes, with reference count 1. Its contents are undefined."""
        self.ctx.ensure_usable()
        if not _is_int(nbytes) or nbytes <= 0:
            raise BackendError(ErrorStatus.InvalidArgument, f"allocate needs a positive byte count, got {nbytes!r}")
        info = self.ctx.info
        if nbytes > info.max_memory_allocation_size:
            raise BackendError(ErrorStatus.MemoryAllocation,
                               f"a buffer of {nbytes} bytes exceeds maxMemoryAllocationSize ({info.max_memory_allocation_size}) "
                               f"of {info.name}; split the data into smaller buffers")
        for attempt in (0, 1):
            try:
                with self._lock:
                    if self.ctx.closed:  # close() destroys the pool under this lock: nothing may be made after it
                        raise self.ctx.closed_error()
                    if nbytes <= SUBALLOC_MAX and nbytes <= self.chunk_bytes // 4:
                        chunk, offset, order = self._take_block(nbytes)
                        vk_buffer, memory = chunk.buffer, None
                    else:
                        free = self.free_bytes
                        if nbytes > free:
                            raise BackendError(ErrorStatus.MemoryAllocation,
                                               f"a buffer of {nbytes} bytes does not fit: {free} bytes of device memory are free "
                                               f"on {info.name}; release buffers or use a smaller size")
                        memory, vk_buffer = self._create_memory(nbytes, self.device_type, "buffer")
                        chunk, offset, order = None, 0, 0
                    try:
                        buf_id = next_id()
                        slot = self._new_slot(vk_buffer, offset, nbytes, None)
                        entry = _Buffer(buf_id, slot, nbytes, vk_buffer, offset, None, chunk, order, memory)  # type: ignore[arg-type]
                        entry.root = entry
                        self._entries[buf_id] = entry
                    except BaseException:  # out of slots, or interrupted (Ctrl-C): the memory goes back
                        if chunk is not None:
                            chunk.give(offset, order)
                        else:
                            self._destroy_memory(memory, vk_buffer, nbytes)
                        raise
                    if nbytes <= info.max_storage_buffer_range:
                        self.slot_of[buf_id] = slot
                break
            except BackendError as error:  # out of memory while released buffers wait for the GPU: wait, retry
                if attempt or error.status is not ErrorStatus.MemoryAllocation or not self._reclaim():
                    raise
        return buf_id

    def _reclaim(self) -> bool:
        """Wait (within the sync deadline) for the GPU work that holds back released buffers, so that their memory is
        free again; False when there was nothing to wait for or the wait failed."""
        worker = self.ctx.worker
        if worker is None or not self._dying:
            return False
        try:
            worker.drain()
        except BackendError:
            return False
        return True

    def _take_block(self, nbytes: int):
        order = _order_of(max(nbytes, self.alignment))
        recent = self._recent.get(order)
        if recent:
            chunk, offset = recent.pop()
            return chunk, offset, order
        for chunk in self._chunks:
            offset = chunk.take(order)
            if offset is not None:
                return chunk, offset, order
        self._trim_recent()  # blocks held for reuse may complete a buddy pair before we take new memory
        for chunk in self._chunks:
            offset = chunk.take(order)
            if offset is not None:
                return chunk, offset, order
        if self.chunk_bytes > self.free_bytes:
            raise BackendError(ErrorStatus.MemoryAllocation,
                               f"a buffer of {nbytes} bytes needs a new {self.chunk_bytes}-byte chunk but only "
                               f"{self.free_bytes} bytes are free on {self.ctx.info.name}; release buffers")
        chunk = _Chunk(None, None, self.chunk_bytes)
        chunk.memory, chunk.buffer = self._create_memory(self.chunk_bytes, self.device_type, "chunk")
        self._chunks.append(chunk)  # listed with no call after the handles arrive: an interrupt cannot lose them
        return chunk, chunk.take(order), order

    def _trim_recent(self) -> None:
        for order, blocks in self._recent.items():
            while blocks:  # each block leaves the list before it is given: interrupted, it can only be lost, not doubled
                chunk, offset = blocks.pop()
                chunk.give(offset, order)

    def _entry(self, buf: int, what: str) -> _Buffer:
        try:
            return self._entries[buf]
        except (KeyError, TypeError):
            kind = "" if isinstance(buf, int) and not isinstance(buf, bool) else f" ({type(buf).__name__}, not an id)"
            raise BackendError(ErrorStatus.InvalidArgument,
                               f"{what}: buffer {buf!r}{kind} is not a live buffer of {self.ctx.info.name}; ids are "
                               "the ints allocate() and view() return, until released") from None

    def size_of(self, buf: int) -> int:
        """The size in bytes of a live buffer or view."""
        return self._entry(buf, "size_of").size

    def retain(self, buf: int) -> None:
        """Add one reference to ``buf``."""
        with self._lock:
            self._entry(buf, "retain").refcount += 1

    def release(self, buf: int) -> None:
        """Drop one reference; at zero the buffer is freed once no submitted GPU work uses it. Never blocks.

        A view's last release also drops the reference it holds on its root, at once, so which ids are live never
        depends on the GPU's progress; only the memory waits. In a forked child it does nothing: the buffer is the
        parent's (and a lock the parent's threads held at the fork would stay held here).
        """
        if self.ctx.forked:
            return
        with self._lock:
            entry = self._entry(buf, "release")
            if entry.refcount <= entry.views:  # freeing it would leave its views pointing at freed memory
                raise BackendError(ErrorStatus.InvalidArgument,
                                   f"release: buffer {buf} has no reference left of its own; its {entry.views} live "
                                   "view(s) hold the rest (release it once per allocate/retain, and its views)")
            entry.refcount -= 1
            if entry.refcount:
                return
            # No call from here to the end of the block (the deque's += runs in C without a call): an interrupt
            # (Ctrl-C) cannot leave a buffer half released.
            self._released += 1
            del self._entries[entry.id]
            if entry.id in self.slot_of:
                del self.slot_of[entry.id]
            root, nbytes = entry.root, entry.size
            if root is not entry:
                root.views -= 1
                root.refcount -= 1
                nbytes = 0
                if not root.refcount:
                    del self._entries[root.id]
                    if root.id in self.slot_of:
                        del self.slot_of[root.id]
                    nbytes = root.size
                    self._dying += ((self._released, entry), (self._released, root))
            if root is entry or root.refcount:
                self._dying += ((self._released, entry),)
            upto = self._released
        worker = self.ctx.worker
        if worker.idle and not worker.queue and self._free_dying_here():  # nothing queued, recorded or running
            return
        # A release should not cost a wake-up of the worker (a thread switch): frees wait for its next wake, unless
        # they hold back much memory or many buffers.
        worker.defer(functools.partial(self._free_dying, upto), nbytes,
                     wake=nbytes >= LAZY_FREE_BYTES or len(self._dying) >= LAZY_FREE_BUFFERS)

    def _free_dying_here(self) -> bool:
        """In the caller's thread, while no GPU work can use them: free the released views and sub-allocated blocks
        at once, each without a call that an interrupt could split (the rest, dedicated memory and blocks past the
        recent ones kept, goes to the worker). True when nothing is left waiting."""
        lib, ffi = self.ctx.lib, self.ctx.ffi
        with self._lock:
            if self._destroyed:  # (and the with block must not open with the loop: see Interrupts above)
                return True
            while self._dying:
                entry = self._dying[0][1]
                if entry.root is entry:
                    recent = self._recent.setdefault(entry.order, [])
                    if entry.chunk is None or len(recent) >= RECENT_PER_ORDER:
                        return False
                lib.vkb_slots_set(self.ctx.slots, entry.slot, ffi.NULL, 0, 0, entry.slot)  # repeating it is harmless
                del self._dying[0]
                self._free_slots += (entry.slot,)
                if entry.root is entry:
                    recent += ((entry.chunk, entry.offset),)
        return True

    def _free_dying(self, upto: int) -> None:
        """On the worker, once the GPU work queued before it is done: free the buffers released up to number ``upto``
        (all released before this was queued, so nothing still queued uses them)."""
        dead = []
        with self._lock:
            while self._dying and self._dying[0][0] <= upto:
                dead.append(self._dying.popleft()[1])
        self._free(dead)

    def _free(self, dead: list[_Buffer]) -> None:
        """Free released buffers (a view first, then its root when that was its last reference)."""
        with self._lock:
            if self._destroyed:  # a release racing close(): destroy() freed everything
                return
            for entry in dead:
                self.ctx.lib.vkb_slots_set(self.ctx.slots, entry.slot, self.ctx.ffi.NULL, 0, 0, entry.slot)
                self._free_slots.append(entry.slot)
                if entry.root is not entry:
                    continue  # a view owns no memory
                if entry.chunk is not None:
                    recent = self._recent.setdefault(entry.order, [])
                    if len(recent) < RECENT_PER_ORDER:
                        recent.append((entry.chunk, entry.offset))
                    else:
                        entry.chunk.give(entry.offset, entry.order)
                else:
                    self._destroy_memory(entry.memory, entry.vk_buffer, entry.size)

    def view(self, buf: int, offset: int, nbytes: int) -> int:
        """A new buffer id for ``nbytes`` bytes of ``buf`` starting at ``offset``; it holds a reference to ``buf``.

        ``offset`` must be a multiple of ``info.min_storage_buffer_offset_alignment``.
        """
        align = self.ctx.info.min_storage_buffer_offset_alignment
        with self._lock:
            parent = self._entry(buf, "view")
            if not _is_int(offset) or offset < 0 or offset % align:
                raise BackendError(ErrorStatus.InvalidArgument,
                                   f"view offset {offset!r} must be a non-negative multiple of {align} "
                                   "(minStorageBufferOffsetAlignment)")
            if not _is_int(nbytes) or nbytes <= 0 or offset + nbytes > parent.size:
                raise BackendError(ErrorStatus.InvalidArgument,
                                   f"view [{offset}, {offset}+{nbytes!r}) does not fit in buffer {buf} of {parent.size} bytes")
            root = parent.root
            entry = _Buffer(next_id(), 0, nbytes, root.vk_buffer, parent.offset + offset, root)
            entry.slot = self._new_slot(root.vk_buffer, parent.offset + offset, nbytes, root.slot)
            # From here on no call, so an interrupt cannot leave the view half made.
            self._entries[entry.id] = entry
            root.refcount += 1
            root.views += 1
            if nbytes <= self.ctx.info.max_storage_buffer_range:
                self.slot_of[entry.id] = entry.slot
        return entry.id

    # ----- transfers ----------------------------------------------------------------------------------------------
    def _check_range(self, entry: _Buffer, offset: int, nbytes: int, what: str) -> None:
        if not _is_int(offset) or offset < 0 or offset + nbytes > entry.size:
            raise BackendError(ErrorStatus.InvalidArgument,
                               f"{what}: {nbytes} bytes at offset {offset!r} do not fit in buffer {entry.id} "
                               f"of {entry.size} bytes")

    def host_to_pool(self, src: HostBuffer, dst: int, offset: int = 0) -> None:
        """Copy a host buffer (any buffer-protocol object) into ``dst`` at byte ``offset``.

        Ordered after every earlier launch and copy on this device. ``src`` may be reused as soon as this returns.
        """
        self.ctx.ensure_usable()
        data = _bytes_view(src, writable=False)
        nbytes = data.nbytes
        entry = self._entry(dst, "host_to_pool")
        self._check_range(entry, offset, nbytes, "host_to_pool")
        if nbytes == 0:
            return
        ffi, lib = self.ctx.ffi, self.ctx.lib
        src_ptr = ffi.cast("char*", ffi.from_buffer(data))
        ring, worker = self._staging, self.ctx.worker
        lease, token = None, object()
        try:
            self._begin_transfer(token)
            pos = 0
            while pos < nbytes:
                n = min(ring.chunk_bytes, nbytes - pos)
                lease = _Lease(ring)
                ring.acquire(lease)
                lib.vkb_copy(lease.host, src_ptr + pos, n, self.copy_threads)
                record = COPY_RECORD.pack(lib.VKB_RECORD_COPY, lease.slot, entry.slot, 0, 0, *_split(offset + pos), *_split(n))
                worker.copy(record, lease.give_back)
                pos += n
        except BaseException:
            if lease is not None and lease.slot is not None:  # its copy may be queued: give it back after that
                worker.defer(lease.give_back)
            raise
        finally:
            with self._transfer_lock:  # inline, not a call, which an interrupt could skip
                if token in self._transfers:
                    self._transfers.remove(token)
        del src_ptr  # the last memcpy is done: the caller may reuse src

    def pool_to_host(self, src: int, dst: HostBuffer, offset: int = 0) -> None:
        """Copy ``len(dst)`` bytes of ``src`` from byte ``offset`` into the writable host buffer ``dst``.

        A sync point: it waits for every earlier launch and copy, and raises the first asynchronous error since the
        last sync point.
        """
        self.ctx.ensure_usable()
        data = _bytes_view(dst, writable=True)
        nbytes = data.nbytes
        entry = self._entry(src, "pool_to_host")
        self._check_range(entry, offset, nbytes, "pool_to_host")
        ffi, lib = self.ctx.ffi, self.ctx.lib
        dst_ptr = ffi.cast("char*", ffi.from_buffer(data))
        ring, worker = self._staging, self.ctx.worker
        leases: deque[_Lease] = deque()  # oldest first; each is listed before it holds a staging buffer

        def finish_oldest() -> None:
            lease = leases[0]
            worker.wait_ticket(lease.ticket)  # on a timeout the lease stays listed, and is given back below
            lib.vkb_copy(dst_ptr + lease.pos, lease.host, lease.n, self.copy_threads)
            lease.give_back()
            leases.popleft()

        token = object()
        try:
            self._begin_transfer(token)
            pos = 0
            while pos < nbytes:
                n = min(ring.chunk_bytes, nbytes - pos)
                lease = _Lease(ring, pos, n)
                leases.append(lease)
                if not ring.acquire(lease, block=len(leases) == 1):  # never wait for one while holding another
                    leases.pop()
                    finish_oldest()
                    continue
                record = COPY_RECORD.pack(lib.VKB_RECORD_COPY, entry.slot, lease.slot, *_split(offset + pos), 0, 0,
                                          *_split(n))
                lease.ticket = Signal()
                worker.copy(record, lease.ticket.set, flush=True)
                pos += n
            while leases:
                finish_oldest()
        except BaseException:  # an error, a timeout or an interrupt: give each buffer back once its copy is done
            for lease in leases:
                if lease.slot is not None:
                    worker.defer(lease.give_back)
            raise
        finally:
            with self._transfer_lock:  # inline, not a call, which an interrupt could skip
                if token in self._transfers:
                    self._transfers.remove(token)
        worker.sync()

    def _begin_transfer(self, token: object) -> None:
        """List a transfer (first thing in its try block, so that its finally always unlists it)."""
        with self._transfer_lock:
            if self.ctx.closed:  # checked under the lock that close() waits behind: no transfer starts after it
                raise self.ctx.closed_error()
            self._transfers.append(token)

    def wait_transfers(self, timeout_s: float) -> bool:
        """After close() began: wait for threads still inside a transfer to leave (they notice the close within
        WAKE_S at every wait); False when one is still inside after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while True:
            with self._transfer_lock:  # a transfer that passed its closed check has counted itself by now
                if not self._transfers:
                    return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(WAKE_S / 10)

    def pool_to_pool(self, src_pool: "MemoryPool", src: int, dst: int) -> None:
        """Copy all of ``src`` (a buffer of ``src_pool``) into ``dst`` (of this pool), which must be as large.

        Within one device this is one GPU copy, ordered like launches; between devices the bytes pass through host
        memory in chunks.
        """
        if not isinstance(src_pool, MemoryPool):
            raise BackendError(ErrorStatus.InvalidArgument,
                               f"pool_to_pool: src_pool must be a MemoryPool (device.memory_pool), got {type(src_pool).__name__}")
        s = src_pool._entry(src, "pool_to_pool source")
        d = self._entry(dst, "pool_to_pool destination")
        if d.size < s.size:
            raise BackendError(ErrorStatus.InvalidArgument,
                               f"pool_to_pool: destination {dst} has {d.size} bytes, source {src} has {s.size}")
        if src_pool is self:
            self.ctx.ensure_usable()
            record = COPY_RECORD.pack(self.ctx.lib.VKB_RECORD_COPY, s.slot, d.slot, 0, 0, 0, 0, *_split(s.size))
            self.ctx.worker.copy(record, None)
            return
        import numpy as np
        bounce = np.empty(min(s.size, 4 * self._staging.chunk_bytes), dtype=np.uint8)
        pos = 0
        while pos < s.size:
            n = min(bounce.size, s.size - pos)
            src_pool.pool_to_host(src, bounce[:n], pos)
            self.host_to_pool(bounce[:n], dst, pos)
            pos += n

    # ----- teardown and accounting --------------------------------------------------------------------------------
    def trim(self) -> int:
        """Give back to the driver the device memory the pool keeps for reuse: freed blocks held for quick reuse, and
        chunks no live buffer uses. Buffers released but still waiting for the GPU are not touched (a sync first makes
        them count). Returns the bytes given back. The pool never does this on its own: after a peak it keeps what
        the peak needed, like a caching allocator; call this to return it."""
        freed = 0
        with self._lock:
            self._trim_recent()
            for chunk in [c for c in self._chunks if c.used == 0]:  # every block was freed after the GPU was done
                self._chunks.remove(chunk)  # unlisted first: an interrupt can leak it, never free it twice
                self._destroy_memory(chunk.memory, chunk.buffer, chunk.size)
                freed += chunk.size
        return freed

    def stats(self) -> PoolStats:
        """Counters for tests and the soak: live buffers, memory objects and bytes held."""
        with self._lock:
            return {"live_buffers": len(self._entries), "memory_objects": self._allocations, "held_bytes": self._held,
                    "chunks": len(self._chunks)}

    def destroy(self) -> None:
        """Free every Vulkan object of the pool (the device must be idle)."""
        lib = self.ctx.lib
        with self._lock:
            self._destroyed = True
            for entry in [*self._entries.values(), *(e for _, e in self._dying)]:
                if entry.root is entry and entry.chunk is None and entry.memory is not None:
                    self._destroy_memory(entry.memory, entry.vk_buffer, entry.size)
            self._entries.clear()
            self._dying.clear()
            self.slot_of.clear()
            for chunk in self._chunks:
                self._destroy_memory(chunk.memory, chunk.buffer, chunk.size)
            self._chunks.clear()
            self._recent.clear()
            lib.vkUnmapMemory(self.ctx.device, self._staging.memory)
            self._destroy_memory(self._staging.memory, self._staging.buffer,
                                 self._staging.chunk_bytes * len(self._staging.slots))


def _is_int(value) -> bool:
    """An int, and not a bool: True is 1 to Python, but as a size or an offset it is a mistake."""
    return isinstance(value, int) and not isinstance(value, bool)


def _split(value: int) -> tuple[int, int]:
    return value & 0xFFFFFFFF, value >> 32


def _bytes_view(obj, writable: bool) -> memoryview:
    try:
        view = memoryview(obj)
    except TypeError:
        raise InvalidArgumentTypeError(ErrorStatus.InvalidArgument,
                                       f"expected a buffer-protocol object (bytes, bytearray, numpy array), got {type(obj).__name__}") from None
    if not view.c_contiguous:
        raise BackendError(ErrorStatus.InvalidArgument, "the host buffer must be C-contiguous (use numpy.ascontiguousarray)")
    if writable and view.readonly:
        raise BackendError(ErrorStatus.InvalidArgument, "the destination host buffer is read-only")
    return view.cast("B") if view.format != "B" or view.ndim != 1 else view
