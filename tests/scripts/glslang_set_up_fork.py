"""glslang's set-up begun in the background and forks around it (tests/test_glslang_lib.py). The argument is the
case: "after", a fork right after the set-up begins, in this thread; "race", a fork from another thread while this
one begins the set-up. Prints as JSON whether a second call kept the first call's thread, and, for each child:
whether it found glslang open where the set-up had begun before the fork, began a set-up of its own and compiled a
kernel to the parent's words (a child that hangs, on a lock inherited held, counts as failed)."""

import hashlib
import json
import os
import sys
import tempfile
import threading

from _reliability import forked_check

from vkbackend import glslang_lib

KERNEL = """#version 450
layout(local_size_x = 4) in;
layout(std430, binding = 0) buffer B { uint b[]; };
void main() { b[gl_GlobalInvocationID.x] = 7u; }
"""
words_file = os.path.join(tempfile.mkdtemp(), "child")


def digest() -> str:
    return hashlib.sha256(glslang_lib.compile_source(KERNEL, (), "main", "vulkan1.2", "kernel.comp") or b"").hexdigest()


def child() -> bool:
    begun = glslang_lib._set_up_thread is not None  # the parent's set-up had begun: it ended before the fork
    if begun and glslang_lib._state.get("ok") is not True:
        return False
    glslang_lib.set_up_in_background()  # a lock inherited held would hang here
    if not begun:
        glslang_lib._set_up_thread.join()
    with open(words_file, "w") as f:
        f.write(digest())
    return True


children = []
if sys.argv[1] == "after":
    glslang_lib.set_up_in_background()
    children.append(forked_check(child, timeout_s=30))
else:
    forked = []
    forker = threading.Thread(target=lambda: forked.append(forked_check(child, timeout_s=30)))
    forker.start()
    glslang_lib.set_up_in_background()
    forker.join()
    children += forked
thread = glslang_lib._set_up_thread
glslang_lib.set_up_in_background()
result = {"one_thread": thread is not None and glslang_lib._set_up_thread is thread}
thread.join()
children.append(forked_check(child, timeout_s=30))  # and a fork after the set-up has ended
with open(words_file) as f:
    result["children"] = children + [f.read() == digest()]
print(json.dumps(result))
