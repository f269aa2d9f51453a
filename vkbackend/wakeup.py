"""Signal, the wake-up every waiter in the backend takes, and how often a waiter looks at whether its device closed."""

from __future__ import annotations

import functools
import queue

__all__ = ["Signal", "WAKE_S"]

# How often a caller waiting on the worker, a copy or a staging buffer looks at whether its device was closed: close()
# wakes every waiter within this, with the closed error rather than a timeout at the deadline.
WAKE_S = 0.05


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
