"""Faults injected at the native dispatch table (vkbackend.testing): each surfaces as the right BackendError at the
right place, nothing hangs, close() works, and after a recoverable fault the device keeps working with every buffer
the fault did not touch intact.

Recoverable faults run on the shared session device. A lost device, and faults while a device opens, need a device of
their own: those scenarios run in a fresh process (tests/_reliability.py), which also checks that the validation layer
stayed silent and that every Vulkan object was destroyed by close().
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from _reliability import AFFINE, MAP, SPIN, groups, run_isolated, spin_grids

import vkbackend
from vkbackend import testing
from vkbackend.errors import BackendError, ErrorStatus

N = 256  # uints per test buffer


@pytest.fixture(autouse=True)
def disarmed(device):
    """No fault outlives its test, and no test leaves an unreported error behind on the shared device."""
    testing.clear()
    yield
    testing.clear()
    device.sync()  # raises if a test left an asynchronous error for the next one


@pytest.fixture(scope="module")
def progs(device):
    ids = {
        "affine": device.compile(vkbackend.compile_glsl(AFFINE)),
        "map": device.compile(vkbackend.compile_glsl(MAP)),
        "spin": device.compile(vkbackend.compile_glsl(SPIN)),
    }
    yield ids
    for prog in ids.values():
        device.release_program(prog)


def read(pool, buf, n=N, dtype=np.uint32):
    out = np.empty(n, dtype)
    pool.pool_to_host(buf, out)
    return out


class Sentinels:
    """Buffers a fault must not touch: sub-allocated, a view, and one with its own memory; checked by read-back."""

    def __init__(self, pool, rng) -> None:
        self.pool = pool
        self.expect = {}
        big = pool.allocate(17 << 20)  # over the sub-allocation limit: its own VkDeviceMemory
        small = pool.allocate(N * 4)
        parent = pool.allocate(4 * N * 4)
        view = pool.view(parent, N * 4, N * 4)
        pool.release(parent)  # the view keeps it alive
        self.owned = [big, small, view]
        for buf in self.owned:
            data = rng.integers(0, 2**32, N, dtype=np.uint32)
            pool.host_to_pool(data, buf)
            self.expect[buf] = data

    def check(self) -> None:
        for buf, data in self.expect.items():
            np.testing.assert_array_equal(read(self.pool, buf), data, err_msg=f"sentinel buffer {buf} changed")

    def release(self) -> None:
        for buf in self.owned:
            self.pool.release(buf)


@pytest.fixture
def sentinels(pool):
    s = Sentinels(pool, np.random.default_rng(7))
    yield s
    s.release()


def live(device) -> dict:
    """The live Vulkan objects, less fences: the submitter makes a fence whenever more batches are in flight than
    ever before and keeps it for reuse, so their count follows the GPU's pace, not a leak (test_soak bounds it)."""
    return {kind: n for kind, n in device.stats()["live_objects"].items() if kind != "fences"}


# ----- the hook itself -------------------------------------------------------------------------------------------
def test_inject_rejects_what_it_cannot_do():
    for args in [
        ("vkNoSuchFunction", "VK_ERROR_DEVICE_LOST"),
        ("vkCmdDispatch", "VK_ERROR_DEVICE_LOST"),
        ("vkQueueSubmit", "VK_SUCCESS"),
        ("vkQueueSubmit", "VK_ERROR_NOT_A_CODE"),
        ("vkQueueSubmit", 7),
        (None, "VK_TIMEOUT"),
    ]:
        with pytest.raises(BackendError) as info:
            testing.inject(*args)
        assert info.value.status is ErrorStatus.InvalidArgument, args
    for after in (-1, 1.5, True):
        with pytest.raises(BackendError) as info:
            testing.inject("vkQueueSubmit", "VK_TIMEOUT", after)
        assert info.value.status is ErrorStatus.InvalidArgument
    assert not testing.pending()
    testing.inject("vkQueueSubmit", "VK_ERROR_DEVICE_LOST", after=5)
    assert testing.pending()
    testing.clear()
    assert not testing.pending()


def test_fault_fires_once_after_n_successes(pool):
    testing.inject("vkAllocateMemory", "VK_ERROR_OUT_OF_DEVICE_MEMORY", after=2)
    ok = [pool.allocate(17 << 20) for _ in range(2)]  # own memory each: one vkAllocateMemory per buffer
    assert testing.pending()
    with pytest.raises(BackendError) as info:
        pool.allocate(17 << 20)
    assert info.value.status is ErrorStatus.MemoryAllocation
    assert not testing.pending()
    ok.append(pool.allocate(17 << 20))  # once only
    for buf in ok:
        pool.release(buf)


# ----- out of memory -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("code", ["VK_ERROR_OUT_OF_DEVICE_MEMORY", "VK_ERROR_OUT_OF_HOST_MEMORY"])
@pytest.mark.parametrize("function", ["vkCreateBuffer", "vkAllocateMemory", "vkBindBufferMemory"])
def test_out_of_memory_on_allocate(device, pool, progs, sentinels, function, code):
    before_pool, before_live = pool.stats(), live(device)
    testing.inject(function, code)
    with pytest.raises(BackendError) as info:
        pool.allocate(32 << 20)
    assert info.value.status is ErrorStatus.MemoryAllocation
    assert function in info.value.context
    assert not testing.pending()
    assert pool.stats() == before_pool and live(device) == before_live  # nothing half-made is left behind
    # the pool still works, at both sizes, and launches still run
    big, small = pool.allocate(32 << 20), pool.allocate(N * 4)
    x = np.arange(N, dtype=np.uint32)
    pool.host_to_pool(x, small)
    device.launch(progs["affine"], [small], [N, 3, 1], groups(N))
    np.testing.assert_array_equal(read(pool, small), x * 3 + 1)
    pool.release(big)
    pool.release(small)
    sentinels.check()


def test_out_of_memory_for_a_new_chunk(device, pool, sentinels):
    """Small buffers share chunks; when a new chunk cannot be had, the allocation fails and the pool stays usable."""
    size = pool.chunk_bytes // 4  # the largest sub-allocated size
    before = pool.stats()
    testing.inject("vkAllocateMemory", "VK_ERROR_OUT_OF_DEVICE_MEMORY")
    taken, error = [], None
    for _ in range(4 * (before["chunks"] + 2)):  # enough to fill every chunk there is and ask for one more
        try:
            taken.append(pool.allocate(size))
        except BackendError as e:
            error = e
            break
    assert error is not None and error.status is ErrorStatus.MemoryAllocation, "the new chunk's allocation did not fail"
    assert "chunk" in error.context
    assert pool.stats()["memory_objects"] == before["memory_objects"]
    taken.append(pool.allocate(size))  # the next try gets its chunk
    for buf in taken:
        pool.release(buf)
    device.sync()
    sentinels.check()


# ----- submission ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("code", ["VK_ERROR_OUT_OF_HOST_MEMORY", "VK_ERROR_OUT_OF_DEVICE_MEMORY", "VK_ERROR_UNKNOWN"])
def test_failed_submit_surfaces_at_next_sync(device, pool, progs, sentinels, code):
    buf = pool.allocate(N * 4)
    x = np.arange(N, dtype=np.uint32)
    pool.host_to_pool(x, buf)
    device.sync()
    testing.inject("vkQueueSubmit", code)
    device.launch(progs["affine"], [buf], [N, 5, 7], groups(N))  # queued: no error yet
    with pytest.raises(BackendError) as info:
        device.sync()
    assert info.value.status is ErrorStatus.KernelLaunch and code in info.value.context
    assert not testing.pending()
    device.sync()  # reported once
    np.testing.assert_array_equal(read(pool, buf), x)  # nothing of the failed batch ran
    device.launch(progs["affine"], [buf], [N, 5, 7], groups(N))
    np.testing.assert_array_equal(read(pool, buf), x * 5 + 7)
    pool.release(buf)
    sentinels.check()


def test_failed_submit_fails_the_read_back_not_silently(device, pool, sentinels):
    buf = pool.allocate(N * 4)
    x = np.arange(N, dtype=np.uint32) * 3
    pool.host_to_pool(x, buf)
    device.sync()
    testing.inject("vkQueueSubmit", "VK_ERROR_OUT_OF_HOST_MEMORY")
    with pytest.raises(BackendError) as info:
        read(pool, buf)
    assert info.value.status is ErrorStatus.KernelLaunch
    np.testing.assert_array_equal(read(pool, buf), x)
    testing.inject("vkQueueSubmit", "VK_ERROR_OUT_OF_HOST_MEMORY")
    pool.host_to_pool(x + 1, buf)  # the upload is lost with its batch, and says so at the next sync point
    with pytest.raises(BackendError) as info:
        device.sync()
    assert info.value.status is ErrorStatus.KernelLaunch
    np.testing.assert_array_equal(read(pool, buf), x)
    pool.host_to_pool(x + 1, buf)
    np.testing.assert_array_equal(read(pool, buf), x + 1)
    pool.release(buf)
    sentinels.check()


@pytest.mark.parametrize("function", ["vkBeginCommandBuffer", "vkEndCommandBuffer"])
def test_failed_recording_surfaces_at_next_sync(device, pool, progs, function):
    buf = pool.allocate(N * 4)
    x = np.arange(N, dtype=np.uint32)
    pool.host_to_pool(x, buf)
    device.sync()
    testing.inject(function, "VK_ERROR_OUT_OF_HOST_MEMORY")
    device.launch(progs["affine"], [buf], [N, 2, 0], groups(N))
    with pytest.raises(BackendError) as info:
        device.sync()
    assert info.value.status is ErrorStatus.KernelLaunch
    device.launch(progs["affine"], [buf], [N, 2, 0], groups(N))
    np.testing.assert_array_equal(read(pool, buf), x * 2)
    pool.release(buf)


KEEP = """
dev = vkbackend.devices()[0]
pool = dev.memory_pool
spin, affine = dev.compile(vkbackend.compile_glsl(SPIN)), dev.compile(vkbackend.compile_glsl(AFFINE))
busy = pool.allocate(17 << 20)  # its own memory: freeing it early is a vkFreeMemory in use
other = pool.allocate(1024)
pool.host_to_pool(np.zeros(256, np.uint32), busy)
dev.sync()
before = dev.stats()["batches"]
dev.launch(spin, [busy], [SPIN_INNER], json.loads(os.environ["SPIN_GRIDS"])[0])  # about half a second
deadline = time.monotonic() + 10
while dev.stats()["batches"] == before and time.monotonic() < deadline:  # until the worker has submitted it
    time.sleep(0.001)
dev.launch(affine, [other], [256, 1, 1], groups(256))  # waits in the window behind the running batch
pool.release(busy)                                      # its free waits for the GPU
testing.inject("vkQueueSubmit", "VK_ERROR_OUT_OF_HOST_MEMORY")  # ... and the window it waits with fails
result["sync"] = outcome(dev.sync)[0]
pool.release(other)
result["after"] = outcome(dev.sync)[0]
dev.close()
result["live_end"] = live()
"""


def test_failed_submit_keeps_released_buffers_until_the_gpu_is_done(device):
    """A buffer released while an earlier batch still uses it must outlive that batch even when the next submit
    fails: freed early, its memory went back to the driver under the running kernel (lavapipe segfaulted)."""
    r = run_isolated(KEEP, env={"SPIN_GRIDS": json.dumps(spin_grids(device, 0.5))})
    assert r["sync"] == "KernelLaunch" and r["after"] == "ok"
    assert all(count == 0 for count in r["live_end"].values()), r["live_end"]
    assert r["validation"] == ""


# ----- waiting: deadlines and timeouts --------------------------------------------------------------------------
def test_a_wait_that_finds_the_fence_not_ready_keeps_waiting(device, pool, progs):
    """Fences are polled (csrc/fence.c), so a VK_TIMEOUT from vkWaitForFences means "not yet", not "too late": the
    wait goes on and the launch's result is right. The deadline itself is tested with a real long kernel below."""
    buf = pool.allocate(N * 4)
    x = np.arange(N, dtype=np.uint32)
    pool.host_to_pool(x, buf)
    device.sync()
    testing.inject("vkWaitForFences", "VK_TIMEOUT")
    assert device.launch_timed(progs["affine"], [buf], [N, 3, 0], groups(N)) > 0
    assert not testing.pending()  # the injected result was seen
    np.testing.assert_array_equal(read(pool, buf), x * 3)
    pool.release(buf)


def test_injected_wait_timeouts_never_hang_or_lose_launches(device, pool, progs):
    """Wherever a VK_TIMEOUT lands (a poll of the worker, or a sync point's wait), nothing blocks, nothing fails and
    every launch runs exactly once."""
    buf = pool.allocate(N * 4)
    x = np.arange(N, dtype=np.uint32)
    pool.host_to_pool(x, buf)
    device.sync()
    expect = x.copy()
    for round_ in range(20):
        testing.inject("vkWaitForFences", "VK_TIMEOUT", after=round_ % 3)
        for _ in range(10):
            device.launch(progs["affine"], [buf], [N, 1, 3], groups(N))
            expect = expect + np.uint32(3)
        device.sync()
    testing.clear()
    device.sync()
    np.testing.assert_array_equal(read(pool, buf), expect)
    pool.release(buf)


# ----- compilation ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("function", ["vkCreateShaderModule", "vkCreatePipelineLayout", "vkCreateComputePipelines"])
def test_failed_pipeline_creation_is_kernel_compilation(device, pool, progs, sentinels, function):
    spirv = vkbackend.compile_glsl(AFFINE, entry_point=f"fault_{function}")  # SPIR-V no earlier test compiled
    before = live(device)
    testing.inject(function, "VK_ERROR_OUT_OF_HOST_MEMORY")
    with pytest.raises(BackendError) as info:
        device.compile(spirv, f"fault_{function}")
    assert info.value.status is ErrorStatus.KernelCompilation and function in info.value.context
    assert live(device) == before  # what was made before the failure was destroyed
    prog = device.compile(spirv, f"fault_{function}")  # a failure is not cached
    buf = pool.allocate(N * 4)
    x = np.arange(N, dtype=np.uint32)
    pool.host_to_pool(x, buf)
    device.launch(prog, [buf], [N, 4, 4], groups(N))
    np.testing.assert_array_equal(read(pool, buf), x * 4 + 4)
    pool.release(buf)
    device.release_program(prog)
    sentinels.check()


# ----- in a process of their own -----------------------------------------------------------------------------------
LOST = """
dev = vkbackend.devices()[0]
pool = dev.memory_pool
spirv = vkbackend.compile_glsl(AFFINE)
prog = dev.compile(spirv)
buf = pool.allocate(1024)
x = np.arange(256, dtype=np.uint32)
pool.host_to_pool(x, buf)
dev.sync()
testing.inject({function!r}, "VK_ERROR_DEVICE_LOST")
first = []
for _ in range(200):  # a fence may be polled or waited on: go on until the fault has fired and been reported
    if {timed}:
        status, _ = outcome(dev.launch_timed, prog, [buf], [256, 3, 1], groups(256))
    else:
        dev.launch(prog, [buf], [256, 3, 1], groups(256))
        time.sleep(0.002)  # let the worker poll its fences on its own too
        status, _ = outcome(dev.sync)
    if status != "ok":
        first.append(status)
        break
result["fired"] = not testing.pending()
testing.clear()
result["first"] = first
out = np.empty(256, np.uint32)
calls = {{
    "launch": lambda: dev.launch(prog, [buf], [256, 3, 1], groups(256)),
    "launch_timed": lambda: dev.launch_timed(prog, [buf], [256, 3, 1], groups(256)),
    "sync": dev.sync, "compile": lambda: dev.compile(spirv), "allocate": lambda: pool.allocate(64),
    "host_to_pool": lambda: pool.host_to_pool(x, buf), "pool_to_host": lambda: pool.pool_to_host(buf, out),
    "pool_to_pool": lambda: pool.pool_to_pool(pool, buf, buf),
}}
result["later"] = {{name: outcome(fn) for name, fn in calls.items()}}
result["release"] = outcome(pool.release, buf)[0]
result["close"] = outcome(dev.close)
result["live_after_close"] = live()
dev = vkbackend.devices()[0]  # a fresh device
pool = dev.memory_pool
prog = dev.compile(spirv)
buf = pool.allocate(1024)
pool.host_to_pool(x, buf)
dev.launch(prog, [buf], [256, 3, 1], groups(256))
pool.pool_to_host(buf, out)
result["fresh_ok"] = bool((out == x * 3 + 1).all())
dev.close()
result["live_end"] = live()
"""


@pytest.mark.parametrize("function", ["vkWaitForFences", "vkGetFenceStatus", "vkQueueSubmit", "vkGetQueryPoolResults"])
def test_device_lost_is_sticky_and_fails_fast(function):
    """Wherever the loss is seen (a fence polled or waited on, a submit, a timed launch's query read on the worker),
    the call at hand raises DeviceLost and every later one fails fast with it."""
    r = run_isolated(LOST.format(function=function, timed=function == "vkGetQueryPoolResults"))
    assert r["fired"] and r["first"] == ["DeviceLost"]
    for name, (status, seconds) in r["later"].items():
        assert status == "DeviceLost", (name, status)
        assert seconds < 0.5, (name, seconds)
    assert r["release"] == "ok"  # letting go of buffers stays possible
    status, seconds = r["close"]
    assert status == "ok" and seconds < 10
    assert r["live_after_close"]["devices"] == 0
    assert r["fresh_ok"]
    assert all(count == 0 for count in r["live_end"].values()), r["live_end"]
    assert r["validation"] == ""


OPEN = """
baseline = live()
opened = {{}}
for function, code in {cases!r}:
    testing.inject(function, code)
    status, _ = outcome(vkbackend.devices)
    opened[function] = [status, not testing.pending(), live() == baseline,
                        not vkbackend.discovery.Instance._current._devices, __import__("threading").active_count()]
    testing.clear()
result["opened"] = opened
dev = vkbackend.devices()[0]
pool = dev.memory_pool
buf = pool.allocate(1024)
x = np.arange(256, dtype=np.uint32)
pool.host_to_pool(x, buf)
out = np.empty(256, np.uint32)
pool.pool_to_host(buf, out)
result["works"] = bool((out == x).all())
testing.inject("vkDeviceWaitIdle", "VK_ERROR_DEVICE_LOST")  # close() goes on regardless
result["close"] = outcome(dev.close)[0]
result["live_end"] = live()
"""

OPEN_CASES = [
    ("vkCreateDevice", "VK_ERROR_INITIALIZATION_FAILED", "Initialization"),
    ("vkCreateCommandPool", "VK_ERROR_OUT_OF_HOST_MEMORY", "Initialization"),
    ("vkCreateQueryPool", "VK_ERROR_OUT_OF_HOST_MEMORY", "Initialization"),
    ("vkCreatePipelineCache", "VK_ERROR_OUT_OF_HOST_MEMORY", "Initialization"),
    ("vkCreateBuffer", "VK_ERROR_OUT_OF_DEVICE_MEMORY", "MemoryAllocation"),
    ("vkAllocateMemory", "VK_ERROR_OUT_OF_DEVICE_MEMORY", "MemoryAllocation"),
    ("vkBindBufferMemory", "VK_ERROR_OUT_OF_DEVICE_MEMORY", "MemoryAllocation"),
    ("vkMapMemory", "VK_ERROR_MEMORY_MAP_FAILED", "MemoryAllocation"),
]


def test_faults_while_a_device_opens_leave_nothing_behind(tmp_path):
    """vkMapMemory is called once per device, when the pool maps its staging ring at open: a failure there (and in
    every other call of the open) is a clean error from devices(), leaves no Vulkan object or thread behind, and the
    next devices() opens the device."""
    r = run_isolated(OPEN.format(cases=[(f, c) for f, c, _ in OPEN_CASES]), env={"VKBACKEND_CACHE_DIR": str(tmp_path)})
    threads = {entry[4] for entry in r["opened"].values()}
    for function, _, status in OPEN_CASES:
        got, fired, nothing_left, none_open, _ = r["opened"][function]
        assert fired, function
        assert got == status, (function, got)
        assert nothing_left and none_open, function
    assert len(threads) == 1, f"worker threads left behind: {r['opened']}"
    assert r["works"] and r["close"] == "ok"
    assert all(count == 0 for count in r["live_end"].values()), r["live_end"]
    assert r["validation"] == ""


BATCH = """
dev = vkbackend.devices()[0]
pool = dev.memory_pool
prog = dev.compile(vkbackend.compile_glsl(AFFINE))
buf = pool.allocate(1024)
x = np.arange(256, dtype=np.uint32)
# A fresh device has no spare batch, so its first submission calls both (a later one may reuse a batch)
function = os.environ["FAULT_FUNCTION"]
testing.inject(function, "VK_ERROR_OUT_OF_DEVICE_MEMORY")
pool.host_to_pool(x + 100, buf)
dev.launch(prog, [buf], [256, 1, 1], groups(256))
result["fault"] = [function, outcome(dev.sync)[0], not testing.pending()]
pool.host_to_pool(x, buf)
dev.launch(prog, [buf], [256, 1, 1], groups(256))
got = np.empty(256, np.uint32)
pool.pool_to_host(buf, got)
result["after"] = got.tolist()[:4]
dev.close()
result["live_end"] = live()
"""


@pytest.mark.parametrize("function", ["vkAllocateCommandBuffers", "vkCreateFence"])
def test_failed_batch_creation_is_memory_allocation_and_recoverable(function):
    r = run_isolated(BATCH, env={"FAULT_FUNCTION": function})
    _, status, fired = r["fault"]
    assert fired and status == "MemoryAllocation", (function, status)
    assert r["after"] == [1, 2, 3, 4]  # the failed batch's upload and launch never ran; the last ones did
    assert all(count == 0 for count in r["live_end"].values()), r["live_end"]
    assert r["validation"] == ""


DEADLINE = """
dev = vkbackend.devices()[0]
pool = dev.memory_pool
prog = dev.compile(vkbackend.compile_glsl(SPIN))
buf, spare = pool.allocate(4096), pool.allocate(1024)
x = np.arange(256, dtype=np.uint32)
pool.host_to_pool(np.zeros(1024, np.uint32), buf)
pool.host_to_pool(x, spare)
dev.sync()
out = np.empty(256, np.uint32)
grids = json.loads(os.environ["SPIN_GRIDS"])
dev.launch(prog, [buf], [SPIN_INNER], grids[0])  # seconds: far past the deadline
result["sync"] = outcome(dev.sync)
# more timed-out read-backs than the staging ring has slots: each must give its slot back
result["reads"] = [outcome(pool.pool_to_host, spare, out) for _ in range(len(dev.memory_pool.transfers.ring.free) + 2)]
until = time.monotonic() + 40  # the kernel goes on: sync points time out until it is done, then succeed
while (sync_after := outcome(dev.sync))[0] != "ok" and time.monotonic() < until:
    pass
result["sync_after"] = sync_after
result["read_after"] = outcome(pool.pool_to_host, spare, out)
result["read_ok"] = bool((out == x).all())
dev.launch(prog, [buf], [SPIN_INNER], grids[1])
result["sync2"] = outcome(dev.sync)
result["close"] = outcome(dev.close)  # its own drain times out too: the device is abandoned, not destroyed
result["abandoned"] = dev._ctx.abandoned
"""


def test_sync_deadline_turns_long_waits_into_kernel_sync(device):
    """VKBACKEND_SYNC_TIMEOUT_S bounds every wait: a sync point and read-backs behind a long kernel raise KernelSync
    near the deadline; the work still completes, later sync points succeed, close() behind a long kernel returns by
    the deadline (tests/test_hostile.py follows such a device to the process's exit)."""
    grids = spin_grids(device, 10, 5)  # measured here: the child's deadline is shorter than the measuring launches
    r = run_isolated(DEADLINE, env={"VKBACKEND_SYNC_TIMEOUT_S": "0.2", "SPIN_GRIDS": json.dumps(grids)})
    for status, seconds in [r["sync"], *r["reads"], r["sync2"]]:
        assert status == "KernelSync" and seconds < 0.9, (status, seconds)
    assert r["sync_after"][0] == "ok" and r["read_after"][0] == "ok" and r["read_ok"]
    assert r["close"][0] == "ok" and r["close"][1] < 1.5 and r["abandoned"]
    assert r["validation"] == ""


RESET = """
dev = vkbackend.devices()[0]
pool = dev.memory_pool
prog = dev.compile(vkbackend.compile_glsl(AFFINE))
buf = pool.allocate(1024)
x = np.arange(256, dtype=np.uint32)
pool.host_to_pool(x, buf)
dev.sync()
testing.inject("vkResetFences", "VK_ERROR_OUT_OF_DEVICE_MEMORY")
dev.launch(prog, [buf], [256, 1, 1], groups(256))
result["first"] = outcome(dev.sync)[0]
for _ in range(20):
    dev.launch(prog, [buf], [256, 1, 1], groups(256))
    time.sleep(0.001)
out = np.empty(256, np.uint32)
result["read"] = outcome(pool.pool_to_host, buf, out)[0]
result["ok"] = bool((out == x + 21).all())
result["close"] = outcome(dev.close)[0]
result["live_end"] = live()
"""


def test_a_fence_that_cannot_be_reset_is_never_reused():
    """Reusing the still-signalled fence crashed the process (std::future_error in the validation layer); its batch is
    now set aside and destroyed at close."""
    r = run_isolated(RESET)
    assert r["first"] == "KernelSync"
    assert r["read"] == "ok" and r["ok"] and r["close"] == "ok"
    assert all(count == 0 for count in r["live_end"].values()), r["live_end"]
    assert r["validation"] == ""


DESCRIPTORS = """
dev = vkbackend.devices()[0]
pool = dev.memory_pool
result["push"] = dev.info.push_descriptors
prog = dev.compile(vkbackend.compile_glsl(AFFINE))
buf = pool.allocate(1024)
x = np.arange(256, dtype=np.uint32)
pool.host_to_pool(x, buf)
dev.sync()
statuses = []
for function in ("vkCreateDescriptorPool", "vkAllocateDescriptorSets"):
    testing.inject(function, "VK_ERROR_OUT_OF_POOL_MEMORY" if function == "vkAllocateDescriptorSets"
                   else "VK_ERROR_OUT_OF_HOST_MEMORY")
    for _ in range(3):
        dev.launch(prog, [buf], [256, 1, 1], groups(256))
    statuses.append([function, outcome(dev.sync)[0], not testing.pending()])
result["statuses"] = statuses
out = np.empty(256, np.uint32)
pool.pool_to_host(buf, out)
result["value"] = int(out[0])
result["close"] = outcome(dev.close)[0]
result["live_end"] = live()
"""


def test_descriptor_pool_faults_without_push_descriptors():
    """Without VK_KHR_push_descriptor, sets come from descriptor pools: a pool that cannot be created fails its batch
    (MemoryAllocation at the next sync point); a full pool is grown, and the launches run."""
    r = run_isolated(DESCRIPTORS, env={"VKBACKEND_PUSH_DESCRIPTORS": "0"})
    assert r["push"] is False
    (create, create_status, fired1), (alloc, alloc_status, fired2) = r["statuses"]
    assert fired1 and create_status == "MemoryAllocation"
    assert fired2 and alloc_status == "ok"
    assert r["value"] == 3  # the first three launches were lost with their batch, the next three ran
    assert r["close"] == "ok"
    assert all(count == 0 for count in r["live_end"].values()), r["live_end"]
    assert r["validation"] == ""


RESET_POOL = """
dev = vkbackend.devices()[0]
pool = dev.memory_pool
prog = dev.compile(vkbackend.compile_glsl(AFFINE))
buf = pool.allocate(1024)
pool.host_to_pool(np.zeros(256, np.uint32), buf)
dev.launch(prog, [buf], [256, 1, 1], groups(256))
dev.sync()
testing.inject("vkResetDescriptorPool", "VK_ERROR_OUT_OF_HOST_MEMORY")
dev.launch(prog, [buf], [256, 1, 1], groups(256))
out = np.empty(256, np.uint32)
result["first"] = outcome(pool.pool_to_host, buf, out)
result["fired"] = not testing.pending()
result["second"] = outcome(pool.pool_to_host, buf, out)
result["value"] = int(out[0])
result["staging_free"] = [len(pool.transfers.ring.free), pool.transfers.ring.count]
result["close"] = outcome(dev.close)[0]
result["live_end"] = live()
"""


def test_a_descriptor_pool_that_cannot_be_reset_loses_no_completion():
    """Its batch's completions (read-back tickets, frees, staging buffers given back) ran after the reset: when the
    reset failed they were lost, and the read-back waited out the deadline."""
    r = run_isolated(RESET_POOL, env={"VKBACKEND_PUSH_DESCRIPTORS": "0", "VKBACKEND_SYNC_TIMEOUT_S": "20"})
    assert r["fired"]
    status, seconds = r["first"]
    assert status == "KernelSync" and seconds < 10, r["first"]  # the reset's failure, at once
    assert r["second"][0] == "ok" and r["value"] == 2
    assert r["staging_free"][0] == r["staging_free"][1]
    assert r["close"] == "ok" and all(count == 0 for count in r["live_end"].values()), r["live_end"]
