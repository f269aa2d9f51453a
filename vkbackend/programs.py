"""ProgramCache: SPIR-V in, compute pipelines out, cached by content; and ProgramTable, which records name them by.

Reflection (spirv.py) runs in the caller's thread, so malformed SPIR-V and interfaces over the device's limits fail
there, before anything reaches the driver; validation (validation.py) follows. Pipelines are made (pipelines.py)
against the device's persistent pipeline cache (pipeline_cache.py): on the worker while the caller waits, or with
``background=True`` on the device's pipeline threads while the caller goes on, the worker listing the program when
its queue reaches that point, so the launches queued after the compile wait for it there. Each program has an index
in the C program table (``vkb_program*[]``, decl/vkb.h) that its dispatch records name; indices are never reused, so
a queued record of a released program names no other.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import weakref
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING

from . import ids, pipelines, records
from .context import DeviceContext
from .errors import BackendError, ErrorStatus, InvalidArgumentTypeError
from .finalizers import collecting
from .pipeline_cache import PipelineCache
from .spirv import ProgramInfo, reflect
from .validation import check_capabilities, validator

if TYPE_CHECKING:
    from .types import PipelineExecutable

log = logging.getLogger("vkbackend")

__all__ = ["Program", "ProgramCache", "ProgramTable"]


class Program:
    """A compiled program: its reflected interface, its pipeline and the layout of its dispatch records."""

    __slots__ = (
        "id",
        "index",
        "name",
        "info",
        "record_format",
        "push_items",
        "n_buffers",
        "n_addresses",
        "n_scalars",
        "refcount",
        "pipeline",
        "layout",
        "set_layout",
        "c_program",
        "access",
        "key",
        "robust",
        "failed",
    )

    def __init__(self, prog_id: int, index: int, key: bytes, info: ProgramInfo, robust: bool = True) -> None:
        self.id = prog_id  # the public id, unique in the process (ids.py)
        self.index = index  # its place in the device's program table, which dispatch records name
        self.key = key
        self.info = info
        self.robust = robust  # False: its pipeline runs without bounds checks (VK_EXT_pipeline_robustness)
        self.name = f"{ids.label(prog_id)} ({info.entry_point})"  # what messages call it: "program #3 (main)"
        self.n_buffers = len(info.buffers)  # bound through descriptors
        self.n_addresses = len(info.addresses)  # reached by device address: the launch's buffers after the bound ones
        self.n_scalars = len(info.push_constants)
        self.record_format = records.dispatch_format(info)
        self.push_items = records.push_items(info)
        self.refcount = 1
        self.pipeline = self.layout = self.set_layout = None
        self.c_program = self.access = None
        self.failed: BackendError | None = None  # why its pipeline could not be made in the background

    @property
    def push_words(self) -> int:
        return (self.info.push_constant_size + 3) // 4


class ProgramTable:
    """The C table of programs that dispatch records name by index, grown on demand. Written on the worker (when a
    program is listed, its pipeline made, or destroyed or could not be made), read by the recorder on the worker."""

    def __init__(self, ffi) -> None:
        self._ffi = ffi
        self.capacity = 64
        self.array = ffi.new("vkb_program*[]", self.capacity)
        self._programs: dict[int, Program] = {}  # by index, released ones included while their pipelines live
        self._tombstones: dict[int, tuple] = {}  # destroyed programs' entries (kept alive) and names

    def _ensure(self, index: int) -> None:
        if index >= self.capacity:
            grown = self._ffi.new("vkb_program*[]", max(self.capacity * 2, index + 1))
            self._ffi.memmove(grown, self.array, self._ffi.sizeof("vkb_program*") * self.capacity)
            self.array, self.capacity = grown, len(grown)

    def put(self, prog: Program) -> None:
        self._ensure(prog.index)
        self.array[prog.index] = prog.c_program
        self._programs[prog.index] = prog

    def remove(self, prog: Program) -> None:
        """Replace a destroyed program, or one whose pipeline could not be made, by a tombstone: its record lengths
        without a pipeline, so that a queued record of it (a LaunchGraph's replay, say) is skipped alone and the rest
        of its window still runs."""
        tombstone = self._ffi.new(
            "vkb_program*",
            {
                "n_buffers": prog.n_buffers,
                "n_addresses": prog.n_addresses,
                "push_words": prog.push_words,
                "access": prog.access,
            },
        )
        self._tombstones[prog.index] = (tombstone, prog.access, prog.name)
        self._ensure(prog.index)
        self.array[prog.index] = tombstone
        self._programs.pop(prog.index, None)

    def name(self, index: int) -> str:
        """The name of the program at ``index``, for error messages."""
        prog = self._programs.get(index)
        if prog is not None:
            return prog.name
        return self._tombstones[index][2] if index in self._tombstones else f"program index {index}"

    def programs(self) -> list[Program]:
        """Every program whose pipeline is alive."""
        return list(self._programs.values())


_caches: "weakref.WeakSet[ProgramCache]" = weakref.WeakSet()  # every cache made: a message names a program's device


class ProgramCache:
    """Programs of one device by id; the same SPIR-V and entry point give the same program (reference counted).

    A release from a finalizer run by a garbage collection waits for the next compile or release: the collector may
    have stopped this very thread inside the cache's lock (finalizers.py).
    """

    def __init__(self, ctx: DeviceContext, worker, table: ProgramTable) -> None:
        _caches.add(self)
        self.ctx = ctx
        self._worker = worker
        self.table = table
        self._lock = threading.Lock()
        self._create_lock = threading.Lock()
        self._by_key: dict[bytes, Program] = {}
        self.programs: dict[int, Program] = {}  # live programs by id; the Launcher's slow path reads this directly
        self._next_index = 0
        self._orphans: deque[int] = deque()  # releases asked for during a garbage collection
        self._released: Callable[[Program], None] | None = None
        self._makers = pipelines.PipelineMakers(ctx)
        self._unlisted: dict[int, Program] = {}  # compiled in the background, not yet in the table, by index
        self.pipeline_cache = PipelineCache(ctx)
        worker.call(self.pipeline_cache.open)

    def compile(self, spirv: bytes, entry_point: str = "main", robust: bool = True, background: bool = False) -> int:
        """The program id for ``spirv``'s ``entry_point``; compiled once, then served from the cache.

        ``robust=False`` runs the program without bounds checks on its storage buffers where the device can choose per
        pipeline (``DeviceInfo.pipeline_robustness``); elsewhere the device-wide setting holds. ``background=True``
        returns once the SPIR-V is checked, its pipeline made on another thread (:meth:`_install`).
        """
        self.ctx.ensure_usable()
        if self._orphans:
            self._release_orphans()
        if not isinstance(spirv, (bytes, bytearray, memoryview)):
            raise InvalidArgumentTypeError(
                ErrorStatus.InvalidArgument, f"compile needs SPIR-V bytes, got {type(spirv).__name__}"
            )
        if not isinstance(entry_point, str):
            raise BackendError(ErrorStatus.InvalidArgument, f"compile: entry_point must be a str, got {entry_point!r}")
        spirv = bytes(spirv)
        digest = hashlib.sha256(spirv).hexdigest()
        robust = robust or not self.ctx.info.pipeline_robustness  # without the extension there is nothing to choose
        key = (digest + "\0" + entry_point + ("" if robust else "\0unchecked")).encode()
        with self._lock:
            prog = self._by_key.get(key)
            if prog is not None:
                prog.refcount += 1
                return prog.id
        info = reflect(spirv, entry_point, require_code=True)  # truncated modules never reach the driver
        self._check_limits(info)
        check_capabilities(info, self.ctx.info)
        validator.check(spirv, digest)  # spirv-val, or a clear error: invalid SPIR-V can crash the driver
        with self._create_lock:  # one creation at a time, so threads compiling the same SPIR-V share one program
            with self._lock:
                prog = self._by_key.get(key)
                if prog is not None:
                    prog.refcount += 1
                    return prog.id
                prog = Program(ids.next_program_id(), self._next_index, key, info, robust)
                self._next_index += 1
            if background:
                self._start(prog, spirv)
                return prog.id
            self._worker.call(self._create, prog, spirv)
            with self._lock:
                self._by_key[key] = prog
                self.programs[prog.id] = prog
        return prog.id

    def _start(self, prog: Program, spirv: bytes) -> None:
        """A background compile (under the creation lock): the program registered by id, its pipeline begun on a
        pipeline thread and the worker's queue told to list it there; only then is it found by its SPIR-V, so that
        another thread's launch of it is queued behind the worker's wait for it."""
        prog.access = pipelines.access(self.ctx, prog)  # a failed program's tombstone needs it too
        with self._lock:
            self.programs[prog.id] = prog
            self._unlisted[prog.index] = prog
        try:
            made = self._makers.submit(prog, spirv, self.pipeline_cache.handle)
        except BaseException:  # closed meanwhile: no pipeline will be made
            with self._lock:
                self.programs.pop(prog.id, None)
                self._unlisted.pop(prog.index, None)
            raise
        self._worker.after_done(made, lambda made: self._install(prog, made))
        with self._lock:
            if prog.failed is None:  # the worker may already have found it failed: a new compile then tries again
                self._by_key[prog.key] = prog

    def _check_limits(self, info: ProgramInfo) -> None:
        dev = self.ctx.info
        problems = []
        if len(info.buffers) > dev.max_storage_buffers:
            problems.append(f"{len(info.buffers)} storage buffers (the device allows {dev.max_storage_buffers})")
        limit = self.ctx.lib.VKB_MAX_BINDINGS  # the recorder's per-dispatch arrays
        if len(info.buffers) + len(info.addresses) > limit:
            problems.append(
                f"{len(info.buffers) + len(info.addresses)} buffers bound or reached by address "
                f"(vkbackend allows {limit} per launch)"
            )
        if [b.binding for b in info.buffers] != list(range(len(info.buffers))):
            problems.append("bindings that are not 0..n-1 (launch binds buffers in binding order; leave no gaps)")
        if info.push_constant_size > dev.max_push_constants_size:
            problems.append(
                f"{info.push_constant_size} bytes of push constants (the device allows {dev.max_push_constants_size})"
            )
        lx, ly, lz = info.local_size
        if any(v > m for v, m in zip(info.local_size, dev.max_local_work_dims)) or lx * ly * lz > dev.max_local_threads:
            problems.append(
                f"local size {info.local_size} (the device allows {dev.max_local_work_dims}, "
                f"{dev.max_local_threads} threads)"
            )
        if info.shared_memory_bytes > dev.local_mem_size:
            problems.append(f"{info.shared_memory_bytes} bytes of shared memory (the device has {dev.local_mem_size})")
        if problems:
            raise BackendError(
                ErrorStatus.KernelCompilation,
                f"entry point {info.entry_point!r} needs " + "; ".join(problems) + f" on {dev.name}",
            )

    def _create(self, prog: Program, spirv: bytes) -> None:
        """On the worker: the program's pipeline made, then its entry in the table."""
        pipelines.make(self.ctx, prog, spirv, self.pipeline_cache.handle)
        with self._lock:  # listed here, on the worker: a caller woken by close() must not leave its pipeline behind
            self.table.put(prog)

    def _install(self, prog: Program, made: Future) -> None:
        """On the worker, where its queue reaches a background compile (``made`` done): the program's entry in the
        table, before the launches queued after it are recorded. Where the pipeline could not be made the program
        stays failed: its entry is a tombstone (its queued launches are skipped), later launches are refused with the
        error, a new compile of the same SPIR-V tries again, and, unless the program was released meanwhile or a
        launch's refusal reports it first, the error is raised at the next sync point."""
        error = made.exception()
        with self._lock:
            self._unlisted.pop(prog.index, None)
            if error is None:
                self.table.put(prog)
                return
            prog.failed = (
                error if isinstance(error, BackendError) else BackendError(ErrorStatus.KernelCompilation, repr(error))
            )
            self.table.remove(prog)
            if self._by_key.get(prog.key) is prog:
                del self._by_key[prog.key]
            live = self.programs.get(prog.id) is prog
        if self._released is not None:
            self._released(prog)  # the launcher drops its packers: a launch of it takes the slow path, which refuses
        if live:
            self.ctx.fail(prog.failed)

    def get(self, prog_id: int, what: str = "program") -> Program:
        """The live program ``prog_id``, or ``InvalidArgument`` (:meth:`not_live_error`)."""
        try:
            return self.programs[prog_id]
        except (KeyError, TypeError):
            raise self.not_live_error(prog_id, what) from None

    def executables(self, prog_id: int) -> list[PipelineExecutable]:
        """What the driver reports of the pipeline of live program ``prog_id`` (``Device.pipeline_statistics``)."""
        prog = self.get(prog_id, "pipeline_statistics")
        if not pipelines.keeps_statistics(self.ctx):
            info = self.ctx.info
            if "VK_KHR_pipeline_executable_properties" not in info.extensions:
                why = "the device lacks VK_KHR_pipeline_executable_properties (NVIDIA's driver has it, for one)"
            elif not self.ctx.config.resolved_pipeline_statistics():
                why = "open it with VKBACKEND_PIPELINE_STATISTICS=1 (VulkanConfig(pipeline_statistics=True))"
            else:
                why = (
                    "its driver lists VK_KHR_pipeline_executable_properties without its pipelineExecutableInfo feature"
                )
            raise BackendError(
                ErrorStatus.InvalidArgument,
                f"pipeline_statistics: the pipelines of {info.name} keep no statistics: {why}",
            )
        # on the worker: after the install of a program compiled in the background, in order with its release
        return self._worker.call(self._executables, prog)

    def _executables(self, prog: Program) -> list[PipelineExecutable]:
        if prog.failed is not None:
            raise prog.failed
        if prog.pipeline is None:  # released (by another thread) before the worker got here
            raise self.not_live_error(prog.id, "pipeline_statistics")
        return pipelines.executables(self.ctx, prog)

    def not_live_error(self, prog: object, what: str) -> BackendError:
        """The ``InvalidArgument`` error for ``prog`` where a live program of this device belongs: saying what it is
        (not an id; a buffer's id; a program released, never made, or another device's) and what to pass instead."""
        name = self.ctx.info.name
        message = ids.misnamed(prog, ids.PROGRAM, "pass the id Device.compile returned")
        if message is None:
            other, owner = None, ""
            for cache in list(_caches):
                if cache is not self and other is None:
                    other, owner = cache.programs.get(prog), cache.ctx.info.name
            if other is not None:
                message = (
                    f"{other.name} belongs to {'another device, also ' if owner == name else ''}{owner}, not to "
                    f"{name}; compile its SPIR-V on this device (Device.compile) and launch that"
                )
            else:
                message = (
                    f"{ids.label(prog)} was released (release_program, or its device closed, or the id was never "
                    f"handed out), so it is not a live program of {name}; compile its SPIR-V again (Device.compile)"
                )
        return BackendError(ErrorStatus.InvalidArgument, f"{what}: {message}")

    def on_release(self, released: Callable[[Program], None]) -> None:
        """Have ``released(program)`` called whenever a program's last reference goes, or its pipeline could not be
        made in the background (the launcher drops its packers)."""
        self._released = released

    def release(self, prog_id: int) -> None:
        """Drop one reference; at zero the pipeline is destroyed once no queued launch uses it. From a finalizer run
        by a garbage collection, the release waits for the next compile or release."""
        if collecting():  # a finalizer (tinygrad's programs'): the cache's lock may be held by this very thread
            self._orphans.append(prog_id)  # a deque's append takes no lock
            return
        if self._orphans:
            self._release_orphans()
        self._release(prog_id)

    def _release_orphans(self) -> None:
        """The releases finalizers asked for during a garbage collection; their errors are logged (no caller's)."""
        while self._orphans:
            try:
                prog_id = self._orphans.popleft()
            except IndexError:  # another thread took the last one
                return
            try:
                self._release(prog_id)
            except BackendError as error:
                log.warning("a finalizer's release of %s failed: %s", ids.label(prog_id) or repr(prog_id), error)

    def _release(self, prog_id: int) -> None:
        with self._lock:
            prog = self.get(prog_id, "release_program")
            prog.refcount -= 1
            if prog.refcount > 0:
                return
            del self.programs[prog_id]
            if self._by_key.get(prog.key) is prog:  # a failed program's key went to the next compile
                del self._by_key[prog.key]
        self._worker.defer(lambda: self._destroy(prog))
        if self._released is not None:
            self._released(prog)

    def _destroy(self, prog: Program) -> None:
        with self._lock:
            self.table.remove(prog)
        pipelines.destroy(self.ctx, prog)

    def destroy(self) -> None:
        """Save the pipeline cache and destroy every pipeline (the device must be idle, its worker stopped): also those
        made in the background that the worker never listed. A background compile from now on raises the closed
        error."""
        self._makers.shutdown()
        for prog in self.table.programs():
            self._destroy(prog)
        with self._lock:
            unlisted, self._unlisted = list(self._unlisted.values()), {}
        for prog in unlisted:
            pipelines.destroy(self.ctx, prog)
        self.programs.clear()
        self._by_key.clear()
        self.pipeline_cache.destroy()
