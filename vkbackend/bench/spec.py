"""What a bench run measures: the cases, their units and direction, the work sizes, and the record of one figure."""
from __future__ import annotations

import math
from dataclasses import dataclass

IMPLS = ("vkbackend", "vulkan-c", "wgpu", "torch")
"""Every implementation a record can name; ours first."""
OURS = IMPLS[0]


@dataclass(frozen=True)
class Case:
    """One benchmark case: its name, the unit of its figure, and which way is better."""

    name: str
    unit: str
    higher_is_better: bool
    work: str

    @property
    def better(self) -> str:
        return "higher" if self.higher_is_better else "lower"


CASES: tuple[Case, ...] = (
    Case("launch_chain", "us", False,
         "dependent tiny launches (y += 1 on one 256-float buffer), one sync: us per launch"),
    Case("launch_independent", "us", False, "tiny launches round robin over 64 buffers, one sync: us per launch"),
    Case("add_bw", "GB/s", True, "c = a + b on float32 with a vec4 kernel, GPU time: GB/s counting 3 arrays"),
    Case("upload", "GB/s", True, "float32 numpy array -> device buffer, until the copy has completed"),
    Case("download", "GB/s", True, "device buffer -> float32 numpy array"),
    Case("compile_cold", "ms", False, "20 kernels compiled in a fresh process, empty pipeline cache"),
    Case("compile_warm", "ms", False, "the same 20 kernels in another fresh process, filled pipeline cache"),
    Case("alloc_release", "us", False, "allocate + release of a 4 KiB buffer"),
)
CASE_BY_NAME: dict[str, Case] = {case.name: case for case in CASES}


@dataclass(frozen=True)
class Sizes:
    """How much work each case does. ``full()`` is the issue's table; ``quick()`` runs on lavapipe in seconds."""

    launches: int           # launch_chain, launch_independent
    elems: int              # float32 elements per array: add_bw, upload, download
    allocs: int             # alloc_release iterations per sample
    reps: int               # timed samples per case (the best is kept)
    kernel_reps: int        # add_bw samples (GPU timestamps, one launch each)
    warmup_s: float         # device warm-up before the first case
    buffers: int = 64       # launch_independent: buffers in the round robin
    kernels: int = 20       # compile_cold / compile_warm: distinct kernels
    compile_reps: int = 3   # compile_cold / compile_warm: fresh processes each (the best is kept)
    small_floats: int = 256  # the tiny launches' buffer size
    alloc_bytes: int = 4096  # alloc_release buffer size

    @classmethod
    def full(cls) -> Sizes:
        return cls(launches=10_000, elems=64 << 20, allocs=10_000, reps=5, kernel_reps=20, warmup_s=1.0)

    @classmethod
    def quick(cls) -> Sizes:
        return cls(launches=1_000, elems=1 << 20, allocs=1_000, reps=3, kernel_reps=5, warmup_s=1.0, compile_reps=1)

    @property
    def array_bytes(self) -> int:
        return self.elems * 4

    def describe(self) -> str:
        return (f"{self.launches:,} launches, {self.elems / (1 << 20):g} Mi float32 ({self.array_bytes >> 20} MiB) "
                f"per array, {self.kernels} kernels, {self.allocs:,} allocations")


@dataclass
class Record:
    """One figure: ``value`` in ``unit`` (None when the case failed) and whether its correctness check passed."""

    case: str
    impl: str
    value: float | None
    unit: str
    correct: bool

    @classmethod
    def of(cls, case: str, impl: str, value: float | None, correct: bool) -> Record:
        """A record in the case's own unit; the value is kept to 4 significant digits (None for a failure)."""
        if value is not None and math.isfinite(value):
            value = float(f"{value:.4g}")
        else:
            value, correct = None, False
        return cls(case, impl, value, CASE_BY_NAME[case].unit, bool(correct))

    def cell(self) -> str:
        """The figure as the table shows it: 4 significant digits, " !" when the check failed, FAILED for none."""
        if self.value is None:
            return "FAILED"
        return f"{self.value:.4g}" + ("" if self.correct else " !")

    def to_json(self) -> dict:
        return {"case": self.case, "impl": self.impl, "value": self.value, "unit": self.unit, "correct": self.correct}
