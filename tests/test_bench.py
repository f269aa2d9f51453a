"""``python -m vkbackend bench --quick`` runs end to end (on lavapipe in CI) and every case checks out.

Nothing here is about speed: the figures only have to exist, be positive and carry their case's unit (and, for the
round-trip cases, be ordered min <= median <= p99 <= max).
"""
from __future__ import annotations

import math

import pytest
from _bench import require_c_reference, run_bench

from vkbackend.bench import vulkan_ref
from vkbackend.bench.report import plot, table
from vkbackend.bench.spec import CASES, IMPLS, OURS, ROUND_TRIPS, Record, select, spread

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
    return run_bench(["--quick", "--cases", ",".join(ROUND_TRIPS)], tmp_path_factory.mktemp("bench") / "rt.json",
                     timeout_s=300)


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
    assert rec.to_json() == {"case": "launch_sync", "impl": OURS, "value": 100.0, "unit": "us", "correct": True,
                             "min": 1.0, "p99": 198.0, "max": 200.0}
    assert Record.from_json(rec.to_json()) == rec
    failed = Record.of_round_trips("sync_idle", OURS, [], True)
    assert failed.to_json() == {"case": "sync_idle", "impl": OURS, "value": None, "unit": "us", "correct": False,
                                "min": None, "p99": None, "max": None}


def test_table_and_plot_from_records(tmp_path):
    """The report handles missing peers, a failed case, a peer figure and a round-trip case, without a device."""
    records = [Record.of("launch_chain", OURS, 3.0, True), Record.of("launch_chain", "torch", 9.0, True),
               Record.of("add_bw", OURS, 3500.0, True), Record.of("add_bw", "torch", 4200.0, True),
               Record.of_spread("launch_sync", OURS, (10.0, 20.0, 40.0, 80.0), True),
               Record.of_spread("launch_sync", "torch", (5.0, 10.0, 80.0, 90.0), True),
               Record.of("upload", OURS, None, False)]
    text = table(records)
    assert "0.333 better" in text and "0.833 worse" in text and "FAILED" in text
    assert any(line.split()[:2] == ["launch_sync", "median"] and "2 worse" in line for line in text.splitlines())
    assert any(line.split()[:2] == ["launch_sync", "p99"] and "0.5 better" in line for line in text.splitlines())
    assert records[-1].to_json() == {"case": "upload", "impl": OURS, "value": None, "unit": "GB/s", "correct": False}
    why_not = plot(records, tmp_path / "p.png", "test")
    if why_not is None:
        assert (tmp_path / "p.png").stat().st_size > 0
    else:
        assert "matplotlib" in why_not
