"""Files vkbackend keeps in its cache folder (:func:`vkbackend.config.cache_dir`): how a device's are named, how one
is read without trusting what stands under its name, and how one is written."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .discovery import DeviceInfo

__all__ = ["device_stem", "read_regular", "write_atomically"]


def device_stem(info: DeviceInfo) -> str:
    """What names a device's files: its pipeline-cache UUID, vendor, device and driver version, so that no other
    device's or driver's file is read for it."""
    return f"{info.pipeline_cache_uuid}-{info.vendor_id:04x}-{info.device_id:04x}-{info.driver_version:08x}"


def read_regular(path: Path, limit: int) -> tuple[bytes, os.stat_result]:
    """At most ``limit`` bytes of ``path``, and its status, where it is a regular file: a link there is not followed
    (``OSError``, ELOOP) and a FIFO not waited on; anything but a regular file raises ``ValueError``, a missing one
    ``FileNotFoundError``."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(f"{path} is not a regular file")
        return f.read(limit), st


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
