"""Worker: the per-device thread, the only code that records, submits and waits for batches on that device.

Callers append to a deque (thread-safe without a lock): launch records as ``bytes`` (the fast path), everything else
as small tuples (``put``, which also ends the worker's wait on a batch). The worker moves launch records in bulk into
the submitter's window and submits when the window is full, when a sync point or a copy someone waits on needs it,
and whenever its queue runs dry while fewer than MAX_EARLY_IN_FLIGHT batches run, so a lone launch starts at once and
the GPU finds the next batch queued. Every wait happens inside a C call or on a lock, with the GIL released.

A worker that runs out of work polls for a new item for IDLE_SPIN_NS (``kick``, set by every ``put`` and wake-up)
before it sleeps on its signal: a launch that follows a sync point then finds it running, instead of paying for a
thread wake-up. It polls with the GIL released and yields the core between looks; on a CPU device or with two cores
or fewer it goes to sleep at once, since the poll would take a core from the work. A kicked worker takes the GIL
once a caller waits for it (with the GIL released) or the kick is a grace old, and a worker that has just released
a waiting caller waits for its next work without taking the GIL (the hold, counted as idle): taking the GIL while a
caller holds it would cost a thread wake-up each way (csrc/fence.c).

A lone launch or graph replay that finds the worker parked in C with nothing else to do takes the express lane
(csrc/express.c): the worker submits it from the park, without the GIL, while the caller goes on to its sync point
(a replay recorded before, on the same buffers, is submitted again as recorded); back in Python the worker drops the
records, still at the head of its queue, and tracks the batch.

A caller that queues a batch of launches and runs more Python before its sync point (a framework's JIT replay) hands
them over (``hand_over``): to the express lane where it is armed, else, with room for another batch on the GPU (the
worker parked in C, or still submitting the last replay), the caller waits, with the GIL released, until the worker
has begun to submit them, so the GPU runs them while the caller goes on; the worker then lingers in C until the
caller waits or hands more over (csrc/fence.c). Only where polling pays, like the poll itself.

The library leaves the interpreter's switch interval alone, so a worker back from a wait in C could wait up to that
interval (5 ms by default) for the GIL while the caller runs Python. The worker's C waits and submits say as they
return that it needs the GIL (``progress.worker_python``), and a launch or graph replay that finds it so gives the GIL
up until the worker has had its turn (``yield_gil``).

A sync point does not wait for the worker to hand it a result: the worker publishes in memory the serial the caller
needs and, after each batch's completions, the serial it has completed, and the caller waits for them in C
(``wait_serial``, csrc/fence.c).

Back-pressure is the worker's too. A full window is submitted only while fewer than MAX_IN_FLIGHT batches run,
which bounds the driver's command memory; the records meanwhile wait in the queue, and past QUEUE_HIGH of them
(about 10 MiB) the launching threads wait (``admit``) until the worker has taken the queue down to QUEUE_LOW. The
worker looks at the queue after each full window; while it takes nothing from it for long (waiting for room on the
GPU, or inside a call such as a pipeline creation), launching threads look themselves. Launching stays one append:
the fast path reads only ``ctx.usable``, which both states turn off (``DeviceContext.set_busy``).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Iterator

from . import trace
from ._ffi import lib
from .config import validation_enabled
from .context import DeviceContext
from .errors import BackendError, ErrorStatus
from .submit import MAX_EARLY_IN_FLIGHT, BatchSubmitter
from .wakeup import WAKE_S, Signal

log = logging.getLogger("vkbackend")

__all__ = ["Worker"]

_COPY, _DEFER, _CALL, _AWAIT, _MARK, _STOP = range(6)
_EXPRESS_ARMED = lib.VKB_EXPRESS_ARMED
_EXPRESS_SERVING = (lib.VKB_EXPRESS_CLAIMED, lib.VKB_EXPRESS_FULL)  # a launcher claimed the lane; the park serves it
_EXPRESS_TAKEN = (*_EXPRESS_SERVING, lib.VKB_EXPRESS_DONE)  # a launcher claimed this arming of the lane
BUSY_POLL_NS = 200_000  # while the GPU runs and callers feed us: how long one wait on a batch may block
FREE_FLUSH_BYTES = 64 << 20  # released memory a window may hold back before it is submitted
IDLE_WAIT_NS = 1_000_000  # nothing queued but batches in flight: the longest a new item waits for us
IDLE_SPIN_NS = 1_000_000  # nothing queued or in flight: how long the worker polls for a new item before it sleeps
HAND_OVER_NS = 200_000  # the longest a caller handing work over waits for the worker to begin submitting it
YIELD_NS = 200_000  # the longest a caller yielding the GIL waits for the worker to have had its turn with it
LANE_REPLAY_LAUNCHES = lib.VKB_RECORDING_DISPATCHES  # the longest replay the express lane takes: one it can keep
LANE_SETTLE_NS = 100_000  # the longest a launch waits for the park to serve the express lane's last claim
STOP_GRACE_S = 10.0  # stop(): how much longer than the deadline the thread may take to end
MAX_IN_FLIGHT = 4
QUEUE_HIGH = 1 << 16
QUEUE_LOW = 1 << 14


class Future:
    """The result of a call run on the worker."""

    __slots__ = ("event", "value", "error")

    def __init__(self) -> None:
        self.event = Signal()
        self.value = None
        self.error: BaseException | None = None


class Worker:
    """One thread per device, fed by ``queue``."""

    def __init__(self, ctx: DeviceContext, submitter: BatchSubmitter) -> None:
        self.ctx = ctx
        self._submitter = submitter
        self.queue: deque = deque()
        self.wake = Signal()
        self._kick = ctx.ffi.cast("uint32_t*", ctx.ffi.addressof(submitter.progress, "kick"))
        self.progress = submitter.progress  # shared with C: serials, waiters, whether the worker needs the GIL
        self._express = submitter.progress.express
        # the last claim of the express lane: the record, its place in the queue, its batch's serial, the generation
        self._lane: tuple[bytes, int, int, int] | None = None
        self.idle = False  # polling or asleep with nothing queued, recorded or running; the waker clears it
        # idle or waiting on the GPU, with no batch of its own to submit: it takes its queue as soon as a caller waits
        # in C (after the completions it may be running)
        self.parked = False
        self.idle_spin_ns = IDLE_SPIN_NS if ctx.polling_pays else 0
        self.hand_over_ns = HAND_OVER_NS if ctx.polling_pays else 0  # 0: hand_over only queues
        self.queue_high, self.queue_low = QUEUE_HIGH, QUEUE_LOW
        self.throttled = False  # launching threads wait (admit) until the queue is down to queue_low
        self._watched = False  # the worker takes nothing from its queue for now: launchers check its length
        self._room = Signal()  # set when the throttle lifts
        self._gate = threading.Lock()  # the two flags change together with ctx.usable (from the worker or a launcher)
        self.throttle_count = 0
        self.finished = False  # set by the thread as it ends: every batch completed (or the device was lost)
        self.thread = threading.Thread(target=self._run, name=f"vkbackend-worker:{ctx.info.name}", daemon=True)
        self.thread.start()
        self._thread_id = self.thread.ident  # get_ident() against it: a cheaper test than current_thread()

    # ----- called from any thread ---------------------------------------------------------------------------------
    def put(self, item) -> None:
        """Queue an item and wake the worker if it sleeps."""
        self.queue.append(item)
        self._kick[0] = 1  # a worker waiting on the GPU looks at the queue now (csrc/fence.c)
        if self.idle:  # the waker clears idle, so a burst of callers sets the signal once
            self.wake_up()

    def hand_over(self, item: bytes, launches: int) -> None:
        """Queue the records of ``launches`` launches (a graph's replay) for the GPU to start on while this thread goes
        on: through the express lane where the worker is parked with it armed (at most LANE_REPLAY_LAUNCHES: the park
        submits them, no GIL changes hands, and a replay it has recorded before, on the same buffers, it submits again
        as recorded), else, with room for another batch on the GPU, by waiting (GIL released, at most
        ``hand_over_ns``) until the worker has begun its next submit, which holds them unless something queued before
        them went first. Either way, onto an idle GPU a long replay's first HEAD_DISPATCHES launches go on their own,
        so the GPU starts while the rest is recorded. Also when the worker is busy with an earlier replay's submit: it
        would need the GIL to take these records, and a caller that runs on in Python keeps it (tinygrad's JIT runs
        0.3-0.5 ms of it after a decode token's last replay)."""
        progress = self._submitter.progress
        seen = progress.submits
        if self.idle and launches <= LANE_REPLAY_LAUNCHES:
            self.queue.append(item)  # put's kick would end the park, and the lane with it
            if self.wake_up_to_launch():
                return
        else:
            self.put(item)
        if (
            self.hand_over_ns
            and self._submitter.in_flight < MAX_EARLY_IN_FLIGHT
            and threading.get_ident() != self._thread_id
        ):
            if trace.enabled:
                trace.event("hand_over")
            started = self.ctx.lib.vkb_hand_over(progress, seen, self.hand_over_ns)
            if trace.enabled:
                trace.event("handed_over" if started else "hand_over_timed_out")
        elif progress.worker_python:
            self.yield_gil()

    def yield_gil(self) -> None:
        """Give the GIL to the worker, which runs Python or is back from a wait in C, or woken, and needs the GIL to go
        on (``progress.worker_python``): wait, with the GIL released, until it is in C again, asleep, or has begun a new
        round of its loop, at most ``YIELD_NS`` (then win the GIL back). A woken worker still parked in C goes on
        waiting for its kick's grace meanwhile (csrc/fence.c). A thread that launches between stretches of Python would
        otherwise keep the GIL from it for the interpreter's switch interval (5 ms by default), the GPU running dry
        meanwhile; the library leaves that interval alone. The worker's own thread (a completion that launches) has the
        GIL."""
        if threading.get_ident() != self._thread_id:
            self.ctx.lib.vkb_yield_gil(self.progress, YIELD_NS)

    def quiet(self) -> bool:
        """Nothing queued, recorded or running: everything queued so far has completed. The queue is read first: the
        worker sets idle before it looks at the queue one last time, so idle read first could be followed by an item
        the worker then takes and submits. An idle worker may still wait on its last batch (its serial published from
        C as it completes): the published serial tells. A queue of records the express lane has served has completed
        too once the lane is armed with none of its batches running: it arms only with nothing else running
        (csrc/express.c)."""
        queued = len(self.queue)
        if not queued:
            return self.idle and self.progress.completed >= self._submitter.submitted
        return bool(self.ctx.lib.vkb_express_all_completed(self._express, queued))

    def wake_up(self) -> None:
        """Wake the worker, which is idle (the caller saw ``idle`` set after queueing something)."""
        self.progress.worker_python = 1  # woken, it needs the GIL: the caller's next launch yields it (yield_gil)
        self.idle = False
        self.wake.set()  # no call before this one: an interrupt cannot leave idle cleared and the worker asleep
        self._kick[0] = 1  # ends the poll of a worker that has just run out of work (csrc/fence.c)
        if trace.enabled:
            trace.event("wake_worker")

    def wake_up_to_launch(self) -> bool:
        """:meth:`wake_up` after queueing launch records, unless the express lane takes them (:meth:`_hand_to_lane`):
        the park then submits them and publishes their serial once they have run, and needs no wake-up; True then. A
        launch interrupted before the hand-over is left queued, to be taken at the next sync point or when the park
        ends."""
        if self._hand_to_lane() is None:
            self.wake_up()
            return False
        return True

    def _hand_to_lane(self) -> int | None:
        """Hand the queue's last item to the worker's express lane (csrc/express.c) when the worker is parked in C
        with the lane armed, the queue holds nothing else but what the park has served, and the item is records
        (this thread's, or another thread's queued meanwhile); the serial of the batch it goes in, or None."""
        express = self._express
        seen = express.state
        if seen & 0xFF in _EXPRESS_SERVING:  # the park is submitting a claim, then arms again: worth the wait
            seen = self.ctx.lib.vkb_express_settle(express, seen, LANE_SETTLE_NS)
        if seen & 0xFF != _EXPRESS_ARMED:
            return None
        q = self.queue
        lib = self.ctx.lib
        position = lib.vkb_express_served_in(express, seen)
        if position < 0 or len(q) != position + 1:  # re-armed or claimed meanwhile, or more queued than served
            return None
        try:
            record = q[position]
        except IndexError:  # the worker, back in Python meanwhile, took the queue
            return None
        if record.__class__ is not bytes:
            return None
        serial = lib.vkb_express_launch(express, seen, record, len(record))
        if serial < 0:
            return None
        self._lane = (record, position, serial, seen >> 8)
        return serial

    def queue_copy(self, record: bytes, on_done) -> None:
        """Queue a copy record; ``on_done`` runs on the worker once the copy has completed on the GPU."""
        self.put((_COPY, record, on_done))

    def queue_awaited_copy(self, record: bytes):
        """Queue a copy record that the caller waits for and return the serial cell for :meth:`wait_serial`. A parked
        worker's express lane takes it where it can (a read-back right after a launch by the lane: the copy follows
        it onto the GPU at once); otherwise the worker submits its window at once and publishes the serial. The
        record is queued first either way, so whatever the caller defers after it runs once the copy is done."""
        ffi, lib = self.ctx.ffi, self.ctx.lib
        self.queue.append(record)  # a bytes item, taken like launch records; a mark below ends its window
        known = self._hand_to_lane() if self.idle else None
        if known is not None:
            return ffi.new("uint64_t*", known)
        serial = ffi.new("uint64_t*", lib.VKB_SERIAL_UNPUBLISHED)
        self.put((_MARK, serial))
        return serial

    def defer(self, fn, nbytes: int = 0, wake: bool = True) -> None:
        """Run ``fn`` on the worker once all work queued before it has completed on the GPU.

        ``nbytes`` is the device memory ``fn`` gives back: once a window holds more than FREE_FLUSH_BYTES of it, the
        window is submitted at once, so released memory comes back without waiting for the window to fill. With
        ``wake`` false a sleeping worker is left asleep: ``fn`` runs when something else wakes it.
        """
        if wake:
            self.put((_DEFER, fn, nbytes))
        else:
            self.queue.append((_DEFER, fn, nbytes))

    def queued_last(self, fn) -> bool:
        """Whether the last item queued is ``fn``, deferred (:meth:`defer`) and not yet taken: nothing is after it."""
        try:
            item = self.queue[-1]
        except IndexError:
            return False
        return item.__class__ is tuple and item[0] == _DEFER and item[1] is fn

    def after_done(self, future: concurrent.futures.Future, fn) -> None:
        """Run ``fn(future)`` on the worker where its queue reaches this point, once ``future`` is done: what is queued
        after waits for it, while what came before goes to the GPU (where fewer than MAX_IN_FLIGHT batches run; the
        worker reaps none meanwhile). An error ``fn`` raises is kept for the next sync point."""
        self.put((_AWAIT, future, fn))

    def call(self, fn, *args):
        """Run ``fn(*args)`` on the worker and return its result (or raise its error) in the caller's thread."""
        if threading.get_ident() == self._thread_id:
            return fn(*args)
        future = Future()
        self.put((_CALL, fn, args, future))
        # The call itself waits on the GPU for at most the deadline; the margin covers the work queued before it.
        self.ctx.wait(future.event, self.ctx.sync_timeout_s + 60, f"the worker of {self.ctx.info.name} did not answer")
        if future.error is not None:
            if isinstance(future.error, BackendError) and future.error.status is ErrorStatus.DeviceLost:
                self.ctx.fail(future.error)  # however it was found, a lost device is sticky
            raise future.error
        return future.value

    def wait_serial(self, target, what: str) -> None:
        """Wait, in this thread, until the worker has published ``target`` (the serial of the batch that holds what the
        caller waits for, and so everything queued before it) and has completed that batch: the GPU has finished it
        and its completions have run. The wait spins in C with the GIL released (csrc/fence.c), so the worker runs
        the completions without waiting for the GIL, and this thread sees them at once. ``KernelSync`` saying
        ``what`` did not happen within the sync deadline; the closed error as soon as the device is closed meanwhile.
        """
        ctx = self.ctx
        wait, progress = ctx.lib.vkb_wait_completed, self._submitter.progress
        deadline = time.monotonic() + ctx.sync_timeout_s
        slice_ns = int(WAKE_S * 1e9)
        while not wait(progress, target, slice_ns):
            if ctx.closed:
                raise ctx.closed_error()
            if time.monotonic() >= deadline:
                raise BackendError(
                    ErrorStatus.KernelSync, f"{what} within {ctx.sync_timeout_s:.1f} s (VKBACKEND_SYNC_TIMEOUT_S)"
                )

    def drain(self) -> None:
        """Submit everything queued and wait for the GPU to finish it, within the sync deadline (no error check)."""
        self.call(self._submitter.drain, self.ctx.sync_timeout_ns)

    def sync(self) -> None:
        """A sync point: wait until the GPU has completed everything queued so far and the worker has run what waited
        for it (frees, staging buffers given back), then raise the first asynchronous error since the last sync point.

        With nothing queued and the worker asleep, everything has completed. With nothing queued and the worker idle
        but waiting on its last batch, this thread waits for that batch's serial. Otherwise the worker submits what
        is queued and publishes the serial of its batch, and this thread waits for it (:meth:`wait_serial`): no
        hand-off back to this thread through a lock or queue.
        """
        if trace.enabled:
            trace.event("sync")
        if self.quiet():
            if trace.enabled:
                trace.event("sync_done")
            self.raise_errors()
            return
        if threading.get_ident() == self._thread_id:  # a completion that syncs: nobody else would submit
            self.drain()
        else:
            ffi, lib = self.ctx.ffi, self.ctx.lib
            known = self._known_serial()
            if known is not None:
                serial = ffi.new("uint64_t*", known)
            else:
                serial = ffi.new("uint64_t*", lib.VKB_SERIAL_UNPUBLISHED)
                self.put((_MARK, serial))
            self.wait_serial(serial, f"GPU work on {self.ctx.info.name} did not finish")
        if trace.enabled:
            trace.event("sync_done")
        self.raise_errors()

    def _known_serial(self) -> int | None:
        """The serial of a batch that holds everything queued so far, where a sync point can tell it without the
        worker: with nothing queued and the worker idle, the last submitted (the worker clears idle before it takes
        anything from the queue, and sets it with nothing recorded); with the queue holding only records the express
        lane took, the lane's last batch: the serial of the last claim while the park serves it or has served it
        without arming again, else the park's last serve once it has armed the lane again (the worker sets the lane
        off before it drops served records, and a generation is never reused). The claim is looked at first: a lane
        only moves on from serving it to arming again, so a look that misses the one state finds the other. None
        otherwise: the worker then publishes it."""
        q = self.queue
        if not q:
            return self._submitter.submitted if self.idle else None
        express = self._express
        lane = self._lane
        if lane is not None:
            record, position, serial, generation = lane
            if len(q) == position + 1:
                try:
                    head = q[position]
                except IndexError:  # taken meanwhile
                    return None
                state = express.state
                if head is record and state >> 8 == generation and state & 0xFF in _EXPRESS_TAKEN:
                    return serial
        after_last = self.ctx.lib.vkb_express_all_served(express, len(q))
        return after_last - 1 if after_last >= 0 else None

    def raise_errors(self) -> None:
        """The end of a sync point whose wait is already done (a read-back whose last copy completed: the queue runs
        in order, so everything queued before it has completed too): raise the first asynchronous error since the
        last sync point."""
        if log.isEnabledFor(logging.DEBUG) and validation_enabled():
            from .discovery import validation_messages  # only with VKBACKEND_DEBUG=1 and VKBACKEND_VALIDATION=1

            messages = validation_messages()
            if messages:
                log.debug("validation layer:\n%s", messages)
        self.ctx.raise_pending()

    def timed(self, window: bytes) -> int:
        """Run packed records alone between two timestamps and return their GPU time in nanoseconds."""
        return self.call(self._submitter.timed, window, self.ctx.sync_timeout_ns)

    def admit(self) -> None:
        """The launch slow path, taken while ``ctx.usable`` is false: fail on a closed, lost or forked device; while
        the worker is far behind (throttled), wait until it has caught up, within the sync deadline."""
        ctx = self.ctx
        ctx.ensure_usable()
        if self._watched and not self.throttled and len(self.queue) > self.queue_high:
            self._set_throttled(True)
            self.wake.set()  # the worker may have left its call and gone to sleep meanwhile: it lifts the throttle
        if not self.throttled:
            return
        deadline = time.monotonic() + ctx.sync_timeout_s
        while self.throttled:
            if self._room.take(WAKE_S):
                self._room.set()  # pass the wake-up on to the next launching thread
            ctx.ensure_usable()
            if self.throttled and time.monotonic() >= deadline:
                raise BackendError(
                    ErrorStatus.KernelSync,
                    f"the launch queue of {ctx.info.name} did not drain within {ctx.sync_timeout_s:.1f} s "
                    "(VKBACKEND_SYNC_TIMEOUT_S): the GPU is far behind and made no progress",
                )

    def stop(self) -> bool:
        """Finish queued work within the sync deadline, then end the thread.

        True when the thread ended with nothing left running on the GPU; False when the GPU work outlived the deadline
        (a runaway kernel) or the thread did not end: then what the GPU may still use must not be destroyed.
        """
        if self.thread.is_alive():
            self.put((_STOP,))
            self.wake.set()
            # The thread's own wait is bounded by the deadline; the grace covers recording what was still queued.
            self.thread.join(self.ctx.sync_timeout_s + STOP_GRACE_S)
        return self.finished and not self.thread.is_alive()

    # ----- back-pressure ------------------------------------------------------------------------------------------
    def _set_throttled(self, on: bool) -> None:
        with self._gate:
            if on and not self.throttled:
                self._room.clear()
                self.throttle_count += 1
            self.throttled = on
            self.ctx.set_busy(self.throttled or self._watched)
        if not on:
            self._room.set()

    def _set_watched(self, on: bool) -> None:
        with self._gate:
            self._watched = on
            self.ctx.set_busy(self.throttled or self._watched)

    # ----- the thread ---------------------------------------------------------------------------------------------
    def _run(self) -> None:
        q, sub, kick, progress = self.queue, self._submitter, self._kick, self.progress
        while True:
            kick[0] = 0  # before the queue is looked at: a later put sets it again and ends the next wait on a batch
            progress.worker_turns = (progress.worker_turns + 1) & 0xFFFFFFFF  # a new round: a yielding launcher goes on
            self.parked = False
            if q:
                try:
                    while q:
                        if q[0].__class__ is bytes:
                            if sub.take_records(q):
                                self._submit_full()
                        elif self._handle(q.popleft()):
                            self._shutdown()
                            return
                except Exception as error:  # keep the thread alive whatever happens; report at the next sync
                    log.exception("vkbackend worker error")
                    self.ctx.fail(
                        error
                        if isinstance(error, BackendError)
                        else BackendError(ErrorStatus.KernelLaunch, f"worker error: {error!r}")
                    )
                continue
            try:
                # a caller released by a completion found here gets the same hold as one a wait releases (below)
                sub.reap(self.idle_spin_ns, self._hold)
                if sub.pending:
                    # The queue has run dry: submit at once when the GPU is idle (a lone launch starts now), and while
                    # it is busy keep up to MAX_EARLY_IN_FLIGHT batches queued behind the running one, so the GPU never
                    # waits for us to see it finish and record the next window. Past that the window grows.
                    if sub.in_flight < MAX_EARLY_IN_FLIGHT:
                        sub.submit()
                    else:
                        sub.wait_oldest(BUSY_POLL_NS, kicked=True)
                    continue
                if sub.in_flight:
                    self.parked = True
                    sub.wait_oldest(IDLE_WAIT_NS, kicked=True, hold_ns=self.idle_spin_ns, on_hold=self._hold)
                    continue
            except Exception as error:
                log.exception("vkbackend worker error")
                self.ctx.fail(
                    error
                    if isinstance(error, BackendError)
                    else BackendError(ErrorStatus.KernelSync, f"worker error: {error!r}")
                )
                # give up on the batches in flight, but on a live device only once the GPU is done with them
                sub.abandon(0 if self.ctx.lost is not None else self.ctx.sync_timeout_ns)
                continue
            if self.throttled:
                self._set_throttled(False)
            self.idle = self.parked = True
            if not q and not self._poll():
                if trace.enabled:
                    trace.event("sleep")
                progress.worker_python = 0  # asleep, it needs nothing: a launcher must not yield to it
                self.wake.take()
                progress.worker_python = 1  # awake (also when a wake-up came before the sleep began)
                if trace.enabled:
                    trace.event("woke")
            self.wake.clear()
            self.idle = False

    def _poll(self) -> bool:
        """Poll for work (where polling pays) with the express lane readied; True when there is some: the worker was
        kicked, or it has submitted a lone launch from the poll."""
        if not self.idle_spin_ns:
            return False
        self._submitter.ready_express()
        kicked = self.ctx.lib.vkb_wait_work(self._submitter.progress, self.idle_spin_ns)
        return self._take_express() or bool(kicked)

    def _hold(self, on: bool) -> None:
        """The hold (the worker waits for its next work inside a publish): idle meanwhile, so that a launch wakes it
        and a sync finds nothing to wait for; after it, what the express lane submitted is taken."""
        self.idle = on
        if not on:
            self._take_express()

    def _take_express(self) -> bool:
        """After a park: True when its express lane submitted the records at the head of the queue, which are then
        dropped (this thread alone takes from the queue, so they are still there) before their batches are counted."""
        served = self._submitter.express_served()
        if not served:
            return False
        self.idle = False
        q = self.queue
        for _ in range(served):
            q.popleft()
        self._lane = None
        self._submitter.take_express(served)
        return True

    def _handle(self, item: tuple) -> bool:
        """One item other than a launch record; True when the worker should stop."""
        kind = item[0]
        sub = self._submitter
        if kind == _COPY:
            _, record, on_done = item
            if sub.add_copy(record, on_done):
                self._submit_full()
        elif kind == _MARK:
            self._publish(item[1])
        elif kind == _DEFER:
            _, fn, nbytes = item
            if sub.after_queued(fn, nbytes) >= FREE_FLUSH_BYTES and sub.in_flight < MAX_EARLY_IN_FLIGHT:
                sub.submit()
        elif kind == _AWAIT:
            _, future, fn = item
            if not future.done():
                if sub.pending and sub.in_flight < MAX_IN_FLIGHT:
                    sub.submit()  # the GPU runs what came before while the worker waits
                with self._away():
                    concurrent.futures.wait([future])
            fn(future)
        elif kind == _CALL:
            _, fn, args, future = item
            with self._away():  # a pipeline creation, say, takes milliseconds
                try:
                    future.value = fn(*args)
                except BaseException as error:  # handed to the caller, who raises it
                    future.error = error
            future.event.set()
        elif kind == _STOP:
            return True
        return False

    @contextlib.contextmanager
    def _away(self) -> Iterator[None]:
        """The worker is away from its queue for a while, mostly in C with the GIL released (a call, a wait for a
        pipeline): launchers watch the queue's length themselves, and need not yield the GIL to it."""
        self._set_watched(True)
        self.progress.worker_python = 0
        try:
            yield
        finally:
            self.progress.worker_python = 1
            self._set_watched(False)

    def _publish(self, serial) -> None:
        """Submit the window at once and publish, for a waiting caller, the serial of the last batch submitted: it
        holds everything queued before (a window that failed to submit is not waited for: its error is pending)."""
        sub = self._submitter
        sub.submit()
        if trace.enabled:
            trace.event("publish", sub.submitted)
        self.ctx.lib.vkb_publish_target(serial, sub.submitted)

    def _submit_full(self) -> None:
        """Submit a full window once fewer than MAX_IN_FLIGHT batches run; throttle the launching threads while the
        queue is past queue_high, and lift the throttle once it is down to queue_low."""
        sub, ctx, q = self._submitter, self.ctx, self.queue
        if sub.in_flight >= MAX_IN_FLIGHT:
            self._set_watched(True)  # waiting here for the GPU, the worker takes nothing from the queue
            try:
                while sub.in_flight >= MAX_IN_FLIGHT and ctx.lost is None and not ctx.closed:
                    sub.wait_oldest(BUSY_POLL_NS)
                sub.submit()
            finally:
                self._set_watched(False)
        else:
            sub.submit()
        if len(q) > self.queue_high and not self.throttled and not ctx.closed:
            self._set_throttled(True)
        elif self.throttled and len(q) <= self.queue_low:
            self._set_throttled(False)

    def _shutdown(self) -> None:
        try:
            self._submitter.drain(self.ctx.sync_timeout_ns)
        except BackendError:
            if self.ctx.lost is None:  # past the deadline and still running: close() abandons the device
                return
            self._submitter.abandon()
        self.finished = True
