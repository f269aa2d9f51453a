#!/usr/bin/env python3
"""Where a sync point's time goes between the caller and the GPU, without tracing: the C calls of the worker and
the caller (the worker's waits for work, recording and submitting a window, its wait for the batch (the completion
marker, or the fence of a batch that signalled one), that fence's reset, publishing the completed serial (from
Python, or from C as the last batch completes: ``vkb_wait_last``), the caller's wait) are stamped with
``time.perf_counter_ns`` in one process, for two kinds of sync point:

- the synchronised MLP step of ``bench --tinygrad`` (tinygrad's ``TinyJit`` step, then ``Device.synchronize``);
- ``launch_sync`` (one tiny launch, then ``Device.sync``).

    python3 scripts/return-path.py            # the bench's full-size MLP
    python3 scripts/return-path.py --quick    # the --quick MLP (lavapipe)
    python3 scripts/return-path.py --no-lane  # the express lane off: every sync point's work by the worker's Python

Where polling pays (a GPU), the express lane submits lone launches and graph replays from the worker's park in C, which
the stamps cannot see: such sync points are not placed, and ``--no-lane`` shows the path they take without it.

Each row is min / median / p90 / p99 / max microseconds over the sync points, and how many had the phase. Run it from
a checkout (tinygrad 0.14.0 installed).
The stamps wrap the device's native module for the run, which adds well under a microsecond per call.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

STAMPED = (
    "vkb_wait_batch",
    "vkb_wait_last",
    "vkResetFences",
    "vkb_publish_completed",
    "vkb_wait_completed",
    "vkb_submit_batch",
    "vkb_wait_work",
)
WORKER_WAITS = ("vkb_wait_batch", "vkb_wait_last", "vkb_publish_completed", "vkb_wait_work")  # waits for work
ROWS = (
    ("launch() before the sync", "launch"),
    ("sync() -> the caller waits in C", "caller_waits"),
    ("caller waits -> worker out of its wait", "worker_out"),
    ("worker out -> recording begins", "to_submit"),
    ("recording and vkQueueSubmit", "submit"),
    ("submitted -> seen complete (GPU, poll)", "gpu"),
    ("seen complete -> publish begins", "to_publish"),
    ("vkResetFences (a batch with a fence)", "reset"),
    ("published -> caller out", "publish_out"),
    ("caller out -> sync returned", "out_end"),
    ("seen complete -> sync returned", "seen_end"),
    ("sync() called -> returned", "total"),
)


class Stamped:
    """The native module with some functions wrapped to log (name, start ns, end ns, result)."""

    def __init__(self, lib, log: list) -> None:
        self._lib = lib
        for name in STAMPED:
            setattr(self, name, self._wrap(getattr(lib, name), name, log))

    @staticmethod
    def _wrap(fn, name: str, log: list):
        def stamped(*args):
            start = time.perf_counter_ns()
            result = fn(*args)
            end = time.perf_counter_ns()
            if name == "vkb_submit_batch":  # its end is the submit's, not that of the linger after it
                end = start + args[0].submit_ns
            log.append((name, start, end, result))
            return result

        return stamped

    def __getattr__(self, name: str):
        return getattr(self._lib, name)


def phases(log: list, since: int, start: int, end: int) -> dict[str, int] | None:
    """The phases of the sync point that ran from ``start`` to ``end`` (ns), the last before it having ended at
    ``since``: the waits and publishes that ended inside it, and the last submit since ``since`` (a graph is submitted
    while the step runs, before its sync point). A last batch whose serial C published as it completed
    (``vkb_wait_last``, which may hold the worker there past the sync point's end) counts as seen and published when
    the caller's wait ended. The worker is "out of its wait" when the first of its waits that was running as the
    caller began to wait returned (absent where the worker was already running Python then)."""

    def last(names: tuple[str, ...], done=None, after: int = start):
        found = [e for e in log if e[0] in names and after <= e[2] <= end and (done is None or done(e[3]))]
        return found[-1] if found else None

    wait, submit = last(("vkb_wait_completed",), bool), last(("vkb_submit_batch",), after=since)
    if not (wait and submit):
        return None
    reset, publish = last(("vkResetFences",)), last(("vkb_publish_completed",))
    seen = last(("vkb_wait_batch",), lambda r: r == 0)
    in_c = [e for e in log if e[0] == "vkb_wait_last" and e[3] == 0 and e[1] <= wait[2] and e[2] >= start]
    if in_c and (seen is None or in_c[-1][1] > seen[1]):
        seen = ("vkb_wait_last", in_c[-1][1], min(in_c[-1][2], wait[2]), 0)
        publish = ("vkb_wait_last", seen[2], seen[2], 0)
    if not (seen and publish):
        return None
    out = {
        "caller_waits": wait[1] - start,
        "submit": submit[2] - submit[1],
        "gpu": seen[2] - submit[2],
        "publish_out": wait[2] - publish[1],
        "out_end": end - wait[2],
        "seen_end": end - seen[2],
        "total": end - start,
    }
    if publish[0] == "vkb_publish_completed" and publish[1] >= seen[2]:
        out["to_publish"] = publish[1] - seen[2]
    if reset and seen[2] <= reset[1] <= publish[1]:
        out["reset"] = reset[2] - reset[1]
    woke = [e[2] for e in log if e[0] in WORKER_WAITS and e[1] <= wait[1] <= e[2] <= submit[1]]
    if woke:
        out["worker_out"] = min(woke) - wait[1]
        out["to_submit"] = submit[1] - min(woke)
    return out


def report(label: str, log: list, syncs: list[tuple[int, int]], launches: list[int] | None = None) -> None:
    found = []
    for i, (a, b) in enumerate(syncs):
        p = phases(log, syncs[i - 1][1] if i else 0, a, b)
        if p is not None:
            if launches:
                p["launch"] = launches[i]
            found.append(p)
    waited = sum(1 for a, b in syncs if any(e[0] == "vkb_wait_completed" and e[3] and a <= e[2] <= b for e in log))
    print(
        f"{label}: {len(found)} of {len(syncs)} sync points ({waited} waited for the GPU); "
        "us min / median / p90 / p99 / max (count)"
    )
    for title, key in ROWS:
        values = sorted(p[key] for p in found if key in p)
        if values:
            picks = (
                values[0],
                values[len(values) // 2],
                *(values[int(len(values) * q)] for q in (0.9, 0.99)),
                values[-1],
            )
            print(f"  {title:40s}" + "".join(f" {v / 1e3:8.1f}" for v in picks) + f"  ({len(values)})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the small MLP of bench --tinygrad --quick")
    parser.add_argument("--steps", type=int, default=60, help="synced MLP steps stamped")
    parser.add_argument("--trips", type=int, default=500, help="launch_sync round trips stamped")
    parser.add_argument("--no-lane", action="store_true", help="the express lane off (csrc/express.c)")
    args = parser.parse_args(argv)
    os.environ["DEV"] = "VK"
    import numpy as np
    from tinygrad import Device

    import vkbackend.tinygrad  # noqa: F401 - the VK device, for a checkout that was never installed
    from vkbackend.bench import kernels
    from vkbackend.bench.tinygrad.cases import TinygradWorkloads
    from vkbackend.bench.tinygrad.spec import TgSizes

    work = TinygradWorkloads("VK", TgSizes.quick() if args.quick else TgSizes.full())
    step = work.mlp_step()
    for _ in range(10):
        step()
        work.sync()
    dev = Device["VK"].vk
    if args.no_lane:
        dev._worker._submitter.express = False  # read as the worker parks: the next park leaves the lane unarmed
        dev._worker.wake_up()  # ends the park it may be in, whose lane may be armed
        work.sync()
    ctx = dev._worker.ctx  # the device's context: its ``lib`` is what the worker and the caller call through
    log: list = []
    native, ctx.lib = ctx.lib, Stamped(ctx.lib, log)
    try:
        syncs = []
        for _ in range(args.steps):
            step()
            start = time.perf_counter_ns()
            work.sync()
            syncs.append((start, time.perf_counter_ns()))
        report("synced MLP step", log, syncs)
        log.clear()
        pool = dev.memory_pool
        prog = dev.compile(kernels.inc())
        buf = pool.allocate(1024)
        pool.host_to_pool(np.zeros(256, np.float32), buf)
        syncs = []
        launches = []
        for _ in range(args.trips):
            before = time.perf_counter_ns()
            dev.launch(prog, [buf], (256,), (1, 1, 1))
            start = time.perf_counter_ns()
            dev.sync()
            syncs.append((start, time.perf_counter_ns()))
            launches.append(start - before)
        report("launch_sync", log, syncs, launches)
        pool.release(buf)
    finally:
        ctx.lib = native
    return 0


if __name__ == "__main__":
    sys.exit(main())
