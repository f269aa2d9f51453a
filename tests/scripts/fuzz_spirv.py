"""Every prefix of three valid modules, and random words and bytes (hypothesis, as many examples as the argument
says), compiled: the status of each (tests/test_fuzz.py)."""

import struct
import sys

from _reliability import AFFINE, MIX
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from isolated import report

import vkbackend
from vkbackend.errors import BackendError

examples = int(sys.argv[1])
result = {}
dev = vkbackend.devices()[0]
statuses = {}  # how many modules got each status


def compile_status(data):
    """The status compiling ``data`` ends with ("ok", a BackendError's, or "raw" and any other exception's type)."""
    try:
        dev.compile(data)
        return "ok"
    except BackendError as error:
        return error.status.value
    except Exception as error:  # anything but BackendError is a failure of the test
        return "raw " + type(error).__name__


def tally(status):
    """Count one module that ended with ``status``."""
    statuses[status] = statuses.get(status, 0) + 1


# A module with a function call besides main.
HELPER = """#version 450
layout(local_size_x = 64) in;
layout(std430, binding = 0) buffer A { uint a[]; };
uint helper(uint x) { return x * 3u + 1u; }
void main() { a[gl_GlobalInvocationID.x] = helper(a[gl_GlobalInvocationID.x]); }
"""
modules = [vkbackend.compile_glsl(src) for src in (AFFINE, MIX, HELPER)]
full_ok = []
for module in modules:
    full_ok.append(compile_status(module))
    for cut in range(len(module)):  # every prefix, whole words or not
        tally(compile_status(module[:cut]))

settings_ = settings(max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck))


@settings_
@given(st.lists(st.integers(0, 2**32 - 1), max_size=200), st.booleans(), st.integers(0, 7))
def random_words(words, header, version):
    """Random 32-bit words, behind a SPIR-V header of a random version or not."""
    if header:
        words = [0x07230203, 0x00010000 + (version << 8), 0, 1000, 0] + words
    tally(compile_status(struct.pack(f"<{len(words)}I", *words)))


random_words()


@settings_
@given(st.binary(max_size=800))
def random_bytes(data):
    """Random bytes."""
    tally(compile_status(data))


random_bytes()
result["statuses"] = statuses
result["full_ok"] = full_ok
result["live_pipelines"] = dev.stats()["live_objects"]["pipelines"]
dev.close()
report(result)
