"""Typed errors, and the one place that turns a ``VkResult`` into one.

Every Vulkan call that returns a ``VkResult`` goes through :func:`check` (or, where the error is kept for a later
sync point rather than raised, :func:`vk_error`); nothing else maps results, so a newcomer looking for "what happens
when the driver says no" finds it here.
"""

from __future__ import annotations

import enum
import operator


class ErrorStatus(enum.Enum):
    """What kind of failure a :class:`BackendError` reports."""

    DyLibNotFound = "DyLibNotFound"  # no Vulkan loader on this machine
    Initialization = "Initialization"  # instance/device creation, missing driver features
    MemoryAllocation = "MemoryAllocation"  # out of host or device memory, budget or allocation limits
    KernelCompilation = "KernelCompilation"  # bad SPIR-V, GLSL errors, pipeline creation
    KernelLaunch = "KernelLaunch"  # a launch that failed on the worker, submit failures
    KernelSync = "KernelSync"  # waiting on the GPU failed or timed out
    DeviceLost = "DeviceLost"  # the device is gone; every later call fails fast
    InvalidArgument = "InvalidArgument"  # the caller passed something wrong


class BackendError(Exception):
    """An error from the backend.

    ``status`` says what kind of failure it is (an :class:`ErrorStatus`), ``context`` says where and what to do.
    ``BackendError(status, context)`` constructs the subclass of that status, so that the built-in exception types
    catch what they should: out of memory is also a ``MemoryError`` (:class:`MemoryAllocationError`), a bad argument
    also a ``ValueError`` (:class:`InvalidArgumentError`; a wrong type also a ``TypeError``), while ``except
    BackendError`` and ``.status`` work as before. A subclass is constructed the same way, with its status first.
    """

    status: ErrorStatus
    context: str

    def __new__(cls, status: ErrorStatus, context: str) -> BackendError:
        if cls is BackendError:
            cls = _CLASS_OF_STATUS.get(status, BackendError)
        # Exception.__new__, not super(): MemoryError's own __new__ refuses subclasses that have another base first.
        return Exception.__new__(cls, status, context)

    def __init__(self, status: ErrorStatus, context: str) -> None:
        super().__init__(f"{status.value}: {context}")
        self.status = status
        self.context = context

    def __reduce__(self) -> tuple[type[BackendError], tuple[ErrorStatus, str]]:
        # Pickled by its constructor's arguments (the default would pass only the message), so an error crosses
        # process boundaries (multiprocessing, tinygrad's compile workers) as the same class with the same status.
        return type(self), (self.status, self.context)


class DyLibNotFoundError(BackendError):
    """No Vulkan loader (libvulkan) could be opened. Status ``DyLibNotFound``."""


class InitializationError(BackendError):
    """Instance or device creation failed: no driver, no device, a missing feature or layer. Status
    ``Initialization``."""


class MemoryAllocationError(BackendError, MemoryError):
    """Out of device or host memory, or past an allocation limit; also a ``MemoryError``. Status
    ``MemoryAllocation``."""


class KernelCompilationError(BackendError):
    """GLSL or SPIR-V that does not compile, or a kernel interface the backend cannot bind. Status
    ``KernelCompilation``."""


class KernelLaunchError(BackendError):
    """A launch or submission failed on the worker (raised at the next sync point). Status ``KernelLaunch``."""


class KernelSyncError(BackendError):
    """Waiting for the GPU failed or passed its deadline. Status ``KernelSync``."""


class DeviceLostError(BackendError):
    """The device is gone; every later call on it fails fast. Status ``DeviceLost``."""


class InvalidArgumentError(BackendError, ValueError):
    """The caller passed something wrong; also a ``ValueError``. Status ``InvalidArgument``."""


class InvalidArgumentTypeError(InvalidArgumentError, TypeError):
    """An argument of the wrong type; also a ``TypeError`` (and a ``ValueError``, as every InvalidArgument is).
    Status ``InvalidArgument``; raised by name (``InvalidArgumentTypeError(ErrorStatus.InvalidArgument, ...)``)."""


class DLPackExportError(InvalidArgumentError, BufferError):
    """A DLPack export that cannot be made (``Buffer.__dlpack__`` without a host copy asked for); also a
    ``BufferError``, the type the DLPack protocol has producers raise. Status ``InvalidArgument``; raised by name."""


def index_argument(value: object, what: str) -> int:
    """``value`` as an int, for a size, an offset or an index: anything ``operator.index`` takes (an int, a numpy
    integer) except a bool; otherwise :class:`InvalidArgumentTypeError` naming ``what`` and the type it got. The
    caller checks the range."""
    if value.__class__ is int:
        return value
    if not isinstance(value, bool):
        try:
            return operator.index(value)  # type: ignore[arg-type]
        except TypeError:
            pass
    raise InvalidArgumentTypeError(
        ErrorStatus.InvalidArgument,
        f"{what} must be an integer (an int or a numpy integer), got {type(value).__name__} {value!r}",
    )


_CLASS_OF_STATUS: dict[ErrorStatus, type[BackendError]] = {
    ErrorStatus.DyLibNotFound: DyLibNotFoundError,
    ErrorStatus.Initialization: InitializationError,
    ErrorStatus.MemoryAllocation: MemoryAllocationError,
    ErrorStatus.KernelCompilation: KernelCompilationError,
    ErrorStatus.KernelLaunch: KernelLaunchError,
    ErrorStatus.KernelSync: KernelSyncError,
    ErrorStatus.DeviceLost: DeviceLostError,
    ErrorStatus.InvalidArgument: InvalidArgumentError,
}

# What to do when no driver or no device answers, for messages here and in the command line.
NO_DRIVER_HINT = (
    "the Vulkan loader found no driver (ICD) for Vulkan 1.2. Install your GPU vendor's Vulkan driver, or Mesa's "
    "software device lavapipe on a machine without a GPU (Debian/Ubuntu: apt-get install mesa-vulkan-drivers). A "
    "driver installed where the loader does not look is named by VK_DRIVER_FILES (VK_ICD_FILENAMES for loaders "
    "before 1.3.207), the path of its JSON manifest such as /usr/share/vulkan/icd.d/lvp_icd.x86_64.json; when "
    "those are set, check that they name manifests that exist"
)
NO_DEVICE_HINT = (
    "the installed Vulkan drivers found no device with Vulkan 1.2 and a compute queue (a GPU driver on a machine "
    "without its GPU, or no GPU at all). Install your GPU's Vulkan driver, or Mesa's software device lavapipe "
    "(Debian/Ubuntu: apt-get install mesa-vulkan-drivers); when VK_DRIVER_FILES or VK_ICD_FILENAMES are set, the "
    "loader uses only the drivers they name"
)


# VkResult codes that are failures, by name, and the status each becomes. Names rather than numbers keep this
# readable; tests check that every VK_ERROR_* the real header defines (the built module exports them all) is here.
_ERROR_STATUS: dict[str, ErrorStatus] = {
    "VK_ERROR_OUT_OF_HOST_MEMORY": ErrorStatus.MemoryAllocation,
    "VK_ERROR_OUT_OF_DEVICE_MEMORY": ErrorStatus.MemoryAllocation,
    "VK_ERROR_OUT_OF_POOL_MEMORY": ErrorStatus.MemoryAllocation,
    "VK_ERROR_FRAGMENTED_POOL": ErrorStatus.MemoryAllocation,
    "VK_ERROR_FRAGMENTATION": ErrorStatus.MemoryAllocation,
    "VK_ERROR_TOO_MANY_OBJECTS": ErrorStatus.MemoryAllocation,
    "VK_ERROR_MEMORY_MAP_FAILED": ErrorStatus.MemoryAllocation,
    "VK_ERROR_INVALID_EXTERNAL_HANDLE": ErrorStatus.MemoryAllocation,
    "VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS": ErrorStatus.MemoryAllocation,
    "VK_ERROR_INITIALIZATION_FAILED": ErrorStatus.Initialization,
    "VK_ERROR_LAYER_NOT_PRESENT": ErrorStatus.Initialization,
    "VK_ERROR_EXTENSION_NOT_PRESENT": ErrorStatus.Initialization,
    "VK_ERROR_FEATURE_NOT_PRESENT": ErrorStatus.Initialization,
    "VK_ERROR_INCOMPATIBLE_DRIVER": ErrorStatus.Initialization,
    "VK_ERROR_FORMAT_NOT_SUPPORTED": ErrorStatus.Initialization,
    "VK_ERROR_NOT_PERMITTED_KHR": ErrorStatus.Initialization,
    "VK_ERROR_NOT_PERMITTED_EXT": ErrorStatus.Initialization,
    "VK_ERROR_INVALID_SHADER_NV": ErrorStatus.KernelCompilation,
    "VK_ERROR_COMPRESSION_EXHAUSTED_EXT": ErrorStatus.MemoryAllocation,
    "VK_ERROR_DEVICE_LOST": ErrorStatus.DeviceLost,
    "VK_ERROR_UNKNOWN": ErrorStatus.KernelLaunch,
    "VK_ERROR_VALIDATION_FAILED_EXT": ErrorStatus.InvalidArgument,
    "VK_ERROR_INVALID_DRM_FORMAT_MODIFIER_PLANE_LAYOUT_EXT": ErrorStatus.Initialization,
    "VK_ERROR_INVALID_VIDEO_STD_PARAMETERS_KHR": ErrorStatus.Initialization,
    "VK_ERROR_IMAGE_USAGE_NOT_SUPPORTED_KHR": ErrorStatus.Initialization,
    "VK_ERROR_VIDEO_PICTURE_LAYOUT_NOT_SUPPORTED_KHR": ErrorStatus.Initialization,
    "VK_ERROR_VIDEO_PROFILE_OPERATION_NOT_SUPPORTED_KHR": ErrorStatus.Initialization,
    "VK_ERROR_VIDEO_PROFILE_FORMAT_NOT_SUPPORTED_KHR": ErrorStatus.Initialization,
    "VK_ERROR_VIDEO_PROFILE_CODEC_NOT_SUPPORTED_KHR": ErrorStatus.Initialization,
    "VK_ERROR_VIDEO_STD_VERSION_NOT_SUPPORTED_KHR": ErrorStatus.Initialization,
    "VK_ERROR_FULL_SCREEN_EXCLUSIVE_MODE_LOST_EXT": ErrorStatus.Initialization,
    "VK_ERROR_SURFACE_LOST_KHR": ErrorStatus.Initialization,
    "VK_ERROR_NATIVE_WINDOW_IN_USE_KHR": ErrorStatus.Initialization,
    "VK_ERROR_OUT_OF_DATE_KHR": ErrorStatus.Initialization,
    "VK_ERROR_INCOMPATIBLE_DISPLAY_KHR": ErrorStatus.Initialization,
    "VK_ERROR_INCOMPATIBLE_SHADER_BINARY_EXT": ErrorStatus.KernelCompilation,
    "VK_ERROR_PIPELINE_BINARY_MISSING_KHR": ErrorStatus.KernelCompilation,
    "VK_ERROR_NOT_ENOUGH_SPACE_KHR": ErrorStatus.MemoryAllocation,
    "VK_ERROR_INVALID_DEVICE_ADDRESS_EXT": ErrorStatus.MemoryAllocation,
    "VK_ERROR_PIPELINE_COMPILE_REQUIRED_EXT": ErrorStatus.KernelCompilation,
}

# Codes that are not failures but still mean "it did not happen" where a call expects VK_SUCCESS.
_NON_SUCCESS_STATUS: dict[str, ErrorStatus] = {
    "VK_TIMEOUT": ErrorStatus.KernelSync,
    "VK_NOT_READY": ErrorStatus.KernelSync,
    "VK_INCOMPLETE": ErrorStatus.Initialization,
}

# Hints for failures whose (function, result) says what went wrong, appended by check().
_HINTS: dict[tuple[str, str], str] = {
    ("vkCreateInstance", "VK_ERROR_INCOMPATIBLE_DRIVER"): NO_DRIVER_HINT,
    ("vkEnumeratePhysicalDevices", "VK_ERROR_INITIALIZATION_FAILED"): NO_DEVICE_HINT,
}

_by_value: dict[int, tuple[str, ErrorStatus]] = {}


def register_result_codes(codes: dict[str, int]) -> None:
    """Learn the numeric values of the VkResult names (from the built module, so they come from the real header)."""
    for name, value in codes.items():
        status = status_for(name)
        if status is None and name.startswith("VK_ERROR_"):
            status = ErrorStatus.KernelLaunch  # a code newer than this table: still a typed failure
        if status is not None:
            _by_value.setdefault(value, (name, status))


def status_for(name: str) -> ErrorStatus | None:
    """The status a VkResult name maps to, or None when the name is not a failure this module knows.

    Extension aliases (``VK_ERROR_OUT_OF_POOL_MEMORY_KHR``) map like the core name they alias.
    """
    found = _ERROR_STATUS.get(name) or _NON_SUCCESS_STATUS.get(name)
    if found is None:
        for suffix in ("_KHR", "_EXT", "_NV"):
            if name.endswith(suffix):
                return _ERROR_STATUS.get(name[: -len(suffix)])
    return found


def result_name(result: int) -> str:
    """The VkResult's name, for messages."""
    return _by_value.get(result, (f"VkResult({result})", None))[0]


def check(result: int, what: str, status: ErrorStatus | None = None) -> None:
    """Raise :func:`vk_error` of ``result`` unless it is ``VK_SUCCESS`` (0)."""
    if result != 0:
        raise vk_error(result, what, status)


def vk_error(result: int, what: str, status: ErrorStatus | None = None) -> BackendError:
    """The typed error for a failed ``result``: the one place a ``VkResult`` becomes an exception.

    ``what`` names the call (its first word: the function) and what it was for; ``status`` overrides the status for
    failures where the caller knows better (a ``VK_ERROR_OUT_OF_DEVICE_MEMORY`` from pipeline creation is still a
    compilation failure to the user), except that a lost device always reports ``DeviceLost``. Where the function and
    result say what to do (no driver, no device), the message says it too.
    """
    name, mapped = _by_value.get(result, (f"VkResult({result})", ErrorStatus.KernelLaunch))
    if status is not None and mapped is not ErrorStatus.DeviceLost:
        mapped = status
    hint = _HINTS.get((what.split(" ", 1)[0], name))
    return BackendError(mapped, f"{what} failed with {name}" + (f": {hint}" if hint else ""))
