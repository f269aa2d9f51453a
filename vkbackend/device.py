"""Device: the public face of one GPU (info, memory pool, compile, launch, timed launch, graphs, sync, close).

A device is made of units that each own their state (docs/architecture.md): the program table and cache
(programs.py), the submitter (submit.py), the worker thread (worker.py) and the memory pool (memory/), which share
the handles and error state of a DeviceContext (context.py). The worker is handed to the units that queue work.
"""
from __future__ import annotations

import functools
import logging
import struct
import sys
import threading
from collections import deque
from collections.abc import Sequence

from . import records, trace
from ._ffi import success_counts, vulkan
from .config import VulkanConfig
from .context import DeviceContext
from .discovery import DeviceInfo, Instance, PhysicalDevice, create_device, query_physical_devices
from .errors import NO_DEVICE_HINT, BackendError, ErrorStatus, index_argument
from .finalizers import collecting
from .graph import Launch, LaunchGraph
from .memory import MemoryPool
from .programs import Program, ProgramCache, ProgramTable
from .spirv import ProgramInfo
from .submit import BatchSubmitter
from .types import DeviceStats, Grid, GridArg, Scalar
from .worker import Worker

log = logging.getLogger("vkbackend")
_U32_MAX = 0xFFFFFFFF
LIVE_OBJECT_CALLS = {
    "device_memory": ("vkAllocateMemory", "vkFreeMemory"), "buffers": ("vkCreateBuffer", "vkDestroyBuffer"),
    "pipelines": ("vkCreateComputePipelines", "vkDestroyPipeline"),
    "pipeline_layouts": ("vkCreatePipelineLayout", "vkDestroyPipelineLayout"),
    "shader_modules": ("vkCreateShaderModule", "vkDestroyShaderModule"), "fences": ("vkCreateFence", "vkDestroyFence"),
    "descriptor_pools": ("vkCreateDescriptorPool", "vkDestroyDescriptorPool"),
    "command_pools": ("vkCreateCommandPool", "vkDestroyCommandPool"), "devices": ("vkCreateDevice", "vkDestroyDevice"),
}


class Device:
    """One Vulkan device. Every method is safe to call from several threads at once."""

    def __init__(self, physical: PhysicalDevice, config: VulkanConfig) -> None:
        ffi, lib = vulkan()
        timeout_s = config.resolved_sync_timeout_s()  # settings first: a bad one fails before anything is made
        interval = config.resolved_switch_interval_s()
        handles = create_device(physical, config)
        slots = lib.vkb_slots_new()
        self._ctx = ctx = DeviceContext(ffi, lib, handles, config, slots, timeout_s)
        self.index = physical.index
        made = []  # what to undo if opening fails part way
        try:
            if slots == ffi.NULL:
                raise BackendError(ErrorStatus.MemoryAllocation, "out of host memory for the buffer table")
            table = ProgramTable(ffi)
            self._submitter = BatchSubmitter(ctx, table)
            made.append(self._submitter.destroy)
            self._worker = Worker(ctx, self._submitter)
            made.append(self._worker.stop)
            self._programs = ProgramCache(ctx, self._worker, table)
            made.insert(len(made) - 1, self._programs.destroy)  # undone once the worker has stopped
            self._pool = MemoryPool(ctx, self._worker)
        except BaseException:
            for undo in reversed(made):
                undo()
            lib.vkDestroyDevice(ctx.device, ffi.NULL)
            lib.vkb_slots_delete(slots)
            raise
        self._close_lock = threading.Lock()
        # The launch fast path reads these directly: a few attribute lookups and an append.
        self._launchable = self._programs.programs
        self._packers: dict = {}
        self._orphan_programs: deque[int] = deque()   # release_program during a garbage collection (finalizers.py)
        self._graph_packers: dict = {}   # the same, returning the record instead of queueing it
        self._slot_of = self._pool.slot_of
        self._queue = self._worker.queue
        self._max_grid = handles.info.max_global_work_dims
        _lower_switch_interval(interval)
        log.debug("device %d ready: %s", self.index, handles.info.name)

    def __repr__(self) -> str:
        return f"<vkbackend.Device {self.index}: {self.info.name}{' (closed)' if self._ctx.closed else ''}>"

    @property
    def info(self) -> DeviceInfo:
        """What the device is and can do."""
        return self._ctx.info

    @property
    def memory_pool(self) -> MemoryPool:
        """The device's buffers."""
        return self._pool

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` has been called."""
        return self._ctx.closed

    # ----- programs -----------------------------------------------------------------------------------------------
    def compile(self, spirv: bytes, entry_point: str = "main", robust: bool = True) -> int:
        """Compile SPIR-V into a program id; the same SPIR-V and entry point return the cached program.

        Out-of-bounds accesses of a program through its bound buffers are harmless by default (robust buffer access:
        reads give zero, writes are dropped); accesses through device addresses (``buffer_reference``) are not checked. ``robust=False`` is for kernels whose bounds are proven, such as a compiler's: where the device can
        choose per program (``info.pipeline_robustness``) they run without the checks, which can cost several times
        the kernel's time (docs/reliability.md); on other devices the device-wide setting holds.
        """
        if self._orphan_programs:
            self._release_orphan_programs()
        prog = self._programs.compile(spirv, entry_point, robust)
        if prog not in self._packers:
            program = self._programs.get(prog)
            self._graph_packers[prog] = self._packer(program, None)
            self._packers[prog] = self._packer(program, self._queue.append)
        return prog

    def _packer(self, program: Program, append):
        return records.dispatch_packer(program.name, program.index, program.info, program.record_format,
                                       self._slot_of, self._pool.entries, self._max_grid, self._ctx, append)

    def program_info(self, prog: int) -> ProgramInfo:
        """The interface reflected from the program's SPIR-V (local size, storage buffers, push constants)."""
        return self._programs.get(prog).info

    def release_program(self, prog: int) -> None:
        """Drop a reference to a program; safe while launches of it are still queued. In a forked child it does
        nothing: the program is the parent's. From a finalizer run by a garbage collection, the release waits for the
        device's next compile or release_program (the collector may have stopped this thread inside the cache's lock)."""
        if self._ctx.forked:
            return
        if collecting():  # a finalizer (tinygrad's programs'): the cache's lock may be held by this very thread
            self._orphan_programs.append(prog)
            return
        if self._orphan_programs:
            self._release_orphan_programs()
        self._release_program(prog)

    def _release_orphan_programs(self) -> None:
        """The releases finalizers asked for during a garbage collection; their errors are logged (no caller's)."""
        while self._orphan_programs:
            try:
                prog = self._orphan_programs.popleft()
            except IndexError:  # another thread took the last one
                return
            try:
                self._release_program(prog)
            except BackendError as error:
                log.warning("a finalizer's release of program %r failed: %s", prog, error)

    def _release_program(self, prog: int) -> None:
        name = self._programs.get(prog).name
        if self._programs.release(prog):
            self._packers.pop(prog, None)
            self._graph_packers.pop(prog, None)
            records.forget_packer(name)

    # ----- launches -----------------------------------------------------------------------------------------------
    def launch(self, prog: int, buffers: Sequence[int], scalars: Sequence[Scalar] = (), grid: Grid = (1, 1, 1)) -> None:
        """Queue one dispatch of ``grid`` work groups; returns at once.

        ``buffers`` bind to the program's storage buffers in binding order, ``scalars`` fill its push-constant members
        in order. Errors found now raise ``InvalidArgument``; errors found on the worker surface at the next sync point.
        """
        try:
            self._packers[prog](buffers, scalars, grid)  # checks, packs and queues the record
        except (KeyError, ValueError, TypeError, OverflowError, struct.error):
            # Explains the problem, or handles GridArg and short grids; waits while the worker is far behind.
            self._queue.append(self._pack(prog, buffers, scalars, grid))
        if self._worker.idle:  # only the first launch of a burst pays for the wake-up
            self._worker.wake_up()

    def graph(self, launches: Sequence[Launch | None]) -> LaunchGraph:
        """A :class:`LaunchGraph` of ``(program, buffers, scalars, grid)`` launches, each checked as ``launch`` checks
        it, that ``graph.launch()`` queues again in one call (for a framework's JIT replay)."""
        return LaunchGraph(self._record, self._enqueue, self._run_timed, self._pool, lambda: self._ctx.closed, launches)

    def _record(self, prog: int, buffers: Sequence[int], scalars: Sequence, grid: Sequence) -> bytes:
        """One launch checked and packed, not queued (a graph packs once and queues many times)."""
        try:
            return self._graph_packers[prog](buffers, scalars, grid)
        except (KeyError, ValueError, TypeError, OverflowError, struct.error):
            return self._pack(prog, buffers, scalars, grid)

    def _enqueue(self, window: bytes) -> None:
        """Queue packed records for the worker; returns at once."""
        if not self._ctx.usable:  # closed, lost, forked, or the worker far behind: explain, or wait for room
            self._worker.admit()
        if trace.enabled:
            trace.event("enqueue")
        self._worker.put(window)

    def _pack(self, prog, buffers, scalars, grid) -> bytes:
        """The launch slow path: check a launch, explaining what is wrong, and pack its record."""
        for name, seq in (("buffers", buffers), ("scalars", scalars)):
            if not _is_sequence(seq):  # a set would bind in hash order
                raise BackendError(ErrorStatus.InvalidArgument,
                                   f"launch: {name} must be a list or tuple (in binding order), got {type(seq).__name__}")
        try:
            p = self._launchable[prog]
            slots = [self._slot_of[b] for b in buffers[:p.n_buffers]]
            addressed = [self._pool.entries[b] for b in buffers[p.n_buffers:]]
        except (KeyError, TypeError):
            raise self._launch_error(prog, buffers) from None
        if len(buffers) != p.n_buffers + p.n_addresses or len(scalars) != p.n_scalars:
            raise self._count_error(p, buffers, scalars)
        grid = self._resolve_grid(grid, scalars)
        try:
            record = records.dispatch(p.record_format, p.push_items, p.index, grid, slots, addressed, scalars)
        except (struct.error, OverflowError) as error:
            # numpy scalars without __index__/__float__ of the right kind (np.bool_ for a bool member): their .item()
            plain = [s.item() if hasattr(s, "item") else s for s in scalars]
            try:
                record = records.dispatch(p.record_format, p.push_items, p.index, grid, slots, addressed, plain)
            except (struct.error, OverflowError):
                raise self._scalar_error(p, scalars, error) from None
        if not self._ctx.usable:  # closed, lost, forked, or the worker far behind: explain, or wait for room
            self._worker.admit()
        return record

    def launch_timed(self, prog: int, buffers: Sequence[int], scalars: Sequence[Scalar] = (), grid: Grid = (1, 1, 1)) -> int:
        """Run one launch alone and return its GPU time in nanoseconds (a sync point)."""
        return self._run_timed(self._pack(prog, buffers, scalars, grid))

    def _run_timed(self, window: bytes) -> int:
        """Run packed records alone between two timestamps; GPU nanoseconds (a sync point)."""
        self._ctx.ensure_usable()
        ns = self._worker.timed(window)
        self._ctx.raise_pending()
        return ns

    def _resolve_grid(self, grid, scalars) -> tuple[int, int, int]:
        """The general grid path: 1 to 3 entries, ints or GridArg (whose range the worker checks)."""
        if not _is_sequence(grid):
            raise BackendError(ErrorStatus.InvalidArgument, f"grid must be a list or tuple of 1 to 3 entries, got {grid!r}")
        entries = list(grid)
        if not 1 <= len(entries) <= 3:
            raise BackendError(ErrorStatus.InvalidArgument, f"grid must have 1 to 3 entries, got {len(entries)}")
        entries += [1] * (3 - len(entries))
        out = []
        for axis, entry in enumerate(entries):
            if isinstance(entry, GridArg):
                if not 0 <= entry.index < len(scalars):
                    raise BackendError(ErrorStatus.InvalidArgument,
                                       f"{entry!r} names scalar {entry.index} but the launch has {len(scalars)} scalars")
                value = index_argument(scalars[entry.index], f"the scalar that {entry!r} names")
                out.append(value if 0 <= value <= _U32_MAX else 0)  # 0: the recorder reports it at the next sync
                continue
            entry = index_argument(entry, f"grid entry {axis}")
            if not 0 < entry <= self._max_grid[axis]:
                raise BackendError(ErrorStatus.InvalidArgument,
                                   f"grid entry {entry} on axis {'xyz'[axis]} is outside 1..{self._max_grid[axis]}")
            out.append(entry)
        return out[0], out[1], out[2]

    def _launch_error(self, prog, buffers) -> BackendError:
        if not _has(self._launchable, prog):
            return BackendError(ErrorStatus.InvalidArgument,
                                f"launch: program {prog!r} is not a live program of {self.info.name} (never compiled, or released)")
        n_bound = self._launchable[prog].n_buffers
        for i, b in enumerate(buffers if isinstance(buffers, Sequence) else ()):
            if not self._pool.is_live(b):
                return BackendError(ErrorStatus.InvalidArgument,
                                    f"launch: buffer {b!r} is not a live buffer of {self.info.name} (never allocated, or released)")
            if i < n_bound and not _has(self._slot_of, b):
                way = ("reach it by device address (a buffer_reference member of the push constants) or bind views "
                       "of it" if self.info.buffer_device_address else "bind views of it")
                return BackendError(ErrorStatus.InvalidArgument,
                                    f"launch: buffer {b} is larger than maxStorageBufferRange "
                                    f"({self.info.max_storage_buffer_range}), so it cannot be bound; {way}")
        return BackendError(ErrorStatus.InvalidArgument, f"launch: buffers must be a sequence of buffer ids, got {buffers!r}")

    def _count_error(self, p, buffers, scalars) -> BackendError:
        addressed = (f" ({p.n_buffers} bound, then {p.n_addresses} by address: "
                     f"{', '.join(a.name for a in p.info.addresses)})" if p.n_addresses else "")
        return BackendError(ErrorStatus.InvalidArgument,
                            f"launch of {p.name}: it takes {p.n_buffers + p.n_addresses} buffers{addressed} and "
                            f"{p.n_scalars} scalars ({', '.join(m.name for m in p.info.push_constants) or 'none'}), "
                            f"got {len(buffers)} and {len(scalars)}")

    def _scalar_error(self, p, scalars, error) -> BackendError:
        for member, value in zip(p.info.push_constants, scalars):
            try:
                struct.pack("<" + member.format, value.item() if hasattr(value, "item") else value)
            except (struct.error, OverflowError) as e:
                return BackendError(ErrorStatus.InvalidArgument,
                                    f"launch of {p.name}: scalar {member.name}={value!r} does not fit its type "
                                    f"('{member.format}' in struct notation): {e}")
        return BackendError(ErrorStatus.InvalidArgument, f"launch of {p.name}: grid or scalars do not fit: {error}")

    # ----- sync and lifetime --------------------------------------------------------------------------------------
    def sync(self) -> None:
        """Wait for all queued work; raise the first asynchronous error since the last sync point."""
        self._ctx.ensure_usable()
        self._worker.sync()

    def stats(self) -> DeviceStats:
        """Counters: batches, dispatches, barriers and copies submitted, and how often launches were throttled; this
        pool's usage; and the Vulkan objects alive in the process, from the native layer's count of successful create
        and destroy calls."""
        calls = success_counts()
        live = {kind: calls[create] - calls[destroy] for kind, (create, destroy) in LIVE_OBJECT_CALLS.items()}
        return {**self._submitter.stats, "throttled": self._worker.throttle_count, "pool": self._pool.stats(),
                "live_objects": live}

    def close(self) -> None:
        """Wait for queued work, destroy everything and save the pipeline cache. Idempotent.

        The wait is bounded by the sync deadline (``VKBACKEND_SYNC_TIMEOUT_S``). A device whose GPU work outlives it
        (a runaway kernel) is abandoned with a logged warning: destroying what the GPU still uses is undefined
        behaviour, so its memory and Vulkan objects are left as they are until the process exits.
        """
        with self._close_lock:
            ctx = self._ctx
            if ctx.closed:
                return
            ctx.mark_closed()
            ffi, lib = ctx.ffi, ctx.lib
            self._forget()
            if ctx.forked:  # the objects are the parent's, and this process has no worker thread
                return
            # Threads waiting on this device notice the close within WAKE_S and raise the closed error; one copying
            # through the staging ring finishes that copy first, and the ring stays mapped until it has.
            if not (self._worker.stop() and self._pool.transfers.wait_finished(ctx.sync_timeout_s)):
                ctx.abandoned = True
                if Instance._current is not None:
                    Instance._current.abandoned.append(self)
                log.warning("closing %s: its GPU work did not finish within %.1f s (VKBACKEND_SYNC_TIMEOUT_S); the "
                            "device is abandoned, its memory and objects are kept until the process exits",
                            self.info.name, ctx.sync_timeout_s)
                return
            # Every batch has completed, so this returns at once; on a lost device Vulkan guarantees it returns
            # (VK_ERROR_DEVICE_LOST), and where the loss was only reported it keeps us from destroying what is in use.
            # Its result is not an error here: a lost device is closed all the same.
            lib.vkDeviceWaitIdle(ctx.device)
            self._programs.destroy()
            self._submitter.destroy()
            self._pool.destroy()
            lib.vkDestroyDevice(ctx.device, ffi.NULL)
            lib.vkb_slots_delete(ctx.slots)
            ctx.slots = ffi.NULL

    def __enter__(self) -> Device:
        """``with vkbackend.devices()[0] as dev:`` closes the device when the block ends, also when it raises.

        ``devices()`` hands every caller in the process the same Device for an index, so the block closes it for all
        of them; a later ``devices()`` opens a new one."""
        return self

    def __exit__(self, *exc: object) -> None:
        """:meth:`close` the device; an exception raised in the block goes on after it."""
        self.close()

    def _forget(self) -> None:
        """Leave the instance's open devices, so that devices() opens a new one; the last to leave gives the
        interpreter its switch interval back."""
        instance = Instance._current
        if instance is not None:
            instance.forget_device(self.index, self, _restore_switch_interval)


def _is_sequence(value) -> bool:
    """A list, tuple or other ordered sequence (a numpy array included); not a set, a dict, an iterator or a string."""
    return (isinstance(value, Sequence) or hasattr(value, "__array__")) and not isinstance(value, (str, bytes))


def _has(mapping, key) -> bool:
    """``key in mapping``, and False for a key that cannot be one (unhashable junk from a caller)."""
    try:
        return key in mapping
    except TypeError:
        return False


# (the interpreter's switch interval before the first open device lowered it, the interval it was lowered to)
_switch_interval: tuple[float, float] | None = None


def _lower_switch_interval(interval: float) -> None:
    """While a device is open the interpreter's GIL switch interval is at most ``interval`` (0: left alone): the
    worker must win the GIL back after every wait on the GPU while the caller's thread runs Python (docs/performance.md).
    The interval before is kept, for the last device's close to restore."""
    global _switch_interval
    current = sys.getswitchinterval()
    if 0 < interval < current:
        sys.setswitchinterval(interval)
        if _switch_interval is None:  # what the interpreter reports back (it keeps whole microseconds)
            _switch_interval = (current, sys.getswitchinterval())


def _restore_switch_interval() -> None:
    """The last open device has closed: give the interpreter back the switch interval it had before the first device
    lowered it, unless the program has set another one meanwhile."""
    global _switch_interval
    if _switch_interval is not None:
        before, lowered = _switch_interval
        _switch_interval = None
        if sys.getswitchinterval() == lowered:
            sys.setswitchinterval(before)


def devices(config: VulkanConfig | None = None) -> list[Device]:
    """The devices to use: every Vulkan device with a compute queue, or those ``config.device_ids`` names.

    Devices already open are returned as they are. Raises ``BackendError(DyLibNotFound)`` without a Vulkan loader.
    """
    config = config if config is not None else VulkanConfig.from_env()
    if not isinstance(config, VulkanConfig):
        raise BackendError(ErrorStatus.InvalidArgument, f"devices() takes a VulkanConfig or None, got {config!r}")
    if config.device_ids is not None and not config.device_ids:
        return []
    vulkan()
    physicals = query_physical_devices()
    wanted = range(len(physicals)) if config.device_ids is None else config.device_ids
    instance = Instance.get()
    out = []
    for index in wanted:
        if not isinstance(index, int) or not 0 <= index < len(physicals):
            raise BackendError(ErrorStatus.InvalidArgument,
                               f"device id {index!r} does not exist: {len(physicals)} Vulkan device(s) found"
                               + ("" if physicals else f"; {NO_DEVICE_HINT}"))
        out.append(instance.open_device(index, functools.partial(Device, physicals[index], config)))
    return out
