"""Command line: ``python -m vkbackend info | demo | bench``."""
from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m vkbackend`` and the ``vkbackend`` script."""
    parser = argparse.ArgumentParser(prog="python -m vkbackend", description="vkbackend: a Vulkan compute backend")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("info", help="list every Vulkan device with its limits, memory heaps and dtype support")
    demo = sub.add_parser("demo", help="run GLSL kernels on a device and check them against numpy")
    demo.add_argument("--device", type=int, default=0, help="device index (default 0)")
    bench = sub.add_parser("bench", help="benchmarks beside wgpu-py and PyTorch, where importable")
    bench.add_argument("--device", type=int, default=0, help="device index (default 0; --tinygrad uses VK, device 0)")
    bench.add_argument("--json", metavar="FILE")
    bench.add_argument("--plot", metavar="FILE")
    bench.add_argument("--quick", action="store_true", help="small sizes (runs on lavapipe in under a minute, "
                       "under two with --tinygrad)")
    bench.add_argument("--tinygrad", action="store_true", help="tinygrad workloads on DEV=VK beside tinygrad's other "
                       "working devices (CUDA; else CPU) and PyTorch, each in its own process")
    bench.add_argument("--cases", nargs="+", metavar="CASE", help="--tinygrad: only these workloads or cases")
    bench.add_argument("--impls", nargs="+", metavar="IMPL", choices=["VK", "CUDA", "CPU", "torch"],
                       help="--tinygrad: only these implementations beside VK (default: every one that works)")
    bench.add_argument("--timeout", type=float, metavar="S", help="--tinygrad: seconds per child process "
                       "(default 1200, 300 with --quick)")
    args = parser.parse_args(argv)
    if args.command == "info":
        from .cli import info
        return info()
    if args.command == "demo":
        from . import cli
        return cli.demo(args.device)
    if args.tinygrad:
        from .bench.tinygrad_runner import run as run_tinygrad
        return run_tinygrad(json_path=args.json, plot_path=args.plot, quick=args.quick, cases=args.cases,
                            timeout_s=args.timeout, impls=args.impls)
    if args.cases or args.timeout or args.impls:
        parser.error("--cases, --impls and --timeout go with --tinygrad")
    from .bench import run
    return run(device=args.device, json_path=args.json, plot_path=args.plot, quick=args.quick)


if __name__ == "__main__":
    sys.exit(main())
