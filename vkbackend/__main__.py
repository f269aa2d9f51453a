"""Command line: ``python -m vkbackend info | demo | bench | doctor`` (and ``--version``); the ``vkbackend`` script
runs the same ``main``."""

from __future__ import annotations

import argparse
import math
import os
import sys
from typing import NoReturn

from . import __version__, cli


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m vkbackend`` and the ``vkbackend`` script; returns the exit status."""
    try:
        try:
            return _main(argv)
        finally:  # also after argparse's exit (--help): here, a reader that went away (`| head`) can be handled
            sys.stdout.flush()
    except BrokenPipeError:
        # The recipe of Python's signal module docs: stdout goes to /dev/null from now on, so that the flush at exit
        # does not fail again, and the status is 1 as for any write error.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


class _Parser(argparse.ArgumentParser):
    """argparse's parser with its usage errors on one line (argparse prints the usage first), exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def program_name() -> str:
    """How the user ran the command, for usage lines and errors: ``python3 -m vkbackend`` (the interpreter's own name)
    when ``-m`` ran this module, else ``vkbackend``, the console script."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if spec is not None and spec.name == "vkbackend.__main__":
        return f"{os.path.basename(sys.executable) or 'python3'} -m vkbackend"
    return "vkbackend"


def positive_seconds(text: str) -> float:
    """``--timeout``'s type: a finite number of seconds above 0 (argparse makes the ArgumentTypeError a usage error)."""
    try:
        seconds = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not (math.isfinite(seconds) and seconds > 0):
        raise argparse.ArgumentTypeError(f"{text} is not a positive number of seconds")
    return seconds


def _main(argv: list[str] | None) -> int:
    parser = _Parser(prog=program_name(), description="vkbackend: a Vulkan compute backend")
    parser.add_argument("--version", action="version", version=f"vkbackend {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    info = sub.add_parser("info", help="list every Vulkan device with its limits, memory heaps and dtype support")
    info.add_argument("--json", action="store_true", help="print them as a JSON list, one object per device")
    demo = sub.add_parser("demo", help="run GLSL kernels on a device and check them against numpy")
    demo.add_argument("--device", type=int, default=0, help="device index (default 0)")
    sub.add_parser(
        "doctor",
        help="check what vkbackend needs (Vulkan loader, devices, glslang, spirv-val, a C "
        "compiler, the cache folder, VKBACKEND_* settings, tinygrad) and say what to install; exit status "
        "0 when a device works",
    )
    bench = sub.add_parser(
        "bench",
        help="benchmarks beside a raw-Vulkan C program (where a C compiler is "
        "found), wgpu-py and PyTorch (where importable)",
    )
    bench.add_argument(
        "--device", type=int, help="device index (default 0; with --tinygrad, the device of tinygrad's VK)"
    )
    bench.add_argument(
        "--json",
        metavar="FILE",
        help="also write the results to FILE as a JSON list of records (- for "
        "stdout, which then carries only the JSON: the table goes to stderr)",
    )
    bench.add_argument(
        "--plot", metavar="FILE", help="also draw them into FILE, a PNG (needs matplotlib: the bench extra)"
    )
    bench.add_argument(
        "--quick",
        action="store_true",
        help="small sizes (runs on lavapipe in under a minute, under two with --tinygrad)",
    )
    bench.add_argument(
        "--tinygrad",
        action="store_true",
        help="tinygrad workloads on DEV=VK beside tinygrad's other "
        "working devices (CUDA; else CPU) and PyTorch, each in its own process",
    )
    bench.add_argument(
        "--cases",
        nargs="+",
        metavar="CASE",
        help="only these cases, space- or comma-separated "
        "(e.g. sync_idle,launch_sync,readback_small); with --tinygrad, workloads or cases",
    )
    bench.add_argument(
        "--impls",
        nargs="+",
        metavar="IMPL",
        choices=["VK", "CUDA", "CPU", "torch"],
        help="--tinygrad: only these implementations beside VK (default: every one that works)",
    )
    bench.add_argument(
        "--timeout",
        type=positive_seconds,
        metavar="S",
        help="--tinygrad: seconds per child process, above 0 (default 1200, 300 with --quick)",
    )
    args = parser.parse_args(argv)
    if args.command == "info":
        return cli.info(as_json=args.json)
    if args.command == "demo":
        return cli.demo(args.device)
    if args.command == "doctor":
        from .doctor import doctor

        return doctor()
    outputs = {"--json": None if args.json == "-" else args.json, "--plot": args.plot}
    problems = cli.unwritable_outputs(outputs)
    if problems:  # before a run of minutes, not after it
        bench.error("; ".join(problems))
    before = cli.output_stamps(outputs)
    status = _bench(args, bench)
    unwritten = cli.unwritten_outputs(outputs, before)
    if unwritten:
        print(f"vkbackend bench: {'; '.join(unwritten)}", file=sys.stderr)
        return status or 1
    return status


def _bench(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    cases = [name for item in args.cases for name in item.split(",") if name] if args.cases is not None else None
    if args.tinygrad:
        from .bench.tinygrad.runner import run as run_tinygrad

        return run_tinygrad(
            json_path=args.json,
            plot_path=args.plot,
            quick=args.quick,
            cases=cases,
            timeout_s=args.timeout,
            impls=args.impls,
            device=args.device,
        )
    if args.timeout is not None or args.impls:
        parser.error("--impls and --timeout go with --tinygrad")
    from .bench import run

    return run(
        device=0 if args.device is None else args.device,
        json_path=args.json,
        plot_path=args.plot,
        quick=args.quick,
        cases=cases,
    )


if __name__ == "__main__":
    sys.exit(main())
