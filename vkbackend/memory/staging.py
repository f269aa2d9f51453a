"""The staging ring: fixed-size staging buffers in host memory that transfers stream through, one lease at a time.

Each staging buffer is one slot of the buffer table (records copy to and from it like any buffer) and a mapped host
pointer. Leases are taken and given back under a plain Lock, whose ``with`` an interrupt cannot split (a Condition's
can), and only in statements without a call between taking a buffer and recording who holds it: a KeyboardInterrupt
lands between bytecodes after a call, and here it cannot lose one.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from ..errors import BackendError, ErrorStatus
from ..wakeup import WAKE_S, Signal
from .device_memory import DeviceMemory

__all__ = ["Lease", "StagingRing"]


class StagingRing:
    """``count`` staging buffers of ``buffer_bytes`` each, in one host-visible allocation."""

    def __init__(self, ctx, memory: DeviceMemory, new_slot: Callable, buffer_bytes: int, count: int) -> None:
        self.ctx, self._memory = ctx, memory
        self.buffer_bytes = buffer_bytes
        self.count = count
        self.vk_memory, self.vk_buffer, _ = memory.create(buffer_bytes * count, memory.host_type(), "staging ring")
        try:
            mapped = memory.map(self.vk_memory, buffer_bytes * count, "staging ring")
        except BackendError:
            memory.destroy(self.vk_memory, self.vk_buffer, buffer_bytes * count)
            raise
        self.lock = threading.Lock()
        self.free: list[tuple[int, object]] = []  # (slot, host pointer) of each staging buffer not leased
        self.freed = Signal()  # set when one comes back
        for i in range(count):
            self.free.append(
                (new_slot(self.vk_buffer, i * buffer_bytes, buffer_bytes, None), mapped + i * buffer_bytes)
            )

    def acquire(self, lease: "Lease", block: bool = True) -> bool:
        """Fill ``lease`` with a free staging buffer; False when ``block`` is false and none is free. Blocking, it
        raises ``KernelSync`` when none frees up within the sync deadline (they come back as the GPU finishes their
        copies), and the closed error as soon as the device is closed."""
        ctx = self.ctx
        deadline = time.monotonic() + ctx.sync_timeout_s
        while True:
            if ctx.closed:
                raise ctx.closed_error()
            with self.lock:
                if self.free:
                    lease.slot, lease.host = self.free[-1]
                    del self.free[-1]
                    return True
            if not block:
                return False
            left = deadline - time.monotonic()
            if left <= 0:
                raise BackendError(
                    ErrorStatus.KernelSync,
                    f"no staging buffer came free within {ctx.sync_timeout_s:.1f} s "
                    "(VKBACKEND_SYNC_TIMEOUT_S): earlier copies have not completed on the GPU",
                )
            self.freed.take(min(WAKE_S, left))

    def destroy(self) -> None:
        """Unmap and free the ring (no transfer may be using it)."""
        self._memory.unmap(self.vk_memory)
        self._memory.destroy(self.vk_memory, self.vk_buffer, self.buffer_bytes * self.count)


class Lease:
    """One staging buffer while a transfer holds it, and which part of the transfer it carries.

    Giving it back is idempotent, so a transfer interrupted (Ctrl-C) or failing while it holds one can hand the
    give-back to the worker, to run after everything queued so far has completed, whether or not its copy was queued.
    """

    __slots__ = ("ring", "slot", "host", "pos", "n", "serial")

    def __init__(self, ring: StagingRing, pos: int = 0, n: int = 0) -> None:
        self.ring, self.pos, self.n = ring, pos, n
        self.slot = self.host = self.serial = None  # serial: the cell Worker.wait_serial waits on (a download)

    def give_back(self) -> None:
        ring = self.ring
        with ring.lock:
            slot, self.slot = self.slot, None
            if slot is not None:
                ring.free.append((slot, self.host))
        ring.freed.set()
