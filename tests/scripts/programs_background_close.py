"""close() while pipelines are still being made in the background, launches of them queued behind
(tests/test_programs.py): close waits for them, and no Vulkan object is left. Then, on a new device, a background
compile still checking its SPIR-V as the device closes: it raises the closed error, and nothing is made on the
destroyed device."""

import threading
import time

from _reliability import AFFINE, groups
from isolated import affine_scene, outcome, report

import vkbackend
from vkbackend import pipelines, testing, validation

result = {}
dev, pool, prog, buf, x = affine_scene()
pool.host_to_pool(x, buf)
gate, made = threading.Event(), threading.Event()
make = pipelines.make


def held(*args):
    gate.wait(30)
    try:
        return make(*args)
    finally:
        made.set()


def tagged(tag: int) -> bytes:
    """AFFINE under another generator word: the same code, another program."""
    spirv = bytearray(vkbackend.compile_glsl(AFFINE))
    spirv[8:12] = (0x7E570000 | tag).to_bytes(4, "little")
    return bytes(spirv)


pipelines.make = held
progs = [dev.compile(tagged(tag), background=True) for tag in range(3)]
result["returned_early"] = not made.is_set()  # returned while every pipeline was still held
for p in progs:
    dev.launch(p, [buf], [256, 2, 1], groups(256))
threading.Timer(0.3, gate.set).start()
result["close"] = outcome(dev.close)[0]
result["live_after_close"] = {kind: n for kind, n in testing.live_objects().items() if n}
pipelines.make = make

dev = vkbackend.devices()[0]  # a new device; its compile is held while it checks the SPIR-V, and the device closes
checking, go_on = threading.Event(), threading.Event()
check = type(validation.validator).check


def held_check(self, *args):
    checking.set()
    go_on.wait(30)
    return check(self, *args)


type(validation.validator).check = held_check
compiled = {}
compiler = threading.Thread(
    target=lambda: compiled.update(status=outcome(dev.compile, tagged(99), "main", False, True)[0])
)
compiler.start()
checking.wait(30)
result["close_racing"] = outcome(dev.close)[0]
go_on.set()
compiler.join(30)
type(validation.validator).check = check
result["compile_during_close"] = compiled.get("status")
time.sleep(0.1)
result["live_at_end"] = {kind: n for kind, n in testing.live_objects().items() if n}
report(result)
