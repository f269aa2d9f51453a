"""What messages call things: a buffer by its number and size (``buffer #12 (4096 bytes)``), a program by its number
and entry point (``program #3 (main)``), a scalar's type by the name numpy gives it (``uint32``), never a 53-bit id
or a struct code; and each says what to pass instead."""

from __future__ import annotations

import re

import numpy as np
import pytest
from _reliability import FILL

import vkbackend
from vkbackend import Buffer, ids
from vkbackend.errors import BackendError, ErrorStatus, InvalidArgumentError

RAW_ID = re.compile(r"\d{12,}")  # an id is 16 digits; no size or count a test makes has 12

SCALARS = """#version 450
layout(local_size_x = 64) in;
layout(push_constant) uniform P { uint n; float scale; int bias; };
layout(std430, set = 0, binding = 0) buffer A { float a[]; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < n) a[i] = a[i] * scale + float(bias);
}
"""


def message(call, *args) -> str:
    """The context of the InvalidArgument error that ``call(*args)`` raises, checked to show no raw id."""
    with pytest.raises(BackendError) as caught:
        call(*args)
    assert caught.value.status is ErrorStatus.InvalidArgument, caught.value
    assert not RAW_ID.search(caught.value.context), caught.value.context
    return caught.value.context


def test_ids_say_their_kind_and_number():
    first_buffer, first_program = ids.next_buffer_id(), ids.next_program_id()
    second_buffer = ids.next_buffer_id()
    assert ids.kind_of(first_buffer) == ids.BUFFER and ids.kind_of(first_program) == ids.PROGRAM
    assert ids.number(second_buffer) == ids.number(first_buffer) + 1
    assert ids.label(np.int64(first_program)) == f"program #{ids.number(first_program)}"
    assert len({first_buffer, first_program, second_buffer}) == 3 and all(i % 2 for i in (first_buffer, first_program))
    for junk in (True, 1, 2**53, 1.0, float(first_buffer), "1", None, first_buffer + 1):
        assert ids.kind_of(junk) is None and ids.label(junk) is None, junk


def test_a_value_that_is_no_id_of_its_kind_says_what_it_is():
    buf, prog = ids.next_buffer_id(), ids.next_program_id()
    assert ids.misnamed(buf, ids.BUFFER, "do this") is None and ids.misnamed(prog, ids.PROGRAM, "do this") is None
    assert ids.misnamed(prog, ids.BUFFER, "do this") == f"{ids.label(prog)} is a program's id, not a buffer's; do this"
    assert ids.misnamed(buf, ids.PROGRAM, "do that") == f"{ids.label(buf)} is a buffer's id, not a program's; do that"
    assert ids.misnamed(7, ids.PROGRAM, "do that") == "7 is not a program id; do that"
    assert ids.misnamed(np.int64(7), ids.BUFFER, "do this").endswith(" (int64) is not a buffer id; do this")
    assert ids.misnamed(None, ids.BUFFER, "do this") == "None (NoneType) is not a buffer id; do this"


def test_a_released_buffer_is_named_by_its_number(device, pool):
    fill = device.compile(vkbackend.compile_glsl(FILL))
    buf = pool.allocate(1024)
    pool.release(buf)
    n = ids.number(buf)
    try:
        for text in (
            message(pool.size_of, buf),
            message(pool.host_to_pool, np.zeros(4, np.uint32), buf),
            message(device.launch, fill, [buf], [256, 0, 1], (4, 1, 1)),
        ):
            assert f"buffer #{n} was released" in text and "not a live buffer of" in text, text
            assert "allocate a new one" in text, text
        assert message(device.launch, fill, [buf], [256, 0, 1], (4, 1, 1)).startswith("launch of program #")
        assert "never handed out" in message(pool.size_of, buf + 4000)
        assert "is a program's id, not a buffer's" in message(pool.size_of, fill)
        assert "1.0 (float) is not a buffer id" in message(pool.retain, 1.0)
    finally:
        device.release_program(fill)


def test_live_buffers_and_views_are_named_with_their_sizes(device, pool):
    align = device.info.min_storage_buffer_offset_alignment
    buf = pool.allocate(4 * align)
    view = pool.view(buf, align, align)
    try:
        assert pool.describe(buf) == f"buffer #{ids.number(buf)} ({4 * align} bytes)"
        assert pool.describe(view) == f"buffer #{ids.number(view)} ({align} bytes at byte {align} of buffer #" + (
            f"{ids.number(buf)})"
        )
        text = message(pool.host_to_pool, np.zeros(align + 4, np.uint8), view)
        assert text == f"host_to_pool: {align + 4} bytes at offset 0 do not fit in {pool.describe(view)}", text
        assert f"view: a view of {8 * align} bytes at offset 0 does not fit in {pool.describe(buf)}" == message(
            pool.view, buf, 0, 8 * align
        )
        pool.release(buf)
        assert f"release: {pool.describe(buf)} has no reference left of its own" in message(pool.release, buf)
    finally:
        pool.release(view)


def test_an_unknown_program_is_named_by_its_number(device, pool):
    spirv = vkbackend.compile_glsl(FILL)
    prog = device.compile(spirv)
    device.release_program(prog)
    buf = pool.allocate(1024)
    try:
        for call, args in (
            (device.launch, (prog, [buf], [256, 0, 1], (4, 1, 1))),
            (device.program_info, (prog,)),
            (device.release_program, (prog,)),
        ):
            text = message(call, *args)
            assert f"program #{ids.number(prog)} was released" in text and "compile its SPIR-V again" in text, text
        assert message(device.launch, buf, [buf], [], (1, 1, 1)) == (
            f"launch: buffer #{ids.number(buf)} is a buffer's id, not a program's; pass the id Device.compile returned"
        )
        assert "7 is not a program id" in message(device.launch, 7, [buf], [], (1, 1, 1))
        assert "never handed out" in message(device.program_info, prog + 4000)
    finally:
        pool.release(buf)


def test_a_scalar_that_does_not_fit_names_its_type_and_range(device, pool):
    prog = device.compile(vkbackend.compile_glsl(SCALARS))
    name = f"program #{ids.number(prog)} (main)"
    assert [m.type_name for m in device.program_info(prog).push_constants] == ["uint32", "float32", "int32"]
    buf = pool.allocate(1024)
    try:
        launch = device.launch
        assert message(launch, prog, [buf], [-1, 1.0, 0], (4, 1, 1)) == (
            f"launch of {name}: scalar n=-1 does not fit its type, uint32; pass an integer (an int or a numpy "
            "integer) from 0 to 4294967295"
        )
        assert "scalar n=1.5 does not fit its type, uint32" in message(launch, prog, [buf], [1.5, 1.0, 0], (4, 1, 1))
        text = message(launch, prog, [buf], [256, 1.0, 2**31], (4, 1, 1))
        assert "scalar bias=2147483648 does not fit its type, int32" in text and "-2147483648 to 2147483647" in text
        text = message(launch, prog, [buf], [256, 1e39, 0], (4, 1, 1))
        assert "scalar scale=1e+39 does not fit its type, float32; pass a number" in text, text
        assert "scalar scale='x' does not fit its type, float32" in message(launch, prog, [buf], [256, "x", 0])
        for text in (message(launch, prog, [buf], [-1, 1.0, 0]), message(device.launch_timed, prog, [buf], [-1, 1, 0])):
            assert "struct" not in text and "'I'" not in text, text
    finally:
        pool.release(buf)
        device.release_program(prog)


def test_buffer_objects_and_graphs_show_no_ids(device, pool):
    buf = Buffer.from_numpy(device, np.zeros((3, 4), np.float32))
    n = ids.number(buf.id)
    assert repr(buf).startswith(f"<vkbackend.Buffer #{n} float32 (3, 4) on ")
    buf.close()
    assert message(lambda: buf.id) == (
        f"Buffer #{n} (float32 (3, 4)) is closed: its reference was released. Keep it open (inside its with block) "
        "while it is used, or make a new one"
    )
    fill = device.compile(vkbackend.compile_glsl(FILL))
    other = pool.allocate(1024)
    try:
        text = message(device.graph, [(fill, [other], [256, 0, 1])])
        assert text == "a LaunchGraph launch is (program, buffers, scalars, grid) or None, got a tuple of 3 items"
    finally:
        pool.release(other)
        device.release_program(fill)


def test_a_buffer_of_another_device_names_that_device():
    found = vkbackend.devices()
    if len(found) < 2:
        pytest.skip("one Vulkan device here; a buffer of another device needs two")
    first, second = found[0], found[1]
    buf = second.memory_pool.allocate(256)
    try:
        with pytest.raises(InvalidArgumentError) as caught:
            first.memory_pool.size_of(buf)
        assert f"{second.memory_pool.describe(buf)} belongs to " in caught.value.context
        assert "pool_to_pool copies one over" in caught.value.context
    finally:
        second.memory_pool.release(buf)
