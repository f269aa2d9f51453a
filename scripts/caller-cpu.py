#!/usr/bin/env python3
"""Round trips (one tiny launch, then a sync point) with the caller's thread pinned to each CPU named, its wait at
the sync point spinning (the default) or sleeping in slices from the start, each in a fresh process; with the CPU
the worker's thread ended on and the interrupts each pinned CPU took meanwhile (``/proc/interrupts``). It is for the
slow mode (docs/performance.md): a caller on the CPU that takes the GPU's interrupts loses the time each takes to
handle, and a batch that signals a fence raises one.

    python3 scripts/caller-cpu.py --cpus 3 14            # 3,000 round trips per CPU and wait
    python3 scripts/caller-cpu.py --cpus 14 --waits sleep --trips 1000

Each line: the CPU, the wait, min / median / p99 / max us, the worker's CPU, and the interrupt lines that fired most
on the pinned CPU during the round trips.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def interrupts(cpu: int) -> dict[str, int]:
    """Each interrupt line's count on ``cpu`` (empty where /proc/interrupts cannot be read)."""
    try:
        lines = Path("/proc/interrupts").read_text().splitlines()
    except OSError:
        return {}
    columns = lines[0].split()
    if f"CPU{cpu}" not in columns:
        return {}
    at = columns.index(f"CPU{cpu}") + 1
    counts = {}
    for line in lines[1:]:
        parts = line.split()
        if len(parts) > at and parts[at].isdigit():
            counts[" ".join([parts[0], *parts[len(columns) + 1 :]])] = int(parts[at])
    return counts


def thread_cpu(native_id: int) -> int:
    """The CPU a thread of this process last ran on (field 39 of its stat)."""
    stat = Path(f"/proc/self/task/{native_id}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[36])


def child(cpu: int, wait: str, trips: int) -> dict:
    sys.path.insert(0, str(ROOT))
    import numpy as np

    import vkbackend
    from vkbackend.bench import kernels
    from vkbackend.bench.spec import spread

    dev = vkbackend.devices()[0]
    prog = dev.compile(kernels.inc())
    pool = dev.memory_pool
    buf = pool.allocate(256)
    pool.host_to_pool(np.zeros(64, np.float32), buf)
    dev.sync()
    os.sched_setaffinity(threading.get_native_id(), {cpu})  # this thread only: the worker's was set at its start
    if wait == "sleep":  # the sync point's wait sleeps in slices from the start (csrc/fence.c: vkb_wait_completed)
        dev._worker._submitter.progress.spin_ns = 0
    launch, sync, clock = dev.launch, dev.sync, time.perf_counter_ns
    for _ in range(300):
        launch(prog, [buf], (64,), (1, 1, 1))
        sync()
    before = interrupts(cpu)
    samples = []
    for _ in range(trips):
        start = clock()
        launch(prog, [buf], (64,), (1, 1, 1))
        sync()
        samples.append((clock() - start) / 1e3)
    after = interrupts(cpu)
    fired = sorted(((after[k] - before.get(k, 0), k) for k in after), reverse=True)
    worker_cpu = thread_cpu(dev._worker.thread.native_id)
    out = np.empty(64, np.float32)
    pool.pool_to_host(buf, out)
    correct = bool((out == 300 + trips).all())
    dev.close()
    return {
        "cpu": cpu,
        "wait": wait,
        "spread": spread(samples),
        "worker_cpu": worker_cpu,
        "interrupts": [[n, name] for n, name in fired[:3] if n],
        "correct": correct,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cpus", type=int, nargs="+", default=[], help="the CPUs to pin the caller to")
    parser.add_argument("--waits", nargs="+", choices=("spin", "sleep"), default=["spin", "sleep"])
    parser.add_argument("--trips", type=int, default=3000, help="timed round trips per process (default 3000)")
    parser.add_argument("--child", nargs=2, metavar=("CPU", "WAIT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(int(args.child[0]), args.child[1], args.trips)), flush=True)
        return 0
    if not args.cpus:
        parser.error("name the CPUs to pin the caller to: --cpus N [N ...]")
    status = 0
    for cpu in args.cpus:
        for wait in args.waits:
            command = [sys.executable, __file__, "--child", str(cpu), wait, "--trips", str(args.trips)]
            proc = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
            if proc.returncode:
                print(f"CPU {cpu}, {wait}: failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
                status = 1
                continue
            r = json.loads(proc.stdout.strip().splitlines()[-1])
            low, median, p99, high = r["spread"]
            fired = "; ".join(f"{name} x{n}" for n, name in r["interrupts"]) or "none"
            print(
                f"CPU {cpu:3d}, {wait:5s}: {low:7.1f} {median:7.1f} {p99:7.1f} {high:8.1f} us"
                f"  worker on CPU {r['worker_cpu']}  {'' if r['correct'] else 'WRONG  '}interrupts: {fired}"
            )
    return status


if __name__ == "__main__":
    sys.exit(main())
