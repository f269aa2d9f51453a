"""VulkanConfig and the environment variables that stand in for it."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .errors import BackendError, ErrorStatus


@dataclass(frozen=True)
class VulkanConfig:
    """How to bring up Vulkan.

    ``device_ids``: indices (in discovery order) of the devices to open; ``None`` opens all, ``[]`` configures Vulkan
    out. Without a config, ``VKBACKEND_DEVICE_IDS="0,2"`` (or ``""``) does the same.
    ``robust_buffer_access``: enable the device's bounds-checked buffer access (``None``: ``VKBACKEND_ROBUST``, default
    on; see docs/reliability.md for its measured cost). ``push_descriptors``: use ``VK_KHR_push_descriptor`` where the
    device has it (off forces the descriptor-pool path). ``window_launches``: launches recorded into one command
    buffer at most. ``staging_chunk_bytes``/``staging_slots``: the transfer staging ring. ``sync_timeout_s``: the
    deadline of every wait on the GPU (``VKBACKEND_SYNC_TIMEOUT_S``, default 300). ``switch_interval_s``: the
    interpreter's GIL switch interval is lowered to this when a device opens (``VKBACKEND_SWITCH_INTERVAL_S``,
    default 0.0002; 0 leaves it alone), because the worker must win the GIL back after every wait on the GPU while the
    caller's thread is busy launching, and at Python's default of 5 ms the GPU sits idle meanwhile.
    """

    device_ids: list[int] | None = None
    robust_buffer_access: bool | None = None
    push_descriptors: bool = True
    window_launches: int = 8192
    staging_chunk_bytes: int = 0
    staging_slots: int = 4
    copy_threads: int = 0
    sync_timeout_s: float | None = None
    switch_interval_s: float | None = None

    @staticmethod
    def from_env() -> "VulkanConfig":
        """The config the environment describes (used when ``devices()`` gets none)."""
        ids = os.environ.get("VKBACKEND_DEVICE_IDS")
        device_ids = None
        if ids is not None:
            try:
                device_ids = [int(x) for x in ids.replace(" ", "").split(",") if x]
            except ValueError:
                raise BackendError(ErrorStatus.InvalidArgument,
                                   f"VKBACKEND_DEVICE_IDS={ids!r} is not a comma-separated list of device indices")
        return VulkanConfig(device_ids=device_ids,
                            push_descriptors=os.environ.get("VKBACKEND_PUSH_DESCRIPTORS", "1") != "0")

    def resolved_copy_threads(self) -> int:
        if self.copy_threads > 0:
            return self.copy_threads
        return max(1, min(8, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1))

    def resolved_robust_buffer_access(self) -> bool:
        if self.robust_buffer_access is not None:
            return self.robust_buffer_access
        return os.environ.get("VKBACKEND_ROBUST", "1") != "0"

    def resolved_switch_interval_s(self) -> float:
        if self.switch_interval_s is not None:
            return float(self.switch_interval_s)
        return _seconds_from_env("VKBACKEND_SWITCH_INTERVAL_S", 0.0002)

    def resolved_sync_timeout_s(self) -> float:
        if self.sync_timeout_s is not None:
            return float(self.sync_timeout_s)
        return _seconds_from_env("VKBACKEND_SYNC_TIMEOUT_S", 300.0)


def _seconds_from_env(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        raise BackendError(ErrorStatus.InvalidArgument, f"{name} must be a number of seconds") from None


def debug_enabled() -> bool:
    """VKBACKEND_DEBUG=1 logs bring-up, submissions and validation messages through `logging`."""
    return os.environ.get("VKBACKEND_DEBUG", "") not in ("", "0")


def validation_enabled() -> bool:
    """VKBACKEND_VALIDATION=1 enables the Khronos validation layer and collects its messages (tests use it)."""
    return os.environ.get("VKBACKEND_VALIDATION", "") not in ("", "0")


def cache_dir() -> Path:
    """Where pipeline caches persist: ``$VKBACKEND_CACHE_DIR``, default ``~/.cache/vkbackend``."""
    return Path(os.environ.get("VKBACKEND_CACHE_DIR") or Path.home() / ".cache" / "vkbackend")
