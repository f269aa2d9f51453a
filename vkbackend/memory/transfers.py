"""Transfers between host memory and device buffers, streamed through the staging ring.

A transfer moves in parts (``part_sizes``): whole staging buffers, then smaller ones toward the end of an upload and the
start of a download, so that the copy that runs alone there (the GPU's) is short. ``upload``: per part, take a staging
buffer, memcpy into it in C with the GIL released (split over up to 8 threads: the caller's and the copy crew's,
csrc/copy.c, or threads of its own where another copy uses the crew), queue a copy record; it returns when the
source has been read, and the copies run in stream order with launches. ``download``
keeps staging buffers in flight: while the GPU copies part k+1 into staging, the caller copies part k out, with
streaming stores (the caller's memory is not read first); it is a sync point. A staging buffer is never waited for while
holding another, so threads transferring at once cannot deadlock on the ring.

Interrupts (Ctrl-C) land in the caller's thread between bytecodes after a call, at a ``with`` block's exit and at a
loop's back edge. Every staging buffer is a Lease listed before it is filled, and an interrupted or failing transfer
hands the give-back of each to the worker, to run once the copies queued so far are done. A try block never opens with a
loop: CPython 3.11 raises an interrupt taken at the loop's back edge from the instruction before the loop's head,
outside the try, so neither its handlers nor its finally would run.
"""

from __future__ import annotations

import threading
import time
from collections import deque

from .. import records, trace
from ..wakeup import WAKE_S
from .staging import Lease, StagingRing

__all__ = ["Transfers", "part_sizes"]

SMALLEST_PART = 8 << 20  # what a transfer's parts shrink to at its end (an upload) or start (a download)


def part_sizes(nbytes: int, largest: int) -> list[int]:
    """The sizes of a transfer's parts, at most ``largest`` (a staging buffer) each, in upload order: whole staging
    buffers, then about half of what is left each time, until less than two SMALLEST_PART are left, which are the
    last part (8-16 MiB). The copy that runs alone at an upload's end, the GPU's of its last part, is then small; a
    download takes the parts in reverse order, so that the GPU's copy that runs alone at its start is. A part costs a
    staging lease, a copy record and a host copy's start-up, so they shrink no further. Staging buffers smaller than
    two SMALLEST_PART (lavapipe's 8 MiB) are taken whole, the last part what is left."""
    sizes: list[int] = []
    left = nbytes
    while left > 0:
        if left <= largest and left < 2 * SMALLEST_PART:
            n = left
        else:
            half = (left - left // 2 + 0xFFFF) & ~0xFFFF  # at least what is left after it, in whole 64 KiB blocks
            n = min(largest, max(half, SMALLEST_PART))
        sizes.append(n)
        left -= n
    return sizes


class Transfers:
    """The transfers of one device's memory pool: the staging ring, and the transfers in progress."""

    def __init__(self, ctx, worker, ring: StagingRing, copy_threads: int) -> None:
        self.ctx, self._worker, self.ring, self.copy_threads = ctx, worker, ring, copy_threads
        # Threads inside a transfer may be copying into or out of the mapped ring with the GIL released: close() waits
        # for them to leave before it unmaps it. A plain Lock, whose `with` an interrupt cannot split.
        self._lock = threading.Lock()
        self._active: list[object] = []

    def upload(self, src_ptr, nbytes: int, dst_slot: int, offset: int) -> None:
        """Copy ``nbytes`` from host memory at ``src_ptr`` into slot ``dst_slot`` at byte ``offset``; returns once the
        source has been read."""
        lib, ring, worker = self.ctx.lib, self.ring, self._worker
        lease, token = None, object()
        try:
            self._begin(token)
            pos = 0
            for n in part_sizes(nbytes, ring.buffer_bytes):
                lease = Lease(ring)
                ring.acquire(lease)
                lib.vkb_copy(lease.host, src_ptr + pos, n, self.copy_threads)
                worker.queue_copy(records.copy(lease.slot, dst_slot, 0, offset + pos, n), lease.give_back)
                pos += n
        except BaseException:
            if lease is not None and lease.slot is not None:  # its copy may be queued: give it back after that
                worker.defer(lease.give_back)
            raise
        finally:
            with self._lock:  # inline, not a call, which an interrupt could skip
                if token in self._active:
                    self._active.remove(token)

    def download(self, src_slot: int, offset: int, dst_ptr, nbytes: int) -> None:
        """Copy ``nbytes`` of slot ``src_slot`` from byte ``offset`` to host memory at ``dst_ptr``. It waits for the
        copies it queues; the caller's sync point then raises what went wrong before."""
        lib, ring, worker = self.ctx.lib, self.ring, self._worker
        leases: deque[Lease] = deque()  # oldest first; each is listed before it holds a staging buffer

        def finish_oldest() -> None:
            lease = leases[0]
            # on a timeout the lease stays listed, and is given back below
            worker.wait_serial(lease.serial, f"a copy on {self.ctx.info.name} did not complete")
            if trace.enabled:
                trace.event("readback_ready")
            lib.vkb_copy_streaming(dst_ptr + lease.pos, lease.host, lease.n, self.copy_threads)
            lease.give_back()
            leases.popleft()

        token = object()
        if trace.enabled:
            trace.event("readback")
        try:
            self._begin(token)
            pos = 0
            sizes = part_sizes(nbytes, ring.buffer_bytes)  # taken from the end: the small parts first
            while sizes:
                n = sizes[-1]
                lease = Lease(ring, pos, n)
                leases.append(lease)
                if not ring.acquire(lease, block=len(leases) == 1):  # never wait for one while holding another
                    leases.pop()
                    finish_oldest()
                    continue
                lease.serial = worker.queue_awaited_copy(records.copy(src_slot, lease.slot, offset + pos, 0, n))
                pos += n
                sizes.pop()
            while leases:
                finish_oldest()
            if trace.enabled:
                trace.event("readback_done")
        except BaseException:  # an error, a timeout or an interrupt: give each buffer back once its copy is done
            for lease in leases:
                if lease.slot is not None:
                    worker.defer(lease.give_back)
            raise
        finally:
            with self._lock:  # inline, not a call, which an interrupt could skip
                if token in self._active:
                    self._active.remove(token)

    def copy_mapped(self, dst, src, nbytes: int) -> None:
        """Copy ``nbytes`` between host memory and mapped device memory (``char*`` both; one points into a chunk) that
        no queued or running work uses: a read-back after its sync point, or an upload into a quiet device. In C with
        the GIL released, split over threads as a transfer's copies are, under the lock that ``close()`` waits behind
        before it frees the chunks, so that a close from another thread cannot unmap the memory mid-copy; on a closed
        device it raises the closed error instead."""
        with self._lock:
            if self.ctx.closed:
                raise self.ctx.closed_error()
            self.ctx.lib.vkb_copy(dst, src, nbytes, self.copy_threads)

    @property
    def mapping_lock(self) -> threading.Lock:
        """The lock every copy through a chunk's mapping holds (:meth:`copy_mapped`): hold it to unmap a chunk, so
        that a straight copy in progress in another thread finishes first."""
        return self._lock

    def _begin(self, token: object) -> None:
        """List a transfer (first thing in its try block, so that its finally always unlists it)."""
        with self._lock:
            if self.ctx.closed:  # checked under the lock that close() waits behind: no transfer starts after it
                raise self.ctx.closed_error()
            self._active.append(token)

    def wait_finished(self, timeout_s: float) -> bool:
        """After close() began: wait for threads still inside a transfer to leave (they notice the close within
        WAKE_S at every wait); False when one is still inside after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while True:
            with self._lock:  # a transfer that passed its closed check has counted itself by now
                if not self._active:
                    return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(WAKE_S / 10)

    @property
    def active(self) -> int:
        """How many transfers are in progress."""
        return len(self._active)
