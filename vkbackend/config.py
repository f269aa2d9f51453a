"""VulkanConfig and the environment variables that stand in for it."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from .errors import BackendError, ErrorStatus


@dataclass(frozen=True)
class VulkanConfig:
    """How to bring up Vulkan.

    ``device_ids``: indices (in discovery order) of the devices to open; ``None`` opens all, ``[]`` configures Vulkan
    out. Without a config, ``VKBACKEND_DEVICE_IDS="0,2"`` (or ``""``) does the same.
    ``robust_buffer_access``: enable the device's bounds-checked buffer access (``None``: ``VKBACKEND_ROBUST``, default
    on; see docs/reliability.md for its measured cost). ``push_descriptors``: use ``VK_KHR_push_descriptor`` where the
    device has it (off forces the descriptor-pool path). ``window_launches``: launches recorded into one command
    buffer at most. ``staging_buffer_bytes``/``staging_buffers``: the size and number of the staging buffers that
    transfers stream through (0 bytes: 32 MiB on a GPU, 8 MiB elsewhere). ``sync_timeout_s``: the
    deadline of every wait on the GPU (``VKBACKEND_SYNC_TIMEOUT_S``, default 300). ``switch_interval_s``: while a
    device is open, lower the interpreter's GIL switch interval to this where it is higher
    (``VKBACKEND_SWITCH_INTERVAL_S``, default 0: left alone). A launch already gives the GIL to a worker that needs it
    (docs/performance.md); a program whose threads copy, release buffers or run long stretches of Python between
    launches may still want the worker to win it sooner. The last device's ``close`` restores the interval it had
    before, unless the program has set another one meanwhile.
    ``cuda_clocks``: on an NVIDIA GPU, hold its CUDA primary context while the device is open, so that the GPU runs
    at CUDA's clocks instead of the adaptive ones NVIDIA gives Vulkan work (``VKBACKEND_CUDA_CLOCKS``, default on;
    vkbackend/interop/cuda_clocks.py says why).
    ``max_allocation_bytes``: the largest single memory allocation the pool makes, when lower than the device's
    ``maxMemoryAllocationSize`` (``None``: ``VKBACKEND_MAX_ALLOCATION_BYTES``, unset: the device's); a buffer past it
    is bound to several allocations where the device has sparse binding, and refused elsewhere. It lets a machine
    without a GPU test the path of buffers past the limit.
    ``direct_access``: small buffers live in device memory the host can map where the device has it in the same heap
    as its other device memory (all of it behind a resizable BAR, or memory the host shares); a read-back of at most
    ``DIRECT_READ_MAX`` bytes from one reads it straight after its sync point, and an upload into one while the
    device is quiet writes it straight, instead of a copy through staging (``VKBACKEND_DIRECT_ACCESS``, default on;
    vkbackend/memory/pool.py).
    ``pipeline_statistics``: where the device has ``VK_KHR_pipeline_executable_properties``, every pipeline is created
    with what its driver's compiler made of it kept (registers, spills and the like), for
    :meth:`vkbackend.Device.pipeline_statistics` (``VKBACKEND_PIPELINE_STATISTICS``, default off: a diagnostic).

    Every field is checked when the config is made (and the environment variables when a device opens), so a bad
    setting is a ``BackendError(InvalidArgument)`` naming it, never a device that fails later.
    """

    device_ids: list[int] | None = None
    robust_buffer_access: bool | None = None
    push_descriptors: bool = True
    window_launches: int = 8192
    staging_buffer_bytes: int = 0
    staging_buffers: int = 4
    copy_threads: int = 0
    sync_timeout_s: float | None = None
    switch_interval_s: float | None = None
    cuda_clocks: bool | None = None
    max_allocation_bytes: int | None = None
    direct_access: bool | None = None
    pipeline_statistics: bool | None = None

    def __post_init__(self) -> None:
        ids = self.device_ids
        if ids is not None and (not isinstance(ids, (list, tuple)) or not all(_is_int(i) and i >= 0 for i in ids)):
            _bad("device_ids", ids, "None or a list of device indices (non-negative ints)")
        if self.robust_buffer_access is not None and not isinstance(self.robust_buffer_access, bool):
            _bad("robust_buffer_access", self.robust_buffer_access, "None, True or False")
        if not isinstance(self.push_descriptors, bool):
            _bad("push_descriptors", self.push_descriptors, "True or False")
        for name, low, high in (
            ("window_launches", 1, 1 << 20),
            ("staging_buffer_bytes", 0, 1 << 40),
            ("staging_buffers", 2, 1024),
            ("copy_threads", 0, 256),
        ):
            value = getattr(self, name)
            if not _is_int(value) or not low <= value <= high:
                _bad(name, value, f"an int from {low} to {high}")
        for name in ("cuda_clocks", "direct_access", "pipeline_statistics"):
            if getattr(self, name) is not None and not isinstance(getattr(self, name), bool):
                _bad(name, getattr(self, name), "None, True or False")
        if self.sync_timeout_s is not None:
            check_seconds("sync_timeout_s", self.sync_timeout_s, positive=True)
        if self.switch_interval_s is not None:
            check_seconds("switch_interval_s", self.switch_interval_s, positive=False)
        if self.max_allocation_bytes is not None:
            check_allocation_bytes("max_allocation_bytes", self.max_allocation_bytes)

    @staticmethod
    def from_env() -> "VulkanConfig":
        """The config the environment describes (used when ``devices()`` gets none)."""
        ids = os.environ.get("VKBACKEND_DEVICE_IDS")
        device_ids = None
        if ids is not None:
            try:
                device_ids = [int(x) for x in ids.replace(" ", "").split(",") if x]
            except ValueError:
                raise BackendError(
                    ErrorStatus.InvalidArgument,
                    f"VKBACKEND_DEVICE_IDS={ids!r} is not a comma-separated list of device indices",
                )
        return VulkanConfig(device_ids=device_ids, push_descriptors=env_flag("VKBACKEND_PUSH_DESCRIPTORS", True))

    def resolved_copy_threads(self) -> int:
        """Threads per host memcpy of a transfer: ``copy_threads``, or (0) the usable CPUs, 1 to 8."""
        if self.copy_threads > 0:
            return self.copy_threads
        return max(1, min(8, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1))

    def resolved_robust_buffer_access(self) -> bool:
        """Whether devices get robust buffer access: ``robust_buffer_access``, or (None) ``VKBACKEND_ROBUST``."""
        if self.robust_buffer_access is not None:
            return self.robust_buffer_access
        return env_flag("VKBACKEND_ROBUST", True)

    def resolved_cuda_clocks(self) -> bool:
        """Whether a device on an NVIDIA GPU holds its CUDA context for CUDA's clocks: ``cuda_clocks``, or (None)
        ``VKBACKEND_CUDA_CLOCKS``."""
        if self.cuda_clocks is not None:
            return self.cuda_clocks
        return env_flag("VKBACKEND_CUDA_CLOCKS", True)

    def resolved_direct_access(self) -> bool:
        """Whether small buffers live in host-mappable device memory that small read-backs and uploads reach straight:
        ``direct_access``, or (None) ``VKBACKEND_DIRECT_ACCESS``."""
        if self.direct_access is not None:
            return self.direct_access
        return env_flag("VKBACKEND_DIRECT_ACCESS", True)

    def resolved_pipeline_statistics(self) -> bool:
        """Whether pipelines keep their executables' statistics where the device can: ``pipeline_statistics``, or
        (None) ``VKBACKEND_PIPELINE_STATISTICS``."""
        if self.pipeline_statistics is not None:
            return self.pipeline_statistics
        return env_flag("VKBACKEND_PIPELINE_STATISTICS", False)

    def resolved_switch_interval_s(self) -> float:
        """The GIL switch interval a device lowers the interpreter's to (0: left alone): ``switch_interval_s``, or
        (None) ``VKBACKEND_SWITCH_INTERVAL_S``."""
        if self.switch_interval_s is not None:
            return float(self.switch_interval_s)
        return _seconds_from_env("VKBACKEND_SWITCH_INTERVAL_S", 0.0, positive=False)

    def resolved_max_allocation_bytes(self) -> int | None:
        """The cap on one memory allocation: ``max_allocation_bytes``, or (None) ``VKBACKEND_MAX_ALLOCATION_BYTES``;
        None where neither is set (the device's own limit holds). A device reads it once, when it opens."""
        if self.max_allocation_bytes is not None:
            return self.max_allocation_bytes
        return _allocation_bytes_from_env("VKBACKEND_MAX_ALLOCATION_BYTES")

    def resolved_sync_timeout_s(self) -> float:
        """The deadline of every wait on the GPU; a device reads it once, when it opens."""
        if self.sync_timeout_s is not None:
            return float(self.sync_timeout_s)
        return _seconds_from_env("VKBACKEND_SYNC_TIMEOUT_S", 300.0, positive=True)


# The longest deadline accepted: about 115 days. Its nanoseconds fit the 64-bit timeouts Vulkan takes, and
# threading's waits accept it; "never" is not offered, because every wait must end.
MAX_SECONDS = 1e7


def check_seconds(name: str, value: object, positive: bool) -> float:
    """``value`` as seconds, or ``BackendError(InvalidArgument)`` naming ``name`` when it is not a finite number in
    range (more than 0 when ``positive``, else at least 0; at most MAX_SECONDS)."""
    if (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and (value > 0 if positive else value >= 0)
        and value <= MAX_SECONDS
    ):
        return float(value)
    _bad(
        name,
        value,
        f"a finite number of seconds, {'more than 0' if positive else 'at least 0'} and at most {MAX_SECONDS:g}",
    )


# The bounds of a cap on one allocation: below a megabyte the pool's chunks and a sparse buffer's pieces would be
# absurdly small (and a sparse piece is a multiple of the buffer's memory alignment).
MIN_ALLOCATION_BYTES = 1 << 20
MAX_ALLOCATION_BYTES = 1 << 62


def check_allocation_bytes(name: str, value: object) -> int:
    """``value`` as a cap on one allocation, or ``BackendError(InvalidArgument)`` naming ``name`` when it is not an
    int from MIN_ALLOCATION_BYTES to MAX_ALLOCATION_BYTES."""
    if isinstance(value, int) and not isinstance(value, bool) and MIN_ALLOCATION_BYTES <= value <= MAX_ALLOCATION_BYTES:
        return value
    _bad(name, value, f"an int from {MIN_ALLOCATION_BYTES} (1 MiB) to {MAX_ALLOCATION_BYTES} bytes")


def _allocation_bytes_from_env(name: str) -> int | None:
    text = os.environ.get(name, "").strip()
    if not text:
        return None
    try:
        value = int(text)
    except ValueError:
        _bad(name, text, "a whole number of bytes")
    return check_allocation_bytes(name, value)


def _seconds_from_env(name: str, default: float, positive: bool) -> float:
    text = os.environ.get(name)
    if text is None:
        return default
    try:
        value = float(text)
    except ValueError:
        _bad(name, text, "a number of seconds")
    return check_seconds(name, value, positive)


_FLAGS = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False, "no": False, "off": False}


def env_flag(name: str, default: bool) -> bool:
    """A boolean environment variable: 1/true/yes/on or 0/false/no/off (any case); unset or empty is ``default``.
    Anything else is ``BackendError(InvalidArgument)`` naming the variable. Every VKBACKEND_* switch is read here
    (docs/environment.md lists them)."""
    text = os.environ.get(name, "").strip().lower()
    if not text:
        return default
    if text not in _FLAGS:
        _bad(name, text, "one of 1, true, yes, on, 0, false, no, off")
    return _FLAGS[text]


def env_switch(name: str) -> bool | None:
    """A boolean environment variable read as :func:`env_flag` reads it, None where it is unset or empty (a switch
    whose default the package decides per device)."""
    return env_flag(name, False) if os.environ.get(name, "").strip() else None


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _bad(name: str, value: object, wanted: str) -> NoReturn:
    raise BackendError(ErrorStatus.InvalidArgument, f"{name}={value!r} is not valid: it must be {wanted}")


def debug_enabled() -> bool:
    """VKBACKEND_DEBUG=1 logs bring-up, submissions and validation messages through `logging` (default off)."""
    return env_flag("VKBACKEND_DEBUG", False)


def validation_enabled() -> bool:
    """VKBACKEND_VALIDATION=1 enables the Khronos validation layer and collects its messages (tests use it; default
    off)."""
    return env_flag("VKBACKEND_VALIDATION", False)


def cache_dir() -> Path:
    """Where pipeline caches (and the record of validated SPIR-V, the tensor-core layout probe's answers) persist:
    ``$VKBACKEND_CACHE_DIR``, else ``$XDG_CACHE_HOME/vkbackend`` when XDG_CACHE_HOME is an absolute path (the XDG
    base directory specification ignores a relative one), else ``~/.cache/vkbackend``."""
    chosen = os.environ.get("VKBACKEND_CACHE_DIR")
    if chosen:
        return Path(chosen)
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    return Path(xdg if os.path.isabs(xdg) else Path.home() / ".cache") / "vkbackend"
