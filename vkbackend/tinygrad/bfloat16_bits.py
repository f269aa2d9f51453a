"""bfloat16 values in numpy, which has no such type: float32 values rounded to bfloat16's 16-bit patterns as tinygrad
rounds them, and the patterns read back as float32 (exactly: a bfloat16 is a float32's upper half). The references
the tests and the tensor-core fuzzer check the device's bfloat16 results against, and how ``kernel_opts`` reads a
bfloat16 output."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["from_float32", "to_float32"]


def from_float32(x: npt.ArrayLike) -> np.ndarray:
    """``x`` as float32, rounded to bfloat16 as tinygrad's own cast rounds (``cstyle.cast_float_to_bf16``: to nearest
    even, a NaN kept a NaN): the bit patterns, as uint16."""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    finite = (-u.astype(np.uint32) & 0x7F800000) != 0  # tinygrad's test of the exponent, as it writes it
    rounded = np.where(finite, u + ((u >> 16) & 1) + 0x7FFF, np.where((u & 0xFFFF) != 0, u | 0x10000, u))
    return ((rounded >> 16) & 0xFFFF).astype(np.uint16)


def to_float32(bits: npt.ArrayLike) -> np.ndarray:
    """bfloat16 bit patterns (uint16) as the float32 values they are."""
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32)
