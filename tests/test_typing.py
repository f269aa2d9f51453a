"""Types: ``mypy --strict`` is clean on the modules whose signatures users see and on code that uses the whole public
API (tests/typecheck_usage.py, also run here on the device); every public callable is annotated; ``stats()`` returns
what its TypedDict says."""

from __future__ import annotations

import importlib.util
import inspect
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

import vkbackend
from vkbackend import types

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(importlib.util.find_spec("mypy") is None, reason="needs mypy (pip install mypy; in the test extra)")
@pytest.mark.parametrize(
    "python_version", ["3.10", "3.12"]
)  # collections.abc.Buffer from 3.12, typing_extensions before
def test_mypy_strict_is_clean(python_version, tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--python-version",
            python_version,
            "--cache-dir",
            str(tmp_path),
            "--no-error-summary",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, (
        f"mypy (pyproject.toml's [tool.mypy], Python {python_version}):\n{proc.stdout}{proc.stderr}"
    )


def _public_callables() -> list[tuple[str, Callable[..., Any]]]:
    """Every function, public method and property getter reachable from ``vkbackend.__all__`` and
    ``vkbackend.types``."""
    found: list[tuple[str, Callable[..., Any]]] = []
    for name in vkbackend.__all__:
        obj = getattr(vkbackend, name)
        if inspect.isfunction(obj):
            found.append((name, obj))
        elif inspect.isclass(obj):
            for attr, member in vars(obj).items():
                if attr.startswith("_") and attr not in ("__init__", "__new__"):
                    continue
                if isinstance(member, property) and member.fget is not None:
                    found.append((f"{name}.{attr}", member.fget))
                elif isinstance(member, (staticmethod, classmethod)):
                    found.append((f"{name}.{attr}", member.__func__))
                elif inspect.isfunction(member):
                    found.append((f"{name}.{attr}", member))
    return [(name, f) for name, f in found if f.__module__.startswith("vkbackend")]  # not enum's own __new__


def test_every_public_callable_is_annotated():
    assert len(_public_callables()) > 30
    missing = []
    for name, function in _public_callables():
        signature = inspect.signature(function)
        params = [
            p.name
            for p in signature.parameters.values()
            if p.name not in ("self", "cls") and p.annotation is inspect.Parameter.empty
        ]
        if params or signature.return_annotation is inspect.Signature.empty:
            missing.append(f"{name}{signature}")
    assert not missing, "public callables without complete annotations:\n" + "\n".join(missing)


def test_every_public_name_is_used_by_the_typed_usage():
    """A name added to ``__all__`` gets a typed use in tests/typecheck_usage.py, so mypy checks how users call it."""
    usage = (ROOT / "tests" / "typecheck_usage.py").read_text()
    names = [*vkbackend.__all__, "DeviceStats", "PoolStats", "HostBuffer", "Scalar", "SupportsDLPack"]
    unused = [name for name in names if name not in usage]
    assert not unused, f"names of the public API that tests/typecheck_usage.py never uses: {unused}"


def test_typed_usage_runs(device):
    sys.path.insert(0, str(ROOT / "tests"))
    try:
        import typecheck_usage
    finally:
        sys.path.remove(str(ROOT / "tests"))
    assert typecheck_usage.exercise(device) == 5.0  # y[1] = 2 + 2 + 0.5 + 0.5
    assert typecheck_usage.buffers(device) == [1.0, 5.0, 7.0]
    if "VK_KHR_external_memory_fd" in device.info.extensions:
        assert typecheck_usage.shared(device) == [0, 1, 2, 3]
    assert [message.split(":")[0] for message in typecheck_usage.errors(device)] == [
        "InvalidArgument",
        "MemoryAllocationError",
        "InvalidArgumentTypeError",
        "KernelSyncError",
        "8",
    ]


def test_stats_match_their_typed_dicts(device):
    stats = device.stats()
    assert set(stats) == types.DeviceStats.__required_keys__
    assert set(stats["pool"]) == types.PoolStats.__required_keys__
    assert set(stats["live_objects"]) == types.LiveObjects.__required_keys__
    assert set(device.memory_pool.stats()) == types.PoolStats.__required_keys__
    numbers = [value for key, value in stats.items() if key not in ("pool", "live_objects")]
    numbers += [*stats["pool"].values(), *stats["live_objects"].values()]
    assert all(type(value) is int for value in numbers), stats


def test_the_package_says_it_is_typed():
    assert (Path(vkbackend.__file__).parent / "py.typed").is_file()
