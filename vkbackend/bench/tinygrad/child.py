"""One implementation of the tinygrad bench in a process of its own, printing JSON lines
(``vkbackend.bench.child.emit``).

``python -m vkbackend.bench.tinygrad.child IMPL --probe`` checks that IMPL works here (a tinygrad device opens and
runs a kernel; torch has a device it may use) and prints what it is. ``python -m vkbackend.bench.tinygrad.child
IMPL WORKLOAD --sizes JSON`` runs one workload and prints its records. IMPL is a tinygrad device name (VK, CUDA,
CPU), which the parent also puts in ``DEV``, or ``torch``. Under ``VKBACKEND_VALIDATION=1`` a VK child fails when the
Vulkan validation layer said anything.
"""

from __future__ import annotations

import argparse
import json
import os

from vkbackend.bench.child import emit
from vkbackend.bench.tinygrad.spec import WORKLOADS, TgSizes


def _describe_tinygrad(device: str) -> str:
    from tinygrad import Device

    dev = Device[device]
    if device == "VK":
        return f"VK: tinygrad on vkbackend, {dev.vk.info.name}"
    return f"{device}: tinygrad {type(dev).__name__}" + (f" ({dev.arch})" if isinstance(dev.arch, str) else "")


def probe(impl: str, quick: bool) -> None:
    """Emit ``info`` when ``impl`` works here, else ``skip`` with the reason (or raise)."""
    if impl == "torch":
        import torch

        from vkbackend.bench.tinygrad.protocol import Skip
        from vkbackend.bench.tinygrad.torch_twins import torch_device

        try:
            device = torch_device(quick)
        except Skip as reason:
            emit(skip=str(reason))
            return
        name = torch.cuda.get_device_name(device) if device.startswith("cuda") else "CPU"
        emit(info=f"torch: PyTorch {torch.__version__} on {name} ({device}), eager")
        return
    from tinygrad import Tensor

    got = (Tensor([1.0, 2.0, 3.0], device=impl) + 1).sum().item()
    if got != 9.0:
        raise RuntimeError(f"{impl} computed {got} for (1 + 2 + 3) + 3")
    emit(info=_describe_tinygrad(impl))


def run_workload(impl: str, workload: str, sizes: TgSizes, quick: bool) -> None:
    """Emit the records of ``workload`` on ``impl`` (``skip`` where the implementation cannot run it)."""
    from vkbackend.bench.tinygrad.protocol import Skip

    try:
        if impl == "torch":
            from vkbackend.bench.tinygrad.torch_twins import TorchWorkloads, torch_device

            records = TorchWorkloads(torch_device(quick), sizes).run(workload)
        else:
            from vkbackend.bench.tinygrad.cases import TinygradWorkloads

            records = TinygradWorkloads(impl, sizes).run(workload)
    except Skip as reason:
        emit(skip=str(reason))
        return
    for record in records:
        emit(**record.to_json())


def _validation_clean(impl: str) -> bool:
    """False (and an ``error`` line) when the Vulkan validation layer, which a VK child runs under with
    ``VKBACKEND_VALIDATION=1``, said anything."""
    if impl != "VK":
        return True
    from vkbackend.config import validation_enabled
    from vkbackend.discovery import validation_messages

    messages = validation_messages() if validation_enabled() else ""
    if messages:
        emit(error=f"Vulkan validation layer messages: {messages[:2000]}")
    return not messages


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vkbackend.bench.tinygrad.child")
    parser.add_argument("impl", help="a tinygrad device (VK, CUDA, CPU) or torch")
    parser.add_argument("workload", nargs="?", choices=WORKLOADS)
    parser.add_argument("--probe", action="store_true")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--sizes", help="TgSizes as JSON (default: full or --quick)")
    args = parser.parse_args(argv)
    if args.impl != "torch":
        os.environ["DEV"] = args.impl  # before tinygrad is imported: models create their weights on DEV
        import vkbackend.tinygrad  # noqa: F401 - the VK device's import hook, for a checkout that was never installed
    if args.probe:
        probe(args.impl, args.quick)
    else:
        if args.workload is None:
            parser.error("a workload or --probe")
        sizes = (
            TgSizes.from_json(json.loads(args.sizes))
            if args.sizes
            else (TgSizes.quick() if args.quick else TgSizes.full())
        )
        run_workload(args.impl, args.workload, sizes, args.quick)
    return 0 if _validation_clean(args.impl) else 1


if __name__ == "__main__":
    raise SystemExit(main())
