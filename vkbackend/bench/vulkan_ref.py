"""The raw-Vulkan C reference, the bench's ``vulkan-c`` peer: ``vulkan_ref.c`` built with the machine's C compiler.

It runs the launch, round-trip and transfer cases (launch_chain, launch_independent, sync_idle, launch_sync,
readback_small, add_bw, upload, download) in a C program of its own on the device named like ours, so that our
figures can be read against what a plain Vulkan program gets from the same driver. Like the other peers it runs in
the child ``python -m vkbackend.bench.peers vulkan-c``, which builds the program in a temporary folder, compiles its
kernels (our cases' own, ``kernels.py``) with ``compile_glsl``, writes the input arrays (when an array case runs),
runs the program and checks what it brought back. Building needs a C compiler (``$CC``, else ``cc``) and the Vulkan
headers, looked for where build_vulkan.py looks; without either the peer is skipped with the reason. The program
opens libvulkan.so.1 itself (dlopen), so nothing is linked against it.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from ..discovery import is_known_driver_message
from . import kernels
from .cases import CaseError, CaseSet, Plan, Skip
from .child import ChildResult, run_command
from .spec import ROUND_TRIPS, Record, Sizes

IMPL = "vulkan-c"
SOURCE = Path(__file__).with_name("vulkan_ref.c")
CASE_NAMES = (
    "launch_chain",
    "launch_independent",
    "sync_idle",
    "launch_sync",
    "readback_small",
    "add_bw",
    "upload",
    "download",
)
"""In the order the program runs them."""
ARRAY_CASES = ("add_bw", "upload", "download")
"""The cases on the input arrays, which run together."""
TIMEOUT_S = 600
NOTE = (
    f"{IMPL}: raw Vulkan in C (vkbackend/bench/vulkan_ref.c); each launch case is one command buffer and one "
    "submit, launch_chain with a barrier after every dispatch, launch_independent with one per round of the "
    "buffers; add_bw = GPU timestamps around one dispatch, as ours; upload/download = one memcpy and one copy "
    "through a host-visible staging buffer the size of the array; sync_idle = vkQueueWaitIdle with nothing "
    "queued; launch_sync = one dispatch recorded, submitted with a fence, the fence waited for and reset, per "
    "round trip; readback_small = the same with a 4-byte copy to a host-visible staging buffer after the dispatch"
)
"""How the C reference measures, for the report's footnotes."""


def c_compiler() -> list[str]:
    """The C compiler's command line: ``$CC`` (split as a shell would), else ``cc``. Skip when it is not found."""
    command = shlex.split(os.environ.get("CC", "")) or ["cc"]
    if shutil.which(command[0]) is None:
        where = f"$CC ({command[0]!r})" if os.environ.get("CC") else "cc"
        raise Skip(f"no C compiler: {where} was not found (install one, e.g. apt-get install gcc, or set CC)")
    return command


def vulkan_include() -> Path:
    """The folder holding vulkan/vulkan_core.h: $VULKAN_SDK/include, C_INCLUDE_PATH and CPATH, /usr/include,
    /usr/local/include (build_vulkan.py's order). Skip when none has it."""
    candidates = [Path(os.environ["VULKAN_SDK"], "include")] if os.environ.get("VULKAN_SDK") else []
    for var in ("C_INCLUDE_PATH", "CPATH"):
        candidates += [Path(p) for p in os.environ.get(var, "").split(os.pathsep) if p]
    candidates += [Path("/usr/include"), Path("/usr/local/include")]
    for folder in candidates:
        if (folder / "vulkan" / "vulkan_core.h").is_file():
            return folder
    raise Skip(
        "no Vulkan headers (<vulkan/vulkan.h>): install them (Debian/Ubuntu: apt-get install libvulkan-dev) "
        "or set VULKAN_SDK to an SDK that has include/vulkan"
    )


def build(compiler: list[str], include: Path, folder: Path) -> Path:
    """``vulkan_ref.c`` compiled into ``folder``; CaseError with the compiler's messages when it does not build."""
    program = folder / "vulkan_ref"
    command = [
        *compiler,
        "-O2",
        "-std=c11",
        "-Wall",
        "-Wextra",
        f"-I{include}",
        str(SOURCE),
        "-o",
        str(program),
        "-ldl",
    ]  # dlopen: in libc from glibc 2.34 on, in libdl before
    proc = subprocess.run(command, capture_output=True, text=True, errors="replace", timeout=300, check=False)
    if proc.returncode != 0:
        raise CaseError(f"{shlex.join(command)} failed ({proc.returncode}):\n{proc.stderr.strip()[-2000:]}")
    return program


class VulkanRefCases(CaseSet):
    """The C reference on the device named ``device_name`` (else the first), at ``sizes``."""

    impl = IMPL

    def __init__(self, sizes: Sizes, device_name: str | None) -> None:
        self.sizes, self.device_name = sizes, device_name or ""
        self.compiler, self.include = c_compiler(), vulkan_include()

    def plan(self) -> Plan:
        return [(CASE_NAMES, self.reference)]

    def reference(self) -> list[Record]:
        """Build the program, run every case in it (those this run selected) once, and check its results."""
        s = self.sizes
        names = self.selected(CASE_NAMES)
        arrays = any(name in ARRAY_CASES for name in names)
        rng = np.random.default_rng(0)
        a, b = (rng.random(s.elems, dtype=np.float32), rng.random(s.elems, dtype=np.float32)) if arrays else (None,) * 2
        with tempfile.TemporaryDirectory(prefix="vkbackend-vulkan-ref-") as tmp:
            folder = Path(tmp)
            program = build(self.compiler, self.include, folder)
            (folder / "inc.spv").write_bytes(kernels.inc())
            (folder / "add.spv").write_bytes(kernels.add_vec4())
            if a is not None and b is not None:
                a.tofile(folder / "a.f32")
                b.tofile(folder / "b.f32")
            args = [
                s.launches,
                s.buffers,
                s.small_floats,
                s.elems,
                s.reps,
                s.kernel_reps,
                s.warmup_s,
                s.roundtrips,
                s.roundtrip_warmup,
                ",".join(names),
            ]
            result = run_command([str(program), tmp, self.device_name, *map(str, args)], timeout_s=TIMEOUT_S)
            out = folder / "c.f32"
            c = np.fromfile(out, np.float32) if out.exists() else None
        return records_from(result, self.sizes, a, b, c, self.log, names)


def records_from(
    result: ChildResult,
    sizes: Sizes,
    a: np.ndarray | None,
    b: np.ndarray | None,
    c: np.ndarray | None,
    log: Callable[[str], None],
    names: Sequence[str] = CASE_NAMES,
) -> list[Record]:
    """One record per case of ``names`` from the program's JSON lines, logging its info lines and errors.

    A case it printed no line or no time for has no value. add_bw and download are correct when ``c`` (c.f32, as the
    download brought it back) is exactly ``a + b`` over the arrays the program used; the launch and round-trip cases
    and upload carry the program's own check (the buffers' counts, the values read back; the uploaded array read back
    byte for byte). A round-trip case's record has the spread of its round trips (``Record.of_spread``). Any message
    of the validation layer makes every record incorrect, except those the driver's own stack causes in any program
    (``discovery.KNOWN_DRIVER_MESSAGES``).
    """
    cases = {line["case"]: line for line in result.lines if "case" in line}
    n = next((line["arrays"] for line in result.lines if "arrays" in line), 0)
    messages = [
        line["validation"]
        for line in result.lines
        if "validation" in line and not is_known_driver_message(line["validation"])
    ]
    for line in result.lines:
        if "info" in line:
            log(line["info"])
    for message in messages:
        log(f"{IMPL}: validation layer: {message}")
    if result.error:
        log(f"{IMPL}: {result.error}")
    if 0 < n < sizes.elems and any(name in ARRAY_CASES for name in names):
        log(f"{IMPL}: add_bw, upload, download on {n * 4 >> 20} MiB arrays, the most the device can bind")
    summed = a is not None and b is not None and c is not None and n > 0 and np.array_equal(c, a[:n] + b[:n])
    array_gb = n * 4 / 1e9

    def figure(case: str, seconds: float) -> float:
        if case.startswith("launch_"):
            return seconds / sizes.launches * 1e6  # us per launch
        return (3 if case == "add_bw" else 1) * array_gb / seconds  # GB/s, add_bw counting its 3 arrays

    records = []
    for name in names:
        line = cases.get(name, {})
        correct = bool(line.get("correct", summed)) and not messages
        if name in ROUND_TRIPS:
            stats = [line.get(f"{stat}_us") for stat in ("min", "median", "p99", "max")]
            records.append(Record.of_spread(name, IMPL, stats if None not in stats else None, correct))
            continue
        seconds = line.get("seconds")
        records.append(Record.of(name, IMPL, figure(name, seconds) if seconds else None, correct))
    return records
