"""``python -m vkbackend bench --tinygrad``: the driver. It finds the implementations that work here, runs every
(implementation, workload) in a child process of its own (``child``) with a time limit, checks that the checksums
agree, and prints the table (plus the MLP step's per-kernel table), the JSON and the plot.
"""

from __future__ import annotations

import ctypes.util
import importlib.util
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from vkbackend.bench import report
from vkbackend.bench.child import run_module
from vkbackend.bench.tinygrad.spec import (
    CASE_BY_NAME,
    CASES,
    IMPLS,
    KERNEL_CASE,
    OURS,
    WORKLOADS,
    TgRecord,
    TgSizes,
    close,
)
from vkbackend.bench.units import duration

CUDA_LIBS = Path("/usr/local/cuda/targets/x86_64-linux/lib")
CHILD = "vkbackend.bench.tinygrad.child"
NOTES = (
    "figures: median [min-max] over the timed runs; checksums must agree within each case's tolerance",
    "tinygrad devices: jitted steps and operations (TinyJit)",
)
TORCH_NOTE = "torch: eager PyTorch, TF32 off (on the CPU only with --quick)"
NO_TINYGRAD = (
    "tinygrad is not installed: pip install '.[tinygrad]' in a checkout (pip install 'vkbackend[tinygrad]' "
    "elsewhere), or bash scripts/setup.sh tinygrad"
)
PROGRESS_EVERY_S = 30.0
"""How often a child that is still running is reported on stderr."""


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def child_env(impl: str, device: int | None = None) -> dict[str, str]:
    """The child's environment additions: ``DEV``; for VK, ``VKBACKEND_DEVICE_IDS`` when a ``device`` was asked for
    (tinygrad's VK is the first device vkbackend opens); tinygrad's compile pool off on a machine of few cores
    (spawning it costs more than it saves there); CUDA's runtime-compiler directory when the loader would not find
    nvrtc."""
    env = {"DEV": impl} if impl != "torch" else {}
    if impl == OURS and device is not None:
        env["VKBACKEND_DEVICE_IDS"] = str(device)
    if (os.cpu_count() or 1) <= 4 and "PARALLEL" not in os.environ:
        env["PARALLEL"] = "0"
    if impl == "CUDA" and CUDA_LIBS.is_dir() and ctypes.util.find_library("nvrtc") is None:
        env["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, [str(CUDA_LIBS), os.environ.get("LD_LIBRARY_PATH")]))
    return env


def candidates() -> list[str]:
    """VK and CUDA; the CPU where CUDA does not work (checked by ``discover``); torch where importable."""
    return ["VK", "CUDA", "CPU"] + (["torch"] if importable("torch") else [])


def importable(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def discover(quick: bool, timeout_s: float, only: Sequence[str] | None = None, device: int | None = None) -> list[str]:
    """The implementations (of ``only``, when given) that open and run a tiny kernel here, each probed in a child
    process (VK on ``device``, when given)."""
    found: list[str] = []
    for impl in candidates():
        if only and impl not in only:
            continue
        if impl == "CPU" and "CUDA" in found:
            continue  # tinygrad's CPU device is the reference only where no GPU device is
        _log(f"{impl}: probing")
        result = run_module(
            CHILD, [impl, "--probe"] + (["--quick"] if quick else []), child_env(impl, device), timeout_s
        )
        info = [line["info"] for line in result.lines if "info" in line]
        skip = [line["skip"] for line in result.lines if "skip" in line]
        if result.ok and info:
            _log(info[0])
            found.append(impl)
        else:
            _log(f"{impl}: not used, {skip[0] if skip else result.error or 'the probe printed nothing'}")
    return found


def run_workload(
    impl: str,
    workload: str,
    sizes: TgSizes,
    quick: bool,
    timeout_s: float,
    device: int | None = None,
    progress: Callable[[float], None] | None = None,
) -> list[TgRecord]:
    """The records of one child; a failed child gives failed records of its cases (with the reason). ``progress``
    is called with the seconds elapsed every ``PROGRESS_EVERY_S`` while the child runs."""
    args = [impl, workload, "--sizes", json.dumps(sizes.to_json())] + (["--quick"] if quick else [])
    result = run_module(CHILD, args, child_env(impl, device), timeout_s, progress, PROGRESS_EVERY_S)
    records = [TgRecord.from_json(line) for line in result.lines if "case" in line]
    skips = [line["skip"] for line in result.lines if "skip" in line]
    errors = [line["error"] for line in result.lines if "error" in line] + ([result.error] if result.error else [])
    if not records and not skips and not errors:
        errors.append("the child printed no records")
    if skips and not errors:
        _log(f"{impl} {workload}: skipped, {skips[0]}")
        return records
    if errors:
        _log(f"{impl} {workload}: FAILED: {'; '.join(errors)}")
        done = {r.case for r in records}
        records += [
            TgRecord.failed(case, impl, "; ".join(errors))
            for case in CASES
            if case.workload == workload and case.name not in done
        ]
        for r in records:
            r.correct = False
    return records


def check_agreement(records: Sequence[TgRecord]) -> list[str]:
    """Compare each case's checksums with the reference (CUDA, else CPU, else torch, else VK): a record that
    disagrees becomes incorrect. Returns one line per disagreement."""
    problems = []
    for case in CASES:
        ran = {r.impl: r for r in records if r.case == case.name and r.checksum is not None and r.value is not None}
        ref = next((ran[impl] for impl in ("CUDA", "CPU", "torch", OURS) if impl in ran), None)
        for r in ran.values():
            if ref is not None and r is not ref and not close(r.checksum, ref.checksum, case.rtol):
                r.correct = False
                problems.append(
                    f"checksum mismatch in {case.name}: {r.impl} {r.checksum:.9g} vs {ref.impl} "
                    f"{ref.checksum:.9g} (relative tolerance {case.rtol:g})"
                )
    return problems


def kernel_table(records: Sequence[TgRecord], ours: str = OURS) -> str:
    """The MLP step's kernels on ``ours`` beside the first other tinygrad device, matched by their place in the
    jitted step (the same schedule on every device; names differ where the devices' optimisations differ)."""
    by_impl: dict[str, list[TgRecord]] = {}
    for r in records:
        if r.case == KERNEL_CASE.name and r.value is not None:
            by_impl.setdefault(r.impl, []).append(r)
    mine = sorted(by_impl.get(ours, []), key=lambda r: r.index)
    peer = next((impl for impl in IMPLS if impl != ours and impl in by_impl), None)
    if not mine:
        return ""
    theirs = {r.index: r for r in by_impl.get(peer, [])} if peer else {}
    rows = [
        ["#", f"kernel ({ours})", f"{ours} us"] + ([f"{peer} us", f"{ours}/{peer}", f"kernel ({peer})"] if peer else [])
    ]
    ratios = []
    for r in mine:
        row = [str(r.index), r.kernel or "?", f"{r.value:.4g}"]
        other = theirs.get(r.index)
        if peer:
            value = r.value / other.value if other and other.value else None
            if value is not None:
                ratios.append((value, r))
            row += [
                f"{other.value:.4g}" if other else "-",
                f"{value:.3g}" if value else "-",
                other.kernel or "?" if other else "-",
            ]
        rows.append(row)
    title = f"MLP step, GPU time per kernel ({KERNEL_CASE.unit}, median of the timed passes)"
    lines = [title] + report.columns(rows, 2)
    total = sum(r.value for r in mine)
    lines.append(f"sum of kernels on {ours}: {total:.4g} us over {len(mine)} kernels")
    if ratios:
        worst, at = max(ratios, key=lambda x: x[0])
        counts = "" if len(mine) == len(theirs) else f"; kernel counts differ ({len(mine)} vs {len(theirs)})"
        lines.append(
            f"{ours}/{peer} per kernel: median {statistics.median(v for v, _ in ratios):.3g}, worst "
            f"{worst:.3g} (#{at.index} {at.kernel}){counts}"
        )
    return "\n".join(lines)


def select(cases: Sequence[str] | None) -> list[str]:
    """The workloads to run: all, or those named (a workload or one of its cases' names)."""
    if not cases:
        return list(WORKLOADS)
    chosen = []
    for name in cases:
        workload = name if name in WORKLOADS else CASE_BY_NAME[name].workload if name in CASE_BY_NAME else None
        if workload is None:
            raise ValueError(f"unknown case {name!r}: choose from {', '.join(WORKLOADS + tuple(CASE_BY_NAME))}")
        if workload not in chosen:
            chosen.append(workload)
    return chosen


def run(
    json_path: str | None = None,
    plot_path: str | None = None,
    quick: bool = False,
    cases: Sequence[str] | None = None,
    timeout_s: float | None = None,
    impls: Sequence[str] | None = None,
    device: int | None = None,
) -> int:
    """Run the selected workloads on every implementation that works here; print, write JSON and plot.

    ``impls`` limits the implementations tried (VK is always needed); ``device`` is the Vulkan device VK runs on
    (default: the first). Progress goes to stderr, the table to stdout (to stderr when the JSON goes to stdout,
    ``json_path`` "-"). Returns 0 when every workload ran on every implementation found (or was skipped by it with a
    reason) and every checksum agrees; 1 when not; 2 when tinygrad is not installed, VK does not work or the
    arguments are wrong.
    """
    sizes = TgSizes.quick() if quick else TgSizes.full()
    try:
        workloads = select(cases)
    except ValueError as error:
        _log(f"vkbackend bench --tinygrad: {error}")
        return 2
    if not importable("tinygrad"):  # else every probe child would fail with the same ImportError
        _log(f"vkbackend bench --tinygrad: {NO_TINYGRAD}")
        return 2
    problem = device_problem(device)
    if problem:
        _log(f"vkbackend bench --tinygrad: {problem}")
        return 2
    timeout_s = timeout_s or (300.0 if quick else 1200.0)
    impls = discover(quick, min(timeout_s, 300.0), [OURS, *impls] if impls else None, device)
    if OURS not in impls:
        _log("vkbackend bench --tinygrad: tinygrad's VK device does not work here (the VK line above says why)")
        return 2
    records = run_all(impls, workloads, sizes, quick, timeout_s, device)
    problems = check_agreement(records)
    shown = [case for case in CASES if case.workload in workloads]
    on = "" if device is None else f" on device {device}"
    title = f"vkbackend bench --tinygrad{' --quick' if quick else ''}{on}: {', '.join(impls)}"
    out = sys.stderr if json_path == "-" else sys.stdout
    print(f"{title}\n{sizes.describe()}\n", file=out)
    notes = NOTES + ((TORCH_NOTE,) if "torch" in impls else ())
    print(
        report.table(
            records, notes, shown, [impl for impl in IMPLS if impl in impls], ours_label=OURS, labels=sizes.labels()
        ),
        file=out,
    )
    kernels = kernel_table(records)
    if kernels:
        print(f"\n{kernels}", file=out)
    for line in problems:
        print(line, file=out)
    if json_path:
        report.write_json(records, json_path)
        if json_path != "-":
            _log(f"wrote {json_path}")
    status = 0
    if plot_path:
        why_not = report.plot(
            [r for r in records if r.case != KERNEL_CASE.name],
            plot_path,
            f"{title}\n{sizes.describe()}",
            shown,
            IMPLS,
            ours_label=OURS,
            labels=sizes.labels(),
        )
        if why_not:
            _log(f"vkbackend bench --tinygrad: {why_not}")
            status = 1
        else:
            _log(f"wrote {plot_path}")
    if problems or any(not r.correct for r in records):
        status = 1
    return status


def device_problem(device: int | None) -> str | None:
    """Why VK cannot run on ``device`` (no such Vulkan device), checked here so that the probe need not fail; None
    when it can or none was asked for."""
    if device is None:
        return None
    from vkbackend.discovery import query_physical_devices
    from vkbackend.errors import BackendError

    try:
        count = len(query_physical_devices())
    except BackendError as error:
        return f"cannot open device {device}: {error}"
    if not 0 <= device < count:
        return f"--device {device}: there is no such device ({count} Vulkan device(s) found; python -m vkbackend info)"
    return None


def run_all(
    impls: Sequence[str],
    workloads: Sequence[str],
    sizes: TgSizes,
    quick: bool,
    timeout_s: float,
    device: int | None = None,
) -> list[TgRecord]:
    """Every (workload, implementation) in turn, each announced on stderr when it starts, every
    ``PROGRESS_EVERY_S`` while it runs and when it ends, with the run's elapsed time, so a long run is never silent."""
    records: list[TgRecord] = []
    runs = [(workload, impl) for workload in workloads for impl in impls]
    start = time.perf_counter()
    for n, (workload, impl) in enumerate(runs, 1):
        what = f"[{n}/{len(runs)}] {impl} {sizes.labels().get(workload, workload)}"
        _log(f"{what}: running ({duration(time.perf_counter() - start)} into the run)")
        began = time.perf_counter()
        records += run_workload(
            impl,
            workload,
            sizes,
            quick,
            timeout_s,
            device,
            lambda s, what=what: _log(f"{what}: still running after {duration(s)}"),
        )
        _log(f"{what}: done in {duration(time.perf_counter() - began)}")
    return records
