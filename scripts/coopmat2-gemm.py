#!/usr/bin/env python3
"""What VK_NV_cooperative_matrix2 gives a float16 or bfloat16 GEMM on this GPU, written the simplest way: each work
group holds one BM x BN tile of C as a workgroup-scope cooperative matrix and, each BK step of K, loads its A and B
tiles (coopMatLoad, or coopMatLoadTensorNV with tensor layouts) and multiplies; the driver spreads the tile over the
work group and stages what it needs. The figure to set beside tinygrad's own kernels on the device (`bench --tinygrad`'s
`matmul_f16` and `matmul_bf16`, which use subgroup-scope matrices straight from registers: docs/tinygrad.md).

    python3 scripts/coopmat2-gemm.py --glslang /path/to/glslangValidator            # 4096, the default tiles
    python3 scripts/coopmat2-gemm.py --size 8192 --tiles 256:128:256:32 128:128:128:32

It compiles the kernel with a glslang that knows GL_NV_cooperative_matrix2 and, for the bfloat16 variants,
GL_EXT_bfloat16 (16.6 was used), builds scripts/coopmat2-gemm.c against Vulkan headers that define
VK_NV_cooperative_matrix2 and VK_KHR_shader_bfloat16 ($VULKAN_SDK/include, else the system's; 1.4.363 was used) and
runs it: the driver's workgroup-scope limits and flexible dimensions, then per variant and tile (work-group
size:BM:BN:BK) a check of 512 entries against a double-precision reference and TFLOP/s, median [min-max] of 7
submissions of 10 products. It exits 1 when a check fails or a kernel cannot run.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from vkbackend.bench import vulkan_ref  # noqa: E402
from vkbackend.bench.cases import Skip  # noqa: E402

KERNEL = """#version 450
// C[M,N] = A[M,K] @ B[K,N], all row-major; one workgroup-scope tile (BM x BN) per workgroup.
#extension GL_EXT_shader_explicit_arithmetic_types : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_NV_cooperative_matrix2 : require
#ifdef BF16
#extension GL_EXT_bfloat16 : require
#define IN_T bfloat16_t
#else
#define IN_T float16_t
#endif
#ifdef OUT16
#define OUT_T float16_t
#else
#define OUT_T float
#endif

layout(local_size_x_id = 0, local_size_y = 1, local_size_z = 1) in;
layout(constant_id = 1) const uint BM = 128;
layout(constant_id = 2) const uint BN = 128;
layout(constant_id = 3) const uint BK = 32;

layout(push_constant) uniform P { uint M; uint N; uint K; } p;
layout(std430, binding = 0) readonly buffer A_ { IN_T a[]; };
layout(std430, binding = 1) readonly buffer B_ { IN_T b[]; };
layout(std430, binding = 2) writeonly buffer C_ { OUT_T c[]; };

void main() {
    const uint tm = gl_WorkGroupID.y, tn = gl_WorkGroupID.x;
    coopmat<float, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator> acc =
        coopmat<float, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator>(0.0);
#ifdef TENSOR
    tensorLayoutNV<2> la = createTensorLayoutNV(2);
    la = setTensorLayoutDimensionNV(la, p.M, p.K);
    tensorLayoutNV<2> lb = createTensorLayoutNV(2);
    lb = setTensorLayoutDimensionNV(lb, p.K, p.N);
    tensorLayoutNV<2> lc = createTensorLayoutNV(2);
    lc = setTensorLayoutDimensionNV(lc, p.M, p.N);
#endif
    for (uint k = 0; k < p.K; k += BK) {
        coopmat<IN_T, gl_ScopeWorkgroup, BM, BK, gl_MatrixUseA> ma;
        coopmat<IN_T, gl_ScopeWorkgroup, BK, BN, gl_MatrixUseB> mb;
#ifdef TENSOR
        coopMatLoadTensorNV(ma, a, 0, sliceTensorLayoutNV(la, tm * BM, BM, k, BK));
        coopMatLoadTensorNV(mb, b, 0, sliceTensorLayoutNV(lb, k, BK, tn * BN, BN));
#else
        coopMatLoad(ma, a, tm * BM * p.K + k, p.K, gl_CooperativeMatrixLayoutRowMajor);
        coopMatLoad(mb, b, k * p.N + tn * BN, p.N, gl_CooperativeMatrixLayoutRowMajor);
#endif
        acc = coopMatMulAdd(ma, mb, acc);
    }
    coopmat<OUT_T, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator> out_ =
        coopmat<OUT_T, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator>(acc);
#ifdef TENSOR
    coopMatStoreTensorNV(out_, c, 0, sliceTensorLayoutNV(lc, tm * BM, BM, tn * BN, BN));
#else
    coopMatStore(out_, c, tm * BM * p.N + tn * BN, p.N, gl_CooperativeMatrixLayoutRowMajor);
#endif
}
"""
# name: (defines, program flags): float16 or bfloat16 inputs, float32 or float16 results, two ways to load
VARIANTS = {
    "f16": ([], ""),
    "f16-tensor": (["TENSOR"], ""),
    "f16-half-out": (["OUT16"], "h"),
    "f16-tensor-half-out": (["TENSOR", "OUT16"], "h"),
    "bf16": (["BF16"], "b"),
    "bf16-tensor": (["BF16", "TENSOR"], "b"),
}
TILES = ["256:128:128:32", "256:128:128:64", "256:128:256:32", "256:256:128:32", "256:128:256:64", "128:128:128:32"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--glslang", default="glslangValidator", help="glslangValidator (default: on PATH)")
    parser.add_argument("--size", type=int, default=4096, help="M = N = K (default 4096)")
    parser.add_argument("--tiles", nargs="+", default=TILES, help="WG:BM:BN:BK each (default: %(default)s)")
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    args = parser.parse_args()
    for tile in args.tiles:
        if not re.fullmatch(r"[1-9]\d*:[1-9]\d*:[1-9]\d*:[1-9]\d*", tile):
            parser.error(f"a tile is WG:BM:BN:BK, each above 0, not {tile!r}")
    if args.size < 1:
        parser.error(f"--size must be above 0, not {args.size}")
    try:
        include, compiler = vulkan_ref.vulkan_include(), vulkan_ref.c_compiler()
    except Skip as e:
        sys.exit(f"coopmat2-gemm: {e}")
    header = (include / "vulkan" / "vulkan_core.h").read_text(errors="replace")
    for name in ("VK_NV_cooperative_matrix2", "VK_KHR_shader_bfloat16"):
        if name not in header:
            sys.exit(f"{include}/vulkan/vulkan_core.h predates {name}: set VULKAN_SDK to newer Vulkan headers")
    with tempfile.TemporaryDirectory(prefix="coopmat2-gemm-") as tmp:
        folder = Path(tmp)
        (folder / "gemm.comp").write_text(KERNEL)
        program = folder / "coopmat2-gemm"
        build = [*compiler, "-O2", "-std=c11", "-Wall", f"-I{include}"]
        built = subprocess.run(
            [*build, str(ROOT / "scripts" / "coopmat2-gemm.c"), "-o", str(program), "-l:libvulkan.so.1", "-lm"],
            check=False,
        )
        if built.returncode != 0:
            sys.exit(f"coopmat2-gemm: {compiler[0]} could not build scripts/coopmat2-gemm.c (above)")
        runs = []
        for name in args.variants:
            defines, flags = VARIANTS[name]
            spv = folder / f"{name}.spv"
            command = [args.glslang, "--target-env", "vulkan1.3", "-V", *(f"-D{d}" for d in defines), "-o", str(spv)]
            try:
                proc = subprocess.run(
                    [*command, str(folder / "gemm.comp")], capture_output=True, text=True, check=False
                )
            except OSError as e:
                sys.exit(f"coopmat2-gemm: cannot run {args.glslang} ({e}): give a glslangValidator with --glslang")
            if proc.returncode != 0:
                sys.exit(
                    f"{args.glslang} did not compile {name} (it needs GL_NV_cooperative_matrix2 and, for bfloat16, "
                    f"GL_EXT_bfloat16):\n{proc.stdout}{proc.stderr}"
                )
            runs += [f"{spv}:{tile}" + (f":{flags}" if flags else "") for tile in args.tiles]
        return subprocess.run([str(program), str(args.size), *runs], check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
