"""A small read-back straight from mapped device memory while another thread closes the device: the reader's sync
point returns, then the device closes before the reader copies (tests/test_memory.py)."""

import threading
import time

import numpy as np
from isolated import affine_scene, outcome, report

result = {}
dev, pool, prog, buf, x = affine_scene()
pool.host_to_pool(x, buf)
dev.sync()
result["mapped"] = pool.memory.chunk_type is not None
synced = threading.Event()
real_sync = dev._worker.sync


def sync_then_pause() -> None:
    """The reader's sync point, then a pause in which the close runs (the window is otherwise a few bytecodes)."""
    real_sync()
    if threading.current_thread().name == "reader":
        synced.set()
        time.sleep(0.5)


dev._worker.sync = sync_then_pause
out = np.empty(4, np.uint32)


def read() -> None:
    result["read"] = outcome(pool.pool_to_host, buf, out)[0]


reader = threading.Thread(target=read, name="reader")
reader.start()
result["synced"] = synced.wait(30)
result["close"] = outcome(dev.close)[0]
reader.join(30)
result["joined"] = not reader.is_alive()
report(result)
