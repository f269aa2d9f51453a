"""Children forked from a process with an open device: by os.fork (one that uses the parent's device, one that only
exits) and by multiprocessing's fork start method (one that uses it, one that does nothing); how each ended and what
each use got; then the parent's device (tests/test_hostile.py)."""

import atexit
import faulthandler
import json
import multiprocessing
import os
import select
import sys
import threading
import time

import numpy as np
from _reliability import FILL, groups
from isolated import affine_scene, arm_hang_guard, report

import vkbackend
from vkbackend import testing
from vkbackend.errors import BackendError

result = {}
dev, pool, prog, buf, x = affine_scene()
pool.host_to_pool(x, buf)
dev.launch(prog, [buf], [256, 2, 1], groups(256))  # still queued, perhaps, when the process forks


def attempts():
    """What a forked child gets from each use of the parent's device."""
    out = {}
    for name, fn in [
        ("allocate", lambda: pool.allocate(64)),
        ("upload", lambda: pool.host_to_pool(x, buf)),
        ("read", lambda: pool.pool_to_host(buf, np.empty(256, np.uint32))),
        ("sync", dev.sync),
        ("launch", lambda: dev.launch(prog, [buf], [256, 2, 1], groups(256))),
        ("compile", lambda: dev.compile(vkbackend.compile_glsl(FILL))),
        ("devices", vkbackend.devices),
    ]:
        try:
            fn()
            out[name] = "ok"
        except BackendError as error:
            out[name] = error.status.value if "forked" in error.context else error.context
    pool.release(buf)  # the parent's buffer: a no-op here
    dev.close()  # likewise: the child's exit handler then has nothing to do
    return out


def forking(start):
    """``start()`` (a fork) with the hang guard disarmed across it."""
    # faulthandler's watchdog (the hang guard) is a thread the child does not have, and the child's exit would wait
    # for it for ever (a CPython matter, not vkbackend's).
    faulthandler.cancel_dump_traceback_later()
    try:
        return start()
    finally:
        arm_hang_guard()


def wait_exit(pid, seconds):
    """The exit status of child ``pid``, or "hung" (and the child killed) if it has not ended within ``seconds``."""
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
result["live_end"] = testing.live_objects()
report(result)
