"""Environment variables: one parser for every VKBACKEND_* switch, a page that documents every variable the code
reads (docs/environment.md), and where the caches go."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from _reliability import run_script

from vkbackend import InvalidArgumentError
from vkbackend.config import VulkanConfig, cache_dir, debug_enabled, env_flag, validation_enabled

ROOT = Path(__file__).resolve().parent.parent
NAME = re.compile(r"VKBACKEND_[A-Z0-9_]+")
# The variables that are not switches: each is read with os.environ directly, and only here.
NOT_SWITCHES = {"VKBACKEND_DEVICE_IDS", "VKBACKEND_CACHE_DIR", "VKBACKEND_VULKAN_LIBRARY", "VKBACKEND_TRACE"}


def _code_files() -> list[Path]:
    files = [ROOT / ".ci" / "run", ROOT / "setup.py", ROOT / "build_vulkan.py"]
    for folder in ("vkbackend", "scripts", "tests"):
        files += [p for p in (ROOT / folder).rglob("*") if p.suffix in (".py", ".c", ".h", ".sh", ".comp")]
    return [p for p in files if p.is_file()]


def test_every_variable_the_code_reads_is_documented():
    page = (ROOT / "docs" / "environment.md").read_text()
    documented = set(re.findall(r"^\| `(VKBACKEND_[A-Z0-9_]+)`", page, re.MULTILINE))
    used: dict[str, Path] = {}
    for path in _code_files():
        for name in NAME.findall(path.read_text(errors="replace")):
            used.setdefault(name, path.relative_to(ROOT))
    missing = {name: str(path) for name, path in used.items() if name not in documented}
    assert not missing, f"add these to the tables of docs/environment.md: {missing}"
    assert {"VKBACKEND_PUSH_DESCRIPTORS", "VKBACKEND_TRACE", "VKBACKEND_SWITCH_INTERVAL_S"} <= documented
    readme = (ROOT / "README.md").read_text()
    assert "docs/environment.md" in readme


def test_switches_are_read_only_through_env_flag():
    """No module of the package reads a VKBACKEND_* switch itself (by its name, or a module constant that holds it):
    only the variables that are not switches are read with os.environ (config.py's seconds go through their own
    parser, which names the variable too)."""
    found = []
    for path in (ROOT / "vkbackend").rglob("*.py"):
        tree = ast.parse(path.read_text())
        constants = {
            t.id: n.value.value
            for n in tree.body
            if isinstance(n, ast.Assign)  # SWITCH = "VKBACKEND_..."
            and isinstance(n.value, ast.Constant)
            for t in n.targets
            if isinstance(t, ast.Name)
        }
        for node in ast.walk(tree):
            target = None
            if isinstance(node, ast.Call) and ast.unparse(node.func) in ("os.environ.get", "os.getenv") and node.args:
                target = node.args[0]
            elif isinstance(node, ast.Subscript) and ast.unparse(node.value) == "os.environ":
                target = node.slice
            if target is None:
                continue
            name = target.value if isinstance(target, ast.Constant) else constants.get(getattr(target, "id", ""))
            if str(name).startswith("VKBACKEND_") and name not in NOT_SWITCHES:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
    assert not found, "read switches with vkbackend.config.env_flag:\n" + "\n".join(found)


@pytest.mark.parametrize(
    "read,name,default",
    [
        (debug_enabled, "VKBACKEND_DEBUG", False),
        (validation_enabled, "VKBACKEND_VALIDATION", False),
        (lambda: env_flag("VKBACKEND_TINYGRAD_GRAPH", True), "VKBACKEND_TINYGRAD_GRAPH", True),
        (lambda: VulkanConfig().resolved_cuda_clocks(), "VKBACKEND_CUDA_CLOCKS", True),
        (lambda: VulkanConfig().resolved_direct_access(), "VKBACKEND_DIRECT_ACCESS", True),
        (lambda: VulkanConfig().resolved_pipeline_statistics(), "VKBACKEND_PIPELINE_STATISTICS", False),
    ],
)
def test_switches_take_every_spelling(monkeypatch, read, name, default):
    for text in ("0", "false", "no", "off", "OFF", " False "):
        monkeypatch.setenv(name, text)
        assert read() is False, text
    for text in ("1", "true", "yes", "on", "ON", "True"):
        monkeypatch.setenv(name, text)
        assert read() is True, text
    monkeypatch.setenv(name, "")
    assert read() is default
    monkeypatch.delenv(name)
    assert read() is default
    monkeypatch.setenv(name, "maybe")
    with pytest.raises(InvalidArgumentError, match=f"{name}='maybe' is not valid: it must be one of 1, true"):
        read()


def test_tinygrad_tensor_core_switch_is_a_switch(monkeypatch):
    pytest.importorskip("tinygrad", reason="tinygrad==0.14.0 not installed (pip install .[tinygrad])")
    from vkbackend.tinygrad.renderer.tensor_cores import SWITCH, device_shapes

    monkeypatch.setenv(SWITCH, "sometimes")
    with pytest.raises(InvalidArgumentError, match="VKBACKEND_TINYGRAD_TC='sometimes'"):
        device_shapes(object())
    monkeypatch.setenv(SWITCH, "off")
    assert device_shapes(object()) == ((), 0)


def test_validation_off_and_debug_false_mean_off():
    """In a fresh process: VKBACKEND_VALIDATION=off loads no layer, VKBACKEND_DEBUG=false logs nothing."""
    proc = run_script("environment_validation_off", env={"VKBACKEND_VALIDATION": "off", "VKBACKEND_DEBUG": "false"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False", "False"], proc.stdout + proc.stderr


def test_cache_dir_follows_xdg_cache_home(monkeypatch, tmp_path):
    monkeypatch.delenv("VKBACKEND_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert cache_dir() == Path.home() / ".cache" / "vkbackend"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "vkbackend"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")  # the specification says to ignore a relative path
    assert cache_dir() == Path.home() / ".cache" / "vkbackend"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("VKBACKEND_CACHE_DIR", str(tmp_path / "mine"))
    assert cache_dir() == tmp_path / "mine"
