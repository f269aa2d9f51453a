#!/usr/bin/env python3
"""Where the time of each sync point went, from a trace that ``VKBACKEND_TRACE=FILE`` wrote (vkbackend/trace.py).

    VKBACKEND_TRACE=/tmp/t.json python3 my_program.py && python3 scripts/trace-summary.py /tmp/t.json

A sync point is a caller's ``sync`` or ``readback``; it ends at ``sync_done`` or ``readback_ready`` on the same
thread. One that found the worker asleep with nothing queued waited for nothing ("idle"). The others waited for the
batch whose serial the worker published for them, and their time splits into phases, each from the event before:

    submit     the worker began recording the batch (negative: before the caller arrived)
    submitted  recording and vkQueueSubmit returned
    gpu_start  the GPU began the batch (with calibrated timestamps only)
    gpu_end    the GPU finished it
    woke       the caller saw it and had the GIL back (its sync point returns)

and ``complete``, when the worker saw the batch's fence, relative to gpu_end. ``wake`` is how long the worker took
to wake after a caller woke it. Each row gives min / median / p90 / p99 / max in microseconds and the count.
"""

from __future__ import annotations

import argparse
import bisect
import json
import statistics
import sys
from collections import defaultdict

PHASES = ("submit", "submitted", "gpu_start", "gpu_end", "woke", "total", "complete-gpu_end", "wake")


def load(path: str) -> list[tuple[float, str, str, int]]:
    """(us, thread, event, serial) in time order."""
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    return sorted((e["ts"], str(e["tid"]), e["name"], e["args"].get("serial", 0)) for e in events)


def breakdown(events: list[tuple[float, str, str, int]]) -> tuple[dict[str, list[float]], int, int]:
    """Samples per phase (us), and how many sync points were idle and waited."""
    batch: dict[int, dict[str, float]] = defaultdict(dict)  # serial -> event -> time
    publishes: list[tuple[float, int]] = []
    wakes: list[float] = []
    woke: list[float] = []
    for ts, _thread, name, serial in events:
        if name in ("submit", "submitted", "gpu_start", "gpu_end", "complete"):
            batch[serial].setdefault(name, ts)
        elif name == "publish":
            publishes.append((ts, serial))
        elif name == "wake_worker":
            wakes.append(ts)
        elif name == "woke":
            woke.append(ts)
    samples: dict[str, list[float]] = defaultdict(list)
    for t in wakes:
        i = bisect.bisect_left(woke, t)
        if i < len(woke):
            samples["wake"].append(woke[i] - t)
    idle = waited = 0
    open_at: dict[str, float] = {}
    publish_times = [t for t, _ in publishes]
    for ts, thread, name, _serial in events:
        if name in ("sync", "readback"):
            open_at[thread] = ts
        elif name in ("sync_done", "readback_ready") and thread in open_at:
            start = open_at.pop(thread)
            i = bisect.bisect_left(publish_times, start)
            if i >= len(publishes) or publishes[i][0] > ts:
                idle += 1
                continue
            waited += 1
            b = batch.get(publishes[i][1], {})
            samples["total"].append(ts - start)
            last = start
            for phase in ("submit", "submitted", "gpu_start", "gpu_end"):
                if phase in b:
                    samples[phase].append(b[phase] - last)
                    last = b[phase]
            samples["woke"].append(ts - last)
            if "complete" in b and "gpu_end" in b:
                samples["complete-gpu_end"].append(b["complete"] - b["gpu_end"])
    return samples, idle, waited


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace", help="the file VKBACKEND_TRACE named")
    parser.add_argument("--json", action="store_true", help="one JSON line per phase")
    args = parser.parse_args(argv)
    samples, idle, waited = breakdown(load(args.trace))
    print(f"{args.trace}: {waited} sync points waited for the GPU, {idle} found nothing to wait for")
    for phase in PHASES:
        values = samples.get(phase)
        if not values:
            continue
        row = {
            "phase": phase,
            "min": min(values),
            "median": statistics.median(values),
            "p90": quantile(values, 0.9),
            "p99": quantile(values, 0.99),
            "max": max(values),
            "count": len(values),
        }
        if args.json:
            print(json.dumps({k: round(v, 2) if isinstance(v, float) else v for k, v in row.items()}))
        else:
            print(
                f"{phase:18s} min {row['min']:9.1f}  median {row['median']:9.1f}  p90 {row['p90']:9.1f}  "
                f"p99 {row['p99']:9.1f}  max {row['max']:9.1f}  n={len(values)}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
