"""scripts/fuzz-tinygrad.py, the differential fuzzer (random tinygrad programs on VK against the CPU device): its
comparison, and a run of its first seeds, which must agree."""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path

import numpy as np
import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "fuzz-tinygrad.py"
needs_cpu_device = pytest.mark.usefixtures("tinygrad_cpu_device")


@pytest.fixture(scope="module")
def fuzz():
    spec = importlib.util.spec_from_file_location("fuzz_tinygrad", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


def test_integers_must_be_equal(fuzz):
    want = np.arange(12, dtype=np.int16).reshape(3, 4)
    assert fuzz.compare(want.copy(), want) is None
    got = want.copy()
    got[1, 2] += 1
    assert fuzz.compare(got, want) == "1 of 12 differ: (1, 2): 7 against 6"
    assert "shape/dtype" in fuzz.compare(got.astype(np.int32), want)
    assert fuzz.compare(got, want, half=True) is None  # a 16-bit float truncated: one either way
    got[1, 2] += 1
    assert fuzz.compare(got, want, half=True) == "1 of 12 differ: (1, 2): 8 against 6"


def test_floats_within_the_tolerance_of_the_largest_magnitude(fuzz):
    want = np.array([1000.0, 1.0, np.nan, np.inf, -np.inf], np.float32)
    assert fuzz.compare(want + np.float32(0.5) * np.array([1, 1, 0, 0, 0], np.float32), want) is None
    assert fuzz.compare(np.array([1000.0, 3.0, np.nan, np.inf, -np.inf], np.float32), want) is not None
    assert fuzz.compare(np.array([1000.0, 1.0, 0.0, np.inf, -np.inf], np.float32), want) is not None  # NaN
    assert fuzz.compare(np.array([1000.0, 1.0, np.nan, -np.inf, -np.inf], np.float32), want) is not None  # sign


@needs_cpu_device
def test_a_program_is_the_same_on_every_run(fuzz):
    first, second = fuzz.make_program(7, "CPU"), fuzz.make_program(7, "CPU")
    assert first.describe() == second.describe() and first.steps
    assert all((a == b).all() for a, b in zip(first.leaves, second.leaves))


@needs_cpu_device
def test_seeds_agree_with_the_cpu_device(vk_device, fuzz, capsys):
    """60 programs on lavapipe against tinygrad's CPU device, a difference printed with its program. Among them
    (seeds 170, 180, 189, 222) elementwise kernels over a prime number of elements past 65,535, lavapipe's limit of
    work groups per axis, which tinygrad could not split (renderer/work_groups.py folds them)."""
    assert fuzz.main(["--seeds", "170:60"]) == 0, capsys.readouterr().out
    assert "same 60" in capsys.readouterr().out


@needs_cpu_device
def test_the_second_opinion_agrees_only_with_the_right_result(fuzz):
    """Where VK and CPU differ, tinygrad's PYTHON device is asked: it agrees with a right result only."""
    program = fuzz.make_program(1, "CPU")
    right = program.run("CPU")
    assert fuzz.second_opinion(program, right, "PYTHON")
    wrong = right.copy()
    wrong.reshape(-1)[0] += 1
    assert not fuzz.second_opinion(program, wrong, "PYTHON")
    assert not fuzz.second_opinion(program, right, "NO_SUCH_DEVICE")


@needs_cpu_device
def test_a_fault_of_tinygrads_jit_is_counted_apart(fuzz):
    """tinygrad's JIT keeps a view of an input (a bitcast of it) from the call it captured, on CPU as on VK: the
    replays read the captured call's data. The fuzzer counts that apart from a difference of VK's."""
    from tinygrad import dtypes

    leaf = np.linspace(-3, 3, 99, dtype=np.float16).reshape(3, 33)
    bitcast = (0, "bitcast", lambda x, d: x.bitcast(dtypes.uint16))
    program = fuzz.Program(leaves=[leaf], kinds=[dtypes.float16], steps=[bitcast])
    outcome, message = fuzz.check_jitted(program, "CPU", random.Random(0))
    assert outcome == "the JIT alone differs", message


@needs_cpu_device
def test_jitted_seeds_agree_with_the_cpu_device(vk_device, fuzz, capsys):
    """20 programs under TinyJit (16 with kernels to capture: VK's graph, captured and replayed with new inputs)
    against CPU without it."""
    assert fuzz.main(["--seeds", "170:20", "--jit"]) == 0, capsys.readouterr().out
