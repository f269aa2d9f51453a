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

MARKER_LINE = 64  # the marker's word, alone in its cache line
SOURCE_WORDS = 16  # words the host sets for batches that copy their serial into the marker (one per express-lane slot)
MARKER_BYTES = MARKER_LINE + 4 * SOURCE_WORDS


class CompletionMarker:
    """The word, its buffer and memory; ``word`` is a ``uint32_t*`` to it, which starts at 0. After the word's cache
    line come SOURCE_WORDS source words: a batch recorded to be submitted again cannot hold its serial, so it copies
    it into the marker from a source word that the host sets before each submit (``source_offset``)."""

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

    @staticmethod
    def source_offset(index: int) -> int:
        """The byte offset in the buffer of source word ``index`` (0 <= index < SOURCE_WORDS)."""
        if not 0 <= index < SOURCE_WORDS:
            raise IndexError(f"source word {index} of {SOURCE_WORDS}")
        return MARKER_LINE + 4 * index

    def destroy(self) -> None:
        """Unmap and free it (no submitted batch may write it any more)."""
        self._memory.unmap(self.vk_memory)
        self._memory.destroy(self.vk_memory, self.buffer, MARKER_BYTES)
