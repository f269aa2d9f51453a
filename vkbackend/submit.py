"""BatchSubmitter: the window of pending records, one command buffer and one fence per batch, and reaping.

The worker appends packed records (see Device.launch and MemoryPool) to ``window``; ``flush`` hands the whole window
to the C recorder in one call, which also decides the barriers (csrc/recorder.c), and submits it. Command buffers,
fences and descriptor pools are recycled when their batch's fence signals; nothing has a fixed capacity.
"""
from __future__ import annotations

import logging
import time
from collections import deque

from .context import DeviceContext
from .errors import BackendError, ErrorStatus, check, result_name

log = logging.getLogger("vkbackend")

_RECORD_ERRORS = {1: "its grid is outside 1..maxComputeWorkGroupCount per axis", 2: "the program was released",
                  3: "a buffer was released before the launch ran", 4: "a malformed record"}


class Batch:
    """One submitted command buffer, its fence, and what to do when it completes."""

    __slots__ = ("serial", "cmd", "fence", "callbacks", "descriptor_pools")

    def __init__(self, cmd, fence) -> None:
        self.serial = 0
        self.cmd, self.fence = cmd, fence
        self.callbacks: list = []
        self.descriptor_pools: list = []


class BatchSubmitter:
    """Records and submits windows of work for one device's queue. Used only by that device's worker."""

    def __init__(self, ctx: DeviceContext, programs) -> None:
        self.ctx = ctx
        self.programs = programs
        ffi, lib = ctx.ffi, ctx.lib
        info = ctx.info
        pool_info = ffi.new("VkCommandPoolCreateInfo*", {
            "sType": lib.VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
            "flags": lib.VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
            "queueFamilyIndex": ctx.handles.physical.queue_family})
        pool = ffi.new("VkCommandPool*")
        check(lib.vkCreateCommandPool(ctx.device, pool_info, ffi.NULL, pool), "vkCreateCommandPool", ErrorStatus.Initialization)
        self.command_pool = pool[0]
        self.query_pool = ffi.NULL
        if info.timestamps:
            qinfo = ffi.new("VkQueryPoolCreateInfo*", {"sType": lib.VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                                                       "queryType": lib.VK_QUERY_TYPE_TIMESTAMP, "queryCount": 2})
            qp = ffi.new("VkQueryPool*")
            result = lib.vkCreateQueryPool(ctx.device, qinfo, ffi.NULL, qp)
            if result != 0:
                lib.vkDestroyCommandPool(ctx.device, self.command_pool, ffi.NULL)
                check(result, "vkCreateQueryPool", ErrorStatus.Initialization)
            self.query_pool = qp[0]
        self.window: list[bytes] = []
        self.window_callbacks: list = []
        self.window_free_bytes = 0   # device memory the window's completions give back (see Worker.defer)
        self.in_flight: deque[Batch] = deque()
        self.abandoned: list[Batch] = []  # given up on (device lost, deadline at close): destroyed with the rest
        self.spare: list[Batch] = []
        self.spare_descriptor_pools: list = []
        self.descriptor_pool_sets = 1024
        self.submitted = 0      # serial of the last submitted batch
        self.completed = 0      # serial of the last completed batch
        self.window_limit = max(1, ctx.config.window_launches)
        self.push_descriptors = info.push_descriptors
        self._window = ffi.new("vkb_window*")
        self._window.device = ctx.device
        self._window.query_pool = self.query_pool
        self._window.slots = ctx.slots
        self._window.epoch = 1
        for axis in range(3):
            self._window.max_groups[axis] = info.max_global_work_dims[axis]
        self._fence_ptr = ffi.new("VkFence*")
        self.stats = {"batches": 0, "dispatches": 0, "barriers": 0, "copies": 0, "submit_ns": 0, "throttled": 0}

    # ----- batches ----------------------------------------------------------------------------------------------
    def _new_batch(self) -> Batch:
        if self.spare:
            return self.spare.pop()
        ffi, lib, dev = self.ctx.ffi, self.ctx.lib, self.ctx.device
        alloc = ffi.new("VkCommandBufferAllocateInfo*", {
            "sType": lib.VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, "commandPool": self.command_pool,
            "level": lib.VK_COMMAND_BUFFER_LEVEL_PRIMARY, "commandBufferCount": 1})
        cmd = ffi.new("VkCommandBuffer*")
        check(lib.vkAllocateCommandBuffers(dev, alloc, cmd), "vkAllocateCommandBuffers", ErrorStatus.MemoryAllocation)
        fence = ffi.new("VkFence*")
        finfo = ffi.new("VkFenceCreateInfo*", {"sType": lib.VK_STRUCTURE_TYPE_FENCE_CREATE_INFO})
        result = lib.vkCreateFence(dev, finfo, ffi.NULL, fence)
        if result != 0:
            lib.vkFreeCommandBuffers(dev, self.command_pool, 1, cmd)
            check(result, "vkCreateFence", ErrorStatus.MemoryAllocation)
        return Batch(cmd[0], fence[0])

    def flush(self) -> None:
        """Record the window into one command buffer and submit it with one fence."""
        if not self.window and not self.window_callbacks:
            return
        ctx = self.ctx
        ffi, lib = ctx.ffi, ctx.lib
        records, self.window = self.window, []
        callbacks, self.window_callbacks = self.window_callbacks, []
        self.window_free_bytes = 0
        if ctx.lost is not None:
            self._run(callbacks)
            return
        try:
            batch = self._new_batch()
        except BackendError as error:
            ctx.fail(error)
            self._unsubmitted(callbacks)
            return
        words = b"".join(records)
        w = self._window
        w.cmd = batch.cmd
        w.words = ffi.cast("const uint32_t*", ffi.from_buffer(words))
        w.n_words = len(words) // 4
        w.programs = self.programs.table
        w.n_programs = self.programs.capacity
        w.batch = self.submitted + 1
        keep_sets = None
        w.sets, w.n_sets = ffi.NULL, 0
        try:
            if not self.push_descriptors:
                keep_sets = self._descriptor_sets(records, batch)
                if keep_sets is not None:
                    w.sets, w.n_sets = keep_sets, len(keep_sets)
            t0 = time.perf_counter_ns()
            result = lib.vkb_submit_window(w, ctx.handles.queue, batch.fence)
            self.stats["submit_ns"] += time.perf_counter_ns() - t0
            if w.n_errors:
                ctx.fail(BackendError(ErrorStatus.KernelLaunch,
                                      f"{w.n_errors} launch(es) skipped; the first, of program {self.programs.name(w.error_program)}, "
                                      f"because {_RECORD_ERRORS.get(w.error_code, 'of an unknown error')}"))
            check(result, f"recording and submitting {w.n_dispatches} dispatches", ErrorStatus.KernelLaunch)
        except Exception as error:  # whatever it was, waiters must be released and the error must reach a sync point
            ctx.fail(error if isinstance(error, BackendError)
                     else BackendError(ErrorStatus.KernelLaunch, f"submitting a window failed: {error!r}"))
            lib.vkResetCommandBuffer(batch.cmd, 0)
            self._recycle_descriptor_pools(batch)
            self.spare.append(batch)
            self._unsubmitted(callbacks)  # the error reaches the next sync point
            return
        self.submitted += 1
        batch.serial = self.submitted
        batch.callbacks = callbacks
        self.in_flight.append(batch)
        if log.isEnabledFor(logging.DEBUG):
            log.debug("batch %d: %d dispatches, %d copies, %d barriers", batch.serial, w.n_dispatches, w.n_copies,
                      w.n_barriers)
        st = self.stats
        st["batches"] += 1
        st["dispatches"] += w.n_dispatches
        st["barriers"] += w.n_barriers
        st["copies"] += w.n_copies

    def _descriptor_sets(self, records: list[bytes], batch: Batch):
        """Without push descriptors: one descriptor set per dispatch, from pools that grow and are reset on reuse."""
        ffi, lib, ctx = self.ctx.ffi, self.ctx.lib, self.ctx
        layouts = []
        for rec in records:
            if rec[0] == lib.VKB_RECORD_DISPATCH and len(rec) >= 8:
                layouts.append(self.programs.set_layout(int.from_bytes(rec[4:8], "little")))
        if not layouts:
            return None
        sets = ffi.new("VkDescriptorSet[]", len(layouts))
        done = 0
        while done < len(layouts):
            pool = batch.descriptor_pools[-1][0] if batch.descriptor_pools else self._descriptor_pool(batch)
            n = len(layouts) - done
            layout_arr = ffi.new("VkDescriptorSetLayout[]", layouts[done:])
            info = ffi.new("VkDescriptorSetAllocateInfo*", {
                "sType": lib.VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO, "descriptorPool": pool,
                "descriptorSetCount": n, "pSetLayouts": layout_arr})
            result = lib.vkAllocateDescriptorSets(ctx.device, info, sets + done)
            if result == 0:
                done += n
                continue
            if n > 1:  # the pool is too small for all at once: take what fits one by one, then grow
                for i in range(n):
                    info.descriptorSetCount = 1
                    info.pSetLayouts = layout_arr + i
                    if lib.vkAllocateDescriptorSets(ctx.device, info, sets + done) != 0:
                        break
                    done += 1
            if done < len(layouts):
                self.descriptor_pool_sets *= 2
                self._descriptor_pool(batch)
        return sets

    def _descriptor_pool(self, batch: Batch):
        """A pool for at least ``descriptor_pool_sets`` sets: a reset spare one, else a new one."""
        ffi, lib, ctx = self.ctx.ffi, self.ctx.lib, self.ctx
        n = self.descriptor_pool_sets
        fitting = [i for i, (_, sets) in enumerate(self.spare_descriptor_pools) if sets >= n]
        if fitting:
            pool, n = self.spare_descriptor_pools.pop(fitting[0])
        else:
            size = ffi.new("VkDescriptorPoolSize*", {"type": lib.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                                     "descriptorCount": n * ctx.info.max_storage_buffers})
            info = ffi.new("VkDescriptorPoolCreateInfo*", {"sType": lib.VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
                                                           "maxSets": n, "poolSizeCount": 1, "pPoolSizes": size})
            out = ffi.new("VkDescriptorPool*")
            check(lib.vkCreateDescriptorPool(ctx.device, info, ffi.NULL, out), "vkCreateDescriptorPool",
                  ErrorStatus.MemoryAllocation)
            pool = out[0]
        batch.descriptor_pools.append((pool, n))
        return pool

    def _recycle_descriptor_pools(self, batch: Batch) -> None:
        for pool, n in batch.descriptor_pools:
            self.ctx.lib.vkResetDescriptorPool(self.ctx.device, pool, 0)
            self.spare_descriptor_pools.append((pool, n))
        self.spare_descriptor_pools.sort(key=lambda p: p[1])
        batch.descriptor_pools = []

    # ----- completion ---------------------------------------------------------------------------------------------
    def _complete(self, batch: Batch) -> None:
        self.in_flight.popleft()
        lib = self.ctx.lib
        self._fence_ptr[0] = batch.fence
        result = lib.vkResetFences(self.ctx.device, 1, self._fence_ptr)
        if result != 0:
            self.ctx.fail(BackendError(ErrorStatus.KernelSync, f"vkResetFences failed with {result_name(result)}"))
        self._recycle_descriptor_pools(batch)
        self.completed = batch.serial
        callbacks, batch.callbacks = batch.callbacks, []
        # A fence that could not be reset is still signalled: submitting with it again is invalid (it crashes the
        # validation layer), so its batch is set aside and destroyed at close instead of reused.
        (self.spare if result == 0 else self.abandoned).append(batch)
        self._run(callbacks)

    def _unsubmitted(self, callbacks: list) -> None:
        """Completions of a window that was never submitted. They may free buffers that earlier batches still use, so
        they wait for the last batch in flight; with none in flight they run now."""
        if self.in_flight and self.ctx.lost is None:
            self.in_flight[-1].callbacks.extend(callbacks)
        else:
            self._run(callbacks)

    def _run(self, callbacks: list) -> None:
        for fn in callbacks:
            try:
                fn()
            except BackendError as error:
                self.ctx.fail(error)

    def _fence_failed(self, result: int, what: str) -> None:
        """A fence query failed: a lost device is sticky and releases every waiter; other failures are kept."""
        status = ErrorStatus.DeviceLost if result == self.ctx.lib.VK_ERROR_DEVICE_LOST else ErrorStatus.KernelSync
        self.ctx.fail(BackendError(status, f"{what} failed with {result_name(result)}"))
        if status is ErrorStatus.DeviceLost:
            self.abandon()

    def abandon(self) -> None:
        """The device is gone: run every pending completion so no thread waits forever."""
        while self.in_flight:
            batch = self.in_flight.popleft()
            self.abandoned.append(batch)
            self._run(batch.callbacks)
            batch.callbacks = []
        self._run(self.window_callbacks)
        self.window_callbacks = []
        self.window = []

    def reap(self) -> None:
        """Complete every batch whose fence has signalled, without waiting."""
        lib, dev = self.ctx.lib, self.ctx.device
        while self.in_flight:
            result = lib.vkGetFenceStatus(dev, self.in_flight[0].fence)
            if result == 0:
                self._complete(self.in_flight[0])
            elif result == lib.VK_NOT_READY:
                return
            else:
                self._fence_failed(result, "vkGetFenceStatus")
                return

    def wait_oldest(self, timeout_ns: int) -> int:
        """Wait up to ``timeout_ns`` for the oldest batch (GIL released); the wait's VkResult (0: it completed).

        The wait polls in C (csrc/fence.c): a blocking vkWaitForFences can oversleep by milliseconds."""
        lib = self.ctx.lib
        batch = self.in_flight[0]
        result = lib.vkb_wait_fence(self.ctx.device, batch.fence, timeout_ns)
        if result == 0:
            self._complete(batch)
            self.reap()
            return 0
        if result != lib.VK_TIMEOUT:
            self._fence_failed(result, "vkWaitForFences")
        return result

    def drain(self, timeout_ns: int) -> None:
        """Submit the window and wait for every batch; a batch that outlives the deadline raises KernelSync."""
        self.flush()
        deadline = time.monotonic_ns() + timeout_ns
        while self.in_flight:
            left = deadline - time.monotonic_ns()
            # The wait gets the whole time left, so a VK_TIMEOUT from it means the deadline has passed.
            result = self.wait_oldest(left) if left > 0 else self.ctx.lib.VK_TIMEOUT
            if result == 0:
                continue
            if self.ctx.lost is not None:
                return
            if result == self.ctx.lib.VK_TIMEOUT:
                raise BackendError(ErrorStatus.KernelSync,
                                   f"GPU work on {self.ctx.info.name} did not finish within "
                                   f"{timeout_ns / 1e9:.1f} s (VKBACKEND_SYNC_TIMEOUT_S); it may still be running")

    def timed(self, records: bytes, timeout_ns: int) -> int:
        """Run packed records alone between two timestamps; GPU nanoseconds (wall clock without timestamps)."""
        lib, ffi = self.ctx.lib, self.ctx.ffi
        self.drain(timeout_ns)
        if not self.ctx.info.timestamps:
            start = time.perf_counter_ns()
            self.window.append(records)
            self.drain(timeout_ns)
            return time.perf_counter_ns() - start
        q = lib.VKB_RECORD_RESET_QUERIES, lib.VKB_RECORD_TIMESTAMP
        self.window += [_words(q[0], 0, 2), _words(q[1], 0), records, _words(q[1], 1)]
        self.drain(timeout_ns)
        if self.ctx.lost is not None:
            return 0
        stamps = ffi.new("uint64_t[2]")
        check(lib.vkGetQueryPoolResults(self.ctx.device, self.query_pool, 0, 2, 16, stamps, 8,
                                        lib.VK_QUERY_RESULT_64_BIT | lib.VK_QUERY_RESULT_WAIT_BIT),
              "vkGetQueryPoolResults", ErrorStatus.KernelSync)
        bits = self.ctx.handles.physical.timestamp_bits
        ticks = (stamps[1] - stamps[0]) & ((1 << bits) - 1 if bits < 64 else (1 << 64) - 1)
        return int(ticks * self.ctx.info.timestamp_period_ns)

    def destroy(self) -> None:
        ffi, lib, dev = self.ctx.ffi, self.ctx.lib, self.ctx.device
        for batch in self.spare + list(self.in_flight) + self.abandoned:
            lib.vkDestroyFence(dev, batch.fence, ffi.NULL)
            for pool, _ in batch.descriptor_pools:
                lib.vkDestroyDescriptorPool(dev, pool, ffi.NULL)
        for pool, _ in self.spare_descriptor_pools:
            lib.vkDestroyDescriptorPool(dev, pool, ffi.NULL)
        self.spare, self.spare_descriptor_pools, self.abandoned = [], [], []
        self.in_flight.clear()
        lib.vkDestroyCommandPool(dev, self.command_pool, ffi.NULL)
        if self.query_pool != ffi.NULL:
            lib.vkDestroyQueryPool(dev, self.query_pool, ffi.NULL)


def _words(*values: int) -> bytes:
    return b"".join(v.to_bytes(4, "little") for v in values)
