#!/usr/bin/env python3
"""What a GPU's completion costs the CPUs: round trips on the driver in plain C (scripts/interrupt-probe.c says how)
while a thread pinned to another CPU measures the time it did not run, with the interrupts each CPU took. On NVIDIA's
driver every fence or semaphore a submission signals raises an interrupt, and a thread on the CPU that takes it loses
the time its handling takes (docs/performance.md, "The slow mode").

    python3 scripts/interrupt-probe.py                          # scan: a fenced round trip, the sampler on each CPU
    python3 scripts/interrupt-probe.py fence_poll:-1:14 resubmit_memory_poll:-1:14 fence_poll:14:3

A plan is MODE:SAMPLER_CPU:TRIP_CPU (the sampler's CPU -1 for none); the modes are fence_poll, fence_block,
timeline_poll, resubmit_timeline, resubmit_memory_poll and idle. Each line: the plan, the round trip's min / median /
p99 / max us, the sampler's lost us per round trip, and the interrupt lines that fired at least once in 20 round
trips, per round trip. --json FILE keeps the program's JSON lines.
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("round_trip_floor", ROOT / "scripts" / "round-trip-floor.py")
floor = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(floor)  # type: ignore[union-attr]


def build(folder: Path) -> Path:
    """The program and round-trip-floor's kernels, in ``folder``."""
    floor.build(folder)
    program = folder / "interrupt-probe"
    command = [
        *floor.vulkan_ref.c_compiler(),
        "-O2",
        "-std=c11",
        "-Wall",
        "-Wno-unused-function",  # round-trip-floor.c's and vulkan_ref.c's helpers of their own cases
        f"-I{floor.vulkan_ref.vulkan_include()}",
        f"-I{floor.vulkan_ref.SOURCE.parent}",
        f"-I{ROOT / 'scripts'}",
        str(ROOT / "scripts" / "interrupt-probe.c"),
        "-o",
        str(program),
        "-ldl",
        "-lpthread",
    ]
    subprocess.run(command, check=True)
    return program


def show(lines: list[dict]) -> None:
    for line in lines:
        if "info" in line:
            print(line["info"])
        elif "mode" in line:
            plan = f"{line['mode']}:{line['sampler_cpu']}:{line['trip_cpu']}"
            spread = f"{line['min']:7.2f} {line['median']:7.2f} {line['p99']:7.2f} {line['max']:8.2f}"
            lost = f"sampler lost {line['sampler_gap_us_per_trip']:7.2f} us a trip" if line["sampler_cpu"] >= 0 else ""
            fired = "; ".join(f"{name} x{n}" for name, n in line["interrupts_per_trip"].items()) or "none"
            print(f"{plan:30s} {spread} us  {lost:30s} interrupts a trip: {fired}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("plans", nargs="*", default=["scan"], help="MODE:SAMPLER_CPU:TRIP_CPU, or scan (default)")
    parser.add_argument("--trips", type=int, default=2000, help="timed round trips per plan (default 2000)")
    parser.add_argument("--json", metavar="FILE", help="write the program's JSON lines to FILE")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="vkbackend-interrupt-probe-") as tmp:
        program = build(Path(tmp))
        proc = subprocess.run(
            [str(program), tmp, str(args.trips), *args.plans], capture_output=True, text=True, check=False
        )
    show(floor.json_lines(proc, args.json))
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
