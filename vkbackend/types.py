"""Types of the public API that are not classes of their own: the host buffers transfers take, the DLPack producers
``Buffer.from_dlpack`` takes, the scalars and grid entries of a launch, and the dictionaries ``stats()`` returns. For
annotations in code that uses vkbackend."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypedDict, Union

if sys.version_info >= (3, 12):
    from collections.abc import Buffer
else:
    from typing_extensions import Buffer

from .errors import index_argument

if TYPE_CHECKING:
    import numpy

__all__ = [
    "Buffer",
    "DeviceStats",
    "Grid",
    "GridArg",
    "HostBuffer",
    "LiveObjects",
    "PipelineExecutable",
    "PoolStats",
    "Scalar",
    "SupportsDLPack",
]

# A C-contiguous buffer-protocol object: bytes, bytearray, memoryview, array.array, a numpy array. numpy's stubs give
# ndarray the buffer protocol (``__buffer__``) only from Python 3.12 on, hence the explicit ndarray.
HostBuffer = Union[Buffer, "numpy.ndarray[Any, Any]"]

# One push-constant member's value: a Python number (bool is an int), or a numpy scalar such as numpy.float32(2).
Scalar = Union[int, float, "numpy.generic[Any]"]


class GridArg:
    """A grid entry taken from scalar argument ``index`` of the launch (a kernel whose grid a variable sets).

    Its value is checked against the device's limits when the launch is recorded; an out-of-range value surfaces as
    ``KernelLaunch`` at the next sync point.
    """

    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index_argument(index, "GridArg index")

    def __repr__(self) -> str:
        return f"GridArg({self.index})"


# Work groups per axis: 1 to 3 entries, each an int or a GridArg naming a scalar of the launch.
Grid = Sequence[Union[int, GridArg]]


class SupportsDLPack(Protocol):
    """An object that exports its data through DLPack: a numpy array, a PyTorch tensor, any array-API array."""

    def __dlpack__(self, *, stream: None = None) -> Any: ...

    def __dlpack_device__(self) -> tuple[int, int]: ...


class PoolStats(TypedDict):
    """``MemoryPool.stats()``: live buffer ids (views included), VkDeviceMemory objects held, their bytes, chunks. A
    buffer past the largest allocation is one live buffer holding several memory objects."""

    live_buffers: int
    memory_objects: int
    held_bytes: int
    chunks: int


class LiveObjects(TypedDict):
    """Vulkan objects alive in the process, by kind: successful create calls less destroy calls."""

    device_memory: int
    buffers: int
    pipelines: int
    pipeline_layouts: int
    shader_modules: int
    fences: int
    descriptor_pools: int
    command_pools: int
    devices: int


class PipelineExecutable(TypedDict):
    """``Device.pipeline_statistics()``: one executable of a program's pipeline as the driver reports it (a compute
    pipeline has one on most drivers): its name, its description, the subgroup size it runs with, and its statistics
    by the driver's own names (NVIDIA's include the registers per invocation and the bytes spilled)."""

    name: str
    description: str
    subgroup_size: int
    statistics: dict[str, int | float | bool]


class DeviceStats(TypedDict):
    """``Device.stats()``: what the device submitted (batches, dispatches, barriers, copies, the nanoseconds spent
    recording and submitting them, and the batches submitted again without recording), its pool's counters and the
    process's live Vulkan objects."""

    batches: int
    dispatches: int
    barriers: int
    copies: int
    submit_ns: int
    reused: int  # batches submitted again as recorded before (a repeated launch or replay), not recorded anew
    heads: int  # batches onto an idle GPU whose first dispatches were submitted on their own, the rest recorded after
    throttled: int  # times launching threads waited for the worker to catch up (back-pressure)
    pool: PoolStats
    live_objects: LiveObjects
