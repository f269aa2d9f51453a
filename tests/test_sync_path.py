"""The path of a sync point: what a sync with nothing to wait for does, what a waited sync leaves settled, and the
trace that ``VKBACKEND_TRACE`` writes of it (with ``scripts/trace-summary.py``'s reading)."""

from __future__ import annotations

import ctypes
import json
import os
import random
import re
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from _reliability import (
    AFFINE,
    SPIN,
    SPIN_INNER,
    express_lane_armed,
    express_lane_armed_within,
    groups,
    lane_served,
    run_isolated,
    set_express_lane,
    spin_grids,
)

import vkbackend
from vkbackend import testing
from vkbackend._ffi import ffi, lib, success_counts
from vkbackend.memory.pool import DIRECT_READ_MAX
from vkbackend.submit import FENCE_EVERY

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def wait_until_idle(device, timeout_s: float = 10.0) -> None:
    worker = device._worker
    deadline = time.monotonic() + timeout_s
    while not worker.quiet():
        assert time.monotonic() < deadline, "the worker did not go idle"
        time.sleep(0.001)


def test_a_sync_with_nothing_queued_queues_nothing(device, monkeypatch):
    """With nothing queued and the worker asleep, a sync returns without handing anything to the worker."""
    device.sync()
    wait_until_idle(device)
    queued = []
    put = device._worker.put

    def recording_put(item) -> None:
        queued.append(item)
        put(item)

    monkeypatch.setattr(device._worker, "put", recording_put)
    for _ in range(100):
        device.sync()
    assert queued == []


def test_a_sync_after_a_launch_waits_for_it(device, pool):
    """The round trip the fast path must not shortcut: a launch, then a sync, then the result is there."""
    prog = device.compile(vkbackend.compile_glsl(AFFINE))
    buf = pool.allocate(256 * 4)
    try:
        pool.host_to_pool(np.zeros(256, np.uint32), buf)
        out = np.empty(256, np.uint32)
        for i in range(1, 51):
            device.launch(prog, [buf], [256, 1, 1], groups(256))
            device.sync()
            pool.pool_to_host(buf, out)
            assert (out == i).all(), (i, out[:4])
    finally:
        pool.release(buf)


def test_a_window_counts_its_submit_time_once(device, pool):
    """``Device.stats()["submit_ns"]`` grows by what the window's submit took, once (the express lane off, so that the
    worker's Python submits it)."""
    prog = device.compile(vkbackend.compile_glsl(AFFINE))
    buf = pool.allocate(256 * 4)
    worker = device._worker
    saved = set_express_lane(device, worker.progress.grace_ns, worker.idle_spin_ns, False)
    try:
        pool.host_to_pool(np.zeros(256, np.uint32), buf)
        device.sync()
        wait_until_idle(device)
        before = device.stats()
        device.launch(prog, [buf], [256, 1, 1], groups(256))
        device.sync()
        after = device.stats()
        assert after["batches"] - before["batches"] == 1
        assert after["submit_ns"] - before["submit_ns"] == worker._submitter._window.submit_ns > 0
    finally:
        set_express_lane(device, *saved)
        pool.release(buf)


def test_a_sync_leaves_released_memory_freed(device, pool):
    """After a sync, releases queued behind GPU work have run: the pool holds no buffer it was given back."""
    prog = device.compile(vkbackend.compile_glsl(AFFINE))
    device.sync()
    before = pool.stats()["live_buffers"]
    for _ in range(20):
        buf = pool.allocate(1 << 16)
        device.launch(prog, [buf], [1 << 14, 3, 1], groups(1 << 14))
        pool.release(buf)  # freed once the launch has completed
    device.sync()
    assert pool.stats()["live_buffers"] == before


class CountingSignal:
    """Stands in for the worker's wake-up signal and counts the times the worker went to sleep on it."""

    def __init__(self, signal) -> None:
        self.signal, self.takes = signal, 0
        self.set, self.clear = signal.set, signal.clear

    def take(self, timeout_s=None) -> bool:
        self.takes += 1
        return self.signal.take(timeout_s)


@pytest.mark.parametrize("grace_ns", [0, 20_000_000], ids=["no-grace", "grace"])
def test_a_polling_worker_takes_launches_without_sleeping(device, pool, grace_ns):
    """A worker that ran out of work polls for the next item instead of sleeping (on a GPU; forced here): launches
    after sync points are taken, run and completed without the worker ever sleeping on its signal, and once the poll
    is turned off it sleeps again. With a grace (a kicked worker waits for the caller to release the GIL) and the
    hold (after a round trip the worker waits for its next work inside the publish) the same holds."""
    worker = device._worker
    progress = worker._submitter.progress
    prog = device.compile(vkbackend.compile_glsl(AFFINE))
    buf = pool.allocate(256 * 4)
    signal = worker.wake
    counting = CountingSignal(signal)
    grace = progress.grace_ns
    progress.grace_ns = grace_ns
    try:
        pool.host_to_pool(np.zeros(256, np.uint32), buf)
        worker.idle_spin_ns = 30_000_000_000  # far longer than the test: a sleep can only mean the poll failed
        device.launch(prog, [buf], [256, 1, 1], groups(256))  # wakes the worker, which polls from now on
        device.sync()
        wait_until_idle(device)
        worker.wake = counting
        out = np.empty(256, np.uint32)
        for i in range(2, 22):
            device.launch(prog, [buf], [256, 1, 1], groups(256))
            device.sync()
            wait_until_idle(device)
        pool.pool_to_host(buf, out)
        assert (out == 21).all(), out[:4]
        assert counting.takes == 0
        worker.idle_spin_ns = 0
        worker.wake_up()  # ends the poll; the worker finds nothing to do and sleeps
        deadline = time.monotonic() + 10
        while counting.takes == 0:
            assert time.monotonic() < deadline, "the worker did not go to sleep once the poll was off"
            time.sleep(0.001)
    finally:
        progress.grace_ns = grace
        worker.idle_spin_ns = 0
        worker.wake = signal
        worker.wake_up()
        pool.release(buf)


def test_a_launch_nobody_waits_for_runs_within_the_grace(device, pool):
    """A kicked worker waits for its caller to release the GIL, but only for the grace: a launch followed by no sync
    point is taken and completed all the same, while the caller holds the GIL in a loop of its own."""
    worker = device._worker
    progress = worker._submitter.progress
    prog = device.compile(vkbackend.compile_glsl(AFFINE))
    buf = pool.allocate(256 * 4)
    grace = progress.grace_ns
    try:
        pool.host_to_pool(np.zeros(256, np.uint32), buf)
        worker.idle_spin_ns = 30_000_000_000
        progress.grace_ns = 2_000_000
        for round_ in range(3):
            device.launch(prog, [buf], [256, 1, 1], groups(256))
            deadline = time.monotonic() + 20
            while not worker.quiet():  # no sync point: the worker must take the launch by itself
                assert time.monotonic() < deadline, f"round {round_}: the launch was not taken"
                sum(range(1000))  # holds the GIL, as a caller busy in Python does
        out = np.empty(256, np.uint32)
        pool.pool_to_host(buf, out)
        assert (out == 3).all(), out[:4]
    finally:
        progress.grace_ns = grace
        worker.idle_spin_ns = 0
        worker.wake_up()
        pool.release(buf)


@pytest.fixture
def handing(device, pool):
    """The worker's hand-over settings saved and put back at the end (polling, grace, hand-over wait, express lane),
    with the AFFINE program and a zeroed buffer of 256 words: (worker, progress, program, buffer)."""
    worker = device._worker
    progress = worker._submitter.progress
    prog = device.compile(vkbackend.compile_glsl(AFFINE))
    buf = pool.allocate(256 * 4)
    grace, hand_over_ns, idle_spin_ns = progress.grace_ns, worker.hand_over_ns, worker.idle_spin_ns
    express = worker._submitter.express
    try:
        pool.host_to_pool(np.zeros(256, np.uint32), buf)
        yield worker, progress, prog, buf
    finally:
        progress.grace_ns = grace
        worker.hand_over_ns = hand_over_ns
        worker.idle_spin_ns = idle_spin_ns
        worker._submitter.express = express
        worker.wake_up()
        pool.release(buf)


@pytest.mark.parametrize(
    "polling, launch_first", [(True, False), (False, False), (True, True)], ids=["polling", "asleep", "after-a-launch"]
)
def test_a_graph_launch_hands_its_work_to_a_parked_worker(device, pool, handing, polling, launch_first):
    """Where polling pays (forced here), a graph launch that finds the worker parked (polling or asleep with nothing
    to do, or kicked by a launch it has not yet taken) returns only once the worker has begun to submit it, so the GPU
    runs it while the caller goes on; the worker then lingers until the sync point, and every launch runs once."""
    worker, progress, prog, buf = handing
    worker._submitter.express = False  # the lone launch first would take a submit of its own
    device.launch(prog, [buf], [256, 1, 0], groups(256))  # and the park armed before is left
    device.sync()
    worker.idle_spin_ns = 30_000_000_000 if polling else 0
    progress.grace_ns = 1_000_000_000  # a kicked worker waits for the hand-over (or a sync), however slow the host
    worker.hand_over_ns = 20_000_000_000  # far longer than the test: a return before the submit is the failure
    with device.graph([(prog, [buf], [256, 1, 3], groups(256))] * 3) as graph:
        for round_ in range(1, 11):
            device.sync()
            wait_until_idle(device)
            before = progress.submits
            if launch_first:
                device.launch(prog, [buf], [256, 1, 3], groups(256))
            graph.launch()
            assert progress.submits == before + 1, f"round {round_}: the graph launch returned before its submit"
            device.sync()
    out = np.empty(256, np.uint32)
    pool.pool_to_host(buf, out)
    assert (out == 30 * (4 if launch_first else 3)).all(), out[:4]


def test_a_graph_launch_behind_a_replay_still_being_submitted_waits_for_its_own_submit(device, pool, spin, handing):
    """Where polling pays (forced here), a graph launch that finds the worker busy with the last replay's submit (it
    lingers there for the grace, far longer than the test, and then needs the GIL to take the next records) waits,
    GIL released, until the worker has begun to submit it too: the GPU gets both replays while the caller runs on in
    Python. Every launch runs once, in order."""
    slow, grid, big = spin
    worker, progress, prog, buf = handing
    worker._submitter.express = False
    worker.idle_spin_ns = 30_000_000_000
    progress.grace_ns = 30_000_000_000  # the worker lingers after a submit until a caller waits or hands over
    worker.hand_over_ns = 20_000_000_000  # far longer than the test: a return before the submit is the failure
    first = device.graph([(slow, [big], [SPIN_INNER], grid), (prog, [buf], [256, 1, 3], groups(256))])
    second = device.graph([(prog, [buf], [256, 2, 1], groups(256))] * 3)
    with first, second:
        for round_ in range(1, 4):
            device.sync()
            wait_until_idle(device)
            before, spin_serial = progress.submits, worker._submitter.submitted + 1
            first.launch()
            assert progress.submits == before + 1, f"round {round_}: the first launch returned before its submit"
            second.launch()  # the spin still runs: the worker lingers in the first's submit, not parked
            assert progress.submits == before + 2, f"round {round_}: the second launch returned before its submit"
            spinning = not device._ctx.lib.vkb_marker_reached(progress, spin_serial)
            assert spinning, f"round {round_}: the spin ended too soon to tell"
            device.sync()
    out = np.empty(256, np.uint32)
    pool.pool_to_host(buf, out)
    expected = 0
    for _ in range(3):
        expected = expected + 3
        for _ in range(3):
            expected = 2 * expected + 1
    assert (out == expected).all(), (out[:4], expected)


class ExpressLane:
    """Polling and the express lane forced on (a GPU's settings, with a grace far longer than a test: a kicked
    worker leaves its park only for a sync point), and the old settings back at the end."""

    def __init__(self, device, grace_ns: int = 30_000_000_000) -> None:
        self.device, self.grace_ns = device, grace_ns
        self.worker = device._worker

    def __enter__(self) -> ExpressLane:
        self.saved = set_express_lane(self.device, self.grace_ns, 30_000_000_000, True)
        return self

    def __exit__(self, *exc) -> None:
        set_express_lane(self.device, *self.saved)
        self.worker.wake_up()

    def wait_armed(self) -> None:
        assert express_lane_armed_within(self.device, 10.0), "the worker did not arm its express lane"


@pytest.fixture(autouse=True)
def uploads_through_staging(monkeypatch):
    """Every upload here goes through staging, as a copy the worker submits: the scenarios below start from the state
    their set-up's upload leaves the worker in (woken, then parked again), which an upload written straight into
    memory (the device quiet) does not touch."""
    monkeypatch.setattr(vkbackend.memory.pool, "DIRECT_WRITE_MAX", 0)


@pytest.fixture
def express(device, pool, monkeypatch):
    """The lane forced on, the AFFINE program and a zeroed 256-word buffer, the worker polling after a first round.
    A launch waits as long as it takes for the park to serve the claim before it (on a loaded machine lavapipe's
    submit can take longer than a GPU's wait allows)."""
    monkeypatch.setattr(vkbackend.worker, "LANE_SETTLE_NS", 10_000_000_000)
    prog = device.compile(vkbackend.compile_glsl(AFFINE))
    buf = pool.allocate(256 * 4)
    try:
        pool.host_to_pool(np.zeros(256, np.uint32), buf)
        with ExpressLane(device) as lane:
            device.launch(prog, [buf], [256, 1, 0], groups(256))  # wakes the worker, which polls from now on
            device.sync()
            yield lane, prog, buf
    finally:
        testing.clear()
        pool.release(buf)


def test_a_lone_launch_takes_the_express_lane(device, pool, express):
    """A launch that finds the worker parked with nothing queued is submitted from the park (csrc/express.c), once,
    and so is the read-back's copy after it: each round's result is exact, and every launch and copy went by the
    lane. A second launch queued behind the first before the sync goes by the lane's next batch and runs after the
    first (the lane's barrier epoch is the submitter's)."""
    lane, prog, buf = express
    out = np.empty(256, np.uint32)
    before = lane_served(device)
    for i in range(1, 21):
        lane.wait_armed()
        device.launch(prog, [buf], [256, 1, 1], groups(256))
        device.sync()
        pool.pool_to_host(buf, out)
        assert (out == i).all(), (i, out[:4])
    assert lane_served(device) - before == 40  # 20 launches and 20 copies
    pool.host_to_pool(np.zeros(256, np.uint32), buf)
    device.sync()  # the upload's copy, queued, would keep the next launch off the lane
    before = lane_served(device)
    for _ in range(10):
        lane.wait_armed()
        device.launch(prog, [buf], [256, 2, 1], groups(256))
        device.launch(prog, [buf], [256, 3, 0], groups(256))  # must see the first one's write
        device.sync()
    taken = lane_served(device) - before
    pool.pool_to_host(buf, out)
    expected = 0
    for _ in range(10):
        expected = (expected * 2 + 1) * 3
    assert (out == expected).all(), out[:4]
    assert taken == 20, taken


@pytest.mark.parametrize("by_lane", [True, False], ids=["express lane", "worker"])
def test_most_batches_signal_no_fence(device, pool, express, by_lane):
    """Every batch ends by writing its serial into the completion marker, and a round trip waits for that; only one
    batch in FENCE_EVERY signals its fence (on NVIDIA's driver each costs an interrupt), by the express lane and by
    the worker's own windows alike. The others' command buffers are recorded again only once a later fence has
    signalled: the validation layer, on in the suite, reports a command buffer reused while pending."""
    lane, prog, buf = express
    worker = device._worker
    saved = set_express_lane(device, worker.progress.grace_ns, worker.idle_spin_ns, by_lane)
    try:
        worker.wake_up()  # out of its park: the next one arms the lane only where it is on
        device.launch(prog, [buf], [256, 1, 0], groups(256))
        device.sync()
        before, served = success_counts(), lane_served(device)
        for _ in range(64):
            if by_lane:
                lane.wait_armed()
            device.launch(prog, [buf], [256, 1, 1], groups(256))
            device.sync()
            assert device._ctx.lib.vkb_marker_reached(worker.progress, worker.progress.completed)
        after = success_counts()
    finally:
        set_express_lane(device, *saved)
    assert (lane_served(device) - served == 64) == by_lane
    submits = after["vkQueueSubmit"] - before["vkQueueSubmit"]
    fences = after["vkResetFences"] - before["vkResetFences"]  # each signalled fence is reset once seen
    assert submits >= 64 and fences <= 64 // FENCE_EVERY + 1 and 4 * fences <= submits, (submits, fences)
    out = np.empty(256, np.uint32)
    pool.pool_to_host(buf, out)
    assert (out == 64).all(), out[:4]


def test_trim_fences_the_batches_the_marker_completed(device, pool):
    """``trim`` destroys chunks whose blocks batches completed by the marker alone may have used: Vulkan (and the
    validation layer 1.4.363 on the H200) counts a buffer as in use until the host has seen a fence signalled after
    its last use, so trim drains first, ending with a fence; nothing then waits for one."""
    submitter = device._submitter
    src, dst = pool.allocate(256), pool.allocate(256)
    try:
        for _ in range(FENCE_EVERY):  # a copy's batch without a fence, after the last that had one
            pool.pool_to_pool(pool, src, dst)
            device.sync()
            if submitter._awaits_fence():
                break
        assert submitter._awaits_fence()
    finally:
        pool.release(src)
        pool.release(dst)
    pool.trim()
    assert not submitter._awaits_fence()


def words_to_the_worker(worker, monkeypatch) -> list:
    """Record every item put on ``worker``'s queue and every wake-up from now on (what a round by the lane needs
    none of)."""
    words: list = []
    put, wake_up = worker.put, worker.wake_up
    monkeypatch.setattr(worker, "put", lambda item: (words.append(item), put(item)))
    monkeypatch.setattr(worker, "wake_up", lambda: (words.append("wake_up"), wake_up()))
    return words


def test_launch_and_read_back_rounds_by_the_express_lane_run_inside_one_park(device, pool, express, monkeypatch):
    """Rounds of one launch and a read-back of its buffer, too large to read straight (DIRECT_READ_MAX): the park
    serves the launch and, into its next batch while the launch runs, the read-back's copy; each read-back waits for
    its copy's serial by itself (no word to the worker) and brings the count so far."""
    lane, prog, buf = express
    worker = device._worker
    lane.wait_armed()
    before = lane_served(device)
    words = words_to_the_worker(worker, monkeypatch)
    out = np.empty(256, np.uint32)
    assert out.nbytes > DIRECT_READ_MAX
    for i in range(1, 21):
        device.launch(prog, [buf], [256, 1, 1], groups(256))
        pool.pool_to_host(buf, out)
        assert (out == i).all(), (i, out[:4])
    taken = lane_served(device) - before
    monkeypatch.undo()
    assert not words, words
    assert taken == 40, taken


def test_a_sync_point_after_the_lane_has_armed_again_waits_by_itself(device, pool, spin, express, monkeypatch):
    """A sync point that comes once the park has served the launch before it and armed the lane again, while that
    launch still runs (on a GPU the usual case: the park submits within microseconds, while the caller still runs
    Python), waits for the lane's last batch by itself, with no word to the worker, which stays parked for the next
    launch; so does a read-back small enough to read straight from memory. A launch and read-back of the count after
    each round bring the count so far, by the lane too."""
    slow, grid, big = spin
    lane, prog, buf = express
    worker = device._worker
    express_state = worker._submitter.progress.express
    word = np.empty(1, np.uint32)
    assert word.nbytes <= DIRECT_READ_MAX
    lane.wait_armed()
    before = lane_served(device)
    with monkeypatch.context() as m:
        words = words_to_the_worker(worker, m)
        for i in range(1, 5):
            device.launch(slow, [big], [SPIN_INNER], grid)  # about 0.2 s: still running at the sync point
            lane.wait_armed()  # served, and the lane armed again
            assert len(worker.queue) == express_state.served > 0 and express_state.running
            if i % 2:
                device.sync()
            else:
                pool.pool_to_host(big, word)
            device.launch(prog, [buf], [256, 1, 1], groups(256))
            pool.pool_to_host(buf, word)
            assert word[0] == i, (i, word[0])
            assert not words, (i, words)
    assert lane_served(device) - before == 8


def test_a_sync_point_the_worker_answers_leaves_it_holding_for_the_next_launch(device, pool, express, monkeypatch):
    """A sync point that the worker answers in Python (the launch before it queued while the worker ran Python, so
    the sync point puts a mark) releases its caller with the worker holding, the lane armed, also where the batch has
    completed before the worker looks at it: so the caller's next launch and sync point go by the lane, with no word
    to the worker. (Were the worker to go back to Python instead, it would wait for the GIL while the caller runs,
    the next launch would queue behind it, and every round would pay for both.)"""
    lane, prog, buf = express
    worker = device._worker
    publish, progress, lib = worker._publish, worker.progress, device._ctx.lib

    def publish_then_let_the_batch_complete(serial) -> None:
        publish(serial)
        deadline = time.monotonic() + 10.0
        while not lib.vkb_marker_reached(progress, worker._submitter.submitted):  # done before the worker looks
            assert time.monotonic() < deadline, "the batch did not complete"
            time.sleep(0.001)

    word = np.empty(1, np.uint32)
    for i in range(1, 6):
        lane.wait_armed()
        worker.wake_up()  # out of its park: the launch below queues, and the sync point puts a mark
        device.launch(prog, [buf], [256, 1, 1], groups(256))
        with monkeypatch.context() as m:
            m.setattr(worker, "_publish", publish_then_let_the_batch_complete)
            device.sync()
        assert express_lane_armed(device), "the worker did not hold after releasing the sync point"
        before = lane_served(device)
        with monkeypatch.context() as m:
            words = words_to_the_worker(worker, m)
            device.launch(prog, [buf], [256, 1, 1], groups(256))
            pool.pool_to_host(buf, word)
        assert not words, (i, words)
        assert lane_served(device) - before >= 1
        assert word[0] == 2 * i, (i, word[0])


@pytest.fixture
def spin(device, pool):
    """SPIN compiled, the grid that keeps the device busy for about 0.2 s and a buffer for it (requested before the
    lane is forced on, whose grace keeps a parked worker from the calls that compiling makes)."""
    (grid,) = spin_grids(device, 0.2)
    prog = device.compile(vkbackend.compile_glsl(SPIN))
    buf = pool.allocate(1024)
    yield prog, grid, buf
    pool.release(buf)


def test_a_failed_read_back_copy_behind_a_running_launch_by_the_lane(device, pool, spin, express):
    """A read-back whose copy the lane fails to submit while the launch before it still runs on the lane's previous
    batch raises the submit's error, once the launch has completed; the lane goes on."""
    slow, grid, big = spin
    lane, prog, buf = express
    lane.wait_armed()
    device.launch(slow, [big], [SPIN_INNER], grid)
    testing.inject("vkQueueSubmit", "VK_ERROR_OUT_OF_HOST_MEMORY")  # the copy's
    out = np.empty(256, np.uint32)
    with pytest.raises(vkbackend.BackendError, match="recording and submitting"):
        pool.pool_to_host(buf, out)
    assert not testing.pending()
    for i in range(1, 4):
        lane.wait_armed()
        device.launch(prog, [buf], [256, 1, 1], groups(256))
        pool.pool_to_host(buf, out)
        assert (out == i).all(), (i, out[:4])


def test_launch_and_sync_rounds_by_the_express_lane_run_inside_one_park(device, pool, express, monkeypatch):
    """Rounds of one launch and a sync point, each launch by the lane: the park serves each, publishes its serial
    once it has run and arms again, and each sync point waits for that serial by itself (no word to the worker),
    returning only once the batch has completed."""
    lane, prog, buf = express
    worker = device._worker
    x = worker._express
    lane.wait_armed()
    before = lane_served(device)
    words = words_to_the_worker(worker, monkeypatch)
    for i in range(1, 21):
        device.launch(prog, [buf], [256, 1, 1], groups(256))
        serial = worker._lane[2]
        device.sync()
        assert worker.progress.completed >= serial, (i, serial)
    served, taken = x.served, lane_served(device) - before
    deadline = time.monotonic() + 10
    while not worker.quiet():  # served, completed and armed again: nothing left to wait for
        assert time.monotonic() < deadline, "the park did not arm again after the last launch"
        time.sleep(0.0001)
    monkeypatch.undo()
    assert not words, words
    assert served == 20, served  # one park served them all
    out = np.empty(256, np.uint32)
    pool.pool_to_host(buf, out)
    assert (out == 20).all(), out[:4]
    assert taken == 20, taken


def test_graph_replays_take_the_express_lane(device, pool, express, monkeypatch):
    """A graph's replay that finds the worker parked is submitted from the park, all its launches in one batch, in
    order (each launch reads what the one before it wrote): rounds of a replay and a sync point need no word to the
    worker, and each round's result is exact. A replay queued behind another goes by the lane's next batch."""
    lane, prog, buf = express
    worker = device._worker
    with device.graph([(prog, [buf], [256, 2, 1], groups(256)), (prog, [buf], [256, 3, 0], groups(256))]) as graph:
        lane.wait_armed()
        before = lane_served(device)
        words = words_to_the_worker(worker, monkeypatch)
        expected = 0
        for _ in range(10):
            graph.launch()
            device.sync()
            expected = (expected * 2 + 1) * 3
        assert not words, words
        assert lane_served(device) - before == 10
        lane.wait_armed()
        before = lane_served(device)
        for _ in range(3):
            lane.wait_armed()
            graph.launch()
            graph.launch()  # behind the first, in the lane's next batch
            device.sync()
            expected = (((expected * 2 + 1) * 3) * 2 + 1) * 3
        assert lane_served(device) - before == 6
    out = np.empty(256, np.uint32)
    pool.pool_to_host(buf, out)
    assert (out == expected % 2**32).all(), (out[:4], expected % 2**32)


def test_a_long_replay_by_the_lane_runs_its_head_first_then_goes_again_as_recorded(device, pool, express, monkeypatch):
    """A replay of more launches than a head (each adding one to what the one before wrote) that finds the worker
    parked goes by the lane: onto the idle GPU its first HEAD_DISPATCHES launches are submitted on their own, the rest
    after them (``Device.stats()["heads"]``: once for each of the ring's batches, which record it once each in the
    park), and once a lane batch holds its recording, later rounds in that batch submit head and rest again as
    recorded, in one submission (``reused``). No round needs a word to the worker, and every launch of every round
    runs once: the count is exact."""
    lane, prog, buf = express
    worker = device._worker
    launches = 2 * vkbackend.submit.HEAD_DISPATCHES + 4
    slots = lane_slots(device)
    rounds = 2 * slots + 2
    pool.host_to_pool(np.zeros(256, np.uint32), buf)
    device.sync()
    with device.graph([(prog, [buf], [256, 1, 1], groups(256))] * launches) as graph:
        lane.wait_armed()
        before, stats = lane_served(device), device.stats()
        words = words_to_the_worker(worker, monkeypatch)
        for _ in range(rounds):
            graph.launch()
            wait_until_idle(device)  # a sync point while the batch runs, the lane armed again, asks the worker
            device.sync()
        assert not words, words
        assert lane_served(device) - before == rounds
        after = device.stats()
        assert after["heads"] - stats["heads"] == slots
        assert after["reused"] - stats["reused"] == rounds - slots
        assert after["dispatches"] - stats["dispatches"] == rounds * launches
    out = np.empty(256, np.uint32)
    pool.pool_to_host(buf, out)
    assert (out == rounds * launches).all(), (out[:4], rounds * launches)


def test_a_failed_submit_after_a_head_by_the_lane_says_what_ran(device, pool, express):
    """A long replay by the lane whose head reached the GPU and whose rest failed to submit: the sync point says that
    the head ran; the batch's fence, submitted alone after the head, is tracked as the batch's (two submits reached
    the queue: the head and that fence, and nothing is set aside); the head's launches did run, and the lane goes on
    with the next replays."""
    lane, prog, buf = express
    launches = 20
    head = vkbackend.submit.HEAD_DISPATCHES
    submitter = device._worker._submitter
    pool.host_to_pool(np.zeros(256, np.uint32), buf)
    device.sync()
    with device.graph([(prog, [buf], [256, 1, 1], groups(256))] * launches) as graph:
        lane.wait_armed()
        before, submits, set_aside = lane_served(device), success_counts()["vkQueueSubmit"], len(submitter._abandoned)
        # the batch the serve takes, as one that last went without a fence leaves it: its own fence must decide
        submitter._express_batches[device._worker._express.next].fenced = False
        testing.inject("vkQueueSubmit", "VK_ERROR_OUT_OF_HOST_MEMORY", after=1)  # the head's submit succeeds
        graph.launch()
        with pytest.raises(vkbackend.BackendError) as info:
            device.sync()
        assert info.value.status is vkbackend.ErrorStatus.KernelLaunch
        assert f"submitting {launches} dispatches (the first {head} had been submitted on their own" in str(info.value)
        assert not testing.pending()
        wait_until_idle(device)
        assert success_counts()["vkQueueSubmit"] - submits == 2
        assert len(submitter._abandoned) == set_aside
        assert lane_served(device) - before == 1
        out = np.empty(256, np.uint32)
        pool.pool_to_host(buf, out)
        assert (out == head).all(), out[:4]
        before = lane_served(device)  # the read-back's copy went by the lane too
        for _ in range(3):
            lane.wait_armed()
            graph.launch()
            device.sync()
        assert lane_served(device) - before == 3
    pool.pool_to_host(buf, out)
    assert (out == head + 3 * launches).all(), out[:4]


_COUNT_AND_LENGTH = """#version 450
layout(local_size_x = 1) in;
layout(std430, binding = 0) buffer Data { uint words[]; };
void main() { words[0] = uint(words.length()); words[1] += %du; }
"""


@pytest.fixture
def counter(device):
    """A kernel that writes its buffer's length in words and counts its runs, compiled before the lane is forced on
    (a kicked worker leaves the lane's park only for a sync point, not for a compile); released after it."""
    prog = device.compile(vkbackend.compile_glsl(_COUNT_AND_LENGTH % 1))
    yield prog
    device.release_program(prog)


def _lane_round(device, pool, lane, prog: int, buf: int) -> tuple[int, int]:
    """One launch by the express lane and a read-back: the length the kernel saw, and the count so far. The read-back
    waits until the launch has run, so that it needs no word to the worker (a sync point that finds the lane armed
    again while the batch still runs asks the worker, which ends the park)."""
    lane.wait_armed()
    device.launch(prog, [buf])
    wait_until_idle(device)
    out = np.zeros(2, np.uint32)
    pool.pool_to_host(buf, out)
    return int(out[0]), int(out[1])


def test_a_repeated_launch_is_submitted_again_as_recorded(device, pool, counter, express):
    """The lane keeps each batch's recording: a launch repeated round after round is recorded once per lane batch,
    then submitted again as recorded (``Device.stats()["reused"]``), its serial copied into the completion marker
    from a word the host sets. Each round still runs (the count is exact after every read-back, which waits for the
    round's serial). Once a buffer it binds changes (its spare block taken by a buffer of another size, in the same
    slot), the next rounds record anew: the kernel sees the new buffer's length."""
    lane = express[0]
    first = pool.allocate(8192)
    pool.host_to_pool(np.zeros(2, np.uint32), first)
    device.sync()
    rounds = 3 * lane_slots(device)
    reused = device.stats()["reused"]
    for i in range(1, rounds + 1):
        assert _lane_round(device, pool, lane, counter, first) == (2048, i)
    reused = device.stats()["reused"] - reused
    assert reused >= rounds - lane_slots(device), reused  # one recording per lane batch, in one park
    slot = pool.entries[first].slot
    pool.release(first)
    device.sync()  # the block is a spare once the release has run
    second = pool.allocate(5000)  # the spare's block and slot (the last released of its order), 1250 words long
    assert pool.entries[second].slot == slot
    pool.host_to_pool(np.zeros(2, np.uint32), second)
    device.sync()
    for i in range(1, rounds + 1):
        assert _lane_round(device, pool, lane, counter, second) == (1250, i)
    pool.release(second)


def test_a_ring_batch_back_from_the_worker_keeps_no_recording(device, pool, counter, express):
    """A park's end gives the ring's batches that ran back to the submitter, whose windows may record into them (here
    a replay too long for the lane); the next park's ring takes batches anew and keeps no recording of theirs, so the
    lane never submits the worker's recording again as its own. Every launch runs once."""
    lane, _, buf = express
    x, ffi = device._worker._express, device._ctx.ffi
    pool.host_to_pool(np.zeros(2, np.uint32), buf)
    device.sync()
    launches = vkbackend.worker.LANE_REPLAY_LAUNCHES + 1
    count = 0
    with device.graph([(counter, [buf], [], (1, 1, 1))] * launches) as long:
        for _ in range(3):
            for _ in range(lane_slots(device)):
                assert _lane_round(device, pool, lane, counter, buf)[1] == count + 1
                count += 1
            assert any(slot.window.recording.cmd != ffi.NULL for slot in x.slots)
            long.launch()  # by the worker: the park ends
            device.sync()
            count += launches
            lane.wait_armed()  # the next park
            for i, slot in enumerate(x.slots):
                kept = slot.window.recording.cmd
                assert kept == ffi.NULL or kept == slot.window.cmd, i
    assert _lane_round(device, pool, lane, counter, buf)[1] == count + 1


@pytest.fixture
def doomed(device):
    """A counting kernel of its own (not the program cache's `counter`), which the test releases."""
    return device.compile(vkbackend.compile_glsl(_COUNT_AND_LENGTH % 2))


def test_a_replay_of_a_released_program_is_recorded_anew_and_skipped(device, pool, doomed, express):
    """A graph replayed round after round by the lane is submitted again as recorded; once its program is released,
    the next replay is recorded anew, which skips the launch and reports it at the sync point, and the buffer keeps
    the count of the rounds that ran."""
    lane, _, buf = express
    pool.host_to_pool(np.zeros(2, np.uint32), buf)
    device.sync()
    reused = device.stats()["reused"]
    rounds = 2 * lane_slots(device)
    with device.graph([(doomed, [buf], [], (1, 1, 1))]) as graph:
        for _ in range(rounds):
            lane.wait_armed()
            graph.launch()
            device.sync()
        assert device.stats()["reused"] > reused
        device.release_program(doomed)
        device.sync()  # the release's clean-up, queued behind the replays, keeps the lane off until it has run
        lane.wait_armed()
        graph.launch()
        with pytest.raises(vkbackend.BackendError, match="released"):
            device.sync()
    out = np.zeros(2, np.uint32)
    pool.pool_to_host(buf, out)
    assert out[1] == 2 * rounds, out


def lane_slots(device) -> int:
    return len(device._worker._express.slots)


def test_long_replays_and_replays_past_a_full_lane_go_by_the_worker(device, pool, spin, express):
    """A replay of more launches than the lane takes (LANE_REPLAY_LAUNCHES: the worker submits a longer one onto an
    idle GPU in two parts, its head first) goes by the worker's own windows; replays queued behind a kernel that keeps
    the GPU busy find the lane with no room once MAX_EARLY_IN_FLIGHT of its batches run, and go by the worker too;
    all run once, in order."""
    slow, grid, big = spin
    lane, prog, buf = express
    x = device._worker._express
    one = (prog, [buf], [256, 1, 1], groups(256))
    long = device.graph([one] * (vkbackend.worker.LANE_REPLAY_LAUNCHES + 1))
    short = device.graph([one] * vkbackend.worker.LANE_REPLAY_LAUNCHES)
    try:
        lane.wait_armed()
        before = lane_served(device)
        long.launch()
        device.sync()
        assert lane_served(device) == before
        lane.wait_armed()
        device.launch(slow, [big], [SPIN_INNER], grid)  # by the lane: the replays queue behind it
        most_running = 0
        for _ in range(50):
            short.launch()
            most_running = max(most_running, x.running)
        device.sync()
        assert lane_served(device) > before  # the first went by the lane at least
        assert most_running <= x.max_running == vkbackend.submit.MAX_EARLY_IN_FLIGHT, most_running
    finally:
        long.close()
        short.close()
    out = np.empty(256, np.uint32)
    pool.pool_to_host(buf, out)
    expected = vkbackend.worker.LANE_REPLAY_LAUNCHES * 51 + 1
    assert (out == expected).all(), (out[:4], expected)


@pytest.mark.parametrize("failure", ["skipped", "submit"])
def test_a_failed_express_launch_is_reported_and_the_lane_goes_on(device, pool, express, failure):
    """A launch by the lane that the recorder skips (a grid scalar of 0) or whose submit fails raises at the next
    sync point, saying why, like any other; nothing of it ran, and the next launches by the lane run."""
    lane, prog, buf = express
    lane.wait_armed()
    before = lane_served(device)
    if failure == "skipped":
        device.launch(prog, [buf], [0, 1, 7], (vkbackend.GridArg(0), 1, 1))
        expected = "skipped"
    else:
        testing.inject("vkQueueSubmit", "VK_ERROR_OUT_OF_HOST_MEMORY")
        device.launch(prog, [buf], [256, 1, 7], groups(256))
        expected = "recording and submitting 1 dispatches failed"
    with pytest.raises(vkbackend.BackendError, match=expected):
        device.sync()
    assert not testing.pending()
    for _ in range(3):
        lane.wait_armed()
        device.launch(prog, [buf], [256, 1, 1], groups(256))
        device.sync()
    taken = lane_served(device) - before
    out = np.empty(256, np.uint32)
    pool.pool_to_host(buf, out)
    assert (out == 3).all(), out[:4]
    assert taken == 4, taken


def test_launches_from_many_threads_with_the_express_lane_run_once_each(device, pool):
    """Threads launching and syncing at once, the lane armed whenever the worker parks (with a GPU's grace):
    whichever launch takes it, every launch runs exactly once and in each thread's order."""
    prog = device.compile(vkbackend.compile_glsl(AFFINE))
    bufs = [pool.allocate(256 * 4) for _ in range(4)]
    errors: list[BaseException] = []

    def run(buf) -> None:
        try:
            for _ in range(50):
                # launch when the lane is free, as often as the other threads allow
                express_lane_armed_within(device, 0.005)
                device.launch(prog, [buf], [256, 2, 1], groups(256))
                if random.random() < 0.2:
                    device.launch(prog, [buf], [256, 1, 0], groups(256))  # queued behind it: a no-op
                device.sync()
        except BaseException as error:  # reported by the main thread
            errors.append(error)

    try:
        for buf in bufs:
            pool.host_to_pool(np.zeros(256, np.uint32), buf)
        with ExpressLane(device):
            before = lane_served(device)
            threads = [threading.Thread(target=run, args=(buf,)) for buf in bufs]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            assert not errors, errors
            assert not any(t.is_alive() for t in threads)
            taken = lane_served(device) - before
        expected = 0
        for _ in range(50):
            expected = (expected * 2 + 1) & 0xFFFFFFFF
        out = np.empty(256, np.uint32)
        for buf in bufs:
            pool.pool_to_host(buf, out)
            assert (out == expected).all(), out[:4]
        assert taken > 0
    finally:
        for buf in bufs:
            pool.release(buf)


@pytest.fixture
def waiting_on_last(device, pool):
    """Polling forced on with a short grace, the lane off (the park would wait for a launch by the lane itself):
    ``start()`` launches the slow kernel and returns once the worker waits on it as its last batch, counted idle
    (its serial to be published from C as the fence signals); hands back (start, the AFFINE program, a zeroed
    256-word buffer)."""
    worker = device._worker
    (grid,) = spin_grids(device, 0.3)
    slow, prog = device.compile(vkbackend.compile_glsl(SPIN)), device.compile(vkbackend.compile_glsl(AFFINE))
    big, buf = pool.allocate(1024), pool.allocate(256 * 4)

    def start() -> int:
        device.sync()
        device.launch(slow, [big], [SPIN_INNER], grid)
        deadline = time.monotonic() + 10
        while not (worker.idle and not worker.queue and not worker.quiet()):
            assert time.monotonic() < deadline, "the worker did not wait on its last batch as idle"
        return worker._submitter.submitted

    try:
        pool.host_to_pool(np.zeros(256, np.uint32), buf)
        saved = set_express_lane(device, 1_000_000, 30_000_000_000, False)
        try:
            yield start, prog, buf
        finally:
            set_express_lane(device, *saved)
            worker.wake_up()
    finally:
        pool.release(big)
        pool.release(buf)


def test_a_sync_waits_for_the_last_batch_itself(device, pool, waiting_on_last, monkeypatch):
    """A sync point that finds nothing queued and the worker waiting on its last batch waits for that batch's serial,
    which C publishes as the fence signals: it queues no mark, and returns only once the batch has completed."""
    start, prog, buf = waiting_on_last
    worker = device._worker
    for _ in range(3):
        serial = start()
        queued: list = []
        put = worker.put
        monkeypatch.setattr(worker, "put", lambda item: (queued.append(item), put(item)))
        device.sync()
        completed = worker.progress.completed
        monkeypatch.undo()
        assert completed >= serial and not queued, (completed, serial, queued)


def test_a_launch_wakes_a_worker_waiting_on_its_last_batch(device, pool, waiting_on_last):
    """A launch while the worker waits on its last batch as idle wakes it: it is taken and completed without a sync
    point, although the worker would otherwise hold after that batch for far longer than the test."""
    start, prog, buf = waiting_on_last
    worker = device._worker
    for round_ in range(3):
        start()
        device.launch(prog, [buf], [256, 1, 1], groups(256))
        deadline = time.monotonic() + 20
        while not worker.quiet():  # no sync point: nothing else ends the worker's wait
            assert time.monotonic() < deadline, f"round {round_}: the launch was not taken"
            sum(range(1000))  # holds the GIL, as a caller busy in Python does
    out = np.empty(256, np.uint32)
    pool.pool_to_host(buf, out)
    assert (out == 3).all(), out[:4]


def test_a_sync_gives_the_callers_timer_slack_back(device, pool):
    """A sync point that sleeps in slices lowers its thread's timer slack only while it waits (the caller's thread
    is not the backend's to change)."""
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    pr_set_timerslack, pr_get_timerslack = 29, 30
    (grid,) = spin_grids(device, 0.3)  # past the spin of the wait (5 ms on a GPU)
    slow = device.compile(vkbackend.compile_glsl(SPIN))
    big = pool.allocate(1024)
    before = prctl(pr_get_timerslack, 0, 0, 0, 0)
    try:
        assert prctl(pr_set_timerslack, 200_000, 0, 0, 0) == 0
        device.sync()
        start = time.monotonic()
        device.launch(slow, [big], [SPIN_INNER], grid)
        device.sync()
        waited = time.monotonic() - start
        assert prctl(pr_get_timerslack, 0, 0, 0, 0) == 200_000, waited
    finally:
        prctl(pr_set_timerslack, before, 0, 0, 0)
        pool.release(big)


def _timed_publish(progress, serial: int, hold_ns: int) -> float:
    """Seconds ``vkb_publish_completed`` takes on a thread of its own (it lowers its thread's timer slack for good,
    as the worker's own)."""
    spent = []

    def publish() -> None:
        start = time.monotonic()
        lib.vkb_publish_completed(progress, serial, hold_ns)
        spent.append(time.monotonic() - start)

    thread = threading.Thread(target=publish)
    thread.start()
    thread.join(10)
    assert spent, "the publish did not return"
    return spent[0]


def test_a_publish_holds_the_worker_only_for_a_caller_it_releases():
    """A publish that releases a waiting caller holds the worker in C for its next work (up to ``hold_ns``); one that
    releases nobody returns at once. A caller still waiting for its target (a mark the worker has not reached yet)
    is not released by it, even where an earlier caller's target, left behind, is below the serial published."""
    progress = ffi.new("vkb_progress *")
    progress.wanted = 1  # an earlier caller's target
    hold_ns = 500_000_000
    target = ffi.new("uint64_t *", lib.VKB_SERIAL_UNPUBLISHED)
    waiter = threading.Thread(target=lib.vkb_wait_completed, args=(progress, target, 10_000_000_000))
    waiter.start()
    try:
        deadline = time.monotonic() + 5
        while progress.waiters != 1:
            assert time.monotonic() < deadline, "the caller did not begin to wait"
            time.sleep(0.001)
        assert _timed_publish(progress, 5, hold_ns) < 0.25  # releases nobody: no hold
        assert waiter.is_alive()  # its target is not published: still waiting
        lib.vkb_publish_target(target, 7)
        while progress.targeted != 1:
            assert time.monotonic() < deadline, "the caller did not see its target"
            time.sleep(0.001)
        assert _timed_publish(progress, 7, hold_ns) >= 0.45  # releases it: the worker holds
        waiter.join(5)
        assert not waiter.is_alive()
    finally:
        lib.vkb_publish_target(target, 0)  # ends the wait whatever happened
        waiter.join(10)
    assert progress.waiters == progress.targeted == 0


def test_a_launcher_that_keeps_the_gil_lets_the_worker_go_on(device, pool):
    """The library leaves the interpreter's switch interval alone, so a thread that launches between stretches of
    Python that never release the GIL must give it to the worker itself: a launch that finds the worker woken, or back
    from a wait in C, waits with the GIL released until the worker has had its turn (Worker.yield_gil). Here the
    switch interval is 100 s: without that, nothing queued would complete before the loop ends."""
    prog = device.compile(vkbackend.compile_glsl(AFFINE))
    buf = pool.allocate(256 * 4)
    progress = device._worker.progress
    before = sys.getswitchinterval()
    try:
        pool.host_to_pool(np.zeros(256, np.uint32), buf)
        device.sync()
        wait_until_idle(device)
        first = progress.completed
        sys.setswitchinterval(100.0)
        for _ in range(30):
            device.launch(prog, [buf], [256, 1, 1], groups(256))
            busy_until = time.perf_counter() + 0.002
            while time.perf_counter() < busy_until:  # Python that keeps the GIL
                pass
        completed = progress.completed - first  # read before anything here releases the GIL
        sys.setswitchinterval(before)
        out = np.empty(256, np.uint32)
        pool.pool_to_host(buf, out)
        assert (out == 30).all(), out[:4]
        assert completed >= 2, completed
    finally:
        sys.setswitchinterval(before)
        pool.release(buf)


def test_interrupted_launches_by_the_express_lane_run_at_most_once():
    """Ctrl-C at random moments inside launches and sync points, the lane forced on: every launch that returned ran
    once, an interrupted one at most once (by whichever path the host's timing gave it). Interrupted just before or
    just after the hand-over, each launch runs exactly once. A close right after a launch by the lane leaves no
    Vulkan object behind."""
    result = run_isolated("sync_path_express_interrupts", timeout=120, env={"VKBACKEND_SYNC_TIMEOUT_S": "5"})
    assert result["landed"] >= 80, result["landed"]
    assert len(result["values"]) == 1, result["values"]  # every element saw the same launches
    ran = result["values"][0]
    assert result["returned"] <= ran <= result["returned"] + result["interrupted"], result
    # interrupted just before or just after the hand-over, each of 60 launches ran exactly once
    # each launch found the lane armed: 20 raised before the hand-over, 20 after it, 20 not at all
    assert result["edges_calls"] == 60 and result["edges_raised"] == 40, result
    assert result["edges_values"] == [60] and result["edges_lane"] == 40, result
    assert all(count == 0 for count in result["live_end"].values()), result["live_end"]
    assert result["validation"] == ""


def test_trace_records_every_sync_point(tmp_path):
    """VKBACKEND_TRACE=FILE writes Chrome trace JSON of the caller's, the worker's and (with calibrated timestamps)
    the GPU's events, and trace-summary breaks each sync point down."""
    path = tmp_path / "trace.json"
    result = run_isolated("sync_path_traced", env={"VKBACKEND_TRACE": str(path)})
    assert result["value"] == 40 and result["validation"] == ""
    events = json.loads(path.read_text())["traceEvents"]
    names = [e["name"] for e in events]
    for name in (
        "sync",
        "sync_done",
        "readback",
        "readback_ready",
        "readback_done",
        "submit",
        "submitted",
        "publish",
        "complete",
    ):
        assert name in names, name
    # a read-back always waits (for its copy); a sync right after a launch all but always (the worker could, in
    # principle, finish the launch before the caller looks)
    assert names.count("readback") == 20 and names.count("sync") == 20 and names.count("publish") >= 20
    if result["calibrated"]:
        starts = [e for e in events if e["name"] == "gpu_start"]
        ends = [e for e in events if e["name"] == "gpu_end"]
        assert starts and len(starts) == len(ends) == names.count("complete")
        assert {e["tid"] for e in starts} == {"GPU"}
    summary = subprocess.run(
        [sys.executable, os.path.join(REPO, "scripts", "trace-summary.py"), str(path), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert summary.returncode == 0, summary.stderr
    lines = summary.stdout.splitlines()
    waited, idle = (
        int(n) for n in re.findall(r"(\d+) sync points waited for the GPU, (\d+) found nothing", lines[0])[0]
    )
    assert waited + idle == 40 and waited >= 20, lines[0]
    rows = {row["phase"]: row for row in map(json.loads, lines[1:])}
    assert rows["total"]["count"] == waited
    assert rows["total"]["min"] <= rows["total"]["median"] <= rows["total"]["p99"] <= rows["total"]["max"]


def test_tracing_is_off_unless_asked():
    from vkbackend import trace

    assert trace.enabled is bool(os.environ.get("VKBACKEND_TRACE"))


def test_the_last_close_restores_the_switch_interval():
    """Opening a device with ``VKBACKEND_SWITCH_INTERVAL_S`` set lowers the interpreter's GIL switch interval;
    closing the last one gives the previous value back, unless the program set its own meanwhile."""
    result = run_isolated("sync_path_switch_interval", env={"VKBACKEND_SWITCH_INTERVAL_S": "0.0002"})
    assert abs(result["open"] - 0.0002) < 1e-6 and result["restored"] and abs(result["kept"] - 0.001) < 1e-6
    assert result["validation"] == ""


def test_the_switch_interval_is_left_alone_by_default():
    """Without ``VKBACKEND_SWITCH_INTERVAL_S`` or ``VulkanConfig.switch_interval_s`` an open device leaves the
    interpreter's switch interval as the program had it."""
    result = run_isolated("sync_path_switch_interval", "default")
    assert result["left_alone"] and result["validation"] == ""


def test_caller_cpu_times_round_trips_with_the_caller_pinned():
    """scripts/caller-cpu.py (the hosts' slow mode, docs/performance.md): a fresh process per CPU and wait, each
    counting every launch, and one line of figures for each."""
    cpu = sorted(os.sched_getaffinity(0))[0]
    proc = subprocess.run(
        [sys.executable, os.path.join(REPO, "scripts", "caller-cpu.py"), "--cpus", str(cpu), "--trips", "20"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert [line.split(":")[0] for line in lines] == [f"CPU {cpu:3d}, spin ", f"CPU {cpu:3d}, sleep"], lines
    assert not any("WRONG" in line for line in lines), lines


def test_return_path_stamps_both_kinds_of_sync_point():
    """scripts/return-path.py (docs/performance.md): the native functions it stamps exist, and both reports come;
    with the express lane off (which submits inside the worker's park, where the stamps cannot see), it places sync
    points in phases, the GPU's part among them. Which sync points it can place depends on
    the host's timing (a batch may complete before its sync point waits; on the H200 under the validation layer it
    placed none of five MLP steps but 19 of 20 round trips, on lavapipe with polling forced once none of the round
    trips but every step), so only the two reports together must place some."""
    pytest.importorskip("tinygrad")
    script = os.path.join(REPO, "scripts", "return-path.py")
    proc = subprocess.run(
        [sys.executable, script, "--quick", "--steps", "5", "--trips", "20", "--no-lane"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    reports = re.findall(r"^(synced MLP step|launch_sync): (\d+) of (\d+) sync points", proc.stdout, re.M)
    assert [(name, int(total)) for name, _, total in reports] == [("synced MLP step", 5), ("launch_sync", 20)], (
        proc.stdout
    )
    assert sum(int(placed) for _, placed, _ in reports) > 0, proc.stdout
    assert "submitted -> seen complete" in proc.stdout, proc.stdout
