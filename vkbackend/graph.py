"""LaunchGraph: a fixed sequence of launches, packed once and queued again with one call.

A framework's JIT replays the same kernels step after step, changing only a few buffers and scalars. Launching them
one by one costs a Python call each in the framework and here; a graph keeps every launch's packed record and queues
them all as one item, so a replay costs one call plus the records that changed. The worker records a replay like any
other launches (hazard barriers, batching), so replays order themselves against launches and copies around them.

A graph holds a reference on every buffer it binds, so a buffer released by its owner cannot be freed, and its slot
reused by another buffer, while a replay may still name it. Programs are not held: a replay of a released program
is skipped and reported as ``KernelLaunch`` at the next sync point.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from .errors import BackendError, ErrorStatus
from .types import Grid, Scalar

if TYPE_CHECKING:
    from .launch import Launcher
    from .memory import MemoryPool

Launch = tuple[int, Sequence[int], Sequence[Scalar], Grid]  # (program, buffers, scalars, grid), as Device.launch takes


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
        # The joined records and where each starts: an update of the same length is written in place.
        self._blob: bytearray | None = None
        self._starts: list[int] = []
        self._launches = 0  # launches the blob holds (placeholders queue none)
        try:
            for launch in launches:
                record, held = self._pack(launch)
                self._records.append(record)
                self._held.append(held)
        except BaseException:
            self.close()
            raise

    def __len__(self) -> int:
        return len(self._records or ())

    def _pack(self, launch: Launch | None, held: tuple[int, ...] = ()) -> tuple[bytes, tuple[int, ...]]:
        """A launch's record, checked, and the buffers it holds references on: ``held`` again when it binds the same
        buffers (an update that changes only scalars or the grid takes no new references), else new ones."""
        if launch is None:
            return b"", ()
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
        record = self._launcher.record(prog, buffers, scalars, grid)
        if held and tuple(buffers) == held:
            return record, held
        return record, self._hold(buffers)

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
        if self._records is None:
            raise BackendError(ErrorStatus.InvalidArgument, "update of a closed LaunchGraph")
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(self._records):
            raise BackendError(
                ErrorStatus.InvalidArgument,
                f"LaunchGraph.update: index {index!r} is outside 0..{len(self._records) - 1}",
            )
        old = self._held[index]
        record, held = self._pack(launch, old)
        self._held[index] = held
        blob, before = self._blob, self._records[index]
        self._records[index] = record
        if blob is not None:
            if len(record) == len(before):
                start = self._starts[index]
                blob[start : start + len(record)] = record
            else:
                self._blob = None
        if held is not old:
            self._release(old)

    def _joined(self) -> bytes:
        """The records of every launch, joined: a copy, since later updates change the graph's own in place."""
        if self._records is None:
            raise BackendError(ErrorStatus.InvalidArgument, "launch of a closed LaunchGraph")
        if self._blob is None:
            self._blob = bytearray(b"".join(self._records))
            self._launches = sum(1 for record in self._records if record)
            self._starts, start = [], 0
            for record in self._records:
                self._starts.append(start)
                start += len(record)
        return bytes(self._blob)

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
        return [] if self._launcher.closed else held

    def __del__(self) -> None:
        # A finalizer: the garbage collector may run it inside the pool's own locked code (finalizers.py).
        for buffers in self._take_held():
            for buf in buffers:
                self._pool.release_from_finalizer(buf)
