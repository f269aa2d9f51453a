"""The express lane forced on (a GPU's polling and grace) while Ctrl-C (a SIGALRM handler raising KeyboardInterrupt)
lands at random moments inside launches and sync points, until 80 have landed; then how many increments ran against
how many launches returned and how many were interrupted, and what a close right after a launch by the lane leaves
behind (tests/test_sync_path.py)."""

import random
import signal

import numpy as np
from _reliability import AFFINE, express_lane_armed, groups, lane_served, set_express_lane
from isolated import report

import vkbackend
from vkbackend import testing


def interrupt(signum, frame):
    """The SIGALRM handler: an interrupt where the timer found the main thread."""
    raise KeyboardInterrupt


def wait_armed() -> None:
    """Until a launch hands over (the hang guard ends a wait that never does)."""
    while not express_lane_armed(dev):
        pass


result = {}
signal.signal(signal.SIGALRM, interrupt)
dev = vkbackend.devices()[0]
set_express_lane(dev, 100_000, 30_000_000_000, True)  # a GPU's grace
pool = dev.memory_pool
prog = dev.compile(vkbackend.compile_glsl(AFFINE))
buf = pool.allocate(256 * 4)
pool.host_to_pool(np.zeros(256, np.uint32), buf)
dev.sync()
rng = random.Random(7)
returned = interrupted = landed = 0
for i in range(40000):  # a GPU's round trips are short: few timers land inside one, so there may be many
    if landed >= 80:
        break
    launching = True
    try:
        signal.setitimer(signal.ITIMER_REAL, rng.uniform(0.00002, 0.002))
        dev.launch(prog, [buf], [256, 1, 1], groups(256))
        launching = False
        returned += 1
        dev.sync()
        signal.setitimer(signal.ITIMER_REAL, 0)
    except KeyboardInterrupt:
        landed += 1
        interrupted += launching
signal.setitimer(signal.ITIMER_REAL, 0)
dev.sync()
out = np.empty(256, np.uint32)
pool.pool_to_host(buf, out)
result.update(
    landed=landed,
    returned=returned,
    interrupted=interrupted,
    values=sorted(set(out.tolist())),
)
# interrupts at the two edges of the hand-over: before it (the record queued, the worker not woken) and after it
worker, calls = dev._worker, [0]
hand_over = worker.wake_up_to_launch


def interrupted_hand_over() -> None:
    calls[0] += 1
    if calls[0] % 3 == 1:
        raise KeyboardInterrupt
    hand_over()
    if calls[0] % 3 == 2:
        raise KeyboardInterrupt


worker.wake_up_to_launch = interrupted_hand_over
pool.host_to_pool(np.zeros(256, np.uint32), buf)
dev.sync()
before = lane_served(dev)
raised = 0
for _ in range(60):
    wait_armed()
    try:
        dev.launch(prog, [buf], [256, 1, 1], groups(256))
    except KeyboardInterrupt:
        raised += 1
    dev.sync()
del worker.wake_up_to_launch
lane = lane_served(dev) - before  # before the read-back, whose copy may go by the lane too
pool.pool_to_host(buf, out)
result.update(
    edges_calls=calls[0],
    edges_raised=raised,
    edges_values=sorted(set(out.tolist())),
    edges_lane=lane,
)
# a close right after a launch the lane took, before the worker is back in Python
wait_armed()
dev.launch(prog, [buf], [256, 1, 1], groups(256))
pool.release(buf)
dev.close()
result["live_end"] = testing.live_objects()
report(result)
