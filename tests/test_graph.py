"""LaunchGraph: launches packed once and replayed with one call; updates, placeholders, held buffers, errors, timing.
And per-program robustness (``Device.compile(robust=False)``), whose effect is on speed, so only its contract is
tested here: it compiles a separate program where the device can choose, and the same one where it cannot."""

from __future__ import annotations

from collections import UserList

import numpy as np
import pytest
from _buffers import download, upload
from _reliability import run_isolated

from vkbackend.errors import BackendError, ErrorStatus

N = 256
GRID = (N // 64, 1, 1)  # the test kernels run 64 invocations per work group


@pytest.fixture
def chain(pool, kernel):
    """x -> y = 2x + 1 -> z = 3y - 4: two dependent launches of the affine kernel, and the buffers they use."""
    affine = kernel("affine")
    x = upload(pool, np.arange(N, dtype=np.float32))
    y, z = pool.allocate(4 * N), pool.allocate(4 * N)
    yield affine, x, y, z
    for buf in (x, y, z):
        pool.release(buf)


def test_replay_runs_every_launch_in_order(device, pool, chain):
    affine, x, y, z = chain
    graph = device.graph([(affine, [x, y], [2.0, 1.0, N], GRID), (affine, [y, z], [3.0, -4.0, N], GRID)])
    assert len(graph) == 2
    for _ in range(3):
        graph.launch()
    np.testing.assert_array_equal(download(pool, z, np.float32, N), 3 * (2 * np.arange(N, dtype=np.float32) + 1) - 4)
    graph.close()


def test_a_long_replay_onto_an_idle_gpu_runs_its_head_first_and_in_order(device, pool, chain):
    """A window of many launches onto an idle GPU submits its first few on their own, so the GPU starts on them while
    the rest is recorded: a chain in which every launch reads what the one before wrote still runs in order, across
    the two submissions (and the validation layer's synchronization checks stay silent)."""
    affine, x, y, _ = chain
    device.sync()
    with device.graph([(affine, [x, y], [1.0, 1.0, N], GRID), (affine, [y, x], [1.0, 1.0, N], GRID)] * 10) as graph:
        heads = device.stats()["heads"]
        graph.launch()
        device.sync()
        assert device.stats()["heads"] == heads + 1  # by the worker, or by the express lane where polling pays
    np.testing.assert_array_equal(download(pool, x, np.float32, N), np.arange(N, dtype=np.float32) + 20)


def test_a_timed_replay_is_never_split(device, pool, chain):
    """A timed run goes in one submission: split, the time between its two timestamps would hold the host's recording
    of the rest."""
    affine, x, y, _ = chain
    with device.graph([(affine, [x, y], [1.0, 1.0, N], GRID), (affine, [y, x], [1.0, 1.0, N], GRID)] * 10) as graph:
        heads = device.stats()["heads"]
        assert graph.launch_timed() > 0
        assert device.stats()["heads"] == heads
    np.testing.assert_array_equal(download(pool, x, np.float32, N), np.arange(N, dtype=np.float32) + 20)


def test_update_replaces_one_launch(device, pool, chain):
    affine, x, y, z = chain
    graph = device.graph([(affine, [x, y], [2.0, 1.0, N], GRID), (affine, [y, z], [3.0, -4.0, N], GRID)])
    graph.launch()
    other = upload(pool, np.full(N, 10, dtype=np.float32))
    graph.update(0, (affine, [other, y], [1.0, 0.0, N], GRID))
    graph.launch()
    np.testing.assert_array_equal(download(pool, z, np.float32, N), np.full(N, 26, dtype=np.float32))
    pool.release(other)  # the graph still holds it
    graph.launch()
    np.testing.assert_array_equal(download(pool, z, np.float32, N), np.full(N, 26, dtype=np.float32))
    graph.close()


def test_placeholder_queues_nothing_until_filled(device, pool, chain):
    affine, x, y, z = chain
    pool.host_to_pool(np.zeros(N, dtype=np.float32), z)
    graph = device.graph([(affine, [x, y], [2.0, 1.0, N], GRID), None])
    graph.launch()
    np.testing.assert_array_equal(download(pool, z, np.float32, N), np.zeros(N, dtype=np.float32))
    graph.update(1, (affine, [y, z], [1.0, 1.0, N], GRID))
    graph.launch()
    np.testing.assert_array_equal(download(pool, z, np.float32, N), 2 * np.arange(N, dtype=np.float32) + 2)
    graph.update(1, None)
    pool.host_to_pool(np.zeros(N, dtype=np.float32), z)
    graph.launch()
    np.testing.assert_array_equal(download(pool, z, np.float32, N), np.zeros(N, dtype=np.float32))
    graph.close()


def test_graph_holds_its_buffers_until_closed(device, pool, kernel):
    affine = kernel("affine")
    x = upload(pool, np.ones(N, dtype=np.float32))
    y = pool.allocate(4 * N)
    graph = device.graph([(affine, [x, y], [5.0, 0.0, N], GRID)])
    pool.release(x)
    pool.release(y)
    graph.launch()  # both ids are still live: the graph holds a reference
    for scale in (6.0, 7.0):  # same buffers: the update keeps the references it has, takes no more
        graph.update(0, (affine, [x, y], [scale, 0.0, N], GRID))
    graph.launch()
    np.testing.assert_array_equal(download(pool, y, np.float32, N), np.full(N, 7, dtype=np.float32))
    live = pool.stats()["live_buffers"]
    graph.close()
    graph.close()  # idempotent
    with pytest.raises(BackendError, match="not a live buffer"):
        pool.size_of(x)
    with pytest.raises(BackendError, match="closed LaunchGraph"):
        graph.launch()
    assert pool.stats()["live_buffers"] == live - 2


def test_bad_launches_are_rejected_and_leak_nothing(device, pool, chain):
    affine, x, y, z = chain
    with pytest.raises(BackendError) as info:
        device.graph([(affine, [x, y], [2.0, 1.0, N], GRID), (affine, [y], [1.0, 1.0, N], GRID)])
    assert info.value.status is ErrorStatus.InvalidArgument
    with pytest.raises(BackendError, match=r"\(program, buffers, scalars, grid\) or None"):
        device.graph([(affine, [x, y])])
    graph = device.graph([(affine, [x, y], [2.0, 1.0, N], GRID)])
    for index in (1, -1, True, "0"):
        with pytest.raises(BackendError, match="outside"):
            graph.update(index, None)
    with pytest.raises(BackendError):
        graph.update(0, (affine, [x, 10**9], [2.0, 1.0, N], GRID))
    graph.launch()  # the failed update left the launch as it was
    np.testing.assert_array_equal(download(pool, y, np.float32, N), 2 * np.arange(N, dtype=np.float32) + 1)
    graph.close()
    for buf in (x, y, z):  # every reference the failed graphs took was given back: one release frees each
        pool.retain(buf)
        pool.release(buf)


def test_set_scalars_changes_only_the_scalars_and_grid(device, pool, chain):
    """set_scalars writes a launch's new scalars (and grid) over its record: the replay computes what an update with
    the same program and buffers would, and a record that another update then lengthens keeps what it wrote."""
    affine, x, y, z = chain
    base = np.arange(N, dtype=np.float32)
    graph = device.graph([(affine, [x, y], [2.0, 1.0, N], GRID), (affine, [y, z], [3.0, -4.0, N], GRID), None])
    graph.launch()
    graph.set_scalars(0, [5.0, 0.0, N])
    graph.set_scalars(1, (1.0, 1.0, N // 2), (N // 128, 1, 1))  # half the grid: the rest of z keeps the last replay
    graph.launch()
    expected = 3 * (2 * base + 1) - 4
    expected[: N // 2] = 5 * base[: N // 2] + 1
    np.testing.assert_array_equal(download(pool, y, np.float32, N), 5 * base)
    np.testing.assert_array_equal(download(pool, z, np.float32, N), expected)
    graph.update(2, (affine, [x, x], [1.0, 0.0, N], GRID))  # a record grows from nothing: the joined records go
    graph.set_scalars(1, [1.0, 2.0, N])  # the half grid stays
    graph.launch()
    expected[: N // 2] = 5 * base[: N // 2] + 2
    np.testing.assert_array_equal(download(pool, z, np.float32, N), expected)
    graph.close()


def test_set_scalars_refuses_what_update_refuses_and_leaves_the_launch(device, pool, chain):
    affine, x, y, _ = chain
    graph = device.graph([(affine, [x, y], [2.0, 1.0, N], GRID), None])
    graph.launch()
    bad = [
        ([2.0, 1.0, -1], None, "does not fit its type"),  # n is a uint
        ([2.0, 1.0], None, "takes 2 buffers"),
        ({0: 2.0, 1: 1.0, 2: N}, None, "must be a list or tuple"),
        ([2.0, 1.0, N], (0, 1, 1), "outside 1.."),
        ([2.0, 1.0, N], (1.5, 1, 1), "grid entry"),
        ([2.0, 1.0, N], (True, 1, 1), "grid entry"),
        ([2.0, 1.0, -1], (1, 1, 1), "does not fit its type"),  # a good grid with a bad scalar: neither is written
    ]
    for scalars, grid, message in bad:
        with pytest.raises(BackendError, match=message):
            graph.set_scalars(0, scalars, grid)
    for index in (2, -1, True, "0"):
        with pytest.raises(BackendError, match=r"LaunchGraph\.set_scalars: index .* is outside"):
            graph.set_scalars(index, [2.0, 1.0, N])
    with pytest.raises(BackendError, match="placeholder"):
        graph.set_scalars(1, [2.0, 1.0, N])
    pool.host_to_pool(np.zeros(N, dtype=np.float32), y)
    graph.launch()  # every refused call left the launch as it was
    np.testing.assert_array_equal(download(pool, y, np.float32, N), 2 * np.arange(N, dtype=np.float32) + 1)
    graph.close()
    with pytest.raises(BackendError, match="closed LaunchGraph"):
        graph.set_scalars(0, [2.0, 1.0, N])


_RELEASED_UNDER_A_GRAPH = """#version 450
layout(local_size_x = 64) in;
layout(push_constant) uniform P { uint n; uint tag; } p;
layout(std430, binding = 0) writeonly buffer Out { uint y[]; };
void main() { if (gl_GlobalInvocationID.x < p.n) y[gl_GlobalInvocationID.x] = p.tag ^ 0x5eedu; }
"""


def test_set_scalars_keeps_its_own_grid_and_checks_what_update_checks(device, pool, chain):
    """The graph keeps a copy of the grid it was given (the caller's list may change after), refuses a released
    program as update does, and a failed update given a one-shot iterable changes nothing."""
    affine, x, y, z = chain
    base = np.arange(N, dtype=np.float32)
    grid = [N // 128, 1, 1]
    graph = device.graph([(affine, [x, y], [2.0, 1.0, N], GRID)])
    graph.set_scalars(0, [3.0, 0.0, N], grid)
    grid[0] = N // 64  # the caller's list, not the graph's
    pool.host_to_pool(np.zeros(N, dtype=np.float32), y)
    graph.set_scalars(0, UserList([3.0, 0.0, N]))  # not a list or tuple: repacked whole, with the grid it keeps
    graph.launch()
    np.testing.assert_array_equal(download(pool, y, np.float32, N), np.where(base < N // 2, 3 * base, 0))
    with pytest.raises(BackendError, match="does not fit"):
        graph.update(0, iter([affine, [x, z], [1.0, 0.0, -1], GRID]))  # refused: the graph keeps binding y
    import vkbackend

    # a program of this test's own (no other test holds a reference on it), released under the graph
    scratch = device.compile(vkbackend.compile_glsl(_RELEASED_UNDER_A_GRAPH))
    other = device.graph([(scratch, [z], [N, 7], GRID)])
    device.release_program(scratch)
    with pytest.raises(BackendError, match="released"):
        other.set_scalars(0, [N, 8])
    other.close()
    pool.host_to_pool(np.zeros(N, dtype=np.float32), y)
    graph.set_scalars(0, [1.0, 1.0, N], GRID)
    graph.launch()
    np.testing.assert_array_equal(download(pool, y, np.float32, N), base + 1)
    graph.close()
    with device.graph([(affine, [x, y], [2.0, 1.0, N], iter(GRID))]) as once:  # a grid that can be read only once
        once.set_scalars(0, UserList([1.0, 2.0, N]))  # repacked whole, with the grid the graph kept
        once.launch()
        np.testing.assert_array_equal(download(pool, y, np.float32, N), base + 2)


def test_set_scalars_follows_a_grid_that_names_a_scalar(device, pool, kernel):
    """Grid entries given as GridArg are the values of scalars: new values move the grid with them."""
    from vkbackend import GridArg

    grid3d = kernel("grid3d")  # 4 x 2 x 2 invocations a work group; its tag gets bit 31 if the grid is not the scalars'
    out = pool.allocate(16 * 16 * 12)
    with device.graph([(grid3d, [out], [1, 1, 1, 5], (GridArg(0), GridArg(1), GridArg(2)))]) as graph:
        graph.launch()
        graph.set_scalars(0, [3, 2, 2, 6])
        graph.launch()
        words = download(pool, out, np.uint32, 4 * 16 * 12).reshape(-1, 4)
    np.testing.assert_array_equal(words[:, 3], [6] * (16 * 12))
    pool.release(out)


def test_variables_write_every_scalar_they_feed(device, pool, kernel):
    """Each variable goes into every 32- and 64-bit integer scalar it feeds, at any padding, for the next replays;
    the other scalars keep their values."""
    scalars = kernel("scalars")  # i32, f64, u32, i64, f32, u64, flag, row: row r of the outputs holds launch r's
    out32, out64 = pool.allocate(4 * 4 * 3), pool.allocate(8 * 3 * 3)
    fixed = [0, 1.5, 0, 0, 2.5, 0, True]
    graph = device.graph([(scalars, [out32, out64], [*fixed, row], (1, 1, 1)) for row in range(3)])
    variables = graph.bind_variables([[(0, 0), (1, 3)], [(0, 2), (2, 5)], []])
    for first, second in ((-(2**31), 2**32 - 1), (7, 0), (2**31 - 1, 12)):
        variables.set([first, second, 99])
        graph.launch()
        o32 = download(pool, out32, np.uint32, 12).reshape(3, 4)
        o64 = download(pool, out64, np.uint64, 9).reshape(3, 3)
        assert o32[0].tolist() == [first & 0xFFFFFFFF, second, np.float32(2.5).view(np.uint32), 1]
        assert o64[1, 1] == first & 0xFFFFFFFFFFFFFFFF and o64[2, 2] == second
        assert o32[1, 0] == 0 and o64[0, 1] == 0 and o64[1, 0] == np.float64(1.5).view(np.uint64)
    graph.close()
    for buf in (out32, out64):
        pool.release(buf)


def test_variables_refuse_what_does_not_fit_and_write_nothing(device, pool, kernel):
    scalars = kernel("scalars")
    out32, out64 = pool.allocate(4 * 4), pool.allocate(8 * 3)
    graph = device.graph([(scalars, [out32, out64], [1, 0.0, 2, 3, 0.0, 4, False, 0], (1, 1, 1)), None])
    for slots, message in (
        ([[(0, 1)]], r"\(0, 1\) names no 32- or 64-bit integer scalar"),  # a double
        ([[(0, 4)]], r"\(0, 4\) names no 32- or 64-bit integer scalar"),  # a float
        ([[(0, 8)]], r"\(0, 8\) names no"),  # past the scalars
        ([[(1, 0)]], r"\(1, 0\) names no .* not a placeholder"),
        ([[(2, 0)]], r"\(2, 0\) names no .* of its 2"),
        ([[(True, 0)]], r"\(True, 0\) names no"),
        ([[(np.int64(0), 0)]], r"0\)?, 0\) names no .* \(two ints"),  # a numpy integer is not an int
        ([[0]], r"slots\[0\] is a list of \(launch index, scalar index\) pairs, got 0 in it"),
        ([[(0, 0), (0, 2, 1)]], r"got \(0, 2, 1\) in it"),
        ([5], r"slots\[0\] .* got 5 in it"),
    ):
        with pytest.raises(BackendError, match=message) as raised:
            graph.bind_variables(slots)
        assert raised.value.status is ErrorStatus.InvalidArgument
    variables = graph.bind_variables([[(0, 0), (0, 2)], [(0, 5)]])
    variables.set([10, 20])
    for values, message in (
        ([-1, 20], "variable 0 = -1 does not fit scalar 2 of launch 0, of type uint"),
        ([2**31, 20], "does not fit scalar 0 of launch 0, of type int"),
        ([10, -5], "does not fit scalar 5 of launch 0, of type uint64"),
        ([10, 2**63], r"a list or tuple of 2 ints from -2\*\*63 to 2\*\*63 - 1"),  # uint64 past int64: set_scalars
        ([10, 1.5], "a list or tuple of 2 ints"),
        ([10], "a list or tuple of 2 ints"),
        (b"\x01" * 16, "a list or tuple of 2 ints"),  # not two int64s from raw bytes
        (np.array([10, 20]), "a list or tuple of 2 ints"),
    ):
        with pytest.raises(BackendError, match=message):
            variables.set(values)
    graph.launch()  # every refused set wrote nothing
    assert download(pool, out32, np.uint32, 2).tolist() == [10, 10]
    assert download(pool, out64, np.uint64, 3)[2] == 20
    graph.close()
    with pytest.raises(BackendError, match="closed LaunchGraph"):
        variables.set([1, 2])
    for buf in (out32, out64):
        pool.release(buf)


def test_the_last_write_of_a_scalar_wins(device, pool, chain):
    """set_scalars and two sets of variables on one graph write the same records: the last write stays."""
    affine, x, y, _ = chain
    base = np.arange(N, dtype=np.float32)
    graph = device.graph([(affine, [x, y], [2.0, 1.0, N], GRID)])
    first, second = graph.bind_variables([[(0, 2)]]), graph.bind_variables([[(0, 2)]])
    for write, n in (
        (lambda: first.set([N // 2]), N // 2),
        (lambda: graph.set_scalars(0, [2.0, 1.0, N // 4]), N // 4),
        (lambda: second.set([N]), N),
        (lambda: first.set([N // 8]), N // 8),
    ):
        write()
        pool.host_to_pool(np.zeros(N, dtype=np.float32), y)
        graph.launch()
        np.testing.assert_array_equal(download(pool, y, np.float32, N), np.where(base < n, 2 * base + 1, 0))
    graph.close()


def test_variables_follow_their_launches_when_records_move(device, pool, chain):
    """A launch filled in or replaced before a bound one moves its record: the variables find it again; a bound
    launch updated whole takes the update's scalars until the next set."""
    affine, x, y, _ = chain
    base = np.arange(N, dtype=np.float32)
    graph = device.graph([None, (affine, [x, y], [2.0, 1.0, N], GRID)])
    variables = graph.bind_variables([[(1, 2)]])  # n, a uint
    variables.set([N // 2])
    pool.host_to_pool(np.zeros(N, dtype=np.float32), y)
    graph.launch()
    np.testing.assert_array_equal(download(pool, y, np.float32, N), np.where(base < N // 2, 2 * base + 1, 0))
    graph.update(0, (affine, [x, x], [1.0, 0.0, N], GRID))  # launch 1's record moves
    variables.set([N // 4])
    pool.host_to_pool(np.zeros(N, dtype=np.float32), y)
    graph.launch()
    np.testing.assert_array_equal(download(pool, y, np.float32, N), np.where(base < N // 4, 2 * base + 1, 0))
    graph.update(1, (affine, [x, y], [3.0, 0.0, N], GRID))
    graph.launch()
    np.testing.assert_array_equal(download(pool, y, np.float32, N), 3 * base)
    variables.set([N // 2])
    pool.host_to_pool(np.zeros(N, dtype=np.float32), y)
    graph.launch()
    np.testing.assert_array_equal(download(pool, y, np.float32, N), np.where(base < N // 2, 3 * base, 0))
    graph.update(0, None)  # the joined records go: launch 1 keeps what the variables wrote into it
    pool.host_to_pool(np.zeros(N, dtype=np.float32), y)
    graph.launch()
    np.testing.assert_array_equal(download(pool, y, np.float32, N), np.where(base < N // 2, 3 * base, 0))
    graph.close()


_SCALED_BY_AN_INT = """#version 450
layout(local_size_x = 64) in;
layout(push_constant) uniform P { uint a; float b; uint n; } p;
layout(std430, binding = 0) readonly buffer In { float x[]; };
layout(std430, binding = 1) writeonly buffer Out { float y[]; };
void main() { uint i = gl_GlobalInvocationID.x; if (i < p.n) y[i] = float(p.a) * x[i] + p.b; }
"""


def test_variables_follow_a_launch_updated_to_another_program(device, pool, chain, kernel):
    """Another program lays its scalars out anew: the variables find theirs in the new record, or refuse a scalar that
    is no longer an integer."""
    affine, x, y, _ = chain
    scalars = kernel("scalars")
    out32, out64 = pool.allocate(4 * 4), pool.allocate(8 * 3)
    graph = device.graph([(affine, [x, y], [2.0, 1.0, N], GRID)])
    variables = graph.bind_variables([[(0, 2)]])  # affine's n; scalars' u32
    graph.update(0, (scalars, [out32, out64], [1, 0.0, 2, 3, 0.0, 4, False, 0], (1, 1, 1)))
    variables.set([77])
    graph.launch()
    assert download(pool, out32, np.uint32, 4).tolist() == [1, 77, 0, 0]
    assert download(pool, out64, np.uint64, 3).tolist() == [0, 3, 4]
    wide = graph.bind_variables([[(0, 3)]])  # scalars' i64; affine has three scalars
    graph.update(0, (affine, [x, y], [2.0, 1.0, N], GRID))
    variables.set([N // 2])
    pool.host_to_pool(np.zeros(N, dtype=np.float32), y)
    graph.launch()
    base = np.arange(N, dtype=np.float32)
    np.testing.assert_array_equal(download(pool, y, np.float32, N), np.where(base < N // 2, 2 * base + 1, 0))
    with pytest.raises(BackendError, match=r"\(0, 3\) names no .* updated since bind_variables: bind them again"):
        wide.set([5])
    import vkbackend

    scaled = device.compile(vkbackend.compile_glsl(_SCALED_BY_AN_INT))  # a record as long as affine's
    graph.update(0, (scaled, [x, y], [3, 1.0, N], GRID))
    first = graph.bind_variables([[(0, 0)]])
    first.set([4])
    graph.update(0, (affine, [x, y], [2.0, 1.0, N], GRID))  # in place: affine's first scalar is a float
    with pytest.raises(BackendError, match="updated since bind_variables: bind them again"):
        first.set([5])
    graph.close()
    device.release_program(scaled)
    for buf in (out32, out64):
        pool.release(buf)


def test_variables_feed_a_program_that_reaches_buffers_by_address(device, pool, kernel):
    """Its scalars share the push constants with buffer addresses, which stay."""
    if not device.info.buffer_device_address:
        pytest.skip(f"{device.info.name} has no buffer device addresses (bufferDeviceAddress)")
    axpy = kernel("axpy_address")  # y[i] = a * x[i] + y[i] for first <= i < n
    x = upload(pool, np.ones(N, dtype=np.float32))
    y = upload(pool, np.zeros(N, dtype=np.float32))
    graph = device.graph([(axpy, [x, y], [2.0, 0, N], GRID)])
    variables = graph.bind_variables([[(0, 1)], [(0, 2)]])  # first, n
    variables.set([N // 4, N // 2])
    graph.launch()
    got = download(pool, y, np.float32, N)
    np.testing.assert_array_equal(got, np.where((np.arange(N) >= N // 4) & (np.arange(N) < N // 2), 2.0, 0.0))
    graph.close()
    for buf in (x, y):
        pool.release(buf)


def test_launch_timed_returns_gpu_time(device, pool, chain):
    affine, x, y, z = chain
    graph = device.graph([(affine, [x, y], [2.0, 1.0, N], GRID), (affine, [y, z], [3.0, -4.0, N], GRID)])
    assert graph.launch_timed() > 0
    np.testing.assert_array_equal(download(pool, z, np.float32, N), 3 * (2 * np.arange(N, dtype=np.float32) + 1) - 4)
    graph.close()


def test_unchecked_program_is_separate_only_where_the_device_can_choose(device, pool):
    import vkbackend

    source = """#version 450
    layout(local_size_x = 64) in;
    layout(std430, binding = 0) buffer X { float x[]; };
    void main() { x[gl_GlobalInvocationID.x] += 1.0; }
    """
    spirv = vkbackend.compile_glsl(source)
    checked, unchecked = device.compile(spirv), device.compile(spirv, robust=False)
    assert (checked != unchecked) == device.info.pipeline_robustness
    x = upload(pool, np.zeros(N, dtype=np.float32))
    device.launch(unchecked, [x], [], GRID)
    device.launch(checked, [x], [], GRID)
    np.testing.assert_array_equal(download(pool, x, np.float32, N), np.full(N, 2, dtype=np.float32))
    pool.release(x)
    device.release_program(checked)
    device.release_program(unchecked)


def test_a_graph_of_placeholders_submits_nothing(device):
    graph = device.graph([None, None])
    device.sync()
    before = device.stats()["batches"]
    graph.launch()
    device.sync()
    assert device.stats()["batches"] == before
    graph.close()


@pytest.mark.parametrize("push", ["1", "0"])
def test_a_replay_of_a_released_program_is_skipped_alone(push):
    """A graph does not hold its programs: a replay of a released one is reported at the next sync point. It ended
    its whole window, so launches queued after it (other threads' too) were lost; now only it is skipped."""
    r = run_isolated("graph_released_replay", env={"VKBACKEND_PUSH_DESCRIPTORS": push})
    assert r["status"] == "KernelLaunch" and r["value"] == 7.0, r
    assert r["validation"] == ""
