"""A garbage collection inside the pool's and the program cache's locked code, that runs the finalizers of a
LaunchGraph, a Buffer and a program's owner: whether it deadlocked, and whether their releases happened at the next
call (tests/test_hostile.py)."""

import gc
import threading

from _reliability import AFFINE, FILL, groups
from isolated import outcome, report

import vkbackend

result = {}
dev = vkbackend.devices()[0]
pool = dev.memory_pool
prog = dev.compile(vkbackend.compile_glsl(AFFINE))
before = pool.stats()["live_buffers"]
buf = pool.allocate(1024)
graph = dev.graph([(prog, [buf], [256, 2, 1], groups(256))])
graph.cycle = graph  # only the cyclic collector can free these two
holder = {"buffer": vkbackend.Buffer(dev, 256)}
holder["self"] = holder
other = dev.compile(vkbackend.compile_glsl(FILL))


class ProgramOwner:
    """Releases its program when finalized, as tinygrad's programs release theirs."""

    def __del__(self):
        dev.release_program(other)


owner = ProgramOwner()
owner.cycle = owner
del graph, holder, owner
pool.release(buf)  # the graph still holds it


def collect_inside_the_pool_lock():
    """A collection where the pool's and the program cache's code is when an allocation in them triggers one."""
    with pool._lock, dev._programs._lock:
        gc.collect()


thread = threading.Thread(target=collect_inside_the_pool_lock, daemon=True)
thread.start()
thread.join(20)
result["deadlocked"] = thread.is_alive()
if not result["deadlocked"]:
    result["live_after"] = pool.stats()["live_buffers"] - before  # stats() is a pool call: the releases happen
    dev.compile(vkbackend.compile_glsl(AFFINE))  # a compile: the program's release happens
    result["other_live"] = outcome(dev.program_info, other)[0] == "ok"  # InvalidArgument once released
    dev.close()
report(result)
