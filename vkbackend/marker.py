"""CompletionMarker: the host-mapped word every batch ends by writing its serial into (csrc/marker.c).

A batch submitted without a fence has completed once the word has reached its serial. NVIDIA's driver raises an
interrupt for each fence or semaphore a submission signals, and handling it takes tens of microseconds from
whichever thread runs on the CPU that takes it; so most batches signal none (submit.py says which do). The word
lives in host memory (HOST_VISIBLE|HOST_COHERENT, HOST_CACHED where offered, never DEVICE_LOCAL): polled by the host,
written once per batch by the GPU.
"""

from __future__ import annotations

from .context import DeviceContext
from .errors import BackendError
from .memory.device_memory import DeviceMemory

__all__ = ["CompletionMarker"]

MARKER_BYTES = 64  # one word is used; the rest keeps the buffer clear of anything else in its cache line


class CompletionMarker:
    """The word, its buffer and memory; ``word`` is a ``uint32_t*`` to it, which starts at 0."""

    def __init__(self, ctx: DeviceContext) -> None:
        self._memory = memory = DeviceMemory(ctx)
        self.vk_memory, self.buffer, _ = memory.create(MARKER_BYTES, memory.host_type(), "completion marker")
        try:
            mapped = memory.map(self.vk_memory, MARKER_BYTES, "completion marker")
        except BackendError:
            memory.destroy(self.vk_memory, self.buffer, MARKER_BYTES)
            raise
        self.word = ctx.ffi.cast("uint32_t*", mapped)
        self.word[0] = 0

    def destroy(self) -> None:
        """Unmap and free it (no submitted batch may write it any more)."""
        self._memory.unmap(self.vk_memory)
        self._memory.destroy(self.vk_memory, self.buffer, MARKER_BYTES)
