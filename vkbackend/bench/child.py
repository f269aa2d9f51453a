"""Running a bench program in a fresh process and reading the JSON lines it prints.

The compile cases need a fresh process (nothing cached in memory) and the peers run apart from our device (their own
Vulkan instance or CUDA context, their own memory). A child, a Python module (``run_module``) or a program
(``run_command``, the C reference), prints one JSON object per line on stdout; anything else it prints is ignored.
``emit`` is a Python child's side.
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
    child_env = dict(env or {})
    path = child_env.get("PYTHONPATH", os.environ.get("PYTHONPATH", ""))
    child_env["PYTHONPATH"] = _PACKAGE_ROOT + (os.pathsep + path if path else "")
    return run_command([sys.executable, "-m", module, *args], child_env, timeout_s, what=module)


def run_command(command: list[str], env: dict[str, str] | None = None, timeout_s: float = 600,
                what: str | None = None) -> ChildResult:
    """Run ``command`` with ``env`` added to ours and read its JSON lines; never raises for the child's failures.

    ``what`` names the child in the error (default: the program's file name).
    """
    what = what or Path(command[0]).name
    try:
        proc = subprocess.run(command, env={**os.environ, **(env or {})}, capture_output=True, text=True,
                              errors="replace", timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return ChildResult(returncode=-1, error=f"{what} did not finish within {timeout_s:g} s")
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
        error = f"{what} exited with {proc.returncode}: " + (" | ".join(tail) or "(no stderr)")
    return ChildResult(lines, proc.returncode, error)


def emit(**fields) -> None:
    """The child's side: print one JSON line and flush, so a crash later keeps what came before."""
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()
