"""MemoryPool: device buffers named by integer ids, with reference counts and views; their slots and blocks.

Buffers up to SUBALLOC_MAX are buddy blocks of shared chunks (buddy.py); larger ones get memory of their own
(device_memory.py), and those past the largest allocation are one sparse buffer bound to several allocations
(sparse.py). Allocation happens in the caller's thread under the pool's lock; a sparse buffer's bind, on the worker,
which owns the queue. Freeing waits for the GPU: a
released buffer's id is gone at once, but its memory and slot are freed on the worker once every batch queued before
the release has completed; while nothing is queued, recorded or in flight, views and blocks are freed at once.

Where the device has device memory the host can map in the same heap (device_memory.py), chunks are mapped. A
read-back of at most DIRECT_READ_MAX bytes from a block of one is its sync point followed by a copy straight from
the mapping: no copy command, no second batch behind the launch it waits for. On the H200 the GPU's copy into staging
and its batch cost more than the uncached read of a few hundred bytes through the BAR (docs/performance.md). An
upload into a block, while nothing is queued or running, is a copy straight into the mapping (the host's writes to
coherent memory are visible to every later submit): no staging buffer, no batch; on the H200 the host writes through
the BAR at 28-31 GB/s from 4 MiB, 1.8-3.4 times what an upload through staging reaches by its sync point.

Interrupts (Ctrl-C) land in the caller's thread between bytecodes after a call, at a ``with`` block's exit and at a
loop's back edge. The pool keeps every block and slot either listed or owned by something the worker frees, by
taking and recording them in statements with no call in between; a ``with`` block must not open with a loop (see
transfers.py).
"""

from __future__ import annotations

import functools
import logging
import threading
import weakref
from collections import deque
from typing import TYPE_CHECKING, Any, Callable

from .. import ids, records
from ..errors import BackendError, ErrorStatus, InvalidArgumentTypeError, index_argument
from ..finalizers import collecting
from ..ids import next_buffer_id
from ..types import HostBuffer, PoolStats
from . import sparse
from .buddy import MIN_BLOCK, Chunk, order_of
from .device_memory import DeviceMemory
from .external import Export, ExportedMemory, Import
from .staging import StagingRing
from .transfers import Transfers

if TYPE_CHECKING:
    from ..context import DeviceContext
    from ..worker import Worker

log = logging.getLogger("vkbackend")

__all__ = ["MemoryPool"]

CHUNK_BYTES = 64 << 20  # the size of a chunk that small buffers are blocks of
SUBALLOC_MAX = 16 << 20  # larger buffers get their own VkDeviceMemory
SPARES_PER_ORDER = 64  # released blocks kept per order for O(1) reuse (spares)
LAZY_FREE_BYTES = 16 << 20  # a release of this much, or with this many buffers waiting, wakes the worker to free them
LAZY_FREE_BUFFERS = 1024
DIRECT_READ_MAX = 256  # read-backs up to this size from a mapped chunk read it straight (BAR reads are uncached)
# uploads into a block of a mapped chunk of a quiet device write it straight, blocks of every size (tests set it to 0
# to send uploads through staging)
DIRECT_WRITE_MAX = SUBALLOC_MAX
STAGING_BUFFER_BYTES = {"gpu": 32 << 20, "other": 8 << 20}  # the default size of one staging buffer (measured)


class _Buffer:
    """A live buffer or view, as the pool knows it."""

    __slots__ = (
        "id",
        "slot",
        "size",
        "vk_buffer",
        "offset",
        "root",
        "chunk",
        "order",
        "memory",
        "refcount",
        "views",
        "address",
    )

    def __init__(
        self,
        id: int,
        slot: int,
        size: int,
        vk_buffer,
        offset: int,
        root: "_Buffer | None",
        chunk: Chunk | None = None,
        order: int = 0,
        memory=None,
        address: int = 0,
    ) -> None:
        self.id, self.slot, self.size = id, slot, size
        self.vk_buffer = vk_buffer
        self.offset = offset  # of the buffer's bytes inside vk_buffer
        self.root = root if root is not None else self  # a view's parent (hazards and lifetime follow the root)
        self.chunk, self.order = chunk, order  # sub-allocated: its chunk and order; dedicated: None
        self.memory = memory  # dedicated: its VkDeviceMemory; past the largest allocation: a LargeBuffer
        self.refcount = 1
        self.views = 0  # live views of this root: each holds one of its references
        self.address = address  # its device address (0 where the device has none)


_pools: "weakref.WeakSet[MemoryPool]" = weakref.WeakSet()  # every pool made: a message names a buffer's device


def _describe(entry: _Buffer) -> str:
    """A live buffer as messages name it (:meth:`MemoryPool.describe`)."""
    if entry.root is entry:
        return f"{ids.label(entry.id)} ({entry.size} bytes)"
    root = entry.root
    return f"{ids.label(entry.id)} ({entry.size} bytes at byte {entry.offset - root.offset} of {ids.label(root.id)})"


class MemoryPool:
    """Device buffers of one device, named by integer ids, with reference counts.

    ``allocate`` starts a buffer at count 1; ``retain``/``release`` move it; at zero it is freed once no submitted
    GPU work uses it. Transfers are ordered against launches on the same device. Error messages name a buffer as
    ``buffer #N`` with its size: the Nth buffer or view the process made (:meth:`describe` gives that name).
    """

    def __init__(self, ctx: "DeviceContext", worker: "Worker") -> None:
        self.ctx = ctx
        self._worker = worker
        self._info = info = ctx.info
        self._lock = threading.Lock()
        self._entries: dict[int, _Buffer] = {}
        self.slot_of: dict[int, int] = {}  # bindable live ids -> slot; Device.launch reads this directly
        self._free_slots: deque[int] = deque()  # FIFO: a released slot is reused as late as possible
        self._next_slot = 1  # slot 0 stays empty so a zeroed record never names a buffer
        self._chunks: list[Chunk] = []
        # Spares: released blocks kept for reuse, by order, as the entries they were, each with its slot still set.
        self._spares: dict[int, list[_Buffer]] = {}
        self._orders: dict[int, int] = {}  # block order by size asked for
        # Released buffers waiting to be freed on the worker, with their release numbers: a free scheduled after
        # release n frees every buffer up to n, so one whose scheduling an interrupt lost goes with the next.
        self._dying: deque[tuple[int, _Buffer]] = deque()
        # the last free queued on the worker: its function and its cell [release number it frees up to, the bytes it
        # gives back]
        self._queued_free: tuple[functools.partial, list] | None = None
        self._released = 0
        self._orphans: deque[int] = deque()  # releases a finalizer asked for during a garbage collection
        self._binding: list[sparse.LargeBuffer] = []  # large buffers made, not yet bound and handed out
        self._destroyed = False
        self.alignment = max(MIN_BLOCK, info.min_storage_buffer_offset_alignment)
        self.memory = DeviceMemory(ctx)
        size = min(CHUNK_BYTES, self.memory.max_allocation, max(self.memory.heap_size // 16, 1 << 20))
        self.chunk_bytes = 1 << (size.bit_length() - 1)
        cfg = ctx.config
        kind = "gpu" if info.device_type in ("discrete_gpu", "integrated_gpu") else "other"
        ring = StagingRing(
            ctx,
            self.memory,
            self._new_slot,
            max(1 << 16, cfg.staging_buffer_bytes or STAGING_BUFFER_BYTES[kind]),
            max(2, cfg.staging_buffers),
        )
        self.transfers = Transfers(ctx, worker, ring, cfg.resolved_copy_threads())
        _pools.add(self)

    def _new_slot(self, vk_buffer, offset: int, size: int, root_slot: int | None) -> int:
        """A slot of the buffer table (see decl/vkb.h) for ``size`` bytes of ``vk_buffer`` at ``offset``, sharing the
        hazard state of ``root_slot`` (None: its own)."""
        slot = self._free_slots.popleft() if self._free_slots else None
        if slot is None:
            slot, self._next_slot = self._next_slot, self._next_slot + 1
        root = slot if root_slot is None else root_slot
        if self.ctx.lib.vkb_slots_set(self.ctx.slots, slot, vk_buffer, offset, size, root) != 0:
            raise BackendError(
                ErrorStatus.MemoryAllocation,
                f"too many live buffers ({self.ctx.lib.VKB_MAX_SLOTS >> 20} Mi slots); release some",
            )
        return slot

    @property
    def entries(self) -> dict:
        """Live ids -> the pool's record of each (``slot``, ``address``, ``size``...): read-only outside the pool
        (the launch packer of a kernel that reaches buffers by address reads it)."""
        return self._entries

    # ----- allocation -----------------------------------------------------------------------------------------------
    @property
    def free_bytes(self) -> int:
        """Bytes this process can still allocate on the device: the driver's budget for the heap (VK_EXT_memory_budget)
        less what is in use, or without that extension the heap's size less what this pool holds."""
        return self.memory.free_bytes

    def allocate(self, nbytes: int) -> int:
        """A new device buffer of ``nbytes`` bytes, with reference count 1. Its contents are undefined.

        Past :attr:`allocation_limit` the buffer is one buffer bound to several allocations where the device has
        sparse binding (``info.sparse_binding``); elsewhere that is ``MemoryAllocation``, saying what to do."""
        ctx = self.ctx
        if not ctx.usable:  # (usable implies open, not lost, not forked)
            ctx.ensure_usable()
        if self._orphans:
            self._release_orphans()
        if nbytes.__class__ is not int:
            nbytes = index_argument(nbytes, "allocate: the byte count")
        if nbytes <= 0:
            raise BackendError(ErrorStatus.InvalidArgument, f"allocate needs a positive byte count, got {nbytes}")
        info = self._info
        if nbytes > self.memory.max_allocation:
            return self._allocate_large(nbytes)
        for attempt in (0, 1):
            try:
                with self._lock:
                    if self.ctx.closed:  # close() destroys the pool under this lock: nothing may be made after it
                        raise self.ctx.closed_error()
                    if nbytes <= SUBALLOC_MAX and nbytes <= self.chunk_bytes // 4:
                        order = self._orders.get(nbytes)
                        if order is None:  # a framework allocates the same few sizes again and again
                            order = self._orders[nbytes] = order_of(max(nbytes, self.alignment))
                            self._spares.setdefault(order, [])
                        spares = self._spares[order]
                        if spares:
                            return self._reuse(spares, nbytes)
                        chunk, offset = self._take_block(nbytes, order)
                        vk_buffer, memory, address = chunk.buffer, None, chunk.address + offset
                    else:
                        self._check_fits(nbytes)
                        memory, vk_buffer, address = self.memory.create(nbytes, self.memory.device_type, "buffer")
                        chunk, offset, order = None, 0, 0
                    try:
                        buf_id = next_buffer_id()
                        slot = self._new_slot(vk_buffer, offset, nbytes, None)
                        self._entries[buf_id] = _Buffer(
                            buf_id, slot, nbytes, vk_buffer, offset, None, chunk, order, memory, address
                        )
                    except BaseException:  # out of slots, or interrupted (Ctrl-C): the memory goes back
                        if chunk is not None:
                            chunk.give(offset, order)
                        else:
                            self.memory.destroy(memory, vk_buffer, nbytes)
                        raise
                    if nbytes <= info.max_storage_buffer_range:
                        self.slot_of[buf_id] = slot
                break
            except BackendError as error:  # out of memory while released buffers wait for the GPU: wait, retry
                if attempt or error.status is not ErrorStatus.MemoryAllocation or not self._reclaim():
                    raise
        return buf_id

    def _reuse(self, spares: list[_Buffer], nbytes: int) -> int:
        """Under the pool's lock: the id of a new buffer of ``nbytes`` bytes made from the last of ``spares``, released
        blocks of its order that kept their entry and slot (no call between taking the spare and listing it, so an
        interrupt cannot lose it)."""
        buf_id = next_buffer_id()
        entry = spares[-1]
        del spares[-1]
        kept = entry.size
        entry.id, entry.refcount, entry.size = buf_id, 1, nbytes
        self._entries[buf_id] = entry
        if nbytes <= self._info.max_storage_buffer_range:
            self.slot_of[buf_id] = entry.slot
        if kept != nbytes:  # the same order, another size: the slot's range follows it
            self.ctx.lib.vkb_slots_set(self.ctx.slots, entry.slot, entry.vk_buffer, entry.offset, nbytes, entry.slot)
        return buf_id

    @property
    def allocation_limit(self) -> int:
        """The largest single memory allocation the pool makes: the device's ``maxMemoryAllocationSize``, or the cap
        ``VKBACKEND_MAX_ALLOCATION_BYTES`` (``VulkanConfig.max_allocation_bytes``) sets where that is lower. A larger
        buffer is one buffer bound to several allocations where the device has sparse binding
        (``info.sparse_binding``), and refused elsewhere."""
        return self.memory.max_allocation

    def _allocate_large(self, nbytes: int) -> int:
        """A buffer past the largest allocation: one sparse VkBuffer bound to several allocations (sparse.py), or the
        error saying why there can be none."""
        info, memory = self._info, self.memory
        if not info.sparse_binding:
            raise BackendError(
                ErrorStatus.MemoryAllocation,
                f"a buffer of {nbytes} bytes exceeds the largest allocation ({memory.limit_text()}), "
                f"and {info.name} has no sparse binding (sparseBinding on its compute queue), which a "
                f"buffer past it needs; split the data into buffers of at most {memory.max_allocation} "
                "bytes"
                + (
                    ", or raise or unset VKBACKEND_MAX_ALLOCATION_BYTES (VulkanConfig.max_allocation_bytes)"
                    if memory.capped
                    else ""
                ),
            )
        if nbytes > info.sparse_address_space_size:
            raise BackendError(
                ErrorStatus.MemoryAllocation,
                f"a buffer of {nbytes} bytes exceeds the sparse address space of {info.name} "
                f"({info.sparse_address_space_size} bytes, sparseAddressSpaceSize); split the data into "
                "smaller buffers",
            )
        try:
            return self._make_large(nbytes)
        except BackendError as error:  # out of memory while released buffers wait for the GPU: wait, retry once
            if error.status is not ErrorStatus.MemoryAllocation or not self._reclaim():
                raise
        return self._make_large(nbytes)

    def _make_large(self, nbytes: int) -> int:
        """Make a large buffer under the lock (like a dedicated one), bind it on the worker (the queue's only user),
        then give it an id."""
        with self._lock:
            if self.ctx.closed:  # close() destroys the pool under this lock: nothing may be made after it
                raise self.ctx.closed_error()
            self._check_fits(nbytes)
            large = sparse.make(self.memory, nbytes)
            self._binding.append(large)  # listed at once: close() frees it, bound or not
        try:
            self._worker.call(sparse.bind, self.memory, large)
        except BaseException:
            # Freed on the worker, after the bind call (which an interrupt here may not have stopped) has run.
            self._worker.defer(functools.partial(self._discard_large, large))
            raise
        with self._lock:
            if large not in self._binding:  # close() freed it meanwhile
                raise self.ctx.closed_error()
            self._binding.remove(large)
            try:
                entry = _Buffer(next_buffer_id(), 0, nbytes, large.buffer, 0, None, memory=large, address=large.address)
                entry.slot = self._new_slot(large.buffer, 0, nbytes, None)
                self._entries[entry.id] = entry
            except BaseException:  # out of slots, or interrupted: the memory goes back (no GPU work uses it yet)
                sparse.destroy(self.memory, large)
                raise
            if nbytes <= self._info.max_storage_buffer_range:
                self.slot_of[entry.id] = entry.slot
        return entry.id

    def _discard_large(self, large: sparse.LargeBuffer) -> None:
        """Free a large buffer whose making failed, unless close() did, or its bind may still run (then close()
        frees it once the device is idle)."""
        with self._lock:
            if large in self._binding and not large.pending:
                self._binding.remove(large)
                sparse.destroy(self.memory, large)

    def _free_memory(self, entry: _Buffer) -> None:
        """Free the memory a dedicated or large buffer owns (no submitted work may use it)."""
        if isinstance(entry.memory, sparse.LargeBuffer):
            sparse.destroy(self.memory, entry.memory)
        else:
            self.memory.destroy(entry.memory, entry.vk_buffer, entry.size)

    def _reclaim(self) -> bool:
        """Wait (within the sync deadline) for the GPU work that holds back released buffers, so that their memory is
        free again; False when there was nothing to wait for or the wait failed."""
        if not self._dying:
            return False
        try:
            self._worker.drain()
        except BackendError:
            return False
        return True

    def _check_fits(self, nbytes: int) -> None:
        """``MemoryAllocation`` where a buffer of its own memory, ``nbytes`` long, cannot fit in what is free."""
        free = self.memory.free_bytes
        if nbytes > free:
            raise BackendError(
                ErrorStatus.MemoryAllocation,
                f"a buffer of {nbytes} bytes does not fit: {free} bytes of device memory are free "
                f"on {self._info.name}; release buffers or use a smaller size",
            )

    def _take_block(self, nbytes: int, order: int) -> tuple[Chunk, int]:
        """A free block of ``order`` for a buffer of ``nbytes`` bytes: its chunk and offset, from a new chunk where no
        chunk has one."""
        for chunk in self._chunks:
            offset = chunk.take(order)
            if offset is not None:
                return chunk, offset
        self._trim_spares()  # blocks held for reuse may complete a buddy pair before we take new memory
        for chunk in self._chunks:
            offset = chunk.take(order)
            if offset is not None:
                return chunk, offset
        if self.chunk_bytes > self.memory.free_bytes:
            raise BackendError(
                ErrorStatus.MemoryAllocation,
                f"a buffer of {nbytes} bytes needs a new {self.chunk_bytes}-byte chunk but only "
                f"{self.memory.free_bytes} bytes are free on {self.ctx.info.name}; release buffers",
            )
        chunk = Chunk(None, None, self.chunk_bytes)
        mapped = self.memory.chunk_type
        chunk.memory, chunk.buffer, chunk.address = self.memory.create(
            self.chunk_bytes, self.memory.device_type if mapped is None else mapped, "chunk"
        )
        self._chunks.append(chunk)  # listed with no call after the handles arrive: an interrupt cannot lose them
        if self.memory.chunk_type is not None:  # (create falls back to device_type where buffers cannot be mapped)
            try:
                chunk.host = self.memory.map(chunk.memory, self.chunk_bytes, "chunk")
            except BackendError as error:  # read through staging instead
                log.debug("a chunk could not be mapped (%s); its read-backs go through staging", error)
        return chunk, chunk.take(order)

    def _spares_for(self, entry: _Buffer) -> list[_Buffer] | None:
        """The spares a released buffer joins, or None where it cannot be one: a view, dedicated memory, or a full
        list of its order."""
        if entry.chunk is None or entry.root is not entry:
            return None
        spares = self._spares[entry.order]
        return spares if len(spares) < SPARES_PER_ORDER else None

    def _trim_spares(self) -> None:
        """Under the pool's lock: give every spare's block back to its chunk and its slot to the free ones. Each spare
        leaves its list before anything is given: interrupted, it can only be lost, never given twice."""
        lib, ffi, slots = self.ctx.lib, self.ctx.ffi, self.ctx.slots
        for order, spares in self._spares.items():
            while spares:
                spare = spares[-1]
                del spares[-1]
                self._free_slots += (spare.slot,)
                lib.vkb_slots_set(slots, spare.slot, ffi.NULL, 0, 0, spare.slot)
                spare.chunk.give(spare.offset, order)

    # ----- ids, references, views -------------------------------------------------------------------------------
    def _entry(self, buf: int, what: str) -> _Buffer:
        try:
            return self._entries[buf]
        except (KeyError, TypeError):
            raise self._not_live_error(buf, what) from None

    def describe(self, buf: int) -> str:
        """How messages name a live buffer: ``"buffer #12 (4096 bytes)"``, the twelfth buffer or view the process
        made; a view says whose and where, ``"buffer #13 (256 bytes at byte 1024 of buffer #12)"``."""
        return _describe(self._entry(buf, "describe"))

    def _not_live_error(self, buf: object, what: str) -> BackendError:
        """The ``InvalidArgument`` error for ``buf`` where a live buffer of this pool belongs: saying what it is (not
        an id; a program's id; a buffer released or never made; another device's) and what to pass instead."""
        name = self.ctx.info.name
        message = ids.misnamed(
            buf, ids.BUFFER, "pass an id that allocate() or view() returned (Buffer.id for a Buffer)"
        )
        if message is None:
            other, owner = None, ""
            for pool in list(_pools):
                entry = pool._entries.get(buf) if pool is not self and other is None else None
                if entry is not None:
                    other, owner = entry, pool.ctx.info.name
            if other is not None:
                message = (
                    f"{_describe(other)} belongs to {'another device, also ' if owner == name else ''}{owner}, "
                    f"not to {name}; use a buffer of this device (pool_to_pool copies one over)"
                )
            else:
                message = (
                    f"{ids.label(buf)} was released (or its device closed, or the id was never handed out), so it is "
                    f"not a live buffer of {name}; keep a reference (allocate, view or retain) for as long as it is "
                    "used, or allocate a new one"
                )
        return BackendError(ErrorStatus.InvalidArgument, f"{what}: {message}")

    def is_live(self, buf: object) -> bool:
        """Whether ``buf`` is the id of a live buffer or view of this pool (bindable or not)."""
        try:
            return buf in self._entries
        except TypeError:  # unhashable junk from a caller
            return False

    def address(self, buf: int) -> int:
        """The device address of a live buffer or view, for kernels that reach buffers by address (GLSL
        ``buffer_reference``). A launch takes the buffer itself for such a kernel's address members, which also orders
        the access; this is for interop. ``InvalidArgument`` where the device has no buffer device addresses."""
        entry = self._entry(buf, "address")
        if not self.memory.addressable:
            raise BackendError(
                ErrorStatus.InvalidArgument,
                f"{self.ctx.info.name} has no buffer device addresses (bufferDeviceAddress)",
            )
        return entry.address

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
        if self._orphans:
            self._release_orphans()
        with self._lock:
            entry = self._entries.get(buf) if buf.__class__ is int else None
            if entry is None:
                entry = self._entry(buf, "release")  # a numpy integer id, or junk: it raises, saying what buf is
            if entry.refcount <= entry.views:  # freeing it would leave its views pointing at freed memory
                raise BackendError(
                    ErrorStatus.InvalidArgument,
                    f"release: {_describe(entry)} has no reference left of its own; its {entry.views} live "
                    "view(s) hold the rest (release it once per allocate/retain, and its views)",
                )
            if entry.refcount == 1 and not self._dying:
                spares = self._spares_for(entry)
                if spares is not None and self._worker.quiet():
                    # No GPU work can use it and nothing waits to be freed: a spare at once. No call from here on.
                    entry.refcount = 0
                    del self._entries[entry.id]
                    if entry.id in self.slot_of:
                        del self.slot_of[entry.id]
                    spares += (entry,)  # a spare keeps its slot
                    return
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
            worker = self._worker
            if worker.quiet() and self._free_dying_here():
                return
            # A release should not cost a wake-up of the worker (a thread switch): frees wait for its next wake,
            # unless they hold back much memory or many buffers.
            wake = nbytes >= LAZY_FREE_BYTES or len(self._dying) >= LAZY_FREE_BUFFERS
            queued = self._queued_free
            if not wake and queued is not None and worker.queued_last(queued[0]):
                cell = queued[1]
                # The last free queued is not yet taken (so not run: it reads its cell under this lock) and nothing
                # was queued after it, so all work queued before this release is ahead of it too: it frees this
                # buffer as well, while what it holds back stays under LAZY_FREE_BYTES.
                if cell[1] + nbytes < LAZY_FREE_BYTES:
                    cell[0] = upto
                    cell[1] += nbytes
                    return
        cell = [upto, nbytes]
        fn = functools.partial(self._free_dying, cell)
        worker.defer(fn, nbytes, wake=wake)
        self._queued_free = (fn, cell)

    def release_from_finalizer(self, buf: int) -> None:
        """:meth:`release` for finalizers (``__del__``, ``weakref.finalize`` callbacks). Inside a garbage collection,
        which can run finalizers inside the pool's own locked code (where ``release`` would wait for ever on the lock
        its thread holds), the reference is dropped at the pool's next allocate, view, release, stats or trim instead.
        Never raises: an error is logged, since it belongs to no caller (a closed device has freed everything)."""
        if collecting():
            self._orphans.append(buf)  # a deque's append takes no lock
            return
        self._release_logged(buf)

    def _release_orphans(self) -> None:
        taken = []  # all of them first: each release below would otherwise drain the rest again, recursively
        while self._orphans:
            try:
                taken.append(self._orphans.popleft())
            except IndexError:  # another thread took the last one
                break
        for buf in taken:
            self._release_logged(buf)

    def _release_logged(self, buf: int) -> None:
        try:
            self.release(buf)
        except BackendError as error:
            if not self.ctx.closed:  # a closed device freed every buffer when it closed
                log.warning("a finalizer's release of %s failed: %s", ids.label(buf) or repr(buf), error)

    def _free_dying_here(self) -> bool:
        """Under the pool's lock, in the caller's thread, while no GPU work can use them: free the released views and
        sub-allocated blocks at once, each without a call that an interrupt could split (the rest, dedicated memory and
        blocks past the spares kept, goes to the worker). True when nothing is left waiting."""
        if self._destroyed:
            return True
        lib, ffi, slots = self.ctx.lib, self.ctx.ffi, self.ctx.slots
        while self._dying:
            entry = self._dying[0][1]
            if entry.root is entry:
                spares = self._spares_for(entry)
                if spares is None:
                    return False
                del self._dying[0]
                spares += (entry,)  # a spare keeps its slot
            else:  # a view: its root holds the memory
                lib.vkb_slots_set(slots, entry.slot, ffi.NULL, 0, 0, entry.slot)  # repeating it is harmless
                del self._dying[0]
                self._free_slots += (entry.slot,)
        return True

    def _free_dying(self, cell: list) -> None:
        """On the worker, once the GPU work queued before it is done: free the buffers released up to number
        ``cell[0]`` (all released while nothing was queued after this free, so nothing still queued uses them), read
        under the pool's lock, which a release that joins it holds too."""
        dead = []
        with self._lock:
            upto = cell[0]
            while self._dying and self._dying[0][0] <= upto:
                dead.append(self._dying.popleft()[1])
        self._free(dead)

    def _free(self, dead: list[_Buffer]) -> None:
        """Free released buffers (a view first, then its root when that was its last reference)."""
        lib, ffi = self.ctx.lib, self.ctx.ffi
        with self._lock:
            if self._destroyed:  # a release racing close(): destroy() freed everything
                return
            for entry in dead:
                spares = self._spares_for(entry)
                if spares is not None:
                    spares.append(entry)  # a spare keeps its slot
                    continue
                lib.vkb_slots_set(self.ctx.slots, entry.slot, ffi.NULL, 0, 0, entry.slot)
                self._free_slots.append(entry.slot)
                if entry.root is not entry:
                    continue  # a view owns no memory
                if entry.chunk is not None:
                    entry.chunk.give(entry.offset, entry.order)
                else:
                    self._free_memory(entry)

    def view(self, buf: int, offset: int, nbytes: int) -> int:
        """A new buffer id for ``nbytes`` bytes of ``buf`` starting at ``offset``; it holds a reference to ``buf``.

        ``offset`` must be a multiple of ``info.min_storage_buffer_offset_alignment``.
        """
        align = self._info.min_storage_buffer_offset_alignment
        offset = index_argument(offset, "view: the offset")
        nbytes = index_argument(nbytes, "view: the byte count")
        if self._orphans:
            self._release_orphans()
        with self._lock:
            parent = self._entry(buf, "view")
            if offset < 0 or offset % align:
                raise BackendError(
                    ErrorStatus.InvalidArgument,
                    f"view offset {offset} must be a non-negative multiple of {align} "
                    "(minStorageBufferOffsetAlignment)",
                )
            if nbytes <= 0 or offset + nbytes > parent.size:
                raise BackendError(
                    ErrorStatus.InvalidArgument,
                    f"view: a view of {nbytes} bytes at offset {offset} does not fit in {_describe(parent)}",
                )
            root = parent.root
            entry = _Buffer(
                next_buffer_id(),
                0,
                nbytes,
                root.vk_buffer,
                parent.offset + offset,
                root,
                address=parent.address + offset if parent.address else 0,
            )
            entry.slot = self._new_slot(root.vk_buffer, parent.offset + offset, nbytes, root.slot)
            # From here on no call, so an interrupt cannot leave the view half made.
            self._entries[entry.id] = entry
            root.refcount += 1
            root.views += 1
            if nbytes <= self._info.max_storage_buffer_range:
                self.slot_of[entry.id] = entry.slot
        return entry.id

    # ----- memory shared with other APIs (external.py) -------------------------------------------------------------
    def allocate_exportable(self, nbytes: int) -> ExportedMemory:
        """A new buffer of ``nbytes`` bytes whose memory other APIs can import (CUDA: vkbackend.interop.cuda), and
        the opaque file descriptor that shares it, in an :class:`ExportedMemory`. The buffer (``.buffer``, count 1)
        is used and released like any other; the ExportedMemory owns the descriptor and closes it. The memory is a
        dedicated allocation of its own (needs VK_KHR_external_memory_fd)."""
        export = Export(self.ctx, self.memory, nbytes)
        try:
            buf_id = self._adopt_dedicated(export.nbytes, export.create)
        except BaseException:
            export.abandon()
            raise
        return export.wrap(self, buf_id)

    def import_memory(
        self,
        fd: int,
        size: int,
        *,
        nbytes: int | None = None,
        memory_type_index: int | None = None,
        dedicated: bool = True,
    ) -> int:
        """A new buffer id (count 1) for the first ``nbytes`` (default: all) of ``size`` bytes of memory that this
        driver exported for this device as an opaque file descriptor (``allocate_exportable`` in another process, say).
        ``fd`` stays the caller's: a duplicate is imported. For a Vulkan export pass its ``size`` and
        ``memory_type_index``, and ``dedicated`` as it was (True for an ExportedMemory). Released like any buffer."""
        made = Import(self.ctx, self.memory, fd, size, nbytes, memory_type_index, dedicated)
        try:
            return self._adopt_dedicated(made.nbytes, made.create)
        except BaseException:
            made.abandon()
            raise

    def _adopt_dedicated(self, nbytes: int, create: Callable[[], tuple[Any, Any, int]]) -> int:
        """A new buffer id (count 1) for the ``(memory, buffer, address)`` that ``create`` makes under the pool's
        lock, counted in ``self.memory`` (external.py's memory; freed as a dedicated buffer's)."""
        with self._lock:
            if self.ctx.closed:  # close() destroys the pool under this lock: nothing may be made after it
                raise self.ctx.closed_error()
            memory, vk_buffer, address = create()
            try:
                entry = _Buffer(next_buffer_id(), 0, nbytes, vk_buffer, 0, None, memory=memory, address=address)
                entry.slot = self._new_slot(vk_buffer, 0, nbytes, None)
                self._entries[entry.id] = entry
            except BaseException:  # out of slots, or interrupted: the memory goes back
                self.memory.destroy(memory, vk_buffer, nbytes)
                raise
            if nbytes <= self._info.max_storage_buffer_range:
                self.slot_of[entry.id] = entry.slot
        return entry.id

    # ----- transfers ----------------------------------------------------------------------------------------------
    def _check_range(self, entry: _Buffer, offset: int, nbytes: int, what: str) -> int:
        """``offset`` as an int, checked to leave room for ``nbytes`` bytes in the buffer."""
        if offset.__class__ is not int:
            offset = index_argument(offset, f"{what}: the offset")
        if offset < 0 or offset + nbytes > entry.size:
            raise BackendError(
                ErrorStatus.InvalidArgument,
                f"{what}: {nbytes} bytes at offset {offset} do not fit in {_describe(entry)}",
            )
        return offset

    @staticmethod
    def _mapped(entry: _Buffer):
        """Where the host maps ``entry``'s first byte (a ``char*``), or None: it is not a block of a mapped chunk."""
        chunk = entry.root.chunk
        return None if chunk is None or chunk.host is None else chunk.host + entry.offset

    def host_to_pool(self, src: HostBuffer, dst: int, offset: int = 0) -> None:
        """Copy a host buffer (any buffer-protocol object) into ``dst`` at byte ``offset``.

        Ordered after every earlier launch and copy on this device. ``src`` may be reused as soon as this returns. An
        upload into a small buffer in host-mappable device memory, while nothing is queued or running on the device, is
        written straight into it; anything else is copied through staging. A write straight into memory is not
        ordered against launches another thread queues meanwhile: one that reads or writes those bytes may see them
        half written (order such threads yourself, as with any shared buffer).
        """
        self.ctx.ensure_usable()
        data = _bytes_view(src, writable=False)
        entry = self._entry(dst, "host_to_pool")
        offset = self._check_range(entry, offset, data.nbytes, "host_to_pool")
        if not data.nbytes:
            return
        ffi = self.ctx.ffi
        mapped, source = self._mapped(entry), ffi.cast("char*", ffi.from_buffer(data))
        # quiet: no batch queued or running can touch the buffer, so no copy command and no batch are needed
        if data.nbytes <= DIRECT_WRITE_MAX and mapped is not None and self._worker.quiet():
            self.transfers.copy_mapped(mapped + offset, source, data.nbytes)
            return
        self.transfers.upload(source, data.nbytes, entry.slot, offset)

    def pool_to_host(self, src: int, dst: HostBuffer, offset: int = 0) -> None:
        """Copy ``len(dst)`` bytes of ``src`` from byte ``offset`` into the writable host buffer ``dst``.

        A sync point: it waits for every earlier launch and copy, and raises the first asynchronous error since the
        last sync point. At most ``DIRECT_READ_MAX`` bytes of a small buffer in host-mappable device memory are read
        straight from it after the sync point; anything else is copied through staging. A read straight from memory is
        not ordered against launches another thread queues after its sync point: one that writes those bytes
        meanwhile may be seen half done (order such threads yourself, as with any shared buffer).
        """
        self.ctx.ensure_usable()
        data = _bytes_view(dst, writable=True)
        entry = self._entry(src, "pool_to_host")
        offset = self._check_range(entry, offset, data.nbytes, "pool_to_host")
        if not data.nbytes:
            self._worker.sync()
            return
        ffi = self.ctx.ffi
        mapped, target = self._mapped(entry), ffi.cast("char*", ffi.from_buffer(data))
        if data.nbytes <= DIRECT_READ_MAX and mapped is not None:
            self._worker.sync()  # the sync point: everything queued before has completed, earlier errors are raised
            self.transfers.copy_mapped(target, mapped + offset, data.nbytes)
            return
        self.transfers.download(entry.slot, offset, target, data.nbytes)
        self._worker.raise_errors()  # the download waited for its copies, which ran after all earlier work

    def pool_to_pool(self, src_pool: "MemoryPool", src: int, dst: int) -> None:
        """Copy all of ``src`` (a buffer of ``src_pool``) into ``dst`` (of this pool), which must be as large.

        Within one device this is one GPU copy, ordered like launches; between devices the bytes pass through host
        memory in parts.
        """
        if not isinstance(src_pool, MemoryPool):
            raise BackendError(
                ErrorStatus.InvalidArgument,
                f"pool_to_pool: src_pool must be a MemoryPool (device.memory_pool), got {type(src_pool).__name__}",
            )
        s = src_pool._entry(src, "pool_to_pool source")
        d = self._entry(dst, "pool_to_pool destination")
        if d.size < s.size:
            raise BackendError(
                ErrorStatus.InvalidArgument,
                f"pool_to_pool: the destination, {_describe(d)}, is smaller than the source, {_describe(s)}; "
                "pass a destination at least as large (a view of the source copies part of it)",
            )
        if src_pool is self:
            self.ctx.ensure_usable()
            self._worker.queue_copy(records.copy(s.slot, d.slot, 0, 0, s.size), None)
            return
        import numpy as np

        bounce = np.empty(min(s.size, 4 * self.transfers.ring.buffer_bytes), dtype=np.uint8)
        pos = 0
        while pos < s.size:
            n = min(bounce.size, s.size - pos)
            src_pool.pool_to_host(src, bounce[:n], pos)
            self.host_to_pool(bounce[:n], dst, pos)
            pos += n

    # ----- teardown and accounting --------------------------------------------------------------------------------
    def trim(self) -> int:
        """Give back to the driver the device memory the pool keeps for reuse: freed blocks held for quick reuse, and
        chunks no live buffer uses. It first waits, within the sync deadline, for the work queued so far (earlier
        asynchronous errors are left to the next sync point), so buffers released before the call count too. Returns
        the bytes given back. The pool never does this on its own: after a peak it keeps what the peak needed, like a
        caching allocator; call this to return it."""
        freed = 0
        self._release_orphans()
        ctx = self.ctx
        if not (ctx.closed or ctx.forked or ctx.lost is not None):  # also while busy (a compile on the worker)
            # A freed block's last user may have completed by the completion marker with no fence since, and Vulkan
            # counts its chunk's buffer as in use until the host has seen one: the drain ends with a fence.
            self._worker.drain()
        # a straight copy into a block of a chunk runs with the GIL released, the mapping lock held: a buffer released
        # meanwhile by another thread must not have its chunk unmapped under that copy
        with self.transfers.mapping_lock, self._lock:
            self._trim_spares()
            for chunk in [c for c in self._chunks if c.used == 0]:  # every block was freed after the GPU was done
                self._chunks.remove(chunk)  # unlisted first: an interrupt can leak it, never free it twice
                self.memory.destroy(chunk.memory, chunk.buffer, chunk.size)
                freed += chunk.size
        return freed

    def stats(self) -> PoolStats:
        """Counters for tests and the soak: live buffers, memory objects and bytes held."""
        self._release_orphans()
        with self._lock:
            return {
                "live_buffers": len(self._entries),
                "memory_objects": self.memory.allocations,
                "held_bytes": self.memory.held,
                "chunks": len(self._chunks),
            }

    def destroy(self) -> None:
        """Free every Vulkan object of the pool (the device must be idle, and no transfer in progress)."""
        with self._lock:
            self._destroyed = True
            for entry in [*self._entries.values(), *(e for _, e in self._dying)]:
                if entry.root is entry and entry.chunk is None and entry.memory is not None:
                    self._free_memory(entry)
            for large in self._binding:  # the device is idle: a bind that may not have completed has
                sparse.destroy(self.memory, large)
            self._binding.clear()
            self._entries.clear()
            self._dying.clear()
            self.slot_of.clear()
            for chunk in self._chunks:
                self.memory.destroy(chunk.memory, chunk.buffer, chunk.size)
            self._chunks.clear()
            self._spares.clear()
            self.transfers.ring.destroy()


def _bytes_view(obj, writable: bool) -> memoryview:
    """``obj``'s bytes as a flat memoryview, or ``InvalidArgument`` saying why it cannot be a host buffer."""
    try:
        view = memoryview(obj)
    except TypeError:
        raise InvalidArgumentTypeError(
            ErrorStatus.InvalidArgument,
            f"expected a buffer-protocol object (bytes, bytearray, numpy array), got {type(obj).__name__}",
        ) from None
    except ValueError as error:  # a closed mmap, a released memoryview: an object whose memory is gone
        raise BackendError(
            ErrorStatus.InvalidArgument,
            f"the host buffer ({type(obj).__name__}) cannot be used: {error}; pass an mmap that is "
            "still open, a memoryview not yet released",
        ) from None
    if "O" in view.format:  # Python objects: their bytes are pointers, and writing them would corrupt the process
        raise InvalidArgumentTypeError(
            ErrorStatus.InvalidArgument,
            f"the host buffer ({type(obj).__name__}) holds Python objects, whose bytes are pointers, not data; "
            "convert it to a numeric array first (numpy.asarray(x, dtype=numpy.float32), say)",
        )
    if not view.c_contiguous:
        raise BackendError(
            ErrorStatus.InvalidArgument, "the host buffer must be C-contiguous (use numpy.ascontiguousarray)"
        )
    if writable and view.readonly:
        raise BackendError(ErrorStatus.InvalidArgument, "the destination host buffer is read-only")
    return view.cast("B") if view.format != "B" or view.ndim != 1 else view
