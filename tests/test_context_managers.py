"""``with`` blocks: a Device closes at the end of its block and a LaunchGraph drops its buffer references, also when
the block raises, and the exception goes on."""

from __future__ import annotations

import numpy as np
import pytest
from _reliability import run_script

from vkbackend.errors import BackendError

N = 256
GRID = (N // 64, 1, 1)  # the test kernels run 64 invocations per work group


def test_a_device_closes_at_the_end_of_its_block(device):
    result = run_script("context_managers_device_blocks")
    assert result.returncode == 0 and result.stdout == "ok\n", result.stdout + result.stderr


def _buffers(pool) -> tuple[int, int]:
    x = pool.allocate(4 * N)
    pool.host_to_pool(np.ones(N, dtype=np.float32), x)
    return x, pool.allocate(4 * N)


def test_a_graph_drops_its_buffers_at_the_end_of_its_block(device, pool, kernel):
    affine = kernel("affine")
    x, y = _buffers(pool)
    live = pool.stats()["live_buffers"]
    with device.graph([(affine, [x, y], [2.0, 1.0, N], GRID)]) as graph:
        pool.release(x)
        pool.release(y)
        graph.launch()  # the graph's references keep both alive
        out = np.empty(N, dtype=np.float32)
        pool.pool_to_host(y, out)
    np.testing.assert_array_equal(out, np.full(N, 3, dtype=np.float32))
    assert pool.stats()["live_buffers"] == live - 2
    with pytest.raises(BackendError, match="closed LaunchGraph"):
        graph.launch()


def test_a_graph_is_closed_when_its_block_raises(device, pool, kernel):
    affine = kernel("affine")
    x, y = _buffers(pool)
    live = pool.stats()["live_buffers"]
    with pytest.raises(KeyError, match="raised in the block"):
        with device.graph([(affine, [x, y], [2.0, 1.0, N], GRID)]) as graph:
            raise KeyError("raised in the block")
    assert len(graph) == 0 and pool.stats()["live_buffers"] == live  # its references are gone, ours remain
    pool.release(x)
    pool.release(y)
    assert pool.stats()["live_buffers"] == live - 2
