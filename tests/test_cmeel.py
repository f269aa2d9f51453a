"""Where the cmeel wheels' files are found (vkbackend/cmeel.py): the cmeel.prefix of each absolute sys.path entry, in
sys.path order, for spirv-val, libSPIRV-Tools-shared and libglslang's folder."""

from __future__ import annotations

import sys

from vkbackend import cmeel, spirv_tools_lib, validation


def _prefix(site, *files: str, mode: int = 0o755):
    """``site/cmeel.prefix`` with the given files (paths below it), each of ``mode``."""
    for name in files:
        path = site / "cmeel.prefix" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")
        path.chmod(mode)
    return site / "cmeel.prefix"


def test_prefixes_follow_sys_path_and_skip_relative_entries(monkeypatch, tmp_path):
    first = _prefix(tmp_path / "a", "bin/spirv-val")
    second = _prefix(tmp_path / "b", "bin/spirv-val", "lib/libSPIRV-Tools-shared.so")
    relative = _prefix(tmp_path / "rel", "bin/spirv-val", "lib/libSPIRV-Tools-shared.so")
    monkeypatch.chdir(tmp_path)
    entries = ["rel", str(tmp_path / "none"), str(tmp_path / "a"), str(tmp_path / "b"), str(tmp_path / "a")]
    monkeypatch.setattr(sys, "path", entries)
    assert cmeel.prefixes() == [str(first), str(second)]
    assert cmeel.library_dirs() == [str(second / "lib")]  # a's prefix has no lib folder
    assert cmeel.find("bin", "spirv-val") == str(first / "bin" / "spirv-val")
    assert cmeel.find_all("bin", "spirv-val") == [str(first / "bin" / "spirv-val"), str(second / "bin" / "spirv-val")]
    assert cmeel.find("lib", "libSPIRV-Tools-shared.so") == str(second / "lib" / "libSPIRV-Tools-shared.so")
    assert cmeel.find("lib", "libglslang.so.13") is None
    assert str(relative) not in cmeel.prefixes()


def test_find_executable_skips_a_file_that_is_not(monkeypatch, tmp_path):
    _prefix(tmp_path / "a", "bin/spirv-val", mode=0o644)
    runnable = _prefix(tmp_path / "b", "bin/spirv-val")
    monkeypatch.setattr(sys, "path", [str(tmp_path / "a"), str(tmp_path / "b")])
    assert cmeel.find("bin", "spirv-val", executable=True) == str(runnable / "bin" / "spirv-val")
    assert cmeel.find("bin", "spirv-val") == str(tmp_path / "a" / "cmeel.prefix" / "bin" / "spirv-val")


def test_spirv_tools_are_taken_from_the_first_prefix_else_the_system(monkeypatch, tmp_path):
    prefix = _prefix(tmp_path / "site", "bin/spirv-val", "lib/libSPIRV-Tools-shared.so")
    monkeypatch.setattr(sys, "path", [str(tmp_path / "site")])
    assert spirv_tools_lib.find_library() == str(prefix / "lib" / "libSPIRV-Tools-shared.so")
    assert validation.find_validator() == str(prefix / "bin" / "spirv-val")
    monkeypatch.setattr(sys, "path", [str(tmp_path / "elsewhere")])
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert spirv_tools_lib.find_library() == "libSPIRV-Tools-shared.so"  # the dynamic linker's search
    assert validation.find_validator() is None
