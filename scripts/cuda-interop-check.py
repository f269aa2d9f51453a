"""Validates vkbackend.interop.cuda on an NVIDIA GPU: one buffer shared with PyTorch both ways, not copied, checked
and timed. NOT YET RUN: no session so far had an NVIDIA GPU for it (docs/plugin-guide.md, "Zero-copy with CUDA").

    python3 scripts/cuda-interop-check.py [--gib 1] [--device N]

Needs vkbackend (installed, or this checkout with its native module built), PyTorch with CUDA and the GPU's Vulkan
driver. The steps, each timed: export a buffer of --gib GiB (``pool.allocate_exportable``); a vkbackend kernel writes
x[i] = i (int32); map it into PyTorch (``interop.cuda.as_torch``); PyTorch checks it against ``torch.arange`` on the
GPU; PyTorch multiplies it by 3 in place; a vkbackend kernel counts the x[i] that are not 3 i (none, only if the two
share the memory: a copy on either side would leave the other's unchanged); and, for scale, a ``clone()`` of the
tensor (what one copy of the bytes costs). Prints one JSON line; exits 1 when a check fails.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from typing import Any

import vkbackend

LOCAL = 256
GROUPS_X = 1024  # the grid is (GROUPS_X, rows): maxComputeWorkGroupCount[0] can be as small as 65535
SOURCE = """#version 450
layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer X { int x[]; };
layout(std430, binding = 1) buffer Bad { uint bad; };
layout(push_constant) uniform P { uint n; int scale; uint check; } p;
void main() {
    uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256u + gl_LocalInvocationID.x;
    if (i >= p.n) return;
    if (p.check == 0u) x[i] = int(i) * p.scale;
    else if (x[i] != int(i) * p.scale) atomicAdd(bad, 1u);
}
"""


def _grid(n: int) -> tuple[int, int, int]:
    groups = -(-n // LOCAL)
    return (min(groups, GROUPS_X), -(-groups // GROUPS_X), 1)


def vulkan_fill(dev: vkbackend.Device, buf: int, n: int, scale: int = 1) -> None:
    """x[i] = scale * i for the n int32 of ``buf``, queued."""
    prog, counter = dev.compile(vkbackend.compile_glsl(SOURCE)), dev.memory_pool.allocate(4)
    dev.launch(prog, [buf, counter], [n, scale, 0], _grid(n))
    dev.memory_pool.release(counter)
    dev.release_program(prog)


def vulkan_mismatches(dev: vkbackend.Device, buf: int, n: int, scale: int) -> int:
    """How many of the n int32 of ``buf`` are not scale * i (a sync point)."""
    import numpy as np

    pool = dev.memory_pool
    prog, counter = dev.compile(vkbackend.compile_glsl(SOURCE)), pool.allocate(4)
    pool.host_to_pool(np.zeros(1, np.uint32), counter)
    dev.launch(prog, [buf, counter], [n, scale, 1], _grid(n))
    out = np.empty(1, np.uint32)
    pool.pool_to_host(counter, out)
    pool.release(counter)
    dev.release_program(prog)
    return int(out[0])


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gib", type=float, default=1.0, help="the buffer's size in GiB (default 1)")
    parser.add_argument("--device", type=int, default=0, help="the vkbackend device index (default 0)")
    args = parser.parse_args(argv)
    import torch

    from vkbackend.interop import cuda

    dev = vkbackend.devices()[args.device]
    pool = dev.memory_pool
    n = int(args.gib * (1 << 30)) // 4
    times: dict[str, float] = {}
    result: dict[str, Any] = {"device": dev.info.name, "bytes": 4 * n, "times_ms": times}

    def timed(name: str, start: float) -> None:
        times[name] = round((time.perf_counter() - start) * 1e3, 3)

    start = time.perf_counter()
    exported = pool.allocate_exportable(4 * n)
    timed("export", start)
    start = time.perf_counter()
    vulkan_fill(dev, exported.buffer, n)
    dev.sync()
    timed("vulkan_write", start)
    start = time.perf_counter()
    tensor = cuda.as_torch(exported, "int32", (n,))
    timed("import_to_torch", start)
    buf = exported.buffer
    pool.release(buf)  # the tensor's mapping holds the buffer now
    exported.close()
    start = time.perf_counter()
    result["torch_sees_vulkan"] = bool(torch.equal(tensor, torch.arange(n, dtype=torch.int32, device=tensor.device)))
    timed("torch_check", start)
    start = time.perf_counter()
    tensor.mul_(3)
    torch.cuda.synchronize()
    timed("torch_write", start)
    start = time.perf_counter()
    result["vulkan_mismatches"] = vulkan_mismatches(dev, buf, n, 3)
    timed("vulkan_check", start)
    start = time.perf_counter()
    copy = tensor.clone()
    torch.cuda.synchronize()
    timed("torch_clone_for_scale", start)
    del copy, tensor
    gc.collect()
    dev.sync()
    result["buffer_freed_with_the_tensor"] = not pool.is_live(buf)
    ok = result["torch_sees_vulkan"] and result["vulkan_mismatches"] == 0 and result["buffer_freed_with_the_tensor"]
    print(json.dumps({**result, "ok": ok}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
