"""Shared by the reliability tests (faults, stress, soak, fuzz, isolation): uint kernels with exact numpy models, a
runner for the scenarios that must happen in a fresh process (a lost device, a failed device open), which are the
scripts of tests/scripts, and the size knob.

``VKBACKEND_FULL=1`` runs the stress and soak tests at full size (8 threads x 10,000 launches; a million
launches and 100,000 allocate/release cycles); the default sizes fit CI's time under the validation layer.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from vkbackend import compile_glsl

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FULL = os.environ.get("VKBACKEND_FULL", "") not in ("", "0")

# a[i] = a[i] * mul + add (in place): a dependent chain on one buffer.
AFFINE = """#version 450
layout(local_size_x = 64) in;
layout(push_constant) uniform P { uint n; uint mul; uint add; };
layout(std430, set = 0, binding = 0) buffer A { uint a[]; };
void main() { uint i = gl_GlobalInvocationID.x; if (i < n) a[i] = a[i] * mul + add; }
"""

# dst[i] = src[i] * mul + add: reads one buffer, writes another.
MAP = """#version 450
layout(local_size_x = 64) in;
layout(push_constant) uniform P { uint n; uint mul; uint add; };
layout(std430, set = 0, binding = 0) readonly buffer S { uint src[]; };
layout(std430, set = 0, binding = 1) writeonly buffer D { uint dst[]; };
void main() { uint i = gl_GlobalInvocationID.x; if (i < n) dst[i] = src[i] * mul + add; }
"""

# dst[i] = x[i] + y[i] * k.
MIX = """#version 450
layout(local_size_x = 64) in;
layout(push_constant) uniform P { uint n; uint k; };
layout(std430, set = 0, binding = 0) readonly buffer X { uint x[]; };
layout(std430, set = 0, binding = 1) readonly buffer Y { uint y[]; };
layout(std430, set = 0, binding = 2) writeonly buffer D { uint dst[]; };
void main() { uint i = gl_GlobalInvocationID.x; if (i < n) dst[i] = x[i] + y[i] * k; }
"""

# a[i] = base + i * step for i < n: a known pattern.
FILL = """#version 450
layout(local_size_x = 64) in;
layout(push_constant) uniform P { uint n; uint base; uint step; };
layout(std430, set = 0, binding = 0) writeonly buffer A { uint a[]; };
void main() { uint i = gl_GlobalInvocationID.x; if (i < n) a[i] = base + i * step; }
"""

# a[first + i] = value for i < count, with no bounds check of its own: an out-of-bounds writer.
SCRIBBLE = """#version 450
layout(local_size_x = 64) in;
layout(push_constant) uniform P { uint first; uint count; uint value; };
layout(std430, set = 0, binding = 0) writeonly buffer A { uint a[]; };
void main() { uint i = gl_GlobalInvocationID.x; if (i < count) a[first + i] = value; }
"""

# Busy work: each invocation runs `inner` steps of an LCG. How long a launch runs depends on the device (0.4 ms per
# work group on lavapipe, whose loops stop after 65,535 iterations per invocation; a GPU runs thousands of work groups
# at once): spin_grid measures it and picks the grid for a given time.
SPIN = """#version 450
layout(local_size_x = 1) in;
layout(push_constant) uniform P { uint inner; };
layout(std430, set = 0, binding = 0) buffer A { uint a[]; };
void main() {
    uint g = gl_GlobalInvocationID.x, acc = g;
    for (uint k = 0u; k < inner; k++) acc = acc * 1664525u + 1013904223u + k;
    a[g & 255u] += acc;
}
"""
SPIN_INNER = 60000  # the push constant spin_grids measures with: within lavapipe's loop limit


def spin_grids(dev, *seconds: float) -> list[tuple[int, int, int]]:
    """For each of ``seconds``, the grid of one launch of SPIN (with ``[SPIN_INNER]``) that keeps ``dev`` busy for
    about that long.

    Measured on the device rather than assumed: the grid doubles from one work group until a launch takes 0.1 s, and
    the time is then scaled linearly (past what the device runs at once, a launch's time grows with its work groups).
    A launch that reaches 0.1 s is timed twice and the shorter time counts: one stall of a busy machine (a launch of
    a single work group that took 0.1 s) would otherwise pass for the device's pace and shrink every grid a
    hundredfold. The measurement shares the machine with whatever else runs, so callers leave a wide margin either
    way. Scenarios that run in a child process with a short sync deadline measure here, on the test's device, and hand
    the grids over in the environment (``SPIN_GRIDS``, JSON).
    """
    prog = dev.compile(compile_glsl(SPIN))
    buf = dev.memory_pool.allocate(1024)

    def timed(groups: int) -> float:
        """Seconds from the launch of ``groups`` work groups of SPIN to the end of the sync after it."""
        started = time.perf_counter()
        dev.launch(prog, [buf], [SPIN_INNER], _spread(dev, groups))
        dev.sync()
        return time.perf_counter() - started

    try:
        groups = 1
        while True:
            took = timed(groups)
            if took >= 0.1:
                took = min(took, timed(groups))
            if took >= 0.1:
                return [_spread(dev, max(1, round(groups * s / took))) for s in seconds]
            groups *= 2 if took >= 0.01 else 8
    finally:
        dev.memory_pool.release(buf)
        dev.release_program(prog)


def _spread(dev, groups: int) -> tuple[int, int, int]:
    """``groups`` work groups (rounded up) as a grid within the device's per-axis limits."""
    x = min(groups, dev.info.max_global_work_dims[0], 65535)
    y = -(-groups // x)
    if y > dev.info.max_global_work_dims[1]:
        raise ValueError(f"{groups} work groups do not fit the grid limits of {dev.info.name}")
    return (x, y, 1)


M32 = 0xFFFFFFFF


def groups(n: int, local: int = 64) -> tuple[int, int, int]:
    """The grid of work groups of ``local`` invocations that covers ``n`` elements (at least one group)."""
    return (max(1, (n + local - 1) // local), 1, 1)


def in_one_window(device, launches) -> None:
    """Run ``launches`` (``(program, buffers, scalars, grid)`` each) in one window, and wait for them: a graph,
    launched once. Launches queued one by one may be split between windows as the worker picks them up, and a window's
    end orders everything after it, so the barriers counted would depend on the split."""
    graph = device.graph(launches)
    batches = device.stats()["batches"]
    try:
        graph.launch()
        device.sync()
    finally:
        graph.close()
    assert device.stats()["batches"] - batches == 1


SCRIPTS = os.path.join(REPO, "tests", "scripts")


def set_express_lane(dev, grace_ns: int, idle_spin_ns: int, on: bool) -> tuple[int, int, bool]:
    """Set the worker's kick grace, its idle poll and its express lane (a GPU's settings, forced where polling does
    not pay); returns the settings replaced, in the same order."""
    worker = dev._worker
    sub = worker._submitter
    replaced = sub.progress.grace_ns, worker.idle_spin_ns, sub.express
    sub.progress.grace_ns, worker.idle_spin_ns, sub.express = grace_ns, idle_spin_ns, on
    return replaced


def lane_served(dev) -> int:
    """Queue items (launches, graph replays, copies) the express lane has submitted so far: those of ended parks, and
    the current park's (while the test lets it run, nothing moves the one count into the other)."""
    sub = dev._worker._submitter
    return sub.express_count + sub.progress.express.served


def express_lane_armed(dev) -> bool:
    """Whether the worker is parked with its express lane armed and nothing queued but what the lane has served: a
    launch now hands over."""
    worker = dev._worker
    express = worker._submitter.progress.express
    armed = express.state & 0xFF == worker.ctx.lib.VKB_EXPRESS_ARMED
    return armed and len(worker.queue) == express.served


def express_lane_armed_within(dev, timeout_s: float) -> bool:
    """Whether the worker parks with its express lane armed (:func:`express_lane_armed`) within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not express_lane_armed(dev):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.0001)
    return True


def quiet_within(dev, timeout_s: float) -> bool:
    """Whether the device becomes quiet (``Worker.quiet``: nothing queued, recorded or running) within ``timeout_s``:
    after a sync point the worker may still be finishing its loop, and an upload then goes through staging."""
    deadline = time.monotonic() + timeout_s
    while not dev._worker.quiet():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.0001)
    return True


@contextmanager
def worker_held(dev) -> Iterator[None]:
    """Keep the device's worker inside a call (Worker.call, from a thread of its own) for the block: it takes nothing
    from its queue meanwhile, so what the block queues is taken together afterwards."""
    inside, go_on = threading.Event(), threading.Event()

    def hold() -> None:
        inside.set()
        go_on.wait(30)

    caller = threading.Thread(target=dev._worker.call, args=(hold,))
    caller.start()
    try:
        if not inside.wait(30):
            raise AssertionError("the worker did not run the call")
        yield
    finally:
        go_on.set()
        caller.join(30)


def child_environment(env: dict | None = None) -> dict:
    """This process's environment (so the validation layer and its settings) with this checkout and tests/ first on
    PYTHONPATH (vkbackend, and the helpers a script in tests/scripts imports), and ``env`` on top."""
    path = os.pathsep.join(filter(None, [REPO, os.path.join(REPO, "tests"), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, **(env or {})}


def run_child(
    script: str, *args: str, timeout: float = 60, env: dict | None = None
) -> tuple[subprocess.CompletedProcess, dict | None, float]:
    """Run tests/scripts/``script``.py with ``args`` in a fresh interpreter; hand back the finished process (exit
    status, stderr), the ``result`` dict its ``isolated.report`` printed (None if it printed none) and its wall time.

    The script's hang guard (tests/scripts/isolated.py) dumps its threads and exits 5 s before ``timeout``: a hang
    fails the test instead of blocking it.
    """
    child_env = child_environment({"ISOLATED_HANG_S": str(max(1, int(timeout) - 5)), **(env or {})})
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, os.path.join(SCRIPTS, script + ".py"), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=child_env,
        cwd=REPO,
    )
    seconds = time.monotonic() - started
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("RESULT "):
            return proc, json.loads(line[len("RESULT ") :]), seconds
    return proc, None, seconds


def run_isolated(script: str, *args: str, timeout: float = 60, env: dict | None = None) -> dict:
    """Run tests/scripts/``script``.py with ``args`` in a fresh interpreter (``run_child``); return its ``result``
    dict, in which ``"validation"`` holds the validation layer's messages there. A child that reports no result fails
    the test with its output."""
    proc, result, _ = run_child(script, *args, timeout=timeout, env=env)
    if result is None:
        raise AssertionError(
            f"the child process failed (exit {proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
        )
    return result


def run_script(script: str, *args: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run tests/scripts/``script``.py with ``args`` in a fresh interpreter with this process's environment
    (validation settings included) and ``env``; the script checks and prints what it found, the caller reads its
    output and exit status."""
    return subprocess.run(
        [sys.executable, os.path.join(SCRIPTS, script + ".py"), *args],
        env=child_environment(env),
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
        cwd=REPO,
    )


def forked_check(check: Callable[[], bool], timeout_s: float = 60) -> bool:
    """Fork; in the child run ``check`` and leave without the parent's exit handlers; in the parent, whether the child
    reported True and exited cleanly. A child silent for ``timeout_s`` (a hang: a lock inherited held) is killed and
    counts as False."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            ok = check()
        except BaseException:
            ok = False
        os.write(write, b"1" if ok else b"0")
        os._exit(0)
    os.close(write)
    ready, _, _ = select.select([read], [], [], timeout_s)
    answer = os.read(read, 1) if ready else b""
    os.close(read)
    if not ready:
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    return answer == b"1" and os.waitstatus_to_exitcode(status) == 0


def forked_checks_while_busy(
    busy: Callable[[], None], check: Callable[[], bool], threads: int = 1, forks: int = 5
) -> list[bool]:
    """Run ``busy`` again and again on ``threads`` threads while ``forks`` children, one after another, each run
    ``check`` (:func:`forked_check`): each child's answer. A fork then often lands while a thread is inside it."""
    stop = threading.Event()

    def again() -> None:
        while not stop.is_set():
            busy()

    workers = [threading.Thread(target=again) for _ in range(threads)]
    for worker in workers:
        worker.start()
    try:
        return [forked_check(check) for _ in range(forks)]
    finally:
        stop.set()
        for worker in workers:
            worker.join()
