"""The tinygrad bench's models, written with ``tinygrad.nn``: an MLP, a transformer block stack, a GPT-2-shaped decoder
with a KV cache, and a torchvision-shaped ResNet.

Parameter names follow ``torch.nn`` / torchvision (``layers.0.weight``, ``layer1.0.bn2.running_var``...), so the
PyTorch twins (``torch_twins``) load the very same numpy arrays from ``protocol.seeded_state``.
"""

from __future__ import annotations

from tinygrad import Tensor, UOp, dtypes, nn
from tinygrad.nn.state import get_state_dict, load_state_dict

from vkbackend.bench.tinygrad.protocol import seeded_state


def load_seeded(model: object, seed: int, skip: str = "cache") -> None:
    """Give every parameter and buffer of ``model`` its seeded numpy value (names starting with ``skip`` are state,
    not parameters, and keep theirs)."""
    shapes = {k: tuple(t.shape) for k, t in get_state_dict(model).items() if not k.startswith(skip)}
    state = {k: Tensor(v) for k, v in seeded_state(shapes, seed).items()}
    load_state_dict(model, state, strict=False, verbose=False)


class MLP:
    """Linear layers with ReLU between them: ``widths`` = (inputs, hidden..., outputs)."""

    def __init__(self, widths: tuple[int, ...]) -> None:
        self.layers = [nn.Linear(a, b) for a, b in zip(widths, widths[1:])]

    def __call__(self, x: Tensor) -> Tensor:
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i < len(self.layers) - 1:
                x = x.relu()
        return x


class Block:
    """A pre-norm transformer block: causal multi-head self-attention, then a 4x GELU MLP, both residual.

    ``decode`` runs one token against a KV cache of ``max_len`` positions (the GPT-2 case); ``__call__`` a whole
    sequence (the training case).
    """

    def __init__(self, dim: int, heads: int) -> None:
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.fc1, self.fc2 = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def _qkv(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).reshape(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        return q, k, v  # each (batch, heads, time, head_dim)

    def _out(self, x: Tensor, attn: Tensor) -> Tensor:
        b, t, d = x.shape
        x = x + self.proj(attn.transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(self.fc1(self.ln2(x)).gelu())

    def __call__(self, x: Tensor) -> Tensor:
        q, k, v = self._qkv(x)
        return self._out(x, q.scaled_dot_product_attention(k, v, is_causal=True))

    def decode(self, x: Tensor, pos: UOp | int, cache_k: Tensor, cache_v: Tensor) -> Tensor:
        """One token at position ``pos`` (a bound variable under the JIT): its key and value go into the caches,
        then it attends to positions 0..pos."""
        q, k, v = self._qkv(x)
        cache_k[:, :, pos : pos + 1, :].assign(k)
        cache_v[:, :, pos : pos + 1, :].assign(v)
        keys, values = cache_k[:, :, 0 : pos + 1, :], cache_v[:, :, 0 : pos + 1, :]
        return self._out(x, q.scaled_dot_product_attention(keys, values))


class TransformerStack:
    """``layers`` blocks of width ``dim``: the transformer training case's model (input and output (B, T, dim))."""

    def __init__(self, layers: int, dim: int, heads: int) -> None:
        self.blocks = [Block(dim, heads) for _ in range(layers)]

    def __call__(self, x: Tensor) -> Tensor:
        for block in self.blocks:
            x = block(x)
        return x


class GPT2Decoder:
    """A GPT-2-shaped decoder (token and position embeddings, blocks, final LayerNorm, LM head tied to the token
    embedding) that decodes one token at a time with a KV cache of ``max_len`` positions per layer."""

    def __init__(self, layers: int, dim: int, heads: int, vocab: int, positions: int, max_len: int) -> None:
        self.wte, self.wpe = nn.Embedding(vocab, dim), nn.Embedding(positions, dim)
        self.blocks = [Block(dim, heads) for _ in range(layers)]
        self.ln_f = nn.LayerNorm(dim)
        # realized zero caches, written in place by decode (names start with "cache": not parameters)
        self.cache = [
            [Tensor.zeros(1, heads, max_len, dim // heads).contiguous().realize() for _ in range(2)]
            for _ in range(layers)
        ]

    def __call__(self, token: Tensor, pos: UOp | int) -> Tensor:
        """``token`` (1, 1) int32 at position ``pos``: [argmax, max] of the next-token logits, as float32 (2,)."""
        x = self.wte(token) + self.wpe.weight[pos : pos + 1].reshape(1, 1, -1)
        for block, (cache_k, cache_v) in zip(self.blocks, self.cache):
            x = block.decode(x, pos, cache_k, cache_v)
        logits = (self.ln_f(x) @ self.wte.weight.T).flatten()
        return Tensor.stack(logits.argmax().cast(dtypes.float32), logits.max())


class Bottleneck:
    """torchvision's ResNet v1.5 bottleneck: 1x1, 3x3 (with the stride), 1x1 to ``planes * 4``, plus the shortcut."""

    def __init__(self, inplanes: int, planes: int, stride: int, width: int) -> None:
        self.conv1, self.bn1 = nn.Conv2d(inplanes, width, 1, bias=False), nn.BatchNorm(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm(width)
        self.conv3, self.bn3 = nn.Conv2d(width, planes * 4, 1, bias=False), nn.BatchNorm(planes * 4)
        self.downsample = (
            [nn.Conv2d(inplanes, planes * 4, 1, stride=stride, bias=False), nn.BatchNorm(planes * 4)]
            if stride != 1 or inplanes != planes * 4
            else []
        )

    def __call__(self, x: Tensor) -> Tensor:
        out = self.bn1(self.conv1(x)).relu()
        out = self.bn2(self.conv2(out)).relu()
        out = self.bn3(self.conv3(out))
        return (out + (x.sequential(self.downsample) if self.downsample else x)).relu()


class ResNet:
    """torchvision's ``ResNet(Bottleneck, layers, num_classes, width_per_group)`` for inference (BatchNorm uses its
    running statistics outside ``Context(TRAINING=1)``); ResNet-50 is ``layers=(3, 4, 6, 3)``."""

    def __init__(self, layers: tuple[int, ...], num_classes: int, width_per_group: int = 64) -> None:
        self.conv1, self.bn1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False), nn.BatchNorm(64)
        inplanes = 64
        for i, (planes, blocks) in enumerate(zip((64, 128, 256, 512), layers)):
            width = planes * width_per_group // 64
            stage = []
            for j in range(blocks):
                stage.append(Bottleneck(inplanes, planes, 2 if i and not j else 1, width))
                inplanes = planes * 4
            setattr(self, f"layer{i + 1}", stage)
        self.stages = len(layers)
        self.fc = nn.Linear(inplanes, num_classes)

    def __call__(self, x: Tensor) -> Tensor:
        x = self.bn1(self.conv1(x)).relu().max_pool2d(kernel_size=(3, 3), stride=2, padding=1)
        for i in range(self.stages):
            x = x.sequential(getattr(self, f"layer{i + 1}"))
        return self.fc(x.mean((2, 3)))
