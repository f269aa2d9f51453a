"""The timing loops every case uses, ours and the peers' alike: the best of a few samples, or (the round-trip
cases) every one of many."""

from __future__ import annotations

import time
from collections.abc import Callable


def wall(fn: Callable[[], object]) -> Callable[[], float]:
    """A sample that runs ``fn`` once and returns its wall-clock time in seconds."""

    def sample() -> float:
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start

    return sample


def best_of(
    sample: Callable[[], float], reps: int, warmup: int = 1, setup: Callable[[], object] | None = None
) -> float:
    """The smallest of ``reps`` samples, in seconds, after ``warmup`` samples that are thrown away.

    ``sample`` returns the seconds one run took: wrap a plain procedure with ``wall``, or return a GPU time.
    ``setup`` runs before every sample, untimed (e.g. resetting a buffer the sample's correctness check reads).
    The minimum is the figure least disturbed by the rest of the machine; every sample does identical work.
    """
    best = float("inf")
    for i in range(warmup + reps):
        if setup is not None:
            setup()
        seconds = sample()
        if i >= warmup:
            best = min(best, seconds)
    return best


def round_trips(trip: Callable[[], object], count: int, warmup: int) -> list[float]:
    """The microseconds of each of ``count`` calls of ``trip``, timed one by one (``perf_counter_ns`` around each),
    after ``warmup`` untimed calls: the samples of a round-trip case, whose spread is the figure."""
    clock = time.perf_counter_ns
    for _ in range(warmup):
        trip()
    samples = []
    for _ in range(count):
        start = clock()
        trip()
        samples.append((clock() - start) / 1e3)
    return samples
