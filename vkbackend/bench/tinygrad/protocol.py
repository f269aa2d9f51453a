"""The protocol every implementation of the tinygrad bench follows (tinygrad's devices and the PyTorch twins): the
seeded weights and inputs, the checksum, how seconds become the case's figure, and ``Workloads``, which runs them.

numpy only: the PyTorch child imports this module without tinygrad.
"""

from __future__ import annotations

import math
import time
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np

from vkbackend.bench.tinygrad.spec import CASE_BY_NAME, TgRecord, TgSizes

SEED = 1234


def rng_for(name: str, seed: int = SEED) -> np.random.Generator:
    """A generator that depends only on ``seed`` and ``name``, so every process draws the same arrays in any order."""
    return np.random.default_rng([seed, zlib.crc32(name.encode())])


def seeded_array(name: str, shape: tuple[int, ...], seed: int = SEED) -> np.ndarray:
    """The value of parameter or buffer ``name`` (a torch-style dotted name): BatchNorm statistics, norm scales near
    1, small biases, and weights scaled by 1/sqrt(fan-in) so activations stay near unit size through deep stacks."""
    rng, leaf = rng_for(name, seed), name.rsplit(".", 1)[-1]
    if leaf == "num_batches_tracked":
        return np.zeros(shape, np.int64)
    if leaf == "running_var":
        return rng.uniform(0.5, 1.5, shape).astype(np.float32)
    if leaf == "running_mean" or (len(shape) == 1 and leaf == "bias"):
        return (0.1 * rng.standard_normal(shape)).astype(np.float32)
    if len(shape) == 1:  # LayerNorm / BatchNorm scale
        return (1 + 0.1 * rng.standard_normal(shape)).astype(np.float32)
    return (rng.standard_normal(shape) / math.sqrt(math.prod(shape[1:]))).astype(np.float32)


class Skip(Exception):
    """An implementation cannot run a workload here; the message says why (a skip, not a failure)."""


def seeded_state(shapes: dict[str, tuple[int, ...]], seed: int = SEED) -> dict[str, np.ndarray]:
    """``seeded_array`` for every name in ``shapes``."""
    return {name: seeded_array(name, tuple(shape), seed) for name, shape in shapes.items()}


def checksum(array: np.ndarray) -> float:
    """The float64 sum of |x|: it does not cancel, so a relative tolerance means something."""
    return float(np.abs(np.asarray(array, dtype=np.float64)).sum())


def seeded_inputs(workload: str, s: TgSizes) -> dict[str, np.ndarray]:
    """The numpy inputs of ``workload`` at sizes ``s`` (the same for every implementation)."""
    if workload == "mlp":
        return {
            "x": rng_for("mlp.x").standard_normal((s.mlp_batch, s.mlp_widths[0]), np.float32),
            "y": rng_for("mlp.y").integers(0, s.mlp_widths[-1], s.mlp_batch).astype(np.int32),
        }
    if workload == "transformer":
        shape = (s.tf_batch, s.tf_seq, s.tf_dim)
        return {
            "x": rng_for("tf.x").standard_normal(shape, np.float32),
            "y": rng_for("tf.y").standard_normal(shape, np.float32),
        }
    if workload in ("matmul_f32", "matmul_f16", "matmul_bf16"):
        # bfloat16 (which numpy lacks) is made from float32 on the device (Workloads.bfloat16)
        dtype = np.float16 if workload == "matmul_f16" else np.float32
        return {k: rng_for(f"matmul.{k}").random((s.matmul_n, s.matmul_n), np.float32).astype(dtype) for k in "ab"}
    if workload in ("add", "add_bf16", "sum"):
        # bfloat16 (which numpy lacks) is made from float32 on the device (Workloads.bfloat16)
        return {k: rng_for(f"elementwise.{k}").random(s.elems, np.float32) for k in "ab"}
    if workload == "gpt2":
        return {"tokens": rng_for("gpt2.tokens").integers(0, s.gpt2_vocab, s.gpt2_tokens).astype(np.int32)}
    if workload == "resnet50":
        shape = (s.resnet_batch, 3, s.resnet_image, s.resnet_image)
        return {"x": rng_for("resnet.x").standard_normal(shape, np.float32)}
    raise KeyError(workload)


def work_per_run(case: str, s: TgSizes) -> float:
    """What one timed run of a throughput case does, in the unit's numerator (TFLOP, GB, tokens, images)."""
    return {
        "matmul_f32": 2 * s.matmul_n**3 / 1e12,
        "matmul_f16": 2 * s.matmul_n**3 / 1e12,
        "matmul_bf16": 2 * s.matmul_n**3 / 1e12,
        "add": 3 * 4 * s.elems / 1e9,
        "add_bf16": 3 * 2 * s.elems / 1e9,
        "sum": 4 * s.elems / 1e9,
        "gpt2_decode": s.gpt2_tokens,
        "resnet50": s.resnet_batch,
    }[case]


def figures(case: str, seconds: list[float], s: TgSizes) -> list[float]:
    """Seconds per run to the case's unit: ms for the step cases, work per second for the others."""
    if CASE_BY_NAME[case].unit == "ms":
        return [t * 1e3 for t in seconds]
    return [work_per_run(case, s) / t for t in seconds]


class Workloads:
    """The protocol, shared by tinygrad's devices and the PyTorch twins. A subclass supplies the primitives (``sync``,
    ``tensor``, ``numpy``, ``jit``) and builds each model (``mlp_step``, ``transformer_step``, ``gpt2_decode``,
    ``resnet_forward``); this class runs, times and checks them the same way for every implementation.

    Every workload runs untimed first (kernel compilation, JIT capture: a TinyJit replays from its third call) and
    takes its checksum there, then times ``sizes.runs`` runs with the device synchronised before and after each.
    """

    def __init__(self, impl: str, sizes: TgSizes) -> None:
        self.impl, self.s = impl, sizes

    def run(self, workload: str) -> list[TgRecord]:
        """The records of ``workload`` (one of ``spec.WORKLOADS``)."""
        return getattr(self, f"_{workload}")()

    # ----- primitives: a subclass's ---------------------------------------------------------------------------------
    def sync(self) -> None:
        """Wait until the device has finished everything queued."""
        raise NotImplementedError

    def tensor(self, array: np.ndarray) -> Any:
        """``array`` on the device."""
        raise NotImplementedError

    def numpy(self, tensor: Any) -> np.ndarray:
        """A device tensor's values on the host."""
        raise NotImplementedError

    def bfloat16(self, tensor: Any) -> Any:
        """A device tensor rounded to bfloat16, on the device."""
        raise NotImplementedError

    def jit(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn`` compiled for replay (TinyJit), or ``fn`` itself where there is nothing to compile (eager torch)."""
        return fn

    def mlp_step(self) -> Callable[[], Any]:
        """One MLP training step (returns the loss) on seeded weights and inputs; also sets up ``kernel_records``."""
        raise NotImplementedError

    def transformer_step(self) -> Callable[[], Any]:
        """One transformer-stack training step (returns the loss) on seeded weights and inputs."""
        raise NotImplementedError

    def gpt2_decode(self) -> Callable[[], float]:
        """Decodes ``gpt2_tokens`` tokens from position 0; returns the summed max logit."""
        raise NotImplementedError

    def resnet_forward(self) -> Callable[[], Any]:
        """One ResNet inference on the seeded batch (returns the logits)."""
        raise NotImplementedError

    def kernel_records(self) -> list[TgRecord]:
        """Per-kernel figures of the MLP step, where the implementation can give them."""
        return []

    # ----- the protocol -----------------------------------------------------------------------------------------------
    def timed(self, run: Callable[[], object], per_run: int = 1) -> list[float]:
        """Wall seconds of each of ``sizes.runs`` calls of ``run`` (divided by ``per_run``), the device synchronised
        before and after each."""
        out = []
        for _ in range(self.s.runs):
            self.sync()
            start = time.perf_counter()
            run()
            self.sync()
            out.append((time.perf_counter() - start) / per_run)
        return out

    def record(self, case: str, seconds: list[float], check: float | None) -> TgRecord:
        """The record of ``case`` from its seconds per run."""
        return TgRecord.of_samples(CASE_BY_NAME[case], self.impl, figures(case, seconds, self.s), check)

    def _train(self, case: str, step: Callable[[], Any]) -> tuple[TgRecord, float]:
        """The step's record and checksum (the summed loss of its first ``check_steps`` steps)."""
        # at least 3: a TinyJit replays from its third call, and capture must not be timed
        check = sum(float(self.numpy(step())) for _ in range(max(3, self.s.check_steps)))
        return self.record(case, self.timed(step), check), check

    def _mlp(self) -> list[TgRecord]:
        step = self.mlp_step()
        synced, check = self._train("mlp_step", step)
        steps = self.s.pipelined_steps
        piped = self.timed(lambda: [step() for _ in range(steps)], per_run=steps)
        return [synced, self.record("mlp_step_pipelined", piped, check)] + self.kernel_records()

    def _transformer(self) -> list[TgRecord]:
        return [self._train("transformer_step", self.transformer_step())[0]]

    def _op(self, case: str, fn: Callable[..., Any], *arrays: np.ndarray, bfloat16: bool = False) -> list[TgRecord]:
        """``fn`` on ``arrays`` (on the device; rounded to bfloat16 there with ``bfloat16``), ``repeat`` calls per
        timed run."""
        inputs, call = [self.tensor(a) for a in arrays], self.jit(fn)
        if bfloat16:
            inputs = [self.bfloat16(t) for t in inputs]
        for _ in range(3):
            out = call(*inputs)
        check = checksum(self.numpy(out))
        return [
            self.record(case, self.timed(lambda: [call(*inputs) for _ in range(self.s.repeat)], self.s.repeat), check)
        ]

    def _matmul_f32(self) -> list[TgRecord]:
        return self._op("matmul_f32", lambda a, b: a @ b, *seeded_inputs("matmul_f32", self.s).values())

    def _matmul_f16(self) -> list[TgRecord]:
        return self._op("matmul_f16", lambda a, b: a @ b, *seeded_inputs("matmul_f16", self.s).values())

    def _matmul_bf16(self) -> list[TgRecord]:
        arrays = seeded_inputs("matmul_bf16", self.s).values()
        return self._op("matmul_bf16", lambda a, b: a @ b, *arrays, bfloat16=True)

    def _add(self) -> list[TgRecord]:
        return self._op("add", lambda a, b: a + b, *seeded_inputs("add", self.s).values())

    def _add_bf16(self) -> list[TgRecord]:
        arrays = seeded_inputs("add_bf16", self.s).values()
        return self._op("add_bf16", lambda a, b: a + b, *arrays, bfloat16=True)

    def _sum(self) -> list[TgRecord]:
        return self._op("sum", lambda a: a.sum(), seeded_inputs("sum", self.s)["a"])

    def _gpt2(self) -> list[TgRecord]:
        decode = self.gpt2_decode()
        check = decode()
        if self.s.gpt2_tokens < 3:
            decode()  # a TinyJit captures on its second call: the timed runs must replay it
        return [self.record("gpt2_decode", self.timed(decode), check)]

    def _resnet50(self) -> list[TgRecord]:
        forward = self.resnet_forward()
        for _ in range(3):
            out = forward()
        return [self.record("resnet50", self.timed(forward), checksum(self.numpy(out)))]
