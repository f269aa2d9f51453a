"""LaunchGraph: a fixed sequence of launches, packed once and queued again with one call.

A framework's JIT replays the same kernels step after step, changing only a few buffers and scalars. Launching them
one by one costs a Python call each in the framework and here; a graph keeps every launch's packed record and queues
them all as one item, so a replay costs one call plus the records that changed. A launch whose scalars (a JIT's
variables) or grid changed, and nothing else, is written over its record in place (``LaunchGraph.set_scalars``); and
variables that feed integer scalars of many launches are written into all of them by one C call
(``LaunchGraph.bind_variables``).
The worker records a replay like any other launches (hazard barriers, batching), so replays order themselves against
launches and copies around them.

A graph holds a reference on every buffer it binds, so a buffer released by its owner cannot be freed, and its slot
reused by another buffer, while a replay may still name it. Programs are not held: a replay of a released program
is skipped and reported as ``KernelLaunch`` at the next sync point.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ._ffi import ffi, lib
from .errors import BackendError, ErrorStatus
from .records import REFUSED
from .types import Grid, GridArg, Scalar

if TYPE_CHECKING:
    from .launch import Launcher
    from .memory import MemoryPool

__all__ = ["GraphVariables", "LaunchGraph"]

Launch = tuple[int, Sequence[int], Sequence[Scalar], Grid]  # (program, buffers, scalars, grid), as Device.launch takes
# A launch's program, its grid, and whether the grid is plain ints (no GridArg, no numpy integers): set_scalars' path.
_Target = tuple[int, tuple[int | GridArg, ...], bool]


class LaunchGraph:
    """Launches of one device, replayed in order by :meth:`launch`; made by :meth:`vkbackend.Device.graph`.

    A launch given as ``None`` is a placeholder that queues nothing until :meth:`update` fills it (a framework's
    kernel whose grid is empty until a variable is bound).
    """

    def __init__(self, launcher: Launcher, pool: MemoryPool, launches: Sequence[Launch | None]) -> None:
        # The device's launcher packs, queues and times the records; its pool holds the buffers the graph binds.
        self._launcher, self._pool = launcher, pool
        self._records: list[bytes] | None = []
        self._held: list[tuple[int, ...]] = []  # per launch, the buffer ids it holds a reference on
        # Per launch, its program, its grid and whether that is plain numbers (None for a placeholder): what
        # set_scalars keeps.
        self._targets: list[_Target | None] = []
        # The joined records and where each starts: an update of the same length is written in place. A launch in
        # _written was last changed in the blob alone (set_scalars): its entry in _records is stale until the blob
        # is dropped (_drop_blob).
        self._blob: bytearray | None = None
        self._starts: list[int] = []
        self._written: set[int] = set()
        self._launches = 0  # launches the blob holds (placeholders queue none)
        # Moves on whenever a launch's record may move (a join), or a launch that variables feed (in _bound) may lay
        # its scalars out anew (an update to another program, or from or to a placeholder): bound variables find
        # their slots again then.
        self._layout = 0
        self._bound: set[int] = set()
        try:
            for launch in launches:
                record, held, target = self._pack(launch)
                self._records.append(record)
                self._held.append(held)
                self._targets.append(target)
        except BaseException:
            self.close()
            raise

    def __len__(self) -> int:
        return len(self._records or ())

    def _pack(self, launch: Launch | None, held: tuple[int, ...] = ()) -> tuple[bytes, tuple[int, ...], _Target | None]:
        """A launch's record, checked; the buffers it holds references on: ``held`` again when it binds the same
        buffers (an update that changes only scalars or the grid takes no new references), else new ones; and what
        set_scalars keeps of it."""
        if launch is None:
            return b"", (), None
        try:
            prog, buffers, scalars, grid = launch
        except (TypeError, ValueError):
            raise BackendError(
                ErrorStatus.InvalidArgument,
                "a LaunchGraph launch is (program, buffers, scalars, grid) or None, got "
                + (
                    f"a {type(launch).__name__} of {len(launch)} items"
                    if isinstance(launch, (tuple, list))
                    else type(launch).__name__
                ),
            ) from None
        try:
            kept = tuple(grid)  # the caller's may change later, or be an iterator that packing would use up
        except TypeError:
            self._launcher.record(prog, buffers, scalars, grid)  # not a grid: this says what is wrong
            raise
        record = self._launcher.record(prog, buffers, scalars, kept)
        target = (prog, kept, _plain(kept))
        if held and tuple(buffers) == held:
            return record, held, target
        return record, self._hold(buffers), target

    def _hold(self, buffers: Sequence[int]) -> tuple[int, ...]:
        pool = self._pool
        held: list[int] = []
        try:
            for buf in buffers:
                pool.retain(buf)
                held.append(buf)
        except BaseException:
            for buf in held:
                pool.release(buf)
            raise
        return tuple(held)

    def update(self, index: int, launch: Launch | None) -> None:
        """Replace launch ``index`` (checked as :meth:`Device.launch` checks it, ``None`` for none); later replays use
        the new one."""
        records = self._checked(index, "update")
        old, before_target = self._held[index], self._targets[index]
        record, held, target = self._pack(launch, old)  # nothing changes before it has packed
        self._held[index] = held
        self._targets[index] = target
        self._written.discard(index)
        if index in self._bound and (target is None or before_target is None or target[0] != before_target[0]):
            self._layout += 1
        blob, before = self._blob, records[index]
        records[index] = record
        if blob is not None:
            if len(record) == len(before):
                start = self._starts[index]
                blob[start : start + len(record)] = record
            else:
                self._drop_blob()
        if held is not old:
            self._release(old)

    def set_scalars(self, index: int, scalars: Sequence[Scalar], grid: Grid | None = None) -> None:
        """Replace the scalars of launch ``index``, and its grid unless ``grid`` is None, keeping its program and
        buffers: what :meth:`update` does with the launch's other parts unchanged, checked the same way, for less.
        A JIT's replay changes only its variables in most launches. A placeholder has nothing to keep: fill it with
        :meth:`update`."""
        try:
            if index.__class__ is not int or not 0 <= index < len(self._targets):
                raise IndexError(index)
            target = self._targets[index]
            if target is None or not target[2]:  # a placeholder, or a grid that names a scalar (GridArg)
                raise KeyError(index)
            writer = self._launcher.scalar_writer(target[0])
            if writer is None:
                raise KeyError(index)
            if grid is not None:
                grid = tuple(grid)  # kept below: the caller's may change later
                if not _plain(grid):
                    raise TypeError(grid)  # numpy integers or GridArg: update handles them
            blob = self._blob
            if blob is None:
                blob = self._join()
            self._written.add(index)  # before the write: it is in the blob alone from then on
            writer(blob, self._starts[index], scalars, grid)
        except (IndexError, *REFUSED):
            self._set_scalars_slowly(index, scalars, grid)
            return
        if grid is not None:
            self._targets[index] = (target[0], grid, True)

    def bind_variables(self, slots: Sequence[Sequence[tuple[int, int]]]) -> GraphVariables:
        """Variables for this graph: ``slots[v]`` lists the ``(launch index, scalar index)`` pairs that variable ``v``
        feeds, each a 32- or 64-bit integer scalar of a launch (not a placeholder); :meth:`GraphVariables.set` then
        writes every variable into every scalar it feeds with one C call, where :meth:`set_scalars` takes a call per
        launch (a JIT's position variable feeds dozens). Raises ``InvalidArgument`` for a slot that is not such a
        scalar."""
        return GraphVariables(self, slots)

    def _variable_slots(self, pairs: Sequence[tuple[int, int]]) -> list[tuple[int, int, str, int]]:
        """Per ``(launch, scalar)`` pair, where the scalar lies in the blob now, its kind and type: ``(offset, kind,
        type name, launch)``; the blob is joined first. Raises ``InvalidArgument`` for a pair that names no integer
        scalar."""
        if self._blob is None:
            self._join()  # self._starts are then the launches' places in it
        found = []
        for launch, scalar in pairs:
            target = self._targets[launch] if launch.__class__ is int and 0 <= launch < len(self._targets) else None
            plain = target is not None and scalar.__class__ is int
            where = self._launcher.variable_slot(target[0], scalar) if plain else None  # type: ignore[index]
            if where is None:
                raise BackendError(
                    ErrorStatus.InvalidArgument,
                    f"LaunchGraph variables: ({launch!r}, {scalar!r}) names no 32- or 64-bit integer scalar of a "
                    f"launch of this graph (two ints: a launch index of its {len(self._targets)}, not a placeholder, "
                    "and the index of such a scalar of it)",
                )
            found.append((self._starts[launch] + where[0], where[1], where[2], launch))
        self._bound.update(launch for launch, _ in pairs)
        return found

    def _set_scalars_slowly(self, index: int, scalars: Sequence[Scalar], grid: Grid | None) -> None:
        """set_scalars through :meth:`update`, which explains what is wrong, or handles what the writer does not (a
        grid that names a scalar, a program that reaches buffers by address)."""
        self._checked(index, "set_scalars")
        target = self._targets[index]
        if target is None:
            raise BackendError(
                ErrorStatus.InvalidArgument,
                f"LaunchGraph.set_scalars: launch {index} is a placeholder; give it a whole launch with update",
            )
        prog, old_grid, _ = target
        self.update(index, (prog, self._held[index], scalars, old_grid if grid is None else grid))

    def _checked(self, index: int, method: str) -> list[bytes]:
        """The graph's records, once ``index`` is one of its launches (and the graph is open)."""
        records = self._records
        if records is None:
            raise BackendError(ErrorStatus.InvalidArgument, f"{method} of a closed LaunchGraph")
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(records):
            raise BackendError(
                ErrorStatus.InvalidArgument,
                f"LaunchGraph.{method}: index {index!r} is outside 0..{len(records) - 1}",
            )
        return records

    def _joined(self) -> bytes:
        """The records of every launch, joined: a copy, since later updates change the graph's own in place."""
        if self._records is None:
            raise BackendError(ErrorStatus.InvalidArgument, "launch of a closed LaunchGraph")
        return bytes(self._blob if self._blob is not None else self._join())

    def _join(self) -> bytearray:
        """Join the records into the blob (there is none) and note where each starts."""
        assert self._records is not None
        self._layout += 1
        self._blob = bytearray(b"".join(self._records))
        self._launches = sum(1 for record in self._records if record)
        self._starts, start = [], 0
        for record in self._records:
            self._starts.append(start)
            start += len(record)
        return self._blob

    def _drop_blob(self) -> None:
        """Forget the blob (a record changed length), keeping what set_scalars wrote into it."""
        blob, records = self._blob, self._records
        if blob is not None and records is not None:
            for index in self._written:
                start = self._starts[index]
                records[index] = bytes(blob[start : start + len(records[index])])
        self._written.clear()
        self._blob = None

    def launch(self) -> None:
        """Queue every launch of the graph, in order; returns at once (errors surface at the next sync point)."""
        records = self._joined()
        if records:  # a graph of placeholders only queues nothing (an empty item would submit an empty batch)
            self._launcher.enqueue(records, self._launches)

    def launch_timed(self) -> int:
        """Run the graph alone and return its GPU time in nanoseconds (a sync point)."""
        return self._launcher.run_timed(self._joined())

    def _release(self, buffers: tuple[int, ...]) -> None:
        for buf in buffers:
            self._pool.release(buf)

    def close(self) -> None:
        """Drop the graph's buffer references. Idempotent; also done when the graph is collected."""
        for buffers in self._take_held():
            self._release(buffers)

    def __enter__(self) -> LaunchGraph:
        """``with dev.graph(launches) as graph:`` closes the graph when the block ends, also when it raises."""
        return self

    def __exit__(self, *exc: object) -> None:
        """:meth:`close` the graph: its buffer references are dropped; an exception raised in the block goes on."""
        self.close()

    def _take_held(self) -> list[tuple[int, ...]]:
        held, self._held, self._records, self._blob = self._held, [], None, None
        self._targets = []
        return [] if self._launcher.closed else held

    def __del__(self) -> None:
        # A finalizer: the garbage collector may run it inside the pool's own locked code (finalizers.py).
        for buffers in self._take_held():
            for buf in buffers:
                self._pool.release_from_finalizer(buf)


class GraphVariables:
    """Integer variables that feed scalars of a :class:`LaunchGraph`'s launches. Values are int64: a uint64 scalar
    takes 0 to 2**63 - 1 this way (``set_scalars`` takes the rest). Updating a launch that variables feed to a
    placeholder, or to a program whose scalar there is no such integer, breaks them: ``set`` then raises until they
    are bound again."""

    def __init__(self, graph: LaunchGraph, slots: Sequence[Sequence[tuple[int, int]]]) -> None:
        self._graph = graph
        self._pairs: list[tuple[int, int]] = []
        variables = []
        for v, pairs in enumerate(slots):
            entries: Sequence[object] = pairs if isinstance(pairs, (list, tuple)) else (pairs,)
            for pair in entries:
                if not isinstance(pair, (list, tuple)) or len(pair) != 2:  # a set would give them in hash order
                    raise BackendError(
                        ErrorStatus.InvalidArgument,
                        f"LaunchGraph variables: slots[{v}] is a list of (launch index, scalar index) pairs, "
                        f"got {pair!r} in it",
                    )
                self._pairs.append((pair[0], pair[1]))
                variables.append(v)
        self._count = len(slots)  # how many values set() takes
        self._variables = array("I", variables)
        self._types: list[str] = []  # per slot, its scalar's type, for messages
        self._layout = -1  # the graph's layout the slots were found in
        self._call: tuple[Any, ...] = ()  # vkb_write_variables' arguments but the values, for that layout
        self._launches: frozenset[int] = frozenset()  # the launches the slots are in
        self._find()

    def _find(self) -> None:
        """Find the slots in the graph's joined records (again: a launch moved or changed)."""
        graph = self._graph
        if graph._records is None:
            raise BackendError(ErrorStatus.InvalidArgument, "LaunchGraph variables of a closed LaunchGraph")
        try:
            found = graph._variable_slots(self._pairs)
        except BackendError as error:
            if self._layout < 0:
                raise
            raise BackendError(
                ErrorStatus.InvalidArgument,
                f"{error.context}; a launch the variables feed was updated since bind_variables: bind them again",
            ) from None
        offsets = array("Q", (offset for offset, _, _, _ in found))
        kinds = bytes(kind for _, kind, _, _ in found)
        self._types = [type_name for _, _, type_name, _ in found]
        self._call = (
            ffi.from_buffer("uint8_t[]", graph._blob),
            ffi.from_buffer("uint64_t[]", offsets),
            ffi.from_buffer("uint8_t[]", kinds),
            ffi.from_buffer("uint32_t[]", self._variables),
            len(kinds),
        )
        self._launches = frozenset(launch for _, _, _, launch in found)
        self._layout = graph._layout

    def set(self, values: Sequence[int]) -> None:
        """Write ``values[v]`` (a list or tuple of ints) into every scalar variable ``v`` feeds, for the graph's next
        launches; raises ``InvalidArgument`` (writing nothing) for a value that is not an int64 or does not fit a
        scalar it feeds."""
        graph = self._graph
        if graph._layout != self._layout or graph._blob is None:
            self._find()
        packed = None
        if values.__class__ in (list, tuple):
            try:
                packed = array("q", values)
            except (TypeError, OverflowError):
                pass
        if packed is None or len(packed) != self._count:
            raise BackendError(
                ErrorStatus.InvalidArgument,
                f"LaunchGraph variables: set() takes a list or tuple of {self._count} ints from -2**63 to 2**63 - 1, "
                f"got {values!r}",
            )
        if self._pairs:
            # Their launches' records are in the blob alone from here on, as set_scalars leaves them (an update in
            # between took them out).
            graph._written |= self._launches
            failed = lib.vkb_write_variables(*self._call, ffi.from_buffer("int64_t[]", packed))
            if failed >= 0:
                launch, scalar = self._pairs[failed]
                v = self._variables[failed]
                raise BackendError(
                    ErrorStatus.InvalidArgument,
                    f"LaunchGraph variables: variable {v} = {packed[v]} does not fit scalar {scalar} of launch "
                    f"{launch}, of type {self._types[failed]}",
                )


def _plain(grid: tuple[int | GridArg, ...]) -> bool:
    """Whether every entry of ``grid`` is a plain int, which a scalar writer takes as it is."""
    return all(type(entry) is int for entry in grid)
