"""CallTimes: how often functions were called and how long they took, by label, the functions wrapped in place.

``scripts/cold-start.py`` and ``scripts/decode-phases.py`` split a tinygrad workload's time with it (tinygrad's and
vkbackend's own functions, module-level or methods).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = ["CallTimes"]


class CallTimes:
    """Calls and summed wall seconds per label, of the functions :meth:`wrap` replaced (from any thread: calls on
    several threads at once add up past the wall time)."""

    def __init__(self) -> None:
        self.calls: dict[str, int] = {}
        self.seconds: dict[str, float] = {}
        self._lock = threading.Lock()

    def wrap(self, owner: object, name: str, label: str) -> None:
        """Replace ``owner.name`` (a module's function or a class's method) with a wrapper that counts each call and
        adds its seconds under ``label`` (several functions may share one)."""
        fn: Callable[..., Any] = getattr(owner, name)
        calls, seconds = self.calls, self.seconds
        calls.setdefault(label, 0)
        seconds.setdefault(label, 0.0)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                with self._lock:
                    calls[label] += 1
                    seconds[label] += time.perf_counter() - start

        setattr(owner, name, wrapper)

    def clear(self) -> None:
        """Zero every label's figures (the wrappers stay)."""
        for label in self.calls:
            self.calls[label], self.seconds[label] = 0, 0.0
