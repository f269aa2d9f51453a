"""vkbackend: a Vulkan compute backend for Python tensor frameworks.

SPIR-V kernels and device buffers on any Vulkan GPU. ``import vkbackend`` needs no Vulkan driver; only asking for
devices does::

    import vkbackend
    dev = vkbackend.devices()[0]
    buf = dev.memory_pool.allocate(1024)          # an id; or vkbackend.Buffer(dev, 1024), which owns it
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .buffer import Buffer
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
    from .graph import GraphVariables, LaunchGraph
    from .memory import ExportedMemory, MemoryPool
    from .spirv import BufferBinding, ProgramInfo, PushMember
    from .types import GridArg

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
    "GraphVariables",
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


# Where each public name lives. They are imported on first use, so that ``import vkbackend`` costs milliseconds: it
# runs in every process that imports a submodule, such as each of tinygrad's compile workers.
_HOME = {
    "VulkanConfig": "config",
    "CooperativeMatrixShape": "cooperative_matrix",
    "Device": "device",
    "devices": "device",
    "DeviceInfo": "discovery",
    "MemoryHeap": "discovery",
    "DType": "dtypes",
    "compile_glsl": "glsl",
    "LaunchGraph": "graph",
    "GraphVariables": "graph",
    "ExportedMemory": "memory",
    "MemoryPool": "memory",
    "BufferBinding": "spirv",
    "ProgramInfo": "spirv",
    "PushMember": "spirv",
    "GridArg": "types",
    "Buffer": "buffer",
    **dict.fromkeys(
        [
            "BackendError",
            "DeviceLostError",
            "DLPackExportError",
            "DyLibNotFoundError",
            "ErrorStatus",
            "InitializationError",
            "InvalidArgumentError",
            "InvalidArgumentTypeError",
            "KernelCompilationError",
            "KernelLaunchError",
            "KernelSyncError",
            "MemoryAllocationError",
        ],
        "errors",
    ),
}


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use (``vkbackend.Buffer`` imports numpy)."""
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'vkbackend' has no attribute {name!r}")
    value = getattr(import_module(f".{home}", __name__), name)
    globals()[name] = value  # later lookups are plain attribute reads
    return value


def __dir__() -> list[str]:
    """The module's names, the public ones not yet imported included."""
    return sorted({*globals(), *__all__})
