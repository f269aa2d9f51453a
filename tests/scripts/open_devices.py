"""``vkbackend.devices()`` in a fresh process, under the environment the test sets (tests/test_errors.py,
tests/test_runtime.py): prints the devices, or the error it raised as its class, its status and its message, each
separated by " | "."""

import vkbackend

try:
    print(vkbackend.devices())
except vkbackend.BackendError as error:
    print(type(error).__name__, error.status.name, error.context, sep=" | ")
