"""Which register layout a device's cooperative matrices have, found by running a probe kernel on it.

A cooperative matrix spreads its elements over a subgroup in a way Vulkan leaves to the driver, but fixed: component
``i`` of invocation ``l``'s matrix is always the same element. Where that layout is one the renderer knows
(:func:`vkbackend.tinygrad.renderer.tensor_cores.register_layout`), tinygrad's registers can be the matrices'
components directly, with no staging through shared memory. :func:`probe_layout` loads a known matrix of each use and
shape into cooperative matrices, in a work group of four 32-invocation warps (32 x 2 x 2: the register path relies on
every 32 x Y x Z work group splitting into subgroups the same way), reads back every invocation's components, how
many it holds and its subgroup ids, and names the family the device matches: ``"nv"`` (NVIDIA's), else ``"chunk"``
(no layout the renderer can hand registers to). One kernel probes every shape of an input type, a work group each. It
runs only on a vendor whose family the renderer knows.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Sequence

import numpy as np

from vkbackend.errors import BackendError, ErrorStatus
from vkbackend.tinygrad.compiler.bf16_spirv import retype_cooperative_matrices
from vkbackend.tinygrad.renderer.caps import DeviceCaps, TCShape
from vkbackend.tinygrad.renderer.tensor_cores import Layout, register_layout, tc_mode

__all__ = ["Probed", "mismatch", "probe_compiles", "probe_layout", "with_tensor_cores"]

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


def _shared_bytes(shape: TCShape) -> int:
    """The shared memory one shape's probe declares: its A, B and C tiles."""
    return 2 * (shape.m * shape.k + shape.k * shape.n) + (4 if shape.dtype_out == "f32" else 2) * shape.m * shape.n


def _block(shape: TCShape, w: int) -> tuple[str, str]:
    """The shared tiles and the code of work group ``w``'s probe of ``shape``: each matrix loaded from a row-major
    tile whose element ``i`` is ``i`` (exact in float16 and bfloat16 up to 256), every invocation's components written
    out from word ``w * _WORDS`` (bfloat16 A and B ones as their bits: the matrices are declared float16 and retyped in
    the SPIR-V, compiler/bf16_spirv.py)."""
    m, n, k = shape.m, shape.n, shape.k
    ct = "float" if shape.dtype_out == "f32" else "float16_t"
    bf16 = shape.dtype_in == "bf16"
    it, init = (
        ("uint16_t", "uint16_t(floatBitsToUint(float(i)) >> 16u)") if bf16 else ("float16_t", "float16_t(float(i))")
    )
    read = "uint(float16BitsToUint16({}[i]))" if bf16 else "uint(float({}[i]))"
    out = w * _WORDS
    values = (read.format("ma"), read.format("mb"), "uint(float(mc[i]))")
    reads = "\n".join(
        f"    for (int i = 0; i < {mat}.length(); i++) o[{out + _base(use)}u + inv*{_STRIDE}u + uint(i)] = {value};"
        for use, (mat, value) in enumerate(zip(("ma", "mb", "mc"), values))
    )
    shared = f"shared {it} sa{w}[{m * k}]; shared {it} sb{w}[{k * n}]; shared {ct} sc{w}[{m * n}];"
    code = f"""  if (gl_WorkGroupID.x == {w}u) {{
    for (uint i = inv; i < {m * k}u; i += {_INVOCATIONS}u) sa{w}[i] = {init};
    for (uint i = inv; i < {k * n}u; i += {_INVOCATIONS}u) sb{w}[i] = {init};
    for (uint i = inv; i < {m * n}u; i += {_INVOCATIONS}u) sc{w}[i] = {ct}(float(i));
    barrier();
    coopmat<float16_t, gl_ScopeSubgroup, {m}, {k}, gl_MatrixUseA> ma;
    coopmat<float16_t, gl_ScopeSubgroup, {k}, {n}, gl_MatrixUseB> mb;
    coopmat<{ct}, gl_ScopeSubgroup, {m}, {n}, gl_MatrixUseAccumulator> mc;
    coopMatLoad(ma, sa{w}, 0, {k}u, gl_CooperativeMatrixLayoutRowMajor);
    coopMatLoad(mb, sb{w}, 0, {n}u, gl_CooperativeMatrixLayoutRowMajor);
    coopMatLoad(mc, sc{w}, 0, {n}u, gl_CooperativeMatrixLayoutRowMajor);
    o[{out}u + inv] = gl_SubgroupInvocationID | (gl_SubgroupID << 8);
    if (inv == 0u) {{
      o[{out + _base(3)}u] = uint(ma.length());
      o[{out + _base(3) + 1}u] = uint(mb.length());
      o[{out + _base(3) + 2}u] = uint(mc.length());
    }}
{reads}
  }}"""
    return shared, code


def _source(shapes: Sequence[TCShape]) -> str:
    """One kernel that probes every shape of ``shapes`` (all of one input type), work group ``w`` the ``w``-th, its
    output ``_WORDS`` words from word ``w * _WORDS``: one module to compile, validate and make a pipeline of, one launch
    and one read-back for them all (each costs a device's opening tens of milliseconds)."""
    blocks = [_block(shape, w) for w, shape in enumerate(shapes)]
    shared = "\n".join(b[0] for b in blocks)
    code = "\n".join(b[1] for b in blocks)
    return f"""#version 450
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
layout(local_size_x = 32, local_size_y = {_WARPS[0]}, local_size_z = {_WARPS[1]}) in;
layout(std430, binding = 0) buffer O {{ uint o[]; }};
{shared}
void main() {{
  uint inv = gl_LocalInvocationIndex;
{code}
}}"""


def _probe_spirv(shapes: Sequence[TCShape]) -> bytes:
    """The probe of ``shapes`` (all of one input type) compiled (raises ``BackendError(KernelCompilation)`` without
    glslang 13); kept, since :func:`_start` and :func:`_run_module` both need it."""
    return _compiled(tuple(shapes))


@functools.lru_cache(maxsize=16)
def _compiled(shapes: tuple[TCShape, ...]) -> bytes:
    import vkbackend  # noqa: PLC0415 - the probe compiles GLSL: only when tensor cores are switched on

    spirv = vkbackend.compile_glsl(_source(shapes), target_env="vulkan1.3")
    return retype_cooperative_matrices(spirv) if shapes[0].dtype_in == "bf16" else spirv


def probe_compiles(shapes: Sequence[TCShape], shared_max: int) -> bool:
    """Whether this process compiles the probe of ``shapes`` (glslang 13, and the bfloat16 retyping), GLSL to SPIR-V
    only: what an answer kept by an earlier process (layout_cache.py) needs to hold here, since tinygrad's
    tensor-core kernels compile as the probe does. Errors other than a refused compile are raised."""
    try:
        for group in modules(shapes, shared_max):
            _probe_spirv(group)
    except BackendError as error:
        if error.status is not ErrorStatus.KernelCompilation:
            raise
        return False
    return True


def modules(shapes: Sequence[TCShape], shared_max: int) -> list[list[TCShape]]:
    """``shapes`` split into probe modules, in order: float16 and bfloat16 inputs apart (a module's matrices are
    retyped to bfloat16 all together), each module's shared tiles within the device's ``shared_max`` bytes."""
    out: list[list[TCShape]] = []
    for dtype in dict.fromkeys(s.dtype_in for s in shapes):
        group: list[TCShape] = []
        for shape in (s for s in shapes if s.dtype_in == dtype):
            if group and sum(map(_shared_bytes, group)) + _shared_bytes(shape) > shared_max:
                out.append(group)
                group = []
            group.append(shape)
        out.append(group)
    return out


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
    for ``"chunk"``: staging does not depend on the layout). ``settled``: no shape was left out because its probe did
    not compile, which another glslang might (layout_cache.py keeps only a settled answer)."""

    family: str
    shapes: tuple[TCShape, ...]
    settled: bool = dataclasses.field(default=True, compare=False)


def _start(device, shapes: Sequence[TCShape]) -> list[int]:
    """The programs of every probe module of ``shapes`` (:func:`modules`), compiled with their pipelines made in the
    background, all at once: the driver makes them side by side while the probes run in turn, each taking its own
    reference (the same SPIR-V gives the same program). One that does not compile is left to its run to report."""
    started = []
    for group in modules(shapes, int(device.info.local_mem_size)):
        try:
            started.append(device.compile(_probe_spirv(group), background=True))
        except BackendError as error:
            if error.status is not ErrorStatus.KernelCompilation:
                for prog in started:
                    device.release_program(prog)
                raise
    return started


def _run_module(device, shapes: Sequence[TCShape]) -> list[np.ndarray]:
    """One probe module of ``shapes`` run on ``device``: each shape's output words, bfloat16 components as values
    (``_as_values``)."""
    prog = device.compile(_probe_spirv(shapes), background=True)
    pool = device.memory_pool
    buf = None
    try:
        buf = pool.allocate(4 * _WORDS * len(shapes))
        pool.host_to_pool(np.zeros(_WORDS * len(shapes), np.uint32), buf)
        device.launch(prog, [buf], (), (len(shapes), 1, 1))
        out = np.empty(_WORDS * len(shapes), np.uint32)
        pool.pool_to_host(buf, out)
    finally:
        if buf is not None:
            pool.release(buf)
        device.release_program(prog)
    return [_as_values(out[w * _WORDS : (w + 1) * _WORDS], shape) for w, shape in enumerate(shapes)]


def _run_probes(device, shapes: Sequence[TCShape]) -> dict[TCShape, np.ndarray | BackendError]:
    """Each shape's probe output on ``device``, or the ``KernelCompilation`` error that kept it from running: the
    shapes go in as few modules as fit (:func:`modules`), and where a module of several fails to compile or make a
    pipeline, each of its shapes is probed alone, so that a shape the compiler or the driver refuses costs the others
    nothing. Other errors (the device's) are raised."""
    found: dict[TCShape, np.ndarray | BackendError] = {}
    for group in modules(shapes, int(device.info.local_mem_size)):
        try:
            found.update(zip(group, _run_module(device, group)))
            continue
        except BackendError as error:
            if error.status is not ErrorStatus.KernelCompilation:
                raise
            if len(group) == 1:
                found[group[0]] = error
                continue
        for shape in group:
            try:
                found[shape] = _run_module(device, [shape])[0]
            except BackendError as error:
                if error.status is not ErrorStatus.KernelCompilation:
                    raise
                found[shape] = error
    return found


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
    bf16 = [s for s in caps.tc_shapes if s.dtype_in == "bf16"]
    numbered = [s for s in bf16 if max(s.m * s.k, s.k * s.n) <= _BF16_EXACT]
    started = _start(device, [*f16, *numbered])
    try:
        try:
            device.sync()  # every module's pipeline made: one that failed raises here, not at another's read-back
        except BackendError as error:
            if error.status is not ErrorStatus.KernelCompilation:
                raise
            # its run compiles it again, and a module that fails again is probed shape by shape
        return _probed(device, caps, f16, bf16, numbered, candidates)
    finally:
        for prog in started:
            if not device.closed:  # closed meanwhile (its error is on its way): nothing is left to release
                device.release_program(prog)


def _probed(device, caps: DeviceCaps, f16: list, bf16: list, numbered: list, candidates: list) -> Probed:
    """:func:`probe_layout`'s answer once the probes' programs are started: the float16 shapes' family, then the
    bfloat16 shapes that hold it."""
    staged = Probed("chunk", caps.tc_shapes)
    for shape, out in _run_probes(device, f16).items():
        if isinstance(out, BackendError):
            log.info("vkbackend: no cooperative-matrix probe on %s (%s)", device.info.name, out)
            return staged  # without glslang 13 no tensor-core kernel compiles either
        for family in list(candidates):
            why = _mismatch_of(shape, family, out)
            if why is not None:
                log.info("vkbackend: %s %s is not the %s layout: %s", device.info.name, shape.token(), family, why)
                candidates.remove(family)
    if not candidates:
        return staged
    family, held, settled = candidates[0], list(f16), True
    outs = _run_probes(device, numbered) if numbered else {}
    for shape in bf16:
        out = outs.get(shape)
        if out is None:
            why = f"its tiles have more than {_BF16_EXACT} elements, which bfloat16 cannot number exactly"
        elif isinstance(out, BackendError):
            why, settled = f"its probe did not compile ({out})", False
        else:
            why = _mismatch_of(shape, family, out)
        if why is None:
            held.append(shape)
        else:
            log.info("vkbackend: %s %s is left out of the %s layout: %s", device.info.name, shape.token(), family, why)
    return Probed(family, tuple(s for s in caps.tc_shapes if s in held), settled)


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
