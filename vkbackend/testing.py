"""Fault injection for tests: make one Vulkan call fail as a driver would.

Every native wrapper of a Vulkan function that returns ``VkResult`` checks the injected fault first (csrc/fault.c),
so a fault reaches the backend exactly where a real driver failure would, on whichever thread makes the call::

    from vkbackend import testing
    testing.inject("vkAllocateMemory", "VK_ERROR_OUT_OF_DEVICE_MEMORY")
    try:
        pool.allocate(64 << 20)          # raises BackendError(MemoryAllocation)
    finally:
        testing.clear()

One fault is armed at a time, process-wide (every device of the process shares the dispatch table); injecting again
replaces it. It fires once and then disarms itself.

Tests also read here what the backend knows and its public API does not show: the Vulkan objects alive in the
process (also with no device open), the validation layer's messages, and whether ``close()`` abandoned a device.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import _ffi
from .device import live_objects
from .errors import BackendError, ErrorStatus

if TYPE_CHECKING:
    from .device import Device

__all__ = ["inject", "clear", "pending", "live_objects", "validation_messages", "abandoned"]


def _result_value(result: str) -> int:
    if not isinstance(result, str) or not result.startswith("VK_"):
        raise BackendError(
            ErrorStatus.InvalidArgument,
            f"inject: result must be a VkResult name such as 'VK_ERROR_DEVICE_LOST', got {result!r}",
        )
    value = getattr(_ffi.lib, result, None)
    if (
        not isinstance(value, int)
        or value == 0
        or not (result.startswith("VK_ERROR_") or result in ("VK_TIMEOUT", "VK_NOT_READY", "VK_INCOMPLETE"))
    ):
        raise BackendError(
            ErrorStatus.InvalidArgument,
            f"inject: {result!r} is not a VkResult failure code this build knows (VK_ERROR_*, "
            "VK_TIMEOUT, VK_NOT_READY, VK_INCOMPLETE)",
        )
    return value


def inject(function: str, result: str, after: int = 0) -> None:
    """Arm a fault: the call of ``function`` that follows ``after`` successful ones returns ``result``, once.

    ``function`` is a Vulkan function vkbackend calls that returns ``VkResult`` (``"vkQueueSubmit"``,
    ``"vkAllocateMemory"``, ...); ``result`` is the name of a ``VkResult`` failure code (``"VK_ERROR_DEVICE_LOST"``,
    ``"VK_TIMEOUT"``, ...). The failing call does not reach the driver. Injecting replaces any fault still armed.

    Raises ``BackendError(InvalidArgument)`` for a function vkbackend does not call, or one that returns no
    ``VkResult`` (a ``void`` function cannot fail), for an unknown result name, and for a negative ``after``.
    """
    if not isinstance(function, str):
        raise BackendError(
            ErrorStatus.InvalidArgument, f"inject: function must be a Vulkan function name, got {function!r}"
        )
    index = _ffi.function_index(function)  # InvalidArgument for names vkbackend does not declare
    if not _ffi.lib.vkb_function_returns_result(index):
        raise BackendError(
            ErrorStatus.InvalidArgument, f"inject: {function} returns no VkResult, so it cannot be made to fail"
        )
    value = _result_value(result)
    if not isinstance(after, int) or isinstance(after, bool) or after < 0:
        raise BackendError(ErrorStatus.InvalidArgument, f"inject: after must be a non-negative integer, got {after!r}")
    _ffi.lib.vkb_fault_inject(index, value, min(after, 0x7FFFFFFF))


def clear() -> None:
    """Disarm the injected fault, if it has not fired yet. Safe to call at any time."""
    _ffi.lib.vkb_fault_clear()


def pending() -> bool:
    """True while an injected fault is armed and has not fired."""
    return bool(_ffi.lib.vkb_fault_pending())


def validation_messages() -> str:
    """The validation layer's messages since the last call (``discovery.validation_messages()``, less the known
    driver messages), or '' in a process that has not started Vulkan: with no instance there is no messenger to have
    collected any, and the Vulkan loader is not opened to ask."""
    from .discovery import Instance
    from .discovery import validation_messages as take

    return take() if Instance._current is not None else ""


def abandoned(device: Device) -> bool:
    """Whether ``device.close()`` abandoned the device: its GPU work outlived the sync deadline, so its memory and
    Vulkan objects are kept until the process exits instead of being destroyed under the running work."""
    return device._ctx.abandoned
