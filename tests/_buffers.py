"""Host data into and out of a memory pool's buffers, for tests and for the scripts they run in child processes."""

from __future__ import annotations

import numpy as np


def upload(pool, array) -> int:
    """A new buffer of ``pool`` holding ``array``'s bytes (C order; at least 4 bytes, so an empty array gets a buffer
    too)."""
    array = np.ascontiguousarray(array)
    buf = pool.allocate(max(array.nbytes, 4))
    pool.host_to_pool(array, buf)
    return buf


def download(pool, buf: int, dtype, count: int) -> np.ndarray:
    """The first ``count`` elements of type ``dtype`` of buffer ``buf``, read back into a new array."""
    out = np.empty(count, dtype=dtype)
    pool.pool_to_host(buf, out)
    return out
