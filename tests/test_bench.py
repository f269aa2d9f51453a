"""``python -m vkbackend bench --quick`` runs end to end (on lavapipe in CI) and every case checks out.

Nothing here is about speed: the figures only have to exist, be positive and carry their case's unit.
"""
from __future__ import annotations

import math

import pytest
from _bench import require_c_reference, run_bench

from vkbackend.bench import vulkan_ref
from vkbackend.bench.report import plot, table
from vkbackend.bench.spec import CASES, IMPLS, OURS, Record

UNITS = {case.name: case.unit for case in CASES}


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


def test_records_have_the_documented_shape(quick_run):
    _, records = quick_run
    assert isinstance(records, list) and records
    for rec in records:
        assert set(rec) == {"case", "impl", "value", "unit", "correct"}, rec
        assert rec["case"] in UNITS and rec["impl"] in IMPLS
        assert rec["unit"] == UNITS[rec["case"]]
        assert isinstance(rec["correct"], bool)
        assert isinstance(rec["value"], float) and math.isfinite(rec["value"]) and rec["value"] > 0, rec
    assert len({(r["case"], r["impl"]) for r in records}) == len(records), "one record per case and impl"


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


def test_table_and_plot_from_records(tmp_path):
    """The report handles missing peers, a failed case and a peer figure, without a device."""
    records = [Record.of("launch_chain", OURS, 3.0, True), Record.of("launch_chain", "torch", 9.0, True),
               Record.of("add_bw", OURS, 3500.0, True), Record.of("add_bw", "torch", 4200.0, True),
               Record.of("upload", OURS, None, False)]
    text = table(records)
    assert "0.333 better" in text and "0.833 worse" in text and "FAILED" in text
    assert records[-1].to_json() == {"case": "upload", "impl": OURS, "value": None, "unit": "GB/s", "correct": False}
    why_not = plot(records, tmp_path / "p.png", "test")
    if why_not is None:
        assert (tmp_path / "p.png").stat().st_size > 0
    else:
        assert "matplotlib" in why_not
