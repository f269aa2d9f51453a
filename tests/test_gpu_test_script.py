"""scripts/gpu-test.sh refuses, before running anything, what would make tinygrad's tests fail by the hundred: a C
compiler that cannot build for tinygrad's bare CPU target, and a folder that is not tinygrad's repository."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "gpu-test.sh"


def _run(tmp_path: Path, checkout: Path, cc: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, CC=cc, OUT=str(tmp_path / "out"))
    return subprocess.run(
        ["bash", str(SCRIPT), str(checkout)], env=env, capture_output=True, text=True, check=False, timeout=60
    )


def test_a_compiler_without_bare_targets_is_refused_before_anything_runs(tmp_path):
    # Stands for gcc: it compiles, but rejects clang's --target, which tinygrad's CPU device passes.
    fake = tmp_path / "cc"
    fake.write_text(
        '#!/bin/sh\nfor a in "$@"; do case $a in --target=*) echo "unrecognized option $a" >&2; exit 1 ;; esac; done\n'
        "cat > /dev/null\nexit 0\n"
    )
    fake.chmod(0o755)
    result = _run(tmp_path, tmp_path, str(fake))
    assert result.returncode == 2, result.stdout + result.stderr
    assert "CC=clang" in result.stderr and str(fake) in result.stderr
    assert not (tmp_path / "out").exists(), "the suite started before the check"


def test_a_compiler_that_is_not_there_is_refused(tmp_path):
    result = _run(tmp_path, tmp_path, str(tmp_path / "no-such-cc"))
    assert result.returncode == 2, result.stdout + result.stderr
    assert "is not a program here" in result.stderr
    assert not (tmp_path / "out").exists(), "the suite started before the check"


def test_a_folder_that_is_not_tinygrads_repository_is_refused(tinygrad_cpu_device, tmp_path):
    result = _run(tmp_path, tmp_path, os.environ.get("CC", "clang"))  # a compiler that passes the check
    assert result.returncode == 2, result.stdout + result.stderr
    assert "is not a clone of tinygrad's repository" in result.stderr
    assert not (tmp_path / "out").exists(), "the suite started before the check"
