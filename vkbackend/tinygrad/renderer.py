"""GLSL 450 compute renderer for tinygrad 0.14.0.

tinygrad lowers every kernel to a linear list of UOps and hands it to a ``CStyleLanguage`` subclass; this one writes
GLSL 450 for Vulkan (compiled to SPIR-V by :mod:`vkbackend.tinygrad.compiler`).  The shape of a rendered kernel:

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
* bool buffers are stored as ``uint8_t`` (tinygrad's bool is one byte), 8/16/64-bit types come from the
  ``GL_EXT_shader_explicit_arithmetic_types`` / ``8bit_storage`` / ``16bit_storage`` extensions.

The renderer is pickled by tinygrad (``Renderer.__reduce__`` keeps only the ``Target``) and rebuilt in its compile
workers, so everything it knows about the device travels in ``target.arch``: see :func:`make_arch` / :func:`parse_arch`.
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass

from tinygrad.codegen.decomp.transcendental import xexp2, xlog2, xsin
from tinygrad.dtype import AddrSpace, DType, dtypes, float_to_bf16
from tinygrad.helpers import Target, strip_parens
from tinygrad.renderer.cstyle import CStyleLanguage, base_rewrite, create_non_native_float_pats, pm_manual_bf16_cast
from tinygrad.uop.ops import GroupOp, Ops, PatternMatcher, UOp, UPat

__all__ = ["VKRenderer", "DeviceCaps", "make_arch", "parse_arch", "META_PREFIX"]

# first line of every rendered kernel: a JSON header the compiler and the program read (local size, bindings...)
META_PREFIX = "// vkbackend-tinygrad "


# ---------------------------------------------------------------------------------------------------------------------
# device capabilities carried in Target.arch
# ---------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DeviceCaps:
    """What the renderer needs to know about a device.  Serialised into ``Target.arch`` (see :func:`make_arch`)."""

    f16: bool = False
    f64: bool = False
    i8: bool = False
    i16: bool = False
    i64: bool = False
    global_max: tuple[int, int, int] = (65535, 65535, 65535)
    local_max: tuple[int, int, int] = (1024, 1024, 64)
    local_threads: int = 128
    shared_max: int = 16384


_FLAGS = ("f16", "f64", "i8", "i16", "i64")


def make_arch(caps: DeviceCaps) -> str:
    """``DeviceCaps`` -> a compact arch string such as ``f16,i8,i16,i64,f64,g65535/65535/65535,l1024/1024/64,t1024,s32768``.

    It contains no ``:`` or ``+`` (tinygrad's target separators), so ``DEV=VK::<arch>`` can also override it."""
    toks = [f for f in _FLAGS if getattr(caps, f)]
    toks += [
        "g" + "/".join(map(str, caps.global_max)),
        "l" + "/".join(map(str, caps.local_max)),
        f"t{caps.local_threads}",
        f"s{caps.shared_max}",
    ]
    return ",".join(toks)


def parse_arch(arch: str) -> DeviceCaps:
    """Inverse of :func:`make_arch`; unknown tokens are ignored, missing ones keep the Vulkan-minimum defaults."""
    kw: dict = {}
    for tok in (t.strip() for t in (arch or "").split(",")):
        if not tok:
            continue
        if tok in _FLAGS:
            kw[tok] = True
        elif tok[0] in "gl" and "/" in tok:
            vals = tuple(int(x) for x in tok[1:].split("/"))
            if len(vals) == 3:
                kw["global_max" if tok[0] == "g" else "local_max"] = vals
        elif tok[0] in "ts" and tok[1:].isdigit():
            kw["local_threads" if tok[0] == "t" else "shared_max"] = int(tok[1:])
    return DeviceCaps(**kw)


# ---------------------------------------------------------------------------------------------------------------------
# GLSL spelling helpers
# ---------------------------------------------------------------------------------------------------------------------

TYPE_MAP: dict[DType, str] = {
    dtypes.bool: "bool",
    dtypes.int8: "int8_t",
    dtypes.uint8: "uint8_t",
    dtypes.int16: "int16_t",
    dtypes.uint16: "uint16_t",
    dtypes.int32: "int",
    dtypes.uint32: "uint",
    dtypes.int64: "int64_t",
    dtypes.uint64: "uint64_t",
    dtypes.float16: "float16_t",
    dtypes.float32: "float",
    dtypes.float64: "double",
    dtypes.bfloat16: "uint16_t",  # bfloat16 lives as its bits; tinygrad's manual bf16 casts and float ALU do the rest
}

# how a value of each float type is reinterpreted as / built from an integer of the same width
_F2I = {
    dtypes.float16: ("float16BitsToInt16", "float16BitsToUint16"),
    dtypes.float32: ("floatBitsToInt", "floatBitsToUint"),
    dtypes.float64: ("doubleBitsToInt64", "doubleBitsToUint64"),
}
_I2F = {
    dtypes.float16: ("int16BitsToFloat16", dtypes.int16),
    dtypes.float32: ("intBitsToFloat", dtypes.int32),
    dtypes.float64: ("int64BitsToDouble", dtypes.int64),
}
_U2F = {
    dtypes.float16: ("uint16BitsToFloat16", dtypes.uint16),
    dtypes.float32: ("uintBitsToFloat", dtypes.uint32),
    dtypes.float64: ("uint64BitsToDouble", dtypes.uint64),
}
_UINT = {1: dtypes.uint8, 2: dtypes.uint16, 4: dtypes.uint32, 8: dtypes.uint64}

# GLSL's vector type prefix per scalar type (``vec4``, ``f16vec4``, ``ivec2``...): 2-4 lanes; wider values are arrays
_VEC_PREFIX: dict[DType, str] = {
    dtypes.bool: "b",
    dtypes.int8: "i8",
    dtypes.uint8: "u8",
    dtypes.int16: "i16",
    dtypes.uint16: "u16",
    dtypes.int32: "i",
    dtypes.uint32: "u",
    dtypes.int64: "i64",
    dtypes.uint64: "u64",
    dtypes.float16: "f16",
    dtypes.float32: "",
    dtypes.float64: "d",
    dtypes.bfloat16: "u16",
}


def _vec_type(dt: DType, n: int) -> str | None:
    """GLSL's ``n``-lane vector type of ``dt`` (``vec4``, ``f16vec2``...), or None where GLSL has none."""
    return f"{_VEC_PREFIX[dt]}vec{n}" if 2 <= n <= 4 and dt in _VEC_PREFIX else None


def _value_type(dt: DType, n: int) -> str:
    """The GLSL type of an ``n``-lane value: the scalar, a vector of 2-4 lanes, else an array (e.g. 8 halves)."""
    if n == 1:
        return TYPE_MAP[dt]
    return _vec_type(dt, n) or f"{TYPE_MAP[dt]}[{n}]"


def _storage_dtype(dt: DType) -> DType:
    """The element type a global buffer of ``dt`` is declared with (GLSL has no 1-byte bool in buffers)."""
    return dtypes.uint8 if dt == dtypes.bool else dt


def _int_literal(val: int, dt: DType) -> str:
    bits = dt.itemsize * 8
    if dt in dtypes.uints:
        val &= (1 << bits) - 1
        return f"{val}u" if bits <= 32 else f"{val}ul"
    val = ((val + (1 << (bits - 1))) % (1 << bits)) - (1 << (bits - 1))  # wrap to the signed range
    if bits <= 32:
        return f"({val + 1}-1)" if val == -(1 << 31) else (f"({val})" if val < 0 else str(val))
    return f"({val + 1}l-1l)" if val == -(1 << 63) else (f"({val}l)" if val < 0 else f"{val}l")


def _float_literal(val: float, dt: DType) -> str:
    if math.isnan(val) or math.isinf(val):
        bits = {dtypes.float16: 16, dtypes.float32: 32, dtypes.float64: 64}[dt]
        if math.isnan(val):
            pat = {16: 0x7E00, 32: 0x7FC00000, 64: 0x7FF8000000000000}[bits]
        else:
            pat = {16: 0x7C00, 32: 0x7F800000, 64: 0x7FF0000000000000}[bits] | ((1 << (bits - 1)) if val < 0 else 0)
        if bits == 32:
            return f"uintBitsToFloat({pat}u)"
        if bits == 64:
            return f"uint64BitsToDouble({pat}ul)"
        return f"uint16BitsToFloat16(uint16_t({pat}u))"
    if dt == dtypes.float64:
        return f"{float(val)!r}lf"
    # float and half: render the float32 value exactly (repr of the rounded value round-trips)
    v32 = struct.unpack("<f", struct.pack("<f", float(val)))[0] if abs(val) < 3.4028235e38 else float(val)
    s = f"{v32!r}f"
    return s if dt == dtypes.float32 else f"float16_t({s})"


def _cast(dst: DType, src: DType, val: str) -> str:
    """A value conversion ``(dst)val`` with C semantics where GLSL's differs."""
    if dst == src:
        return val
    if dst == dtypes.bool:
        return f"({val}!={_zero(src)})" if src != dtypes.bool else val
    if src == dtypes.bool:
        return (
            f"{TYPE_MAP[dst]}({val})"
            if dst in (dtypes.float32, dtypes.float64, dtypes.int32, dtypes.uint32)
            else f"{TYPE_MAP[dst]}({val}?1:0)"
        )
    if dtypes.is_float(src) and dtypes.is_int(dst) and dst.itemsize < 4:
        # float -> 8/16-bit integers must go through int32 (direct conversion is broken on some drivers, and C truncates)
        return f"{TYPE_MAP[dst]}(int({val}))"
    if dtypes.is_float(src) and dst == dtypes.uint32:
        # C on x86 (and numpy) convert through a 64-bit signed integer: negative floats wrap instead of being undefined
        return f"({val}<{_zero(src)}?uint(int({val})):uint({val}))"
    return f"{TYPE_MAP[dst]}({val})"


def _zero(dt: DType) -> str:
    if dt == dtypes.bool:
        return "false"
    if dtypes.is_float(dt):
        return _float_literal(0.0, dt)
    return f"{TYPE_MAP[dt]}(0)"


def _bitcast(dst: DType, src: DType, val: str) -> str:
    if dst == src:
        return val
    # bfloat16 values are uint16_t bits
    if src == dtypes.bfloat16:
        return _bitcast(dst, dtypes.uint16, val)
    if dst == dtypes.bfloat16:
        return _bitcast(dtypes.uint16, src, val)
    assert dst.itemsize == src.itemsize, f"bitcast {src} -> {dst} changes the size"
    if dtypes.is_float(src):
        fn_i, fn_u = _F2I[src]
        if dtypes.is_float(dst):
            return f"{_I2F[dst][0]}({fn_i}({val}))"
        return f"{fn_u if dst in dtypes.uints else fn_i}({val})"
    if dtypes.is_float(dst):
        fn, idt = (_U2F if src in dtypes.uints else _I2F)[dst]
        return f"{fn}({_cast(idt, src, val) if src != idt else val})"
    # integer <-> integer of the same width: GLSL's conversion constructors keep the bits
    return f"{TYPE_MAP[dst]}({val})"


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
            # GLSL's sin is an approximation (lavapipe's and NVIDIA's lose all precision for large arguments): software sin
            (UPat(Ops.SIN, (dtypes.float32, dtypes.float64), src=(UPat.var("d"),)), _xsin_nan_on_bits),
            # half transcendentals are computed in float32 (the float16 builtins are too imprecise on several drivers)
            (UPat((Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT), dtypes.float16, name="x"), _float_via_f32),
        ]
    )
    + create_non_native_float_pats((dtypes.bfloat16,))
    + pm_manual_bf16_cast
)


def _is_bool(u: UOp) -> bool:
    return u.dtype == dtypes.bool


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
        # Mesa's NIR rewrites exp2(log2(a)*b) into pow(a,b), and lavapipe's pow(0, -0.7) is 0, not inf: an exact (precise)
        # multiply blocks that inexact rewrite (see VK_EXP2M in render_kernel)
        return f"vk_exp2m({ctx[m.src[0]]},{ctx[m.src[1]]})"
    if x.op is Ops.RECIPROCAL:
        return f"({_float_literal(1.0, x.dtype)}/{srcs[0]})"
    if x.op is Ops.NEG and sdt == dtypes.bool:
        return f"(!{srcs[0]})"
    return None


def _bitcast_param(bc: UOp) -> tuple[UOp, UOp | None]:
    """``BITCAST(PARAM | SHRINK(PARAM, start, n))`` (through AFTERs) -> (param, start or None)."""
    src, start = _base_buffer(bc.src[0]), None
    if src.op is Ops.SHRINK:
        src, start = _base_buffer(src.src[0]), src.src[1]
    if src.op is not Ops.PARAM:
        raise RuntimeError(f"VK renderer: pointer bitcast of {src.op} is not supported")
    return src, start


def _is_ptr_view(buf: UOp) -> bool:
    """A pointer bitcast of a global argument (a view of it as another element type)."""
    return buf.op is Ops.BITCAST and buf.addrspace is AddrSpace.GLOBAL


def _ptr_view(bidx: UOp):
    """``INDEX(BITCAST(PARAM | SHRINK(PARAM, start, n)), idx)`` -> (param, start, idx, view dtype); else None.

    GLSL has no pointer casts, and an aliased declaration of the binding cannot express a view whose start is not a
    multiple of the new element size, so such accesses are composed from (or split into) the buffer's own elements."""
    if bidx.op is not Ops.INDEX or not _is_ptr_view(bc := bidx.src[0]):
        return None
    param, start = _bitcast_param(bc)
    return param, start, bidx.src[1], bc.dtype


def _as_uint(dt: DType, val: str) -> str:
    """The bits of a value of ``dt`` as the unsigned integer of the same size."""
    return _bitcast(_UINT[dt.itemsize], dt, val) if dt != dtypes.bool else f"uint8_t({val}?1u:0u)"


def _view_access(ctx: "VKRenderer", param: UOp, start: UOp | None, idx: UOp):
    """(element expression for the buffer's element index ``e``, S, start string, idx string)."""
    sdt = _storage_dtype(param.dtype)
    key = ctx._global_keys[ctx[param]]
    return (lambda e: f"{ctx[param]}[VK_I{key}(int({e}))]"), sdt, ("0" if start is None else ctx[start]), ctx[idx]


def _render_view_load(ctx: "VKRenderer", bidx: UOp) -> str | None:
    if (pv := _ptr_view(bidx)) is None:
        return None
    param, start, idx, tdt = pv
    elem, sdt, st, i = _view_access(ctx, param, start, idx)
    ut = _UINT[tdt.itemsize]
    if tdt.itemsize >= sdt.itemsize:
        k = tdt.itemsize // sdt.itemsize
        parts = [
            f"({TYPE_MAP[ut]}({_as_uint(sdt, elem(f'{st}+({i})*{k}+{j}'))})<<{j * sdt.itemsize * 8})" for j in range(k)
        ]
        return _bitcast(tdt, ut, "(" + "|".join(parts) + ")")
    k = sdt.itemsize // tdt.itemsize
    word = _as_uint(sdt, elem(f"{st}+({i})/{k}"))
    return _bitcast(tdt, ut, f"{TYPE_MAP[ut]}({word}>>((({i})%{k})*{tdt.itemsize * 8}))")


def _render_view_store(ctx: "VKRenderer", bidx: UOp, var: UOp) -> str | None:
    if (pv := _ptr_view(bidx)) is None:
        return None
    param, start, idx, tdt = pv
    elem, sdt, st, i = _view_access(ctx, param, start, idx)
    if tdt.itemsize < sdt.itemsize:
        raise RuntimeError(
            f"VK renderer: a store through a {tdt} view of a {sdt} buffer would race with its neighbours"
        )
    k, ut, us = tdt.itemsize // sdt.itemsize, _UINT[tdt.itemsize], _UINT[sdt.itemsize]
    lines = [f"{{ {TYPE_MAP[ut]} vk_bits = {_as_uint(tdt, ctx[var])};"]
    for j in range(k):
        lines.append(
            f"  {elem(f'{st}+({i})*{k}+{j}')} = {_bitcast(sdt, us, f'{TYPE_MAP[us]}(vk_bits>>{j * sdt.itemsize * 8})')}; "
        )
    return "\n".join(lines) + "}"


# ---------------------------------------------------------------------------------------------------------------------
# vector accesses
# ---------------------------------------------------------------------------------------------------------------------
# With ``supports_float4`` tinygrad's memory coalescing (codegen/late/coalesce.py) turns runs of 2 or 4 consecutive
# float/half/int/uint accesses (8 halves with ALLOW_HALF8) into LOAD/STORE of SHRINK(buffer, idx, n), with idx a
# multiple of n counted from the start of the buffer, and reads lanes back with INDEX(vector, lane).  GLSL has no
# pointer casts, and vkbackend refuses two declarations of one binding, so every buffer is declared once, with the
# widest element every access to it in the kernel can use (its *declared width*): a buffer only ever accessed 4 at a
# time is a ``vec4`` array; one also accessed 2 at a time a ``vec2`` array (a 4-wide access is then two ``vec2``); one
# also accessed element-wise stays scalar, and its vector accesses are composed lane by lane.  A kernel's VK_VIEWS=1
# variant (a view at an unaligned byte offset, where idx + offset is no longer a multiple of n) declares every global
# buffer scalar.  Global vector accesses go through macros (``VK_V<slot>_<n>`` loads, ``VK_S<slot>_<n>`` stores)
# that differ between the two variants.


def _base_buffer(u: UOp) -> UOp:
    while u.op is Ops.AFTER:
        u = u.src[0]
    return u


def _is_global_param(buf: UOp) -> bool:
    return buf.op is Ops.PARAM and buf.addrspace is AddrSpace.GLOBAL


def _is_local_buffer(buf: UOp) -> bool:
    return buf.op is Ops.BUFFER and buf.addrspace is AddrSpace.LOCAL


def _declared_width(buf: UOp, widths: set[int]) -> int:
    """The element width (in lanes) ``buf`` is declared with, given the widths of all its accesses (see above)."""
    dw = min(widths)
    if dw == 1 or any(w % dw for w in widths):
        return 1
    dw = min(dw, 4)  # GLSL vectors have 2-4 lanes: 8 halves are two f16vec4
    dt = _storage_dtype(buf.dtype)
    if dt == dtypes.bool or _vec_type(dt, dw) is None or (_is_local_buffer(buf) and buf.max_numel() % dw):
        return 1
    return dw


def plan_vector_widths(uops: list[UOp]) -> dict[UOp, int]:
    """Declared width of every global argument and local buffer that a LOAD or STORE reads or writes (1: scalar)."""
    widths: dict[UOp, set[int]] = {}
    for u in uops:
        if u.op not in (Ops.LOAD, Ops.STORE) or u.src[0].op not in (Ops.INDEX, Ops.SHRINK):
            continue
        mop = u.src[0]
        buf = _base_buffer(mop.src[0])
        if _is_ptr_view(buf):
            widths.setdefault(_bitcast_param(buf)[0], set()).add(1)  # composed from the buffer's own elements
        elif _is_global_param(buf) or _is_local_buffer(buf):
            widths.setdefault(buf, set()).add(mop.max_numel() if mop.op is Ops.SHRINK else 1)
    return {buf: _declared_width(buf, ws) for buf, ws in widths.items()}


def _piece_index(i: str, dw: int, p: int) -> str:
    """Index of the ``p``-th ``dw``-lane element of an access starting at lane index ``i`` (a multiple of ``dw``)."""
    if dw == 1:
        return f"({i})+{p}" if p else i
    base = f"({i})>>{int(math.log2(dw))}"
    return f"({base})+{p}" if p else base


def compose_load(dt: DType, w: int, dw: int, piece) -> str:
    """A ``w``-lane value read as ``w/dw`` pieces of ``dw`` lanes; ``piece(p)`` is the expression of the p-th."""
    if w == dw:
        return piece(0)
    if _vec_type(dt, w) is not None:  # vector constructors take vectors and scalars alike: vec4(vec2, vec2)
        return f"{_value_type(dt, w)}({', '.join(piece(p) for p in range(w // dw))})"
    lanes = [piece(e) if dw == 1 else f"{piece(e // dw)}[{e % dw}]" for e in range(w)]
    return f"{_value_type(dt, w)}({', '.join(lanes)})"


def compose_store(dt: DType, w: int, dw: int, piece, val: str) -> str:
    """A store of the ``w``-lane value ``val`` as ``w/dw`` pieces of ``dw`` lanes; ``piece(p)`` is the p-th lvalue."""
    if w == dw:
        return f"{piece(0)} = {val};"
    out = [f"{{ {_value_type(dt, w)} vk_t = {val};"]
    for p in range(w // dw):
        lanes = [f"vk_t[{p * dw + j}]" for j in range(dw)]
        out.append(f" {piece(p)} = {lanes[0] if dw == 1 else _value_type(dt, dw) + '(' + ', '.join(lanes) + ')'};")
    return "".join(out) + " }"


def _global_vector_macros(name: str, key: str, slot: int, dt: DType, dw: int, w: int, store: bool) -> list[str]:
    """``#define`` lines of the load (or store) macro of ``w`` lanes of one global argument, for both variants."""

    def define(dwv: int) -> str:
        if dwv == 1:  # scalar declaration: the index macro adds the view offset in the VK_VIEWS=1 variant
            piece = lambda p: f"{name}[VK_I{key}({_piece_index('i', 1, p)})]"  # noqa: E731
        else:
            piece = lambda p: f"{name}[{_piece_index('i', dwv, p)}]"  # noqa: E731
        if store:
            return f"#define VK_S{slot}_{w}(i, v) {compose_store(dt, w, dwv, piece, '(v)')}"
        return f"#define VK_V{slot}_{w}(i) ({compose_load(dt, w, dwv, piece)})"

    if dw == 1:
        return [define(1)]
    return ["#if VK_VIEWS", define(1), "#else", define(dw), "#endif"]


def _render_vector_load(ctx: "VKRenderer", mop: UOp) -> str:
    """LOAD(SHRINK(buffer, idx, n)): ``n`` lanes from element ``idx`` on."""
    buf, w, i = _base_buffer(mop.src[0]), mop.max_numel(), _index_str(ctx, mop.src[1])
    if _is_global_param(buf):
        ctx._vector_macros.add((buf, w, False))
        return f"VK_V{buf.arg.slot}_{w}({i})"
    if _is_local_buffer(buf):
        dw = ctx._declared.get(buf, 1)
        return compose_load(buf.dtype, w, dw, lambda p: f"{ctx[buf]}[{_piece_index(i, dw, p)}]")
    # (tinygrad's UOp spec has no SHRINK of a pointer bitcast: views are read element by element)
    raise RuntimeError(f"VK renderer: vector load from {buf.op} {buf.addrspace}")


def _render_vector_store(ctx: "VKRenderer", mop: UOp, var: UOp) -> str:
    """STORE(SHRINK(buffer, idx, n), value): ``n`` lanes from element ``idx`` on."""
    buf, w, i = _base_buffer(mop.src[0]), mop.max_numel(), _index_str(ctx, mop.src[1])
    if _is_global_param(buf):
        ctx._vector_macros.add((buf, w, True))
        return f"VK_S{buf.arg.slot}_{w}({i}, {ctx[var]});"
    if _is_local_buffer(buf):
        dw = ctx._declared.get(buf, 1)
        return compose_store(buf.dtype, w, dw, lambda p: f"{ctx[buf]}[{_piece_index(i, dw, p)}]", ctx[var])
    raise RuntimeError(f"VK renderer: vector store to {buf.op} {buf.addrspace}")


def _index_str(ctx: "VKRenderer", idx: UOp) -> str:
    """An index expression; GLSL indexes with 32-bit integers only (tinygrad may index with int64 from loaded data)."""
    i = strip_parens(ctx[idx])
    return i if idx.dtype in (dtypes.int32, dtypes.uint32) else f"int({i})"


def _render_index(ctx: "VKRenderer", buf: UOp, idx: UOp) -> str:
    if buf.op is Ops.BITCAST and buf.addrspace is AddrSpace.GLOBAL:
        return "/* pointer bitcast */"  # see _ptr_view
    name, i = ctx[buf], _index_str(ctx, idx)
    if buf.addrspace is AddrSpace.GLOBAL:
        key = ctx._global_keys.get(name)
        if key is not None:
            return f"{name}[VK_I{key}({i})]"
    return f"{name}[{i}]"


def _render_load(ctx: "VKRenderer", bidx: UOp) -> str:
    if bidx.op is Ops.SHRINK:
        return _render_vector_load(ctx, bidx)
    if (view := _render_view_load(ctx, bidx)) is not None:
        return view
    acc = ctx[bidx]
    if bidx.dtype == dtypes.bool and bidx.addrspace is AddrSpace.GLOBAL:
        return f"(uint({acc})!=0u)"
    return acc


def _render_store(ctx: "VKRenderer", bidx: UOp, var: UOp) -> str:
    if bidx.op is Ops.SHRINK:
        return _render_vector_store(ctx, bidx, var)
    if (view := _render_view_store(ctx, bidx, var)) is not None:
        return view
    val = ctx[var]
    if var.dtype == dtypes.bool and bidx.addrspace is AddrSpace.GLOBAL:
        val = f"uint8_t({val}?1u:0u)"
    return f"{ctx[bidx]} = {val};"


def _render_const(ctx: "VKRenderer", c: UOp, x: UOp) -> str:
    dt, val = x.dtype, c.arg
    if dt == dtypes.bool:
        return "true" if val else "false"
    if dt == dtypes.bfloat16:
        return f"uint16_t({struct.unpack('<I', struct.pack('<f', float_to_bf16(float(val))))[0] >> 16}u)"
    if dtypes.is_float(dt):
        return _float_literal(float(val), dt)
    if dtypes.is_int(dt):
        lit = _int_literal(int(val), dt)
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
            (UPat(Ops.BITCAST, name="x"), lambda ctx, x: _bitcast(x.dtype, x.src[0].dtype, ctx[x.src[0]])),
            (
                UPat(Ops.CAST, name="x"),
                lambda ctx, x: (
                    _cast(x.dtype, x.src[0].dtype, ctx[x.src[0]])
                    if x.max_numel() == 1 or x.addrspace is not AddrSpace.REG
                    else None
                ),
            ),
            # index / load / store
            (
                UPat(Ops.INDEX, src=(UPat.var("buf"), UPat.var("idx"))),
                lambda ctx, buf, idx: _render_index(ctx, buf, idx),
            ),
            (
                UPat(Ops.LOAD, src=(UPat.var("bidx"),)),
                lambda ctx, bidx: _render_load(ctx, bidx),
            ),
            (
                UPat(Ops.LOAD, src=(UPat.var("bidx"), UPat.var("var"), UPat.var("gate"))),
                lambda ctx, bidx, var, gate: (
                    f"({ctx[gate]}?{_render_load(ctx, bidx)}:{ctx[var]})"
                ),
            ),
            (
                UPat(Ops.STORE, src=(UPat.var("bidx"), UPat.var("var"))),
                lambda ctx, bidx, var: _render_store(ctx, bidx, var),
            ),
            # vectors: GLSL vectors of 2-4 lanes, else arrays (see _value_type)
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
        self.global_max = self.caps.global_max
        self.local_max = tuple(min(m, self.caps.local_threads) for m in self.caps.local_max)
        self.shared_max = self.caps.shared_max
        from vkbackend.tinygrad.compiler import VKCompiler

        self.compiler = VKCompiler()

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
        return _value_type(u.dtype, n)  # scalars, GLSL vectors of 2-4 lanes, arrays of more

    def render_cast(self, u: UOp, val: str) -> str:
        return f"{TYPE_MAP[u.dtype]}({val})"

    def render_buffer(self, x: UOp) -> str:
        ty = TYPE_MAP[x.dtype]
        if x.addrspace is AddrSpace.LOCAL:
            dw = self._declared.get(x, 1)  # shared memory accessed only n lanes at a time is an array of vectors
            return f"shared {_value_type(x.dtype, dw)} {self[x]}[{x.max_numel() // dw}];"
        return f"{ty} {self[x]}[{x.max_numel()}];"

    # ----- the kernel ---------------------------------------------------------------------------------------------
    def render(self, uops: list[UOp]) -> str:
        # names of global buffers -> index-macro key; filled before _render so INDEX can use it
        self._global_keys: dict[str, str] = {}
        for u in uops:
            if u.op is Ops.PARAM and u.addrspace is AddrSpace.GLOBAL:
                name = f"data{u.arg.slot}_" + "_".join(str(x) for x in u.shape)
                self._global_keys[name] = f"{u.arg.slot}_{_storage_dtype(u.dtype).itemsize}"
        self._declared = plan_vector_widths(uops)
        self._vector_macros: set[tuple[UOp, int, bool]] = set()  # (global argument, lanes, store) used by the kernel
        return self.render_kernel(*self._render(uops), uops)

    @staticmethod
    def _declare_global(binding: int, name: str, dt: DType, qual: str, dw: int) -> list[str]:
        """The storage-buffer declaration of one argument: elements of ``dw`` lanes, scalar in the VK_VIEWS variant."""

        def decl(ty: str) -> str:
            return f"layout(set=0, binding={binding}, std430) {qual}buffer VKB{binding} {{ {ty} {name}[]; }};"

        if dw == 1:
            return [decl(TYPE_MAP[dt])]
        return ["#if VK_VIEWS", decl(TYPE_MAP[dt]), "#else", decl(_value_type(dt, dw)), "#endif"]

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
        globals_ = sorted(
            [(u.arg.slot, name, u, mut) for name, (u, mut) in bufs if u.addrspace is AddrSpace.GLOBAL],
            key=lambda t: t[0],
        )
        vars_ = sorted(
            [(u.arg.slot, name, u) for name, (u, _) in bufs if u.addrspace is not AddrSpace.GLOBAL], key=lambda t: t[0]
        )

        # shared memory must be at file scope
        shared = [ln.strip() for ln in kernel if ln.lstrip().startswith("shared ")]
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

        bindings = []
        for binding, (slot, name, u, mut) in enumerate(globals_):
            dt = _storage_dtype(u.dtype)
            lines += self._declare_global(binding, name, dt, "" if mut else "readonly ", self._declared.get(u, 1))
            bindings.append({"slot": slot, "sizes": [dt.itemsize]})

        pc_vars = [f"{TYPE_MAP[u.dtype]} {name};" for _, name, u in vars_]
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
        for buf, w, store in sorted(self._vector_macros, key=lambda m: (m[0].arg.slot, m[1], m[2])):
            dt = _storage_dtype(buf.dtype)
            key = f"{buf.arg.slot}_{dt.itemsize}"
            lines += _global_vector_macros(names[buf], key, buf.arg.slot, dt, self._declared.get(buf, 1), w, store)
        lines += shared
        if any("vk_exp2m(" in ln for ln in body):
            lines.append("float vk_exp2m(float a, float b) { precise float t = a*b; return exp2(t); }")

        meta = {"name": function_name, "local": local, "gid": uses_gid, "bindings": bindings, "nvars": len(vars_)}
        src = "\n".join(lines) + "\nvoid main() {\n" + "\n".join(body) + "\n}\n"
        return META_PREFIX + json.dumps(meta, separators=(",", ":")) + "\n" + src


def read_meta(src: str) -> dict:
    """The JSON header :class:`VKRenderer` writes on the first line of every kernel."""
    first = src.split("\n", 1)[0]
    if not first.startswith(META_PREFIX):
        raise ValueError("not a vkbackend-tinygrad kernel (no metadata line)")
    return json.loads(first[len(META_PREFIX) :])
