"""``with`` blocks: a Device closes at the end of its block and a LaunchGraph drops its buffer references, also when
the block raises, and the exception goes on."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from vkbackend.errors import BackendError

ROOT = Path(__file__).resolve().parents[1]
N = 256
GRID = (N // 64, 1, 1)  # the test kernels run 64 invocations per work group

# In a fresh process: closing the device would close the one the other tests share (devices() returns the same one).
DEVICE_BLOCKS = """
import vkbackend
with vkbackend.devices()[0] as dev:
    assert not dev.closed
    dev.sync()
assert dev.closed, "not closed at the end of the block"
try:
    with vkbackend.devices()[0] as again:
        assert again is not dev and not again.closed
        raise KeyError("raised in the block")
except KeyError:
    pass
else:
    raise SystemExit("the block's exception was swallowed")
assert again.closed, "not closed when the block raised"
print("ok")
"""


def test_a_device_closes_at_the_end_of_its_block(device):
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    result = subprocess.run(
        [sys.executable, "-c", DEVICE_BLOCKS], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120
    )
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
