"""compile_glsl: GLSL compute source to SPIR-V through glslangValidator, with an in-process cache."""
from __future__ import annotations

import shutil

import pytest

from vkbackend import glsl
from vkbackend.errors import BackendError, ErrorStatus
from vkbackend.glsl import compile_glsl
from vkbackend.spirv import reflect

pytestmark = pytest.mark.skipif(shutil.which("glslangValidator") is None,
                                reason="glslangValidator not on PATH (apt-get install glslang-tools)")

KERNEL = """
#version 450
#ifndef WG
#define WG 1
#endif
layout(local_size_x = WG) in;
layout(set = 0, binding = 0) buffer Out { float o[]; };
void main() {
#ifdef TWICE
    o[gl_GlobalInvocationID.x] = 2.0 * SCALE;
#else
    o[gl_GlobalInvocationID.x] = SCALE;
#endif
}
"""


def test_compiles_to_spirv_for_vulkan_1_2():
    spirv = compile_glsl(KERNEL, {"SCALE": 1.5})
    assert spirv[:4] == b"\x03\x02\x23\x07"
    assert int.from_bytes(spirv[4:8], "little") == 0x00010500  # Vulkan 1.2 -> SPIR-V 1.5
    assert reflect(spirv).local_size == (1, 1, 1)


def test_defines_reach_the_preprocessor():
    spirv = compile_glsl(KERNEL, {"SCALE": "3.0", "WG": 128, "TWICE": None})
    assert reflect(spirv).local_size == (128, 1, 1)
    assert compile_glsl(KERNEL, {"SCALE": "3.0", "WG": 128}) != spirv  # TWICE changed the code


def test_bool_defines_become_one_and_zero():
    source = "#version 450\nlayout(local_size_x = 4 + 60 * FLAG) in;\nvoid main() {}\n"
    assert reflect(compile_glsl(source, {"FLAG": True})).local_size == (64, 1, 1)
    assert reflect(compile_glsl(source, {"FLAG": False})).local_size == (4, 1, 1)


def test_results_are_cached_independent_of_define_order():
    first = compile_glsl(KERNEL, {"SCALE": 2, "WG": 32})
    again = compile_glsl(KERNEL, {"WG": 32, "SCALE": 2})
    assert again is first
    assert compile_glsl(KERNEL, {"SCALE": 2, "WG": 64}) is not first


def test_entry_point_name():
    spirv = compile_glsl(KERNEL, {"SCALE": 1}, entry_point="scale_kernel")
    assert reflect(spirv, "scale_kernel").entry_point == "scale_kernel"
    with pytest.raises(BackendError, match="'main' not found"):
        reflect(spirv)


def test_compile_error_carries_glslang_messages():
    with pytest.raises(BackendError) as caught:
        compile_glsl("#version 450\nlayout(local_size_x = 1) in;\nvoid main() { int x = missing_name; }\n")
    assert caught.value.status is ErrorStatus.KernelCompilation
    assert "kernel.comp:3" in caught.value.context
    assert "missing_name" in caught.value.context
    assert "undeclared identifier" in caught.value.context


def test_missing_glslang_names_the_package(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty directory: nothing to find
    with pytest.raises(BackendError) as caught:
        compile_glsl(KERNEL + "// not cached yet\n", {"SCALE": 1})
    assert caught.value.status is ErrorStatus.KernelCompilation
    assert "glslang-tools" in caught.value.context
    assert "apt-get install glslang-tools" in caught.value.context


def test_failures_are_not_cached(monkeypatch, tmp_path):
    source = KERNEL + "// retried after a failure\n"
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(BackendError):
        compile_glsl(source, {"SCALE": 1})
    monkeypatch.undo()
    assert reflect(compile_glsl(source, {"SCALE": 1})).local_size == (1, 1, 1)


def test_cache_is_bounded():
    assert glsl._compile_cached.cache_info().maxsize is not None


@pytest.mark.parametrize("defines", [{"1BAD": 1}, {"A B": 1}, {"X": "1\n#error injected"}])
def test_bad_defines_are_invalid_arguments(defines):
    with pytest.raises(BackendError) as caught:
        compile_glsl(KERNEL, defines)
    assert caught.value.status is ErrorStatus.InvalidArgument


def test_bad_entry_point_is_an_invalid_argument():
    with pytest.raises(BackendError) as caught:
        compile_glsl(KERNEL, {"SCALE": 1}, entry_point="not valid")
    assert caught.value.status is ErrorStatus.InvalidArgument
