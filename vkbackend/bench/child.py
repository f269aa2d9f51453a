"""Running a bench program in a fresh Python process and reading the JSON lines it prints.

The compile cases need a fresh process (nothing cached in memory) and the peers run apart from our device (their own
Vulkan instance or CUDA context, their own memory). A child prints one JSON object per line on stdout; anything else
it prints is ignored. ``emit`` is the child's side.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])  # the folder holding vkbackend/, for the child's sys.path


@dataclass
class ChildResult:
    """What a child printed (its JSON lines, in order), its exit status and the end of its stderr."""

    lines: list[dict] = field(default_factory=list)
    returncode: int = 0
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.error


def run_module(module: str, args: list[str], env: dict[str, str] | None = None, timeout_s: float = 600) -> ChildResult:
    """Run ``python -m module *args`` with ``env`` added to ours; never raises for the child's failures."""
    child_env = dict(os.environ)
    child_env.update(env or {})
    path = child_env.get("PYTHONPATH", "")
    child_env["PYTHONPATH"] = _PACKAGE_ROOT + (os.pathsep + path if path else "")
    try:
        proc = subprocess.run([sys.executable, "-m", module, *args], env=child_env, capture_output=True, text=True,
                              errors="replace", timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return ChildResult(returncode=-1, error=f"{module} did not finish within {timeout_s:g} s")
    lines = []
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            try:
                lines.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    error = ""
    if proc.returncode != 0:
        tail = [line for line in proc.stderr.strip().splitlines() if line.strip()][-3:]
        error = f"{module} exited with {proc.returncode}: " + (" | ".join(tail) or "(no stderr)")
    return ChildResult(lines, proc.returncode, error)


def emit(**fields) -> None:
    """The child's side: print one JSON line and flush, so a crash later keeps what came before."""
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()
