"""What a finalizer may do: ``collecting()`` says whether a garbage collection is running in this thread.

The cyclic garbage collector runs finalizers (``__del__``, ``weakref.finalize`` callbacks) in whichever thread
allocates when it triggers, inside whatever code that thread is running: the memory pool's own locked code
included, where a finalizer that released a buffer would wait for ever on the lock its own thread holds. So
finalizers release through ``MemoryPool.release_from_finalizer``, which defers the release while a collection runs.
"""

from __future__ import annotations

import gc
import threading

__all__ = ["collecting"]


class _Collecting(threading.local):
    now = False


_state = _Collecting()


def _track(phase: str, info: dict[str, int]) -> None:
    _state.now = phase == "start"


gc.callbacks.append(_track)


def collecting() -> bool:
    """Whether this thread is inside a garbage collection (its finalizers may be running inside any code)."""
    return _state.now
