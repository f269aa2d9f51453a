"""Shared by the bench tests: ``python -m vkbackend bench ...`` in a fresh process, with its JSON records, and the
skip for a machine that cannot build the C reference."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from vkbackend.bench import vulkan_ref
from vkbackend.bench.cases import Skip

ROOT = Path(__file__).resolve().parents[1]


def run_bench(args: list[str], json_path: Path, timeout_s: float) -> tuple[subprocess.CompletedProcess, list | None]:
    """``python -m vkbackend bench *args --json json_path`` from the checkout (inheriting the suite's validation
    settings): the finished process and the records it wrote (None when it wrote none)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run(
        [sys.executable, "-m", "vkbackend", "bench", *args, "--json", str(json_path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    return proc, json.loads(json_path.read_text()) if json_path.exists() else None


def require_c_reference() -> tuple[list[str], Path]:
    """The C compiler and the Vulkan headers' folder the bench's C reference is built with; skips the test (with the
    bench's own reason) where either is missing."""
    try:
        return vulkan_ref.c_compiler(), vulkan_ref.vulkan_include()
    except Skip as reason:
        pytest.skip(str(reason))
