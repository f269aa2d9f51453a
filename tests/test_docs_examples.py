"""The documentation's Python examples, each run as a program of its own.

Every fenced ``python`` block of README.md and docs/*.md is one test, named by its file and the line of its fence
(docs/api.md is left out: it is generated from the docstrings). A block runs in a fresh interpreter, in an empty
folder, with the checkout first on PYTHONPATH and this process's environment (so the validation layer and the
settings conftest.py gives it); it passes when it exits with status 0, prints no traceback and leaves no validation
message behind.

Whether a block runs here is decided by these rules, the first that applies giving the reason it does not:

- ``<!-- not run: REASON -->`` on the line before its fence (a fragment of the block above, a sketch of what does not
  exist, an example too large for a test): skipped, with REASON;
- a module it imports is not installed (torch, jax, cupy, matplotlib): skipped, "needs torch", so that it runs
  wherever that module is installed;
- it uses CUDA (``torch.cuda``, CuPy, ``vkbackend.interop.cuda``): skipped where the CUDA driver sees no device;
- otherwise it runs, and at least ``MIN_RUN`` blocks must.

Shell and other blocks are not run.
"""

from __future__ import annotations

import ast
import ctypes
import functools
import importlib.util
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GENERATED = {"docs/api.md"}  # written by scripts/api_reference.py from the docstrings
LANGUAGES = {"python", "py", "python3"}
TIMEOUT_S = 120  # per block
MIN_RUN = 2  # the blocks that need numpy alone: README's "Use", the plugin guide's DLPack

FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})\s*(?P<info>[^\s`]*)")
NOT_RUN = re.compile(r"^\s*<!--\s*not run:\s*(?P<reason>.+?)\s*-->\s*$")
USES_CUDA = re.compile(r"\btorch\.cuda\b|\bcupy\b|\binterop\.cuda\b|\binterop import cuda\b")

# The child's wrapper: it runs the block, then fails with the validation layer's messages, if any.
RUNNER = ROOT / "tests" / "scripts" / "docs_example.py"


@dataclass(frozen=True)
class Block:
    """One fenced code block of a Markdown file."""

    path: str  # relative to the checkout
    line: int  # of the opening fence, counted from 1
    language: str  # the fence's info string's first word, lower case ('' for none)
    code: str
    not_run: str  # the reason of a ``<!-- not run: ... -->`` marker just before the fence ('' for none)

    @property
    def name(self) -> str:
        return f"{self.path}:{self.line}"


def markdown_files() -> list[Path]:
    """README.md and docs/*.md, less the generated ones."""
    files = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    return [f for f in files if f.relative_to(ROOT).as_posix() not in GENERATED]


def fenced_blocks(text: str, path: str) -> list[Block]:
    """Every fenced code block of ``text`` (the Markdown file ``path``), with the marker before it, if any."""
    lines = text.splitlines()
    blocks, i = [], 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        fence, indent = opening["fence"], len(opening["indent"])
        end = next(
            (
                j
                for j in range(i + 1, len(lines))
                if lines[j].strip().startswith(fence[0] * len(fence)) and not lines[j].strip().strip(fence[0])
            ),
            len(lines),
        )
        code = "\n".join(line[min(indent, len(line) - len(line.lstrip(" "))) :] for line in lines[i + 1 : end])
        before = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        marker = NOT_RUN.match(before)
        blocks.append(Block(path, i + 1, opening["info"].lower(), code + "\n", marker["reason"] if marker else ""))
        i = end + 1
    return blocks


def python_blocks() -> list[Block]:
    """The Python blocks of every documentation file, in file order."""
    blocks = [
        b
        for f in markdown_files()
        for b in fenced_blocks(f.read_text(encoding="utf-8"), f.relative_to(ROOT).as_posix())
    ]
    return [b for b in blocks if b.language in LANGUAGES]


def imported_modules(code: str) -> list[str]:
    """The top-level names of the modules ``code`` imports, in order of appearance (relative imports left out)."""
    names: list[str] = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            names += [alias.name.split(".")[0] for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module.split(".")[0])
    return list(dict.fromkeys(names))


@functools.cache
def cuda_devices() -> int:
    """The CUDA devices the NVIDIA driver's library sees (0 without it), asked without importing a framework."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return 0
    count = ctypes.c_int()
    if lib.cuInit(0) or lib.cuDeviceGetCount(ctypes.byref(count)):
        return 0
    return count.value


def skip_reason(block: Block) -> str:
    """Why ``block`` cannot run here, by the rules of this module's docstring; '' when it can."""
    if block.not_run:
        return block.not_run
    missing = [name for name in imported_modules(block.code) if importlib.util.find_spec(name) is None]
    if missing:
        return "needs " + ", ".join(missing)
    if USES_CUDA.search(block.code) and not cuda_devices():
        return "needs a CUDA device (an NVIDIA GPU and its driver)"
    return ""


def run_block(block: Block, folder: Path) -> subprocess.CompletedProcess[str]:
    """Run ``block`` in a fresh interpreter in ``folder``, under the wrapper RUNNER."""
    # Blank lines ahead of the code make a traceback's line numbers those of the Markdown file, and the script's name
    # says which file that is.
    script = folder / (Path(block.path).name + ".py")
    script.write_text("\n" * block.line + block.code, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.run(
        [sys.executable, str(RUNNER), str(TIMEOUT_S - 5), str(script)],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )


BLOCKS = python_blocks()


@pytest.mark.parametrize("block", BLOCKS, ids=[b.name for b in BLOCKS])
def test_block(block: Block, device, tmp_path: Path) -> None:
    """The block runs to the end: exit status 0, no traceback, no validation message."""
    reason = skip_reason(block)
    if reason:
        pytest.skip(reason)
    proc = run_block(block, tmp_path)
    output = f"{block.name} (exit {proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    assert proc.returncode == 0, output
    assert "Traceback (most recent call last)" not in proc.stdout + proc.stderr, output


def test_enough_blocks_run() -> None:
    """A change of the rules or of the docs that left (almost) nothing to run fails here, not silently."""
    runnable = [b.name for b in BLOCKS if not skip_reason(b)]
    assert len(runnable) >= MIN_RUN, f"only {runnable} of {[b.name for b in BLOCKS]} run here"


def test_rules() -> None:
    """The parser and the rules, on a file made for them: fences of both kinds, a marker, a missing module."""
    text = (
        "Text.\n\n<!-- not run: a fragment of the block above -->\n```python\nx = 1\n```\n\n"
        "~~~py\nimport no_such_module_here\n~~~\n\n```sh\nls\n```\n\n  ```python\n  print(1)\n  ```\n"
    )
    blocks = fenced_blocks(text, "probe.md")
    assert [(b.line, b.language, b.code) for b in blocks] == [
        (4, "python", "x = 1\n"),
        (8, "py", "import no_such_module_here\n"),
        (12, "sh", "ls\n"),
        (16, "python", "print(1)\n"),
    ]
    assert [skip_reason(b) for b in blocks] == ["a fragment of the block above", "needs no_such_module_here", "", ""]
