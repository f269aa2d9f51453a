"""Stress: 8 threads launch into one device at once, with dependencies through private buffers, views of one shared
buffer and a shared read-only input, with uploads, buffer replacement and random read-backs; every read-back and the
final contents of every buffer are checked against a numpy model. No deadlock (every thread finishes within its
deadline), no lost or doubled launch (the model would disagree), and nothing left pending.

CI runs 8 x 2,500 launches; ``VKBACKEND_FULL=1`` runs 8 x 10,000.
"""

from __future__ import annotations

import faulthandler
import sys
import threading
import time

import numpy as np
import pytest
from _reliability import AFFINE, FULL, MAP, MIX, groups

import vkbackend

THREADS = 8
LAUNCHES = 10_000 if FULL else 2_500
N = 256  # uints per buffer
GRID = groups(N)


@pytest.fixture(scope="module")
def progs(device):
    ids = {
        name: device.compile(vkbackend.compile_glsl(src))
        for name, src in (("affine", AFFINE), ("map", MAP), ("mix", MIX))
    }
    yield ids
    for prog in ids.values():
        device.release_program(prog)


class Worker:
    """One thread's buffers, its model of them, and its random walk."""

    def __init__(self, index: int, device, progs, shared_in, shared_out, shared_model) -> None:
        self.index, self.device, self.pool, self.progs = index, device, device.memory_pool, progs
        self.rng = np.random.default_rng(1000 + index)
        self.shared_in, self.shared_model = shared_in, shared_model
        self.view = self.pool.view(shared_out, index * N * 4, N * 4)
        self.private = [self.pool.allocate(N * 4) for _ in range(3)]
        self.model = {}
        for buf in self.private:
            self._upload(buf)
        self.model[self.view] = np.zeros(N, np.uint32)
        self.pool.host_to_pool(self.model[self.view], self.view)
        self.launches = self.reads = self.uploads = self.replaced = 0

    def _upload(self, buf: int) -> None:
        data = self.rng.integers(0, 2**32, N, dtype=np.uint32)
        self.pool.host_to_pool(data, buf)
        self.model[buf] = data

    def _read_and_check(self, buf: int, expect: np.ndarray, what: str) -> None:
        out = np.empty(N, np.uint32)
        self.pool.pool_to_host(buf, out)
        if not np.array_equal(out, expect):
            bad = int(np.flatnonzero(out != expect)[0])
            raise AssertionError(
                f"thread {self.index}, {what} after {self.launches} launches: element {bad} is "
                f"{out[bad]}, the model says {expect[bad]}"
            )
        self.reads += 1

    def run(self, launches: int) -> None:
        rng, device, progs = self.rng, self.device, self.progs
        writable = lambda: [*self.private, self.view]  # noqa: E731
        while self.launches < launches:
            op = rng.integers(0, 100)
            targets = writable()
            if op < 35:  # in place: a chain on one buffer
                buf = targets[rng.integers(0, len(targets))]
                mul, add = int(rng.integers(0, 2**32)) | 1, int(rng.integers(0, 2**32))
                device.launch(progs["affine"], [buf], [N, mul, add], GRID)
                self.model[buf] = self.model[buf] * np.uint32(mul) + np.uint32(add)
            elif op < 65:  # buffer to buffer, possibly from the shared input
                sources = [*targets, self.shared_in]
                src = sources[rng.integers(0, len(sources))]
                dst = targets[rng.integers(0, len(targets))]
                if dst == src:
                    continue
                mul, add = int(rng.integers(0, 2**32)), int(rng.integers(0, 2**32))
                device.launch(progs["map"], [src, dst], [N, mul, add], GRID)
                self.model[dst] = self._value(src) * np.uint32(mul) + np.uint32(add)
            elif op < 93:  # two inputs, one output
                sources = [*targets, self.shared_in]
                x, y = (sources[i] for i in rng.integers(0, len(sources), 2))
                dst = targets[rng.integers(0, len(targets))]
                if dst in (x, y):
                    continue
                k = int(rng.integers(0, 2**32))
                device.launch(progs["mix"], [x, y, dst], [N, k], GRID)
                self.model[dst] = self._value(x) + self._value(y) * np.uint32(k)
            elif op < 97:  # a read-back in the middle of the stream (a sync point for this thread's view of it)
                choices = [*targets, self.shared_in]
                buf = choices[rng.integers(0, len(choices))]
                self._read_and_check(buf, self._value(buf), "a read-back")
                continue
            elif op < 99:  # new contents from the host, ordered after the launches before it
                self._upload(self.private[rng.integers(0, 3)])
                self.uploads += 1
                continue
            else:  # replace a private buffer: the old one is released while launches may still use it
                slot = int(rng.integers(0, 3))
                old, new = self.private[slot], self.pool.allocate(N * 4)
                device.launch(progs["map"], [old, new], [N, 1, 0], GRID)  # copy by kernel
                self.model[new] = self.model.pop(old)
                self.pool.release(old)
                self.private[slot] = new
                self.replaced += 1
            self.launches += 1

    def _value(self, buf: int) -> np.ndarray:
        return self.shared_model if buf == self.shared_in else self.model[buf]

    def finish(self) -> None:
        for buf in [*self.private, self.view]:
            self._read_and_check(buf, self.model[buf], f"the end (buffer {buf})")
        for buf in [*self.private, self.view]:
            self.pool.release(buf)


def test_eight_threads_of_dependent_launches_match_the_model(device, progs):
    pool = device.memory_pool
    rng = np.random.default_rng(1)
    shared_model = rng.integers(0, 2**32, N, dtype=np.uint32)
    shared_in = pool.allocate(N * 4)
    shared_out = pool.allocate(THREADS * N * 4)
    pool.host_to_pool(shared_model, shared_in)
    workers = [Worker(i, device, progs, shared_in, shared_out, shared_model) for i in range(THREADS)]
    before = device.stats()
    errors: list[BaseException] = []
    start = threading.Barrier(THREADS)

    def body(worker: Worker) -> None:
        try:
            start.wait()
            worker.run(LAUNCHES)
            worker.finish()
        except BaseException as error:  # reported below, with the thread's number
            errors.append(error)

    threads = [threading.Thread(target=body, args=(w,), name=f"stress-{w.index}") for w in workers]
    started = time.perf_counter()
    for t in threads:
        t.start()
    deadline = time.monotonic() + (1200 if FULL else 300)
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    if any(t.is_alive() for t in threads):
        faulthandler.dump_traceback(file=sys.stderr)
        pytest.fail("deadlock: stress threads still running at their deadline (stacks on stderr)")
    elapsed = time.perf_counter() - started
    if errors:
        raise errors[0]
    # the shared input was only read: it must be unchanged
    out = np.empty(N, np.uint32)
    pool.pool_to_host(shared_in, out)
    np.testing.assert_array_equal(out, shared_model)
    pool.release(shared_in)
    pool.release(shared_out)
    device.sync()
    after = device.stats()
    launches = sum(w.launches for w in workers)
    reads = sum(w.reads for w in workers)
    print(
        f"\nstress: {THREADS} threads, {launches} launches checked by {reads} read-backs "
        f"({sum(w.uploads for w in workers)} uploads, {sum(w.replaced for w in workers)} buffers replaced) "
        f"in {elapsed:.1f} s; {after['batches'] - before['batches']} batches, "
        f"{after['barriers'] - before['barriers']} barriers"
    )
    assert after["dispatches"] - before["dispatches"] == launches  # every launch ran once: none lost, none doubled
