"""A window of more dispatches than the first descriptor pool has sets, on a device without push descriptors: two
kernels of about 2 s (``SPIN_GRIDS``) keep the GPU busy, so the worker holds back (two batches in flight) while 3,000
launches queue, and they go into one window (tests/test_descriptors.py)."""

import json
import os

import numpy as np
from _reliability import AFFINE, SPIN, SPIN_INNER, groups
from isolated import outcome, report

import vkbackend
from vkbackend import descriptors

result = {}
counts = []
allocate = descriptors.DescriptorSets.allocate


def counting(self, layouts, count, held):
    """DescriptorSets.allocate, recording how many sets each call asks for."""
    counts.append(count)
    return allocate(self, layouts, count, held)


descriptors.DescriptorSets.allocate = counting

dev = vkbackend.devices(vkbackend.VulkanConfig(push_descriptors=False))[0]
result["push"] = dev.info.push_descriptors
pool = dev.memory_pool
spin, affine = dev.compile(vkbackend.compile_glsl(SPIN)), dev.compile(vkbackend.compile_glsl(AFFINE))
busy, buf = pool.allocate(1024), pool.allocate(1024)
pool.host_to_pool(np.zeros(256, np.uint32), buf)
dev.sync()
grid = json.loads(os.environ["SPIN_GRIDS"])[0]
dev.launch(spin, [busy], [SPIN_INNER], grid)
dev.launch(spin, [busy], [SPIN_INNER], grid)
for _ in range(3000):
    dev.launch(affine, [buf], [256, 1, 1], groups(256))
dev.sync()
out = np.empty(256, np.uint32)
pool.pool_to_host(buf, out)
result["exact"] = bool((out == 3000).all())
result["largest_window"] = max(counts)
result["close"] = outcome(dev.close)[0]
report(result)
