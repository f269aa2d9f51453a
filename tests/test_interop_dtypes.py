"""Types numpy lacks, where vkbackend.interop.cuda takes a dtype: the error names the type and how to map it."""

from __future__ import annotations

import types

import pytest

from vkbackend import DType, InvalidArgumentTypeError
from vkbackend.interop.cuda import CudaArray


class TorchDType:
    """Stands in for a PyTorch dtype object: printed as ``torch.<name>``, and no numpy dtype."""

    def __init__(self, name: str) -> None:
        self.label = name

    def __repr__(self) -> str:
        return f"torch.{self.label}"


MEMORY = types.SimpleNamespace(nbytes=64, ptr=0)  # the dtype is checked before the memory is looked at


@pytest.mark.parametrize("dtype", ["bfloat16", DType.bfloat16, TorchDType("bfloat16")])
def test_bfloat16_says_to_map_int16_and_view(dtype):
    with pytest.raises(
        InvalidArgumentTypeError,
        match=r"dtype bfloat16 is not a numpy dtype; numpy has no bfloat16.*"
        r"cuda\.as_torch\(exported, 'int16', shape\)"
        r"\.view\(torch\.bfloat16\)",
    ):
        CudaArray(MEMORY, dtype, None)  # type: ignore[arg-type]


def test_float8_and_other_libraries_dtypes():
    with pytest.raises(InvalidArgumentTypeError, match=r"float8_e4m3fn.*'int8'.*torch\.float8_e4m3fn"):
        CudaArray(MEMORY, TorchDType("float8_e4m3fn"), None)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentTypeError, match="pass numpy's name for it, 'float32'"):
        CudaArray(MEMORY, TorchDType("float32"), None)  # type: ignore[arg-type]
    assert CudaArray(MEMORY, "int16", (4, 8)).__cuda_array_interface__["typestr"] == "<i2"  # type: ignore[arg-type]
