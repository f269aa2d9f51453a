"""What ``bench --tinygrad`` measures: the workloads and their cases, the sizes, the record of one figure (with its
spread and checksum) and when two checksums agree.

Plain Python: the PyTorch child imports this module without tinygrad.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, field

from vkbackend.bench.spec import Case, Record
from vkbackend.bench.units import binary

IMPLS = ("VK", "CUDA", "CPU", "torch")
"""Every implementation a record can name: tinygrad's devices (ours first), then PyTorch."""
OURS = IMPLS[0]


@dataclass(frozen=True)
class TgCase(Case):
    """A case of the tinygrad bench: which workload (child process) produces it and how close checksums must be."""

    workload: str = ""
    rtol: float = 1e-4


CASES: tuple[TgCase, ...] = (
    TgCase("mlp_step", "ms", False, "MLP training step (Adam, TinyJit), synchronised after every step", "mlp", 1e-3),
    TgCase("mlp_step_pipelined", "ms", False, "the same step, many steps and one synchronisation", "mlp", 1e-3),
    TgCase(
        "transformer_step", "ms", False, "transformer block stack training step (AdamW, TinyJit)", "transformer", 2e-3
    ),
    TgCase("matmul_f32", "TFLOP/s", True, "float32 N x N matmul (TinyJit)", "matmul_f32", 1e-4),
    TgCase("matmul_f16", "TFLOP/s", True, "float16 N x N matmul (TinyJit)", "matmul_f16", 1e-2),
    TgCase(
        "matmul_bf16", "TFLOP/s", True, "bfloat16 N x N matmul, float32 accumulation (TinyJit)", "matmul_bf16", 1e-2
    ),
    TgCase("add", "GB/s", True, "c = a + b on float32, counting 3 arrays (TinyJit)", "add", 1e-6),
    TgCase(
        "add_bf16",
        "GB/s",
        True,
        "c = a + b on bfloat16 (float32 inputs rounded on the device), counting 3 arrays (TinyJit)",
        "add_bf16",
        1e-6,
    ),
    TgCase("sum", "GB/s", True, "a.sum() on float32, counting 1 array (TinyJit)", "sum", 1e-4),
    TgCase(
        "gpt2_decode",
        "tokens/s",
        True,
        "GPT-2-shaped decoder, batch 1, one token per TinyJit step, KV cache",
        "gpt2",
        1e-3,
    ),
    TgCase("resnet50", "images/s", True, "ResNet-50 inference (TinyJit)", "resnet50", 1e-3),
)
CASE_BY_NAME: dict[str, TgCase] = {case.name: case for case in CASES}
WORKLOADS: tuple[str, ...] = tuple(dict.fromkeys(case.workload for case in CASES))
KERNEL_CASE = Case("mlp_kernel", "us", False, "GPU time of each kernel of one jitted MLP step")


@dataclass(frozen=True)
class TgSizes:
    """Work sizes. ``full()`` gives the sizes docs/performance.md lists; ``quick()`` keeps every workload's structure
    at toy sizes for lavapipe."""

    runs: int  # timed runs per case (min / median / p90 / max over them)
    check_steps: int  # training steps before timing; the checksum is their summed loss
    pipelined_steps: int  # mlp_step_pipelined: steps between two synchronisations
    repeat: int  # matmul / add / add_bf16 / sum: jitted calls per timed run
    kernel_reps: int  # mlp_kernel: timed passes over the step's kernels (the median is kept)
    mlp_widths: tuple[int, ...]
    mlp_batch: int
    tf_layers: int
    tf_batch: int
    tf_seq: int
    tf_dim: int
    tf_heads: int
    matmul_n: int
    elems: int  # add / add_bf16 / sum: elements per array
    gpt2_layers: int
    gpt2_dim: int
    gpt2_heads: int
    gpt2_vocab: int
    gpt2_tokens: int  # tokens decoded per run (teacher-forced, from position 0)
    resnet_layers: tuple[int, ...]
    resnet_width: int  # torchvision's width_per_group
    resnet_classes: int
    resnet_image: int
    resnet_batch: int
    gpt2_positions: int = 1024

    @classmethod
    def full(cls) -> TgSizes:
        return cls(
            runs=10,
            check_steps=3,
            pipelined_steps=100,
            repeat=10,
            kernel_reps=5,
            mlp_widths=(784, 1024, 1024, 10),
            mlp_batch=512,
            tf_layers=4,
            tf_batch=16,
            tf_seq=256,
            tf_dim=512,
            tf_heads=8,
            matmul_n=4096,
            elems=64 << 20,
            gpt2_layers=12,
            gpt2_dim=768,
            gpt2_heads=12,
            gpt2_vocab=50257,
            gpt2_tokens=128,
            resnet_layers=(3, 4, 6, 3),
            resnet_width=64,
            resnet_classes=1000,
            resnet_image=224,
            resnet_batch=32,
        )

    @classmethod
    def quick(cls) -> TgSizes:
        return cls(
            runs=3,
            check_steps=3,
            pipelined_steps=10,
            repeat=2,
            kernel_reps=2,
            mlp_widths=(64, 64, 64, 10),
            mlp_batch=16,
            tf_layers=1,
            tf_batch=2,
            tf_seq=16,
            tf_dim=32,
            tf_heads=2,
            matmul_n=64,
            elems=64 << 10,
            gpt2_layers=2,
            gpt2_dim=64,
            gpt2_heads=2,
            gpt2_vocab=512,
            gpt2_tokens=4,
            gpt2_positions=64,
            resnet_layers=(1, 1, 1, 1),
            resnet_width=16,
            resnet_classes=10,
            resnet_image=32,
            resnet_batch=2,
        )

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, fields: dict) -> TgSizes:
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in fields.items()})

    def describe(self) -> str:
        w = "-".join(map(str, self.mlp_widths))
        return (
            f"MLP {w} batch {self.mlp_batch}; transformer {self.tf_layers} x D={self.tf_dim} B={self.tf_batch} "
            f"T={self.tf_seq}; matmul {self.matmul_n}; add/sum {binary(self.elems, ' floats')}; GPT-2 "
            f"{self.gpt2_layers} x {self.gpt2_dim}, vocab {self.gpt2_vocab:,}, {self.gpt2_tokens} tokens; "
            f"{self.resnet()} batch {self.resnet_batch}; {self.runs} runs"
        )

    def resnet(self) -> str:
        """What the ``resnet50`` workload is at these sizes: ResNet-50 only at the full sizes; ``--quick``'s is a
        ResNet of one block per stage at 32 px, and says so."""
        shape = f"{self.resnet_image} x {self.resnet_image} px"
        if self.resnet_layers == TgSizes.full().resnet_layers and self.resnet_width == TgSizes.full().resnet_width:
            return f"ResNet-50 at {shape}"
        return f"ResNet {'-'.join(map(str, self.resnet_layers))} (width {self.resnet_width}, not ResNet-50) at {shape}"

    def labels(self) -> dict[str, str]:
        """The table's and plot's names of cases whose workload is not what the name says at these sizes."""
        if self.resnet().startswith("ResNet-50"):
            return {}
        return {"resnet50": f"resnet50 as {'-'.join(map(str, self.resnet_layers))}, {self.resnet_image} px"}


# ----- records -------------------------------------------------------------------------------------------------------
@dataclass
class TgRecord(Record):
    """A figure of the tinygrad bench: ``value`` is the median over ``runs`` timed runs, with their min, p90 and max
    (all in ``unit``; ``min`` and ``max`` are Record's), and the case's ``checksum``; ``kernel`` and ``index`` name
    one kernel of an ``mlp_kernel`` record (its place in the jitted step)."""

    checksum: float | None = None
    p90: float | None = None
    runs: int = 0
    kernel: str | None = None
    index: int | None = None
    extra: dict = field(default_factory=dict)

    @classmethod
    def of_samples(cls, case: Case, impl: str, figures: list[float], check: float | None) -> TgRecord:
        """The record of ``figures`` (one per timed run, in the case's unit)."""
        if not figures or not all(math.isfinite(f) for f in figures):
            return cls(case.name, impl, None, case.unit, False, check)
        ordered = sorted(figures)
        p90 = ordered[min(len(ordered) - 1, math.ceil(0.9 * len(ordered)) - 1)]
        r4 = lambda v: float(f"{v:.4g}")  # noqa: E731 - 4 significant digits, as the other bench's records
        ok = check is None or math.isfinite(check)
        return cls(
            case.name,
            impl,
            r4(statistics.median(ordered)),
            case.unit,
            ok,
            check,
            min=r4(ordered[0]),
            p90=r4(p90),
            max=r4(ordered[-1]),
            runs=len(ordered),
        )

    @classmethod
    def failed(cls, case: Case, impl: str, why: str) -> TgRecord:
        return cls(case.name, impl, None, case.unit, False, extra={"error": why})

    def cell(self) -> str:
        """median [min-max] (the table's cell)."""
        if self.value is None or self.runs <= 1 or self.min is None or self.max is None:
            return super().cell()
        return f"{self.value:.4g} [{self.min:.3g}-{self.max:.3g}]" + ("" if self.correct else " !")

    def to_json(self) -> dict:
        out = {
            **super().to_json(),
            "checksum": self.checksum,
            "min": self.min,
            "p90": self.p90,
            "max": self.max,
            "runs": self.runs,
        }
        if self.kernel is not None:
            out.update(kernel=self.kernel, index=self.index)
        out.update(self.extra)
        return out

    @classmethod
    def from_json(cls, fields: dict) -> TgRecord:
        known = {
            k: fields[k]
            for k in (
                "case",
                "impl",
                "value",
                "unit",
                "correct",
                "checksum",
                "min",
                "p90",
                "max",
                "runs",
                "kernel",
                "index",
            )
            if k in fields
        }
        return cls(**known, extra={k: v for k, v in fields.items() if k not in known})


def close(a: float, b: float, rtol: float) -> bool:
    """|a - b| <= rtol * max(|a|, |b|) (and both finite)."""
    return math.isfinite(a) and math.isfinite(b) and abs(a - b) <= rtol * max(abs(a), abs(b))
