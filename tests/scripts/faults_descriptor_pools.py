"""Descriptor pools that cannot be created, and a full one, on a device without push descriptors (run with
``VKBACKEND_PUSH_DESCRIPTORS=0``; tests/test_faults.py)."""

import numpy as np
from _reliability import AFFINE, groups, worker_held
from isolated import outcome, report

import vkbackend
from vkbackend import testing

result = {}
dev = vkbackend.devices()[0]
pool = dev.memory_pool
result["push"] = dev.info.push_descriptors
prog = dev.compile(vkbackend.compile_glsl(AFFINE))
buf = pool.allocate(1024)
x = np.arange(256, dtype=np.uint32)
pool.host_to_pool(x, buf)
dev.sync()
statuses = []
for function in ("vkCreateDescriptorPool", "vkAllocateDescriptorSets"):
    testing.inject(
        function,
        "VK_ERROR_OUT_OF_POOL_MEMORY" if function == "vkAllocateDescriptorSets" else "VK_ERROR_OUT_OF_HOST_MEMORY",
    )
    with worker_held(dev):  # the three launches go in one batch
        for _ in range(3):
            dev.launch(prog, [buf], [256, 1, 1], groups(256))
    statuses.append([function, outcome(dev.sync)[0], not testing.pending()])
result["statuses"] = statuses
out = np.empty(256, np.uint32)
pool.pool_to_host(buf, out)
result["value"] = int(out[0])
result["close"] = outcome(dev.close)[0]
result["live_end"] = testing.live_objects()
report(result)
