#!/usr/bin/env python3
"""GPT-2 decode from a cold start on one tinygrad device, with no caches: seconds to open the device, to build
``bench --tinygrad``'s GPT-2 model (weights uploaded), to the first token (every kernel lowered and compiled) and to
the fourth (the JIT captured and replayed); then where the device's opening and compiling went, each stage's calls
and summed seconds.

    python3 scripts/cold-start.py VK
    python3 scripts/cold-start.py CUDA
    PARALLEL=0 python3 scripts/cold-start.py VK     # tinygrad compiles in this process instead of its worker pool

tinygrad's compile cache is off (``CACHELEVEL=0``) and vkbackend's pipeline cache is a new empty folder. The
drivers keep caches of their own: set ``__GL_SHADER_DISK_CACHE=0`` (NVIDIA's Vulkan driver) and
``CUDA_CACHE_DISABLE=1`` for a start as cold as a new machine's. ``--quick`` builds the small model of ``bench
--tinygrad --quick``. Run it from a checkout (tinygrad 0.14.0 installed); a CUDA run needs nvrtc on the loader's path.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    started = time.perf_counter()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("device", help="the tinygrad device: VK, CUDA, CPU, ...")
    parser.add_argument("--quick", action="store_true", help="the small model of bench --tinygrad --quick")
    args = parser.parse_args(argv)
    os.environ["DEV"] = args.device
    os.environ["CACHELEVEL"] = "0"
    os.environ["VKBACKEND_CACHE_DIR"] = tempfile.mkdtemp()
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from vkbackend.bench.tinygrad.call_times import CallTimes

    spent = CallTimes()

    import tinygrad.engine.realize as realize

    spent.wrap(realize, "lower_and_compile", "tinygrad: lower and compile (the main thread's wait)")
    spent.wrap(realize, "get_runtime", "tinygrad: get_runtime (load each program)")
    if args.device == "VK":
        import vkbackend.tinygrad  # noqa: F401 - the VK device, for a checkout that was never installed
        from vkbackend import device, discovery, pipelines, programs, validation
        from vkbackend.tinygrad.compiler import compiler
        from vkbackend.tinygrad.runtime import ops_vk

        spent.wrap(discovery.Instance, "get", "vkbackend: the Vulkan instance (its first call creates it)")
        spent.wrap(device, "hold_compute_clocks", "vkbackend: the CUDA context held for the GPU's clocks")
        spent.wrap(ops_vk, "_tc_layout", "vkbackend: the tensor-core layout probe")
        spent.wrap(
            programs.ProgramCache,
            "compile",
            "vkbackend: Device.compile (reflect, validate; a pipeline unless in the background)",
        )
        spent.wrap(pipelines, "make", "vkbackend: pipeline creation, summed over the threads making them")
        spent.wrap(type(validation.validator), "check", "vkbackend: SPIR-V validation")
        spent.wrap(compiler, "compile_variant", "vkbackend: GLSL to SPIR-V in this process")
    from tinygrad import Device

    start = time.perf_counter()
    Device[args.device]
    opened = time.perf_counter() - start
    from vkbackend.bench.tinygrad.cases import TinygradWorkloads
    from vkbackend.bench.tinygrad.spec import TgSizes

    token, seeded = TinygradWorkloads(args.device, TgSizes.quick() if args.quick else TgSizes.full()).gpt2_decoder()
    built = time.perf_counter()
    token(0, seeded[0])
    first = time.perf_counter()
    for i in range(1, 4):
        token(i, seeded[i])
    fourth = time.perf_counter()
    from tinygrad.helpers import PARALLEL

    print(
        f"{args.device} (PARALLEL={PARALLEL.value}): device opened in {opened:.2f} s; imports, device and model "
        f"{built - started:.2f} s, first token {first - built:.2f} s, tokens 2-4 {fourth - first:.2f} s, "
        f"total {fourth - started:.2f} s"
    )
    for label in sorted(spent.calls):
        print(f"  {label:58s} {spent.calls[label]:5d} calls {spent.seconds[label]:7.3f} s")
    if sys.dont_write_bytecode:
        print(
            "  note: PYTHONDONTWRITEBYTECODE is set, so each compile worker compiles every module that has no .pyc "
            "from source (a checkout's have none until `python3 -m compileall vkbackend`; pip writes them when it "
            "installs a package)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
