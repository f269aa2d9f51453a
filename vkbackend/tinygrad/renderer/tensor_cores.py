"""tinygrad's tensor cores on Vulkan: its ``WMMA`` op on cooperative matrices (``GL_KHR_cooperative_matrix``).

**The tensor cores.** For each cooperative-matrix shape the device lists that tinygrad can use (:func:`device_shapes`:
subgroup scope, float16 or bfloat16 inputs, float32 or float16 results), :func:`make_tensor_core` builds a tinygrad
``TensorCore`` whose ``threads`` are the device's largest subgroup, in a register layout (:func:`register_layout`):
the device's own where a probe has recognised it (``"nv"``, NVIDIA's: vkbackend/tinygrad/runtime/coopmat_layout.py),
else the simplest there is (``"chunk"``: lane ``l`` of a warp holds elements ``l*e .. l*e+e-1`` of each operand's
row-major tile, ``e`` = the operand's elements per thread). Its ``opts`` and ``swizzle`` are derived from the layout,
bit by bit (tests/tinygrad/test_tensor_cores.py derives the layout back from tinygrad's own description and checks
it).

**The WMMA op, straight from registers.** A cooperative matrix spreads its elements over a subgroup in a way the
driver decides, but fixed, and GLSL reads and writes an invocation's components (``mat[i]``). Where the registers
are in the device's layout and each warp is one subgroup with tinygrad's lane the subgroup's (the warp is the work
group's whole x size), the WMMA writes the invocation's A, B and C elements as the matrices' components, multiplies
and reads D back: no shared memory, no barrier. bfloat16 elements (their bits) are written as float16 bit patterns
into matrices declared float16, which
:func:`vkbackend.tinygrad.compiler.bf16_spirv.retype_cooperative_matrices` retypes to bfloat16 in the SPIR-V with
those writes (glslang 13 has no bfloat16 type).

**Staged.** Otherwise it stages through shared memory: each invocation writes its A, B and C elements to its warp's
row-major tiles where the layout places them (``..._place_a/b/c``; its lane and warp are tinygrad's, computed from the
local ids as tinygrad's gpudims forms them), ``barrier()``, each subgroup loads, multiplies and stores the tiles of the
warps it takes (``gl_SubgroupID``, ``gl_SubgroupID + gl_NumSubgroups``, ...: right for any number and size of
subgroups), ``barrier()``, and each invocation reads its D elements back. Cooperative-matrix operations need every
invocation of the subgroup active: the kernel is SPIR-V 1.6 (Vulkan 1.3), where a work group whose x size is a
multiple of the subgroup size has full subgroups, and x is a multiple of ``threads`` (tinygrad's warp is its first
local dimension), which is the largest subgroup size. Staged bfloat16 inputs are their bits, loaded into float16
matrices that the SPIR-V retyping makes bfloat16 as above.

**Emulation** (``tcemu`` in the arch): the staging, with the product computed by each invocation for its own D
elements in scalar code instead of cooperative matrices. It runs anywhere (lavapipe), so each layout, the lane and
warp arithmetic and the barriers are checked against numpy where no device has cooperative matrices.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tinygrad.codegen.opt.tc import TensorCore
from tinygrad.dtype import DType, dtypes
from tinygrad.uop.ops import Ops, UOp

from vkbackend.config import env_switch
from vkbackend.tinygrad.renderer.caps import TC_INPUTS, TC_OUTPUTS, DeviceCaps, TCShape
from vkbackend.tinygrad.renderer.glsl_types import TYPE_MAP, value_type

__all__ = ["SWITCH", "device_shapes", "make_tensor_core", "tensor_cores", "render_wmma", "wmma_prelude", "wmma_target"]

SWITCH = "VKBACKEND_TINYGRAD_TC"  # unset: tensor cores where they pay (tc_mode); on: wherever they run; off: never
# arch spellings of the types tinygrad's tensor cores can take and give
ARCH_DTYPES: dict[str, DType] = {"f16": dtypes.half, "bf16": dtypes.bfloat16, "f32": dtypes.float}
_DEVICE_DTYPES = {"float16": "f16", "bfloat16": "bf16", "float32": "f32"}


def tc_mode() -> str:
    """What :data:`SWITCH` asks for: ``"auto"`` (unset: tensor cores where tinygrad's registers can be the device's
    matrices' components, which a probe finds: vkbackend/tinygrad/runtime/coopmat_layout.py), ``"on"`` (every shape
    the device can run, staged through shared memory where the layout is unknown) or ``"off"``."""
    switch = env_switch(SWITCH)
    return "auto" if switch is None else "on" if switch else "off"


def _api_at_least(version: str, wanted: tuple[int, int]) -> bool:
    major, minor = (int(x) for x in version.split(".")[:2])
    return (major, minor) >= wanted


def device_shapes(info) -> tuple[tuple[TCShape, ...], int]:
    """The tensor-core shapes tinygrad may use on a device (a :class:`vkbackend.DeviceInfo`), and their ``threads``.

    Empty where :data:`SWITCH` is off (``0``, ``false``, ``no``, ``off``), and unless the device can run the rendered
    kernels: cooperative matrices, Vulkan 1.3 (the kernels are SPIR-V 1.6), the Vulkan memory model, basic subgroup
    operations and float16 (bfloat16 inputs need shaderBFloat16CooperativeMatrix and 16-bit integers too). Which of
    them tinygrad gets is settled once the device's layout is probed (coopmat_layout.with_tensor_cores)."""
    if tc_mode() == "off":
        return (), 0
    feats = info.features
    threads = int(info.max_subgroup_size or info.subgroup_size)
    if not (
        {"cooperativeMatrix", "vulkanMemoryModel", "shaderFloat16"} <= feats
        and info.subgroup_operations & 0x1
        and _api_at_least(info.api_version, (1, 3))
        and 0 < threads <= info.max_local_threads
    ):
        return (), 0
    found: list[TCShape] = []
    for s in info.cooperative_matrix_shapes:
        din, dout = _DEVICE_DTYPES.get(s.a_type), _DEVICE_DTYPES.get(s.c_type)
        if s.scope != "subgroup" or s.a_type != s.b_type or s.c_type != s.result_type or s.saturating_accumulation:
            continue
        if din not in TC_INPUTS or dout not in TC_OUTPUTS:
            continue
        if din == "bf16" and not {"shaderBFloat16CooperativeMatrix", "shaderBFloat16Type", "shaderInt16"} <= feats:
            continue
        shape = TCShape(s.m, s.n, s.k, din, dout)
        if shape not in found and make_tensor_core(shape, threads) is not None:
            found.append(shape)
    return tuple(found), threads if found else 0


# Where each bit of an operand's row-major tile index comes from: ("i", j) bit j of the element's place in its
# invocation's registers, ("l", j) bit j of the invocation's lane. One list per operand, A (m x k), B (k x n),
# C (m x n), the index's lowest bit first.
Layout = tuple[tuple[tuple[str, int], ...], ...]


def _fragment_bits(pair: int, group: int) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """NVIDIA's fragment layout along one operand's two dimensions: the "pair" dimension takes element bit 0 and lane
    bits 0-1, then the next element bits, the "group" dimension lane bits 2-4, then the element bits after those."""
    extra_pair, extra_group = int(math.log2(pair)) - 3, int(math.log2(group)) - 3
    p = [("i", 0), ("l", 0), ("l", 1)] + [("i", 1 + j) for j in range(extra_pair)]
    g = [("l", 2), ("l", 3), ("l", 4)] + [("i", 1 + extra_pair + j) for j in range(extra_group)]
    return p, g


def register_layout(shape: TCShape, threads: int, family: str) -> Layout | None:
    """The layout of an operand's elements over a warp's registers: ``"chunk"``, lane ``l`` holds elements
    ``l*e .. l*e+e-1`` of each row-major tile (what the staging writes and reads anywhere); ``"nv"``, the layout of
    NVIDIA's cooperative matrices (PTX's mma fragments: lane = 4 * group + thread in group), which a probe confirms on
    the device before the renderer relies on it (vkbackend/tinygrad/runtime/coopmat_layout.py). None where the family
    has no layout for the shape."""
    m, n, k = shape.m, shape.n, shape.k
    if family == "chunk":
        t = int(math.log2(threads))
        out = []
        for size in (m * k, k * n, m * n):
            e = int(math.log2(size)) - t
            out.append(tuple([("i", j) for j in range(e)] + [("l", j) for j in range(t)]))
        return tuple(out)
    if family == "nv":
        if threads != 32 or min(m, n, k) < 8:
            return None
        ak, am = _fragment_bits(k, m)  # A = m x k: index m*k_size + k, the k bits low
        bk, bn = _fragment_bits(k, n)  # B = k x n: index k*n_size + n, the n bits low
        cn, cm = _fragment_bits(n, m)  # C = m x n: index m*n_size + n, the n bits low
        return (tuple(ak + am), tuple(bn + bk), tuple(cn + cm))
    return None


def make_tensor_core(shape: TCShape, threads: int, family: str = "chunk") -> TensorCore | None:
    """tinygrad's ``TensorCore`` for ``shape`` on warps of ``threads`` invocations, with the register layout
    :func:`register_layout` gives for ``family``; None where tinygrad cannot describe that layout (sizes not powers of
    two, fewer elements than threads, or a layout its checks reject)."""
    sizes = (shape.m, shape.n, shape.k, threads)
    if any(x < 1 or x & (x - 1) for x in sizes):
        return None
    if min(shape.m * shape.k, shape.k * shape.n, shape.m * shape.n) < threads:
        return None
    layout = register_layout(shape, threads, family)
    if layout is None:
        return None
    a, b, c, t = (int(math.log2(x)) for x in sizes)
    # C's row-major index n + N*m, bit by bit: bit f < b is bit f of n (tinygrad's axis 0), else bit f-b of m (axis 1);
    # an element bit is an upcast, a lane bit a local, each in increasing order (tinygrad numbers them so)
    c_layout = layout[2]
    opts = tuple(("u" if c_layout[f][0] == "i" else "l") + ("0" if f < b else "1") for f in range(a + b))
    for kind in "il":
        if [j for x, j in c_layout if x == kind] != sorted(j for x, j in c_layout if x == kind):
            return None
    count = {"u": 0, "l": 0}
    n_bits: list[str] = []  # tinygrad's name of each bit of n, of m
    m_bits: list[str] = []
    for o in opts:
        (n_bits if o[1] == "0" else m_bits).append(f"{o[0]}{count[o[0]]}")
        count[o[0]] += 1
    k_bits = [f"r{j}" for j in range(c)]
    e = sum(1 for kind, _ in c_layout if kind == "i")  # bits of C's elements per thread
    lanes, upcasts = [f"l{i}" for i in range(t)], [f"u{j}" for j in range(e)]
    # the axes tinygrad forms an operand's register vector from, the last the fastest (TensorCore.base_upcast_axes)
    vector_axes = upcasts[::-1] + k_bits[::-1]

    def remap(flat_bits: list[str], unused: list[str], bits: tuple[tuple[str, int], ...]) -> dict[str, str]:
        """Each axis's meaning for one operand: the axis holding each bit of its register place (the last vector axis
        is bit 0) or lane takes the bit of its row-major index that bit lays out; the axes it does not depend on take
        the other operand's dimension."""
        vector = vector_axes[: len(flat_bits) - t]
        meaning = {
            (vector[len(vector) - 1 - j] if kind == "i" else lanes[j]): flat for (kind, j), flat in zip(bits, flat_bits)
        }
        rest = [x for x in vector_axes if x not in meaning]
        return {**meaning, **dict(zip(rest, unused))}

    swizzle = tuple(
        (tuple(r[x] for x in lanes), tuple(r[x] for x in upcasts), tuple(r[x] for x in k_bits))
        for r in (remap(k_bits + m_bits, n_bits, layout[0]), remap(n_bits + k_bits, m_bits, layout[1]))
    )
    try:
        return TensorCore(
            dims=(shape.n, shape.m, shape.k),
            threads=threads,
            elements_per_thread=(
                shape.m * shape.k // threads,
                shape.k * shape.n // threads,
                shape.m * shape.n // threads,
            ),
            dtype_in=ARCH_DTYPES[shape.dtype_in],
            dtype_out=ARCH_DTYPES[shape.dtype_out],
            opts=opts,
            swizzle=swizzle,
        )  # type: ignore[arg-type]
    except AssertionError:
        return None


def tensor_cores(caps: DeviceCaps) -> list[TensorCore]:
    """The renderer's ``tensor_cores``: one per shape the arch names (none without ``w<threads>``), in the register
    layout it names."""
    if not caps.tc_threads:
        return []
    return [
        tc for shape in caps.tc_shapes if (tc := make_tensor_core(shape, caps.tc_threads, caps.tc_layout)) is not None
    ]


# ---------------------------------------------------------------------------------------------------------------------
# rendering
# ---------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Wmma:
    """One tensor core as a kernel uses it: its function's name, shape and types, its warps, the register layout of
    its operands, and whether its operands go to cooperative matrices straight from registers."""

    name: str
    m: int
    n: int
    k: int
    din: DType
    dout: DType
    threads: int
    per_thread: tuple[int, int, int]  # elements of A, B, C in each invocation
    warps: int
    layout: Layout
    registers: bool

    @staticmethod
    def of(u: UOp, local: list[int], family: str, emulate: bool) -> "_Wmma":
        (n, m, k), din, threads = u.arg[0], u.arg[1], u.arg[3]
        name = _function_name(u)
        a, b, c = (x.max_numel() for x in u.src)
        shape = TCShape(m, n, k, _ARCH_NAMES[din], _ARCH_NAMES[u.dtype])
        layout = register_layout(shape, threads, family)
        if layout is None:
            raise RuntimeError(f"VK renderer: no {family} register layout for {name}")
        # straight from registers: the device's own layout (not our chunks), and one warp per subgroup with tinygrad's
        # lane the subgroup's (the warp is the whole x size)
        registers = not emulate and family != "chunk" and local[0] == threads
        return _Wmma(name, m, n, k, din, u.dtype, threads, (a, b, c), math.prod(local) // threads, layout, registers)

    def tiles(self, emulate: bool) -> list[tuple[str, DType, int]]:
        """(array, element type, elements per warp) of the staging tiles: A and B, and C (which D overwrites) where
        cooperative matrices compute; none straight from registers."""
        if self.registers:
            return []
        ret = [(f"{self.name}_a", self.din, self.m * self.k), (f"{self.name}_b", self.din, self.k * self.n)]
        return ret if emulate else ret + [(f"{self.name}_c", self.dout, self.m * self.n)]


_ARCH_NAMES = {v: k for k, v in ARCH_DTYPES.items()}


def _function_name(u: UOp) -> str:
    """The GLSL function of a WMMA op's tensor core (one per shape and types in a kernel)."""
    (n, m, k), din = u.arg[0], u.arg[1]
    return f"vk_wmma_{m}x{n}x{k}_{din.name}_{u.dtype.name}"


def render_wmma(ctx, x: UOp) -> str:
    """A WMMA op: a call of its function (defined by :func:`wmma_prelude`)."""
    return f"{_function_name(x)}({ctx[x.src[0]]}, {ctx[x.src[1]]}, {ctx[x.src[2]]})"


def wmma_target(uops: list[UOp], emulate: bool) -> dict:
    """What the kernel's metadata must tell the compiler: SPIR-V 1.6 for cooperative matrices, and whether their
    bfloat16 inputs are to be retyped (compiler/bf16_spirv.py)."""
    wmmas = [u for u in uops if u.op is Ops.WMMA]
    if not wmmas or emulate:
        return {}
    meta: dict = {"target_env": "vulkan1.3"}
    if any(u.arg[1] == dtypes.bfloat16 for u in wmmas):
        meta["bf16_coopmat"] = True
    return meta


def wmma_prelude(
    uops: list[UOp], local: list[int], emulate: bool, shared_used: int, shared_max: int, family: str = "chunk"
) -> tuple[list[str], list[str]]:
    """``(extensions, definitions)`` for the WMMA ops of a kernel: its ``#extension`` lines, and the staging tiles and
    one function per tensor core, to place before ``main``. ``local`` is the kernel's work-group size; the tiles must
    fit in ``shared_max`` bytes of shared memory beside the kernel's own ``shared_used``; ``family`` is the register
    layout of the arch's tensor cores (:func:`register_layout`). Raises RuntimeError (a candidate tinygrad's BEAM
    skips) where the work group or the shared memory does not allow them."""
    wmmas = {w.name: w for w in (_Wmma.of(u, local, family, emulate) for u in uops if u.op is Ops.WMMA)}
    if not wmmas:
        return [], []
    if not emulate:
        _one_half_type(wmmas.values())
    ext = (
        []
        if emulate
        else [
            "#extension GL_KHR_memory_scope_semantics : require",
            "#extension GL_KHR_cooperative_matrix : require",
            "#extension GL_KHR_shader_subgroup_basic : require",
        ]
    )
    defs: list[str] = []
    staged = 0
    for w in wmmas.values():
        # full subgroups (cooperative matrices need them) take an x size that is a multiple of the largest subgroup
        if math.prod(local) % w.threads or local[0] % w.threads:
            raise RuntimeError(
                f"VK renderer: {w.name} needs warps of {w.threads} invocations along x; the work group is {local}"
            )
        for array, dt, size in w.tiles(emulate):
            defs.append(f"shared {TYPE_MAP[dt]} {array}[{w.warps * size}];")
            staged += w.warps * size * dt.itemsize
        if shared_used + staged > shared_max:
            raise RuntimeError(
                f"VK renderer: {w.name} stages {staged} B of shared memory for {w.warps} warps beside "
                f"the kernel's {shared_used} B, over the device's {shared_max} B"
            )
        defs += _function(w, local, emulate)
    return ext, defs


def _one_half_type(wmmas) -> None:
    """Raise RuntimeError (a candidate BEAM skips) for a kernel whose cooperative matrices take both float16 and
    bfloat16 inputs: bfloat16 matrices are float16 ones until the SPIR-V is retyped, which would retype the float16
    ones of the same shape with them."""
    if {dtypes.half, dtypes.bfloat16} <= {w.din for w in wmmas}:
        raise RuntimeError("VK renderer: a kernel with both float16 and bfloat16 tensor cores")


def _place(w: _Wmma, operand: int) -> list[str]:
    """``{name}_place_{a,b,c}(lane, i)``: where element ``i`` of an invocation's registers lies in its warp's
    row-major tile of the operand, from the register layout."""
    terms = [
        f"((({'i' if kind == 'i' else 'lane'} >> {j}u) & 1u) << {f}u)" for f, (kind, j) in enumerate(w.layout[operand])
    ]
    return [f"uint {w.name}_place_{'abc'[operand]}(uint lane, uint i) {{ return {' | '.join(terms)}; }}"]


def _function(w: _Wmma, local: list[int], emulate: bool) -> list[str]:
    ta, tb, tc = (value_type(dt, n) for dt, n in zip((w.din, w.din, w.dout), w.per_thread))
    if w.registers:
        return [f"{tc} {w.name}({ta} a, {tb} b, {tc} c) {{", *_register_product(w), "  return d;", "}"]
    mine = [
        (array, f"vk_warp*{size}u + {w.name}_place_{v}(vk_lane, i)", n, v)  # this invocation's elements of each tile
        for (array, _, size), n, v in zip(w.tiles(emulate), w.per_thread, "abc")
    ]
    return [
        *(line for operand in range(3) for line in _place(w, operand)),
        f"{tc} {w.name}({ta} a, {tb} b, {tc} c) {{",
        # tinygrad's lane and warp: its warp is the first of its local dimensions, the slowest of the linear index it
        # forms from the local ids (codegen/gpudims.py), so lane = flat / warps and warp = flat % warps
        f"  uint vk_flat = (gl_LocalInvocationID.x*{local[1]}u + gl_LocalInvocationID.y)*{local[2]}u"
        " + gl_LocalInvocationID.z;",
        f"  uint vk_lane = vk_flat / {w.warps}u, vk_warp = vk_flat % {w.warps}u;",
        *(f"  for (uint i = 0u; i < {n}u; i++) {array}[{index}] = {v}[i];" for array, index, n, v in mine),
        "  barrier();",
        *(_emulated_product(w) if emulate else _cooperative_product(w, mine[2])),
        "  return d;",
        "}",
    ]


def _register_product(w: _Wmma) -> list[str]:
    """D = A*B + C with the invocation's registers as its components of the subgroup's matrices: its lane is the
    subgroup's (the warp is the work group's whole x size) and the layout is the device's, so no staging, no barrier."""
    scope = "gl_ScopeSubgroup"
    ea, eb, ec = w.per_thread
    mat = _matrix_component(w.din)
    return [
        f"  coopmat<{mat}, {scope}, {w.m}, {w.k}, gl_MatrixUseA> ma;",
        f"  coopmat<{mat}, {scope}, {w.k}, {w.n}, gl_MatrixUseB> mb;",
        f"  coopmat<{TYPE_MAP[w.dout]}, {scope}, {w.m}, {w.n}, gl_MatrixUseAccumulator> mc;",
        f"  for (int i = 0; i < {ea}; i++) ma[i] = {_matrix_input(w.din, 'a[i]')};",
        f"  for (int i = 0; i < {eb}; i++) mb[i] = {_matrix_input(w.din, 'b[i]')};",
        f"  for (int i = 0; i < {ec}; i++) mc[i] = c[i];",
        "  mc = coopMatMulAdd(ma, mb, mc);",
        f"  {value_type(w.dout, ec)} d;",
        f"  for (int i = 0; i < {ec}; i++) d[i] = mc[i];",
    ]


def _matrix_component(din: DType) -> str:
    """The GLSL component type of the A and B matrices: bfloat16 ones are declared float16, and retyped in the SPIR-V
    (compiler/bf16_spirv.py)."""
    return "float16_t" if din == dtypes.bfloat16 else TYPE_MAP[din]


def _matrix_input(din: DType, v: str) -> str:
    """A register element as an A or B matrix component: a bfloat16 one's bits as the float16 the matrix is declared
    with (the retyping makes that reinterpretation bfloat16)."""
    return f"uint16BitsToFloat16({v})" if din == dtypes.bfloat16 else v


def _cooperative_product(w: _Wmma, c_tile: tuple[str, str, int, str]) -> list[str]:
    """Each subgroup computes D = A*B + C for the warps it takes, in place of C; then each invocation reads its D."""
    mat = _matrix_component(w.din)
    scope, layout = "gl_ScopeSubgroup", "gl_CooperativeMatrixLayoutRowMajor"
    array, index, n, _ = c_tile
    a, b, c = (f"{w.name}_{x}" for x in "abc")
    return [
        f"  for (uint t = gl_SubgroupID; t < {w.warps}u; t += gl_NumSubgroups) {{",
        f"    coopmat<{mat}, {scope}, {w.m}, {w.k}, gl_MatrixUseA> ma;",
        f"    coopmat<{mat}, {scope}, {w.k}, {w.n}, gl_MatrixUseB> mb;",
        f"    coopmat<{TYPE_MAP[w.dout]}, {scope}, {w.m}, {w.n}, gl_MatrixUseAccumulator> mc;",
        f"    coopMatLoad(ma, {a}, t*{w.m * w.k}u, {w.k}u, {layout});",
        f"    coopMatLoad(mb, {b}, t*{w.k * w.n}u, {w.n}u, {layout});",
        f"    coopMatLoad(mc, {c}, t*{w.m * w.n}u, {w.n}u, {layout});",
        "    mc = coopMatMulAdd(ma, mb, mc);",
        f"    coopMatStore(mc, {c}, t*{w.m * w.n}u, {w.n}u, {layout});",
        "  }",
        # after this barrier each invocation touches only its own elements of its warp's tiles until the next WMMA's
        # first barrier, so no third one is needed
        "  barrier();",
        f"  {value_type(w.dout, n)} d;",
        f"  for (uint i = 0u; i < {n}u; i++) d[i] = {array}[{index}];",
    ]


def _as_float(dt: DType, v: str) -> str:
    """A staged input element as float (bfloat16 is staged as its bits)."""
    return f"uintBitsToFloat(uint({v})<<16u)" if dt == dtypes.bfloat16 else f"float({v})"


def _emulated_product(w: _Wmma) -> list[str]:
    """Each invocation computes its own elements of D from its warp's A and B tiles, in float32."""
    ec = w.per_thread[2]
    a = _as_float(w.din, f"{w.name}_a[vk_warp*{w.m * w.k}u + row*{w.k}u + j]")
    b = _as_float(w.din, f"{w.name}_b[vk_warp*{w.k * w.n}u + j*{w.n}u + col]")
    return [
        f"  {value_type(w.dout, ec)} d;",
        f"  for (uint i = 0u; i < {ec}u; i++) {{",
        f"    uint p = {w.name}_place_c(vk_lane, i), row = p / {w.n}u, col = p % {w.n}u;",
        "    float acc = float(c[i]);",
        f"    for (uint j = 0u; j < {w.k}u; j++) acc += {a} * {b};",
        f"    d[i] = {TYPE_MAP[w.dout]}(acc);",
        "  }",
        "  barrier();",  # the next WMMA's writes wait for every read of these tiles
    ]
