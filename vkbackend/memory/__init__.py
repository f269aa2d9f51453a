"""Device memory: the pool of buffers (pool.py) and what it is built from.

- device_memory.py: memory types and raw allocations, and what they hold;
- buddy.py: the buddy allocator that carves chunks into the blocks small buffers are;
- sparse.py: buffers past the largest allocation, one VkBuffer bound to several allocations by sparse binding;
- staging.py: the ring of host-visible staging buffers, leased one at a time;
- transfers.py: host-to-device and device-to-host copies streamed through the ring;
- external.py: buffers in memory shared with other APIs and processes through file descriptors.
"""

from .external import ExportedMemory
from .pool import MemoryPool

__all__ = ["ExportedMemory", "MemoryPool"]
