#!/usr/bin/env python3
"""What one round trip from the host to the GPU and back costs on this driver, in plain C, by the ways a program can
wait and read back (scripts/round-trip-floor.c says which): the floor under `bench`'s `launch_sync` and
`readback_small`.

    python3 scripts/round-trip-floor.py                 # 3,000 round trips per variant, on the first device
    python3 scripts/round-trip-floor.py --cpu 14        # the program pinned to CPU 14
    python3 scripts/round-trip-floor.py --memory        # kernels on plain vs host-mappable device memory; host reads
    python3 scripts/round-trip-floor.py --gaps 16777216  # the GPU's idle time between back-to-back batches

It builds the program with the bench's C reference (vkbackend/bench/vulkan_ref.c, which it includes), compiles its
kernels with glslang and prints a table: us per round trip, min / median / p99 / max, and the medians of its phases
(recording, vkQueueSubmit, the wait; with calibrated timestamps, submit to the GPU's start, the GPU, its end to the
host seeing it). --json FILE keeps the program's JSON lines.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from vkbackend.bench import kernels, vulkan_ref  # noqa: E402
from vkbackend.glsl import compile_glsl  # noqa: E402

COPY = """#version 450
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) readonly buffer S { float s[]; };
layout(std430, set = 0, binding = 1) writeonly buffer D { float d[]; };
layout(push_constant) uniform PC { uint n; } pc;
void main() { uint i = gl_GlobalInvocationID.x; if (i < pc.n) d[i] = s[i]; }
"""
"""The read-back by a copy kernel: the first ``n`` floats of the buffer into the staging buffer."""

FUSED = """#version 450
layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) buffer Y { float y[]; };
layout(std430, set = 0, binding = 1) writeonly buffer D { float d[]; };
layout(push_constant) uniform PC { uint n; } pc;
void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i < pc.n) { float v = y[i] + 1.0; y[i] = v; if (i == 0u) d[0] = v; }
}
"""
"""INC that also writes its first float to the staging buffer: a read-back with no copy at all."""


def build(folder: Path) -> Path:
    program = folder / "round-trip-floor"
    command = [
        *vulkan_ref.c_compiler(),
        "-O2",
        "-std=c11",
        "-Wall",
        "-Wno-unused-function",  # vulkan_ref.c's helpers of the bench's own cases
        f"-I{vulkan_ref.vulkan_include()}",
        f"-I{vulkan_ref.SOURCE.parent}",
        str(ROOT / "scripts" / "round-trip-floor.c"),
        "-o",
        str(program),
        "-ldl",
    ]
    subprocess.run(command, check=True)
    for name, spirv in (
        ("inc", kernels.inc()),
        ("add", kernels.add_vec4()),
        ("copy", compile_glsl(COPY)),
        ("fused", compile_glsl(FUSED)),
    ):
        (folder / f"{name}.spv").write_bytes(spirv)
    return program


def show(lines: list[dict]) -> None:
    header = f"{'variant':64s} {'min':>7s} {'median':>7s} {'p99':>7s} {'max':>8s}   medians of the phases (us)"
    for line in lines:
        if "info" in line:
            print(line["info"])
        elif "work" in line:
            if header:
                print(header)
                header = ""
            name = f"{line['work']}, {line['wait']}" + ("" if line["opening_barrier"] else ", no opening barrier")
            name += "" if line["end"] == "none" else f", ends: {line['end']}"
            name += ", timestamps" if line["timestamps"] else ""
            phases = f"record {line['record']:.2f}  submit {line['submit']:.2f}  wait {line['wait_us']:.2f}"
            if line["timestamps"]:
                phases += (
                    f"  | submit->GPU start {line['submit_to_gpu_start']:.2f}  GPU {line['gpu']:.2f}"
                    f"  GPU end->seen {line['gpu_end_to_seen']:.2f}"
                )
            spread = f"{line['min']:7.2f} {line['median']:7.2f} {line['p99']:7.2f} {line['max']:8.2f}"
            print(f"{name:64s} {spread}   {phases}{'' if line['correct'] else '  WRONG'}")
        elif "add" in line:
            print(
                f"add on {line['add'] >> 20} MiB arrays in memory type {line['memory_type']}: "
                f"{line['best_gbs']} GB/s best, {line['median_gbs']} median"
            )
        elif "gaps" in line:
            pace = f" every {line['pace_us']:.0f} us" if line["pace_us"] else ""
            print(
                f"{line['batches']} batches of c = a + b on {line['floats']} floats, {line['gaps']}{pace}, ends: "
                f"{line['end']}: GPU idle between batches us min {line['gap_min']:.2f} median {line['gap_median']:.2f}"
                f" p90 {line['gap_p90']:.2f} max {line['gap_max']:.2f}; a batch {line['batch_gpu_median']:.1f} us;"
                f" vkQueueSubmit {line['submit_call_median']:.1f} us{'' if line['correct'] else '  WRONG'}"
            )
        elif "host_read" in line:
            print(f"host read of {line['host_read']} bytes of mappable device memory: {line['median_us']} us median")


def json_lines(proc: subprocess.CompletedProcess, keep: str | None) -> list[dict]:
    """The program's JSON lines (its stderr passed on), also written to the file ``keep`` where one is named."""
    sys.stderr.write(proc.stderr)
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    if keep:
        Path(keep).write_text("".join(json.dumps(line) + "\n" for line in lines))
    return lines


def _multiple_of_4(text: str) -> int:
    value = int(text)
    if value < 4 or value % 4:
        raise argparse.ArgumentTypeError(f"{text} is not a positive multiple of 4 (the kernel adds vec4s)")
    return value


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trips", type=int, default=3000, help="timed round trips per variant (default 3000)")
    parser.add_argument("--device", default="", help="the device's name (default: the first)")
    parser.add_argument("--cpu", type=int, help="pin the program to this CPU")
    parser.add_argument("--memory", action="store_true", help="memory types and host reads instead of round trips")
    parser.add_argument(
        "--gaps",
        type=_multiple_of_4,
        metavar="FLOATS",
        help="the GPU's idle time between back-to-back batches of c = a + b on FLOATS floats (a multiple of 4)",
    )
    parser.add_argument("--json", metavar="FILE", help="write the program's JSON lines to FILE")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="vkbackend-round-trip-floor-") as tmp:
        program = build(Path(tmp))
        mode = ["memory"] if args.memory else ["gaps", str(args.gaps)] if args.gaps is not None else []
        command = [str(program), tmp, args.device, str(args.trips), *mode]
        pin = None if args.cpu is None else (lambda: os.sched_setaffinity(0, {args.cpu}))
        proc = subprocess.run(command, capture_output=True, text=True, preexec_fn=pin, check=False)
    show(json_lines(proc, args.json))
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
