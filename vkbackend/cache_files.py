"""Files vkbackend keeps in its cache folder (:func:`vkbackend.config.cache_dir`): how a device's are named, and how
one is written."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .discovery import DeviceInfo

__all__ = ["device_stem", "write_atomically"]


def device_stem(info: DeviceInfo) -> str:
    """What names a device's files: its pipeline-cache UUID, vendor, device and driver version, so that no other
    device's or driver's file is read for it."""
    return f"{info.pipeline_cache_uuid}-{info.vendor_id:04x}-{info.device_id:04x}-{info.driver_version:08x}"


def write_atomically(path: Path, data: bytes | memoryview) -> None:
    """Write ``data`` to ``path`` through a new temporary file beside it, renamed over it: a reader finds the old file
    or the new one whole, and nothing is written through a link planted under a predictable name. The temporary file
    is removed where writing fails; raises ``OSError``."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
