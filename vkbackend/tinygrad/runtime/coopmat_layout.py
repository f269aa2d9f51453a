"""Which register layout a device's cooperative matrices have, found by running a probe kernel on it.

A cooperative matrix spreads its elements over a subgroup in a way Vulkan leaves to the driver, but fixed: component
``i`` of invocation ``l``'s matrix is always the same element. Where that layout is one the renderer knows
(:func:`vkbackend.tinygrad.renderer.tensor_cores.register_layout`), tinygrad's registers can be the matrices'
components directly, with no staging through shared memory. :func:`probe_layout` loads a known matrix of each use and
shape into cooperative matrices, in a work group of four 32-invocation warps (32 x 2 x 2: the register path relies on
every 32 x Y x Z work group splitting into subgroups the same way), reads back every invocation's components, how
many it holds and its subgroup ids, and names the family the device matches: ``"nv"`` (NVIDIA's), else ``"chunk"``
(no layout the renderer can hand registers to). It runs only on a vendor whose family the renderer knows.
"""

from __future__ import annotations

import dataclasses
import logging

import numpy as np

from vkbackend.errors import BackendError, ErrorStatus
from vkbackend.tinygrad.compiler.bf16_spirv import retype_cooperative_matrices
from vkbackend.tinygrad.renderer.caps import DeviceCaps, TCShape
from vkbackend.tinygrad.renderer.tensor_cores import Layout, register_layout, tc_mode

__all__ = ["Probed", "probe_layout", "mismatch", "with_tensor_cores"]

log = logging.getLogger("vkbackend")

FAMILIES = {"nv": 0x10DE}  # the layouts probed for (besides the chunks any device can stage), by the vendor that has it
_WARPS = (2, 2)  # the probe's work group: 32 x 2 x 2 invocations
_INVOCATIONS = 32 * _WARPS[0] * _WARPS[1]
_STRIDE = 64  # output words per invocation and use
_BF16_EXACT = 256  # the largest integer up to which bfloat16 holds every integer: a probe numbers its tiles' elements


def _base(use: int) -> int:
    """Where the components of use ``use`` (A, B, C) begin in the probe's output, after each invocation's ids; use 3
    is the three matrices' component counts."""
    return _INVOCATIONS + use * _INVOCATIONS * _STRIDE


_WORDS = _base(3) + 3  # the probe's output


def _source(shape: TCShape) -> str:
    """The probe of one shape: each matrix loaded from a row-major tile whose element ``i`` is ``i`` (exact in float16
    and bfloat16 up to 256), every invocation's components written out (bfloat16 A and B ones as their bits: the
    matrices are declared float16 and retyped in the SPIR-V, compiler/bf16_spirv.py)."""
    m, n, k = shape.m, shape.n, shape.k
    ct = "float" if shape.dtype_out == "f32" else "float16_t"
    bf16 = shape.dtype_in == "bf16"
    it, init = (
        ("uint16_t", "uint16_t(floatBitsToUint(float(i)) >> 16u)") if bf16 else ("float16_t", "float16_t(float(i))")
    )
    read = "uint(float16BitsToUint16({}[i]))" if bf16 else "uint(float({}[i]))"
    reads = "\n".join(
        f"  for (int i = 0; i < {mat}.length(); i++)"
        f" o[{_base(use)}u + inv*{_STRIDE}u + uint(i)] = {read.format(mat) if use < 2 else f'uint(float({mat}[i]))'};"
        for use, mat in enumerate(("ma", "mb", "mc"))
    )
    return f"""#version 450
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
layout(local_size_x = 32, local_size_y = {_WARPS[0]}, local_size_z = {_WARPS[1]}) in;
layout(std430, binding = 0) buffer O {{ uint o[]; }};
shared {it} sa[{m * k}]; shared {it} sb[{k * n}]; shared {ct} sc[{m * n}];
void main() {{
  uint inv = gl_LocalInvocationIndex;
  for (uint i = inv; i < {m * k}u; i += {_INVOCATIONS}u) sa[i] = {init};
  for (uint i = inv; i < {k * n}u; i += {_INVOCATIONS}u) sb[i] = {init};
  for (uint i = inv; i < {m * n}u; i += {_INVOCATIONS}u) sc[i] = {ct}(float(i));
  barrier();
  coopmat<float16_t, gl_ScopeSubgroup, {m}, {k}, gl_MatrixUseA> ma;
  coopmat<float16_t, gl_ScopeSubgroup, {k}, {n}, gl_MatrixUseB> mb;
  coopmat<{ct}, gl_ScopeSubgroup, {m}, {n}, gl_MatrixUseAccumulator> mc;
  coopMatLoad(ma, sa, 0, {k}u, gl_CooperativeMatrixLayoutRowMajor);
  coopMatLoad(mb, sb, 0, {n}u, gl_CooperativeMatrixLayoutRowMajor);
  coopMatLoad(mc, sc, 0, {n}u, gl_CooperativeMatrixLayoutRowMajor);
  o[inv] = gl_SubgroupInvocationID | (gl_SubgroupID << 8);
  if (inv == 0u) {{
    o[{_base(3)}u] = uint(ma.length());
    o[{_base(3) + 1}u] = uint(mb.length());
    o[{_base(3) + 2}u] = uint(mc.length());
  }}
{reads}
}}"""


def _probe_spirv(shape: TCShape) -> bytes:
    """The probe of ``shape`` compiled (raises ``BackendError(KernelCompilation)`` without glslang 13)."""
    import vkbackend  # noqa: PLC0415 - the probe compiles GLSL: only when tensor cores are switched on

    spirv = vkbackend.compile_glsl(_source(shape), target_env="vulkan1.3")
    return retype_cooperative_matrices(spirv) if shape.dtype_in == "bf16" else spirv


def _as_values(words: np.ndarray, shape: TCShape) -> np.ndarray:
    """The probe's output with bfloat16 A and B components (written as their bits) turned into the element numbers
    they hold; a component that holds no such number (negative, a fraction, not finite) becomes 0xFFFFFFFF, which no
    layout places."""
    if shape.dtype_in != "bf16":
        return words
    out = words.copy()
    ab = slice(_base(0), _base(2))
    values = ((words[ab] & 0xFFFF) << 16).astype(np.uint32).view(np.float32)
    numbered = np.isfinite(values) & (values >= 0) & (values <= _BF16_EXACT) & (values == np.floor(values))
    out[ab] = np.where(numbered, np.where(numbered, values, 0).astype(np.uint32), np.uint32(0xFFFFFFFF))
    return out


def mismatch(layout: Layout, words: np.ndarray) -> str | None:
    """How the probe's output ``words`` (one run of :func:`_source`'s kernel) differs from ``layout`` (the first
    difference found), or None where every invocation's lane is its x, its warp (y, z) is one subgroup, and component
    ``i`` of each matrix is the element the layout places there."""
    if len(words) != _WORDS:
        return f"{len(words)} words, not {_WORDS}"
    ids = words[:_INVOCATIONS]
    flat = np.arange(_INVOCATIONS)
    lanes = flat % 32
    wrong = np.flatnonzero((ids & 0xFF != lanes) | ((ids >> 8) & 0xFF != flat // 32))
    if wrong.size:
        first = int(wrong[0])
        return f"invocation {first} is lane {ids[first] & 0xFF} of subgroup {(ids[first] >> 8) & 0xFF}"
    for use, bits in enumerate(layout):
        elements = 1 << sum(1 for kind, _ in bits if kind == "i")
        held = int(words[_base(3) + use])
        if held != elements or elements > _STRIDE:
            return f"{'ABC'[use]} has {held} components per invocation, not {elements}"
        # the element the layout places at component i of each invocation, all at once: bit f of the place is bit j of
        # i or of the lane, as the layout's f-th entry says
        components = np.arange(elements)[None, :]
        place = np.zeros((_INVOCATIONS, elements), np.int64)
        for f, (kind, j) in enumerate(bits):
            place |= (((components if kind == "i" else lanes[:, None]) >> j) & 1) << f
        got = words[_base(use) : _base(use + 1)].reshape(_INVOCATIONS, _STRIDE)[:, :elements]
        wrong = np.flatnonzero((got != place).any(axis=1))
        if wrong.size:
            return f"{'ABC'[use]} of invocation {int(wrong[0])} holds {got[wrong[0]].tolist()}"
    return None


@dataclasses.dataclass(frozen=True)
class Probed:
    """What the probe found on a device: the register-layout family of its cooperative matrices (``"chunk"``: none the
    renderer knows, so tensor cores stage), and the tensor-core shapes whose registers hold that layout (every shape
    for ``"chunk"``: staging does not depend on the layout)."""

    family: str
    shapes: tuple[TCShape, ...]


def _run_probe(device, shape: TCShape) -> np.ndarray:
    """The probe of ``shape`` run on ``device``: its output words, bfloat16 components as values (``_as_values``)."""
    prog = device.compile(_probe_spirv(shape))
    pool = device.memory_pool
    buf = pool.allocate(4 * _WORDS)
    try:
        pool.host_to_pool(np.zeros(_WORDS, np.uint32), buf)
        device.launch(prog, [buf], (), (1, 1, 1))
        out = np.empty(_WORDS, np.uint32)
        pool.pool_to_host(buf, out)
    finally:
        pool.release(buf)
        device.release_program(prog)
    return _as_values(out, shape)


def probe_layout(device, caps: DeviceCaps) -> Probed:
    """The register-layout family of ``device``'s cooperative matrices (a :class:`vkbackend.Device`): one of
    :data:`FAMILIES` (only those of the device's vendor are probed) where every float16 tensor-core shape in ``caps``
    matches it, else ``"chunk"``, also where there is nothing to probe or no glslang 13 to compile the probe (nor any
    tensor-core kernel); and the shapes that hold it: those float16 shapes, and each bfloat16 shape whose own probe
    matches the family too (one that does not, or cannot be probed, is left out and logged, and costs the float16
    shapes nothing). Other errors (the device's) are raised: sync the device first, so that none of them is an earlier
    launch's (the VK device does, vkbackend/tinygrad/runtime/ops_vk.py)."""
    staged = Probed("chunk", caps.tc_shapes)
    f16 = [s for s in caps.tc_shapes if s.dtype_in == "f16"]
    candidates = [family for family, vendor in FAMILIES.items() if vendor == device.info.vendor_id]
    if not f16 or caps.tc_threads != 32 or not candidates:
        return staged
    for shape in f16:
        try:
            out = _run_probe(device, shape)
        except BackendError as error:
            if error.status is not ErrorStatus.KernelCompilation:
                raise
            log.info("vkbackend: no cooperative-matrix probe on %s (%s)", device.info.name, error)
            return staged  # without glslang 13 no tensor-core kernel compiles either
        for family in list(candidates):
            why = _mismatch_of(shape, family, out)
            if why is not None:
                log.info("vkbackend: %s %s is not the %s layout: %s", device.info.name, shape.token(), family, why)
                candidates.remove(family)
        if not candidates:
            return staged
    family, held = candidates[0], list(f16)
    for shape in (s for s in caps.tc_shapes if s.dtype_in == "bf16"):
        if max(shape.m * shape.k, shape.k * shape.n) > _BF16_EXACT:
            why = f"its tiles have more than {_BF16_EXACT} elements, which bfloat16 cannot number exactly"
        else:
            try:
                why = _mismatch_of(shape, family, _run_probe(device, shape))
            except BackendError as error:
                if error.status is not ErrorStatus.KernelCompilation:
                    raise
                why = f"its probe did not compile ({error})"
        if why is None:
            held.append(shape)
        else:
            log.info("vkbackend: %s %s is left out of the %s layout: %s", device.info.name, shape.token(), family, why)
    return Probed(family, tuple(s for s in caps.tc_shapes if s in held))


def _mismatch_of(shape: TCShape, family: str, out: np.ndarray) -> str | None:
    layout = register_layout(shape, 32, family)
    return "no layout for the shape" if layout is None else mismatch(layout, out)


def with_tensor_cores(caps: DeviceCaps, probed: Probed, mode: str | None = None) -> DeviceCaps:
    """``caps`` with the tensor cores the mode (:func:`vkbackend.tinygrad.renderer.tensor_cores.tc_mode`, read from
    the environment by default) gives on a device the probe found ``probed``: where the layout is known, the shapes
    that hold it (their registers go straight to the matrices), with the mode ``"auto"`` or ``"on"``; where it is
    unknown, none with ``"auto"`` (staged, they run no faster than scalar code) and every shape with ``"on"``."""
    mode = mode or tc_mode()
    if mode == "on" or (mode == "auto" and probed.family != "chunk"):
        shapes = probed.shapes if probed.family != "chunk" else caps.tc_shapes
    else:
        shapes = ()
    return dataclasses.replace(
        caps, tc_shapes=shapes, tc_threads=caps.tc_threads if shapes else 0, tc_layout=probed.family
    )
