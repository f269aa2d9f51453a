"""Device: the public face of one GPU (info, memory pool, compile, launch, timed launch, graphs, sync, close).

A device is made of units that each own their state (docs/architecture.md): the program table and cache
(programs.py), the submitter (submit.py), the worker thread (worker.py), the memory pool (memory/) and the launcher
(launch.py), which share the handles and error state of a DeviceContext (context.py). The worker is handed to the
units that queue work.
"""

from __future__ import annotations

import functools
import logging
import sys
import threading
from collections.abc import Sequence
from typing import Any

from ._ffi import success_counts, vulkan
from .config import VulkanConfig
from .context import DeviceContext
from .discovery import DeviceInfo, Instance, PhysicalDevice, create_device, query_physical_devices
from .errors import NO_DEVICE_HINT, BackendError, ErrorStatus
from .graph import Launch, LaunchGraph
from .interop.cuda_clocks import hold_compute_clocks
from .launch import Launcher
from .memory import MemoryPool
from .programs import ProgramCache, ProgramTable
from .spirv import ProgramInfo
from .submit import BatchSubmitter
from .types import DeviceStats, Grid, PipelineExecutable, Scalar
from .worker import Worker

log = logging.getLogger("vkbackend")
LIVE_OBJECT_CALLS = {
    "device_memory": ("vkAllocateMemory", "vkFreeMemory"),
    "buffers": ("vkCreateBuffer", "vkDestroyBuffer"),
    "pipelines": ("vkCreateComputePipelines", "vkDestroyPipeline"),
    "pipeline_layouts": ("vkCreatePipelineLayout", "vkDestroyPipelineLayout"),
    "shader_modules": ("vkCreateShaderModule", "vkDestroyShaderModule"),
    "fences": ("vkCreateFence", "vkDestroyFence"),
    "descriptor_pools": ("vkCreateDescriptorPool", "vkDestroyDescriptorPool"),
    "command_pools": ("vkCreateCommandPool", "vkDestroyCommandPool"),
    "devices": ("vkCreateDevice", "vkDestroyDevice"),
}


def live_objects() -> dict[str, int]:
    """The Vulkan objects alive in the process, by kind: the native layer's count of successful create calls less
    destroy calls (``LIVE_OBJECT_CALLS``), whether or not a device is open."""
    calls = success_counts()
    return {kind: calls[create] - calls[destroy] for kind, (create, destroy) in LIVE_OBJECT_CALLS.items()}


class Device:
    """One Vulkan device. Every method is safe to call from several threads at once."""

    def __init__(self, physical: PhysicalDevice, config: VulkanConfig) -> None:
        ffi, lib = vulkan()
        timeout_s = config.resolved_sync_timeout_s()  # settings first: a bad one fails before anything is made
        interval = config.resolved_switch_interval_s()
        cuda_clocks = config.resolved_cuda_clocks()
        cap = config.resolved_max_allocation_bytes()
        handles = create_device(physical, config)
        slots = lib.vkb_slots_new()
        self._ctx = ctx = DeviceContext(ffi, lib, handles, config, slots, timeout_s, cap)
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
            self._launcher = Launcher(ctx, self._worker, self._programs, self._pool)
        except BaseException:
            for undo in reversed(made):
                undo()
            lib.vkDestroyDevice(ctx.device, ffi.NULL)
            lib.vkb_slots_delete(slots)
            raise
        self._close_lock = threading.Lock()
        # The launch fast path: the launcher's own method, without a call of this class's in front (a launch costs a
        # few hundred nanoseconds, a call some tens).
        self.launch = self._launcher.launch
        _lower_switch_interval(interval)
        vulkan11: Any = physical.vulkan11  # VkPhysicalDeviceVulkan11Properties (cdata)
        self._clocks = hold_compute_clocks(handles.info.vendor_id, bytes(vulkan11.deviceUUID)) if cuda_clocks else None
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
    def compile(self, spirv: bytes, entry_point: str = "main", robust: bool = True, background: bool = False) -> int:
        """Compile SPIR-V into a program id; the same SPIR-V and entry point return the cached program.

        Out-of-bounds accesses of a program through its bound buffers are harmless by default (robust buffer access:
        reads give zero, writes are dropped); accesses through device addresses (``buffer_reference``) are not checked.
        ``robust=False`` is for kernels whose bounds are proven, such as a compiler's: where the device can
        choose per program (``info.pipeline_robustness``) they run without the checks, which can cost several times
        the kernel's time (docs/reliability.md); on other devices the device-wide setting holds.

        SPIR-V that is malformed, invalid or beyond the device's limits raises ``KernelCompilation`` here either way.
        ``background=True`` returns once it is checked and has the driver make the pipeline on another thread (a
        driver's compile can take tens of milliseconds): launches of the program may be queued at once and run once
        it is made. Should the driver fail to make it, the error is raised once, by the next sync point or a launch
        of the program, whichever comes first: the launches queued meanwhile are skipped (the others still run),
        later launches raise it (a graph's replays skip it and report it at the sync point), and a compile of the
        same SPIR-V after that tries again (one before it returns the same program).
        """
        prog = self._programs.compile(spirv, entry_point, robust, background)
        self._launcher.add(self._programs.get(prog))
        return prog

    def program_info(self, prog: int) -> ProgramInfo:
        """The interface reflected from the program's SPIR-V (local size, storage buffers, push constants)."""
        return self._programs.get(prog, "program_info").info

    def pipeline_statistics(self, prog: int) -> list[PipelineExecutable]:
        """What the driver's compiler made of a program's pipeline: each of its executables (a compute pipeline has one
        on most drivers) with its name, description, subgroup size and statistics by the driver's own names (NVIDIA's
        include the registers per invocation and the bytes spilled). The pipelines keep them only where the device
        was opened with ``VKBACKEND_PIPELINE_STATISTICS=1`` (``VulkanConfig(pipeline_statistics=True)``) and has
        ``VK_KHR_pipeline_executable_properties``; elsewhere ``InvalidArgument`` says which is missing. A program
        compiled in the background is waited for; one whose pipeline could not be made raises its error."""
        return self._programs.executables(prog)

    def release_program(self, prog: int) -> None:
        """Drop a reference to a program; safe while launches of it are still queued. In a forked child it does
        nothing: the program is the parent's. From a finalizer run by a garbage collection, the release waits for the
        device's next compile or release_program (the collector may have stopped this thread inside the cache's
        lock)."""
        if self._ctx.forked:
            return
        self._programs.release(prog)

    # ----- launches -----------------------------------------------------------------------------------------------
    def launch(self, prog: int, buffers: Sequence[int], scalars: Sequence[Scalar] = (), grid: Grid = (1, 1, 1)) -> None:
        """Queue one dispatch of ``grid`` work groups; returns at once.

        ``buffers`` bind to the program's storage buffers in binding order, ``scalars`` fill its push-constant members
        in order. Errors found now raise ``InvalidArgument``; errors found on the worker surface at the next sync point.
        """
        # Only reached as Device.launch(device, ...): __init__ binds each device's launch to its launcher's.
        self._launcher.launch(prog, buffers, scalars, grid)

    def graph(self, launches: Sequence[Launch | None]) -> LaunchGraph:
        """A :class:`LaunchGraph` of ``(program, buffers, scalars, grid)`` launches, each checked as ``launch`` checks
        it, that ``graph.launch()`` queues again in one call (for a framework's JIT replay)."""
        return LaunchGraph(self._launcher, self._pool, launches)

    def launch_timed(
        self, prog: int, buffers: Sequence[int], scalars: Sequence[Scalar] = (), grid: Grid = (1, 1, 1)
    ) -> int:
        """Run one launch alone and return its GPU time in nanoseconds (a sync point)."""
        return self._launcher.launch_timed(prog, buffers, scalars, grid)

    # ----- sync and lifetime --------------------------------------------------------------------------------------
    def sync(self) -> None:
        """Wait for all queued work; raise the first asynchronous error since the last sync point."""
        self._ctx.ensure_usable()
        self._worker.sync()

    def stats(self) -> DeviceStats:
        """Counters: batches, dispatches, barriers and copies submitted, batches submitted again as recorded before,
        and how often launches were throttled; this pool's usage; and the Vulkan objects alive in the process, from
        the native layer's count of successful create and destroy calls."""
        return {
            **self._submitter.stats(),
            "throttled": self._worker.throttle_count,
            "pool": self._pool.stats(),
            "live_objects": live_objects(),
        }

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
            if self._clocks is not None:  # what remains to run may run at Vulkan's clocks
                self._clocks.release()
            # Threads waiting on this device notice the close within WAKE_S and raise the closed error; one copying
            # through the staging ring finishes that copy first, and the ring stays mapped until it has.
            if not (self._worker.stop() and self._pool.transfers.wait_finished(ctx.sync_timeout_s)):
                ctx.abandoned = True
                if Instance._current is not None:
                    Instance._current.abandoned.append(self)
                log.warning(
                    "closing %s: its GPU work did not finish within %.1f s (VKBACKEND_SYNC_TIMEOUT_S); the "
                    "device is abandoned, its memory and objects are kept until the process exits",
                    self.info.name,
                    ctx.sync_timeout_s,
                )
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


# (the interpreter's switch interval before the first open device lowered it, the interval it was lowered to)
_switch_interval: tuple[float, float] | None = None


def _lower_switch_interval(interval: float) -> None:
    """While a device is open the interpreter's GIL switch interval is at most ``interval`` (0: left alone): the
    worker must win the GIL back after every wait on the GPU while the caller's thread runs Python
    (docs/performance.md).
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
            raise BackendError(
                ErrorStatus.InvalidArgument,
                f"device id {index!r} does not exist: {len(physicals)} Vulkan device(s) found"
                + ("" if physicals else f"; {NO_DEVICE_HINT}"),
            )
        out.append(instance.open_device(index, functools.partial(Device, physicals[index], config)))
    return out
