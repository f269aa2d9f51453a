"""BatchSubmitter: the window of pending records, a command buffer (two where its head goes first) and a fence per
batch, and reaping.

The worker moves launch records from its queue into the window (``take_records``) and adds copies and completions;
``submit`` hands the whole window to the C recorder in one call (csrc/recorder.c), which also decides the barriers,
and submits it. Every batch ends by writing its serial into the completion marker (marker.py), but only some signal
their fence: on NVIDIA's driver each signalled fence costs an interrupt that takes tens of microseconds from the CPU
it lands on, whichever thread runs there. A batch signals its fence when something runs on its completion (callbacks)
or it holds descriptor pools, when FENCE_EVERY - 1 batches in a row went without one, when a drain retires everything,
and while tracing (a batch's timestamps are read once its fence has signalled). A batch without one has completed once
the marker has reached its serial; its command buffer is recorded again only once a later fence has signalled (the
batch waits in ``_retiring`` meanwhile), as Vulkan requires. Command buffers, fences and descriptor pools are recycled
so; nothing has a fixed capacity. Everything here runs on the device's worker thread.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable

from . import records, trace
from .context import DeviceContext
from .descriptors import DescriptorSets
from .errors import BackendError, ErrorStatus, check, vk_error
from .marker import CompletionMarker
from .programs import ProgramTable
from .structs import new_array, new_struct

log = logging.getLogger("vkbackend")

__all__ = ["BatchSubmitter"]

WAITED_SPIN_NS = 5_000_000  # a sync point's wait spins this long before it sleeps in slices (csrc/fence.c)
KICK_GRACE_NS = 100_000  # a kicked worker waits this long for a caller to release the GIL before it takes it (fence.c)
HEAD_DISPATCHES = 4  # onto an idle GPU, a window of more than twice this many submits its first this many at once
HEAD_MIN_BYTES = (2 * HEAD_DISPATCHES + 1) * 20  # the shortest window that can be split (a dispatch is 5 words or more)
TRACE_QUERY_PAIRS = 256  # tracing: batches whose GPU start and end are kept at once (a batch completes long before)
MAX_EARLY_IN_FLIGHT = 2  # while the GPU is busy, the worker (and the express lane) queue at most this many batches
FENCE_EVERY = 16  # at least one batch in this many signals its fence (the others' command buffers wait for one)

WAIT_CALLS = "waiting for a batch (vkWaitForFences, vkGetFenceStatus)"  # what a failed wait on a batch called

# why the recorder skipped a record (vkb_window.error_code, decl/vkb.h), by the name of its code there
_RECORD_ERRORS = {
    "VKB_ERROR_GRID": "its grid is outside 1..maxComputeWorkGroupCount per axis",
    "VKB_ERROR_PROGRAM": "the program was released, its pipeline could not be made, or it is unknown",
    "VKB_ERROR_SLOT": "a buffer was released before the launch ran",
    "VKB_ERROR_MALFORMED": "a malformed record",
}


class Batch:
    """One submitted command buffer (two where the window's head went first), its fence, and what to do when it
    completes."""

    __slots__ = ("serial", "cmd", "head", "fence", "fenced", "callbacks", "descriptor_pools")

    def __init__(self, cmd, fence) -> None:
        self.serial = 0
        self.cmd, self.fence = cmd, fence
        self.fenced = False  # submitted with its fence (else its completion is the marker's)
        self.head = None  # the command buffer of a window's head, allocated the first time one is split
        self.callbacks: list = []
        self.descriptor_pools: list = []


class BatchSubmitter:
    """Records and submits windows of work for one device's queue. Used only by that device's worker."""

    def __init__(self, ctx: DeviceContext, table: ProgramTable) -> None:
        self.ctx = ctx
        self._table = table
        ffi, lib = ctx.ffi, ctx.lib
        info = ctx.info
        self._marker = CompletionMarker(ctx)
        try:
            self._loss_probe = self._create_fence()
        except BackendError:
            self._marker.destroy()
            raise
        pool_info = new_struct(
            "VkCommandPoolCreateInfo",
            flags=lib.VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
            queueFamilyIndex=ctx.handles.physical.queue_family,
        )
        pool = ffi.new("VkCommandPool*")
        result = lib.vkCreateCommandPool(ctx.device, pool_info, ffi.NULL, pool)
        if result != 0:
            self._destroy_marker()
            check(result, "vkCreateCommandPool", ErrorStatus.Initialization)
        self._command_pool = pool[0]
        self._query_pool = ffi.NULL
        self._gpu_clock = None  # tracing: (GPU ticks, host ns) taken at one instant, where the device can tell
        if info.timestamps:
            # queries 0 and 1 time a timed run; with tracing, each batch writes its start and end into a pair past them
            qinfo = new_struct(
                "VkQueryPoolCreateInfo",
                queryType=lib.VK_QUERY_TYPE_TIMESTAMP,
                queryCount=2 + (2 * TRACE_QUERY_PAIRS if trace.enabled else 0),
            )
            qp = ffi.new("VkQueryPool*")
            result = lib.vkCreateQueryPool(ctx.device, qinfo, ffi.NULL, qp)
            if result != 0:
                lib.vkDestroyCommandPool(ctx.device, self._command_pool, ffi.NULL)
                self._destroy_marker()
                check(result, "vkCreateQueryPool", ErrorStatus.Initialization)
            self._query_pool = qp[0]
            if trace.enabled:
                self._gpu_clock = _calibrate(ctx)
        self._records: list[bytes] = []  # the window: records not yet submitted, in order
        self._callbacks: list[Callable] = []  # what runs once the window's batch completes
        self._free_bytes = 0  # device memory those completions give back
        self.window_limit = max(1, ctx.config.window_launches)
        self._in_flight: deque[Batch] = deque()
        self._retiring: list[Batch] = []  # completed by the marker, waiting for a later fence before reuse
        self._abandoned: list[Batch] = []  # given up on (device lost, deadline at close): destroyed with the rest
        self._spare: list[Batch] = []
        self._descriptors = None if info.push_descriptors else DescriptorSets(ctx)
        self.submitted = 0  # serial of the last submitted batch
        self.completed = 0  # serial of the last completed batch
        self._window = self._init_window(ffi.new("vkb_window*"))
        self._window.epoch = 1
        self._fence_ptr = ffi.new("VkFence*")
        self._reset_result = ffi.new("VkResult*")  # vkb_wait_last's reset of the fence
        # the serial of the last batch completed (its completions run), for callers waiting at sync points (fence.c)
        self.progress = ffi.new("vkb_progress*")
        self.progress.marker = self._marker.word
        self.progress.loss_probe = self._loss_probe
        # on a CPU device or with two cores or fewer, only as long as any other wait (VKB_SPIN_NS)
        self.progress.spin_ns = WAITED_SPIN_NS if ctx.polling_pays else lib.VKB_SPIN_NS
        self.progress.grace_ns = KICK_GRACE_NS if ctx.polling_pays else 0
        self._stats = {
            "batches": 0,
            "dispatches": 0,
            "barriers": 0,
            "copies": 0,
            "submit_ns": 0,
            "reused": 0,
            "heads": 0,
        }
        # The express lane (csrc/express.c): where polling pays and the device pushes descriptors (no set to take per
        # dispatch), a parked worker submits a lone launch itself. Not while tracing: its events come from Python.
        self._express = ffi.new("vkb_express*")
        x = self._express
        x.main, x.queue = self._window, ctx.handles.queue
        x.fence_every = FENCE_EVERY  # x.unfenced counts the batches since the last fence, the worker's and the lane's
        x.max_running = MAX_EARLY_IN_FLIGHT  # the lane queues no more batches on the GPU than the worker does
        x.head_dispatches = HEAD_DISPATCHES  # and splits a long serve onto an idle GPU as the worker's windows
        # the slots' windows, whose epoch is the main window's; each keeps its recording, so that a launch repeated
        # round after round is submitted again as recorded (csrc/recorder.c), its serial copied from a source word
        self._express_windows = [self._init_window(ffi.addressof(slot, "window")) for slot in x.slots]
        self._recordings = [ffi.new("vkb_recording*") for _ in x.slots]
        for i, w in enumerate(self._express_windows):
            w.recording = self._recordings[i]
            w.marker_source, w.marker_host = self._marker.source_offset(i), self._marker.word
        self._express_batches: list[Batch | None] = [None] * len(x.slots)  # the batches the lane submits into
        self.express_count = 0  # queue items (launches, graph replays, copies) the lane has submitted
        self.express = ctx.polling_pays and info.push_descriptors and not trace.enabled
        self.progress.express = x

    def stats(self) -> dict[str, int]:
        """What the device submitted: batches, dispatches, barriers, copies, and the nanoseconds spent recording and
        submitting them (the express lane's counted in C as it submits)."""
        x = self._express
        return {name: count + getattr(x, name) for name, count in self._stats.items()}

    def _init_window(self, w):
        """``w`` (a ``vkb_window*``) with what every window of this device records against."""
        w.device, w.query_pool, w.slots = self.ctx.device, self._query_pool, self.ctx.slots
        w.marker_buffer = self._marker.buffer
        for axis in range(3):
            w.max_groups[axis] = self.ctx.info.max_global_work_dims[axis]
        return w

    # ----- the window ---------------------------------------------------------------------------------------------
    def take_records(self, queue: deque) -> bool:
        """Move launch records (``bytes``) from the head of ``queue`` into the window, until the window is full or the
        head is something else. True when the window is full."""
        window, limit = self._records, self.window_limit
        while queue and queue[0].__class__ is bytes:
            window.append(queue.popleft())
            if len(window) >= limit:
                return True
        return False

    def add_copy(self, record: bytes, on_done: Callable | None) -> bool:
        """Add a copy record, and ``on_done`` to run once it has completed on the GPU. True when the window is full."""
        self._records.append(record)
        if on_done is not None:
            self._callbacks.append(on_done)
        return len(self._records) >= self.window_limit

    def after_queued(self, fn: Callable, nbytes: int = 0) -> int:
        """Run ``fn`` once all work added so far has completed and is retired: with the window's batch (which then
        signals its fence), else with the last batch in flight where it signals one, else now. ``nbytes`` is the
        device memory it gives back; returns what the window holds back so."""
        if self._records or self._callbacks or self._awaits_fence():
            self._callbacks.append(fn)
            self._free_bytes += nbytes
            return self._free_bytes
        if self._in_flight:
            self._in_flight[-1].callbacks.append(fn)
        else:
            self._run([fn])
        return 0

    @property
    def pending(self) -> bool:
        """Whether the window holds anything to submit."""
        return bool(self._records or self._callbacks)

    def _awaits_fence(self) -> bool:
        """Whether retiring what was submitted so far takes a fence not yet submitted: the last batch in flight has
        none, or batches completed by the marker wait for one."""
        return bool(self._retiring) or bool(self._in_flight and not self._in_flight[-1].fenced)

    @property
    def in_flight(self) -> int:
        """How many submitted batches have not completed."""
        return len(self._in_flight)

    # ----- batches ------------------------------------------------------------------------------------------------
    def _new_batch(self) -> Batch:
        if self._spare:
            return self._spare.pop()
        ffi, lib, dev = self.ctx.ffi, self.ctx.lib, self.ctx.device
        cmd = self._new_command_buffer()
        try:
            fence = self._create_fence()
        except BackendError:
            lib.vkFreeCommandBuffers(dev, self._command_pool, 1, ffi.new("VkCommandBuffer*", cmd))
            raise
        return Batch(cmd, fence)

    def _create_fence(self):
        ffi, lib = self.ctx.ffi, self.ctx.lib
        fence = ffi.new("VkFence*")
        check(
            lib.vkCreateFence(self.ctx.device, new_struct("VkFenceCreateInfo"), ffi.NULL, fence),
            "vkCreateFence",
            ErrorStatus.MemoryAllocation,
        )
        return fence[0]

    def _destroy_marker(self) -> None:
        """The completion marker and the loss probe (no batch may use them any more)."""
        self.ctx.lib.vkDestroyFence(self.ctx.device, self._loss_probe, self.ctx.ffi.NULL)
        self._marker.destroy()

    def _new_command_buffer(self):
        ffi, lib = self.ctx.ffi, self.ctx.lib
        alloc = new_struct(
            "VkCommandBufferAllocateInfo",
            commandPool=self._command_pool,
            level=lib.VK_COMMAND_BUFFER_LEVEL_PRIMARY,
            commandBufferCount=1,
        )
        cmd = ffi.new("VkCommandBuffer*")
        check(
            lib.vkAllocateCommandBuffers(self.ctx.device, alloc, cmd),
            "vkAllocateCommandBuffers",
            ErrorStatus.MemoryAllocation,
        )
        return cmd[0]

    def submit(self, split: bool = True, fence: bool = False) -> None:
        """Record the window and submit it: onto an idle GPU and with ``split``, a long window's first HEAD_DISPATCHES
        dispatches go first in a command buffer of their own, the rest in another. It signals its fence where it has
        completions or descriptor pools, with ``fence`` (then even an empty window is submitted), after FENCE_EVERY - 1
        batches without one, and while tracing."""
        if not self._records and not self._callbacks and not fence:
            return
        ctx = self.ctx
        ffi, lib = ctx.ffi, ctx.lib
        window, self._records = self._records, []
        callbacks, self._callbacks = self._callbacks, []
        self._free_bytes = 0
        if ctx.lost is not None:
            self._run(callbacks)
            return
        try:
            batch = self._new_batch()
        except BackendError as error:
            ctx.fail(error)
            self._unsubmitted(callbacks)
            return
        serial = self.submitted + 1
        if self._gpu_clock is not None:  # tracing: the batch's start and end on the GPU's clock
            query = 2 + 2 * (serial % TRACE_QUERY_PAIRS)
            window = [records.reset_queries(query, 2), records.timestamp(query), *window, records.timestamp(query + 1)]
        words = b"".join(window)
        w = self._window
        w.cmd = batch.cmd
        w.head_cmd, w.head_dispatches = ffi.NULL, 0
        w.head_submitted = w.fence_submitted = 0
        if split and not self._in_flight and len(words) >= HEAD_MIN_BYTES:  # the GPU is idle: start it on the head
            if batch.head is None:
                try:
                    batch.head = self._new_command_buffer()
                except BackendError:  # the window goes in one submission
                    pass
            if batch.head is not None:  # a split batch signals its fence: should the rest fail, it covers the head
                w.head_cmd, w.head_dispatches = batch.head, HEAD_DISPATCHES
        w.words = ffi.cast("const uint32_t*", ffi.from_buffer(words))
        w.n_words = len(words) // 4
        w.programs = self._table.array
        w.n_programs = self._table.capacity
        w.sets, w.n_sets = ffi.NULL, 0
        w.marker_value = serial & 0xFFFFFFFF
        x = self._express
        try:
            sets = self._descriptor_sets(batch) if self._descriptors is not None else None
            if sets is not None:
                w.sets, w.n_sets = sets, len(sets)
            batch.fenced = bool(
                fence
                or callbacks
                or batch.descriptor_pools
                or w.head_dispatches
                or x.unfenced + 1 >= FENCE_EVERY
                or trace.enabled
            )
            if trace.enabled:
                trace.event("submit", serial)
            # handed over by a caller who runs on: linger until it waits or hands more over, so that the GIL is free
            # then (fence.c)
            linger_ns = self.progress.grace_ns if self.progress.handing else 0
            result = lib.vkb_submit_batch(w, ctx.handles.queue, self._signal(batch), self.progress, linger_ns)
            self._stats["submit_ns"] += w.submit_ns  # the express lane's are counted in C
            if trace.enabled:
                trace.event("submitted", serial)
            self._check_submitted(w, result)
        except Exception as error:  # whatever it was, waiters must be released and the error must reach a sync point
            self._submit_failed(error, batch, callbacks, w)
            return
        x.unfenced = 0 if batch.fenced else x.unfenced + 1
        self._track(batch, callbacks)
        self._count(batch, w)

    def _check_submitted(self, w, result: int) -> None:
        """After a window's submit: skipped records become the pending error; a failed submit raises."""
        ctx, ffi, lib = self.ctx, self.ctx.ffi, self.ctx.lib
        if w.n_errors:
            ctx.fail(
                BackendError(
                    ErrorStatus.KernelLaunch,
                    f"{w.n_errors} launch(es) skipped; the first, of {self._table.name(w.error_program)}, "
                    f"because {_record_error(lib, w.error_code)}",
                )
            )
        if result != 0:  # the window's dispatches: n_dispatches counts only those recorded before the failure
            what = f"recording and submitting {lib.vkb_window_set_layouts(w, ffi.NULL, 0)} dispatches"
            if w.head_submitted:
                what += f" (the first {w.head_dispatches} had been submitted on their own and run; the rest do not)"
            check(result, what, ErrorStatus.KernelLaunch)

    def _submit_failed(self, error: Exception, batch: Batch, callbacks: list, w) -> None:
        """A window whose submit failed (``w`` its window): the error goes to the next sync point, and the batch is
        tracked, set aside or reused by what of it reached the GPU."""
        self.ctx.fail(
            error
            if isinstance(error, BackendError)
            else BackendError(ErrorStatus.KernelLaunch, f"submitting a window failed: {error!r}")
        )
        self._window.barrier_first = 1  # the hazard state counts barriers of the failed recording, which never ran
        if w.fence_submitted:  # its head runs on the GPU: the batch's fence tells when it is done
            self._express.unfenced = 0
            self._track(batch, callbacks)
            return
        if w.head_submitted:  # its head runs, and not even the fence alone reached the queue: the completions wait
            self._abandoned.append(batch)  # for the next batch, which signals its fence (it has them)
            self._callbacks[:0] = callbacks
            return
        if self.ctx.lib.vkResetCommandBuffer(batch.cmd, 0) != 0:  # keep it out of reuse: it may hold the recording
            self._abandoned.append(batch)
            self._unsubmitted(callbacks)
            return
        self._recycle_descriptor_pools(batch)
        self._spare.append(batch)
        self._unsubmitted(callbacks)  # the error reaches the next sync point

    def _count(self, batch: Batch, w) -> None:
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "batch %d: %d dispatches, %d copies, %d barriers",
                batch.serial,
                w.n_dispatches,
                w.n_copies,
                w.n_barriers,
            )
        st = self._stats
        st["batches"] += 1
        st["dispatches"] += w.n_dispatches
        st["barriers"] += w.n_barriers
        st["copies"] += w.n_copies
        st["heads"] += w.head_submitted

    # ----- the express lane ---------------------------------------------------------------------------------------
    def ready_express(self, running: int = 0) -> None:
        """Before a park with nothing recorded or running (but the ``running`` batches whose completion the park
        follows): ready the express lane, so that the park can submit lone launches and read-backs' copies
        (csrc/express.c) into batches of its own, one after the other."""
        if not self.express or self.ctx.lost is not None or len(self._in_flight) > running:
            return
        if self._records or self._callbacks:
            return
        x, batches = self._express, self._express_batches
        for i, w in enumerate(self._express_windows):
            if batches[i] is None:
                try:
                    batch = self._new_batch()
                except BackendError:  # the launch takes the usual path, which reports the error
                    return
                if batch.head is None:
                    with contextlib.suppress(BackendError):  # without one, the lane submits a long serve whole
                        batch.head = self._new_command_buffer()
                batches[i] = batch
                w.cmd, x.slots[i].fence = batch.cmd, batch.fence
                w.head_cmd = self.ctx.ffi.NULL if batch.head is None else batch.head
                w.recording.cmd = self.ctx.ffi.NULL  # a command buffer that was the worker's holds none of the lane's
            w.programs, w.n_programs = self._table.array, self._table.capacity
        x.serial = self.submitted + 1  # nothing is tracked before the lane's batches (take_express comes first)
        x.served = 0
        x.ready = 1

    def express_served(self) -> int:
        """After a park readied for the lane: how many records it submitted (those at the head of the worker's
        queue, which the worker then drops before :meth:`take_express`). The lane's state is the worker's here (a
        launcher changes it only while it is armed): it is set off before the records are dropped, so that a sync
        point no longer takes them for the lane's (``Worker.sync``)."""
        x = self._express
        x.ready = 0
        served, x.served = x.served, 0
        if served:
            x.state = x.state >> 8 << 8 | self.ctx.lib.VKB_EXPRESS_OFF
        return served

    def take_express(self, served: int) -> None:
        """Account for the ``served`` batches the lane submitted in its park, one after the other. Those the park
        freed (a fence it saw signal covered them) have completed and are retired, their serials published from C;
        those it saw complete by the marker wait for a fence (``_retiring``); the others are tracked, oldest first.
        A serve that never reached the GPU (the park's last) still takes its serial, which a caller may be waiting
        for: the batch before it, still running, takes it over where it signals a fence, else a fence submitted
        alone; with nothing running it is published at once; either way after the error."""
        x, batches = self._express, self._express_batches
        self.express_count += served
        if x.retired:  # a fence the park saw signal covers every batch before it, this thread's own among them
            self._retire()
            x.retired = 0
        tracked = sorted((i for i, slot in enumerate(x.slots) if slot.in_use), key=lambda i: x.slots[i].serial)
        failed = next((i for i, slot in enumerate(x.slots) if slot.result != 0), None)
        self.submitted = self.completed = (x.slots[tracked[0]].serial if tracked else x.serial) - 1
        for i in tracked:
            slot, batch, batches[i] = x.slots[i], batches[i], None
            batch.fenced = bool(slot.fenced)
            if slot.window.n_errors:
                self._check_submitted(self._express_windows[i], 0)  # the skipped records' error, before completion
            self.submitted = slot.serial - 1
            self._track(batch, [])
            if slot.fence_result == 0:
                if not slot.running:  # completed by the marker, its serial published: it waits for a fence
                    self._in_flight.pop()
                    self._retiring.append(batch)
                    self.completed = slot.serial
                continue
            if slot.running:  # polling it failed (its fence, or the loss probe): the device may be lost
                self._fence_failed(slot.fence_result, WAIT_CALLS)
            else:  # completed, but its fence could not be reset
                self._complete(batch, reset=slot.fence_result)
        if failed is not None:
            slot, batch, batches[failed], w = x.slots[failed], batches[failed], None, self._express_windows[failed]
            batch.fenced = bool(w.fence_submitted)  # alone, after a head whose rest failed
            try:
                self._check_submitted(w, slot.result)
            except Exception as error:
                self._submit_failed(error, batch, [], w)
            self.submitted = slot.serial - 1
            if self._in_flight and self._in_flight[-1].fenced:  # its fence signals once everything before it is done
                self.submitted = self._in_flight[-1].serial = slot.serial
            elif not (self._in_flight and self._fence_alone([])):  # else a fence alone takes the serial
                if self._in_flight:  # no fence could be submitted: wait for the batches by the marker
                    self._settle()
                self.submitted = self.completed = slot.serial  # everything up to it has completed, or failed
                self.ctx.lib.vkb_publish_completed(self.progress, slot.serial, 0)

    def _track(self, batch: Batch, callbacks: list) -> None:
        """A submitted batch: in flight until it completes (its fence, or the marker), then ``callbacks`` run (a batch
        with callbacks signals its fence)."""
        self.submitted += 1
        batch.serial = self.submitted
        batch.callbacks = callbacks
        self._in_flight.append(batch)

    def _descriptor_sets(self, batch: Batch):
        """Without push descriptors: a set per dispatch of the window, in order (None when it has no dispatch)."""
        ffi, lib, w = self.ctx.ffi, self.ctx.lib, self._window
        count = lib.vkb_window_set_layouts(w, ffi.NULL, 0)
        if not count:
            return None
        layouts = ffi.new("VkDescriptorSetLayout[]", count)
        lib.vkb_window_set_layouts(w, layouts, count)
        return self._descriptors.allocate(layouts, count, batch.descriptor_pools)

    def _recycle_descriptor_pools(self, batch: Batch) -> None:
        if self._descriptors is not None:
            self._descriptors.recycle(batch.descriptor_pools)

    # ----- completion ---------------------------------------------------------------------------------------------
    def _complete(
        self,
        batch: Batch,
        hold_ns: int = 0,
        on_hold: Callable[[bool], None] | None = None,
        reset: int | None = None,
        published: bool = False,
    ) -> None:
        """A batch has completed: one that signalled its fence is recycled with every batch before it waiting for a
        fence, and its completions run; one without waits for a fence. Then its serial is published. ``reset``: the
        result of the fence's reset where C has done it (a batch without a fence: 0); ``published``: C has published
        the serial too. With
        ``hold_ns``, when this was the last batch and the window is empty, a caller released by the publish is not
        raced for the GIL: the worker waits for its next work inside the publish (csrc/fence.c), ``on_hold(True)``
        before and ``on_hold(False)`` after (which takes what the express lane, readied for the hold, submitted)."""
        self._in_flight.popleft()
        lib = self.ctx.lib
        if trace.enabled:
            trace.event("complete", batch.serial)
            if self._gpu_clock is not None:
                self._trace_gpu(batch.serial)
        self.completed = batch.serial
        if not batch.fenced:
            self._retiring.append(batch)
        else:
            result = reset
            if result is None:
                self._fence_ptr[0] = batch.fence
                result = lib.vkResetFences(self.ctx.device, 1, self._fence_ptr)
            if result != 0:
                self.ctx.fail(vk_error(result, "vkResetFences", ErrorStatus.KernelSync))
            self._recycle_descriptor_pools(batch)
            self._retire()
            # A fence that could not be reset is still signalled: submitting with it again is invalid (it crashes the
            # validation layer), so its batch is set aside and destroyed at close instead of reused.
            (self._spare if result == 0 else self._abandoned).append(batch)
        callbacks, batch.callbacks = batch.callbacks, []
        self._run(callbacks)
        if published:
            return
        if hold_ns and on_hold is not None and not (self._in_flight or self._records or self._callbacks):
            self.ready_express()
            on_hold(True)
            lib.vkb_publish_completed(self.progress, batch.serial, hold_ns)
            on_hold(False)
        else:
            lib.vkb_publish_completed(self.progress, batch.serial, 0)

    def _signal(self, batch: Batch):
        """The fence ``batch`` signals (what its submit passes and a wait for it polls), or NULL: the marker's."""
        return batch.fence if batch.fenced else self.ctx.ffi.NULL

    def _retire(self) -> None:
        """A fence has signalled, which covers every batch before it: those completed by the marker are reused."""
        self._spare += self._retiring
        self._retiring = []

    def _unsubmitted(self, callbacks: list) -> None:
        """Completions of a window that was never submitted. They may free buffers that earlier batches still use, so
        they wait for the last batch in flight where it signals a fence, else for a fence submitted alone, else (no
        fence could be submitted either) for the queue to go idle; with nothing submitted that is not retired (or a
        lost device) they run now."""
        if self.ctx.lost is None:
            if self._in_flight and self._in_flight[-1].fenced:
                self._in_flight[-1].callbacks.extend(callbacks)
                return
            if self._awaits_fence():
                if self._fence_alone(callbacks):
                    return
                if not self._settle():
                    self._callbacks[:0] = callbacks  # the next batch signals its fence (it has them)
                    return
        self._run(callbacks)

    def _settle(self) -> bool:
        """Without a fence to submit: wait, within the sync deadline, for every batch in flight (by the marker), then
        for the queue to go idle, which it already is (``vkQueueWaitIdle``, which tells Vulkan that everything
        submitted has completed); every batch is then retired. False when the deadline passed first (the error is
        kept for the next sync point) or the wait failed."""
        ctx = self.ctx
        try:
            self._wait_all(time.monotonic_ns() + ctx.sync_timeout_ns, ctx.sync_timeout_ns)
        except BackendError as error:
            ctx.fail(error)
            return False
        result = ctx.lib.vkQueueWaitIdle(ctx.handles.queue)
        if result != 0:
            ctx.fail(vk_error(result, "vkQueueWaitIdle", ErrorStatus.KernelSync))
            return False
        self._retire()
        return True

    def _fence_alone(self, callbacks: list) -> bool:
        """Submit a fence alone (it covers every batch before it), tracked as a batch whose completion runs
        ``callbacks``; False when it cannot be made or submitted."""
        lib = self.ctx.lib
        try:
            batch = self._new_batch()
        except BackendError:
            return False
        if lib.vkQueueSubmit(self.ctx.handles.queue, 0, self.ctx.ffi.NULL, batch.fence) != 0:
            self._spare.append(batch)
            return False
        batch.fenced = True
        self._express.unfenced = 0
        self._track(batch, callbacks)
        return True

    def _run(self, callbacks: list) -> None:
        for fn in callbacks:  # every one runs: a waiter whose ticket is skipped would wait out the deadline
            try:
                fn()
            except Exception as error:
                self.ctx.fail(
                    error
                    if isinstance(error, BackendError)
                    else BackendError(ErrorStatus.KernelSync, f"a completion failed: {error!r}")
                )

    def _fence_failed(self, result: int, what: str) -> None:
        """A fence query failed: a lost device is sticky and releases every waiter; other failures are kept."""
        error = vk_error(result, what, ErrorStatus.KernelSync)
        self.ctx.fail(error)
        if error.status is ErrorStatus.DeviceLost:
            self.abandon()

    def abandon(self, wait_ns: int = 0) -> None:
        """Give up on the batches in flight and run every pending completion, so no thread waits forever: the device
        is gone, or the worker met an error it cannot place. With ``wait_ns`` the GPU gets that long to finish them
        first, so that their completions (frees among them) release nothing it still uses."""
        deadline = time.monotonic_ns() + wait_ns
        lib = self.ctx.lib
        finished = bool(wait_ns)
        for batch in self._in_flight if wait_ns else ():  # each batch is given up anyway
            left = max(0, deadline - time.monotonic_ns())
            finished &= (
                lib.vkb_wait_batch(self.ctx.device, self._signal(batch), batch.serial, left, self.progress, 0) == 0
            )
        if finished:  # the queue is idle: this returns at once, and tells Vulkan that everything has completed
            lib.vkQueueWaitIdle(self.ctx.handles.queue)  # its result does not matter: the batches are given up
        self._abandoned += self._retiring
        self._retiring = []
        while self._in_flight:
            batch = self._in_flight.popleft()
            self._abandoned.append(batch)
            self._run(batch.callbacks)
            batch.callbacks = []
        self._run(self._callbacks)
        self._callbacks = []
        self._records = []
        self.ctx.lib.vkb_publish_completed(self.progress, self.submitted, 0)  # release every waiting caller

    def reap(self, hold_ns: int = 0, on_hold: Callable[[bool], None] | None = None) -> None:
        """Complete every batch that has completed (its fence, or the marker), without waiting. ``hold_ns`` and
        ``on_hold``: see :meth:`_complete` (a caller waiting for the last batch, which completed before the worker
        looked, is released the same way as by a wait that sees it complete)."""
        lib, dev = self.ctx.lib, self.ctx.device
        while self._in_flight:
            batch = self._in_flight[0]
            if batch.fenced:
                result = lib.vkGetFenceStatus(dev, batch.fence)
            else:
                result = 0 if lib.vkb_marker_reached(self.progress, batch.serial) else lib.VK_NOT_READY
            if result == 0:
                self._complete(batch, hold_ns, on_hold)
            elif result == lib.VK_NOT_READY:
                return
            else:
                self._fence_failed(result, "vkGetFenceStatus")
                return

    def wait_oldest(
        self,
        timeout_ns: int,
        kicked: bool = False,
        hold_ns: int = 0,
        on_hold: Callable[[bool], None] | None = None,
    ) -> int:
        """Wait up to ``timeout_ns`` for the oldest batch, its fence or the marker (GIL released); the wait's VkResult
        (0: it completed).
        With ``kicked`` it also ends (VK_NOT_READY) once something is queued for the worker (``progress.kick``) and
        a caller waits or the kick is ``progress.grace_ns`` old. ``hold_ns`` and ``on_hold``: see :meth:`_complete`.

        The wait polls in C (csrc/fence.c): a blocking vkWaitForFences can oversleep by milliseconds. It spins for
        longer while a caller waits at a sync point. The last batch in flight, when nothing runs on its completion,
        is published from C as it completes (:meth:`_wait_last`)."""
        lib = self.ctx.lib
        batch = self._in_flight[0]
        if kicked and hold_ns and on_hold is not None and self._publishes_at_fence(batch):
            result = self._wait_last(batch, timeout_ns, hold_ns, on_hold)
        else:
            result = lib.vkb_wait_batch(
                self.ctx.device, self._signal(batch), batch.serial, timeout_ns, self.progress, kicked
            )
            if result == 0:
                self._complete(batch, hold_ns, on_hold)
        if result == 0:
            self.reap(hold_ns, on_hold)
        elif result not in (lib.VK_TIMEOUT, lib.VK_NOT_READY):
            self._fence_failed(result, WAIT_CALLS)
        return result

    def _publishes_at_fence(self, batch: Batch) -> bool:
        """Whether ``batch`` is the last in flight, with nothing recorded after it and nothing to run or recycle on
        its completion (callbacks, descriptor pools, whose reset can fail), so that its serial can be published the
        moment it completes. Not while tracing, whose events of the completion come from :meth:`_complete`."""
        if len(self._in_flight) != 1 or batch.callbacks or batch.descriptor_pools:
            return False
        return not (self._records or self._callbacks or trace.enabled)

    def _wait_last(self, batch: Batch, timeout_ns: int, hold_ns: int, on_hold: Callable[[bool], None]) -> int:
        """The wait on the last batch, which nothing runs on completing: C publishes its serial as it completes and
        holds there (``vkb_wait_last``), the express lane readied for the hold; the batch is recycled after.
        ``on_hold(True)`` comes before the wait: the worker counts as idle throughout, so that a sync point waits for
        the fence itself and a launch wakes the worker."""
        self.ready_express(running=1)
        reset = self._reset_result
        reset[0] = 0
        on_hold(True)
        result = self.ctx.lib.vkb_wait_last(
            self.ctx.device, self._signal(batch), batch.serial, timeout_ns, self.progress, hold_ns, reset
        )
        if result == 0:
            if reset[0] == 0:
                self._complete(batch, reset=0, published=True)
            else:  # not published: the reset's error first
                self._complete(batch, reset=reset[0])
        on_hold(False)
        return result

    def drain(self, timeout_ns: int, split: bool = True) -> None:
        """Submit the window (see :meth:`submit` for ``split``) and wait for every batch, then retire them all (a
        fence submitted after the last, where it had none); a batch that outlives the deadline raises KernelSync."""
        self.submit(split)
        deadline = time.monotonic_ns() + timeout_ns
        self._wait_all(deadline, timeout_ns)
        if self._awaits_fence() and self.ctx.lost is None:
            self.submit(fence=True)
            self._wait_all(deadline, timeout_ns)

    def _wait_all(self, deadline: int, timeout_ns: int) -> None:
        while self._in_flight:
            left = deadline - time.monotonic_ns()
            # The wait gets the whole time left, so a VK_TIMEOUT from it means the deadline has passed.
            result = self.wait_oldest(left) if left > 0 else self.ctx.lib.VK_TIMEOUT
            if result == 0:
                continue
            if self.ctx.lost is not None:
                return
            if result == self.ctx.lib.VK_TIMEOUT:
                raise BackendError(
                    ErrorStatus.KernelSync,
                    f"GPU work on {self.ctx.info.name} did not finish within "
                    f"{timeout_ns / 1e9:.1f} s (VKBACKEND_SYNC_TIMEOUT_S); it may still be running",
                )

    def timed(self, window: bytes, timeout_ns: int) -> int:
        """Run packed records alone between two timestamps; GPU nanoseconds (wall clock without timestamps)."""
        lib, ffi = self.ctx.lib, self.ctx.ffi
        self.drain(timeout_ns)
        if not self.ctx.info.timestamps:
            start = time.perf_counter_ns()
            self._records.append(window)
            self.drain(timeout_ns)
            return time.perf_counter_ns() - start
        self._records += [records.reset_queries(0, 2), records.timestamp(0), window, records.timestamp(1)]
        self.drain(timeout_ns, split=False)  # split, the time between the stamps would hold the rest's recording
        if self.ctx.lost is not None:
            return 0
        stamps = ffi.new("uint64_t[2]")
        check(
            lib.vkGetQueryPoolResults(
                self.ctx.device,
                self._query_pool,
                0,
                2,
                16,
                stamps,
                8,
                lib.VK_QUERY_RESULT_64_BIT | lib.VK_QUERY_RESULT_WAIT_BIT,
            ),
            "vkGetQueryPoolResults",
            ErrorStatus.KernelSync,
        )
        bits = self.ctx.handles.physical.timestamp_bits
        ticks = (stamps[1] - stamps[0]) & ((1 << bits) - 1 if bits < 64 else (1 << 64) - 1)
        return int(ticks * self.ctx.info.timestamp_period_ns)

    def _trace_gpu(self, serial: int) -> None:
        """Tracing: the completed batch's start and end on the GPU, as host times."""
        ffi, lib = self.ctx.ffi, self.ctx.lib
        stamps = ffi.new("uint64_t[2]")
        query = 2 + 2 * (serial % TRACE_QUERY_PAIRS)
        if (
            lib.vkGetQueryPoolResults(
                self.ctx.device, self._query_pool, query, 2, 16, stamps, 8, lib.VK_QUERY_RESULT_64_BIT
            )
            != 0
        ):
            return  # a debugging aid: a batch whose stamps cannot be read has no GPU events in the trace
        ticks, host_ns = self._gpu_clock
        period = self.ctx.info.timestamp_period_ns
        for name, stamp in (("gpu_start", stamps[0]), ("gpu_end", stamps[1])):
            trace.gpu_event(host_ns + int((stamp - ticks) * period), name, serial)

    def destroy(self) -> None:
        """Destroy every batch, pool and fence (the device is idle)."""
        ffi, lib, dev = self.ctx.ffi, self.ctx.lib, self.ctx.device
        batches = self._spare + list(self._in_flight) + self._retiring + self._abandoned
        batches += [batch for batch in self._express_batches if batch is not None]
        self._express_batches = [None] * len(self._express_batches)
        for batch in batches:
            lib.vkDestroyFence(dev, batch.fence, ffi.NULL)
        if self._descriptors is not None:
            self._descriptors.destroy([batch.descriptor_pools for batch in batches])
        self._spare, self._retiring, self._abandoned = [], [], []
        self._in_flight.clear()
        lib.vkDestroyCommandPool(dev, self._command_pool, ffi.NULL)
        if self._query_pool != ffi.NULL:
            lib.vkDestroyQueryPool(dev, self._query_pool, ffi.NULL)
        self._destroy_marker()


def _record_error(lib, code: int) -> str:
    """Why the recorder skipped a record, for its error code."""
    return next((why for name, why in _RECORD_ERRORS.items() if getattr(lib, name) == code), "of an unknown error")


def _calibrate(ctx: DeviceContext) -> tuple[int, int] | None:
    """Tracing: a GPU timestamp and the host's CLOCK_MONOTONIC (``time.perf_counter_ns``) at one instant, through
    VK_EXT_calibrated_timestamps; None where the device cannot tell (GPU events are then left out of the trace)."""
    ffi, lib = ctx.ffi, ctx.lib
    if "VK_EXT_calibrated_timestamps" not in ctx.handles.extensions:
        return None
    count = ffi.new("uint32_t*")
    physical = ctx.handles.physical.handle
    if lib.vkGetPhysicalDeviceCalibrateableTimeDomainsEXT(physical, count, ffi.NULL) != 0:
        return None
    domains = ffi.new("VkTimeDomainEXT[]", count[0])
    if lib.vkGetPhysicalDeviceCalibrateableTimeDomainsEXT(physical, count, domains) != 0:
        return None
    wanted = (lib.VK_TIME_DOMAIN_DEVICE_EXT, lib.VK_TIME_DOMAIN_CLOCK_MONOTONIC_EXT)
    if not all(d in list(domains) for d in wanted):
        return None
    infos = new_array("VkCalibratedTimestampInfoEXT", [{"timeDomain": d} for d in wanted])
    stamps = ffi.new("uint64_t[2]")
    deviation = ffi.new("uint64_t*")
    if lib.vkGetCalibratedTimestampsEXT(ctx.device, 2, infos, stamps, deviation) != 0:
        return None
    return int(stamps[0]), int(stamps[1])
