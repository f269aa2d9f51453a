"""Shared by the bench tests: ``python -m vkbackend bench ...`` in a fresh process, with its JSON records."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_bench(args: list[str], json_path: Path, timeout_s: float) -> tuple[subprocess.CompletedProcess, list | None]:
    """``python -m vkbackend bench *args --json json_path`` from the checkout (inheriting the suite's validation
    settings): the finished process and the records it wrote (None when it wrote none)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-m", "vkbackend", "bench", *args, "--json", str(json_path)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=timeout_s, check=False)
    return proc, json.loads(json_path.read_text()) if json_path.exists() else None
