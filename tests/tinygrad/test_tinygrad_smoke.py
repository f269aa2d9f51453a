"""tinygrad's own smoke suite, test/test_tiny.py from the tinygrad 0.14.0 sdist, run with DEV=VK on vkbackend."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

import vkbackend

pytest.importorskip("tinygrad", reason="tinygrad==0.14.0 not installed (pip install .[tinygrad])")
SDIST_CACHE = Path(os.environ.get("VKBACKEND_TEST_DOWNLOADS", Path.home() / ".cache" / "vkbackend-tests"))


def tinygrad_sdist() -> Path:
    """The tinygrad 0.14.0 sdist (it has test/test_tiny.py; the wheel does not), downloaded once from PyPI."""
    found = sorted(SDIST_CACHE.glob("tinygrad-0.14.0.tar.gz"))
    if found:
        return found[0]
    SDIST_CACHE.mkdir(parents=True, exist_ok=True)
    download = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "-q",
            "--no-binary",
            ":all:",
            "--no-deps",
            "tinygrad==0.14.0",
            "-d",
            str(SDIST_CACHE),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if download.returncode != 0:  # a machine without access to PyPI (the GPU machines of the project's own runs)
        pytest.skip(
            f"cannot download the tinygrad 0.14.0 sdist from PyPI (or put it in {SDIST_CACHE}): "
            f"{download.stderr.strip()[-300:]}"
        )
    return SDIST_CACHE / "tinygrad-0.14.0.tar.gz"


def test_tinygrad_test_tiny_passes_on_vk(device, tinygrad_cpu_device, tmp_path):
    with tarfile.open(tinygrad_sdist()) as sdist:
        member = sdist.getmember("tinygrad-0.14.0/test/test_tiny.py")
        (tmp_path / "test_tiny.py").write_bytes(sdist.extractfile(member).read())
    # the child imports the vkbackend this suite tests, installed or not
    root = str(Path(vkbackend.__file__).resolve().parent.parent)
    env = {**os.environ, "DEV": "VK", "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "vkbackend.tinygrad.testing_skips",
            "-p",
            "no:cacheprovider",
            "test_tiny.py",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    summary = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else result.stderr[-2000:]
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert " passed" in summary and "failed" not in summary, summary
    print(f"tinygrad test/test_tiny.py on DEV=VK: {summary}")
