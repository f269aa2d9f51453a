"""How tinygrad's types and values are spelled in GLSL: type names, vector types, literals, casts and bitcasts.

Where GLSL's semantics differ from C's (which tinygrad assumes), the spelling here gives C's: conversions of floats to
small and unsigned integers, bools in arithmetic, the bits of a bitcast.
"""

from __future__ import annotations

import math
import struct

from tinygrad.dtype import DType, dtypes

__all__ = [
    "TYPE_MAP",
    "UINT_OF_SIZE",
    "vec_type",
    "value_type",
    "storage_dtype",
    "int_literal",
    "float_literal",
    "cast",
    "F2BF",
    "F2BF_DEFINITION",
    "zero",
    "bitcast",
    "as_uint",
]

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
    dtypes.bfloat16: "uint16_t",  # bfloat16 lives as its bits, converted by F2BF and computed in float32
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
UINT_OF_SIZE = {1: dtypes.uint8, 2: dtypes.uint16, 4: dtypes.uint32, 8: dtypes.uint64}

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


def vec_type(dt: DType, n: int) -> str | None:
    """GLSL's ``n``-lane vector type of ``dt`` (``vec4``, ``f16vec2``...), or None where GLSL has none."""
    return f"{_VEC_PREFIX[dt]}vec{n}" if 2 <= n <= 4 and dt in _VEC_PREFIX else None


def value_type(dt: DType, n: int) -> str:
    """The GLSL type of an ``n``-lane value: the scalar, a vector of 2-4 lanes, else an array (e.g. 8 halves)."""
    if n == 1:
        return TYPE_MAP[dt]
    return vec_type(dt, n) or f"{TYPE_MAP[dt]}[{n}]"


def storage_dtype(dt: DType) -> DType:
    """The element type a global buffer of ``dt`` is declared with (GLSL has no 1-byte bool in buffers)."""
    return dtypes.uint8 if dt == dtypes.bool else dt


def int_literal(val: int, dt: DType) -> str:
    bits = dt.itemsize * 8
    if dt in dtypes.uints:
        val &= (1 << bits) - 1
        return f"{val}u" if bits <= 32 else f"{val}ul"
    val = ((val + (1 << (bits - 1))) % (1 << bits)) - (1 << (bits - 1))  # wrap to the signed range
    if bits <= 32:
        return f"({val + 1}-1)" if val == -(1 << 31) else (f"({val})" if val < 0 else str(val))
    return f"({val + 1}l-1l)" if val == -(1 << 63) else (f"({val}l)" if val < 0 else f"{val}l")


def float_literal(val: float, dt: DType) -> str:
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


# float32 to bfloat16 as tinygrad's own cast rounds (cstyle.cast_float_to_bf16: to nearest even, a NaN kept a NaN; its
# exponent test written plainly, the same bits for every float32), in one call: spelled out, a conversion is about 16
# of tinygrad's uops, and BEAM drops a candidate of BEAM_UOPS_MAX (3,000) uops or more. mix() with a bool selects
# (OpSelect) where glslang would branch on ?:
F2BF = "vk_f2bf"
F2BF_DEFINITION = (
    f"uint16_t {F2BF}(float f) {{ uint x = floatBitsToUint(f); "
    "uint nan = mix(x, x|0x10000u, (x&0xffffu)!=0u); "
    "return uint16_t(mix(nan, x+((x>>16)&1u)+0x7fffu, (x&0x7f800000u)!=0x7f800000u)>>16); }"
)


def cast(dst: DType, src: DType, val: str, sext64: bool = False) -> str:
    """A value conversion ``(dst)val`` with C semantics where GLSL's differs. ``sext64`` (DeviceCaps.sext64): a 32-bit
    signed integer becomes a 64-bit one by arithmetic on its zero extension, which no compiler takes for a
    conversion (Mesa 22.3's lavapipe compares ``int64_t(-5) < 0l`` as false, and shifts the value's upper half in as
    zero)."""
    if dst == src:
        return val
    if dtypes.bfloat16 in (src, dst):
        # tinygrad routes every other bfloat16 conversion through float32 (create_non_native_float_pats)
        if dtypes.float32 not in (src, dst):
            raise ValueError(f"no conversion from {src} to {dst} in GLSL: bfloat16 converts to and from float32 only")
        return f"{F2BF}({val})" if dst == dtypes.bfloat16 else f"uintBitsToFloat(uint({val})<<16)"
    if sext64 and src == dtypes.int32 and dst in (dtypes.int64, dtypes.uint64):
        wide = f"((int64_t(uint({val}))^0x80000000l)-0x80000000l)"
        return wide if dst == dtypes.int64 else f"uint64_t({wide})"
    if dst == dtypes.bool:
        return f"({val}!={zero(src)})" if src != dtypes.bool else val
    if src == dtypes.bool:
        return (
            f"{TYPE_MAP[dst]}({val})"
            if dst in (dtypes.float32, dtypes.float64, dtypes.int32, dtypes.uint32)
            else f"{TYPE_MAP[dst]}({val}?1:0)"
        )
    if dtypes.is_float(src) and dtypes.is_int(dst) and dst.itemsize < 4:
        # float -> 8/16-bit integers must go through int32 (direct conversion is broken on some drivers, and C
        # truncates)
        return f"{TYPE_MAP[dst]}(int({val}))"
    if dtypes.is_float(src) and dst == dtypes.uint32:
        # C on x86 (and numpy) convert through a 64-bit signed integer: negative floats wrap instead of being undefined
        return f"({val}<{zero(src)}?uint(int({val})):uint({val}))"
    return f"{TYPE_MAP[dst]}({val})"


def zero(dt: DType) -> str:
    if dt == dtypes.bool:
        return "false"
    if dtypes.is_float(dt):
        return float_literal(0.0, dt)
    return f"{TYPE_MAP[dt]}(0)"


def bitcast(dst: DType, src: DType, val: str) -> str:
    if dst == src:
        return val
    # bfloat16 values are uint16_t bits
    if src == dtypes.bfloat16:
        return bitcast(dst, dtypes.uint16, val)
    if dst == dtypes.bfloat16:
        return bitcast(dtypes.uint16, src, val)
    assert dst.itemsize == src.itemsize, f"bitcast {src} -> {dst} changes the size"
    if dtypes.is_float(src):
        fn_i, fn_u = _F2I[src]
        if dtypes.is_float(dst):
            return f"{_I2F[dst][0]}({fn_i}({val}))"
        return f"{fn_u if dst in dtypes.uints else fn_i}({val})"
    if dtypes.is_float(dst):
        fn, idt = (_U2F if src in dtypes.uints else _I2F)[dst]
        return f"{fn}({cast(idt, src, val) if src != idt else val})"
    # integer <-> integer of the same width: GLSL's conversion constructors keep the bits
    return f"{TYPE_MAP[dst]}({val})"


def as_uint(dt: DType, val: str) -> str:
    """The bits of a value of ``dt`` as the unsigned integer of the same size."""
    return bitcast(UINT_OF_SIZE[dt.itemsize], dt, val) if dt != dtypes.bool else f"uint8_t({val}?1u:0u)"
