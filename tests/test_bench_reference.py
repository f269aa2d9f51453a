"""The raw-Vulkan C reference (the bench's ``vulkan-c`` peer) builds, runs on the test device and checks its results.

It runs through the bench's own path (``run_peer``: a child process that builds vulkan_ref.c, runs it and checks what
it brought back), at tiny sizes, under the suite's validation settings, which the program inherits. Nothing here is
about speed. Skipped where no C compiler or no Vulkan headers are found, with the reason.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from _bench import require_c_reference

from vkbackend.bench import vulkan_ref
from vkbackend.bench.child import ChildResult
from vkbackend.bench.peers import run_peer
from vkbackend.bench.spec import CASE_BY_NAME, IMPLS, ROUND_TRIPS, Sizes
from vkbackend.config import validation_enabled
from vkbackend.discovery import is_known_driver_message

# 100 launches over 8 buffers: 4 of them get one launch more, so the shares' check sees both counts.
TINY = Sizes(
    launches=100,
    elems=1 << 12,
    allocs=1,
    reps=2,
    kernel_reps=2,
    warmup_s=0.0,
    buffers=8,
    roundtrips=20,
    roundtrip_warmup=3,
)


@pytest.fixture(scope="module")
def reference(device):
    """The C reference's records and log at TINY sizes, on the test device."""
    require_c_reference()
    log: list[str] = []
    return run_peer(vulkan_ref.IMPL, TINY, device.info.name, log.append), log


def test_every_case_runs_and_is_correct(reference):
    records, log = reference
    assert [r.case for r in records] == list(vulkan_ref.CASE_NAMES), log
    wrong = [r for r in records if not r.correct]
    assert not wrong, f"failed checks: {wrong}\nlog:\n" + "\n".join(log)


def test_records_are_well_formed(reference):
    records, _ = reference
    assert vulkan_ref.IMPL in IMPLS
    for r in records:
        assert r.impl == vulkan_ref.IMPL and r.unit == CASE_BY_NAME[r.case].unit, r
        assert isinstance(r.value, float) and math.isfinite(r.value) and r.value > 0, r
        spread = {"min", "p99", "max"} if r.case in ROUND_TRIPS else set()
        assert set(r.to_json()) == {"case", "impl", "value", "unit", "correct"} | spread
        if spread:
            assert r.min is not None and r.p99 is not None and r.max is not None
            assert 0 < r.min <= r.value <= r.p99 <= r.max, r


def test_only_the_round_trips(device):
    """Given only the round-trip cases, the program runs those alone (the arrays are neither written nor read)."""
    require_c_reference()
    log: list[str] = []
    records = run_peer(vulkan_ref.IMPL, TINY, device.info.name, log.append, only=ROUND_TRIPS)
    assert [r.case for r in records] == list(ROUND_TRIPS), log
    assert all(r.correct for r in records), (records, log)


def test_it_ran_on_our_device_without_validation_messages(reference, device):
    _, log = reference
    assert any(line.startswith(f"{vulkan_ref.IMPL}: {device.info.name} (Vulkan ") for line in log), log
    assert not [line for line in log if "validation layer" in line or "exited with" in line], log


@pytest.mark.skipif(not validation_enabled(), reason="the validation layer is off (VKBACKEND_TEST_NO_VALIDATION)")
def test_a_validation_message_fails_every_case(device, monkeypatch):
    """Best-practices validation always warns about VK_EXT_debug_utils (a debugging extension): that message must
    reach the log and fail the records, as any message of the layer would."""
    require_c_reference()
    monkeypatch.setenv("VK_LAYER_ENABLES", "VK_VALIDATION_FEATURE_ENABLE_BEST_PRACTICES_EXT")
    log: list[str] = []
    records = run_peer(vulkan_ref.IMPL, TINY, device.info.name, log.append)
    assert len(records) == len(vulkan_ref.CASE_NAMES) and not any(r.correct for r in records), records
    assert any(line.startswith(f"{vulkan_ref.IMPL}: validation layer: ") for line in log), log


def test_no_compiler_skips_with_the_reason(monkeypatch):
    monkeypatch.setenv("CC", "/nonexistent/cc")
    log: list[str] = []
    assert run_peer(vulkan_ref.IMPL, TINY, "any", log.append) == []
    assert any("skipped, no C compiler: $CC ('/nonexistent/cc') was not found" in line for line in log), log


def test_a_failed_build_fails_every_case_and_says_why(monkeypatch):
    require_c_reference()
    monkeypatch.setenv("CC", "false")  # a "compiler" that exits 1
    log: list[str] = []
    records = run_peer(vulkan_ref.IMPL, TINY, "any", log.append)
    assert [(r.case, r.value, r.correct) for r in records] == [(c, None, False) for c in vulkan_ref.CASE_NAMES]
    assert any("failed: CaseError: false -O2" in line for line in log), log


def test_the_source_builds_without_warnings():
    compiler, include = require_c_reference()
    proc = subprocess.run(
        [
            *compiler,
            "-fsyntax-only",
            "-std=c11",
            "-Wall",
            "-Wextra",
            "-Wpedantic",
            "-Werror",
            f"-I{include}",
            str(vulkan_ref.SOURCE),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr


def _lines(n: int) -> list[dict]:
    return [
        {"arrays": n},
        {"case": "launch_chain", "seconds": 1e-3, "correct": True},
        {"case": "launch_independent", "seconds": 2e-3, "correct": False},
        {"case": "sync_idle", "min_us": 1.5, "median_us": 2.25, "p99_us": 9.125, "max_us": 30.0, "correct": True},
        {"case": "launch_sync", "min_us": 10.0, "median_us": 20.0, "p99_us": 40.0, "max_us": 80.0, "correct": False},
        {"case": "upload", "seconds": 0.5, "correct": True},
        {"case": "add_bw", "seconds": 0.25},
        {"case": "download", "seconds": 0.5},
    ]


def test_records_from_checks_the_sum_and_keeps_the_programs_checks():
    """No device: the figures come from the seconds over the arrays the program used, add_bw and download are checked
    as c == a + b, the other cases keep the program's own check."""
    n = 1 << 20
    a, b = np.ones(n + 4, np.float32), np.full(n + 4, 2, np.float32)
    result = ChildResult(_lines(n))
    sizes = Sizes(launches=1000, elems=n + 4, allocs=1, reps=1, kernel_reps=1, warmup_s=0)
    log: list[str] = []
    good = {r.case: r for r in vulkan_ref.records_from(result, sizes, a, b, np.full(n, 3, np.float32), log.append)}
    assert log == ["vulkan-c: add_bw, upload, download on 4 MiB arrays, the most the device can bind"]  # n < elems
    assert (good["launch_chain"].value, good["launch_chain"].correct) == (1.0, True)  # us per launch
    assert good["launch_independent"].correct is False  # the program's own check said so
    assert good["add_bw"].value == float(f"{3 * n * 4 / 0.25 / 1e9:.4g}") and good["add_bw"].correct
    assert good["upload"].correct and good["download"].correct
    sync = good["sync_idle"]
    assert (sync.min, sync.value, sync.p99, sync.max, sync.correct) == (1.5, 2.25, 9.125, 30.0, True)
    assert good["launch_sync"].value == 20.0 and good["launch_sync"].correct is False  # the program's own check
    assert (good["readback_small"].value, good["readback_small"].correct) == (None, False)  # no line for it
    c = np.full(n, 3, np.float32)
    c[-1] = 0
    bad = {r.case: r for r in vulkan_ref.records_from(result, sizes, a, b, c, print)}
    assert not bad["add_bw"].correct and not bad["download"].correct and bad["upload"].correct


def test_records_from_a_program_that_died_early():
    log: list[str] = []
    result = ChildResult(_lines(4)[:2], returncode=1, error="vulkan_ref exited with 1: vulkan_ref: boom")
    records = vulkan_ref.records_from(result, TINY, np.ones(8, np.float32), np.ones(8, np.float32), None, log.append)
    assert [(r.value, r.correct) for r in records[1:]] == [(None, False)] * (len(vulkan_ref.CASE_NAMES) - 1)
    assert records[0].correct and "vulkan-c: vulkan_ref exited with 1: vulkan_ref: boom" in log


def test_the_interrupt_probe_runs_every_mode_and_counts_what_each_cpu_took(tmp_path):
    """scripts/interrupt-probe.py, built on round-trip-floor.c: every mode's round trips are timed with the sampler on
    the other CPU or none, and `scan` puts the sampler on each CPU in turn; each line says what the CPUs took."""
    require_c_reference()
    if len(os.sched_getaffinity(0)) < 2 or os.cpu_count() != len(os.sched_getaffinity(0)):
        pytest.skip("the probe pins its two threads to CPUs 0 and 1, and scans every CPU")
    modes = ["fence_poll", "fence_block", "timeline_poll", "resubmit_timeline", "resubmit_memory_poll", "idle"]
    plans = [f"{mode}:{i % 2}:{(i + 1) % 2}" for i, mode in enumerate(modes)] + ["fence_poll:-1:0", "scan"]
    out = tmp_path / "probe.jsonl"
    script = Path(__file__).resolve().parent.parent / "scripts" / "interrupt-probe.py"
    proc = subprocess.run(
        [sys.executable, str(script), "--trips", "20", "--json", str(out), *plans],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines() if '"mode"' in line]
    assert [(line["mode"], line["sampler_cpu"]) for line in lines[: len(plans) - 1]] == [
        (plan.split(":")[0], int(plan.split(":")[1])) for plan in plans[:-1]
    ]
    assert sorted(line["sampler_cpu"] for line in lines[len(plans) - 1 :]) == list(range(os.cpu_count() or 0))
    for line in lines:
        assert 0 < line["min"] <= line["median"] <= line["p99"] <= line["max"], line
        assert line["sampler_gap_us_per_trip"] >= 0 and isinstance(line["interrupts_per_trip"], dict)


def _round_trip_floor(tmp_path, *args: str) -> list[dict]:
    """scripts/round-trip-floor.py with ``args``: the JSON lines of its program, after it exited cleanly."""
    require_c_reference()
    out = tmp_path / "floor.jsonl"
    script = Path(__file__).resolve().parent.parent / "scripts" / "round-trip-floor.py"
    proc = subprocess.run(
        [sys.executable, str(script), *args, "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return [json.loads(line) for line in out.read_text().splitlines()]


def test_the_round_trip_floor_runs_every_variant_and_checks_its_reads(tmp_path):
    """scripts/round-trip-floor.py, built on vulkan_ref.c: every variant runs, each read-back brought one more than
    the one before, and the validation layer (which the program inherits from the suite) says nothing but what the
    driver's own stack says in any program (``discovery.KNOWN_DRIVER_MESSAGES``, as the bench's C reference)."""
    lines = _round_trip_floor(tmp_path, "--trips", "5")
    variants = [line for line in lines if "work" in line]
    assert {"empty", "launch", "read_copy", "read_kernel", "read_fused"} <= {line["work"] for line in variants}
    assert all(line["correct"] for line in variants), variants
    messages = [line["validation"] for line in lines if "validation" in line]
    assert [m for m in messages if not is_known_driver_message(m)] == []


def test_the_round_trip_floor_times_the_gaps_between_batches(tmp_path):
    """scripts/round-trip-floor.py --gaps: every way of queueing back-to-back batches runs, each batch's sum and the
    completion marker's last value are right, and the validation layer (synchronization validation included) says
    nothing but the driver stack's own messages; a size that is not a multiple of 4 is refused."""
    lines = _round_trip_floor(tmp_path, "--gaps", "4096")
    variants = [line for line in lines if "gaps" in line]
    ways = {(line["gaps"], line["end"]) for line in variants}
    assert len(ways) == len(variants) == 9, ways
    assert {way for way, _ in ways} == {
        "one_command_buffer",
        "submits",
        "submits_each_fenced",
        "submits_paced",
        "one_submit_many_command_buffers",
    }
    for line in variants:
        assert line["correct"], line
        assert line["batch_gpu_median"] > 0 and line["floats"] == 4096, line
    messages = [line["validation"] for line in lines if "validation" in line]
    assert [m for m in messages if not is_known_driver_message(m)] == []
    script = Path(__file__).resolve().parent.parent / "scripts" / "round-trip-floor.py"
    refused = subprocess.run([sys.executable, str(script), "--gaps", "6"], capture_output=True, text=True, check=False)
    assert refused.returncode == 2 and "not a positive multiple of 4" in refused.stderr, refused.stderr
