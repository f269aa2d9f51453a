"""What a bench run measures: the cases, their units and direction, the work sizes, and the record of one figure."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from .units import binary

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
    Case(
        "launch_chain", "us", False, "dependent tiny launches (y += 1 on one 256-float buffer), one sync: us per launch"
    ),
    Case("launch_independent", "us", False, "tiny launches round robin over 64 buffers, one sync: us per launch"),
    Case("add_bw", "GB/s", True, "c = a + b on float32 with a vec4 kernel, GPU time: GB/s counting 3 arrays"),
    Case("upload", "GB/s", True, "float32 numpy array -> device buffer, until the copy has completed"),
    Case("download", "GB/s", True, "device buffer -> float32 numpy array"),
    Case("compile_cold", "ms", False, "20 kernels compiled in a fresh process, empty pipeline cache"),
    Case("compile_warm", "ms", False, "the same 20 kernels in another fresh process, filled pipeline cache"),
    Case("alloc_release", "us", False, "allocate + release of a 4 KiB buffer"),
    Case("sync_idle", "us", False, "a sync with nothing queued: us per round trip"),
    Case(
        "launch_sync", "us", False, "one tiny launch (y += 1 on one 256-float buffer), then a sync: us per round trip"
    ),
    Case("readback_small", "us", False, "one tiny launch, then a 4-byte read-back of its buffer: us per round trip"),
)
CASE_BY_NAME: dict[str, Case] = {case.name: case for case in CASES}
ROUND_TRIPS = ("sync_idle", "launch_sync", "readback_small")
"""The latency cases: each round trip is timed on its own, and the record carries min, median (its value), p99, max."""


def select(names: Sequence[str] | None) -> tuple[str, ...]:
    """The names of the cases to run, in CASES' order: every case when ``names`` is None, else those named (each may
    be a comma-separated list). ValueError for a name that is not a case, or for no name at all."""
    if names is None:
        return tuple(CASE_BY_NAME)
    wanted = {name.strip() for item in names for name in item.split(",") if name.strip()}
    unknown = sorted(wanted - set(CASE_BY_NAME))
    if unknown or not wanted:
        raise ValueError(
            f"unknown case {', '.join(map(repr, unknown)) or '(none named)'}: choose from {', '.join(CASE_BY_NAME)}"
        )
    return tuple(name for name in CASE_BY_NAME if name in wanted)


@dataclass(frozen=True)
class Sizes:
    """How much work each case does: ``full()`` for a GPU (the H200 figures), ``quick()`` on lavapipe in seconds."""

    launches: int  # launch_chain, launch_independent
    elems: int  # float32 elements per array: add_bw, upload, download
    allocs: int  # alloc_release iterations per sample
    reps: int  # timed samples per case (the best is kept)
    kernel_reps: int  # add_bw samples (GPU timestamps, one launch each)
    warmup_s: float  # device warm-up before the first case
    buffers: int = 64  # launch_independent: buffers in the round robin
    kernels: int = 20  # compile_cold / compile_warm: distinct kernels
    compile_reps: int = 3  # compile_cold / compile_warm: fresh processes each (the best is kept)
    small_floats: int = 256  # the tiny launches' buffer size
    alloc_bytes: int = 4096  # alloc_release buffer size
    roundtrips: int = 2000  # sync_idle, launch_sync, readback_small: timed round trips each
    roundtrip_warmup: int = 100  # untimed round trips before them

    @classmethod
    def full(cls) -> Sizes:
        return cls(launches=10_000, elems=64 << 20, allocs=10_000, reps=5, kernel_reps=20, warmup_s=1.0)

    @classmethod
    def quick(cls) -> Sizes:
        return cls(
            launches=1_000,
            elems=1 << 20,
            allocs=1_000,
            reps=3,
            kernel_reps=5,
            warmup_s=1.0,
            compile_reps=1,
            roundtrips=200,
            roundtrip_warmup=20,
        )

    @property
    def array_bytes(self) -> int:
        return self.elems * 4

    def describe(self) -> str:
        return (
            f"{self.launches:,} launches, {binary(self.elems, ' float32')} ({binary(self.array_bytes, 'B')}) "
            f"per array, {self.kernels} kernels, {self.allocs:,} allocations, {self.roundtrips:,} round trips"
        )


def spread(samples: Sequence[float]) -> tuple[float, float, float, float]:
    """min, median, p99 and max of ``samples``, the percentiles by nearest rank (the ceil(p n / 100)-th smallest, in
    integers, so the median of an even count is the lower middle one), as vulkan_ref.c's ``percentile``."""
    ordered = sorted(samples)
    if not ordered:
        raise ValueError("no samples")

    def percentile(p: int) -> float:
        return ordered[max(1, -(-p * len(ordered) // 100)) - 1]

    return ordered[0], percentile(50), percentile(99), ordered[-1]


def _4g(value: float) -> float:
    return float(f"{value:.4g}")


@dataclass
class Record:
    """One figure: ``value`` in ``unit`` (None when the case failed) and whether its correctness check passed.

    A round-trip case's record (``ROUND_TRIPS``) also carries the spread of its round trips: ``value`` is their
    median, ``min``, ``p99`` and ``max`` the rest (None when the case failed).
    """

    case: str
    impl: str
    value: float | None
    unit: str
    correct: bool
    min: float | None = field(default=None, kw_only=True)
    p99: float | None = field(default=None, kw_only=True)
    max: float | None = field(default=None, kw_only=True)

    @classmethod
    def of(cls, case: str, impl: str, value: float | None, correct: bool) -> Record:
        """A record in the case's own unit; the value is kept to 4 significant digits (None for a failure)."""
        if value is not None and math.isfinite(value):
            value = _4g(value)
        else:
            value, correct = None, False
        return cls(case, impl, value, CASE_BY_NAME[case].unit, bool(correct))

    @classmethod
    def of_spread(cls, case: str, impl: str, stats: Sequence[float] | None, correct: bool) -> Record:
        """A round-trip case's record from (min, median, p99, max) in the case's unit, each kept to 4 significant
        digits; a failure without them (None, or a figure that is not finite and positive)."""
        if stats is None or len(stats) != 4 or not all(math.isfinite(v) and v > 0 for v in stats):
            return cls.of(case, impl, None, False)
        low, median, p99, high = map(_4g, stats)
        return cls(case, impl, median, CASE_BY_NAME[case].unit, bool(correct), min=low, p99=p99, max=high)

    @classmethod
    def of_round_trips(cls, case: str, impl: str, samples_us: Sequence[float], correct: bool) -> Record:
        """A round-trip case's record from the microseconds of each round trip."""
        return cls.of_spread(case, impl, spread(samples_us) if samples_us else None, correct)

    @classmethod
    def from_json(cls, fields: dict) -> Record:
        """The record ``to_json`` gave."""
        return cls(**fields)

    def cell(self) -> str:
        """The figure as the table shows it: 4 significant digits, " !" when the check failed, FAILED for none."""
        if self.value is None:
            return "FAILED"
        return f"{self.value:.4g}" + ("" if self.correct else " !")

    def to_json(self) -> dict:
        """{"case", "impl", "value", "unit", "correct"}; a round-trip case's also "min", "p99" and "max"."""
        out = {"case": self.case, "impl": self.impl, "value": self.value, "unit": self.unit, "correct": self.correct}
        if self.case in ROUND_TRIPS:
            out.update(min=self.min, p99=self.p99, max=self.max)
        return out
