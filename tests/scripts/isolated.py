"""The child's side of ``run_isolated`` and ``run_child`` (tests/_reliability.py), imported by each scenario script of
this folder: a hang guard, armed on import; ``outcome`` to record what a call did; ``report`` to end with.

Most scenarios start from ``affine_scene()``. A scenario fills a dict with what it found and ends with
``report(result)``, which adds the validation layer's
messages under ``"validation"`` and prints the line ``RESULT <json>`` that ``run_isolated`` reads; the test that runs
it makes the assertions. Scenarios read their parameters from their arguments and the environment the test sets. To
run one by hand, from the repository root: ``PYTHONPATH=.:tests python3 tests/scripts/NAME.py [ARGS]``.
"""

from __future__ import annotations

import faulthandler
import json
import os
import time
from collections.abc import Callable

import numpy as np
from _reliability import AFFINE

import vkbackend
from vkbackend import testing
from vkbackend.errors import BackendError

KERNELS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "kernels")  # tests/kernels
HANG_S = int(os.environ.get("ISOLATED_HANG_S", "55"))  # run_child sets it 5 s short of its timeout


def arm_hang_guard() -> None:
    """Dump every thread's stack and end the process if it still runs ``HANG_S`` seconds from now: a hang fails its
    test with the stacks instead of running into the test's timeout. Armed on import; a scenario that forks disarms
    it around each fork (``faulthandler.cancel_dump_traceback_later``) and arms it again with this."""
    faulthandler.dump_traceback_later(HANG_S, exit=True)


arm_hang_guard()


def outcome(fn: Callable, *args) -> tuple[str, float]:
    """(the ``ErrorStatus`` value of the ``BackendError`` ``fn(*args)`` raised, or "ok"; the seconds the call took)."""
    started = time.perf_counter()
    try:
        fn(*args)
        status = "ok"
    except BackendError as error:
        status = error.status.value
    return status, time.perf_counter() - started


def affine_scene():
    """``(dev, pool, prog, buf, x)``: the first device, its memory pool, the affine kernel (``_reliability.AFFINE``)
    compiled on it, a new 1 KiB buffer, and ``x``, 0..255 as uint32 (the buffer's length), not yet uploaded."""
    dev = vkbackend.devices()[0]
    pool = dev.memory_pool
    prog = dev.compile(vkbackend.compile_glsl(AFFINE))
    return dev, pool, prog, pool.allocate(1024), np.arange(256, dtype=np.uint32)


def round_trip(dev) -> bool:
    """Whether 0..255 as uint32, uploaded into a new buffer of ``dev`` and read back, comes back unchanged (the
    buffer released again): the device works."""
    pool = dev.memory_pool
    buf = pool.allocate(1024)
    try:
        x = np.arange(256, dtype=np.uint32)
        pool.host_to_pool(x, buf)
        out = np.empty(256, np.uint32)
        pool.pool_to_host(buf, out)
        return bool((out == x).all())
    finally:
        pool.release(buf)


def report(result: dict) -> None:
    """Print ``result``, with the validation layer's messages added under ``"validation"``, as the line that
    ``run_isolated`` reads."""
    result["validation"] = testing.validation_messages()
    print("RESULT " + json.dumps(result), flush=True)
