"""The tinygrad bench's workloads on one tinygrad device: the default device (``DEV``) of this process.

``protocol.Workloads`` runs, times and checks them; this module builds them with tinygrad: jitted training steps
(Adam / AdamW under ``Context(TRAINING=1)``), a jitted decode step on a symbolic position, a jitted ResNet forward,
and the MLP step's per-kernel GPU times (``kernels``).
"""

from __future__ import annotations

import gc
import subprocess
from collections.abc import Callable

import numpy as np
from tinygrad import Context, Device, Tensor, TinyJit, UOp, dtypes, nn
from tinygrad.engine.jit import GraphRunner
from tinygrad.nn.optim import Adam, AdamW, Optimizer

from vkbackend.bench.tinygrad.kernels import kernel_times
from vkbackend.bench.tinygrad.models import MLP, GPT2Decoder, ResNet, TransformerStack, load_seeded
from vkbackend.bench.tinygrad.protocol import SEED, Skip, Workloads, seeded_inputs
from vkbackend.bench.tinygrad.spec import KERNEL_CASE, TgRecord, TgSizes


class TinygradWorkloads(Workloads):
    """The workloads on tinygrad device ``device``, which must be tinygrad's default device (the child sets ``DEV``
    before importing tinygrad), since models create their weights there."""

    def __init__(self, device: str, sizes: TgSizes) -> None:
        super().__init__(device, sizes)
        self.dev = Device[device]
        self._kernels: Callable[[], list[TgRecord]] = list

    def sync(self) -> None:
        self.dev.synchronize()

    def tensor(self, array: np.ndarray) -> Tensor:
        return Tensor(array).realize()

    def numpy(self, tensor: Tensor) -> np.ndarray:
        return (tensor.float() if tensor.dtype == dtypes.bfloat16 else tensor).numpy()

    def bfloat16(self, tensor: Tensor) -> Tensor:
        try:
            return tensor.cast(dtypes.bfloat16).realize()
        except subprocess.CalledProcessError as error:  # tinygrad's CPU device: a clang without __bf16 (before 17)
            program = error.cmd if isinstance(error.cmd, str) else error.cmd[0]
            raise Skip(f"tinygrad's {self.impl} device cannot compile bfloat16 here ({program} failed)") from error

    def jit(self, fn: Callable[..., Tensor]) -> Callable[..., Tensor]:
        return TinyJit(lambda *args: fn(*args).realize())

    def _train_step(
        self, model: object, opt: Optimizer, loss_fn: Callable[..., Tensor], *inputs: Tensor
    ) -> tuple[TinyJit, Callable[[], Tensor]]:
        """The jitted step (loss, backward, optimiser in one schedule) and a call of it on ``inputs``."""

        @TinyJit
        def step(*args: Tensor) -> Tensor:
            with Context(TRAINING=1):
                opt.zero_grad()
                loss = loss_fn(*args)
                loss.backward()
                return loss.realize(*opt.schedule_step())

        return step, lambda: step(*inputs)

    def mlp_step(self) -> Callable[[], Tensor]:
        s, data = self.s, seeded_inputs("mlp", self.s)
        model = MLP(s.mlp_widths)
        load_seeded(model, SEED)
        x, y = self.tensor(data["x"]), self.tensor(data["y"])
        step, call = self._train_step(
            model,
            Adam(nn.state.get_parameters(model), lr=1e-3),
            lambda a, b: model(a).sparse_categorical_crossentropy(b),
            x,
            y,
        )
        self._kernels = lambda: self._kernel_records(step, x, y)
        return call

    def transformer_step(self) -> Callable[[], Tensor]:
        s, data = self.s, seeded_inputs("transformer", self.s)
        model = TransformerStack(s.tf_layers, s.tf_dim, s.tf_heads)
        load_seeded(model, SEED)
        return self._train_step(
            model,
            AdamW(nn.state.get_parameters(model), lr=1e-4),
            lambda a, b: (model(a) - b).square().mean(),
            self.tensor(data["x"]),
            self.tensor(data["y"]),
        )[1]

    def gpt2_decode(self) -> Callable[[], float]:
        """Teacher-forced: the seeded tokens go in one at a time (the position is a bound symbolic variable, so one
        captured JIT serves every position) and each step's [argmax, max logit] comes back to the host, as a real
        decoder reads every token back."""
        token, tokens = self.gpt2_decoder()
        return lambda: sum(token(i, t) for i, t in enumerate(tokens))

    def gpt2_decoder(self) -> tuple[Callable[[int, int], float], list[int]]:
        """:meth:`gpt2_decode`'s parts: one token's step (position, token -> its max logit) and the seeded tokens."""
        s = self.s
        tokens = seeded_inputs("gpt2", s)["tokens"].tolist()
        model = GPT2Decoder(s.gpt2_layers, s.gpt2_dim, s.gpt2_heads, s.gpt2_vocab, s.gpt2_positions, s.gpt2_tokens)
        load_seeded(model, SEED)
        step = TinyJit(lambda tok, pos: model(tok, pos).realize())
        pos = UOp.variable("pos", 0, s.gpt2_tokens - 1)
        return lambda i, t: step(Tensor([[t]], dtype=dtypes.int32), pos.bind(i)).tolist()[1], tokens

    def resnet_forward(self) -> Callable[[], Tensor]:
        forward, x = self.resnet_jit()
        return lambda: forward(x)

    def resnet_jit(self) -> tuple[TinyJit, Tensor]:
        """:meth:`resnet_forward`'s parts: the jitted forward (not yet captured) and its seeded input batch."""
        s = self.s
        model = ResNet(s.resnet_layers, s.resnet_classes, s.resnet_width)
        load_seeded(model, SEED)
        return TinyJit(lambda a: model(a).realize()), self.tensor(seeded_inputs("resnet50", s)["x"])

    def kernel_records(self) -> list[TgRecord]:
        return self._kernels()

    def _kernel_records(self, step: TinyJit, *inputs: Tensor) -> list[TgRecord]:
        """One ``mlp_kernel`` record per kernel of the captured step: the median of ``kernel_reps`` timed passes."""
        passes = [kernel_times(step, *inputs) for _ in range(self.s.kernel_reps)]
        records = []
        for index, (name, _) in enumerate(passes[0]):
            record = TgRecord.of_samples(KERNEL_CASE, self.impl, [p[index][1] * 1e6 for p in passes], None)
            record.kernel, record.index = name, index
            records.append(record)
        return records


def warm_gpt2_decoder(device: str, quick: bool = False) -> tuple[Callable[[int, int], float], list[int]]:
    """:meth:`TinygradWorkloads.gpt2_decoder` on ``device`` (the small model of ``bench --tinygrad --quick`` with
    ``quick``) after two untimed passes: compilation, the JIT's capture and a warm pass (the decode scripts')."""
    token, seeded = TinygradWorkloads(device, TgSizes.quick() if quick else TgSizes.full()).gpt2_decoder()
    for _ in range(2):
        for i, t in enumerate(seeded):
            token(i, t)
    return token, seeded


def warm_resnet_jit(device: str, quick: bool = False) -> tuple[TinyJit, Tensor]:
    """:meth:`TinygradWorkloads.resnet_jit` on ``device`` (the small ResNet of ``bench --tinygrad --quick`` with
    ``quick``) after three forwards, synced: compiled, captured and replayed (the kernel scripts')."""
    workloads = TinygradWorkloads(device, TgSizes.quick() if quick else TgSizes.full())
    forward, x = workloads.resnet_jit()
    for _ in range(3):
        forward(x)
    workloads.sync()
    return forward, x


def graph_runner_types() -> set[type[GraphRunner]]:
    """The classes of the JIT graph runners alive in this process (``VKGraph``, ``CUDAGraph``, ...): what a script
    wraps to time or trace the replays."""
    return {type(o) for o in gc.get_objects() if isinstance(o, GraphRunner)}
