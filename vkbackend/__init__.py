"""vkbackend: a Vulkan compute backend for Python tensor frameworks.

SPIR-V kernels and device buffers on any Vulkan GPU. ``import vkbackend`` needs no Vulkan driver; only asking for
devices does::

    import vkbackend
    dev = vkbackend.devices()[0]
    buf = dev.memory_pool.allocate(1024)          # an id; or vkbackend.Buffer(dev, 1024), which owns it
"""

from typing import TYPE_CHECKING, Any

from .config import VulkanConfig
from .cooperative_matrix import CooperativeMatrixShape
from .device import Device, devices
from .discovery import DeviceInfo, MemoryHeap
from .dtypes import DType
from .errors import (
    BackendError,
    DeviceLostError,
    DLPackExportError,
    DyLibNotFoundError,
    ErrorStatus,
    InitializationError,
    InvalidArgumentError,
    InvalidArgumentTypeError,
    KernelCompilationError,
    KernelLaunchError,
    KernelSyncError,
    MemoryAllocationError,
)
from .glsl import compile_glsl
from .graph import LaunchGraph
from .memory import ExportedMemory, MemoryPool
from .spirv import BufferBinding, ProgramInfo, PushMember
from .types import GridArg

if TYPE_CHECKING:
    from .buffer import Buffer

__all__ = [
    "BackendError",
    "Buffer",
    "BufferBinding",
    "CooperativeMatrixShape",
    "DLPackExportError",
    "DType",
    "Device",
    "DeviceInfo",
    "DeviceLostError",
    "DyLibNotFoundError",
    "ErrorStatus",
    "ExportedMemory",
    "GridArg",
    "InitializationError",
    "InvalidArgumentError",
    "InvalidArgumentTypeError",
    "KernelCompilationError",
    "KernelLaunchError",
    "KernelSyncError",
    "LaunchGraph",
    "MemoryAllocationError",
    "MemoryHeap",
    "MemoryPool",
    "ProgramInfo",
    "PushMember",
    "VulkanConfig",
    "compile_glsl",
    "devices",
]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    """``vkbackend.Buffer`` on first use: its module imports numpy, which ``import vkbackend`` otherwise does not."""
    if name == "Buffer":
        from .buffer import Buffer

        return Buffer
    raise AttributeError(f"module 'vkbackend' has no attribute {name!r}")
