"""Launcher: the caller's side of a launch; it checks a launch, packs its dispatch record and queues it.

The fast path is a packer per program (``records.dispatch_packer``, made when the program is compiled), which checks
and packs a launch and appends it to the worker's deque in one call; the worker is woken only if it sleeps (its
``idle``). Anything unusual (wrong counts, unknown ids, junk types, ``GridArg``, a short grid, scalars out of range, a
device that is closed, lost, forked or far behind) raises inside the packer before anything is queued, and the slow
path, :meth:`Launcher._pack`, explains the error, handles the case or waits for room (``Worker.admit``). A
``LaunchGraph`` packs through a second packer per program, which returns the record instead of queueing it, and
queues its records through :meth:`Launcher.enqueue`.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Container, Sequence
from typing import TYPE_CHECKING

from . import records, trace
from .errors import BackendError, ErrorStatus, index_argument
from .types import Grid, GridArg, Scalar

if TYPE_CHECKING:
    from .context import DeviceContext
    from .memory import MemoryPool
    from .programs import Program, ProgramCache
    from .worker import Worker

__all__ = ["Launcher"]

_U32_MAX = 0xFFFFFFFF


class Launcher:
    """Checks, packs and queues the launches of one device; owns the per-program packers (a launch's and a graph's)."""

    def __init__(self, ctx: DeviceContext, worker: Worker, programs: ProgramCache, pool: MemoryPool) -> None:
        self._ctx = ctx
        self._worker = worker
        self._pool = pool
        self._packers: dict[int, Callable[[Sequence[int], Sequence[Scalar], Grid], None]] = {}  # they queue the record
        self._graph_packers: dict[int, Callable[[Sequence[int], Sequence[Scalar], Grid], bytes]] = {}  # they return it
        # a graph's in-place updates of a launch's scalars and grid (records.scalar_writer)
        self._writers: dict[int, records.ScalarWriter | None] = {}
        # Read directly by the launch paths: a launch costs a few hundred nanoseconds, a method call a good part of it.
        self._append = worker.queue.append
        self._progress = worker.progress
        self._programs = programs
        self._live = programs.programs
        self._slot_of = pool.slot_of
        self._max_grid = ctx.info.max_global_work_dims
        programs.on_release(self._forget)

    def add(self, program: Program) -> None:
        """Make the packers of a program just compiled (nothing to do for one compiled before)."""
        if program.id not in self._packers:
            for packers, append in ((self._graph_packers, None), (self._packers, self._append)):
                packers[program.id] = records.dispatch_packer(
                    program.name,
                    program.index,
                    program.info,
                    program.record_format,
                    self._slot_of,
                    self._pool.entries,
                    self._max_grid,
                    self._ctx,
                    append,
                )
            self._writers[program.id] = records.scalar_writer(program.name, program.info, self._max_grid)
        if program.failed is not None:  # its pipeline failed in the background before the packers were made
            self._forget(program)

    def _forget(self, program: Program) -> None:
        """A program's last reference went, or its pipeline could not be made: its launches take the slow path, which
        refuses them, from now on."""
        self._packers.pop(program.id, None)
        self._graph_packers.pop(program.id, None)
        self._writers.pop(program.id, None)
        records.forget_packer(program.name)

    def launch(self, prog: int, buffers: Sequence[int], scalars: Sequence[Scalar] = (), grid: Grid = (1, 1, 1)) -> None:
        """Queue one dispatch of ``grid`` work groups; returns at once. Each device's ``launch`` is this method
        (:meth:`vkbackend.Device.launch` says what it takes)."""
        try:
            self._packers[prog](buffers, scalars, grid)  # checks, packs and queues the record
        except records.REFUSED:
            self._append(self._pack(prog, buffers, scalars, grid))
        # Worker.put without its kick: the worker takes launches when its wait on the GPU ends, many at a time.
        if self._worker.idle:
            self._worker.wake_up_to_launch()
        elif self._progress.worker_python:  # it runs Python, or is back from a wait and needs the GIL to go on
            self._worker.yield_gil()

    def record(self, prog: int, buffers: Sequence[int], scalars: Sequence[Scalar], grid: Grid) -> bytes:
        """One launch checked and packed, not queued (a graph packs once and queues many times)."""
        try:
            return self._graph_packers[prog](buffers, scalars, grid)
        except records.REFUSED:
            return self._pack(prog, buffers, scalars, grid)

    def scalar_writer(self, prog: int) -> records.ScalarWriter | None:
        """The function a graph writes new scalars and a new grid of a launch of ``prog`` into its record with
        (``records.scalar_writer``); None where it must repack the launch instead, which explains or handles the
        case: a program released or reaching buffers by address, or a device closed, lost, forked or far behind."""
        return self._writers.get(prog) if self._ctx.usable else None

    def variable_slot(self, prog: int, scalar: int) -> tuple[int, int, str] | None:
        """Where scalar ``scalar`` of a launch of ``prog`` lies in its record, its kind and type, for a graph's
        variables (``records.variable_slot``); None for a program not live, or a member that is not a 32- or 64-bit
        integer."""
        p = self._live.get(prog)
        if p is None or p.failed is not None or not 0 <= scalar < p.n_scalars:
            return None
        return records.variable_slot(p.info, scalar)

    def enqueue(self, window: bytes, launches: int) -> None:
        """Queue packed records (a batch of ``launches`` launches) for the worker and let it begin submitting them while
        the caller goes on (:meth:`Worker.hand_over`); returns once it has, or at once where it need not."""
        if not self._ctx.usable:  # closed, lost, forked, or the worker far behind: explain, or wait for room
            self._worker.admit()
        if trace.enabled:
            trace.event("enqueue")
        self._worker.hand_over(window, launches)

    def launch_timed(
        self, prog: int, buffers: Sequence[int], scalars: Sequence[Scalar] = (), grid: Grid = (1, 1, 1)
    ) -> int:
        """Run one launch alone and return its GPU time in nanoseconds (a sync point)."""
        return self.run_timed(self._pack(prog, buffers, scalars, grid))

    def run_timed(self, window: bytes) -> int:
        """Run packed records alone between two timestamps; GPU nanoseconds (a sync point)."""
        self._ctx.ensure_usable()
        ns = self._worker.timed(window)
        self._ctx.raise_pending()
        return ns

    @property
    def closed(self) -> bool:
        """Whether the device is closed (its buffers are freed, references and all)."""
        return self._ctx.closed

    # ----- the slow path ------------------------------------------------------------------------------------------
    def _pack(self, prog: int, buffers: Sequence[int], scalars: Sequence[Scalar], grid: Grid) -> bytes:
        """Check a launch, explaining what is wrong, and pack its record."""
        for name, seq in (("buffers", buffers), ("scalars", scalars)):
            if not _is_sequence(seq):  # a set would bind in hash order
                raise BackendError(
                    ErrorStatus.InvalidArgument,
                    f"launch: {name} must be a list or tuple (in binding order), got {type(seq).__name__}",
                )
        try:
            p = self._live[prog]
            slots = [self._slot_of[b] for b in buffers[: p.n_buffers]]
            addressed = [self._pool.entries[b] for b in buffers[p.n_buffers :]]
        except (KeyError, TypeError):
            raise self._launch_error(prog, buffers) from None
        if p.failed is not None:
            self._ctx.forget_pending(p.failed)  # reported here, not again at the next sync point
            raise BackendError(
                ErrorStatus.KernelCompilation,
                f"launch of {p.name}: its pipeline could not be made ({p.failed}); release it and compile it again",
            )
        if len(buffers) != p.n_buffers + p.n_addresses or len(scalars) != p.n_scalars:
            raise _count_error(p, buffers, scalars)
        grid = self._resolve_grid(grid, scalars)
        try:
            record = records.dispatch(p.record_format, p.push_items, p.index, grid, slots, addressed, scalars)
        except (struct.error, OverflowError) as error:
            # numpy scalars without __index__/__float__ of the right kind (np.bool_ for a bool member): their .item()
            plain = [s.item() if hasattr(s, "item") else s for s in scalars]
            try:
                record = records.dispatch(p.record_format, p.push_items, p.index, grid, slots, addressed, plain)
            except (struct.error, OverflowError):
                raise _scalar_error(p, scalars, error) from None
        if not self._ctx.usable:  # closed, lost, forked, or the worker far behind: explain, or wait for room
            self._worker.admit()
        return record

    def _resolve_grid(self, grid: Grid, scalars: Sequence[Scalar]) -> tuple[int, int, int]:
        """The general grid path: 1 to 3 entries, ints or GridArg (whose range the worker checks)."""
        if not _is_sequence(grid):
            raise BackendError(
                ErrorStatus.InvalidArgument, f"grid must be a list or tuple of 1 to 3 entries, got {grid!r}"
            )
        entries = list(grid)
        if not 1 <= len(entries) <= 3:
            raise BackendError(ErrorStatus.InvalidArgument, f"grid must have 1 to 3 entries, got {len(entries)}")
        entries += [1] * (3 - len(entries))
        out = []
        for axis, entry in enumerate(entries):
            if isinstance(entry, GridArg):
                if not 0 <= entry.index < len(scalars):
                    raise BackendError(
                        ErrorStatus.InvalidArgument,
                        f"{entry!r} names scalar {entry.index} but the launch has {len(scalars)} scalars",
                    )
                value = index_argument(scalars[entry.index], f"the scalar that {entry!r} names")
                out.append(value if 0 <= value <= _U32_MAX else 0)  # 0: the recorder reports it at the next sync
                continue
            entry = index_argument(entry, f"grid entry {axis}")
            if not 0 < entry <= self._max_grid[axis]:
                raise BackendError(
                    ErrorStatus.InvalidArgument,
                    f"grid entry {entry} on axis {'xyz'[axis]} is outside 1..{self._max_grid[axis]}",
                )
            out.append(entry)
        return out[0], out[1], out[2]

    def _launch_error(self, prog: int, buffers: Sequence[int]) -> BackendError:
        info = self._ctx.info
        if not _has(self._live, prog):
            return self._programs.not_live_error(prog, "launch")
        program = self._live[prog]
        n_bound = program.n_buffers
        for i, b in enumerate(buffers if isinstance(buffers, Sequence) else ()):
            if not self._pool.is_live(b):
                return self._pool._not_live_error(b, f"launch of {program.name}, buffer {i}")
            if i < n_bound and not _has(self._slot_of, b):
                way = (
                    "reach it by device address (a buffer_reference member of the push constants) or bind views of it"
                    if info.buffer_device_address
                    else "bind views of it"
                )
                return BackendError(
                    ErrorStatus.InvalidArgument,
                    f"launch of {program.name}, buffer {i}: {self._pool.describe(b)} is larger than "
                    f"maxStorageBufferRange ({info.max_storage_buffer_range}), so it cannot be bound; {way}",
                )
        return BackendError(
            ErrorStatus.InvalidArgument,
            f"launch: buffers must be a flat list or tuple of buffer ids, got {type(buffers).__name__}"
            + (f" of {len(buffers)} entries" if hasattr(buffers, "__len__") else ""),
        )


def _count_error(p: Program, buffers: Sequence[int], scalars: Sequence[Scalar]) -> BackendError:
    addressed = (
        f" ({p.n_buffers} bound, then {p.n_addresses} by address: {', '.join(a.name for a in p.info.addresses)})"
        if p.n_addresses
        else ""
    )
    return BackendError(
        ErrorStatus.InvalidArgument,
        f"launch of {p.name}: it takes {p.n_buffers + p.n_addresses} buffers{addressed} and "
        f"{p.n_scalars} scalars ({', '.join(m.name for m in p.info.push_constants) or 'none'}), "
        f"got {len(buffers)} and {len(scalars)}",
    )


def _scalar_error(p: Program, scalars: Sequence[Scalar], error: Exception) -> BackendError:
    for member, value in zip(p.info.push_constants, scalars):
        try:
            struct.pack("<" + member.format, value.item() if hasattr(value, "item") else value)
        except (struct.error, OverflowError):
            return BackendError(
                ErrorStatus.InvalidArgument,
                f"launch of {p.name}: scalar {member.name}={value!r} does not fit its type, {member.type_name}; "
                f"pass {_values_of(member.format, member.size)}",
            )
    return BackendError(ErrorStatus.InvalidArgument, f"launch of {p.name}: grid or scalars do not fit: {error}")


def _values_of(code: str, size: int) -> str:
    """What a push-constant member of struct code ``code`` and ``size`` bytes takes, in words."""
    if code in "efd":
        largest = {"e": "65504", "f": "3.4028235e38"}.get(code)
        return "a number (a float, an int or a numpy scalar)" + (f" of magnitude at most {largest}" if largest else "")
    bits = 8 * size
    low, high = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if code.islower() else (0, (1 << bits) - 1)
    return f"an integer (an int or a numpy integer) from {low} to {high}"


def _is_sequence(value: object) -> bool:
    """A list, tuple or other ordered sequence (a numpy array included); not a set, a dict, an iterator or a string."""
    return (isinstance(value, Sequence) or hasattr(value, "__array__")) and not isinstance(value, (str, bytes))


def _has(mapping: Container[object], key: object) -> bool:
    """``key in mapping``, and False for a key that cannot be one (unhashable junk from a caller)."""
    try:
        return key in mapping
    except TypeError:
        return False
