"""The native layer as source: the generated dispatch table is current, and every Vulkan function is both declared
and called (a reader finds each one's definition in csrc/dispatch.c; a declaration nothing calls is dead code)."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from vkbackend._ffi import ffi, lib

ROOT = Path(__file__).resolve().parent.parent
CSRC = ROOT / "vkbackend" / "csrc"


def _defined() -> set[str]:
    return set(re.findall(r"^static [A-Za-z0-9]+ (vk[A-Za-z0-9]+)\(", (CSRC / "dispatch.c").read_text(), re.M))


def _called() -> set[str]:
    """Vulkan functions the Python code calls through ``lib`` and the C helpers call directly."""
    names: set[str] = set()
    for path in (ROOT / "vkbackend").rglob("*.py"):
        names |= set(re.findall(r"\blib\.(vk[A-Z][A-Za-z0-9]+)\b", path.read_text()))
    for path in CSRC.glob("*.c"):
        if path.name != "dispatch.c":
            names |= set(re.findall(r"\b(vk[A-Z][A-Za-z0-9]+)\(", path.read_text()))
    return names


def test_the_dispatch_table_is_generated_from_the_declarations():
    proc = subprocess.run([sys.executable, str(CSRC / "gen_dispatch.py"), "--check"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_every_called_vulkan_function_is_defined_in_dispatch_c():
    defined = _defined()
    assert len(defined) > 50
    # vkGetInstanceProcAddr is the one function loader.c takes from the library itself (dlsym), to fill the table
    assert not _called() - defined - {"vkGetInstanceProcAddr"}, "called but not declared in vkbackend/decl/"


def test_every_declared_vulkan_function_is_called():
    assert not _defined() - _called(), "declared in vkbackend/decl/ but never called: dead code"


def test_the_table_knows_each_function_once_and_whether_it_returns_a_result():
    names = [ffi.string(lib.vkb_function_name(i)).decode() for i in range(lib.vkb_function_count())]
    assert len(names) == len(set(names)) == len(_defined())
    assert lib.vkb_function_returns_result(lib.vkb_function_index(b"vkQueueSubmit"))
    assert not lib.vkb_function_returns_result(lib.vkb_function_index(b"vkCmdDispatch"))
    assert lib.vkb_function_index(b"vkNoSuchFunction") == -1


def _compile_compat(include: Path, compat_dir: Path = CSRC) -> subprocess.CompletedProcess:
    """``cc -fsyntax-only`` of csrc/vk_compat.h after the <vulkan/vulkan.h> found in ``include``."""
    source = '#define VK_NO_PROTOTYPES\n#include <vulkan/vulkan.h>\n#include "vk_compat.h"\n'
    return subprocess.run(
        ["cc", "-std=gnu11", "-fsyntax-only", "-Wall", "-Werror", f"-I{include}", f"-I{compat_dir}", "-x", "c", "-"],
        input=source,
        capture_output=True,
        text=True,
    )


def _newer_headers() -> list[Path]:
    dirs = [Path(p) for p in os.environ.get("VKBACKEND_TEST_VULKAN_HEADERS", "").split(os.pathsep) if p]
    if not dirs:
        pytest.skip(
            "set VKBACKEND_TEST_VULKAN_HEADERS to include directories of Vulkan-Headers >= 1.3.255 (e.g. a "
            "checkout of github.com/KhronosGroup/Vulkan-Headers at v1.3.255 and v1.4.311) to check "
            "csrc/vk_compat.h against headers that have the extensions"
        )
    return dirs


def test_compat_declarations_compile_against_the_installed_header():
    spec = importlib.util.spec_from_file_location("build_vulkan", ROOT / "build_vulkan.py")
    assert spec is not None and spec.loader is not None
    build_vulkan = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build_vulkan)
    proc = _compile_compat(build_vulkan.find_vulkan_header())
    assert proc.returncode == 0, proc.stderr


def test_compat_declarations_match_newer_headers(tmp_path):
    """Where a header has VK_KHR_cooperative_matrix / VK_KHR_shader_bfloat16, vk_compat.h's copies are checked against
    it at compile time: they pass, and a wrong value or field order fails."""
    for include in _newer_headers():
        proc = _compile_compat(include)
        assert proc.returncode == 0, f"{include}: {proc.stderr}"
        text = (include / "vulkan" / "vulkan_core.h").read_text()
        mutations = [("1000506001", "1000506003")] if "VK_KHR_cooperative_matrix 1" in text else []
        if "VK_KHR_shader_bfloat16 1" in text:
            mutations.append(
                (
                    "F(S, VkBool32, shaderBFloat16DotProduct) F(S, VkBool32, shaderBFloat16CooperativeMatrix)",
                    "F(S, VkBool32, shaderBFloat16CooperativeMatrix) F(S, VkBool32, shaderBFloat16DotProduct)",
                )
            )
        assert mutations, f"{include} has neither extension: it checks nothing"
        for old, new in mutations:
            compat = (CSRC / "vk_compat.h").read_text()
            assert old in compat
            (tmp_path / "vk_compat.h").write_text(compat.replace(old, new))
            proc = _compile_compat(include, tmp_path)
            assert proc.returncode != 0 and "differs from the installed Vulkan header" in proc.stderr, proc.stderr
