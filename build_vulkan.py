"""Builds vkbackend._vulkan: cffi API mode, out of line, against the real <vulkan/vulkan.h>.

The cdef is vkbackend/decl/*.h joined in a fixed order; the C source is the real header (with VK_NO_PROTOTYPES, so
nothing links against libvulkan), a generated dispatch table with one small wrapper per declared vk* function, and
vkbackend/csrc/*.c. Because cffi checks every declared struct field and constant against the header, a wrong
declaration fails the build instead of corrupting memory at run time.

The module is compiled against CPython's stable ABI of 3.10 (``Py_LIMITED_API``; cffi's generated code needs nothing
else), so one ``_vulkan.abi3.so`` serves every CPython from 3.10 on; setup.py tags the wheel to match. Importing this
file is cheap: setuptools calls :func:`make_builder` only when it builds the module.
"""
from __future__ import annotations

import os
import re
import sys
import sysconfig
from pathlib import Path

from cffi import FFI

ROOT = Path(__file__).resolve().parent
DECL = ROOT / "vkbackend" / "decl"
CSRC = ROOT / "vkbackend" / "csrc"
DECL_ORDER = ["base.h", "instance.h", "device.h", "memory.h", "pipeline.h", "command.h", "sync.h", "debug.h", "helpers.h"]
CSRC_ORDER = ["loader.c", "debug.c", "fork.c", "copy.c", "fence.c", "slots.c", "recorder.c"]
GLOBAL_FUNCTIONS = {"vkCreateInstance", "vkEnumerateInstanceVersion", "vkEnumerateInstanceExtensionProperties",
                    "vkEnumerateInstanceLayerProperties"}
# The oldest CPython the module runs on, as bdist_wheel's py_limited_api tag and as the Py_LIMITED_API value.
LIMITED_API = "cp310"
LIMITED_API_HEX = "0x030A0000"
FUNCTION = re.compile(r"^(VkResult|void)\s+(vk[A-Za-z0-9]+)\s*\(([^;]*)\)\s*;", re.M)


def limited_api_supported() -> bool:
    """False on debug and free-threaded interpreters, which have no stable ABI (cffi then builds a regular module)."""
    return not hasattr(sys, "gettotalrefcount") and not sysconfig.get_config_var("Py_GIL_DISABLED")


def find_vulkan_header() -> Path:
    """The directory holding vulkan/vulkan_core.h: $VULKAN_SDK/include, the compiler's search path, the usual places."""
    candidates = []
    if os.environ.get("VULKAN_SDK"):
        candidates.append(Path(os.environ["VULKAN_SDK"]) / "include")
    for var in ("C_INCLUDE_PATH", "CPATH"):
        candidates += [Path(p) for p in os.environ.get(var, "").split(os.pathsep) if p]
    candidates += [Path("/usr/include"), Path("/usr/local/include")]
    for directory in candidates:
        if (directory / "vulkan" / "vulkan_core.h").is_file():
            return directory
    sys.exit("build_vulkan.py: <vulkan/vulkan.h> not found. Install the Vulkan headers "
             "(Debian/Ubuntu: apt-get install libvulkan-dev) or set VULKAN_SDK to an SDK that has include/vulkan.")


def vk_result_names(header: Path) -> list[str]:
    """Every VkResult enumerator the real header defines (aliases included), so errors.py can be checked against it."""
    text = (header / "vulkan" / "vulkan_core.h").read_text()
    block = re.search(r"typedef enum VkResult \{(.*?)\} VkResult;", text, re.S)
    if not block:
        sys.exit("build_vulkan.py: no VkResult enum in vulkan_core.h")
    return [n for n in re.findall(r"^\s*(VK_[A-Z0-9_]+)\s*=", block.group(1), re.M) if not n.endswith("_MAX_ENUM")]


def parameter_names(params: str) -> list[str]:
    if params.strip() in ("", "void"):
        return []
    return [re.findall(r"[A-Za-z_][A-Za-z0-9_]*", p)[-1] for p in params.split(",")]


def generated_dispatch(cdef: str) -> str:
    """The dispatch table and one wrapper per declared function.

    Wrappers of functions returning VkResult honour an injected fault (csrc/fault.c) and count successes, from which
    tests and the soak read live-object counts; void functions count every call.
    """
    functions = FUNCTION.findall(cdef)
    names = [name for _, name, _ in functions]
    out = [f"#define VKB_FN_COUNT {len(names)}",
           "static const char *const vkb_fn_names[VKB_FN_COUNT] = {" + ", ".join(f'"{n}"' for n in names) + "};",
           "static const unsigned char vkb_fn_is_global[VKB_FN_COUNT] = {"
           + ", ".join("1" if n in GLOBAL_FUNCTIONS else "0" for n in names) + "};",
           "static PFN_vkVoidFunction vkb_fn_table[VKB_FN_COUNT];",
           "static uint64_t vkb_fn_successes[VKB_FN_COUNT];",
           (CSRC / "fault.c").read_text()]
    for index, (ret, name, params) in enumerate(functions):
        args = ", ".join(parameter_names(params))
        call = f"((PFN_{name})vkb_fn_table[{index}])({args})"
        count = f"__atomic_fetch_add(&vkb_fn_successes[{index}], 1, __ATOMIC_RELAXED);"
        if ret == "VkResult":
            body = (f"VkResult r; if (vkb_fault_fires({index}, &r)) return r;"
                    f" if (!vkb_fn_table[{index}]) return VK_ERROR_EXTENSION_NOT_PRESENT;"
                    f" r = {call}; if (r >= 0) {count} return r;")
        else:
            body = f"if (!vkb_fn_table[{index}]) return; {call}; {count}"
        out.append(f"static {ret} {name}({params}) {{ {body} }}")
    return "\n".join(out)


def make_builder() -> FFI:
    """The FFI builder of ``vkbackend._vulkan`` (setup.py's ``cffi_modules`` entry)."""
    include = find_vulkan_header()
    cdef = "\n".join((DECL / name).read_text() for name in DECL_ORDER)
    result_codes = vk_result_names(include)
    # VkResult is generated so that every code of the real header is exported (tests map each one to a status).
    cdef = "typedef int... VkResult;\n" + "".join(f"#define {n} ...\n" for n in result_codes) + cdef
    ffi = FFI()
    ffi.cdef(cdef)
    source = "\n".join([
        "#define VK_NO_PROTOTYPES",
        "#include <vulkan/vulkan.h>",
        "#include <stdio.h>",
        "#include <string.h>",
        "#include <stdint.h>",
        (CSRC / "types.h").read_text(),
        generated_dispatch(cdef),
        *((CSRC / name).read_text() for name in CSRC_ORDER),
    ])
    limited = limited_api_supported()
    # An explicit version pins the API to 3.10's (cffi alone would define Py_LIMITED_API without one, i.e. 3.2's).
    ffi.set_source("vkbackend._vulkan", source, include_dirs=[str(include)], libraries=["dl", "pthread"],
                   extra_compile_args=["-O2", "-std=gnu11", "-Wno-unused-function"], py_limited_api=limited,
                   define_macros=[("Py_LIMITED_API", LIMITED_API_HEX)] if limited else [])
    return ffi


if __name__ == "__main__":
    make_builder().compile(tmpdir=str(ROOT), verbose=True)
