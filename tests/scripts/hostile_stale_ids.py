"""Ids kept across close() and devices() again, and junk that equals an id's value: what each call does with them
(tests/test_hostile.py)."""

import numpy as np
from _reliability import AFFINE, FILL
from isolated import outcome, report

import vkbackend

result = {}
dev = vkbackend.devices()[0]
pool = dev.memory_pool
old_buf = pool.allocate(1024)
old_prog = dev.compile(vkbackend.compile_glsl(FILL))
dev.close()
dev = vkbackend.devices()[0]
pool = dev.memory_pool
new_buf = pool.allocate(1024)
pool.host_to_pool(np.full(256, 9, np.uint32), new_buf)
new_prog = dev.compile(vkbackend.compile_glsl(AFFINE))
result["distinct"] = len({old_buf, old_prog, new_buf, new_prog}) == 4
out = np.zeros(256, np.uint32)
result["stale"] = [
    outcome(pool.pool_to_host, old_buf, out)[0],
    outcome(pool.size_of, old_buf)[0],
    outcome(pool.release, old_buf)[0],
    outcome(dev.program_info, old_prog)[0],
    outcome(dev.launch, old_prog, [new_buf], [256, 1, 2], (4, 1, 1))[0],
    outcome(dev.launch, new_prog, [old_buf], [256, 1, 2], (4, 1, 1))[0],
    outcome(dev.release_program, old_prog)[0],
]
result["junk"] = [outcome(pool.size_of, j)[0] for j in (True, 1, 1.0, float(new_buf), new_prog)]
result["junk_prog"] = [
    outcome(dev.launch, j, [new_buf], [256, 1, 2], (4, 1, 1))[0] for j in (True, 0, 1.0, float(new_prog), new_buf)
]
pool.pool_to_host(new_buf, out)
result["intact"] = int(out.min()), int(out.max())
dev.close()
report(result)
