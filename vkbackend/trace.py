"""Tracing of the path between the caller and the GPU, a debug switch: ``VKBACKEND_TRACE=FILE``.

With it set, the caller's sync points, the worker's wake-ups, submits and completions, and the GPU's own start and
end of every batch (timestamps written into the batch, placed on the host's clock by ``VK_EXT_calibrated_timestamps``
where the device has it) are kept in memory as ``(ns, thread, name, serial)`` events and written to FILE at exit, as
Chrome trace-event JSON (chrome://tracing or ui.perfetto.dev open it). ``scripts/trace-summary.py FILE`` breaks each
sync point down into where its time went. Off (the default), each traced place costs one attribute read.

Events, by thread: callers: ``sync``, ``sync_done``, ``readback``, ``readback_ready``, ``readback_done``,
``enqueue`` (a graph's records queued), ``hand_over`` and ``handed_over`` or ``hand_over_timed_out`` (around a replay's
wait for the worker's submit), ``wake_worker`` (a launch woke the sleeping worker); the worker: ``woke``,
``sleep``, ``submit`` and ``submitted`` (around recording and ``vkQueueSubmit``; their serial is the batch's),
``publish`` (the serial a waiting caller waits for), ``complete`` (the worker saw the batch complete); the GPU:
``gpu_start``, ``gpu_end``.
"""

from __future__ import annotations

import atexit
import json
import os
import threading
import time

__all__ = ["enabled", "event", "gpu_event", "dump", "events", "clear"]

_path = os.environ.get("VKBACKEND_TRACE", "")
enabled: bool = bool(_path)
"""Whether tracing is on (read once, at import)."""

_events: list[tuple[int, int, str, int]] = []
_names: dict[int, str] = {}
_GPU = -1  # the pseudo-thread of GPU events


def event(name: str, serial: int = 0) -> None:
    """Note ``name`` now, on this thread (only call it under ``if trace.enabled``)."""
    ident = threading.get_ident()
    if ident not in _names:
        _names[ident] = threading.current_thread().name
    _events.append((time.perf_counter_ns(), ident, name, serial))


def gpu_event(ns: int, name: str, serial: int) -> None:
    """Note a GPU event at host time ``ns`` (``time.perf_counter_ns``'s clock)."""
    _events.append((ns, _GPU, name, serial))


def events() -> list[tuple[int, str, str, int]]:
    """The events so far, in time order: ``(ns, thread name, event, serial)``."""
    names = {**_names, _GPU: "GPU"}
    return [(ns, names.get(ident, str(ident)), name, serial) for ns, ident, name, serial in sorted(_events)]


def clear() -> None:
    """Drop the events noted so far (a script that looks at what follows its warm-up)."""
    _events.clear()


def dump(path: str) -> None:
    """Write the events as Chrome trace-event JSON (instant events; ``ts`` in microseconds)."""
    trace = [
        {"name": name, "ph": "i", "s": "t", "ts": ns / 1e3, "pid": 0, "tid": thread, "args": {"serial": serial}}
        for ns, thread, name, serial in events()
    ]
    with open(path, "w") as f:
        json.dump({"traceEvents": trace, "displayTimeUnit": "ns"}, f)


if enabled:
    atexit.register(lambda: dump(_path))
