"""vkbackend.cache_key: the user's private key for what the cache folder keeps."""

import os
import stat
import threading

import pytest

from vkbackend import cache_key


def test_the_key_is_made_once_private_and_read_back(tmp_path):
    key = cache_key.read_or_create(tmp_path)
    path = tmp_path / cache_key.KEY_NAME
    assert key is not None and len(key) == 32 and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert cache_key.read_or_create(tmp_path) == key
    assert cache_key.sign(key, "a") == cache_key.sign(key, "a") != cache_key.sign(key, "b")
    assert not [p for p in tmp_path.iterdir() if p.name != cache_key.KEY_NAME]  # no temporary file left


def test_processes_making_it_at_once_all_get_the_same_whole_key(tmp_path):
    """The key appears whole (written before it is linked into place), so no reader finds it empty."""
    start, keys = threading.Barrier(16), []

    def read():
        start.wait()
        keys.append(cache_key.read_or_create(tmp_path))

    threads = [threading.Thread(target=read) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(keys) == 16 and keys[0] is not None and set(keys) == {keys[0]}


def test_a_key_others_can_use_or_a_link_signs_nothing_and_a_short_one_is_made_again(tmp_path):
    path = tmp_path / cache_key.KEY_NAME
    key = cache_key.read_or_create(tmp_path)
    path.chmod(0o644)
    assert cache_key.read_or_create(tmp_path) is None and path.read_bytes() == key  # left as it is
    path.unlink()
    (tmp_path / "elsewhere").write_bytes(key)
    os.chmod(tmp_path / "elsewhere", 0o600)
    path.symlink_to(tmp_path / "elsewhere")
    assert cache_key.read_or_create(tmp_path) is None
    path.unlink()
    path.write_bytes(b"short")  # this user's, cut short (a full disk)
    path.chmod(0o600)
    again = cache_key.read_or_create(tmp_path)
    assert again is not None and len(again) == 32 and path.read_bytes() == again


def test_a_folder_that_does_not_exist_raises(tmp_path):
    with pytest.raises(OSError):
        cache_key.read_or_create(tmp_path / "missing")
