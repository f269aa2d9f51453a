"""Shared by the reliability tests (faults, stress, soak, fuzz, isolation): uint kernels with exact numpy models, a
runner for scenarios that must happen in a fresh process (a lost device, a failed device open), and the size knob.

``VKBACKEND_FULL=1`` runs the stress and soak tests at full size (8 threads x 10,000 launches; a million
launches and 100,000 allocate/release cycles); the default sizes fit CI's time under the validation layer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

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
    The measurement shares the machine with whatever else runs, so callers leave a wide margin either way. Scenarios
    that run in a child process with a short sync deadline measure here, on the test's device, and hand the grids over
    in the environment (``SPIN_GRIDS``, JSON).
    """
    import time

    prog = dev.compile(compile_glsl(SPIN))
    buf = dev.memory_pool.allocate(1024)
    try:
        groups = 1
        while True:
            started = time.perf_counter()
            dev.launch(prog, [buf], [SPIN_INNER], _spread(dev, groups))
            dev.sync()
            took = time.perf_counter() - started
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
    return (max(1, (n + local - 1) // local), 1, 1)


PRELUDE = """
import faulthandler, json, os, sys, time
faulthandler.dump_traceback_later({limit}, exit=True)
sys.path.insert(0, {repo!r})
sys.path.insert(0, {tests!r})
import numpy as np
import vkbackend
from vkbackend import discovery, testing
from vkbackend.errors import BackendError, ErrorStatus
from _reliability import AFFINE, MAP, MIX, FILL, SCRIBBLE, SPIN, SPIN_INNER, groups, spin_grids
result = {{}}

def outcome(fn, *args):
    '''(status or "ok", seconds) of one call.'''
    started = time.perf_counter()
    try:
        fn(*args)
        status = "ok"
    except BackendError as error:
        status = error.status.value
    return status, time.perf_counter() - started

def live():
    from vkbackend.device import LIVE_OBJECT_CALLS
    calls = vkbackend._ffi.success_counts()
    return {{k: calls[c] - calls[d] for k, (c, d) in LIVE_OBJECT_CALLS.items()}}
"""

EPILOGUE = """
result["validation"] = discovery.validation_messages() if discovery.Instance._current is not None else ""
print("RESULT " + json.dumps(result))
"""


def run_isolated(body: str, timeout: float = 60, env: dict | None = None) -> dict:
    """Run ``body`` (Python, with the names PRELUDE defines) in a fresh interpreter; return its ``result`` dict.

    The child inherits this process's environment (so the validation layer and its settings), dumps its threads and
    exits if it outlives ``timeout`` (a hang fails the test instead of blocking it), and reports the validation
    layer's messages under ``"validation"``.
    """
    script = PRELUDE.format(limit=max(1, int(timeout) - 5), repo=REPO, tests=os.path.join(REPO, "tests"))
    script += textwrap.dedent(body) + EPILOGUE
    child_env = dict(os.environ)
    child_env.update(env or {})
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=timeout, env=child_env, cwd=REPO
    )
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT ") :])
    raise AssertionError(
        f"the child process failed (exit {proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    )


def run_script(script: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run a script in a fresh interpreter with this process's environment (validation settings included)."""
    full_env = {**os.environ, "PYTHONPATH": REPO + os.pathsep + os.environ.get("PYTHONPATH", ""), **(env or {})}
    return subprocess.run(
        [sys.executable, "-c", script, *args],
        env=full_env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        cwd=REPO,
    )
