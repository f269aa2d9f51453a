"""The key that signs what vkbackend keeps in its cache folder and trusts in a later process (the record of validated
SPIR-V, the tensor-core layout probe's answers): 32 random bytes in ``validation.key`` there, created 0600.

The key is used only when it is a regular file owned by this user that no one else can read or write, so writing the
cache folder, or copying files into it from elsewhere, cannot make vkbackend trust what they say: without the key an
entry is signed by nothing that matches (someone who can read the user's private files could sign entries; they could
also replace the package).
"""

from __future__ import annotations

import errno
import hashlib
import hmac
import os
import tempfile
from pathlib import Path

from .cache_files import read_regular

__all__ = ["KEY_NAME", "read_or_create", "sign"]

KEY_NAME = "validation.key"


def read_or_create(directory: Path) -> bytes | None:
    """The key in ``directory`` if it is a regular file of this user that no one else may read or write, created
    (0600) when missing; None otherwise (a key of another user's, a link, one no one can use). Raises ``OSError``
    where the folder cannot be read or written."""
    path = directory / KEY_NAME
    for _ in range(3):  # a short key removed, made again, read back
        try:
            key, st = read_regular(path, 33)
        except FileNotFoundError:
            _create(path)  # or another process did meanwhile: theirs is read next
            continue
        except ValueError:  # not a regular file
            return None
        except OSError as error:
            if error.errno in (errno.EACCES, errno.EPERM, errno.ELOOP):  # another user's, or a link
                return None
            raise
        if st.st_uid != os.geteuid() or st.st_mode & 0o077:
            return None
        if len(key) == 32:
            return key
        path.unlink(missing_ok=True)  # this user's, but cut short (a full disk): made again
    return None


def _create(path: Path) -> None:
    """A new key at ``path``, written in full before it appears there (a process reading it never finds it half
    written); where another process's appeared first, theirs stays."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".key-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:  # mkstemp makes it 0600
            f.write(os.urandom(32))
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
    finally:
        os.unlink(tmp)


def sign(key: bytes, text: str) -> str:
    """HMAC-SHA256 of ``text`` under ``key``, in hex."""
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()
