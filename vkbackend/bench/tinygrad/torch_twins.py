"""The PyTorch twins of the tinygrad bench's workloads: the same models (same parameter names, so the same seeded
arrays), inputs, checksums and timed runs, in eager PyTorch.

They run on CUDA where PyTorch has it; without CUDA only at ``--quick`` sizes, on the CPU, as a check of the twins
themselves. TF32 is off, so float32 matmuls and convolutions compute what tinygrad's do. ResNet-50 is torchvision's
``resnet50(weights=None)`` layout and runs only where torchvision is importable.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from vkbackend.bench.tinygrad.protocol import SEED, Skip, Workloads, seeded_inputs, seeded_state
from vkbackend.bench.tinygrad.spec import TgRecord, TgSizes


def load_seeded(model: nn.Module, seed: int = SEED) -> nn.Module:
    """Every parameter and buffer of ``model`` set to its seeded numpy value (as ``models.load_seeded``)."""
    shapes = {k: tuple(t.shape) for k, t in model.state_dict().items()}
    model.load_state_dict({k: torch.from_numpy(v) for k, v in seeded_state(shapes, seed).items()})
    return model


class MLP(nn.Module):
    def __init__(self, widths: tuple[int, ...]) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(widths, widths[1:]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i < len(self.layers) - 1:
                x = F.relu(x)
        return x


class Block(nn.Module):
    """``models.Block``: pre-norm causal attention and a 4x tanh-GELU MLP."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.fc1, self.fc2 = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def _qkv(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        return self.qkv(self.ln1(x)).reshape(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)

    def _out(self, x: torch.Tensor, attn: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        x = x + self.proj(attn.transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self._qkv(x)
        return self._out(x, F.scaled_dot_product_attention(q, k, v, is_causal=True))

    def decode(self, x: torch.Tensor, pos: int, cache_k: torch.Tensor, cache_v: torch.Tensor) -> torch.Tensor:
        q, k, v = self._qkv(x)
        cache_k[:, :, pos : pos + 1] = k
        cache_v[:, :, pos : pos + 1] = v
        return self._out(x, F.scaled_dot_product_attention(q, cache_k[:, :, : pos + 1], cache_v[:, :, : pos + 1]))


class TransformerStack(nn.Module):
    def __init__(self, layers: int, dim: int, heads: int) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return x


class GPT2Decoder(nn.Module):
    """``models.GPT2Decoder``; the KV caches are plain attributes (not in the state dict)."""

    def __init__(self, layers: int, dim: int, heads: int, vocab: int, positions: int, max_len: int) -> None:
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, dim), nn.Embedding(positions, dim)
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(dim)
        self.cache_shape = (1, heads, max_len, dim // heads)
        self.cache: list[tuple[torch.Tensor, torch.Tensor]] = []

    def forward(self, token: torch.Tensor, pos: int) -> torch.Tensor:
        if not self.cache:
            self.cache = [
                (self.wte.weight.new_zeros(self.cache_shape), self.wte.weight.new_zeros(self.cache_shape))
                for _ in self.blocks
            ]
        x = self.wte(token) + self.wpe.weight[pos : pos + 1].reshape(1, 1, -1)
        for block, (cache_k, cache_v) in zip(self.blocks, self.cache):
            x = block.decode(x, pos, cache_k, cache_v)
        logits = (self.ln_f(x) @ self.wte.weight.T).flatten()
        return torch.stack([logits.argmax().float(), logits.max()])


class TorchWorkloads(Workloads):
    """The workloads in eager PyTorch on ``device`` ("cuda:0" or "cpu")."""

    def __init__(self, device: str, sizes: TgSizes) -> None:
        super().__init__("torch", sizes)
        self.device = device
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False

    def run(self, workload: str) -> list[TgRecord]:
        with torch.inference_mode(workload not in ("mlp", "transformer")):
            return super().run(workload)

    def sync(self) -> None:
        if self.device.startswith("cuda"):
            torch.cuda.synchronize(self.device)

    def tensor(self, array: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(array).to(self.device)

    def numpy(self, tensor: torch.Tensor) -> np.ndarray:
        return tensor.detach().float().cpu().numpy()

    def bfloat16(self, tensor: torch.Tensor) -> torch.Tensor:
        return tensor.to(torch.bfloat16)

    @staticmethod
    def _train_step(
        model: nn.Module, opt: torch.optim.Optimizer, loss_fn: Callable[[], torch.Tensor]
    ) -> Callable[[], torch.Tensor]:
        def step() -> torch.Tensor:
            opt.zero_grad(set_to_none=True)
            loss = loss_fn()
            loss.backward()
            opt.step()
            return loss

        return step

    def mlp_step(self) -> Callable[[], torch.Tensor]:
        s, data = self.s, seeded_inputs("mlp", self.s)
        model = load_seeded(MLP(s.mlp_widths)).to(self.device)
        x, y = self.tensor(data["x"]), self.tensor(data["y"]).long()
        return self._train_step(
            model, torch.optim.Adam(model.parameters(), lr=1e-3), lambda: F.cross_entropy(model(x), y)
        )

    def transformer_step(self) -> Callable[[], torch.Tensor]:
        s, data = self.s, seeded_inputs("transformer", self.s)
        model = load_seeded(TransformerStack(s.tf_layers, s.tf_dim, s.tf_heads)).to(self.device)
        x, y = self.tensor(data["x"]), self.tensor(data["y"])
        return self._train_step(
            model, torch.optim.AdamW(model.parameters(), lr=1e-4), lambda: (model(x) - y).square().mean()
        )

    def gpt2_decode(self) -> Callable[[], float]:
        s = self.s
        tokens = seeded_inputs("gpt2", s)["tokens"].tolist()
        model = load_seeded(
            GPT2Decoder(s.gpt2_layers, s.gpt2_dim, s.gpt2_heads, s.gpt2_vocab, s.gpt2_positions, s.gpt2_tokens)
        ).to(self.device)
        return lambda: sum(model(torch.tensor([[t]], device=self.device), i).tolist()[1] for i, t in enumerate(tokens))

    def resnet_forward(self) -> Callable[[], torch.Tensor]:
        if importlib.util.find_spec("torchvision") is None:
            raise Skip("torchvision is not importable")
        from torchvision.models.resnet import Bottleneck, ResNet

        s = self.s
        model = ResNet(Bottleneck, list(s.resnet_layers), num_classes=s.resnet_classes, width_per_group=s.resnet_width)
        model = load_seeded(model).to(self.device).eval()
        x = self.tensor(seeded_inputs("resnet50", s)["x"])
        return lambda: model(x)


def torch_device(quick: bool) -> str:
    """Where the twins run: the first CUDA device, else (only at ``--quick`` sizes) the CPU; Skip otherwise."""
    if torch.cuda.is_available():
        return "cuda:0"
    if quick:
        return "cpu"
    raise Skip(f"torch {torch.__version__} has no CUDA device (the CPU runs the twins only with --quick)")
