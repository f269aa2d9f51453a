"""Which register layout a device's cooperative matrices have, found by running a probe kernel on it.

A cooperative matrix spreads its elements over a subgroup in a way Vulkan leaves to the driver, but fixed: component
``i`` of invocation ``l``'s matrix is always the same element. Where that layout is one the renderer knows
(:func:`vkbackend.tinygrad.renderer.tensor_cores.register_layout`), tinygrad's registers can be the matrices'
components directly, with no staging through shared memory. :func:`probe_layout` loads a known matrix of each use and
shape into cooperative matrices, in a work group of four 32-invocation warps, reads back every invocation's
components and its subgroup ids, and names the family the device matches: ``"nv"`` (NVIDIA's), else ``"chunk"``
(the renderer then stages, whatever the device's layout).
"""

from __future__ import annotations

import dataclasses
import logging

import numpy as np

from vkbackend.errors import BackendError, ErrorStatus
from vkbackend.tinygrad.renderer.caps import DeviceCaps, TCShape
from vkbackend.tinygrad.renderer.tensor_cores import Layout, register_layout, tc_mode

__all__ = ["probe_layout", "matches", "mismatch", "with_tensor_cores"]

log = logging.getLogger("vkbackend")

FAMILIES = ("nv",)  # the layouts probed for, besides the chunks any device can stage
_WARPS = (2, 2)  # the probe's work group: 32 x 2 x 2 invocations
_STRIDE = 64  # output words per invocation and use


def _base(use: int, invocations: int) -> int:
    """Where the components of use ``use`` (A, B, C) begin in the probe's output, after each invocation's ids."""
    return invocations + use * invocations * _STRIDE


def _source(shape: TCShape) -> str:
    m, n, k = shape.m, shape.n, shape.k
    ct = "float" if shape.dtype_out == "f32" else "float16_t"
    invocations = 32 * _WARPS[0] * _WARPS[1]
    reads = "\n".join(
        f"  for (int i = 0; i < {mat}.length(); i++) o[{base}u + inv*{_STRIDE}u + uint(i)] = uint(float({mat}[i]));"
        for mat, base in ((m, _base(use, invocations)) for use, m in enumerate(("ma", "mb", "mc")))
    )
    return f"""#version 450
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
layout(local_size_x = 32, local_size_y = {_WARPS[0]}, local_size_z = {_WARPS[1]}) in;
layout(std430, binding = 0) buffer O {{ uint o[]; }};
shared float16_t sa[{m * k}]; shared float16_t sb[{k * n}]; shared {ct} sc[{m * n}];
void main() {{
  uint inv = gl_LocalInvocationIndex;
  for (uint i = inv; i < {m * k}u; i += {invocations}u) sa[i] = float16_t(float(i));
  for (uint i = inv; i < {k * n}u; i += {invocations}u) sb[i] = float16_t(float(i));
  for (uint i = inv; i < {m * n}u; i += {invocations}u) sc[i] = {ct}(float(i));
  barrier();
  coopmat<float16_t, gl_ScopeSubgroup, {m}, {k}, gl_MatrixUseA> ma;
  coopmat<float16_t, gl_ScopeSubgroup, {k}, {n}, gl_MatrixUseB> mb;
  coopmat<{ct}, gl_ScopeSubgroup, {m}, {n}, gl_MatrixUseAccumulator> mc;
  coopMatLoad(ma, sa, 0, {k}u, gl_CooperativeMatrixLayoutRowMajor);
  coopMatLoad(mb, sb, 0, {n}u, gl_CooperativeMatrixLayoutRowMajor);
  coopMatLoad(mc, sc, 0, {n}u, gl_CooperativeMatrixLayoutRowMajor);
  o[inv] = gl_SubgroupInvocationID | (gl_SubgroupID << 8) | (uint(ma.length()) << 16);
{reads}
}}"""


def matches(layout: Layout, words: np.ndarray) -> bool:
    """Whether the probe's output ``words`` (one run of :func:`_source`'s kernel) is ``layout``."""
    return mismatch(layout, words) is None


def mismatch(layout: Layout, words: np.ndarray) -> str | None:
    """How the probe's output ``words`` differs from ``layout`` (the first difference found), or None where every
    invocation's lane is its x, its warp (y, z) is one subgroup, and component ``i`` of each matrix is the element
    the layout places there."""
    invocations = 32 * _WARPS[0] * _WARPS[1]
    ids = words[:invocations]
    for flat in range(invocations):
        lane, warp = flat % 32, flat // 32
        if ids[flat] & 0xFF != lane or (ids[flat] >> 8) & 0xFF != warp:
            return f"invocation {flat} is lane {ids[flat] & 0xFF} of subgroup {(ids[flat] >> 8) & 0xFF}"
    for use, bits in enumerate(layout):
        base = _base(use, invocations)
        elements = 1 << sum(1 for kind, _ in bits if kind == "i")
        if ids[0] >> 16 and use == 0 and ids[0] >> 16 != elements:
            return f"A has {ids[0] >> 16} components per invocation, not {elements}"
        for flat in range(invocations):
            lane = flat % 32
            for i in range(elements):
                place = sum((((i if kind == "i" else lane) >> j) & 1) << f for f, (kind, j) in enumerate(bits))
                if words[base + flat * _STRIDE + i] != place:
                    got = words[base + flat * _STRIDE : base + flat * _STRIDE + elements].tolist()
                    return f"{'ABC'[use]} of invocation {flat} holds {got}"
    return None


def probe_layout(device, caps: DeviceCaps) -> str:
    """The register-layout family of ``device``'s cooperative matrices (a :class:`vkbackend.Device`) for every
    float16 tensor-core shape in ``caps``: one of :data:`FAMILIES` where each shape matches it, else ``"chunk"``
    (also where there is nothing to probe or the probe cannot run: the renderer then stages)."""
    shapes = [s for s in caps.tc_shapes if s.dtype_in == "f16"]
    if not shapes or caps.tc_threads != 32:
        return "chunk"
    import vkbackend  # noqa: PLC0415 - the probe compiles GLSL: only when tensor cores are switched on

    invocations = 32 * _WARPS[0] * _WARPS[1]
    words = invocations * (1 + 3 * _STRIDE)
    candidates = list(FAMILIES)
    pool = device.memory_pool
    for shape in shapes:
        try:
            prog = device.compile(vkbackend.compile_glsl(_source(shape), target_env="vulkan1.3"))
            buf = pool.allocate(4 * words)
            try:
                pool.host_to_pool(np.zeros(words, np.uint32), buf)
                device.launch(prog, [buf], (), (1, 1, 1))
                out = np.empty(words, np.uint32)
                pool.pool_to_host(buf, out)
            finally:
                pool.release(buf)
        except BackendError as error:
            # without glslang 13 no tensor-core kernel compiles either: say so quietly; anything else is a surprise
            quiet = error.status is ErrorStatus.KernelCompilation
            (log.info if quiet else log.warning)(
                "vkbackend: the cooperative-matrix layout probe failed on %s (%s): tensor cores only staged",
                device.info.name,
                error,
            )
            return "chunk"
        for family in list(candidates):
            layout = register_layout(shape, 32, family)
            why = "no layout for the shape" if layout is None else mismatch(layout, out)
            if why is not None:
                log.info("vkbackend: %s %s is not the %s layout: %s", device.info.name, shape.token(), family, why)
                candidates.remove(family)
        if not candidates:
            return "chunk"
    return candidates[0]


def with_tensor_cores(caps: DeviceCaps, layout: str, mode: str | None = None) -> DeviceCaps:
    """``caps`` with the tensor cores the mode (:func:`vkbackend.tinygrad.renderer.tensor_cores.tc_mode`, read from
    the environment by default) gives on a device whose matrices have the ``layout`` family: ``"on"``, every shape in
    that layout; ``"auto"``, only the shapes whose registers go straight to the matrices (a known layout, float16
    inputs: bfloat16 ones still stage), and none where the layout is unknown (staged, they run no faster than scalar
    code)."""
    mode = mode or tc_mode()
    if mode == "on":
        return dataclasses.replace(caps, tc_layout=layout)
    shapes = () if mode == "off" or layout == "chunk" else tuple(s for s in caps.tc_shapes if s.dtype_in == "f16")
    return dataclasses.replace(caps, tc_shapes=shapes, tc_threads=caps.tc_threads if shapes else 0, tc_layout=layout)
