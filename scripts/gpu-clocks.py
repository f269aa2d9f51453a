#!/usr/bin/env python3
"""The GPU's clocks while tinygrad decodes GPT-2 (``bench --tinygrad``'s gpt2_decode model, batch 1, one TinyJit step
per token, each token read back), on an NVIDIA GPU, with ``nvidia-smi`` sampling the SM clock every 20 ms:

    python3 scripts/gpu-clocks.py VK                          # vkbackend (holding CUDA's clocks, the default)
    VKBACKEND_CUDA_CLOCKS=0 python3 scripts/gpu-clocks.py VK  # Vulkan's own clock policy
    python3 scripts/gpu-clocks.py CUDA                        # tinygrad's CUDA device, to compare

It prints, per phase, the wall time of a token or the GPU time of the JIT's largest graph (tinygrad's ``DEBUG=2``
timing, which runs each graph alone) and the SM clock ``nvidia-smi`` saw meanwhile: decoding tokens; the graph
timed right after a token; on VK the graph replayed back to back and 4 ms apart (``LaunchGraph.launch_timed``).
Run it from a checkout with tinygrad 0.14.0 installed; a CUDA run needs nvrtc on the loader's path.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import io
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SMI_FIELDS = "timestamp,clocks.sm,utilization.gpu"
TIME_FORMAT = "%Y/%m/%d %H:%M:%S.%f"


def summary(values: list[float]) -> str:
    """min / median / max of ``values``."""
    return f"{min(values):.1f} / {statistics.median(values):.1f} / {max(values):.1f}"


class Clocks:
    """nvidia-smi sampling the SM clock into a file while the block runs; ``between(t0, t1)`` reads the samples."""

    def __init__(self) -> None:
        self.file = tempfile.NamedTemporaryFile("w+", suffix=".csv")
        self.proc = subprocess.Popen(
            ["nvidia-smi", f"--query-gpu={SMI_FIELDS}", "--format=csv,noheader,nounits", "-lms", "20"],
            stdout=self.file,
            stderr=subprocess.DEVNULL,
        )

    def between(self, t0: datetime.datetime, t1: datetime.datetime) -> str:
        self.file.flush()
        sm = []
        for line in Path(self.file.name).read_text().splitlines():
            fields = [f.strip() for f in line.split(",")]
            with contextlib.suppress(ValueError, IndexError):
                if t0 <= datetime.datetime.strptime(fields[0], TIME_FORMAT) <= t1:
                    sm.append(float(fields[1]))
        return f"SM clock {summary(sm)} MHz ({len(sm)} samples)" if sm else "no nvidia-smi samples"

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait()
        self.file.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("device", choices=["VK", "CUDA"], help="the tinygrad device")
    parser.add_argument("--tokens", type=int, default=60, help="tokens decoded in the first phase")
    parser.add_argument("--quick", action="store_true", help="the small model of bench --tinygrad --quick")
    args = parser.parse_args(argv)
    os.environ["DEV"] = args.device
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    if args.device == "VK":
        import vkbackend.tinygrad  # noqa: F401  (registers the VK device)
    from tinygrad import Tensor, TinyJit, UOp, dtypes
    from tinygrad.engine.realize import graph_cache
    from tinygrad.helpers import Context

    from vkbackend.bench.tinygrad.models import GPT2Decoder, load_seeded
    from vkbackend.bench.tinygrad.spec import TgSizes

    s = TgSizes.quick() if args.quick else TgSizes.full()
    model = GPT2Decoder(s.gpt2_layers, s.gpt2_dim, s.gpt2_heads, s.gpt2_vocab, s.gpt2_positions, s.gpt2_tokens)
    load_seeded(model, 0)
    step = TinyJit(lambda tok, pos: model(tok, pos).realize())
    pos = UOp.variable("pos", 0, s.gpt2_tokens - 1)

    def token(i: int) -> None:
        step(Tensor([[5]], dtype=dtypes.int32), pos.bind(i % s.gpt2_tokens)).tolist()

    for i in range(4):  # capture
        token(i)
    try:
        clocks = Clocks()
    except FileNotFoundError:
        print("nvidia-smi was not found: this script reads an NVIDIA GPU's clocks", file=sys.stderr)
        return 2
    try:
        time.sleep(0.5)

        def phase(name: str, unit: str, run) -> None:
            t0 = datetime.datetime.now()
            values = run()
            print(
                f"{args.device} {name}: {summary(values)} {unit}; {clocks.between(t0, datetime.datetime.now())}",
                flush=True,
            )

        def walls() -> list[float]:
            out = []
            for i in range(args.tokens):
                t0 = time.perf_counter()
                token(i)
                out.append((time.perf_counter() - t0) * 1e3)
            return out

        def debug_graphs() -> list[float]:
            times: dict[int, list[float]] = {}
            for i in range(6):
                text = io.StringIO()
                with contextlib.redirect_stdout(text), Context(DEBUG=2):
                    token(i)
                for line in text.getvalue().splitlines():
                    m = re.search(r"batched (\d+).* tm\s+([\d.]+)(us|ms)", re.sub("\x1b\\[[0-9;]*m", "", line))
                    if m:
                        times.setdefault(int(m.group(1)), []).append(
                            float(m.group(2)) * (1e3 if m.group(3) == "ms" else 1)
                        )
            return times[max(times)] if times else [0.0]

        phase("decode, wall per token", "ms", walls)
        phase("largest graph after each token (DEBUG=2)", "us GPU", debug_graphs)
        if args.device == "VK":
            from vkbackend.tinygrad.runtime.graph import VKGraph

            graph = max((g for g in list(graph_cache.values()) if isinstance(g, VKGraph)), key=lambda g: len(g.calls))
            phase(
                f"graph of {len(graph.calls)} back to back",
                "us GPU",
                lambda: [graph.graph.launch_timed() / 1e3 for _ in range(40)],
            )

            def apart() -> list[float]:
                out = []
                for _ in range(40):
                    time.sleep(0.004)
                    out.append(graph.graph.launch_timed() / 1e3)
                return out

            phase(f"graph of {len(graph.calls)} 4 ms apart", "us GPU", apart)
    finally:
        clocks.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
