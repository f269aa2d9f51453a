"""DeviceContext: the handles, limits and error state of one device, which every unit of it shares.

Errors found on the worker are kept as the pending error (the first since the last sync point) and raised by the
next sync point; a lost device is sticky and makes every later call fail fast. ``usable`` is the one flag the launch
fast path reads: false while the device is closed, lost, inherited by a forked child, or while the worker holds
launches back (``set_busy``, see worker.py).
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from dataclasses import dataclass, field

from .config import VulkanConfig
from .discovery import DeviceHandles, DeviceInfo, fork_message
from .errors import BackendError, ErrorStatus
from .wakeup import WAKE_S, Signal


@dataclass(eq=False)
class DeviceContext:
    """Handles, limits and the device's error state."""

    ffi: object
    lib: object
    handles: DeviceHandles
    config: VulkanConfig
    slots: object  # vkb_slot_table*: the buffer table the pool writes and the recorder reads
    sync_timeout_s: float  # the deadline of every wait on the GPU, resolved once when the device opens
    allocation_cap: int | None = None  # VulkanConfig's cap on one allocation, resolved once when the device opens
    pending_error: BackendError | None = None
    lost: BackendError | None = None
    closed: bool = False
    forked: bool = False  # this process was forked from the one that opened the device
    abandoned: bool = False  # closed while its GPU work still ran: its objects are never destroyed
    usable: bool = True  # see the module's docstring
    _busy: bool = False
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

    @property
    def polling_pays(self) -> bool:
        """Whether waits should poll for long before they sleep: on a GPU, where a thread woken from a blocking wait
        can take tens of microseconds to run again; not on a CPU device or with two cores or fewer, where a polling
        thread takes a core from the work it waits for."""
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        return self.info.device_type != "cpu" and cpus > 2

    def fail(self, error: BackendError) -> None:
        """Keep an asynchronous error for the next sync point (the first one wins); a lost device is sticky."""
        with self.error_lock:
            if error.status is ErrorStatus.DeviceLost and self.lost is None:
                self.lost = error
                self._update_usable()
            if self.pending_error is None:
                self.pending_error = error

    def forget_pending(self, error: BackendError) -> None:
        """Drop the pending error where it is ``error``, which the caller reports another way (once is enough)."""
        with self.error_lock:
            if self.pending_error is error:
                self.pending_error = None

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

    def mark_closed(self) -> None:
        """The device is closing: every later call fails with the closed error."""
        with self.error_lock:  # usable must never come back on: set_busy recomputes it under this lock
            self.closed = True
            self._update_usable()

    def __post_init__(self) -> None:
        _contexts.add(self)

    def set_busy(self, busy: bool) -> None:
        """The worker's gate: while busy, launches take the slow path (``Worker.admit``)."""
        with self.error_lock:
            self._busy = busy
            self._update_usable()

    def _update_usable(self) -> None:
        self.usable = not (self._busy or self.closed or self.forked or self.lost is not None)

    def closed_error(self) -> BackendError:
        """The error for a call on, or a wait cut short by, a closed device."""
        return BackendError(
            ErrorStatus.InvalidArgument, f"{self.info.name} is closed; open it again with vkbackend.devices()"
        )

    def ensure_usable(self) -> None:
        """Fail fast on a closed, lost or inherited (forked) device."""
        if self.forked:
            raise BackendError(ErrorStatus.InvalidArgument, fork_message(self.info.name))
        if self.closed:
            raise self.closed_error()
        if self.lost is not None:
            raise BackendError(ErrorStatus.DeviceLost, f"{self.info.name} was lost ({self.lost.context}); close it")

    def wait(self, signal: Signal, timeout_s: float, what: str) -> None:
        """Take ``signal``; ``KernelSync`` saying ``what`` did not happen within ``timeout_s``, and the closed error
        as soon as the device is closed meanwhile."""
        deadline = time.monotonic() + timeout_s
        while not signal.take(min(WAKE_S, max(0.0, deadline - time.monotonic()))):
            if self.closed:
                raise self.closed_error()
            if time.monotonic() >= deadline:
                raise BackendError(
                    ErrorStatus.KernelSync, f"{what} within {timeout_s:.1f} s (VKBACKEND_SYNC_TIMEOUT_S)"
                )


_contexts: "weakref.WeakSet[DeviceContext]" = weakref.WeakSet()


def _after_fork_in_child() -> None:
    """In a forked child every device of the parent is the parent's: every call on it fails with a clear error. No
    lock is taken (a parent's thread may have held it at the fork)."""
    for ctx in list(_contexts):
        ctx.forked = True
        ctx.usable = False


os.register_at_fork(after_in_child=_after_fork_in_child)
