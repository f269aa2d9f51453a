"""scripts/fuzz-tensor-cores.py, the tensor-core fuzzer (random products under random BEAM actions, against numpy):
its first seeds agree, and a wrong product is reported."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "fuzz-tensor-cores.py"


@pytest.fixture(scope="module")
def fuzz():
    spec = importlib.util.spec_from_file_location("fuzz_tensor_cores", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_emulated_seeds_agree_with_numpy(vk_device, glslang, fuzz, capsys):
    """Seeds 0-7 on emulated tensor cores: float16 and bfloat16 inputs, both register layouts, float32, float16 and
    bfloat16 results (bfloat16 ones through vk_f2bf), the float16-accumulating core, B transposed, local dimensions
    and upcasts among them."""
    assert fuzz.main(["--seeds", "0:8", "--emulate", "-v"]) == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    assert "same 8" in out and "-> __bf16" in out and "m16.16.16.f16.f16" in out and " B^T " in out, out
    assert " nv " in out and " chunk " in out and "UPCAST" in out and "LOCAL" in out, out


def test_a_wrong_product_is_reported(vk_device, glslang, fuzz, capsys, monkeypatch):
    real = fuzz.run_with_opts
    monkeypatch.setattr(fuzz, "run_with_opts", lambda out, opts: real(out, opts) * 1.5)
    assert fuzz.main(["--seeds", "0:1", "--emulate"]) == 1
    assert "seed 0: differ" in capsys.readouterr().out
