"""Data types and what each device can do with them."""

from __future__ import annotations

import builtins
import enum


class DType(enum.Enum):
    """Element types, by their numpy names. The value is the size in bytes and the name."""

    bool = (1, "bool")
    int8 = (1, "int8")
    int16 = (2, "int16")
    int32 = (4, "int32")
    int64 = (8, "int64")
    uint8 = (1, "uint8")
    uint16 = (2, "uint16")
    uint32 = (4, "uint32")
    uint64 = (8, "uint64")
    float16 = (2, "float16")
    bfloat16 = (2, "bfloat16")
    float32 = (4, "float32")
    float64 = (8, "float64")

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        return self.value[0]

    @property
    def is_float(self) -> builtins.bool:  # plain `bool` here would name the member DType.bool
        """True for the floating-point types."""
        return self.name.startswith(("float", "bfloat"))


# Operations a framework may ask about. Transcendentals are listed one by one because that is where drivers differ.
ALL_OPS = frozenset(
    {
        "load",
        "store",
        "add",
        "sub",
        "mul",
        "div",
        "mod",
        "max",
        "min",
        "cmp",
        "bitwise",
        "cast",
        "sqrt",
        "exp",
        "exp2",
        "log",
        "log2",
        "sin",
        "cos",
        "pow",
        "atomic",
    }
)
TRANSCENDENTAL_OPS = frozenset({"exp", "exp2", "log", "log2", "sin", "cos", "pow"})
_FLOAT_ONLY = frozenset({"sqrt"}) | TRANSCENDENTAL_OPS
_INT_ONLY = frozenset({"mod", "bitwise"})


def dtype_capabilities(features: frozenset[str]) -> dict[DType, frozenset[str]]:
    """Which operations the device supports per type, from the enabled feature names (see discovery.py).

    The rules: float64 without transcendentals (drivers crash or return garbage), bfloat16 only loads, stores and
    conversions, with shaderBFloat16Type (VK_KHR_shader_bfloat16 defines no arithmetic on it), float16 only with
    shaderFloat16 and 16-bit storage, int64 only with shaderInt64, int8
    and int16 only with their storage features. An empty set means the type is unsupported.
    """
    caps: dict[DType, frozenset[str]] = {}
    for dtype in DType:
        ops = ALL_OPS - (_INT_ONLY if dtype.is_float else _FLOAT_ONLY)
        if dtype is DType.bool:
            ops = frozenset({"load", "store", "cmp", "bitwise", "cast"})
        caps[dtype] = ops
    caps[DType.float64] = caps[DType.float64] - TRANSCENDENTAL_OPS if "shaderFloat64" in features else frozenset()
    caps[DType.bfloat16] = frozenset({"load", "store", "cast"}) if "shaderBFloat16Type" in features else frozenset()
    if not {"shaderFloat16", "storageBuffer16BitAccess"} <= features:
        caps[DType.float16] = frozenset()
    for dtype in (DType.int64, DType.uint64):
        if "shaderInt64" not in features:
            caps[dtype] = frozenset()
    for dtype in (DType.int16, DType.uint16):
        if "storageBuffer16BitAccess" not in features:
            caps[dtype] = frozenset()
    for dtype in (DType.int8, DType.uint8):
        if "storageBuffer8BitAccess" not in features:
            caps[dtype] = frozenset()
    return caps
