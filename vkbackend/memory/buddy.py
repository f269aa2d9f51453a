"""Chunk: one VkDeviceMemory bound to one VkBuffer, carved into power-of-two blocks by a buddy allocator.

Small buffers are blocks of a chunk, so an allocation is bookkeeping under the pool's lock, not a driver call:
allocate + release cost microseconds, and maxMemoryAllocationCount is never near. A block's order is its size as a
power of two above MIN_BLOCK.
"""

from __future__ import annotations

__all__ = ["Chunk", "MIN_BLOCK", "order_of"]

MIN_BLOCK = 256  # the smallest block; also >= every driver's minStorageBufferOffsetAlignment we know of


def order_of(nbytes: int) -> int:
    """The order of the smallest block that holds ``nbytes``."""
    return max(0, (max(nbytes, MIN_BLOCK) - 1).bit_length() - MIN_BLOCK.bit_length() + 1)


class Chunk:
    """The free blocks of one chunk, per order, and how many bytes are taken; ``address`` is the chunk's device
    address (0 where the device has none); ``host`` its mapping (a cffi ``char*``) where the host can read it."""

    def __init__(self, memory, buffer, size: int, address: int = 0) -> None:
        self.memory, self.buffer, self.size, self.address = memory, buffer, size, address
        self.host = None
        self.top = order_of(size)
        self.free: list[set[int]] = [set() for _ in range(self.top + 1)]
        self.free[self.top].add(0)
        self.used = 0

    def take(self, order: int) -> int | None:
        """The offset of a free block of ``order``, split from a larger one if need be; None when there is none."""
        k = order
        while k <= self.top and not self.free[k]:
            k += 1
        if k > self.top:
            return None
        offset = self.free[k].pop()
        while k > order:  # split, keeping the upper halves free
            k -= 1
            self.free[k].add(offset + (MIN_BLOCK << k))
        self.used += MIN_BLOCK << order
        return offset

    def give(self, offset: int, order: int) -> None:
        """Free the block at ``offset``, merging it with its free buddies."""
        self.used -= MIN_BLOCK << order
        while order < self.top:
            buddy = offset ^ (MIN_BLOCK << order)
            if buddy not in self.free[order]:
                break
            self.free[order].remove(buddy)
            offset = min(offset, buddy)
            order += 1
        self.free[order].add(offset)
