#!/usr/bin/env python3
"""What each GPU's compiler made of the kernels of ``bench --tinygrad``'s ResNet-50 forward: on VK the driver's own
statistics of each pipeline (``Device.pipeline_statistics``, the device opened with
``VKBACKEND_PIPELINE_STATISTICS=1``), on CUDA the registers, local (spill) memory and static shared memory of each
function (``cuFuncGetAttribute``); and two such runs side by side, kernel by kernel.

    python3 scripts/pipeline-stats.py VK --json vk.json
    python3 scripts/pipeline-stats.py CUDA --json cuda.json
    python3 scripts/pipeline-stats.py --compare vk.json cuda.json
    python3 scripts/pipeline-stats.py VK --quick           # the small ResNet of bench --tinygrad --quick

A statistic's name is the driver's (NVIDIA's Vulkan driver and CUDA name theirs differently). Run it from a checkout
(tinygrad 0.14.0 installed); a CUDA run needs nvrtc on the loader's path.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

CUDA_ATTRIBUTES = {  # cuFuncGetAttribute's CUfunction_attribute values and what they are called here
    "registers": 4,  # CU_FUNC_ATTRIBUTE_NUM_REGS
    "local (spill) bytes": 3,  # CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES
    "static shared bytes": 1,  # CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES
    "max threads per block": 0,  # CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("device", nargs="?", help="the tinygrad device: VK or CUDA")
    parser.add_argument("--quick", action="store_true", help="the small ResNet of bench --tinygrad --quick")
    parser.add_argument("--json", metavar="FILE", help="also write the figures to FILE")
    parser.add_argument("--compare", nargs=2, metavar="FILE", help="two --json files: their kernels side by side")
    args = parser.parse_args(argv)
    if args.compare:
        if args.device or args.json:
            parser.error("--compare reads two files: it takes no device and writes no --json")
        return compare(*(json.loads(Path(f).read_text()) for f in args.compare))
    if args.device not in ("VK", "CUDA"):
        parser.error("name a device (VK or CUDA), or --compare two files")
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from vkbackend.errors import BackendError  # noqa: PLC0415

    try:
        kernels = collect(args.device, args.quick)
    except BackendError as error:  # no statistics on this device: the error says why
        print(f"{args.device}: {error}", file=sys.stderr)
        return 1
    print(f"{args.device}: {len(kernels)} distinct kernels")
    for name, stats in sorted(kernels.items()):
        print(f"  {name}: " + ", ".join(f"{k} {v}" for k, v in stats.items()))
    if args.json:
        Path(args.json).write_text(json.dumps({"device": args.device, "kernels": kernels}))
    return 0


def collect(device: str, quick: bool) -> dict[str, dict[str, object]]:
    """Each distinct kernel's statistics on ``device``, by kernel name, once the captured forward has run."""
    os.environ["DEV"] = device
    made: list = []
    if device == "VK":
        os.environ["VKBACKEND_PIPELINE_STATISTICS"] = "1"  # set before the device opens: its pipelines keep them
        import vkbackend.tinygrad  # noqa: F401, PLC0415 - the VK device, for a checkout that was never installed
        from vkbackend.tinygrad.runtime.ops_vk import VKProgram as program_type  # noqa: PLC0415
    else:
        from tinygrad.runtime.ops_cuda import CUDAProgram as program_type  # noqa: PLC0415
    init = program_type.__init__

    def recording_init(self, *args, **kwargs) -> None:
        init(self, *args, **kwargs)
        made.append(self)

    program_type.__init__ = recording_init
    from vkbackend.bench.tinygrad.cases import warm_resnet_jit  # noqa: PLC0415 - imports tinygrad: after DEV

    warm_resnet_jit(device, quick)
    return {p.name: (_vk_statistics(p) if device == "VK" else _cuda_attributes(p)) for p in made}


def _vk_statistics(p) -> dict[str, object]:
    """The driver's statistics of the pipeline of each variant of VK program ``p`` that was compiled (the first
    executable's; a variant other than the plain one has its statistics' names suffixed with it)."""
    stats: dict[str, object] = {}
    for (views, local), prog in sorted(p.variants.items(), key=lambda kv: (kv[0][0], kv[0][1] or ())):
        listed = p.dev.vk.pipeline_statistics(prog)
        if not listed:  # a driver may list no executable
            continue
        executable = listed[0]
        suffix = "".join([" (views)" if views else "", f" (local {local})" if local else ""])
        stats[f"subgroup size{suffix}"] = executable["subgroup_size"]
        stats.update({f"{k}{suffix}": v for k, v in executable["statistics"].items()})
    return stats


def _cuda_attributes(p) -> dict[str, object]:
    import ctypes  # noqa: PLC0415

    from tinygrad.runtime.autogen import cuda  # noqa: PLC0415

    found: dict[str, object] = {}
    for name, attribute in CUDA_ATTRIBUTES.items():
        value = ctypes.c_int32()
        if cuda.cuFuncGetAttribute(ctypes.byref(value), attribute, p.prg) == 0:
            found[name] = value.value
    return found


def compare(a: dict, b: dict) -> int:
    """Print two devices' statistics of each kernel they share by name, then the kernels only one of them has."""
    ka, kb = a["kernels"], b["kernels"]
    for name in sorted(set(ka) & set(kb)):
        print(name)
        for device, stats in ((a["device"], ka[name]), (b["device"], kb[name])):
            print(f"  {device:6s} " + ", ".join(f"{k} {v}" for k, v in stats.items()))
    for device, own, other in ((a["device"], ka, kb), (b["device"], kb, ka)):
        alone = sorted(set(own) - set(other))
        if alone:
            print(f"only on {device}: {', '.join(alone)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
