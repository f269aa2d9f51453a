"""The only importer of the native module ``vkbackend._vulkan``; opens libvulkan on first use.

Importing this module needs no Vulkan loader: only :func:`vulkan` does, and it raises a clear ``DyLibNotFound``
error when there is none.
"""

from __future__ import annotations

import os
import threading

from .errors import BackendError, ErrorStatus, register_result_codes

__all__ = ["ffi", "function_index", "lib", "success_counts", "vulkan"]

try:
    from ._vulkan import ffi, lib
except ImportError as exc:  # pragma: no cover - only on a broken install
    raise ImportError(
        "vkbackend's native module is not built. Install the package with `pip install .` (it needs a C compiler and "
        "the Vulkan headers: apt-get install libvulkan-dev), or run `python setup.py build_ext --inplace` in a "
        "checkout."
    ) from exc

register_result_codes(
    {
        name: getattr(lib, name)
        for name in dir(lib)
        if name.startswith("VK_")
        and (
            name.startswith("VK_ERROR_")
            or name in ("VK_SUCCESS", "VK_NOT_READY", "VK_TIMEOUT", "VK_INCOMPLETE", "VK_EVENT_SET", "VK_EVENT_RESET")
        )
    }
)

_open_lock = threading.Lock()


def vulkan() -> tuple:
    """Return ``(ffi, lib)`` with libvulkan opened, or raise ``BackendError(DyLibNotFound)``.

    ``VKBACKEND_VULKAN_LIBRARY`` names the library to open instead of ``libvulkan.so.1`` / ``libvulkan.so``.
    """
    if lib.vkb_library_loaded():
        return ffi, lib
    with _open_lock:
        if not lib.vkb_library_loaded():
            override = os.environ.get("VKBACKEND_VULKAN_LIBRARY", "")
            err = ffi.new("char[512]")
            if lib.vkb_open_library(override.encode() if override else ffi.NULL, err, 512) != 0:
                tried = override or "libvulkan.so.1, libvulkan.so"
                raise BackendError(
                    ErrorStatus.DyLibNotFound,
                    f"could not load the Vulkan loader ({tried}): {ffi.string(err).decode(errors='replace')}. "
                    "Install it with a driver: your GPU vendor's Vulkan driver, or on a machine without "
                    "a GPU Mesa's software device (Debian/Ubuntu: apt-get install libvulkan1 "
                    "mesa-vulkan-drivers); or point VKBACKEND_VULKAN_LIBRARY at a libvulkan.so.1",
                )
    return ffi, lib


def function_index(name: str) -> int:
    """The dispatch-table index of a declared Vulkan function (for fault injection and object counters)."""
    index = lib.vkb_function_index(name.encode())
    if index < 0:
        raise BackendError(ErrorStatus.InvalidArgument, f"{name} is not a Vulkan function vkbackend calls")
    return index


def success_counts() -> dict[str, int]:
    """How many calls of each declared Vulkan function have succeeded in this process (the native wrappers count
    them), by name: creates less destroys is the number of live objects."""
    return {
        ffi.string(lib.vkb_function_name(i)).decode(): lib.vkb_success_count(i) for i in range(lib.vkb_function_count())
    }
