"""Launches of four kernels on a device without push descriptors (run with ``VKBACKEND_PUSH_DESCRIPTORS=0``), where
descriptor sets come from pools: over 3,000 sets in one window, then again on recycled pools, and a launch the worker
refuses between two good ones; every result checked against numpy (tests/test_launch.py). Arguments: a folder with
affine.spv, add.spv, counter.spv and fill.spv, and a seed. Prints POOL PATH OK once every check has passed.
"""

import sys

import numpy as np
from _buffers import download, upload

import vkbackend
from vkbackend import discovery

spv = sys.argv[1]
rng = np.random.default_rng(int(sys.argv[2]))
dev = vkbackend.devices()[0]
assert dev.info.push_descriptors is False, dev.info.push_descriptors
pool = dev.memory_pool
prog = {name: dev.compile(open(f"{spv}/{name}.spv", "rb").read()) for name in ("affine", "add", "counter", "fill")}
n, slots, pairs = 500, 37, 4
groups = (-(-n // 64), 1, 1)

xs = [rng.standard_normal(n, dtype=np.float32) for _ in range(pairs)]
bx = [upload(pool, x) for x in xs]
by = [pool.allocate(n * 4) for _ in range(pairs)]
bs = [pool.allocate(n * 4) for _ in range(pairs)]
counts = upload(pool, np.zeros(slots, np.uint32))
total = np.zeros(slots, np.int64)
for rounds in (1500, 1200):  # over 3,000 sets in one window first, then again on recycled pools
    idx = rng.integers(0, slots, rounds)
    coeffs = rng.uniform(-2, 2, (rounds, 2)).astype(np.float32)
    for r in range(rounds):
        p = r % pairs
        dev.launch(prog["counter"], [counts], [int(idx[r])])
        dev.launch(prog["affine"], [bx[p], by[p]], [coeffs[r, 0], coeffs[r, 1], n], groups)
        if r % 3 == 0:
            dev.launch(prog["add"], [bx[p], by[p], bs[p]], [n], groups)
        if r % 7 == 0:
            dev.launch(prog["fill"], [bs[(p + 1) % pairs]], [float(r), n], groups)
    dev.sync()
    total += np.bincount(idx, minlength=slots)
    assert (download(pool, counts, np.uint32, slots) == total).all()
    for p in range(pairs):
        last = max(r for r in range(rounds) if r % pairs == p)
        a, c = coeffs[last]
        y = download(pool, by[p], np.float32, n)
        assert np.allclose(y, a * xs[p] + c, rtol=1e-5, atol=1e-5), p
    # each bs[p] was last written by an add (s = x + y at that time) or a fill: recompute the last writer
    for p in range(pairs):
        last_add = max(r for r in range(rounds) if r % pairs == p and r % 3 == 0)
        last_fill = max((r for r in range(rounds) if r % 7 == 0 and (r % pairs + 1) % pairs == p), default=-1)
        got = download(pool, bs[p], np.float32, n)
        if last_fill > last_add:
            assert (got == np.float32(last_fill)).all(), p
        else:
            a, c = coeffs[last_add]
            assert np.allclose(got, xs[p] + (a * xs[p] + c), rtol=1e-5, atol=1e-5), p
# A launch refused on the worker (GridArg out of range) between two good ones: the descriptor sets of the
# launches after it must still line up.
grid_bad = dev.info.max_global_work_dims[0] + 1
dev.launch(prog["affine"], [bx[0], by[0]], [3.0, 0.0, n], groups)
dev.launch(prog["affine"], [bx[1], by[1]], [1.0, 0.0, grid_bad], (vkbackend.GridArg(2), 1, 1))
dev.launch(prog["add"], [bx[2], by[0], bs[2]], [n], groups)
try:
    dev.sync()
except vkbackend.BackendError as error:
    assert error.status is vkbackend.ErrorStatus.KernelLaunch, error
else:
    raise AssertionError("the out-of-range GridArg was not reported")
assert np.allclose(download(pool, bs[2], np.float32, n), xs[2] + 3 * xs[0], rtol=1e-5, atol=1e-5)
stats = dev.stats()
pools_alive = stats["live_objects"]["descriptor_pools"]
assert 0 < pools_alive <= 8, pools_alive
dev.close()
messages = discovery.validation_messages()
assert not messages, messages
print("POOL PATH OK", stats["dispatches"], pools_alive)
