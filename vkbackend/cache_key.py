"""The key that signs what vkbackend keeps in its cache folder and trusts in a later process (the record of validated
SPIR-V, the tensor-core layout probe's answers): 32 random bytes in ``validation.key`` there, created 0600.

The key is used only when it is a regular file owned by this user that no one else can read or write, so writing the
cache folder, or copying files into it from elsewhere, cannot make vkbackend trust what they say: without the key an
entry is signed by nothing that matches (someone who can read the user's private files could sign entries; they could
also replace the package).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import stat
from pathlib import Path

__all__ = ["KEY_NAME", "read_or_create", "sign"]

KEY_NAME = "validation.key"


def read_or_create(directory: Path) -> bytes | None:
    """The key in ``directory`` if it is a regular file of this user that no one else may read or write, created
    (0600) when missing; None otherwise. Raises ``OSError`` where the folder cannot be read or written."""
    path = directory / KEY_NAME
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        key = os.urandom(32)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except FileExistsError:  # another process made it meanwhile: use theirs
            return read_or_create(directory)
        with os.fdopen(fd, "wb") as f:
            f.write(key)
        return key
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
            return None
        key = f.read(33)
    return key if len(key) == 32 else None


def sign(key: bytes, text: str) -> str:
    """HMAC-SHA256 of ``text`` under ``key``, in hex."""
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()
