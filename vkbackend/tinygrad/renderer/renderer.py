"""GLSL 450 compute renderer for tinygrad 0.14.0.

tinygrad lowers every kernel to a linear list of UOps and hands it to a ``CStyleLanguage`` subclass; this one writes
GLSL 450 for Vulkan (compiled to SPIR-V by :mod:`vkbackend.tinygrad.compiler.compiler`).  The shape of a rendered
kernel:

* one storage buffer per global argument, bound in argument-slot order (set 0, binding 0..n-1); an access through a
  pointer bitcast of an argument is composed from (or split into) the argument's own elements;
* vector loads and stores (tinygrad's ``supports_float4``): a buffer accessed only n elements at a time is declared as
  an array of ``vecN``/``f16vecN``/``ivecN``... (see "vector accesses" below);
* integer variables (symbolic shapes) in a push-constant block, in slot order;
* when a launch binds a *view* whose byte offset is not a multiple of ``minStorageBufferOffsetAlignment``, the
  remainder is passed per binding as extra push-constant words; the source is compiled twice (``VK_VIEWS`` 0 and 1)
  so that the common case pays nothing for it;
* workgroup / local ids from ``gl_WorkGroupID`` / ``gl_LocalInvocationID``, the local size baked in with
  ``layout(local_size_x=...)``; shared memory declared at file scope, ``barrier()`` between phases; kernels on global
  ids (``NOLOCALS``) take their local size from specialization constants 0-2, set per launch size by the program;
  a kernel of narrow work groups (one invocation, or fewer than 128) runs as wider groups (:func:`widen_groups`);
* bool buffers are stored as ``uint8_t`` (tinygrad's bool is one byte), 8/16/64-bit types come from the
  ``GL_EXT_shader_explicit_arithmetic_types`` / ``8bit_storage`` / ``16bit_storage`` extensions;
* tinygrad's tensor cores (``WMMA``), where the arch names some: cooperative matrices, see
  :mod:`vkbackend.tinygrad.renderer.tensor_cores`.

The renderer is pickled by tinygrad (``Renderer.__reduce__`` keeps only the ``Target``) and rebuilt in its compile
workers, so everything it knows about the device travels in ``target.arch``: see :func:`make_arch` / :func:`parse_arch`.
"""

from __future__ import annotations

import math
import struct

from tinygrad.codegen.decomp.transcendental import xexp2, xlog2, xsin
from tinygrad.dtype import AddrSpace, DType, dtypes, float_to_bf16
from tinygrad.helpers import Target, getenv, strip_parens
from tinygrad.renderer.cstyle import CStyleLanguage, base_rewrite, create_non_native_float_pats
from tinygrad.uop.ops import GroupOp, Ops, PatternMatcher, UOp, UPat

from vkbackend.tinygrad.compiler.compiler import VKCompiler
from vkbackend.tinygrad.compiler.kernel_format import with_meta
from vkbackend.tinygrad.renderer.caps import parse_arch
from vkbackend.tinygrad.renderer.glsl_types import (
    F2BF,
    F2BF_DEFINITION,
    TYPE_MAP,
    bitcast,
    cast,
    float_literal,
    int_literal,
    storage_dtype,
    value_type,
)
from vkbackend.tinygrad.renderer.local_layout import apply_axes, choose_axes
from vkbackend.tinygrad.renderer.loop_limit import bound_loops
from vkbackend.tinygrad.renderer.loops import emit, loops, parse
from vkbackend.tinygrad.renderer.memory_access import (
    GlobalArg,
    KernelMemory,
    global_vector_macros,
    plan_vector_widths,
    render_index,
    render_load,
    render_store,
)
from vkbackend.tinygrad.renderer.narrow_vectors import group_narrow_accesses
from vkbackend.tinygrad.renderer.stream_staging import plan_staging, stage_streams
from vkbackend.tinygrad.renderer.tensor_cores import render_wmma, tensor_cores, wmma_prelude, wmma_target
from vkbackend.tinygrad.renderer.unroll import unroll_for_loads
from vkbackend.tinygrad.renderer.work_groups import GRID_X, fold_groups, widen_groups

__all__ = ["VKRenderer"]


# ---------------------------------------------------------------------------------------------------------------------
# rewrites applied before rendering (extra_matcher) and the string rewrites
# ---------------------------------------------------------------------------------------------------------------------


def _xsin_nan_on_bits(d: UOp) -> UOp:
    """tinygrad's software sin, with sin(+-inf) and sin(NaN) made NaN by looking at the bits: xsin decides them with
    float compares (``x != x``, ``x != inf``) that NVIDIA's shader compiler folds away, which made them finite."""
    bits, exponent = (dtypes.uint32, 0x7F800000) if d.dtype == dtypes.float32 else (dtypes.uint64, 0x7FF0000000000000)
    inf_or_nan = (d.bitcast(bits) & exponent).eq(exponent)
    return inf_or_nan.where(d.const_like(math.nan), xsin(d))


def _float_via_f32(x: UOp):
    return UOp(x.op, dtypes.float32, tuple(s.cast(dtypes.float32) for s in x.src)).cast(x.dtype)


vk_extra_matcher = (
    PatternMatcher(
        [
            # GLSL has no double exp2/log2/sin: use tinygrad's software versions (exact in float64)
            (UPat(Ops.EXP2, dtypes.float64, src=(UPat.var("d"),)), xexp2),
            (UPat(Ops.LOG2, dtypes.float64, src=(UPat.var("d"),)), xlog2),
            # GLSL's sin is an approximation (lavapipe's and NVIDIA's lose all precision for large arguments): software
            # sin
            (UPat(Ops.SIN, (dtypes.float32, dtypes.float64), src=(UPat.var("d"),)), _xsin_nan_on_bits),
            # half transcendentals are computed in float32 (the float16 builtins are too imprecise on several drivers)
            (UPat((Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT), dtypes.float16, name="x"), _float_via_f32),
        ]
    )
    # bfloat16 arithmetic in float32; the conversions are glsl_types.cast's
    + create_non_native_float_pats((dtypes.bfloat16,))
)


# ops whose value the renderer may write inline into a parent expression (see CStyleLanguage._render); anything else is
# a variable by the time a parent reads it
_INLINABLE = {*GroupOp.ALU, Ops.CAST, Ops.BITCAST, Ops.STACK, Ops.INDEX, Ops.LOAD}


def _speculation_safe(u: UOp, budget: int = 256) -> bool:
    """True when evaluating ``u`` (and what the renderer inlines into it) where it is not used is harmless: no
    register-array or vector lane read at a computed index (out of range where the other branch was meant), and small
    enough to check.  Loads from global or shared memory are never inlined, so they are variables here."""
    seen: set[UOp] = set()
    todo = [u]
    while todo:
        v = todo.pop()
        if v in seen or v.op not in _INLINABLE:
            continue
        if v.op is Ops.LOAD and v.src[0].addrspace is not AddrSpace.REG:
            continue  # a variable
        if v.op is Ops.INDEX and (len(v.src) != 2 or _const_index(v.src[1]) is None):
            return False
        seen.add(v)
        if len(seen) > budget:
            return False
        todo.extend(v.src)
    return True


def _const_index(i: UOp) -> int | None:
    """The value of a constant index (tinygrad writes it CAST(CONST)), else None."""
    while i.op is Ops.CAST:
        i = i.src[0]
    return i.arg if i.op is Ops.CONST and isinstance(i.arg, int) else None


def _render_alu(ctx: "VKRenderer", x: UOp) -> str | None:
    if x.op is Ops.CMPNE and x.src[0] is x.src[1] and dtypes.is_float(x.src[0].dtype):
        ctx._special_widths.add(x.src[0].dtype.itemsize * 8)  # a NaN test, which a driver may fold away
    # like C's, flatten chains of one associative op: ((a&&b)&&c) -> (a&&b&&c)
    srcs = [
        strip_parens(ctx[v]) if v.op is x.op and x.op in (Ops.ADD, Ops.MUL, Ops.XOR, Ops.OR, Ops.AND) else ctx[v]
        for v in x.src
    ]
    sdt = x.src[0].dtype if x.src else x.dtype
    if sdt == dtypes.bool and x.op in (Ops.AND, Ops.OR, Ops.XOR, Ops.CMPLT, Ops.MAX, Ops.ADD, Ops.MUL):
        a, b = srcs
        return {
            Ops.AND: f"({a}&&{b})",
            Ops.OR: f"({a}||{b})",
            Ops.XOR: f"({a}^^{b})",
            Ops.CMPLT: f"((!{a})&&{b})",
            Ops.MAX: f"({a}||{b})",
            Ops.ADD: f"({a}||{b})",
            Ops.MUL: f"({a}&&{b})",
        }[x.op]
    if x.op is Ops.WHERE and _speculation_safe(x.src[1]) and _speculation_safe(x.src[2]):
        # glslang turns ``c ? a : b`` into a branch unless both sides are plain variables or constants; GLSL 4.50's
        # mix(b, a, bool) is an OpSelect: both sides evaluated, the unselected one ignored (NaNs do not leak)
        c, a, b = srcs
        return f"mix({b},{a},{c})"
    if x.op is Ops.CMOD and sdt in dtypes.sints:
        a, b = srcs  # glslang lowers signed % to OpSMod (sign of the divisor); C truncates toward zero
        return f"({a}-{b}*({a}/{b}))"
    if x.op is Ops.EXP2 and x.dtype == dtypes.float32 and (m := x.src[0]).op is Ops.MUL:
        # Mesa's NIR rewrites exp2(log2(a)*b) into pow(a,b), and lavapipe's pow(0, -0.7) is 0, not inf: an exact
        # (precise)
        # multiply blocks that inexact rewrite (see VK_EXP2M in render_kernel)
        return f"vk_exp2m({ctx[m.src[0]]},{ctx[m.src[1]]})"
    if x.op is Ops.RECIPROCAL:
        return f"({float_literal(1.0, x.dtype)}/{srcs[0]})"
    if x.op is Ops.NEG and sdt == dtypes.bool:
        return f"(!{srcs[0]})"
    return None


def _render_cast(ctx: "VKRenderer", x: UOp) -> str | None:
    """A conversion, with C's semantics (``glsl_types.cast``); a vector's lane by lane."""
    n, src, val = x.max_numel(), x.src[0].dtype, ctx[x.src[0]]
    if n == 1:
        return cast(x.dtype, src, val, ctx.caps.sext64)
    if x.addrspace is AddrSpace.REG:
        return None  # a register array converted whole: tinygrad's own rule
    ty = ctx.render_type(x)
    if n <= 4 and cast(x.dtype, src, "v", ctx.caps.sext64) == f"{TYPE_MAP[x.dtype]}(v)":
        return f"{ty}({val})"  # a GLSL vector's constructor converts each lane as the scalar's does
    # arrays (more than 4 lanes) have no converting constructor, and C's exceptions (bool, float to uint) are per lane
    return f"{ty}({','.join(cast(x.dtype, src, f'({val})[{i}]', ctx.caps.sext64) for i in range(n))})"


def _render_const(ctx: "VKRenderer", c: UOp, x: UOp) -> str:
    dt, val = x.dtype, c.arg
    if dt == dtypes.bool:
        return "true" if val else "false"
    if dt == dtypes.bfloat16:
        return f"uint16_t({struct.unpack('<I', struct.pack('<f', float_to_bf16(float(val))))[0] >> 16}u)"
    if dtypes.is_float(dt):
        if not math.isfinite(float(val)):
            ctx._special_widths.add(dt.itemsize * 8)
        return float_literal(float(val), dt)
    if dtypes.is_int(dt):
        lit = int_literal(int(val), dt)
        return lit if dt.itemsize >= 4 else f"{TYPE_MAP[dt]}({lit})"
    return str(val)


vk_string_rewrite = (
    PatternMatcher(
        [
            # constants (always CAST(dt, CONST) at this point)
            (UPat(Ops.CONST, name="c").cast(name="x"), _render_const),
            (UPat(Ops.CONST, name="x"), lambda ctx, x: _render_const(ctx, x, x)),
            # buffers: locals go to file scope (pulled out in render_kernel), registers stay local arrays
            (UPat(Ops.BUFFER, name="x"), lambda ctx, x: ctx.render_buffer(x)),
            # a pointer bitcast of a global argument is rendered by the LOAD/STORE through it (see _ptr_view)
            (
                UPat(Ops.BITCAST, name="x"),
                lambda ctx, x: "/* pointer bitcast */" if x.addrspace in (AddrSpace.GLOBAL, AddrSpace.LOCAL) else None,
            ),
            (UPat(Ops.BITCAST, name="x"), lambda ctx, x: bitcast(x.dtype, x.src[0].dtype, ctx[x.src[0]])),
            (UPat(Ops.CAST, name="x"), _render_cast),
            # index / load / store
            (
                UPat(Ops.INDEX, src=(UPat.var("buf"), UPat.var("idx"))),
                lambda ctx, buf, idx: render_index(ctx, buf, idx),
            ),
            (
                UPat(Ops.LOAD, src=(UPat.var("bidx"),)),
                lambda ctx, bidx: render_load(ctx, bidx),
            ),
            (
                UPat(Ops.LOAD, src=(UPat.var("bidx"), UPat.var("var"), UPat.var("gate"))),
                lambda ctx, bidx, var, gate: f"({ctx[gate]}?{render_load(ctx, bidx)}:{ctx[var]})",
            ),
            (
                UPat(Ops.STORE, src=(UPat.var("bidx"), UPat.var("var"))),
                lambda ctx, bidx, var: render_store(ctx, bidx, var),
            ),
            (UPat(Ops.WMMA, name="x"), render_wmma),
            # vectors: GLSL vectors of 2-4 lanes, else arrays (see value_type)
            (UPat(Ops.STACK, name="x"), lambda ctx, x: f"{ctx.render_type(x)}({','.join(ctx[y] for y in x.src)})"),
            # ALU ops whose GLSL spelling differs from C
            (UPat(set(CStyleLanguage.code_for_op.keys()), name="x"), _render_alu),
        ]
    )
    + base_rewrite
)


class VKRenderer(CStyleLanguage):
    """GLSL 450 compute for Vulkan; device limits come from ``target.arch`` (see :func:`make_arch`)."""

    device = "VK"
    suffix = "GLSL"
    has_local = True
    has_shared = True
    supports_float4 = True  # vector loads/stores of 2 and 4 lanes (see "vector accesses" above)
    barrier = "barrier();"
    infinity = "uintBitsToFloat(0x7f800000u)"
    nan = "uintBitsToFloat(0x7fc00000u)"
    code_for_workitem = {
        "g": lambda x: f"int(gl_WorkGroupID.{'xyz'[int(x)]})",
        "l": lambda x: f"int(gl_LocalInvocationID.{'xyz'[int(x)]})",
        "i": lambda x: f"int(gl_GlobalInvocationID.{'xyz'[int(x)]})",
    }
    type_map = TYPE_MAP
    code_for_op = {**CStyleLanguage.code_for_op}
    string_rewrite = vk_string_rewrite
    extra_matcher = vk_extra_matcher

    def __init__(self, target: Target):
        super().__init__(target)
        self.caps = parse_arch(target.arch)
        self.global_max = (GRID_X, *self.caps.global_max[1:])  # x past the device's limit: fold_groups
        self.local_max = tuple(min(m, self.caps.local_threads) for m in self.caps.local_max)
        self.shared_max = self.caps.shared_max
        self.tensor_cores = tensor_cores(self.caps)
        self.compiler = VKCompiler()
        # the kernel being rendered: how it reaches memory, and the float widths whose infinities and NaNs it relies on
        # (its constants, its x != x tests); both made anew by render()
        self.memory = KernelMemory()
        self._special_widths: set[int] = set()

    def supported_dtypes(self) -> set[DType]:
        c = self.caps
        ret = {dtypes.float32, dtypes.int32, dtypes.uint32}
        if c.i8:
            ret |= {dtypes.bool, dtypes.int8, dtypes.uint8}
        if c.i16:
            ret |= {dtypes.int16, dtypes.uint16, dtypes.bfloat16}
        if c.f16:
            ret.add(dtypes.float16)
        if c.i64:
            ret |= {dtypes.int64, dtypes.uint64}
        if c.f64 and c.i64:
            ret.add(dtypes.float64)  # the software exp2/log2/sin for double need 64-bit integers
        return ret

    # ----- pieces used by the string rewrites -----------------------------------------------------------------------
    def _render_dtype(
        self, dtype: DType, sz: int = 1, addrspace=AddrSpace.ALU, mutable=True, override_ptr=False, shape=None
    ) -> str:
        base = TYPE_MAP.get(dtype, dtype.name)
        return f"{base}[{sz}]" if sz > 1 else base

    def render_type(self, u: UOp) -> str:
        n = u.max_numel()
        if n > 1 and u.addrspace is AddrSpace.REG:
            return self._render_dtype(u.dtype, n)  # register arrays
        return value_type(u.dtype, n)  # scalars, GLSL vectors of 2-4 lanes, arrays of more

    def render_cast(self, u: UOp, val: str) -> str:
        return f"{TYPE_MAP[u.dtype]}({val})"

    def render_buffer(self, x: UOp) -> str:
        ty = TYPE_MAP[x.dtype]
        if x.addrspace is AddrSpace.LOCAL:
            dw = self.memory.declared.get(x, 1)  # shared memory accessed only n lanes at a time is an array of vectors
            return f"shared {value_type(x.dtype, dw)} {self[x]}[{x.max_numel() // dw}];"
        return f"{ty} {self[x]}[{x.max_numel()}];"

    # ----- the kernel ---------------------------------------------------------------------------------------------
    def render(self, uops: list[UOp]) -> str:
        if not getenv("DMC"):  # bfloat16, 8- and 16-bit accesses in vectors, unless tinygrad's coalescing is off too
            uops = group_narrow_accesses(uops)
        tile_loop, tile = None, 1
        # loads whose lanes walk runs of their own, through shared memory (None: left as they are)
        if self.caps.stage_lanes and (plan := plan_staging(uops, self.caps.stage_lanes, self.shared_max)) is not None:
            if (staged := stage_streams(uops, plan)) is not None:
                (uops, tile_loop), tile = staged, plan.tile
        # how each global argument is reached, by name; filled before _render so INDEX can use it
        arguments: dict[str, GlobalArg] = {}
        for u in uops:
            if u.op is Ops.PARAM and u.addrspace is AddrSpace.GLOBAL:
                name = f"data{u.arg.slot}_" + "_".join(str(x) for x in u.shape)
                size = storage_dtype(u.dtype).itemsize
                numel = math.prod(u.shape)
                # Past the storage range a buffer cannot be bound, and past 2**31 elements no 32-bit index reaches it.
                # Reached by address, an array index is 32-bit and so is the offset a driver may compute from it
                # (NVIDIA's wraps: the H200 read and wrote the wrong words past 4 GiB), so a buffer of 2 GiB or more
                # is reached by 64-bit address arithmetic instead (wide; from caps.wide_bytes, which tests lower).
                by_address = self.caps.addresses and (numel * size > self.caps.storage_range or numel >= 2**31)
                wide = by_address and numel * size >= self.caps.wide_bytes
                arguments[name] = GlobalArg(name, u.arg.slot, f"{u.arg.slot}_{size}", by_address, wide=wide)
        self.memory = KernelMemory(arguments, plan_vector_widths(uops))
        self._special_widths = set()
        name, kernel, bufs = self._render(uops)
        if self.caps.unroll_lanes or self.caps.loop_limit or tile_loop:
            tree = parse(kernel, uops)
            if self.caps.unroll_lanes:  # all but CPU devices, by default: more loads in flight
                unroll_for_loads(tree, uops, self.caps.unroll_lanes)
            for loop, _ in loops(tree):
                if loop.name == tile_loop:  # a staged tile's iterations, each reading its own row: unrolled whole
                    loop.u = tile
            if self.caps.loop_limit:  # lavapipe: unrolled until its loop-iteration limit holds, or refused
                bound_loops(name, tree, self.caps.loop_limit)
            kernel = emit(tree)
        return self.render_kernel(name, kernel, bufs, uops)

    @staticmethod
    def _declare_global(binding: int, name: str, dt: DType, qual: str, dw: int) -> list[str]:
        """The storage-buffer declaration of one argument: elements of ``dw`` lanes, scalar in the VK_VIEWS variant."""

        def decl(ty: str) -> str:
            return f"layout(set=0, binding={binding}, std430) {qual}buffer VKB{binding} {{ {ty} {name}[]; }};"

        if dw == 1:
            return [decl(TYPE_MAP[dt])]
        return ["#if VK_VIEWS", decl(TYPE_MAP[dt]), "#else", decl(value_type(dt, dw)), "#endif"]

    @staticmethod
    def _declare_by_address(arg: GlobalArg, dt: DType, qual: str, dw: int) -> list[str]:
        """The buffer-reference type of an argument reached by device address (the push constants hold the address,
        ``vk_ref<slot>``): its elements as an array, and for a wide one the element alone, for 64-bit address
        arithmetic (``VK_E<slot>(i)``); elements of ``dw`` lanes, scalar in the VK_VIEWS variant."""

        def decl(ty: str, stride: int) -> list[str]:
            # Aligned to the scalar element only: a view's address is only as aligned as
            # minStorageBufferOffsetAlignment. Element i of a wide argument starts i strides in (std430: a vec3 is
            # as long as a vec4).
            align = dt.itemsize
            lines = [
                f"layout(buffer_reference, std430, buffer_reference_align={align}) {qual}buffer VKR{arg.slot} "
                f"{{ {ty} v[]; }};"
            ]
            if arg.wide:
                lines += [
                    f"layout(buffer_reference, std430, buffer_reference_align={align}) {qual}buffer VKE{arg.slot} "
                    f"{{ {ty} v; }};",
                    f"#define VK_E{arg.slot}(i) "
                    f"(VKE{arg.slot}(uint64_t(vk_ref{arg.slot}) + uint64_t(i) * {stride}ul).v)",
                ]
            return lines

        scalar = decl(TYPE_MAP[dt], dt.itemsize)
        body = (
            scalar
            if dw == 1
            else [
                "#if VK_VIEWS",
                *scalar,
                "#else",
                *decl(value_type(dt, dw), dt.itemsize * (4 if dw == 3 else dw)),
                "#endif",
            ]
        )
        return [*body, f"#define {arg.name} (vk_ref{arg.slot}.v)"]

    def render_kernel(
        self,
        function_name: str,
        kernel: list[str],
        bufs: list[tuple[str, tuple[UOp, bool]]],
        uops: list[UOp],
        prefix=None,
    ) -> str:
        specials = {u.arg: u for u in uops if u.op is Ops.SPECIAL}
        uses_gid = any(a[0] == "i" for a in specials)
        local = [1, 1, 1]
        for a, u in specials.items():
            if a[0] == "l":
                local[int(a[-1])] = int(u.src[0].ssimplify())
        widen = 1
        if not uses_gid and not any(u.op is Ops.WMMA for u in uops):  # tensor cores: whole subgroups (widen_groups)
            if self.caps.warp_lanes:
                laid = apply_axes(kernel, local, choose_axes(uops, local, self.caps.warp_lanes, self.local_max))
                if laid is not None:
                    kernel, local = laid
            sizes = [u.src[0].ssimplify() for a, u in specials.items() if a[0] == "g"]
            groups = math.prod(sizes) if all(isinstance(n, int) for n in sizes) else None
            kernel, widen, axis = widen_groups(kernel, specials.get("gidx0"), local, self.local_max, groups)
            local[axis] *= widen
        kernel, fold = fold_groups(kernel, specials, widen, self.caps.global_max)
        globals_ = sorted(
            [(u.arg.slot, name, u, mut) for name, (u, mut) in bufs if u.addrspace is AddrSpace.GLOBAL],
            key=lambda t: t[0],
        )
        vars_ = sorted(
            [(u.arg.slot, name, u) for name, (u, _) in bufs if u.addrspace is not AddrSpace.GLOBAL], key=lambda t: t[0]
        )

        # shared memory must be at file scope
        shared = list(dict.fromkeys(ln.strip() for ln in kernel if ln.lstrip().startswith("shared ")))  # once, unrolled
        body = [ln for ln in kernel if not ln.lstrip().startswith("shared ")]

        used = {u.dtype for u in uops} | {u.dtype for _, _, u, _ in globals_}

        lines = ["#version 450"]
        if used & {
            dtypes.int8,
            dtypes.uint8,
            dtypes.int16,
            dtypes.uint16,
            dtypes.int64,
            dtypes.uint64,
            dtypes.float16,
            dtypes.bfloat16,
            dtypes.bool,
        }:
            lines += ["#extension GL_EXT_shader_explicit_arithmetic_types : require"]
        if used & {dtypes.int8, dtypes.uint8, dtypes.bool}:
            lines += ["#extension GL_EXT_shader_8bit_storage : require"]
        if used & {dtypes.int16, dtypes.uint16, dtypes.float16, dtypes.bfloat16}:
            lines += ["#extension GL_EXT_shader_16bit_storage : require"]
        # Drivers may optimise as if no value were infinite or NaN (NVIDIA's folded sin(inf) to a number) unless the
        # kernel asks them to keep IEEE semantics; only kernels that rely on special values ask.
        preserve = sorted(self._special_widths & set(self.caps.preserve_widths))
        if preserve:
            lines += ["#extension GL_EXT_spirv_intrinsics : require"]
        addressed = [g for g in self.memory.globals.values() if g.by_address]
        if addressed:
            lines += ["#extension GL_EXT_buffer_reference : require"]
        if any(g.wide for g in addressed):
            lines += [
                "#extension GL_EXT_buffer_reference2 : require",
                "#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require",
            ]
        local_bytes = sum(
            u.max_numel() * u.dtype.itemsize for u in uops if u.op is Ops.BUFFER and u.addrspace is AddrSpace.LOCAL
        )
        wmma_extensions, wmma_definitions = wmma_prelude(
            uops, local, self.caps.tc_emulate, local_bytes, self.shared_max, self.caps.tc_layout
        )
        lines += wmma_extensions
        # SignedZeroInfNanPreserve (capability 4466, execution mode 4461), after every #extension
        lines += [
            f'spirv_execution_mode(extensions = ["SPV_KHR_float_controls"], capabilities = [4466], 4461, {w});'
            for w in preserve
        ]
        lines += [
            "#ifndef VK_VIEWS",
            "#define VK_VIEWS 0",
            "#endif",
            # kernels on global ids get their size at launch (tinygrad times candidates): specialization constants 0-2,
            # whose defaults VKProgram rewrites per size (compiler.with_local_size)
            "layout(local_size_x_id=0, local_size_y_id=1, local_size_z_id=2) in;"
            if uses_gid
            else f"layout(local_size_x={local[0]}, local_size_y={local[1]}, local_size_z={local[2]}) in;",
        ]

        # Bound arguments take bindings 0..n-1 in slot order; the others are reached by the device address at the
        # start of the push constants (8-byte aligned there), and the program passes their buffers after the bound
        # ones, in slot order (meta "address").
        bindings, binding = [], 0
        for slot, name, u, mut in globals_:
            dt, arg, qual = storage_dtype(u.dtype), self.memory.globals[name], "" if mut else "readonly "
            if arg.by_address:
                lines += self._declare_by_address(arg, dt, qual, self.memory.declared.get(u, 1))
            else:
                lines += self._declare_global(binding, name, dt, qual, self.memory.declared.get(u, 1))
                binding += 1
            bindings.append({"slot": slot, "sizes": [dt.itemsize], "address": arg.by_address})

        pc_refs = [f"VKR{g.slot} vk_ref{g.slot};" for g in sorted(addressed, key=lambda g: g.slot)]
        pc_vars = pc_refs + [f"{TYPE_MAP[u.dtype]} {name};" for _, name, u in vars_]
        pc_offs = [f"uint vk_off{b};" for b in range(len(globals_))]
        lines.append("#if VK_VIEWS")
        if pc_vars or pc_offs:
            lines.append(f"layout(push_constant) uniform VKPC {{ {' '.join(pc_vars + pc_offs)} }};")
        for b, (slot, _, _, _) in enumerate(globals_):
            for sz in bindings[b]["sizes"]:
                lines.append(f"#define VK_I{slot}_{sz}(i) ((i)+int(vk_off{b}>>{int(math.log2(sz))}u))")
        lines.append("#else")
        if pc_vars:
            lines.append(f"layout(push_constant) uniform VKPC {{ {' '.join(pc_vars)} }};")
        for b, (slot, _, _, _) in enumerate(globals_):
            for sz in bindings[b]["sizes"]:
                lines.append(f"#define VK_I{slot}_{sz}(i) (i)")
        lines.append("#endif")
        names = {u: name for _, name, u, _ in globals_}
        for buf, w, store in sorted(self.memory.vector_macros, key=lambda m: (m[0].arg.slot, m[1], m[2])):
            dt = storage_dtype(buf.dtype)
            declared = self.memory.declared.get(buf, 1)
            lines += global_vector_macros(self.memory.globals[names[buf]], dt, declared, w, store)
        lines += shared
        lines += wmma_definitions
        if any("vk_exp2m(" in ln for ln in body):
            lines.append("float vk_exp2m(float a, float b) { precise float t = a*b; return exp2(t); }")
        if any(f"{F2BF}(" in ln for ln in body):
            lines.append(F2BF_DEFINITION)

        meta = {
            "name": function_name,
            "local": local,
            "gid": uses_gid,
            "widen": widen,
            "fold": fold,
            "bindings": bindings,
            "nvars": len(vars_),
            **wmma_target(uops, self.caps.tc_emulate),
        }
        src = "\n".join(lines) + "\nvoid main() {\n" + "\n".join(body) + "\n}\n"
        return with_meta(meta, src)
