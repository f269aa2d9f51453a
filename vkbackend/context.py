"""DeviceContext: what every unit of one device shares, passed as one object instead of twenty arguments."""
from __future__ import annotations

import functools
import itertools
import queue
import threading
import time
from dataclasses import dataclass, field

from .config import VulkanConfig
from .discovery import DeviceHandles, DeviceInfo
from .errors import BackendError, ErrorStatus

# Buffer and program ids come from one process-wide counter, so no id is ever reused: not across close() and
# devices() again, not between devices, not between buffers and programs. A stale id names nothing. They are odd
# integers above 2**53, which no float and no bool can equal: the launch fast path finds ids with a dict lookup, so
# 1.0 or True can never pass for an id there, and junk always falls to the slow path that explains it.
next_id = itertools.count(2**53 + 1, 2).__next__

class Signal:
    """A flag that one side sets and a waiter takes (each set wakes one waiter, which takes it).

    Not threading.Event: its methods run Python code while holding the lock of its Condition, and a KeyboardInterrupt
    landing there leaves that lock held, so that the worker's next set() blocks forever. This is a SimpleQueue, and
    ``set`` is a C-level partial of its put: no Python frame, so an interrupt lands before or after a set, never in it.
    """

    __slots__ = ("_queue", "set")

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self.set = functools.partial(self._queue.put, None)

    def clear(self) -> None:
        """Take every set not yet taken."""
        while not self._queue.empty():
            self._queue.get()

    def take(self, timeout_s: float | None = None) -> bool:
        """Wait up to ``timeout_s`` (None: for ever) for a set and take it; False when none came."""
        try:
            self._queue.get(timeout=timeout_s)
            return True
        except queue.Empty:
            return False


# How often a caller waiting on the worker, a copy or a staging buffer looks at whether its device was closed: close()
# wakes every waiter within this, with the closed error rather than a timeout at the deadline.
WAKE_S = 0.05


@dataclass(eq=False)
class DeviceContext:
    """Handles, limits and the device's error state.

    Errors found on the worker are kept as ``pending_error`` (the first since the last sync point) and raised by the
    next sync point; a lost device is sticky and makes every later call fail fast.
    """

    ffi: object
    lib: object
    handles: DeviceHandles
    config: VulkanConfig
    slots: object                       # vkb_slot_table*: buffer slots that launch records name
    sync_timeout_s: float               # the deadline of every wait on the GPU, resolved once when the device opens
    worker: object = None               # worker.Worker, set once started
    pending_error: BackendError | None = None
    lost: BackendError | None = None
    closed: bool = False
    forked: bool = False                # this process was forked from the one that opened the device
    abandoned: bool = False             # closed while its GPU work still ran: its objects are never destroyed
    usable: bool = True                 # False once lost, closed, forked or throttled: the launch fast path checks only this
    # Back-pressure (see worker.py): while throttled, launching callers wait; while watched (the worker is inside a
    # call, such as a pipeline creation, and takes nothing from its queue), they check the queue's length.
    throttled: bool = False
    watched: bool = False
    room: Signal = field(default_factory=lambda: Signal())  # set when the throttle lifts
    error_lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def device(self):
        return self.handles.device

    @property
    def info(self) -> DeviceInfo:
        return self.handles.info

    @property
    def sync_timeout_ns(self) -> int:
        return int(self.sync_timeout_s * 1e9)

    def fail(self, error: BackendError) -> None:
        """Keep an asynchronous error for the next sync point (the first one wins); a lost device is sticky."""
        with self.error_lock:
            if error.status is ErrorStatus.DeviceLost and self.lost is None:
                self.lost = error
                self.usable = False
            if self.pending_error is None:
                self.pending_error = error

    def raise_pending(self) -> None:
        """At a sync point: raise the first asynchronous error since the last one."""
        if self.lost is not None:
            with self.error_lock:
                self.pending_error = None
            raise BackendError(ErrorStatus.DeviceLost, f"{self.info.name}: {self.lost.context}; close the device")
        if self.pending_error is not None:
            with self.error_lock:
                error, self.pending_error = self.pending_error, None
            if error is not None:
                raise error

    def closed_error(self) -> BackendError:
        """The error for a call on, or a wait cut short by, a closed device."""
        return BackendError(ErrorStatus.InvalidArgument, f"{self.info.name} is closed; open it again with vkbackend.devices()")

    def wait(self, signal: Signal, timeout_s: float, what: str) -> None:
        """Take ``signal``; ``KernelSync`` saying ``what`` did not happen within ``timeout_s``, and the closed error
        as soon as the device is closed meanwhile."""
        deadline = time.monotonic() + timeout_s
        while not signal.take(min(WAKE_S, max(0.0, deadline - time.monotonic()))):
            if self.closed:
                raise self.closed_error()
            if time.monotonic() >= deadline:
                raise BackendError(ErrorStatus.KernelSync, f"{what} within {timeout_s:.1f} s (VKBACKEND_SYNC_TIMEOUT_S)")

    def admit(self) -> None:
        """The launch slow path, taken when ``usable`` is false: fail on a closed, lost or forked device; while the
        worker is far behind (throttled), wait until it has caught up, within the sync deadline."""
        self.ensure_usable()
        if self.watched and not self.throttled and len(self.worker.queue) > self.worker.queue_high:
            self.set_throttled(True)
        if not self.throttled:
            return
        deadline = time.monotonic() + self.sync_timeout_s
        while self.throttled:
            if self.room.take(WAKE_S):
                self.room.set()  # pass the wake-up on to the next launching thread
            self.ensure_usable()
            if self.throttled and time.monotonic() >= deadline:
                raise BackendError(ErrorStatus.KernelSync,
                                   f"the launch queue of {self.info.name} did not drain within {self.sync_timeout_s:.1f} s "
                                   "(VKBACKEND_SYNC_TIMEOUT_S): the GPU is far behind and made no progress")

    def set_throttled(self, on: bool) -> None:
        """The back-pressure switch: launching callers wait while it is on."""
        with self.error_lock:  # usable must never come back on for a device that closed or was lost meanwhile
            if on and not self.throttled:
                self.room.clear()
                self.worker.submitter.stats["throttled"] += 1
            self.throttled = on
            self._update_usable()
        if not on:
            self.room.set()

    def set_watched(self, on: bool) -> None:
        """On while the worker is inside a call: launching callers then check the queue's length themselves."""
        with self.error_lock:
            self.watched = on
            self._update_usable()

    def _update_usable(self) -> None:
        self.usable = not (self.throttled or self.watched or self.closed or self.forked or self.lost is not None)

    def ensure_usable(self) -> None:
        """Fail fast on a closed, lost or inherited (forked) device."""
        if self.forked:
            from .discovery import fork_message  # discovery imports this module
            raise BackendError(ErrorStatus.InvalidArgument, fork_message(self.info.name))
        if self.closed:
            raise self.closed_error()
        if self.lost is not None:
            raise BackendError(ErrorStatus.DeviceLost, f"{self.info.name} was lost ({self.lost.context}); close it")
