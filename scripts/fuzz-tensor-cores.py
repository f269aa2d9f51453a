#!/usr/bin/env python3
"""Random matrix products through tinygrad's tensor cores on VK, each under a random list of the optimisations BEAM
search chooses from, against numpy: a differential fuzzer for the renderer's tensor-core kernels.

    python3 scripts/fuzz-tensor-cores.py                   # seeds 0..99
    python3 scripts/fuzz-tensor-cores.py --seeds 500:300   # 300 seeds from 500
    python3 scripts/fuzz-tensor-cores.py --emulate         # WMMA in scalar code (any device; lavapipe's default)

A case is ``A (m x k) @ B (k x n)`` (each of m, n, k one of 16 to 128; B transposed in memory now and then) in one of
the device's tensor-core shapes, its result in the shape's result type (``A.matmul(B, dtype=...)``) or in its input
type (``A @ B``, accumulated in float32), under the shape's tensor-core optimisation then zero to three of BEAM's
actions (upcasts, unrolls, local dimensions, swaps; the upcasts and unrolls multiplying to at most 8 with --emulate,
where lavapipe's compiler takes minutes over larger emulated kernels, and 64 otherwise). On a device with cooperative
matrices the kernels are the ones tinygrad would run there; with --emulate (the default where the device has none) the
renderer stages each WMMA and computes it in scalar code, in either register layout. Results must be within
1e-5 x sqrt(k) of the largest magnitude (float32 results), 2e-3 (float16), 5e-3 (bfloat16) of numpy's float64 product
of the inputs as numpy rounds them (the device does not convert them). A case whose last kernel is not the product
(tinygrad split the reduction) is counted apart; one the tensor-core optimisation does not apply to, too (printed with
-v). Exit status 1 where a product differs or a case fails, 2 where none was compared.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import random
import sys
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("CACHELEVEL", "0")  # render and compile every case, not take it from tinygrad's disk cache

from tinygrad import Device, Tensor, dtypes  # noqa: E402
from tinygrad.codegen.opt import KernelOptError, Opt, OptOps  # noqa: E402
from tinygrad.codegen.opt.postrange import Scheduler  # noqa: E402
from tinygrad.codegen.opt.search import get_kernel_actions  # noqa: E402
from tinygrad.helpers import Context, Target  # noqa: E402

import vkbackend.tinygrad  # noqa: E402, F401 - the VK device, for a checkout that was never installed
from vkbackend.tinygrad import bfloat16_bits  # noqa: E402
from vkbackend.tinygrad.kernel_opts import last_kernel, run_with_opts  # noqa: E402
from vkbackend.tinygrad.renderer.caps import TCShape, make_arch, parse_arch  # noqa: E402
from vkbackend.tinygrad.renderer.renderer import VKRenderer  # noqa: E402
from vkbackend.tinygrad.runtime.device_caps import caps_from_info  # noqa: E402

DTYPES = {"f16": dtypes.half, "bf16": dtypes.bfloat16, "f32": dtypes.float}
EMULATED = (
    TCShape(16, 16, 16, "f16", "f32"),
    TCShape(16, 16, 16, "bf16", "f32"),
    TCShape(16, 16, 16, "f16", "f16"),
    TCShape(16, 8, 16, "f16", "f32"),
)
SIZES = (16, 32, 48, 64, 96, 128)
UPCAST = (OptOps.UPCAST, OptOps.UNROLL)


def arches(emulate: bool) -> list[tuple[TCShape, str]]:
    """(shape, arch) pairs the cases draw from: the device's own tensor cores, or emulated ones in both layouts."""
    if not emulate:
        arch = Device["VK"].renderer.target.arch
        shapes = parse_arch(arch).tc_shapes
        if not shapes:
            sys.exit("this device has no tensor cores tinygrad can use (VKBACKEND_TINYGRAD_TC=1?): try --emulate")
        return [(shape, arch) for shape in shapes]
    base = caps_from_info(Device["VK"].vk.info)
    return [
        (shape, make_arch(dataclasses.replace(base, tc_threads=32, tc_shapes=(shape,), tc_emulate=True, tc_layout=lay)))
        for shape in EMULATED
        for lay in ("chunk", "nv")
    ]


def on_device(x: np.ndarray, dtype) -> tuple[Tensor, np.ndarray]:
    """``x`` rounded to ``dtype`` in numpy (not by the device's conversions, which the reference would share), on the
    device, and the rounded values as float64."""
    if dtype == dtypes.bfloat16:
        bits = bfloat16_bits.from_float32(x)
        return Tensor(bits).bitcast(dtypes.bfloat16).realize(), bfloat16_bits.to_float32(bits).astype(np.float64)
    rounded = x.astype(np.float16)
    return Tensor(rounded).realize(), rounded.astype(np.float64)


def case(seed: int, pairs: list[tuple[TCShape, str]], max_up: int) -> tuple[str, str]:
    """(outcome, description) of one seed: outcome ``same``, ``differ``, ``no tensor core`` or ``split``."""
    rng = random.Random(seed)
    shape, arch = rng.choice(pairs)
    m, n, k = (rng.choice(SIZES) for _ in range(3))
    din, dacc = DTYPES[shape.dtype_in], DTYPES[shape.dtype_out]
    dout = rng.choice([dacc, din])
    transposed = rng.random() < 0.3
    data = np.random.default_rng(seed)
    a = data.standard_normal((m, k)).astype(np.float32)
    b = data.standard_normal((k, n)).astype(np.float32)
    renderer = VKRenderer(Target("VK", arch=arch))
    # the shape's own tensor core (tinygrad's dims are n, m, k), where the device has several for these types
    select = next(
        i
        for i, tc in enumerate(renderer.tensor_cores)
        if (tc.dtype_in, tc.dtype_out, tuple(tc.dims)) == (din, dacc, (shape.n, shape.m, shape.k))
    )
    with Context(DEV=f"VK::{arch}"):
        ta, ra = on_device(a, din)
        tb, rb = on_device(b.T.copy(), din) if transposed else on_device(b, din)
        tb, rb = (tb.T, rb.T) if transposed else (tb, rb)
        ref = ra @ rb

        def product() -> Tensor:
            # in the accumulator's type; in the input type, tinygrad accumulates in float32 and converts the result
            return ta.matmul(tb, dtype=dacc) if dout == dacc else ta @ tb

        kernel = Scheduler(last_kernel(product()), renderer)
        kernel.convert_loop_to_global()
        try:
            kernel.apply_opt(Opt(OptOps.TC, 0, (select, rng.choice([0, 1, 2]), 1)))
        except KernelOptError as error:  # the sizes do not fit the core at the chosen padding level
            return "no tensor core", f"{shape.token()} {m}x{n}x{k}: {error}"
        for _ in range(rng.randint(0, 3)):
            actions = [
                c
                for c in get_kernel_actions(kernel, include_0=False).values()
                if all(o.arg != 0 for o in c.applied_opts if o.op in UPCAST)  # 0: the whole axis, of any size
                and math.prod(o.arg for o in c.applied_opts if o.op in UPCAST) <= max_up
            ]
            if not actions:
                break
            kernel = rng.choice(actions)
        opts = tuple(kernel.applied_opts)
        layout = parse_arch(arch).tc_layout
        what = f"{shape.token()} {layout} {m}x{n}x{k} -> {dout.name}{' B^T' if transposed else ''} {opts}"
        got = run_with_opts(product(), opts).astype(np.float64)
    if got.size != m * n:
        return "split", what
    scale = np.abs(ref).max()
    if dout == dtypes.bfloat16:
        tol = 5e-3 * scale  # the result's rounding: at most 2^-9 of a value
    elif dout == dtypes.half:
        tol = 2e-3 * scale  # float16 accumulation over up to 128 terms
    else:
        tol = 1e-5 * math.sqrt(k) * scale
    err = np.abs(got.reshape(m, n) - ref).max()
    return ("same" if err <= tol else "differ"), f"{what}: largest error {err:.3g}, allowed {tol:.3g}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="0:100", help="START:COUNT (default 0:100)")
    parser.add_argument("--emulate", action="store_true", help="emulated tensor cores (default where there are none)")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every case")
    args = parser.parse_args(argv)
    start, count = map(int, args.seeds.split(":"))
    emulate = args.emulate or not parse_arch(Device["VK"].renderer.target.arch).tc_shapes
    pairs = arches(emulate)
    tally: Counter[str] = Counter()
    for seed in range(start, start + count):
        try:
            outcome, what = case(seed, pairs, 8 if emulate else 64)
        except Exception as error:  # noqa: BLE001 - a crash is a finding: print it and go on
            outcome, what = "failed", f"{type(error).__name__}: {error}"
        tally[outcome] += 1
        if args.verbose or outcome in ("differ", "failed"):
            print(f"seed {seed}: {outcome}: {what}", flush=True)
    kind = "emulated tensor cores" if emulate else "the device's tensor cores"
    print(f"seeds {start}..{start + count - 1} ({kind}): " + ", ".join(f"{k} {v}" for k, v in sorted(tally.items())))
    if tally["differ"] or tally["failed"]:
        return 1
    if not tally["same"]:
        print("no product was compared")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
