"""Element types that numpy cannot hold (bfloat16, the float8s), met at the edges where data enters or leaves numpy:
the dtype a DLPack capsule carries, read without importing it, and the error that names the type and what to do.

numpy has no bfloat16 or float8 types, so a PyTorch bfloat16 tensor cannot become a numpy array, and a dtype such as
``torch.bfloat16`` or ``"bfloat16"`` is no numpy dtype. Their bytes can still travel: viewed as an integer type of the
same width, uploaded, read back, and viewed as the type again in the library that has it.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from ..errors import ErrorStatus, InvalidArgumentTypeError

# DLPack's DLDataTypeCode (dlpack.h, 1.1): the codes that name their width carry it in the name.
_TYPE_CODES = {
    0: "int",
    1: "uint",
    2: "float",
    4: "bfloat",
    5: "complex",
    6: "bool",
    7: "float8_e3m4",
    8: "float8_e4m3",
    9: "float8_e4m3b11fnuz",
    10: "float8_e4m3fn",
    11: "float8_e4m3fnuz",
    12: "float8_e5m2",
    13: "float8_e5m2fnuz",
    14: "float8_e8m0fnu",
    15: "float6_e2m3fn",
    16: "float6_e3m2fn",
    17: "float4_e2m1fn",
}
_SIZED = (0, 1, 2, 4, 5)  # codes whose name is completed by the width in bits ("bfloat" + "16")

# Type names numpy lacks, with their width in bits, as PyTorch, JAX and ml_dtypes spell them.
NOT_IN_NUMPY = {"bfloat16": 16} | {name: int(name[5]) for name in _TYPE_CODES.values() if "_" in name}


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensorHead(ctypes.Structure):
    """The first members of DLTensor, up to its dtype: all that is read here."""

    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device_type", ctypes.c_int32),
        ("device_id", ctypes.c_int32),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
    ]


_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_get_pointer.restype, _get_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
_is_valid = ctypes.pythonapi.PyCapsule_IsValid
_is_valid.restype, _is_valid.argtypes = ctypes.c_int, [ctypes.py_object, ctypes.c_char_p]
# DLManagedTensorVersioned puts a version (two uint32), manager_ctx, deleter and flags (uint64) before its DLTensor.
_VERSIONED_HEAD = 8 + 2 * ctypes.sizeof(ctypes.c_void_p) + 8


def capsule_dtype(capsule: Any) -> str | None:
    """The element type of an unconsumed DLPack capsule (``"bfloat16"``, ``"float32"``, ``"float8_e4m3fnx4"`` for
    four lanes), or None when ``capsule`` is not one. Reads the capsule and leaves it as it was: whoever drops it
    still frees the tensor through the producer's destructor."""
    for name, offset in ((b"dltensor", 0), (b"dltensor_versioned", _VERSIONED_HEAD)):
        if _is_valid(capsule, name):
            dtype = _DLTensorHead.from_address(_get_pointer(capsule, name) + offset).dtype
            if dtype.code in _SIZED:
                text = f"{_TYPE_CODES[dtype.code]}{dtype.bits}"
            else:
                text = _TYPE_CODES.get(dtype.code, f"DLPack type code {dtype.code} of {dtype.bits} bits")
            return text + (f"x{dtype.lanes}" if dtype.lanes != 1 else "")
    return None


def producer_dtype(obj: Any) -> str | None:
    """The element type ``obj`` exports through DLPack, from a fresh capsule it makes (dropped unconsumed), or None
    when it makes none; for an error message after numpy refused the object's capsule."""
    try:
        return capsule_dtype(obj.__dlpack__())
    except Exception:  # a producer that exports once, or not at all: no name to add to the error
        return None


def type_name(dtype: object) -> str:
    """A dtype's bare name: ``"bfloat16"`` for ``torch.bfloat16``, ``jnp.bfloat16``, ``DType.bfloat16`` or the
    string."""
    name = getattr(dtype, "name", None) if not isinstance(dtype, str) else dtype
    if not isinstance(name, str):
        name = getattr(dtype, "__name__", None) or str(dtype)
    return name.rsplit(".", 1)[-1]


# How to move such a type through vkbackend's numpy paths, with {ints} and {name} filled in.
BUFFER_EXAMPLE = (
    "in PyTorch, Buffer.from_dlpack(dev, tensor.view(torch.{ints})), and back with "
    "torch.from_dlpack(buf.to_numpy(numpy.{ints}, shape)).view(torch.{name}); with JAX or ml_dtypes, "
    ".view(numpy.{ints}) before and .view(ml_dtypes.{name}) after"
)


def what_to_do(name: str, example: str = BUFFER_EXAMPLE) -> str:
    """How to move data of a type numpy lacks (``name``, as :data:`NOT_IN_NUMPY` spells it) through numpy: as an
    integer type of its width, viewed as the type again where it exists; ``example`` shows it for the caller's API."""
    bits = NOT_IN_NUMPY.get(name, 8)
    ints = f"int{bits}" if bits in (8, 16, 32, 64) else "uint8"  # float4/float6: packed bytes
    return (
        f"numpy has no {name}, so move its bytes as {ints} and view them as {name} where that type exists: "
        + example.format(ints=ints, name=name)
    )


def not_in_numpy(what: str, dtype: object, example: str = BUFFER_EXAMPLE) -> InvalidArgumentTypeError | None:
    """The error for a dtype argument that names a type numpy lacks (``torch.bfloat16``, ``"float8_e4m3fn"``,
    ``DType.bfloat16``), or None for any other: the caller raises its own."""
    name = type_name(dtype)
    if name not in NOT_IN_NUMPY:
        return None
    return InvalidArgumentTypeError(
        ErrorStatus.InvalidArgument, f"{what}: dtype {name} is not a numpy dtype; {what_to_do(name, example)}"
    )


def numpy_name(dtype: object) -> str | None:
    """numpy's name for another library's dtype object that numpy cannot take as it is (``torch.float32`` gives
    ``"float32"``), or None; for an error's hint."""
    try:
        return str(np.dtype(type_name(dtype)).name)
    except TypeError:
        return None
