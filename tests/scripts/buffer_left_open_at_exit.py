"""Buffers, views and a Buffer in a reference cycle, all left open when the interpreter exits (tests/test_buffer.py:
the process must exit 0 with nothing on stderr)."""

import numpy as np

import vkbackend

dev = vkbackend.devices()[0]
bufs = [vkbackend.Buffer.from_numpy(dev, np.ones(1000)) for _ in range(3)]
views = [b.view(0, 256) for b in bufs]
cycle = {"buf": vkbackend.Buffer(dev, 64)}
cycle["self"] = cycle
