"""Small read-backs after a launch, with direct reads as the environment sets them (tests/test_memory.py): the
values each read brought, the copies the reads queued, and what a read reports after a launch whose submit failed."""

import numpy as np
from _reliability import groups
from isolated import affine_scene, outcome, report

from vkbackend import testing
from vkbackend.memory.pool import DIRECT_READ_MAX

result = {}
dev, pool, prog, buf, x = affine_scene()
pool.host_to_pool(x, buf)
dev.sync()
result["mapped"] = pool.memory.chunk_type is not None
copies = dev.stats()["copies"]
dev.launch(prog, [buf], [256, 3, 1], groups(256))  # the sync point of the first read must wait for it
want = x * 3 + 1
word = np.empty(1, np.uint32)
pool.pool_to_host(buf, word, 8)
most = np.empty(DIRECT_READ_MAX // 4, np.uint32)
pool.pool_to_host(buf, most, 512)
view = pool.view(buf, 256, 256)
part = np.empty(4, np.uint32)
pool.pool_to_host(view, part, 16)
result["right"] = [
    bool(word[0] == want[2]),
    bool((most == want[128 : 128 + most.size]).all()),
    bool((part == want[68:72]).all()),
]
result["copies"] = dev.stats()["copies"] - copies
copies = dev.stats()["copies"]
more = np.empty(DIRECT_READ_MAX // 4 + 1, np.uint32)
pool.pool_to_host(buf, more)
result["more_copies"] = dev.stats()["copies"] - copies
result["more_right"] = bool((more == want[: more.size]).all())
testing.inject("vkQueueSubmit", "VK_ERROR_OUT_OF_HOST_MEMORY")
dev.launch(prog, [buf], [256, 5, 0], groups(256))  # lost with its batch
result["after_failure"] = outcome(pool.pool_to_host, buf, word)[0]
pool.pool_to_host(buf, word)
result["kept"] = int(word[0]) == int(want[0])
pool.release(view)
pool.release(buf)
dev.close()
report(result)
