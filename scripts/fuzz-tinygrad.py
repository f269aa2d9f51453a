#!/usr/bin/env python3
"""Random tinygrad programs on VK against another tinygrad device (default CPU, clang): a differential fuzzer for the
renderer and the runtime. Prints each seed whose results differ (or that fails on VK only), with its program, unless
tinygrad's PYTHON device, asked where the two differ, agrees with VK (the reference's fault: counted apart).

    python3 scripts/fuzz-tinygrad.py                    # seeds 0..199
    python3 scripts/fuzz-tinygrad.py --seeds 5000:1000  # 1000 seeds from 5000
    python3 scripts/fuzz-tinygrad.py --seeds 180:1 -v   # one seed, its program printed
    python3 scripts/fuzz-tinygrad.py --jit              # each program under TinyJit (VK's graph), new data per call

A program is one to three random tensors (shapes of one to four axes, odd sizes among them, now and then one axis of
60,000 to 140,000; every dtype tinygrad's VK device has, bfloat16 by a cast) and one to six random steps: elementwise
(unary, binary against a random tensor or a constant, where), movement (permute, reshape, pad, shrink, flip, expand,
strided slices, a view at an offset into a realized buffer), reductions (over an axis, whole, argmax, and sums of
more than 65,535 terms, lavapipe's loop limit), casts, bitcasts, cumsum, gather, small matmuls and convolutions,
softmax. Integer results must be equal (within one where float16 or bfloat16 values took part); floats within 1e-3
of the largest reference magnitude, or 3e-2 where float16 or bfloat16 values took part. Division and modulo by zero,
shifts past the width and overflow of the 8- and 16-bit types are kept out (tinygrad leaves them to C, and the devices
differ); a chain of products can still overflow int32, so read a flagged seed's program. Run it from a checkout, with
clang for the CPU device.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("CACHELEVEL", "0")

from tinygrad import Tensor, TinyJit, dtypes  # noqa: E402
from tinygrad.dtype import DType  # noqa: E402
from tinygrad.engine.jit import JitError  # noqa: E402

import vkbackend.tinygrad  # noqa: E402, F401 - the VK device, for a checkout that was never installed

FLOATS = [dtypes.float32, dtypes.float16, dtypes.float64, dtypes.bfloat16]
INTS = {
    dtypes.int8: np.int8,
    dtypes.uint8: np.uint8,
    dtypes.int16: np.int16,
    dtypes.uint16: np.uint16,
    dtypes.int32: np.int32,
    dtypes.uint32: np.uint32,
    dtypes.int64: np.int64,
}
DTYPES = [*FLOATS, *INTS, dtypes.bool]
LEAF_DTYPES = [d for d in DTYPES if d != dtypes.bfloat16]  # numpy has no bfloat16: a cast makes one
NARROW = {dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16}  # products and long sums overflow: kept out
SIZES = [1, 2, 3, 4, 5, 7, 8, 13, 16, 17, 31, 33, 64]
TIGHT, LOOSE = 1e-3, 3e-2  # floats' tolerance, of the largest magnitude; LOOSE where 16-bit floats took part

Op = Callable[[Tensor, str], Tensor]  # a step, applied on the device named


@dataclass
class Program:
    leaves: list[np.ndarray] = field(default_factory=list)
    kinds: list[DType] = field(default_factory=list)  # the leaves' dtypes, for new data of their kind
    steps: list[tuple[int, str, Op]] = field(default_factory=list)  # (leaf it applies to, description, op)
    result: int = 0  # the leaf whose value is compared

    def apply(self, inputs: list[Tensor], device: str) -> Tensor:
        """The program's result from ``inputs`` (one tensor per leaf), realized; bfloat16 read as float32."""
        values = list(inputs)
        for i, _, op in self.steps:
            values[i] = op(values[i], device)
        result = values[self.result]
        return (result.float() if result.dtype == dtypes.bfloat16 else result).contiguous().realize()

    def run(self, device: str, leaves: list[np.ndarray] | None = None, realized: bool = False) -> np.ndarray:
        """The result on ``device`` from the program's leaves (or ``leaves``), realized first where asked (as the
        JIT's inputs are: a bitcast or a slice of one is then a view of its buffer)."""
        inputs = [Tensor(leaf, device=device) for leaf in (self.leaves if leaves is None else leaves)]
        return np.asarray(self.apply([t.realize() for t in inputs] if realized else inputs, device).numpy())

    def jitted(self, device: str) -> Callable[[list[np.ndarray]], np.ndarray]:
        """The program under TinyJit on ``device``: a call takes the leaves' data (realized inputs of the JIT)."""
        jit = TinyJit(lambda *inputs: self.apply(list(inputs), device))
        return lambda leaves: np.asarray(jit(*[Tensor(leaf, device=device).realize() for leaf in leaves]).numpy())

    def more_data(self, rng: random.Random) -> list[np.ndarray]:
        """New leaves of the same shapes and kinds."""
        return [random_data(rng, leaf.shape, kind) for leaf, kind in zip(self.leaves, self.kinds)]

    def half(self) -> bool:
        """Whether float16 or bfloat16 values take part: a float32 result is then only as close as theirs."""
        return any(leaf.dtype == np.float16 for leaf in self.leaves) or any(
            "half" in text or "bfloat16" in text for _, text, _ in self.steps
        )

    def describe(self) -> str:
        leaves = [f"leaf{i} {a.shape} {a.dtype}" for i, a in enumerate(self.leaves)]
        steps = [f"leaf{i}: {text}" for i, text, _ in self.steps]
        return " / ".join(leaves + steps) + f" -> leaf{self.result}"


def random_data(rng: random.Random, shape: tuple[int, ...], dtype: DType) -> np.ndarray:
    """Small values: no overflow in a few sums (and, 32 bits and wider, products) of any integer type."""
    state = np.random.RandomState(rng.randrange(2**31))
    if dtype == dtypes.bool:
        return np.asarray(state.rand(*shape) > 0.5)
    if dtype in FLOATS:
        scale = rng.choice([0.5, 2.0, 10.0])
        kind = {dtypes.float16: np.float16, dtypes.float64: np.float64}.get(dtype, np.float32)  # bfloat16: float32
        return np.asarray(state.randn(*shape) * scale).astype(kind)
    high = 20 if dtype in NARROW else 50
    low = 0 if dtype in dtypes.uints else -high
    return np.asarray(state.randint(low, high, size=shape)).astype(INTS[dtype])


def operand(rng: random.Random, like_shape: tuple[int, ...], dtype: DType) -> Callable[[str], Tensor]:
    """A second operand for a binary step: a constant, a tensor of the same shape, or one broadcast along an axis."""
    if rng.random() < 0.3:
        value = True if dtype == dtypes.bool else rng.choice([0, 1, 2, 3, 7])
        return lambda device: Tensor(value, dtype=dtype, device=device)
    shape = list(like_shape)
    if rng.random() < 0.3 and len(shape) > 1:
        shape[rng.randrange(len(shape))] = 1
    data = random_data(rng, tuple(shape), dtype)
    return lambda device: Tensor(data, device=device).cast(dtype)


def unary(rng: random.Random, t: Tensor) -> tuple[str, Op] | None:
    dt = t.dtype
    if dt == dtypes.bool:
        return "logical_not", lambda x, d: x.logical_not()
    if dt in FLOATS:
        ops: dict[str, Op] = {
            "neg": lambda x, d: -x,
            "exp2": lambda x, d: (x * 0.25).exp2(),
            "log2": lambda x, d: (x.abs() + 0.5).log2(),
            "sqrt": lambda x, d: x.abs().sqrt(),
            "sin": lambda x, d: x.sin(),
            "reciprocal": lambda x, d: (x.abs() + 0.5).reciprocal(),
            "abs": lambda x, d: x.abs(),
            "relu": lambda x, d: x.relu(),
            "floor": lambda x, d: x.floor(),
            "ceil": lambda x, d: x.ceil(),
            "trunc": lambda x, d: x.trunc(),
            "round": lambda x, d: x.round(),
            "sigmoid": lambda x, d: x.sigmoid(),
            "tanh": lambda x, d: x.tanh(),
            "square": lambda x, d: x.square(),
            "sign": lambda x, d: x.sign(),
        }
    else:
        shift = rng.randint(0, 3)
        ops = {
            "abs": lambda x, d: x.abs(),
            "bitwise_not": lambda x, d: x.bitwise_not(),
            f">> {shift}": lambda x, d: x.rshift(shift),
            "relu": lambda x, d: x.relu(),
            "sign": lambda x, d: x.sign(),
        }
        if dt not in NARROW:
            ops.update({"square": lambda x, d: x.square(), f"<< {shift}": lambda x, d: x.lshift(shift)})
        if dt not in dtypes.uints:
            ops["neg"] = lambda x, d: -x
    name = rng.choice(sorted(ops))
    return name, ops[name]


def binary(rng: random.Random, t: Tensor) -> tuple[str, Op] | None:
    dt = t.dtype
    other = operand(rng, t.shape, dt)

    def divisor(y: Tensor) -> Tensor:  # never zero
        return y.maximum(1) if dt in dtypes.uints else y.abs().maximum(1)

    ops: dict[str, Callable[[Tensor, Tensor], Tensor]] = {
        "add": lambda x, y: x + y,
        "max": lambda x, y: x.maximum(y),
        "min": lambda x, y: x.minimum(y),
        "lt": lambda x, y: x < y,
        "eq": lambda x, y: x == y,
        "ne": lambda x, y: x != y,
    }
    if dt == dtypes.bool:
        ops.update({"and": lambda x, y: x & y, "or": lambda x, y: x | y, "xor": lambda x, y: x ^ y})
    elif dt in FLOATS:
        ops.update({"sub": lambda x, y: x - y, "mul": lambda x, y: x * y, "div": lambda x, y: x / (y.abs() + 1)})
    else:
        ops.update(
            {
                "and": lambda x, y: x & y,
                "or": lambda x, y: x | y,
                "xor": lambda x, y: x ^ y,
                "idiv": lambda x, y: x // divisor(y),
                "mod": lambda x, y: x % divisor(y),
            }
        )
        if dt not in NARROW:
            ops["mul"] = lambda x, y: x * y
        if dt not in NARROW or dt in dtypes.sints:  # a narrow unsigned difference wraps, which CPU's C does not
            ops["sub"] = lambda x, y: x - y
    name = rng.choice(sorted(ops))
    fn = ops[name]
    return name, lambda x, d: fn(x, other(d))


def where(rng: random.Random, t: Tensor) -> tuple[str, Op] | None:
    cond = random_data(rng, t.shape, dtypes.bool)
    other = operand(rng, t.shape, t.dtype)
    return "where", lambda x, d: Tensor(cond, device=d).where(x, other(d))


def movement(rng: random.Random, t: Tensor) -> tuple[str, Op] | None:
    shape = t.shape
    kind = rng.choice(["permute", "reshape", "pad", "shrink", "flip", "expand", "transpose", "stride", "view"])
    if kind == "permute":
        order = list(range(len(shape)))
        rng.shuffle(order)
        return f"permute {order}", lambda x, d: x.permute(order)
    if kind == "reshape":
        n = math.prod(shape)
        rows = rng.choice([f for f in range(1, n + 1) if n % f == 0])
        return f"reshape {rows}x{n // rows}", lambda x, d: x.reshape(rows, n // rows)
    if kind == "pad":
        pads = tuple((rng.randint(0, 2), rng.randint(0, 2)) for _ in shape)
        value = False if t.dtype == dtypes.bool else rng.choice([0, 1])
        return f"pad {pads} {value}", lambda x, d: x.pad(pads, value=value)
    if kind == "shrink":
        spans = []
        for n in shape:
            low = rng.randint(0, n - 1)
            spans.append((low, rng.randint(low + 1, n)))
        return f"shrink {spans}", lambda x, d: x.shrink(tuple(spans))
    if kind == "flip":
        axis = rng.randrange(len(shape))
        return f"flip {axis}", lambda x, d: x.flip(axis)
    if kind == "expand":
        times = rng.randint(2, 5)
        return f"expand {times}", lambda x, d: x.unsqueeze(0).expand(times, *shape)
    if kind == "transpose":
        return "transpose, contiguous", lambda x, d: x.transpose(0, -1).contiguous()
    if kind == "stride":
        step = rng.randint(2, 3)
        return f"[::{step}]", lambda x, d: x[::step]
    offset = rng.randint(1, 7)  # a view at an element offset into a realized buffer
    if math.prod(shape) <= offset:
        return None
    return f"realized, flat[{offset}:]", lambda x, d: x.contiguous().realize().reshape(-1)[offset:]


def widened(x: Tensor) -> Tensor:
    """``x`` as int32 where it is a narrow integer type, whose sums overflow."""
    return x.cast(dtypes.int32) if x.dtype in NARROW else x


def reduce(rng: random.Random, t: Tensor) -> tuple[str, Op] | None:
    axis = rng.randrange(len(t.shape))
    if t.dtype == dtypes.bool:
        return f"any {axis}", lambda x, d: x.any(axis=axis)
    ops: dict[str, Op] = {
        "sum": lambda x, d: widened(x).sum(axis=axis),
        "max": lambda x, d: x.max(axis=axis),
        "min": lambda x, d: x.min(axis=axis),
        "mean": lambda x, d: x.float().mean(axis=axis),
        "sum of all": lambda x, d: widened(x).sum(),
        "max of all": lambda x, d: x.max(),
        "argmax": lambda x, d: x.argmax(axis=axis),
    }
    if t.dtype not in FLOATS and t.shape[axis] <= 4:
        ops["prod"] = lambda x, d: widened(x).prod(axis=axis)
    name = rng.choice(sorted(ops))
    return f"{name} {axis}", ops[name]


def long_sum(rng: random.Random, t: Tensor) -> tuple[str, Op] | None:
    """A sum of more terms than lavapipe runs loop iterations in one invocation."""
    if t.dtype == dtypes.bool:
        return None
    times = rng.choice([20000, 70001, 140000]) // math.prod(t.shape) + 1
    if t.dtype in FLOATS:
        return f"sum of {times} copies / {times}", lambda x, d: x.float().reshape(-1).repeat(times).sum() / times
    return f"sum of {times} copies", lambda x, d: x.cast(dtypes.int64).reshape(-1).repeat(times).sum()


def cast(rng: random.Random, t: Tensor) -> tuple[str, Op] | None:
    to = rng.choice(DTYPES)
    if t.dtype in FLOATS and to in dtypes.uints:
        return f"abs, clip, cast {to}", lambda x, d: x.abs().clip(0, 40).cast(to)
    if t.dtype in FLOATS and to in dtypes.sints:
        return f"clip, cast {to}", lambda x, d: x.clip(-40, 40).cast(to)
    if t.dtype in dtypes.sints and to in dtypes.uints:
        return f"abs, cast {to}", lambda x, d: x.abs().cast(to)
    return f"cast {to}", lambda x, d: x.cast(to)


def bitcast(rng: random.Random, t: Tensor, exact: bool) -> tuple[str, Op] | None:
    """Integer to integer, or a float leaf's bits (a computed float's last bits may differ within the tolerance)."""
    pairs = {
        dtypes.float32: [dtypes.int32, dtypes.uint32],
        dtypes.float16: [dtypes.int16, dtypes.uint16],
        dtypes.int32: [dtypes.uint32],
        dtypes.uint32: [dtypes.int32],
        dtypes.int16: [dtypes.uint16],
        dtypes.uint16: [dtypes.int16],
        dtypes.int8: [dtypes.uint8],
        dtypes.uint8: [dtypes.int8],
    }
    if t.dtype not in pairs or (t.dtype in FLOATS and not exact):
        return None
    to = rng.choice(pairs[t.dtype])
    return f"bitcast {to}", lambda x, d: x.contiguous().bitcast(to)


def cumsum(rng: random.Random, t: Tensor) -> tuple[str, Op] | None:
    if t.dtype == dtypes.bool:
        return None
    axis = rng.randrange(len(t.shape))
    return f"cumsum {axis}", lambda x, d: widened(x).cumsum(axis)


def gather(rng: random.Random, t: Tensor) -> tuple[str, Op] | None:
    index = np.random.RandomState(rng.randrange(2**31)).randint(0, t.shape[0], size=rng.randint(1, 9))
    index = index.astype(np.int32)
    return f"gather {index.tolist()}", lambda x, d: x[Tensor(index, device=d)]


def matmul(rng: random.Random, t: Tensor) -> tuple[str, Op] | None:
    if t.dtype not in FLOATS or len(t.shape) < 2:
        return None
    k, n = t.shape[-1], rng.choice([1, 3, 8, 16, 17])
    weight = random_data(rng, (k, n), t.dtype)
    return f"@ ({k}, {n})", lambda x, d: x @ Tensor(weight, device=d)


def conv(rng: random.Random, t: Tensor) -> tuple[str, Op] | None:
    if t.dtype not in FLOATS:
        return None
    cin, cout, k = rng.randint(1, 3), rng.randint(1, 4), rng.choice([1, 2, 3])
    side = rng.randint(k, 12)
    image, weight = random_data(rng, (2, cin, side, side + 1), t.dtype), random_data(rng, (cout, cin, k, k), t.dtype)
    stride, padding = rng.choice([1, 2]), rng.choice([0, 1])

    def op(x: Tensor, d: str) -> Tensor:
        out = Tensor(image, device=d).float().conv2d(Tensor(weight, device=d).float(), stride=stride, padding=padding)
        return out.cast(x.dtype)

    return f"conv2d {cin}->{cout} k{k} {side}x{side + 1} stride {stride} pad {padding} (replaces)", op


def softmax(rng: random.Random, t: Tensor) -> tuple[str, Op] | None:
    return ("softmax", lambda x, d: x.softmax(-1)) if t.dtype in FLOATS else None


STEPS = [
    unary,
    binary,
    binary,
    where,
    movement,
    movement,
    reduce,
    long_sum,
    cast,
    cumsum,
    gather,
    matmul,
    conv,
    softmax,
]


def make_program(seed: int, device: str) -> Program:
    rng = random.Random(seed)
    program = Program()
    for _ in range(rng.randint(1, 3)):
        shape = tuple(rng.choice(SIZES) for _ in range(rng.randint(1, 4)))
        if rng.random() < 0.1:  # a long axis, half the time of a prime length: past 65,535 (many devices' limit of
            length = rng.randint(60000, 140000)  # work groups per axis) a prime has no divisor that fits
            prime = rng.random() < 0.5
            while prime and any(length % d == 0 for d in range(2, math.isqrt(length) + 1)):
                length += 1
            shape = (length,)
        program.kinds.append(rng.choice(LEAF_DTYPES))
        program.leaves.append(random_data(rng, shape, program.kinds[-1]))
    # the steps are drawn against shapes and dtypes known only by running them: on tinygrad's lazy tensors, which
    # compute nothing until the result is asked for
    values = [Tensor(leaf, device=device) for leaf in program.leaves]
    exact = [True] * len(values)
    for _ in range(rng.randint(1, 6)):
        i = rng.randrange(len(values))
        make = rng.choice([*STEPS, "bitcast"])
        try:
            step = bitcast(rng, values[i], exact[i]) if make == "bitcast" else make(rng, values[i])
            if step is None:
                continue
            values[i] = step[1](values[i], values[i].device)
        except (AssertionError, ValueError, RuntimeError, TypeError, IndexError, subprocess.CalledProcessError):
            continue  # a step tinygrad refuses for this shape or dtype, or the reference's compiler for its dtype
        program.steps.append((i, *step))
        exact[i] = exact[i] and make in (movement, gather)
    program.result = rng.randrange(len(values))
    return program


def compare(got: np.ndarray, want: np.ndarray, half: bool = False) -> str | None:
    """Why ``got`` (VK) is not ``want`` (the reference), or None where it is; ``half``: 16-bit floats took part
    (tinygrad computes in them, and a device may round a step's result either way: 1 - 2.4e-4 is float16's 0.99951
    or 1.0, and cast to an integer, 0 or 1)."""
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"shape/dtype {got.shape} {got.dtype} against {want.shape} {want.dtype}"
    if got.dtype.kind == "f":
        a, b = got.astype(np.float64), want.astype(np.float64)
        finite = b[np.isfinite(b)]
        scale = max(1.0, float(np.abs(finite).max())) if finite.size else 1.0
        tol = LOOSE if half or got.dtype == np.float16 else TIGHT
        same = np.isclose(a, b, rtol=tol, atol=tol * scale, equal_nan=True) | (a == b)
    elif half and got.dtype.kind in "iu":  # a 16-bit float's last bit, truncated to an integer, moves it by one
        same = np.abs(got.astype(np.int64) - want.astype(np.int64)) <= 1
    else:
        same = got == want
    if same.all():
        return None
    where = [tuple(int(i) for i in ix) for ix in np.argwhere(~same)[:3]]
    return f"{(~same).sum()} of {same.size} differ: " + "; ".join(f"{ix}: {got[ix]} against {want[ix]}" for ix in where)


def second_opinion(program: Program, got: np.ndarray, device: str) -> bool:
    """Whether ``device`` agrees with VK's result ``got`` (False where it cannot run the program)."""
    try:
        return compare(got, program.run(device), program.half()) is None
    except Exception:  # noqa: BLE001 - no opinion
        return False


def check(program: Program, reference: str, second: str) -> tuple[str, str | None]:
    """``(outcome, message)`` of one program on VK against ``reference``, asking ``second`` where they differ."""
    try:
        want = program.run(reference)
    except Exception:  # noqa: BLE001 - a program the reference cannot run says nothing about VK
        return "reference failed", None
    try:
        got = program.run("VK")
    except Exception as error:  # noqa: BLE001 - reported with its seed
        return "differ", f"VK raised {type(error).__name__}: {str(error)[:300]}"
    problem = compare(got, want, program.half())
    if problem and second and second_opinion(program, got, second):
        return f"{reference} alone differs", f"{reference} differs, VK agrees with {second}"
    return ("differ", problem) if problem else ("same", None)


def check_jitted(program: Program, reference: str, rng: random.Random, calls: int = 4) -> tuple[str, str | None]:
    """The program under TinyJit on VK (its first call runs, its second captures, the rest replay), called with new
    data each time, against the reference run without the JIT; where they differ, the reference's own JIT, called
    alike, is asked: where it agrees with VK, the fault is tinygrad's JIT (it keeps a view of an input, a bitcast or
    a slice of one, from the call it captured)."""
    if not any(i == program.result for i, _, _ in program.steps):
        return "nothing to capture", None
    ours, theirs = program.jitted("VK"), program.jitted(reference)
    for call in range(calls):
        leaves = program.leaves if call == 0 else program.more_data(rng)
        try:
            want = program.run(reference, leaves, realized=True)
        except Exception:  # noqa: BLE001 - as in check()
            return "reference failed", None
        outcomes = []
        for jitted in (ours, theirs):
            try:
                outcomes.append(jitted(leaves))
            except JitError:  # a program of views alone: no kernel to capture
                return "nothing to capture", None
            except Exception as error:  # noqa: BLE001 - compared below
                outcomes.append(error)
        got, jitted_want = outcomes
        if isinstance(got, Exception):
            if isinstance(jitted_want, Exception) and type(jitted_want) is type(got):
                return "the JIT alone differs", f"call {call}: {reference}'s JIT raised alike: {got}"
            return "differ", f"call {call}: VK raised {type(got).__name__}: {str(got)[:300]}"
        problem = compare(got, want, program.half())
        if problem and not isinstance(jitted_want, Exception) and compare(got, jitted_want, program.half()) is None:
            return "the JIT alone differs", f"call {call}: {reference}'s JIT differs alike"
        if problem:
            return "differ", f"call {call}: {problem}"
    return "same", None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="0:200", help="START:COUNT (default 0:200)")
    parser.add_argument("--reference", default="CPU", help="the device VK is compared with (default CPU)")
    parser.add_argument(
        "--second",
        default="PYTHON",
        help="where VK and the reference differ, the device asked too (default PYTHON, tinygrad's emulator; '' none)",
    )
    parser.add_argument("--jit", action="store_true", help="each program under TinyJit, called four times")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every program")
    args = parser.parse_args(argv)
    start, count = (int(x) for x in args.seeds.split(":"))
    tally: Counter[str] = Counter()
    for seed in range(start, start + count):
        program = make_program(seed, args.reference)
        if args.verbose:
            print(f"seed {seed}: {program.describe()}")
        if args.jit:
            outcome, message = check_jitted(program, args.reference, random.Random(-seed))
        else:
            outcome, message = check(program, args.reference, args.second)
        tally[outcome] += 1
        if outcome == "differ":
            print(f"seed {seed}: {message}\n  {program.describe()}", flush=True)
        elif message:
            print(f"seed {seed}: {message}", flush=True)
    print(f"seeds {start}..{start + count - 1}: " + ", ".join(f"{k} {v}" for k, v in sorted(tally.items())))
    return 1 if tally["differ"] else 0


if __name__ == "__main__":
    sys.exit(main())
