"""``python -m vkbackend bench --tinygrad --quick``: every workload runs on tinygrad's VK device and on its CUDA device
where that works, else its CPU device (and on PyTorch where torch is installed), and every case's checksums agree.
Nothing here is about speed.

Skipped without tinygrad 0.14.0, without a Vulkan device, and without clang (tinygrad's CPU device compiles with it).
"""

from __future__ import annotations

import importlib.metadata
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from _bench import run_bench

from vkbackend.bench.report import plot, table
from vkbackend.bench.tinygrad import runner
from vkbackend.bench.tinygrad.protocol import checksum, seeded_inputs
from vkbackend.bench.tinygrad.spec import CASE_BY_NAME, CASES, IMPLS, KERNEL_CASE, WORKLOADS, TgRecord, TgSizes, close
from vkbackend.tinygrad import bfloat16_bits


def devices(records: list[dict]) -> tuple[str, str]:
    """VK and the tinygrad device the bench compared it with: CUDA where it works, else CPU."""
    peers = {r["impl"] for r in records} - {"VK", "torch"}
    assert len(peers) == 1 and peers <= {"CUDA", "CPU"}, peers
    return ("VK", *peers)


def _tinygrad_version() -> str | None:
    try:
        return importlib.metadata.version("tinygrad")
    except importlib.metadata.PackageNotFoundError:
        return None


needs_tinygrad = pytest.mark.skipif(
    _tinygrad_version() != "0.14.0", reason="needs tinygrad 0.14.0 (pip install 'vkbackend[tinygrad]')"
)


@pytest.fixture(scope="module")
def quick_run(device, tinygrad_cpu_device, tmp_path_factory):
    """One ``--tinygrad --quick`` run in a fresh process (inheriting the suite's validation settings)."""
    if _tinygrad_version() != "0.14.0":
        pytest.skip("needs tinygrad 0.14.0 (pip install 'vkbackend[tinygrad]')")
    return run_bench(["--tinygrad", "--quick"], tmp_path_factory.mktemp("bench-tinygrad") / "bench.json", timeout_s=900)


def test_quick_run_exits_cleanly(quick_run):
    proc, records = quick_run
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-6000:]}"
    assert records is not None
    for case in CASES:
        assert case.name in proc.stdout
    assert "checksum mismatch" not in proc.stdout
    (resnet,) = [line for line in proc.stdout.splitlines() if line.startswith("resnet50")]
    assert resnet.startswith("resnet50 as 1-1-1-1, 32 px"), resnet  # --quick's ResNet is not ResNet-50
    assert "64 Ki floats" in proc.stdout and "ResNet 1-1-1-1 (width 16, not ResNet-50)" in proc.stdout


def test_quick_run_reports_progress_on_stderr(quick_run):
    proc, _ = quick_run
    runs = len(WORKLOADS) * 2 + len(WORKLOADS) * ("torch: PyTorch" in proc.stderr)
    for n in range(1, runs + 1):
        assert f"[{n}/{runs}] " in proc.stderr, proc.stderr[-3000:]
    assert "done in" in proc.stderr and "[1/" not in proc.stdout


def _skipped(proc, impl: str, case) -> bool:
    """Whether ``impl`` skipped ``case``'s workload with a reason: only tinygrad's CPU device may, and only for
    bfloat16, which its clang compiles from version 17 on."""
    said = f"{impl} {case.workload}: skipped, "
    if said not in proc.stderr:
        return False
    assert impl == "CPU" and case.name in BFLOAT16_CHECKSUMS, proc.stderr[-3000:]
    return True


def test_every_case_ran_on_vk_and_cpu(quick_run):
    proc, records = quick_run
    got = {(r["case"], r["impl"]): r for r in records}
    for case in CASES:
        for impl in devices(records):
            rec = got.get((case.name, impl))
            if rec is None and impl != "VK" and _skipped(proc, impl, case):
                continue
            assert rec is not None, f"{case.name} did not run on {impl}"
            assert rec["correct"] and isinstance(rec["value"], float) and rec["value"] > 0, rec
            assert rec["unit"] == case.unit and rec["runs"] == TgSizes.quick().runs
            assert rec["min"] <= rec["value"] <= rec["p90"] <= rec["max"], rec


def test_checksums_agree_across_implementations(quick_run):
    proc, records = quick_run
    for case in CASES:
        sums = {r["impl"]: r["checksum"] for r in records if r["case"] == case.name and r["value"] is not None}
        peer = devices(records)[1]
        if peer not in sums and _skipped(proc, peer, case):  # numpy's result of the same bfloat16 inputs instead
            sums[peer] = BFLOAT16_CHECKSUMS[case.name](TgSizes.quick())
        assert set(devices(records)) <= set(sums), (case.name, sums)
        assert all(math.isfinite(v) and v > 0 for v in sums.values()), (case.name, sums)
        reference = sums[devices(records)[1]]
        assert all(close(v, reference, case.rtol) for v in sums.values()), (case.name, sums)


def _bfloat16(x: np.ndarray) -> np.ndarray:
    """float32 values rounded to bfloat16 (to nearest, ties to even), as float32."""
    return bfloat16_bits.to_float32(bfloat16_bits.from_float32(x))


def _bfloat16_matmul_checksum(sizes: TgSizes) -> float:
    """matmul_bf16's checksum in numpy: the seeded inputs rounded to bfloat16, multiplied in float64, the product
    rounded to bfloat16 (tinygrad's result type)."""
    a, b = (_bfloat16(x) for x in seeded_inputs("matmul_bf16", sizes).values())
    return checksum(_bfloat16((a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)))


def _bfloat16_add_checksum(sizes: TgSizes) -> float:
    """add_bf16's checksum in numpy: the seeded inputs rounded to bfloat16, added in float32 (exactly: both are
    bfloat16 in [0, 1)), the sum rounded to bfloat16."""
    a, b = (_bfloat16(x) for x in seeded_inputs("add_bf16", sizes).values())
    return checksum(_bfloat16(a + b))


BFLOAT16_CHECKSUMS = {"matmul_bf16": _bfloat16_matmul_checksum, "add_bf16": _bfloat16_add_checksum}


def test_mlp_kernels_timed_on_both_devices(quick_run):
    _, records = quick_run
    kernels = {
        impl: sorted(
            (r for r in records if r["case"] == KERNEL_CASE.name and r["impl"] == impl), key=lambda r: r["index"]
        )
        for impl in devices(records)
    }
    vk, peer = devices(records)
    assert kernels[vk] and len(kernels[vk]) == len(kernels[peer])
    for impl, recs in kernels.items():
        assert [r["index"] for r in recs] == list(range(len(recs)))
        assert all(r["kernel"] and r["value"] > 0 and r["unit"] == "us" for r in recs), impl


def test_records_have_the_documented_shape(quick_run):
    _, records = quick_run
    fields = {"case", "impl", "value", "unit", "correct", "checksum", "min", "p90", "max", "runs"}
    for rec in records:
        assert fields <= set(rec), rec
        assert rec["impl"] in IMPLS
        assert rec["case"] in CASE_BY_NAME or rec["case"] == KERNEL_CASE.name


# ----- the driver's pieces, without a device -------------------------------------------------------------------------
@needs_tinygrad
def test_a_disagreeing_checksum_is_reported():
    from vkbackend.bench.tinygrad.runner import check_agreement

    case = CASE_BY_NAME["matmul_f16"]
    records = [
        TgRecord.of_samples(case, impl, [1.0, 2.0, 3.0], check)
        for impl, check in (("VK", 100.0), ("CUDA", 100.5), ("torch", 120.0))
    ]
    problems = check_agreement(records)
    assert [r.correct for r in records] == [True, True, False]  # within float16's 1e-2 of CUDA; torch is not
    assert len(problems) == 1 and "torch" in problems[0] and "matmul_f16" in problems[0]


@needs_tinygrad
def test_kernel_table_and_selection():
    from vkbackend.bench.tinygrad.runner import kernel_table, select

    recs = []
    for impl, times in (("VK", [10.0, 40.0]), ("CUDA", [5.0, 10.0])):
        for i, t in enumerate(times):
            rec = TgRecord.of_samples(KERNEL_CASE, impl, [t], None)
            rec.kernel, rec.index = f"k{i}", i
            recs.append(rec)
    text = kernel_table(recs)
    assert "VK/CUDA per kernel: median 3, worst 4 (#1 k1)" in text
    assert select(["matmul_f16", "mlp_step", "mlp"]) == ["matmul_f16", "mlp"]
    with pytest.raises(ValueError):
        select(["nope"])


def test_record_json_round_trip_table_and_plot(tmp_path):
    rec = TgRecord.of_samples(CASE_BY_NAME["mlp_step"], "VK", [3.0, 1.0, 2.0], 7.5)
    assert (rec.value, rec.min, rec.p90, rec.max, rec.runs) == (2.0, 1.0, 3.0, 3.0, 3)
    assert TgRecord.from_json(rec.to_json()) == rec
    peer = TgRecord.of_samples(CASE_BY_NAME["mlp_step"], "CUDA", [1.0], 7.5)
    text = table([rec, peer], cases=[CASE_BY_NAME["mlp_step"]], impls=IMPLS, ours_label="VK")
    assert "2 [1-3]" in text and "VK/CUDA" in text and "2 (2x slower)" in text
    why_not = plot([rec, peer], tmp_path / "p.png", "test", cases=CASES, impls=IMPLS)
    assert why_not is None and (tmp_path / "p.png").stat().st_size > 0 or "matplotlib" in why_not


def test_quick_sizes_say_what_the_resnet_is():
    quick, full = TgSizes.quick(), TgSizes.full()
    assert "add/sum 64 Ki floats" in quick.describe() and "add/sum 64 Mi floats" in full.describe()
    assert "ResNet 1-1-1-1 (width 16, not ResNet-50) at 32 x 32 px" in quick.describe()
    assert "ResNet-50 at 224 x 224 px" in full.describe() and full.labels() == {}
    rec = TgRecord.of_samples(CASE_BY_NAME["resnet50"], "VK", [5.0], 1.0)
    text = table([rec], cases=[CASE_BY_NAME["resnet50"]], impls=IMPLS, ours_label="VK", labels=quick.labels())
    assert "resnet50 as 1-1-1-1, 32 px" in text


def test_the_table_picks_a_unit_per_row():
    recs = [
        TgRecord.of_samples(CASE_BY_NAME["matmul_f32"], impl, [v], 1.0)
        for impl, v in (("VK", 0.001276), ("CPU", 0.002))
    ]
    (row,) = [
        line.split()
        for line in table(recs, cases=[CASE_BY_NAME["matmul_f32"]], impls=IMPLS, ours_label="VK").splitlines()
        if line.startswith("matmul_f32")
    ]
    assert row[1] == "GFLOP/s" and row[3] == "1.276" and row[4] == "2"
    assert recs[0].to_json()["unit"] == "TFLOP/s"


def test_device_reaches_the_vk_child_only():
    assert runner.child_env("VK", 3)["VKBACKEND_DEVICE_IDS"] == "3"
    assert "VKBACKEND_DEVICE_IDS" not in runner.child_env("VK")
    assert "VKBACKEND_DEVICE_IDS" not in runner.child_env("CPU", 3)


def test_without_tinygrad_one_line_says_how_to_install_it(monkeypatch, capsys):
    def no_child(*args, **kwargs):
        raise AssertionError("no child should start")

    monkeypatch.setattr(runner, "importable", lambda module: module != "tinygrad")
    monkeypatch.setattr(runner, "run_module", no_child)
    assert runner.run(quick=True) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1, err
    assert "tinygrad is not installed" in err and "pip install '.[tinygrad]'" in err
    assert "bash scripts/setup.sh tinygrad" in err


def test_progress_goes_to_stderr_as_each_run_starts_and_ends(monkeypatch, capsys):
    def workload(impl, workload, sizes, quick, timeout_s, device=None, progress=None):
        progress(31.0)
        return []

    monkeypatch.setattr(runner, "run_workload", workload)
    assert runner.run_all(["VK", "CPU"], ["mlp", "resnet50"], TgSizes.quick(), True, 10.0) == []
    out, err = capsys.readouterr()
    assert out == ""
    assert "[1/4] VK mlp: running" in err and "[1/4] VK mlp: still running after 31 s" in err
    assert "[4/4] CPU resnet50 as 1-1-1-1, 32 px: done in" in err


@needs_tinygrad
def test_tail_runs_shows_each_slow_run_with_what_fell_inside(device):
    """scripts/tail-runs.py (docs/performance.md): with every run counted as slow, each run of each case gets its line
    (each call's host time, the closing sync, the batches, the garbage collections), and the results are right."""
    script = Path(__file__).resolve().parent.parent / "scripts" / "tail-runs.py"
    proc = subprocess.run(
        [sys.executable, str(script), "--floats", "4096", "--runs", "4", "--calls", "3", "--over", "0.01"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**os.environ, "DEV": "VK"},
    )
    assert proc.returncode == 0 and "WRONG" not in proc.stdout, proc.stdout + proc.stderr
    heads = re.findall(r"^VK (add|sum): us per call min .* (\d+) of 4 runs over 0.01x the median$", proc.stdout, re.M)
    assert heads == [("add", "4"), ("sum", "4")], proc.stdout
    runs = re.findall(
        r"^  run \d: .*host us per call \[(\d+), (\d+), (\d+)\]; closing sync \d+ us; (\d+) batches; "
        r"garbage collections inside: ",
        proc.stdout,
        re.M,
    )
    assert len(runs) == 8 and all(int(r[3]) >= 1 for r in runs), proc.stdout
