"""Launches: scalars, hazards and barriers, grids, GridArg, reductions, long runs, releases while queued,
argument errors, timed launches, threads and the descriptor-pool path.

Every result is compared with numpy on fresh random data (the seed is printed, so a failure can be replayed). The
autouse fixture in conftest.py fails any test during which the validation layer (with synchronization validation)
printed anything, so a missing barrier fails here even where lavapipe happens to run dispatches in order.
"""

from __future__ import annotations

import os
import secrets
import threading

import numpy as np
import pytest
from _buffers import download, upload
from _reliability import groups, in_one_window, run_script

import vkbackend
from vkbackend import GridArg, ids
from vkbackend.errors import BackendError, ErrorStatus

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KERNELS = os.path.join(REPO, "tests", "kernels")


# ----- helpers ---------------------------------------------------------------------------------------------------
@pytest.fixture
def rng():
    seed = secrets.randbits(32)
    print(f"numpy seed: {seed}")  # shown by pytest when the test fails
    return np.random.default_rng(seed)


def barriers(device) -> int:
    """Hazard barriers recorded so far (the recorder does not count the host-read barrier that ends each window)."""
    return device.stats()["barriers"]


def settle(device) -> int:
    """Wait for the device and return the barrier count, so a test can count exactly the barriers of its own launches:
    the sync ends the window, and a window's end orders everything after it, so no earlier access is a hazard."""
    device.sync()
    return barriers(device)


def expect_invalid(fn, *args, **kwargs) -> BackendError:
    with pytest.raises(BackendError) as caught:
        fn(*args, **kwargs)
    assert caught.value.status is ErrorStatus.InvalidArgument, caught.value
    return caught.value


def f32(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float32)


# ----- scalars of every type --------------------------------------------------------------------------------------
I32, U32, I64, U64 = np.iinfo(np.int32), np.iinfo(np.uint32), np.iinfo(np.int64), np.iinfo(np.uint64)
F32, F64 = np.finfo(np.float32), np.finfo(np.float64)
# Rows of (i32, f64, u32, i64, f32, u64, flag): every extreme, then fresh random rows.
EXTREME_ROWS = [
    (int(I32.min), float(F64.max), 0, int(I64.min), float(F32.max), 0, False),
    (int(I32.max), -float(F64.max), int(U32.max), int(I64.max), -float(F32.max), int(U64.max), True),
    (-1, 5e-324, 1, -1, float(np.float32(2.0**-149)), 1, True),  # smallest denormals
    (0, float(F64.tiny), 2**31, 0, float(F32.tiny), 2**63, False),  # smallest normals, top bits
    (1, float("inf"), 0x80000001, 2**32, float("inf"), 2**32 + 1, True),
    (-2, float("-inf"), 0xDEADBEEF, -(2**32), float("-inf"), 0xFEDCBA9876543210, False),
    (12345, -0.0, 7, 1, -0.0, 3, True),
    (-12345, float("nan"), 8, -(2**62), float("nan"), 2**62, False),
]


def expected_scalar_rows(rows):
    rows = list(zip(*rows))
    o32 = np.stack(
        [
            np.array(rows[0], dtype=np.int32).view(np.uint32),
            np.array(rows[2], dtype=np.uint32),
            f32(rows[4]).view(np.uint32),
            np.array(rows[6], dtype=np.uint32),
        ],
        axis=1,
    )
    o64 = np.stack(
        [
            np.array(rows[1], dtype=np.float64).view(np.uint64),
            np.array(rows[3], dtype=np.int64).view(np.uint64),
            np.array(rows[5], dtype=np.uint64),
        ],
        axis=1,
    )
    return o32.ravel(), o64.ravel()


def random_scalar_rows(rng, n):
    rows = []
    for _ in range(n):
        rows.append(
            (
                int(rng.integers(I32.min, I32.max, endpoint=True)),
                float(rng.standard_normal() * 10.0 ** rng.integers(-300, 300)),
                int(rng.integers(0, U32.max, endpoint=True)),
                int(rng.integers(I64.min, I64.max, endpoint=True)),
                float(np.float32(rng.standard_normal() * 10.0 ** rng.integers(-37, 37))),
                int(rng.integers(0, U64.max, endpoint=True, dtype=np.uint64)),
                bool(rng.integers(0, 2)),
            )
        )
    return rows


def as_numpy_scalars(row):
    i32, f64, u32, i64, fl32, u64, flag = row
    return (np.int32(i32), np.float64(f64), np.uint32(u32), np.int64(i64), np.float32(fl32), np.uint64(u64), flag)


def test_scalars_of_every_type_round_trip(device, pool, kernel, rng):
    prog = kernel("scalars")
    rows = EXTREME_ROWS + random_scalar_rows(rng, 24)
    o32, o64 = pool.allocate(len(rows) * 16), pool.allocate(len(rows) * 24)
    for r, row in enumerate(rows):
        values = as_numpy_scalars(row) if r % 2 else row  # Python and numpy scalars alike
        device.launch(prog, [o32, o64], [*values, r])
    want32, want64 = expected_scalar_rows(rows)
    got32 = download(pool, o32, np.uint32, want32.size)
    got64 = download(pool, o64, np.uint64, want64.size)
    np.testing.assert_array_equal(got32, want32)
    np.testing.assert_array_equal(got64, want64)
    for buf in (o32, o64):
        pool.release(buf)


def test_bool_scalars_accept_python_and_integer_truth_values(device, pool, kernel):
    prog = kernel("scalars")
    o32, o64 = pool.allocate(4 * 16), pool.allocate(4 * 24)
    for r, flag in enumerate([True, False, 1, 0]):
        device.launch(prog, [o32, o64], [0, 0.0, 0, 0, 0.0, 0, flag, r])
    assert download(pool, o32, np.uint32, 16).reshape(4, 4)[:, 3].tolist() == [1, 0, 1, 0]
    pool.release(o32)
    pool.release(o64)


def test_bool_scalars_accept_numpy_bool(device, pool, kernel):
    prog = kernel("scalars")
    o32, o64 = pool.allocate(2 * 16), pool.allocate(2 * 24)
    try:
        for r, flag in enumerate([np.True_, np.False_]):
            device.launch(prog, [o32, o64], [0, 0.0, 0, 0, 0.0, 0, flag, r])
        assert download(pool, o32, np.uint32, 8).reshape(2, 4)[:, 3].tolist() == [1, 0]
    finally:
        pool.release(o32)
        pool.release(o64)


GOOD_ROW = [0, 0.0, 0, 0, 0.0, 0, False, 0]
OUT_OF_RANGE = [  # (member index, value)
    (0, 2**31),
    (0, -(2**31) - 1),
    (0, 1.5),
    (0, "1"),
    (2, -1),
    (2, 2**32),
    (2, np.int64(-1)),
    (3, 2**63),
    (3, -(2**63) - 1),
    (5, -1),
    (5, 2**64),
    (6, -1),
    (6, 2**32),
    (7, 2**32),
    (7, None),
    (1, "x"),
    (4, None),
    (4, 10**40),
    (1, 10**400),
]


@pytest.mark.parametrize("member,value", OUT_OF_RANGE, ids=[f"{m}={v!r}" for m, v in OUT_OF_RANGE])
def test_out_of_range_scalars_raise_invalid_argument(device, pool, kernel, member, value):
    prog = kernel("scalars")
    o32, o64 = pool.allocate(16), pool.allocate(24)
    before = device.stats()["dispatches"]
    scalars = list(GOOD_ROW)
    scalars[member] = value
    error = expect_invalid(device.launch, prog, [o32, o64], scalars)
    name = device.program_info(prog).push_constants[member].name
    assert name in error.context
    device.sync()  # nothing was queued, so nothing is pending either
    assert device.stats()["dispatches"] == before
    pool.release(o32)
    pool.release(o64)


FLOAT_OVERFLOW = [(4, 1e39), (4, -3.5e38), (4, np.float64(1e300))]


@pytest.mark.parametrize("member,value", FLOAT_OVERFLOW, ids=[f"{m}={v!r}" for m, v in FLOAT_OVERFLOW])
def test_float_overflow_raises_invalid_argument(device, pool, kernel, member, value):
    prog = kernel("scalars")
    o32, o64 = pool.allocate(16), pool.allocate(24)
    scalars = list(GOOD_ROW)
    scalars[member] = value
    try:
        expect_invalid(device.launch, prog, [o32, o64], scalars)
    finally:
        device.sync()
        pool.release(o32)
        pool.release(o64)


# ----- hazards and barriers --------------------------------------------------------------------------------------
N = 1000  # elements per buffer: not a multiple of the work-group size, so the bounds checks matter too


def test_read_after_write_chain_across_buffers(device, pool, kernel, rng):
    affine, add = kernel("affine"), kernel("add")
    x0 = rng.standard_normal(N, dtype=np.float32)
    b0 = upload(pool, x0)
    b1, b2, b3, b4 = (pool.allocate(N * 4) for _ in range(4))
    (a1, c1), (a2, c2), (a3, c3) = rng.uniform(-2, 2, (3, 2)).astype(np.float32)
    start = settle(device)
    launches = []
    launches.append((affine, [b0, b1], [a1, c1, N], groups(N)))  # b1 = a1*b0 + c1       (no hazard)
    launches.append((affine, [b1, b2], [a2, c2, N], groups(N)))  # reads b1: RAW         (barrier)
    launches.append((add, [b1, b2, b3], [N], groups(N)))  # reads b2: RAW         (barrier)
    launches.append((affine, [b3, b4], [a3, c3, N], groups(N)))  # reads b3: RAW         (barrier)
    in_one_window(device, launches)
    assert barriers(device) - start == 3
    y1 = a1 * x0 + c1
    y2 = a2 * y1 + c2
    y3 = y1 + y2
    y4 = a3 * y3 + c3
    for buf, want in ((b1, y1), (b2, y2), (b3, y3), (b4, y4)):
        np.testing.assert_allclose(download(pool, buf, np.float32, N), want, rtol=1e-5, atol=1e-5)
    for buf in (b0, b1, b2, b3, b4):
        pool.release(buf)


def test_write_after_read(device, pool, kernel, rng):
    affine, fill = kernel("affine"), kernel("fill")
    x = rng.standard_normal(N, dtype=np.float32)
    bx, by = upload(pool, x), pool.allocate(N * 4)
    a, c, value = (float(v) for v in rng.uniform(-2, 2, 3).astype(np.float32))
    start = settle(device)
    launches = []
    launches.append((affine, [bx, by], [a, c, N], groups(N)))  # reads x
    launches.append((fill, [bx], [value, N], groups(N)))  # then overwrites x: WAR
    in_one_window(device, launches)
    assert barriers(device) - start == 1
    np.testing.assert_allclose(download(pool, by, np.float32, N), f32(a) * x + f32(c), rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(download(pool, bx, np.float32, N), np.full(N, value, np.float32))
    pool.release(bx)
    pool.release(by)


def test_write_after_write(device, pool, kernel, rng):
    affine, fill, axpy = kernel("affine"), kernel("fill"), kernel("axpy_inplace")
    x = rng.standard_normal(N, dtype=np.float32)
    bx, by = upload(pool, x), pool.allocate(N * 4)
    value, a, c, s = (float(v) for v in rng.uniform(-2, 2, 4).astype(np.float32))
    start = settle(device)
    launches = []
    launches.append((fill, [by], [value, N], groups(N)))  # writes y
    launches.append((affine, [bx, by], [a, c, N], groups(N)))  # writes y again: WAW
    launches.append((axpy, [bx, by], [s, N], groups(N)))  # reads and writes y: RAW and WAW
    in_one_window(device, launches)
    assert barriers(device) - start == 2
    want = (f32(a) * x + f32(c)) * f32(s) + x
    np.testing.assert_allclose(download(pool, by, np.float32, N), want, rtol=1e-5, atol=1e-5)
    pool.release(bx)
    pool.release(by)


def test_reads_of_one_buffer_need_no_barrier(device, pool, kernel, rng):
    affine = kernel("affine")
    x = rng.standard_normal(N, dtype=np.float32)
    bx = upload(pool, x)
    outs = [pool.allocate(N * 4) for _ in range(4)]
    coeffs = rng.uniform(-2, 2, (4, 2)).astype(np.float32)
    start = settle(device)
    launches = []
    for out, (a, c) in zip(outs, coeffs):
        launches.append((affine, [bx, out], [a, c, N], groups(N)))
    in_one_window(device, launches)
    assert barriers(device) - start == 0
    for out, (a, c) in zip(outs, coeffs):
        np.testing.assert_allclose(download(pool, out, np.float32, N), a * x + c, rtol=1e-6, atol=1e-6)
        pool.release(out)
    pool.release(bx)


def test_independent_launches_get_no_barrier(device, pool, kernel, rng):
    affine, add, fill, axpy = kernel("affine"), kernel("add"), kernel("fill"), kernel("axpy_inplace")
    k = 6
    xs = [rng.standard_normal(N, dtype=np.float32) for _ in range(2 * k)]
    ins = [upload(pool, x) for x in xs]
    outs = [pool.allocate(N * 4) for _ in range(3 * k)]
    ys = [rng.standard_normal(N, dtype=np.float32) for _ in range(k)]
    inplace = [upload(pool, y) for y in ys]
    coeffs = rng.uniform(-2, 2, (k, 3)).astype(np.float32)
    start = settle(device)
    launches = []
    for i, (a, c, v) in enumerate(coeffs):
        launches.append((affine, [ins[2 * i], outs[3 * i]], [a, c, N], groups(N)))
        launches.append((add, [ins[2 * i], ins[2 * i + 1], outs[3 * i + 1]], [N], groups(N)))
        launches.append((fill, [outs[3 * i + 2]], [v, N], groups(N)))
        launches.append((axpy, [ins[2 * i + 1], inplace[i]], [a, N], groups(N)))
    in_one_window(device, launches)
    assert barriers(device) - start == 0
    for i, (a, c, v) in enumerate(coeffs):
        x0, x1 = xs[2 * i], xs[2 * i + 1]
        np.testing.assert_allclose(download(pool, outs[3 * i], np.float32, N), a * x0 + c, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(download(pool, outs[3 * i + 1], np.float32, N), x0 + x1, rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(download(pool, outs[3 * i + 2], np.float32, N), np.full(N, v, np.float32))
        np.testing.assert_allclose(download(pool, inplace[i], np.float32, N), ys[i] * a + x1, rtol=1e-5, atol=1e-5)
    for buf in ins + outs + inplace:
        pool.release(buf)


def test_views_count_as_their_parent(device, pool, kernel, rng):
    affine, fill = kernel("affine"), kernel("fill")
    n = 1024  # 4 KiB per half: view offsets stay aligned
    x = rng.standard_normal(n, dtype=np.float32)
    bx = upload(pool, x)
    parent = pool.allocate(2 * n * 4)
    lo, hi = pool.view(parent, 0, n * 4), pool.view(parent, n * 4, n * 4)
    out = pool.allocate(n * 4)
    (a1, c1), (a2, c2), (a3, c3) = rng.uniform(-2, 2, (3, 2)).astype(np.float32)
    value = float(np.float32(rng.uniform(-2, 2)))

    start = settle(device)
    launches = []
    launches.append((affine, [bx, lo], [a1, c1, n], groups(n)))  # writes the parent (through lo)
    launches.append((affine, [bx, hi], [a2, c2, n], groups(n)))  # disjoint bytes, same parent: WAW, one barrier
    in_one_window(device, launches)
    assert barriers(device) - start == 1
    start = settle(device)
    launches = []
    launches.append((affine, [lo, hi], [a3, c3, n], groups(n)))  # reads lo, writes hi: one dispatch, no hazard yet
    launches.append((affine, [hi, out], [1.0, 0.0, n], groups(n)))  # reads hi: RAW
    launches.append((fill, [parent], [value, 2 * n], groups(2 * n)))  # writes all of it: WAR through the views
    in_one_window(device, launches)
    assert barriers(device) - start == 2
    lo_values = a1 * x + c1
    np.testing.assert_allclose(download(pool, out, np.float32, n), a3 * lo_values + c3, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(download(pool, parent, np.float32, 2 * n), np.full(2 * n, value, np.float32))
    for buf in (lo, hi, parent, out, bx):
        pool.release(buf)


def test_a_window_end_orders_the_next_window_without_a_barrier(device, pool, kernel, rng):
    """Every window ends with a barrier whose second scope is every later command on the queue, so launches that
    depend on an earlier window's writes (RAW, WAW) or reads (WAR) record no barrier of their own; the results are
    right, and the validation layer's synchronization checks (on in the suite) find no hazard."""
    affine, fill = kernel("affine"), kernel("fill")
    x = rng.standard_normal(N, dtype=np.float32)
    bx, by, bz = upload(pool, x), pool.allocate(N * 4), pool.allocate(N * 4)
    start = settle(device)
    device.launch(affine, [bx, by], [2.0, 1.0, N], groups(N))  # writes y
    device.sync()
    device.launch(affine, [by, bz], [3.0, 0.0, N], groups(N))  # reads y: RAW on the last window
    device.sync()
    device.launch(fill, [by], [5.0, N], groups(N))  # writes y, which the last window read: WAR
    device.sync()
    device.launch(fill, [bz], [7.0, N], groups(N))  # writes z, which the last-but-one wrote: WAW
    device.sync()
    assert barriers(device) - start == 0
    np.testing.assert_array_equal(download(pool, by, np.float32, N), np.full(N, 5.0, np.float32))
    np.testing.assert_array_equal(download(pool, bz, np.float32, N), np.full(N, 7.0, np.float32))
    launches = [
        (affine, [bx, by], [2.0, 1.0, N], groups(N)),
        (affine, [by, bz], [3.0, 0.0, N], groups(N)),  # the same RAW inside one window: one barrier
    ]
    in_one_window(device, launches)
    assert barriers(device) - start == 1
    np.testing.assert_allclose(download(pool, bz, np.float32, N), 3 * (2 * x + 1), rtol=1e-6, atol=1e-6)
    for buf in (bx, by, bz):
        pool.release(buf)


def test_random_dependent_program_matches_numpy_and_barrier_model(device, pool, kernel, rng):
    """Random launches over a few buffers, in one window (a graph, launched once); results against numpy and the
    barrier count against the rule "a barrier exactly before a launch that reads or writes something written, or
    writes something read, since the last barrier"."""
    progs = {"affine": kernel("affine"), "add": kernel("add"), "fill": kernel("fill"), "axpy": kernel("axpy_inplace")}
    nbuf, steps = 6, 60
    host = [rng.uniform(-1, 1, N).astype(np.float32) for _ in range(nbuf)]
    bufs = [upload(pool, h) for h in host]
    start = settle(device)
    read_since, written_since, expected_barriers = set(), set(), 0
    launches = []
    for _ in range(steps):
        op = rng.choice(list(progs))
        a, c = (float(v) for v in rng.uniform(0.25, 1.0, 2).astype(np.float32))
        if op == "affine":
            src, dst = (int(v) for v in rng.choice(nbuf, 2, replace=False))
            reads, writes = {src}, {dst}
            launches.append((progs[op], [bufs[src], bufs[dst]], [a, c, N], groups(N)))
            host[dst] = (f32(a) * host[src] + f32(c)).astype(np.float32)
        elif op == "add":
            s1, s2, dst = (int(v) for v in rng.choice(nbuf, 3, replace=False))
            reads, writes = {s1, s2}, {dst}
            launches.append((progs[op], [bufs[s1], bufs[s2], bufs[dst]], [N], groups(N)))
            host[dst] = host[s1] + host[s2]
        elif op == "fill":
            dst = int(rng.integers(nbuf))
            reads, writes = set(), {dst}
            launches.append((progs[op], [bufs[dst]], [a, N], groups(N)))
            host[dst] = np.full(N, a, np.float32)
        else:
            src, dst = (int(v) for v in rng.choice(nbuf, 2, replace=False))
            reads, writes = {src, dst}, {dst}
            launches.append((progs[op], [bufs[src], bufs[dst]], [a, N], groups(N)))
            host[dst] = (host[dst] * f32(a) + host[src]).astype(np.float32)
        if (reads | writes) & written_since or writes & read_since:
            expected_barriers += 1
            read_since, written_since = set(), set()
        read_since |= reads
        written_since |= writes
    in_one_window(device, launches)
    assert barriers(device) - start == expected_barriers
    for buf, want in zip(bufs, host):
        np.testing.assert_allclose(download(pool, buf, np.float32, N), want, rtol=1e-4, atol=1e-4)
        pool.release(buf)


# ----- grids -----------------------------------------------------------------------------------------------------
GRID_LOCAL = (4, 2, 2)  # grid3d.comp


def expected_grid(grid, tag) -> np.ndarray:
    sx, sy, sz = (g * size for g, size in zip(grid, GRID_LOCAL))
    z, y, x = np.meshgrid(np.arange(sz), np.arange(sy), np.arange(sx), indexing="ij")
    return np.stack([x.ravel(), y.ravel(), z.ravel(), np.full(x.size, tag)], axis=1).astype(np.uint32).ravel()


def run_grid(device, pool, prog, grid, scalars, full_grid):
    count = int(np.prod([g * size for g, size in zip(full_grid, GRID_LOCAL)]))
    out = pool.allocate(count * 16)
    device.launch(prog, [out], scalars, grid)
    got = download(pool, out, np.uint32, count * 4)
    pool.release(out)
    return got


@pytest.mark.parametrize("grid", [(3, 5, 2), (1, 1, 1), (2, 3, 4), (7,), (3, 2)])
def test_grids_cover_every_invocation(device, pool, kernel, rng, grid):
    prog = kernel("grid3d")
    full = tuple(grid) + (1,) * (3 - len(grid))
    tag = int(rng.integers(0, 2**31))
    got = run_grid(device, pool, prog, grid, [*full, tag], full)
    np.testing.assert_array_equal(got, expected_grid(full, tag))


def test_grid_from_grid_args(device, pool, kernel, rng):
    prog = kernel("grid3d")
    gx, gy, gz = (int(v) for v in rng.integers(1, 6, 3))
    tag = int(rng.integers(0, 2**31))
    cases = [  # (grid, scalars, the grid it means): the kernel checks gl_NumWorkGroups against scalars 0-2
        ((GridArg(0), GridArg(1), GridArg(2)), [gx, gy, gz, tag], (gx, gy, gz)),
        ((GridArg(0), gy, GridArg(2)), [np.uint32(gx), gy, np.int64(gz), tag], (gx, gy, gz)),
        ([GridArg(0)], [gx, 1, 1, tag], (gx, 1, 1)),
        ((GridArg(0), GridArg(1)), [gx, gy, 1, tag], (gx, gy, 1)),
        ((GridArg(1), GridArg(1), 1), [gy, gy, 1, tag], (gy, gy, 1)),
    ]
    for grid, scalars, full in cases:
        got = run_grid(device, pool, prog, grid, scalars, full)
        np.testing.assert_array_equal(got, expected_grid(full, tag), err_msg=f"grid {grid}")


def test_grid_arg_naming_a_missing_scalar_is_invalid_at_once(device, pool, kernel):
    prog = kernel("grid3d")
    out = pool.allocate(256)
    expect_invalid(device.launch, prog, [out], [1, 1, 1, 0], (GridArg(4), 1, 1))
    expect_invalid(device.launch, prog, [out], [1, 1, 1, 0], (GridArg(-1), 1, 1))
    device.sync()
    pool.release(out)


@pytest.mark.parametrize("bad", [0, "max+1"])
def test_grid_arg_out_of_range_surfaces_at_next_sync(device, pool, kernel, rng, bad):
    grid_prog, affine = kernel("grid3d"), kernel("affine")
    bad = device.info.max_global_work_dims[0] + 1 if bad == "max+1" else bad
    x = rng.standard_normal(N, dtype=np.float32)
    bx, before, after, junk = upload(pool, x), pool.allocate(N * 4), pool.allocate(N * 4), pool.allocate(256)
    device.sync()
    device.launch(affine, [bx, before], [2.0, 1.0, N], groups(N))
    device.launch(grid_prog, [junk], [bad, 1, 1, 0], (GridArg(0), 1, 1))  # accepted now, refused on the worker
    device.launch(affine, [bx, after], [-1.0, 3.0, N], groups(N))
    with pytest.raises(BackendError) as caught:
        device.sync()
    assert caught.value.status is ErrorStatus.KernelLaunch
    assert f"of program #{ids.number(grid_prog)} (main)," in caught.value.context, caught.value.context  # the program
    device.sync()  # reported once
    # The rest of the window ran, and the device still works.
    np.testing.assert_allclose(download(pool, before, np.float32, N), 2 * x + 1, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(download(pool, after, np.float32, N), 3 - x, rtol=1e-6, atol=1e-6)
    device.launch(affine, [after, before], [0.5, 0.0, N], groups(N))
    np.testing.assert_allclose(download(pool, before, np.float32, N), (3 - x) / 2, rtol=1e-6, atol=1e-6)
    for buf in (bx, before, after, junk):
        pool.release(buf)


@pytest.mark.parametrize("sync_point", ["launch_timed", "pool_to_host"])
def test_grid_arg_error_surfaces_at_other_sync_points(device, pool, kernel, sync_point):
    grid_prog, fill = kernel("grid3d"), kernel("fill")
    junk, out = pool.allocate(256), pool.allocate(N * 4)
    device.launch(fill, [out], [4.0, N], groups(N))
    device.sync()
    device.launch(grid_prog, [junk], [0, 1, 1, 0], (1, GridArg(0), 1))
    with pytest.raises(BackendError) as caught:
        if sync_point == "launch_timed":
            device.launch_timed(fill, [out], [4.0, N], groups(N))
        else:
            download(pool, out, np.float32, N)
    assert caught.value.status is ErrorStatus.KernelLaunch
    assert f"of program #{ids.number(grid_prog)} (main)," in caught.value.context
    device.sync()
    assert isinstance(device.launch_timed(fill, [out], [5.0, N], groups(N)), int)
    np.testing.assert_array_equal(download(pool, out, np.float32, N), np.full(N, 5.0, np.float32))
    pool.release(junk)
    pool.release(out)


# ----- shared-memory reductions ------------------------------------------------------------------------------------
def reduce_all(device, pool, prog, buf, n, wg):
    """Reduce ``buf`` (n elements) to one by repeated launches, all queued before the read-back (a RAW chain)."""
    temps = []
    while n > 1:
        parts = -(-n // wg)
        out = pool.allocate(parts * 4)
        device.launch(prog, [buf, out], [n], (parts, 1, 1))
        temps.append(out)
        buf, n = out, parts
    return buf, temps


@pytest.mark.parametrize("wg", [64, 256])
def test_shared_memory_reduction_float(device, pool, kernel, rng, wg):
    prog = kernel("reduce", WG=wg, T="float")
    assert device.program_info(prog).shared_memory_bytes == wg * 4
    n = int(rng.integers(50_000, 200_000))
    x = rng.uniform(-1, 1, n).astype(np.float32)
    bx = upload(pool, x)
    result, temps = reduce_all(device, pool, prog, bx, n, wg)
    got = download(pool, result, np.float32, 1)[0]
    np.testing.assert_allclose(got, np.sum(x, dtype=np.float64), rtol=1e-4, atol=1e-2)
    for buf in [bx] + temps:
        pool.release(buf)


def test_shared_memory_reduction_uint_partials_exact(device, pool, kernel, rng):
    wg = 128
    prog = kernel("reduce", WG=wg, T="uint")
    n = int(rng.integers(10_000, 40_000))
    x = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)  # sums wrap, like uint in GLSL
    bx = upload(pool, x)
    parts = -(-n // wg)
    partial = pool.allocate(parts * 4)
    device.launch(prog, [bx, partial], [n], (parts, 1, 1))
    padded = np.zeros(parts * wg, np.uint32)
    padded[:n] = x
    want = padded.reshape(parts, wg).sum(axis=1, dtype=np.uint64).astype(np.uint32)
    np.testing.assert_array_equal(download(pool, partial, np.uint32, parts), want)
    result, temps = reduce_all(device, pool, prog, bx, n, wg)
    assert download(pool, result, np.uint32, 1)[0] == np.uint32(x.sum(dtype=np.uint64) & 0xFFFFFFFF)
    for buf in [bx, partial] + temps:
        pool.release(buf)


# ----- a long run ------------------------------------------------------------------------------------------------
def test_100000_launches_without_a_sync(device, pool, kernel, rng):
    """100,000 dependent launches (each reads and writes the same buffer) queued with no sync point in between:
    nothing may run out (windows, command buffers, fences), and every increment must land. About 6 s under
    validation on lavapipe (2 cores), little more than without it, so it runs in-process with the layer watching."""
    prog = kernel("counter")
    slots, launches = 97, 100_000
    idx = rng.integers(0, slots, launches).astype(np.uint32)
    counts = upload(pool, np.zeros(slots, np.uint32))
    device.sync()
    before = device.stats()
    launch = device.launch
    for i in idx.tolist():
        launch(prog, [counts], [i])
    device.sync()
    after = device.stats()
    np.testing.assert_array_equal(download(pool, counts, np.uint32, slots), np.bincount(idx, minlength=slots))
    assert after["dispatches"] - before["dispatches"] == launches
    # every launch depends on the one before: a barrier before each but a window's first (the window before ordered it)
    assert after["barriers"] - before["barriers"] >= launches - (after["batches"] - before["batches"])
    assert after["live_objects"]["fences"] <= 64  # recycled, not one per batch
    pool.release(counts)


# ----- releases while launches are queued --------------------------------------------------------------------------
def test_release_buffers_while_their_launches_are_queued(device, pool, kernel, rng):
    copy2, affine = kernel("copy2"), kernel("affine")
    x = rng.standard_normal(N, dtype=np.float32)
    bx, by, bz, bw = upload(pool, x), pool.allocate(N * 4), pool.allocate(N * 4), pool.allocate(N * 4)
    live = pool.stats()["live_buffers"]
    device.launch(copy2, [bx, by, bz], [N], groups(N))  # y = 2x (y released at once), z = x + 1
    pool.release(bx)
    pool.release(by)
    device.launch(affine, [bz, bw], [3.0, 0.0, N], groups(N))
    pool.release(bz)
    # New buffers of the same size, written at once: they must not get the released buffers' memory yet.
    decoys = [upload(pool, np.full(N, -7.0, np.float32)) for _ in range(3)]
    device.sync()
    np.testing.assert_allclose(download(pool, bw, np.float32, N), 3 * (x + 1), rtol=1e-6, atol=1e-6)
    for buf in decoys:
        np.testing.assert_array_equal(download(pool, buf, np.float32, N), np.full(N, -7.0, np.float32))
        pool.release(buf)
    expect_invalid(device.launch, affine, [bx, bw], [1.0, 0.0, N], groups(N))
    pool.release(bw)
    assert pool.stats()["live_buffers"] == live - 4


def test_release_view_and_parent_while_queued(device, pool, kernel, rng):
    affine = kernel("affine")
    n = 1024
    x = rng.standard_normal(2 * n, dtype=np.float32)
    parent = upload(pool, x)
    hi = pool.view(parent, n * 4, n * 4)
    out = pool.allocate(n * 4)
    device.launch(affine, [hi, out], [-2.0, 0.5, n], groups(n))
    pool.release(parent)  # the view still holds it
    pool.release(hi)
    device.sync()
    np.testing.assert_allclose(download(pool, out, np.float32, n), -2 * x[n:] + 0.5, rtol=1e-6, atol=1e-6)
    pool.release(out)


def unique_spirv(name: str, tag: int) -> bytes:
    """A kernel's SPIR-V with a different generator word: the same code, a different cache key."""
    with open(os.path.join(KERNELS, name + ".comp")) as f:
        spirv = bytearray(vkbackend.compile_glsl(f.read()))
    spirv[8:12] = (0x7E570000 | (tag & 0xFFFF)).to_bytes(4, "little")
    return bytes(spirv)


def test_release_program_while_its_launches_are_queued(device, pool, rng):
    spirv = unique_spirv("affine", secrets.randbits(16))
    device.sync()
    pipelines = device.stats()["live_objects"]["pipelines"]
    prog = device.compile(spirv)
    assert device.stats()["live_objects"]["pipelines"] == pipelines + 1
    x = rng.standard_normal(N, dtype=np.float32)
    bufs = [upload(pool, x)] + [pool.allocate(N * 4) for _ in range(5)]
    coeffs = rng.uniform(-1.5, 1.5, (5, 2)).astype(np.float32)
    for i, (a, c) in enumerate(coeffs):
        device.launch(prog, [bufs[i], bufs[i + 1]], [a, c, N], groups(N))
    device.release_program(prog)
    expect_invalid(device.launch, prog, [bufs[0], bufs[1]], [1.0, 0.0, N], groups(N))
    expect_invalid(device.program_info, prog)
    again = device.compile(spirv)  # while the released one's launches are still queued: a new program, a new id
    assert again != prog
    extra = pool.allocate(N * 4)
    device.launch(again, [bufs[0], extra], [1.0, 1.0, N], groups(N))
    device.sync()
    want = x
    for i, (a, c) in enumerate(coeffs):
        want = a * want + c
        np.testing.assert_allclose(download(pool, bufs[i + 1], np.float32, N), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(download(pool, extra, np.float32, N), x + 1, rtol=1e-6, atol=1e-6)
    assert device.stats()["live_objects"]["pipelines"] == pipelines + 1
    device.release_program(again)
    device.sync()
    assert device.stats()["live_objects"]["pipelines"] == pipelines
    for buf in bufs + [extra]:
        pool.release(buf)


def test_program_reference_counts(device, pool):
    spirv = unique_spirv("fill", secrets.randbits(16))
    first = device.compile(spirv)
    assert device.compile(spirv) == first
    out = pool.allocate(256)
    device.release_program(first)
    device.launch(first, [out], [2.5, 64], (1, 1, 1))  # one reference left
    device.release_program(first)
    expect_invalid(device.launch, first, [out], [2.5, 64], (1, 1, 1))
    expect_invalid(device.release_program, first)
    np.testing.assert_array_equal(download(pool, out, np.float32, 64), np.full(64, 2.5, np.float32))
    pool.release(out)


# ----- errors at once ----------------------------------------------------------------------------------------------
def test_invalid_launches_raise_at_once_and_queue_nothing(device, pool, kernel):
    affine = kernel("affine")
    bx, by = pool.allocate(N * 4), pool.allocate(N * 4)
    gone = pool.allocate(256)
    pool.release(gone)
    released = device.compile(unique_spirv("affine", secrets.randbits(16)))
    device.release_program(released)
    mx, my, mz = device.info.max_global_work_dims
    ok = {"prog": affine, "buffers": [bx, by], "scalars": [1.0, 0.0, N], "grid": (1, 1, 1)}
    bad = [
        {"buffers": [bx]},
        {"buffers": [bx, by, by]},
        {"buffers": []},
        {"scalars": [1.0, 0.0]},
        {"scalars": [1.0, 0.0, N, 4]},
        {"scalars": []},
        {"prog": 12_345_678},
        {"prog": -1},
        {"prog": "affine"},
        {"prog": None},
        {"prog": released},
        {"buffers": [bx, gone]},
        {"buffers": [bx, 999_999_999]},
        {"buffers": [bx, "by"]},
        {"grid": (0, 1, 1)},
        {"grid": (1, 0, 1)},
        {"grid": (1, 1, 0)},
        {"grid": (-1, 1, 1)},
        {"grid": (0,)},
        {"grid": (mx + 1, 1, 1)},
        {"grid": (1, my + 1, 1)},
        {"grid": (1, 1, mz + 1)},
        {"grid": (mx + 1,)},
        {"grid": (2**32, 1, 1)},
        {"grid": (1, 1, 1, 1)},
        {"grid": ()},
        {"grid": (1.5, 1, 1)},
        {"grid": ("2", 1, 1)},
        {"grid": None},
        {"grid": 5},
    ]
    device.sync()
    before = device.stats()["dispatches"]
    for change in bad:
        args = {**ok, **change}
        expect_invalid(device.launch, args["prog"], args["buffers"], args["scalars"], args["grid"])
    device.sync()  # nothing queued, nothing pending
    assert device.stats()["dispatches"] == before
    device.launch(**ok)  # and the same launch with good arguments runs
    device.sync()
    assert device.stats()["dispatches"] == before + 1
    for buf in (bx, by):
        pool.release(buf)


@pytest.mark.parametrize(
    "change",
    [{"buffers": None}, {"prog": [0]}, {"buffers": [[1], [2]]}],
    ids=["buffers=None", "prog=[0]", "buffers=[[1],[2]]"],
)
def test_malformed_ids_raise_invalid_argument(device, pool, kernel, change):
    affine = kernel("affine")
    bx, by = pool.allocate(N * 4), pool.allocate(N * 4)
    args = {"prog": affine, "buffers": [bx, by], "scalars": [1.0, 0.0, N], "grid": (1, 1, 1), **change}
    try:
        expect_invalid(device.launch, args["prog"], args["buffers"], args["scalars"], args["grid"])
    finally:
        pool.release(bx)
        pool.release(by)


# Only the first and the last work group write: a grid of any size needs 8 bytes (2**31 - 1 groups on an H200).
ENDS = """#version 450
layout(local_size_x = 1) in;
layout(std430, set = 0, binding = 0) writeonly buffer A { uint a[]; };
void main() {
    if (gl_WorkGroupID.x == 0u) a[0] = gl_NumWorkGroups.x;
    if (gl_WorkGroupID.x == gl_NumWorkGroups.x - 1u) a[1] = gl_WorkGroupID.x;
}
"""


def test_grid_at_the_limit_is_accepted(device, pool):
    """The device's own maxComputeWorkGroupCount[0] is accepted and runs every work group, the last included."""
    ends = device.compile(vkbackend.compile_glsl(ENDS))
    mx = device.info.max_global_work_dims[0]
    out = pool.allocate(8)
    try:
        device.launch(ends, [out], [], (mx, 1, 1))
        assert download(pool, out, np.uint32, 2).tolist() == [mx, mx - 1]
    finally:
        pool.release(out)
        device.release_program(ends)


# ----- timed launches ----------------------------------------------------------------------------------------------
def test_launch_timed_returns_positive_nanoseconds(device, pool, kernel, rng):
    affine = kernel("affine")
    n = 1 << 20
    x = rng.standard_normal(n, dtype=np.float32)
    bx, by = upload(pool, x), pool.allocate(n * 4)
    ns = device.launch_timed(affine, [bx, by], [0.5, -1.0, n], groups(n))
    assert type(ns) is int and ns > 0
    np.testing.assert_allclose(download(pool, by, np.float32, n), 0.5 * x - 1, rtol=1e-6, atol=1e-6)
    expect_invalid(device.launch_timed, affine, [bx], [0.5, -1.0, n], groups(n))
    # Queued launches run first: a timed launch reading what they wrote sees their results.
    bz = pool.allocate(n * 4)
    device.launch(affine, [bx, by], [2.0, 0.0, n], groups(n))
    ns = device.launch_timed(affine, [by, bz], [1.0, 0.25, n], groups(n))
    assert type(ns) is int and ns > 0
    np.testing.assert_allclose(download(pool, bz, np.float32, n), 2 * x + 0.25, rtol=1e-6, atol=1e-6)
    for buf in (bx, by, bz):
        pool.release(buf)


def test_argument_containers(device, pool, kernel, rng):
    """Tuples, numpy arrays and numpy integers work wherever a sequence of numbers is expected."""
    affine = kernel("affine")
    x = rng.standard_normal(N, dtype=np.float32)
    bx, by = upload(pool, x), pool.allocate(N * 4)
    a, c = rng.uniform(-2, 2, 2).astype(np.float32)
    device.launch(affine, (bx, by), [*np.array([a, c], np.float64), np.uint64(N)], np.array(groups(N)))
    np.testing.assert_allclose(download(pool, by, np.float32, N), a * x + c, rtol=1e-6, atol=1e-6)
    device.launch(affine, np.array([bx, by]), (np.float32(c), np.float32(a), np.uint32(N)), [np.int64(groups(N)[0])])
    np.testing.assert_allclose(download(pool, by, np.float32, N), c * x + a, rtol=1e-6, atol=1e-6)
    pool.release(bx)
    pool.release(by)


@pytest.mark.parametrize(
    "make",
    [
        lambda v: set(v),
        lambda v: dict(enumerate(v)),
        lambda v: {str(i): x for i, x in enumerate(v)},
        lambda v: (x for x in v),
        lambda v: iter(v),
        lambda v: dict(enumerate(v)).values(),
    ],
    ids=["set", "dict keyed 0,1,...", "dict", "generator", "iterator", "dict values"],
)
def test_scalars_must_be_a_sequence(device, pool, kernel, make):
    """Scalars bind in order: a set (hash order), a dict (its keys) or an iterator would bind the wrong values, so
    launch, launch_timed and graphs refuse them at once, whichever path checks the launch; a one-buffer set too."""
    fill, copy = kernel("fill"), kernel("affine")
    out, other = pool.allocate(64 * 4), pool.allocate(64 * 4)
    device.sync()
    before = device.stats()["dispatches"]
    for call, prog, buffers, scalars in (
        (device.launch, fill, [out], [5.0, 64]),
        (device.launch_timed, fill, [out], [5.0, 64]),
        (device.launch, copy, [out, other], [2.0, 0.0, 64]),
        (lambda *a: device.graph([a]), copy, [out, other], [2.0, 0.0, 64]),
    ):
        with pytest.raises(vkbackend.InvalidArgumentError, match="scalars must be a list or tuple"):
            call(prog, buffers, make(scalars), (1, 1, 1))
    for call in (device.launch, device.launch_timed):
        with pytest.raises(vkbackend.InvalidArgumentError, match="buffers must be a list or tuple"):
            call(fill, make([out]), [5.0, 64], (1, 1, 1))
    device.sync()
    assert device.stats()["dispatches"] == before  # nothing was queued
    for buf in (out, other):
        pool.release(buf)


# ----- threads -----------------------------------------------------------------------------------------------------
def test_launches_from_eight_threads(device, pool, kernel, rng):
    axpy, affine = kernel("axpy_inplace"), kernel("affine")
    threads, steps = 8, 150
    seeds = rng.integers(0, 2**32, threads)
    start = threading.Barrier(threads)
    errors: list[BaseException] = []

    def work(seed):
        try:
            r = np.random.default_rng(seed)
            x, y = r.standard_normal(N, dtype=np.float32), r.standard_normal(N, dtype=np.float32)
            bx, by, bz = upload(pool, x), upload(pool, y), pool.allocate(N * 4)
            coeffs = r.uniform(0.5, 1.0, steps).astype(np.float32)
            start.wait()
            for a in coeffs:
                device.launch(axpy, [bx, by], [a, N], groups(N))  # y = y*a + x, a chain on y
                device.launch(affine, [by, bz], [a, 1.0, N], groups(N))  # z = a*y + 1 from the latest y
                y = (y * a + x).astype(np.float32)
            z = coeffs[-1] * y + 1
            np.testing.assert_allclose(download(pool, by, np.float32, N), y, rtol=1e-4, atol=1e-4)
            np.testing.assert_allclose(download(pool, bz, np.float32, N), z, rtol=1e-4, atol=1e-4)
            for buf in (bx, by, bz):
                pool.release(buf)
        except BaseException as error:  # noqa: BLE001 (reported by the main thread)
            errors.append(error)
            start.abort()

    workers = [threading.Thread(target=work, args=(int(s),)) for s in seeds]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    if errors:
        raise errors[0]


# ----- the descriptor-pool path --------------------------------------------------------------------------------------


def write_spirv(tmp_path, names) -> str:
    out = tmp_path / "spv"
    out.mkdir(exist_ok=True)
    for name in names:
        with open(os.path.join(KERNELS, name + ".comp")) as f:
            (out / f"{name}.spv").write_bytes(vkbackend.compile_glsl(f.read()))
    return str(out)


def test_descriptor_pool_path(device, tmp_path, rng):
    spv = write_spirv(tmp_path, ["affine", "add", "counter", "fill"])
    result = run_script(
        "launch_descriptor_pool_path", spv, str(int(rng.integers(2**32))), env={"VKBACKEND_PUSH_DESCRIPTORS": "0"}
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "POOL PATH OK" in result.stdout
