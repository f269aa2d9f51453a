"""Bad input, fuzzed.

A hypothesis state machine drives random sequences of allocate / retain / release / view / copy in / copy out / launch
(a kernel writing a known pattern) / sync, with valid and invalid arguments, against a pure-Python model of every
buffer's bytes and reference counts. The backend must agree with the model, raise nothing but BackendError with the
status the model expects for invalid calls, and never crash.

Random and truncated SPIR-V must give KernelCompilation and never reach the driver (lavapipe segfaults on some
truncated modules): those run in a child process, so that a regression fails a test instead of killing the run.
"""

from __future__ import annotations

import numpy as np
import pytest
from _reliability import FILL, FULL, groups, run_isolated
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test

import vkbackend
from vkbackend.errors import BackendError, ErrorStatus

EXAMPLES = 400 if FULL else 60
STEPS = 60 if FULL else 40
JUNK_IDS = [None, -1, 0, 1.5, "7", 10**30, (1,), [1]]
SIZES = [1, 3, 4, 16, 100, 256, 1000, 4096, 65536]
BAD_SIZES = [
    (0, ErrorStatus.InvalidArgument),
    (-8, ErrorStatus.InvalidArgument),
    (2.0, ErrorStatus.InvalidArgument),
    ("64", ErrorStatus.InvalidArgument),
    (True, ErrorStatus.InvalidArgument),
    (None, ErrorStatus.InvalidArgument),
    (1 << 40, ErrorStatus.MemoryAllocation),
]
COUNTS = {"examples": 0, "steps": 0, "invalid": 0, "checked_bytes": 0}


class Entry:
    """The model of one buffer id: its size, where its bytes live, and its counts."""

    def __init__(self, size: int, root: int, offset: int) -> None:
        self.size, self.root, self.offset = size, root, offset
        self.refcount, self.views = 1, 0


class PoolMachine(RuleBasedStateMachine):
    device = None
    fill = None

    def __init__(self) -> None:
        super().__init__()
        self.pool = self.device.memory_pool
        self.align = self.device.info.min_storage_buffer_offset_alignment
        self.entries: dict[int, Entry] = {}
        self.bytes: dict[int, np.ndarray] = {}  # root id -> contents
        self.known: dict[int, np.ndarray] = {}  # root id -> which bytes are defined
        self.dead: list[int] = []
        COUNTS["examples"] += 1

    @initialize(sizes=st.lists(st.sampled_from(SIZES), min_size=1, max_size=3), seed=st.integers(0, 2**32 - 1))
    def baseline(self, sizes, seed) -> None:
        self.start = self.pool.stats()["live_buffers"]
        for size in sizes:  # start with a few buffers, filled from the host
            self.allocate(size)
            payload = np.random.default_rng(seed).integers(0, 256, size, dtype=np.uint8)
            buf = max(self.entries)
            self.pool.host_to_pool(payload, buf)
            self.bytes[buf][:] = payload
            self.known[buf][:] = True

    # ----- helpers ------------------------------------------------------------------------------------------------
    def expect_error(self, status: ErrorStatus, fn, *args) -> None:
        COUNTS["invalid"] += 1
        with pytest.raises(BackendError) as info:
            fn(*args)
        assert info.value.status is status, (fn, args, info.value)

    def any_id(self, data, live_weight: int = 6):
        """A live id most of the time; else a released one or junk."""
        live = sorted(self.entries)
        choice = data.draw(st.integers(0, live_weight + 1))
        if live and choice < live_weight:
            return data.draw(st.sampled_from(live)), True
        if self.dead and choice == live_weight:
            return data.draw(st.sampled_from(self.dead)), False
        return data.draw(st.sampled_from(JUNK_IDS)), False

    def span(self, data, buf, live):
        """(offset, length) of a transfer: mostly a range inside a live buffer, sometimes any range at all."""
        if live and data.draw(st.integers(0, 4)):
            size = self.entries[buf].size
            offset = data.draw(st.integers(0, size))
            return offset, data.draw(st.integers(0, size - offset))
        return data.draw(st.sampled_from([0, 1, 4, 16, 100, 255, 1000, 70000, -1, 2.0])), data.draw(st.integers(0, 300))

    def region(self, buf: int):
        e = self.entries[buf]
        return self.bytes[e.root], self.known[e.root], e.offset

    # ----- rules --------------------------------------------------------------------------------------------------
    @rule(size=st.sampled_from(SIZES))
    def allocate(self, size) -> None:
        COUNTS["steps"] += 1
        buf = self.pool.allocate(size)
        assert buf not in self.entries and buf not in self.dead
        self.entries[buf] = Entry(size, buf, 0)
        self.bytes[buf] = np.zeros(size, np.uint8)
        self.known[buf] = np.zeros(size, bool)  # a new buffer's contents are undefined

    @rule(bad=st.sampled_from(BAD_SIZES))
    def allocate_invalid(self, bad) -> None:
        COUNTS["steps"] += 1
        size, status = bad
        self.expect_error(status, self.pool.allocate, size)

    @rule(data=st.data())
    def retain(self, data) -> None:
        COUNTS["steps"] += 1
        buf, live = self.any_id(data)
        if not live:
            return self.expect_error(ErrorStatus.InvalidArgument, self.pool.retain, buf)
        self.pool.retain(buf)
        self.entries[buf].refcount += 1

    @rule(data=st.data())
    def release(self, data) -> None:
        COUNTS["steps"] += 1
        buf, live = self.any_id(data)
        if not live or self.entries[buf].refcount <= self.entries[buf].views:
            return self.expect_error(ErrorStatus.InvalidArgument, self.pool.release, buf)
        self.pool.release(buf)
        self._model_release(buf)

    def _model_release(self, buf: int) -> None:
        e = self.entries[buf]
        e.refcount -= 1
        if e.refcount:
            return
        del self.entries[buf]
        self.dead.append(buf)
        if e.root != buf:  # a view gives back its reference to the root
            self.entries[e.root].views -= 1
            self._model_release(e.root)
        else:
            del self.bytes[buf], self.known[buf]

    @rule(
        data=st.data(),
        offset=st.sampled_from([0, 16, 32, 48, 64, 256, 4096, 8, 17, -16, 16.0]),
        nbytes=st.sampled_from([1, 4, 16, 64, 200, 1024, 0, -4, 4.0]),
    )
    def view(self, data, offset, nbytes) -> None:
        COUNTS["steps"] += 1
        buf, live = self.any_id(data)
        valid = (
            live
            and isinstance(offset, int)
            and offset >= 0
            and offset % self.align == 0
            and isinstance(nbytes, int)
            and nbytes > 0
            and offset + nbytes <= self.entries[buf].size
        )
        if not valid:
            return self.expect_error(ErrorStatus.InvalidArgument, self.pool.view, buf, offset, nbytes)
        vid = self.pool.view(buf, offset, nbytes)
        parent = self.entries[buf]
        self.entries[vid] = Entry(nbytes, parent.root, parent.offset + offset)
        self.entries[parent.root].refcount += 1
        self.entries[parent.root].views += 1

    @rule(data=st.data(), seed=st.integers(0, 2**32 - 1))
    def host_to_pool(self, data, seed) -> None:
        COUNTS["steps"] += 1
        buf, live = self.any_id(data)
        offset, length = self.span(data, buf, live)
        payload = np.random.default_rng(seed).integers(0, 256, length, dtype=np.uint8)
        valid = live and isinstance(offset, int) and offset >= 0 and offset + length <= self.entries[buf].size
        if not valid:
            return self.expect_error(ErrorStatus.InvalidArgument, self.pool.host_to_pool, payload, buf, offset)
        self.pool.host_to_pool(payload, buf, offset)
        contents, known, base = self.region(buf)
        contents[base + offset : base + offset + length] = payload
        known[base + offset : base + offset + length] = True

    @rule(data=st.data())
    def host_to_pool_not_a_buffer(self, data) -> None:
        COUNTS["steps"] += 1
        buf, _ = self.any_id(data)
        src = data.draw(st.sampled_from([5, "text", object(), np.zeros((4, 4), np.uint8)[:, ::2]]))
        self.expect_error(ErrorStatus.InvalidArgument, self.pool.host_to_pool, src, buf, 0)

    @rule(data=st.data())
    def pool_to_host(self, data) -> None:
        COUNTS["steps"] += 1
        buf, live = self.any_id(data)
        offset, length = self.span(data, buf, live)
        out = np.full(length, 0xAB, np.uint8)
        valid = live and isinstance(offset, int) and offset >= 0 and offset + length <= self.entries[buf].size
        if not valid:
            return self.expect_error(ErrorStatus.InvalidArgument, self.pool.pool_to_host, buf, out, offset)
        self.pool.pool_to_host(buf, out, offset)
        contents, known, base = self.region(buf)
        want, mask = contents[base + offset : base + offset + length], known[base + offset : base + offset + length]
        np.testing.assert_array_equal(out[mask], want[mask], err_msg=f"buffer {buf} [{offset}:+{length}]")
        COUNTS["checked_bytes"] += int(mask.sum())

    @rule(data=st.data())
    def pool_to_host_read_only(self, data) -> None:
        COUNTS["steps"] += 1
        buf, _ = self.any_id(data)
        self.expect_error(ErrorStatus.InvalidArgument, self.pool.pool_to_host, buf, bytes(4), 0)

    @rule(data=st.data(), base=st.integers(0, 2**32 - 1), step=st.integers(0, 2**32 - 1))
    def launch(self, data, base, step) -> None:
        COUNTS["steps"] += 1
        buf, live = self.any_id(data)
        n = self.entries[buf].size // 4 if live else 1
        if not live:
            return self.expect_error(
                ErrorStatus.InvalidArgument, self.device.launch, self.fill, [buf], [n, base, step], groups(n)
            )
        self.device.launch(self.fill, [buf], [n, base, step], groups(n))
        words = (np.uint64(base) + np.arange(n, dtype=np.uint64) * np.uint64(step)) & np.uint64(0xFFFFFFFF)
        contents, known, offset = self.region(buf)
        contents[offset : offset + 4 * n] = words.astype("<u4").view(np.uint8)
        known[offset : offset + 4 * n] = True

    @rule(data=st.data(), how=st.integers(0, 5))
    def launch_invalid(self, data, how) -> None:
        COUNTS["steps"] += 1
        buf, live = self.any_id(data, live_weight=8)
        ok_buf = buf if live else None
        n = 4
        bad = [
            (self.fill + 10_000, [ok_buf], [n, 0, 0], (1, 1, 1)),  # no such program
            (self.fill, [ok_buf, ok_buf], [n, 0, 0], (1, 1, 1)),  # too many buffers
            (self.fill, [ok_buf], [n, 0], (1, 1, 1)),  # too few scalars
            (self.fill, [ok_buf], [n, -1, 0], (1, 1, 1)),  # a scalar out of its type's range
            (self.fill, [ok_buf], [n, 0, 0], (0, 1, 1)),  # an empty grid
            (self.fill, [ok_buf], [n, 0, 0], (1, 1, 10**9)),  # beyond maxComputeWorkGroupCount
        ][how]
        self.expect_error(ErrorStatus.InvalidArgument, self.device.launch, *bad)

    @rule()
    def sync(self) -> None:
        COUNTS["steps"] += 1
        self.device.sync()

    @invariant()
    def counts_agree(self) -> None:
        assert self.pool.stats()["live_buffers"] - getattr(self, "start", 0) == len(self.entries)

    def teardown(self) -> None:
        # views first (each gives its reference back to its root), then whatever each id still holds
        for buf in sorted(self.entries, key=lambda b: self.entries[b].root == b):
            while buf in self.entries and self.entries[buf].refcount > self.entries[buf].views:
                self.pool.release(buf)
                self._model_release(buf)
        assert not self.entries
        self.device.sync()


def test_pool_state_machine_agrees_with_the_model(device):
    PoolMachine.device = device
    PoolMachine.fill = device.compile(vkbackend.compile_glsl(FILL))
    before = device.memory_pool.stats()["live_buffers"]
    for key in COUNTS:
        COUNTS[key] = 0
    try:
        run_state_machine_as_test(
            PoolMachine,
            settings=settings(
                max_examples=EXAMPLES,
                stateful_step_count=STEPS,
                deadline=None,
                database=None,
                suppress_health_check=list(HealthCheck),
            ),
        )
    finally:
        device.release_program(PoolMachine.fill)
    print(
        f"\nfuzz: {COUNTS['examples']} examples, {COUNTS['steps']} steps, {COUNTS['invalid']} invalid calls refused "
        f"with the expected status, {COUNTS['checked_bytes']} bytes read back and checked"
    )
    assert device.memory_pool.stats()["live_buffers"] == before


# ----- SPIR-V ----------------------------------------------------------------------------------------------------


def test_random_and_truncated_spirv_is_kernel_compilation():
    r = run_isolated("fuzz_spirv", str(1000 if FULL else 300), timeout=300)
    print(f"\nspirv fuzz: {sum(r['statuses'].values())} modules compiled: {r['statuses']}")
    assert r["full_ok"] == ["ok", "ok", "ok"]  # the untruncated modules compile
    assert set(r["statuses"]) == {"KernelCompilation"}, r["statuses"]
    assert r["live_pipelines"] == 3  # only the three whole modules made pipelines: nothing else reached the driver
    assert r["validation"] == ""
