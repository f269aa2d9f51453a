"""``python -m vkbackend bench --quick`` runs end to end (on lavapipe in CI) and every case checks out.

Nothing here is about speed: the figures only have to exist, be positive and carry their case's unit (and, for the
round-trip cases, be ordered min <= median <= p99 <= max).
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys
from pathlib import Path

import pytest
from _bench import require_c_reference, run_bench

from vkbackend.bench import child, vulkan_ref
from vkbackend.bench.report import bar_labels, plot, table
from vkbackend.bench.spec import CASE_BY_NAME, CASES, IMPLS, OURS, ROUND_TRIPS, Record, Sizes, select, spread
from vkbackend.bench.units import binary, quantity, rescale

UNITS = {case.name: case.unit for case in CASES}
FIELDS = {"case", "impl", "value", "unit", "correct"}
SPREAD = {"min", "p99", "max"}


@pytest.fixture(scope="module")
def quick_run(device, tmp_path_factory):
    """One ``--quick`` run in a fresh process (inheriting the suite's validation settings): its exit status,
    output and JSON records."""
    return run_bench(["--quick"], tmp_path_factory.mktemp("bench") / "bench.json", timeout_s=600)


def test_quick_bench_exits_cleanly(quick_run):
    proc, records = quick_run
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    assert records is not None
    for case in CASES:  # the table names every case
        assert case.name in proc.stdout


def assert_well_formed(records: list) -> None:
    """The documented shape: every record's fields, unit and a positive figure; a round-trip case's record also its
    spread, in order."""
    assert isinstance(records, list) and records
    for rec in records:
        assert set(rec) == FIELDS | (SPREAD if rec["case"] in ROUND_TRIPS else set()), rec
        assert rec["case"] in UNITS and rec["impl"] in IMPLS
        assert rec["unit"] == UNITS[rec["case"]]
        assert isinstance(rec["correct"], bool)
        assert isinstance(rec["value"], float) and math.isfinite(rec["value"]) and rec["value"] > 0, rec
        if rec["case"] in ROUND_TRIPS:
            assert all(isinstance(rec[k], float) for k in SPREAD), rec
            assert 0 < rec["min"] <= rec["value"] <= rec["p99"] <= rec["max"], rec
    assert len({(r["case"], r["impl"]) for r in records}) == len(records), "one record per case and impl"


def test_records_have_the_documented_shape(quick_run):
    _, records = quick_run
    assert_well_formed(records)


def test_every_case_of_ours_ran_and_is_correct(quick_run):
    _, records = quick_run
    ours = {r["case"]: r for r in records if r["impl"] == OURS}
    assert set(ours) == set(UNITS)
    wrong = [r for r in records if not r["correct"]]
    assert not wrong, f"correctness checks failed: {wrong}"


def test_the_c_reference_ran_beside_ours(quick_run):
    """Where a C compiler and the Vulkan headers are found (here: cc and libvulkan-dev), the same command runs the
    vulkan-c peer: its checked figures are in the same JSON, and the table has its column and its note."""
    require_c_reference()
    proc, records = quick_run
    ours = {r["case"]: r for r in records if r["impl"] == vulkan_ref.IMPL}
    assert sorted(ours) == sorted(vulkan_ref.CASE_NAMES), proc.stderr
    assert all(r["correct"] for r in ours.values()), ours
    assert f"ours/{vulkan_ref.IMPL}" in proc.stdout and vulkan_ref.NOTE in proc.stdout


@pytest.fixture(scope="module")
def round_trip_run(device, tmp_path_factory):
    """``--quick --cases`` with the three round-trip cases, comma-separated."""
    return run_bench(
        ["--quick", "--cases", ",".join(ROUND_TRIPS)], tmp_path_factory.mktemp("bench") / "rt.json", timeout_s=300
    )


def test_cases_runs_only_the_round_trips(round_trip_run):
    """Ours and (where it builds) the C reference run exactly the cases named, each correct, with its spread; the
    table has a median and a p99 row for each."""
    proc, records = round_trip_run
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    assert_well_formed(records)
    assert {r["case"] for r in records} == set(ROUND_TRIPS)
    assert sorted(r["case"] for r in records if r["impl"] == OURS) == sorted(ROUND_TRIPS)
    assert all(r["correct"] for r in records), records
    for name in ROUND_TRIPS:
        assert f"{name} median" in proc.stdout and f"{name} p99" in proc.stdout
    rows = {line.split()[0] for line in proc.stdout.splitlines() if line.split()}
    assert not rows & {case.name for case in CASES if case.name not in ROUND_TRIPS}, proc.stdout


def test_the_c_reference_ran_the_round_trips(round_trip_run):
    require_c_reference()
    proc, records = round_trip_run
    assert sorted(r["case"] for r in records if r["impl"] == vulkan_ref.IMPL) == sorted(ROUND_TRIPS), proc.stderr


def test_select_reads_names_and_lists():
    assert select(None) == tuple(UNITS)
    assert select(["readback_small,sync_idle", "launch_chain"]) == ("launch_chain", "sync_idle", "readback_small")
    with pytest.raises(ValueError, match="unknown case 'nope'"):
        select(["sync_idle,nope"])
    with pytest.raises(ValueError):
        select([","])


def test_spread_by_nearest_rank():
    assert spread([5.0, 1.0, 3.0, 2.0]) == (1.0, 2.0, 5.0, 5.0)  # the median of an even count: the lower middle
    samples = [float(i) for i in range(1, 201)]
    assert spread(samples) == (1.0, 100.0, 198.0, 200.0)
    rec = Record.of_round_trips("launch_sync", OURS, samples, True)
    assert (rec.min, rec.value, rec.p99, rec.max) == (1.0, 100.0, 198.0, 200.0)
    assert rec.to_json() == {
        "case": "launch_sync",
        "impl": OURS,
        "value": 100.0,
        "unit": "us",
        "correct": True,
        "min": 1.0,
        "p99": 198.0,
        "max": 200.0,
    }
    assert Record.from_json(rec.to_json()) == rec
    failed = Record.of_round_trips("sync_idle", OURS, [], True)
    assert failed.to_json() == {
        "case": "sync_idle",
        "impl": OURS,
        "value": None,
        "unit": "us",
        "correct": False,
        "min": None,
        "p99": None,
        "max": None,
    }


def test_table_and_plot_from_records(tmp_path):
    """The report handles missing peers, a failed case, a peer figure and a round-trip case, without a device."""
    records = [
        Record.of("launch_chain", OURS, 3.0, True),
        Record.of("launch_chain", "torch", 9.0, True),
        Record.of("add_bw", OURS, 3500.0, True),
        Record.of("add_bw", "torch", 4200.0, True),
        Record.of_spread("launch_sync", OURS, (10.0, 20.0, 40.0, 80.0), True),
        Record.of_spread("launch_sync", "torch", (5.0, 10.0, 80.0, 90.0), True),
        Record.of("upload", OURS, None, False),
    ]
    text = table(records)
    assert "0.333 (3x faster)" in text and "0.833 (1.2x slower)" in text and "FAILED" in text
    assert any(line.split()[:2] == ["launch_sync", "median"] and "2 (2x slower)" in line for line in text.splitlines())
    assert any(line.split()[:2] == ["launch_sync", "p99"] and "0.5 (2x faster)" in line for line in text.splitlines())
    assert records[-1].to_json() == {"case": "upload", "impl": OURS, "value": None, "unit": "GB/s", "correct": False}
    why_not = plot(records, tmp_path / "p.png", "test")
    if why_not is None:
        assert (tmp_path / "p.png").stat().st_size > 0
    else:
        assert "matplotlib" in why_not


def test_the_plot_labels_carry_the_tables_ratios():
    """A peer a little ahead: the table's 0.969 and the plot's label agree (not "1x worse")."""
    records = [
        Record.of("add_bw", OURS, 969.0, True),
        Record.of("add_bw", "vulkan-c", 1000.0, True),
        Record.of("launch_chain", OURS, 3.0, True),
        Record.of("launch_chain", "torch", 9.0, True),
    ]
    text = table(records)
    assert "0.969 (1.03x slower)" in text and "0.333 (3x faster)" in text
    (_, _, ours), (_, _, peer) = bar_labels(records, CASE_BY_NAME["add_bw"])
    assert ours == OURS and peer.splitlines() == ["vulkan-c", "ours/vulkan-c 0.969", "1.03x slower"]
    ((_, _, torch),) = bar_labels(records, CASE_BY_NAME["launch_chain"])[1:]
    assert torch.splitlines()[1:] == ["ours/torch 0.333", "3x faster"]


def test_the_plot_draws_figures_on_linear_axes_and_the_speedups_on_one_axis():
    pytest.importorskip("matplotlib")
    from vkbackend.bench.report import figure

    records = [Record.of("add_bw", OURS, 969.0, True), Record.of("add_bw", "vulkan-c", 1000.0, True)]
    fig = figure(records, "test", cases=[CASE_BY_NAME["add_bw"]])
    panel, speedups = fig.axes
    assert panel.get_yscale() == "linear" and panel.get_ylim()[0] == 0
    assert [t.get_text() for t in panel.get_xticklabels()][1].endswith("1.03x slower")
    assert speedups.get_xscale() == "log" and [t.get_text() for t in speedups.texts] == ["1.03x slower"]


def test_units_are_chosen_per_figure():
    assert quantity(0.001276, "TFLOP/s") == "1.28 GFLOP/s"
    assert quantity(0.1452, "GFLOP/s") == "145 MFLOP/s"
    assert quantity(4292.0, "GB/s") == "4292 GB/s" and quantity(43_600, "us") == "43.6 ms"
    assert quantity(0.5, "images/s") == "0.5 images/s"  # no ladder: as it is
    assert rescale([0.313, 0.02], "us") == (1000.0, "ns")
    assert binary(64 << 10, " floats") == "64 Ki floats" and binary(128 << 20, "B") == "128 MiB"
    assert binary(512, "B") == "512 B" and binary(256, " floats") == "256 floats"
    assert "64 Ki float32 (256 KiB) per array" in dataclasses.replace(Sizes.quick(), elems=64 << 10).describe()


def test_the_table_rescales_each_row_and_the_json_keeps_the_unit():
    records = [Record.of("alloc_release", OURS, 0.25, True), Record.of("alloc_release", "torch", 0.5, True)]
    (row,) = [line.split() for line in table(records).splitlines() if line.startswith("alloc_release")]
    assert row[:5] == ["alloc_release", "ns", "lower", "250", "500"]
    assert records[0].to_json()["unit"] == "us" and records[0].to_json()["value"] == 0.25


PROBE = """import os, sys, vkbackend
from vkbackend.bench.child import emit
emit(pythonpath=os.environ.get("PYTHONPATH"), package=vkbackend.__file__)
"""


def test_a_child_inherits_the_environment_as_it_is(tmp_path, monkeypatch):
    """The package root reaches the child's sys.path, not its PYTHONPATH, which every program it starts (a
    glslangValidator of another Python, say) would inherit."""
    (tmp_path / "envprobe.py").write_text(PROBE)
    # what the suite's own PYTHONPATH holds (where cffi or numpy were installed, say) stays on it
    inherited = os.environ.get("PYTHONPATH")
    pythonpath = os.pathsep.join([str(tmp_path), *([inherited] if inherited else [])])
    monkeypatch.setenv("PYTHONPATH", pythonpath)
    monkeypatch.chdir(tmp_path)
    (line,) = child.run_module("envprobe", []).lines
    assert line["pythonpath"] == pythonpath
    assert Path(line["package"]).resolve().parent == Path(vkbackend_root(), "vkbackend")
    if inherited:
        monkeypatch.setenv("PYTHONPATH", inherited)
    else:
        monkeypatch.delenv("PYTHONPATH")
    (line,) = child.run_module("envprobe", []).lines  # found in the working folder, as by python -m
    assert line["pythonpath"] == inherited


def vkbackend_root() -> Path:
    return Path(child.__file__).resolve().parents[2]


def test_a_long_child_reports_progress():
    seen: list[float] = []
    result = child.run_command(
        [sys.executable, "-c", "import time; time.sleep(1.0)"], progress=seen.append, every_s=0.3
    )
    assert result.ok and len(seen) >= 2 and seen == sorted(seen) and 0 < seen[0] < 1.0
    late = child.run_command([sys.executable, "-c", "import time; time.sleep(30)"], timeout_s=0.5)
    assert late.returncode == -1 and "did not finish within 0.5 s" in late.error
