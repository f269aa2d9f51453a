"""Compiles of a module spirv-val rejects, of a kernel validated by an earlier process and of one never seen, with
the validation record in the cache directory (``VKBACKEND_CACHE_DIR``) in the state the argument names
(tests/test_hostile.py). The rejected module, tests/kernels/invalid_push_index.spv, was made by changing one word of
the affine kernel (an OpAccessChain index into the 3-member push-constant block, now member 6): reflection accepts
it, spirv-val does not, and lavapipe's compiler segfaults on it. The states of the record:

- "normal": as it is; "record": only the affine kernel is compiled, so that it alone is on record;
- "forged": the crasher's hash appended to the record, as anyone who can write the cache directory could;
- "corrupt": the record replaced by bytes that are not text;
- "no-validator": neither the spirv-tools library nor the spirv-val program to be found;
- "foreign-key": that, and the record's key readable by others (nothing on record is trusted).
"""

import hashlib
import os
import sys

from _reliability import AFFINE, FILL
from isolated import KERNELS, report

import vkbackend
from vkbackend import validation
from vkbackend.errors import BackendError

mode = sys.argv[1]
result = {}
with open(os.path.join(KERNELS, "invalid_push_index.spv"), "rb") as f:
    crasher = f.read()
cache = vkbackend.config.cache_dir()
if mode == "forged":
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / "validated-spirv.txt", "a") as f:
        f.write(hashlib.sha256(crasher).hexdigest() + "\n")
if mode == "corrupt":
    cache.mkdir(parents=True, exist_ok=True)
    (cache / "validated-spirv.txt").write_bytes(b"\xff\xfe\x00garbage\x80" * 100)
if mode in ("no-validator", "foreign-key"):
    validation.find_validator = lambda: None
    validation.spirv_tools_lib.load = lambda: False
if mode == "foreign-key":
    os.chmod(cache / "validation.key", 0o644)
dev = vkbackend.devices()[0]


def status(spirv):
    """What compiling ``spirv`` gives: "ok", or [its status, whether the error names spirv-val]."""
    try:
        dev.release_program(dev.compile(spirv))
        return "ok"
    except BackendError as error:
        return [error.status.value, "spirv-val" in error.context]


if mode == "record":
    dev.compile(vkbackend.compile_glsl(AFFINE))
else:
    result["crasher"] = status(crasher)
    result["known"] = status(vkbackend.compile_glsl(AFFINE))  # validated by the first process of the test
    unseen = FILL.replace("i * step", f"i * step + {sum(map(ord, mode))}u")
    result["new"] = status(vkbackend.compile_glsl(unseen))  # never seen
dev.close()
report(result)
