"""The native layer as source: the generated dispatch table is current, and every Vulkan function is both declared
and called (a reader finds each one's definition in csrc/dispatch.c; a declaration nothing calls is dead code)."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

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
