"""One step of the pipeline cache's life across processes (tests/test_programs.py), in the cache directory
``VKBACKEND_CACHE_DIR``: compile the modules of a folder of .spv files (the first argument) on a device, run one, and
then, by the mode (the second argument):

- "exit": leave the device open, so that the interpreter's exit closes it and saves the cache;
- "close": close it, which saves the cache;
- "variants": for each pair of the arguments that follow (a file of bytes, the cache's path), install the bytes as
  the cache, then open, use and close a device.

Prints COMPILED with the number of modules, or VARIANT OK and each file's name, and the log; fails (an assertion) on
a wrong result or a validation message.
"""

import glob
import io
import logging
import os
import shutil
import sys

import numpy as np

import vkbackend
from vkbackend import discovery

spv_dir, mode = sys.argv[1], sys.argv[2]
variants = sys.argv[3:]  # mode "variants": (file of bytes to install as the cache, cache path) pairs
log = io.StringIO()
handler = logging.StreamHandler(log)
logger = logging.getLogger("vkbackend")
logger.addHandler(handler)
logger.setLevel(logging.INFO)
spirvs = [open(f, "rb").read() for f in sorted(glob.glob(os.path.join(spv_dir, "*.spv")))]
affine = open(os.path.join(spv_dir, "affine.spv"), "rb").read()


def use_device():
    """Open the device, compile every module, run the affine kernel and check its result; (the device, how many
    modules were compiled)."""
    dev = vkbackend.devices()[0]
    progs = [dev.compile(s) for s in spirvs]
    prog = dev.compile(affine)
    pool = dev.memory_pool
    x = np.arange(256, dtype=np.float32)
    bx, by = pool.allocate(1024), pool.allocate(1024)
    pool.host_to_pool(x, bx)
    dev.launch(prog, [bx, by], [2.0, 1.0, 256], (4, 1, 1))
    y = np.empty(256, np.float32)
    pool.pool_to_host(by, y)
    assert (y == 2 * x + 1).all()
    return dev, len(progs)


if mode == "variants":
    for i in range(0, len(variants), 2):
        shutil.copyfile(variants[i], variants[i + 1])
        dev, n = use_device()
        dev.close()
        if os.path.basename(variants[i]) == "own_header_garbage_body":
            # The header passes, so the body reaches the driver, which may say that it cannot use it: NVIDIA's
            # (580.159.04 on an H200) reports this one warning through the debug messenger, and nothing else.
            left = (
                discovery.validation_messages()
                .replace("[warning] PipelineCache: unable to load pipeline cache entry", "")
                .strip()
            )
            assert not left, left
        print("VARIANT OK", os.path.basename(variants[i]))
else:
    dev, n = use_device()
    if mode == "close":
        dev.close()
    print("COMPILED", n)
messages = discovery.validation_messages()
assert not messages, messages
print("LOG:" + log.getvalue().replace("\n", " | "))
# mode "exit": the interpreter's exit closes the device and saves the cache
