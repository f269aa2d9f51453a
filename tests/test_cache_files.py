"""vkbackend.cache_files: how the cache folder's files are named, read and written."""

import os
from types import SimpleNamespace

import pytest

from vkbackend.cache_files import device_stem, read_regular, write_atomically


def test_a_devices_files_are_named_by_device_and_driver():
    info = SimpleNamespace(pipeline_cache_uuid="ab" * 16, vendor_id=0x10DE, device_id=0x2335, driver_version=0x91000000)
    assert device_stem(info) == f"{'ab' * 16}-10de-2335-91000000"


def test_a_file_is_replaced_whole_and_a_link_is_not_written_through(tmp_path):
    target, elsewhere = tmp_path / "kept.bin", tmp_path / "elsewhere"
    elsewhere.write_bytes(b"not to be touched")
    target.symlink_to(elsewhere)
    write_atomically(target, b"new")
    assert target.read_bytes() == b"new" and not target.is_symlink() and elsewhere.read_bytes() == b"not to be touched"
    write_atomically(target, memoryview(b"newer"))
    assert target.read_bytes() == b"newer"
    with pytest.raises(TypeError):
        write_atomically(target, "text, not bytes")  # type: ignore[arg-type]
    assert target.read_bytes() == b"newer"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["elsewhere", "kept.bin"]  # no temporary file left


def test_only_a_regular_file_is_read_and_never_through_a_link(tmp_path):
    kept = tmp_path / "kept.json"
    kept.write_bytes(b"0123456789")
    data, st = read_regular(kept, 4)
    assert data == b"0123" and st.st_size == 10
    (tmp_path / "link").symlink_to(kept)
    with pytest.raises(OSError):
        read_regular(tmp_path / "link", 4)
    os.mkfifo(tmp_path / "fifo")  # opened without waiting for a writer, then refused
    with pytest.raises(ValueError):
        read_regular(tmp_path / "fifo", 4)
    with pytest.raises(FileNotFoundError):
        read_regular(tmp_path / "missing", 4)
