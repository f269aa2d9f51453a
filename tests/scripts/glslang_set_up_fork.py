"""glslang's set-up begun in the background, and a fork at once (tests/test_glslang_lib.py). Prints as JSON whether
a second call left the first call's thread in place, whether the forked child found the library open and compiled a
kernel with it, and whether the parent then compiled the same kernel to the same words."""

import json

from _reliability import forked_check

from vkbackend import glslang_lib

KERNEL = """#version 450
layout(local_size_x = 4) in;
layout(std430, binding = 0) buffer B { uint b[]; };
void main() { b[gl_GlobalInvocationID.x] = 7u; }
"""


def compiled() -> bytes | None:
    return glslang_lib.compile_source(KERNEL, (), "main", "vulkan1.2", "kernel.comp")


glslang_lib.set_up_in_background()
thread = glslang_lib._set_up
glslang_lib.set_up_in_background()
result = {"one_thread": glslang_lib._set_up is thread and thread is not None}


def child() -> bool:
    # the set-up ended before the fork, so the child's glslang is open; without the wait it would still be opening
    return glslang_lib._state.get("ok") is True and compiled() is not None


result["child"] = forked_check(child)
thread.join()
result["parent"] = compiled() is not None and compiled() == compiled()
print(json.dumps(result))
