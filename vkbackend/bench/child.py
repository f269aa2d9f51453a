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
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])  # the folder holding vkbackend/, for the child's sys.path
# ``python -m MODULE`` with the package root on sys.path, put there inside the child rather than through PYTHONPATH:
# PYTHONPATH would reach every program the child starts (glslangValidator, a C compiler, another Python's tools), and
# where the root is a site-packages folder another Python would import this one's packages.
_BOOTSTRAP = (
    "import runpy, sys; root, module = sys.argv[1:3]; del sys.argv[1:3]\n"
    "if root not in sys.path: sys.path.insert(1, root)\n"
    "runpy.run_module(module, run_name='__main__', alter_sys=True)"
)


@dataclass
class ChildResult:
    """What a child printed (its JSON lines, in order), its exit status and the end of its stderr."""

    lines: list[dict] = field(default_factory=list)
    returncode: int = 0
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.error


def run_module(
    module: str,
    args: list[str],
    env: dict[str, str] | None = None,
    timeout_s: float = 600,
    progress: Callable[[float], None] | None = None,
    every_s: float = 60,
) -> ChildResult:
    """Run ``python -m module *args`` with ``env`` added to ours (which it otherwise inherits as it is), finding this
    package where we found it; never raises for the child's failures. ``progress``: see ``run_command``."""
    return run_command(
        [sys.executable, "-c", _BOOTSTRAP, _PACKAGE_ROOT, module, *args],
        env,
        timeout_s,
        what=module,
        progress=progress,
        every_s=every_s,
    )


def run_command(
    command: list[str],
    env: dict[str, str] | None = None,
    timeout_s: float = 600,
    what: str | None = None,
    progress: Callable[[float], None] | None = None,
    every_s: float = 60,
) -> ChildResult:
    """Run ``command`` with ``env`` added to ours and read its JSON lines; never raises for the child's failures.

    ``what`` names the child in the error (default: the program's file name). ``progress`` is called with the seconds
    elapsed every ``every_s`` seconds while the child runs, so a long run can say it is alive.
    """
    what = what or Path(command[0]).name
    try:
        proc = subprocess.Popen(
            command,
            env={**os.environ, **(env or {})},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
        )
    except OSError as error:
        return ChildResult(returncode=-1, error=f"{what} could not start: {error}")
    with proc:  # _wait kills it on the way out of an exception (Ctrl-C), as subprocess.run does
        stdout, stderr = _wait(proc, timeout_s, progress, every_s)
    if stdout is None:
        return ChildResult(returncode=-1, error=f"{what} did not finish within {timeout_s:g} s")
    lines = []
    for line in stdout.splitlines():
        if line.startswith("{"):
            try:
                lines.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    error = ""
    if proc.returncode != 0:
        tail = [line for line in stderr.strip().splitlines() if line.strip()][-3:]
        error = f"{what} exited with {proc.returncode}: " + (" | ".join(tail) or "(no stderr)")
    return ChildResult(lines, proc.returncode, error)


def _wait(
    proc: subprocess.Popen, timeout_s: float, progress: Callable[[float], None] | None, every_s: float
) -> tuple[str | None, str]:
    """The child's stdout and stderr once it has exited; (None, "") when it ran past ``timeout_s`` and was killed."""
    start = time.monotonic()
    try:
        while True:
            left = timeout_s - (time.monotonic() - start)
            try:
                return proc.communicate(timeout=max(0.0, min(left, every_s) if progress else left))
            except subprocess.TimeoutExpired:
                if time.monotonic() - start >= timeout_s:
                    proc.kill()
                    proc.communicate()
                    return None, ""
                if progress is not None:
                    progress(time.monotonic() - start)
    except BaseException:
        proc.kill()
        raise


def emit(**fields) -> None:
    """The child's side: print one JSON line and flush, so a crash later keeps what came before."""
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()
