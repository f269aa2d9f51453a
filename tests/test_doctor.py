"""``python -m vkbackend doctor``: the loader, the devices and their drivers, the tools, the cache folder, the
VKBACKEND_* settings and tinygrad in one report, what to install for what is missing, and exit status 0 only when a
device works; without a loader or a driver it still reports, with no traceback."""

from __future__ import annotations

import importlib.metadata
import os
import re
import subprocess
import sys
from pathlib import Path

import vkbackend.glsl
import vkbackend.validation
from vkbackend import cli, doctor
from vkbackend.config import cache_dir

ROOT = Path(__file__).resolve().parents[1]


def run_doctor(**env: str) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), **env}
    return subprocess.run(
        [sys.executable, "-m", "vkbackend", "doctor"], capture_output=True, text=True, env=full, cwd=ROOT, timeout=300
    )


def test_every_documented_variable_is_parsed():
    """The doctor's table and docs/environment.md name the same variables."""
    page = (ROOT / "docs" / "environment.md").read_text()
    documented = set(re.findall(r"^\| `(VKBACKEND_[A-Z0-9_]+)`", page, re.MULTILINE))
    assert set(doctor.SETTINGS) == documented


def test_a_working_device_is_reported_with_its_loader_driver_tools_and_settings(device, monkeypatch, capsys):
    monkeypatch.setenv("VKBACKEND_SYNC_TIMEOUT_S", "12.5")
    monkeypatch.setenv("VKBACKEND_TINYGRAD_TC", "sometimes")
    monkeypatch.setenv("VKBACKEND_" + "DEBGU", "1")  # a typo (spelt in two: the docs test reads every name here)
    assert doctor.doctor() == 0
    out = capsys.readouterr().out
    loader = doctor.loader_path()
    assert loader is not None and os.path.isfile(loader) and f"Vulkan loader: {loader}" in out
    i = device.info
    assert (
        f"  {device.index}: {i.name} ({i.device_type}, vendor {i.vendor_id:#06x}), Vulkan {i.api_version}, "
        f"driver {cli.driver_text(i.driver_name, i.driver_info, i.vendor_id, i.driver_version)}: works\n"
    ) in out
    assert re.search(r"^  glslangValidator: /\S+ \(.+\)$", out, re.M), out
    assert re.search(r"^  spirv-val: /\S+ \(.+\)$", out, re.M), out
    assert f"Pipeline cache folder: {cache_dir()} (from VKBACKEND_CACHE_DIR" in out  # the test suite sets it
    assert "  VKBACKEND_SYNC_TIMEOUT_S='12.5': 12.5 s\n" in out
    assert "  VKBACKEND_TINYGRAD_TC='sometimes': INVALID: VKBACKEND_TINYGRAD_TC='sometimes' is not valid" in out
    assert "did you mean VKBACKEND_DEBUG?" in out.split("To fix:")[1]
    assert out.rstrip().endswith("vkbackend works: a device opens and moves data")


def test_what_is_missing_comes_with_what_to_install(device, monkeypatch, capsys):
    """No glslang, no spirv-val, no C compiler, no tinygrad: each is named with its package; the device still works."""
    version = importlib.metadata.version

    def no_tinygrad(name: str) -> str:
        if name == "tinygrad":
            raise importlib.metadata.PackageNotFoundError(name)
        return version(name)

    monkeypatch.setattr(vkbackend.glsl, "_compilers", lambda: [])
    monkeypatch.setattr(vkbackend.validation, "find_validator", lambda: None)
    monkeypatch.setattr(importlib.metadata, "version", no_tinygrad)
    monkeypatch.setenv("CC", "/nonexistent/cc")
    assert doctor.doctor() == 0
    out = capsys.readouterr().out
    fixes, optional = out.split("To fix:")[1].split("Optional")
    assert "glslangValidator: missing" in out and "apt-get install glslang-tools" in fixes
    assert "pip install 'vkbackend[glsl]'" in fixes
    assert "spirv-val: missing" in out and "apt-get install spirv-tools" in fixes
    assert "C compiler: missing" in out and "apt-get install gcc" in optional
    assert "tinygrad: not installed" in out and "pip install '.[tinygrad]'" in optional


def test_a_device_that_does_not_open_is_explained(device):
    assert doctor.try_device(device.index) is None
    assert "device id 99 does not exist" in doctor.try_device(99)


def test_without_a_vulkan_loader_it_says_what_to_install():
    result = run_doctor(VKBACKEND_VULKAN_LIBRARY="/nonexistent/libvulkan.so.1")
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert "Vulkan loader: none could be opened" in result.stdout
    fixes = result.stdout.split("To fix:")[1]
    assert "/nonexistent/libvulkan.so.1" in fixes and "apt-get install libvulkan1 mesa-vulkan-drivers" in fixes
    assert "  VKBACKEND_VULKAN_LIBRARY='/nonexistent/libvulkan.so.1'" in result.stdout
    assert "Tools:" in result.stdout and "Pipeline cache folder:" in result.stdout  # the other checks still ran
    assert result.stdout.rstrip().endswith("vkbackend has no working device")


def test_without_a_driver_it_says_what_to_install(device):
    result = run_doctor(VK_DRIVER_FILES="/nonexistent/icd.json", VK_ICD_FILENAMES="/nonexistent/icd.json")
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert "VK_DRIVER_FILES=/nonexistent/icd.json" in result.stdout
    assert "apt-get install mesa-vulkan-drivers" in result.stdout.split("To fix:")[1]


def test_configured_out_devices_are_not_working_devices(device):
    result = run_doctor(VKBACKEND_DEVICE_IDS="")
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert "not tried: VKBACKEND_DEVICE_IDS leaves it out" in result.stdout
    assert "VKBACKEND_DEVICE_IDS is empty" in result.stdout.split("To fix:")[1]


def test_the_command_exits_0_with_a_working_device(device):
    result = run_doctor()
    assert result.returncode == 0 and result.stderr == "", result.stderr
    assert f"{device.info.name}" in result.stdout and ": works\n" in result.stdout


def test_a_check_that_breaks_does_not_end_the_report(device, monkeypatch, capsys):
    def broken(report: doctor.Report) -> None:
        raise RuntimeError("a tool printed something unexpected")

    monkeypatch.setattr(doctor, "tools", broken)
    assert doctor.doctor() == 0
    out = capsys.readouterr().out
    assert "The check of the tools failed: RuntimeError: a tool printed something unexpected" in out
    assert "Pipeline cache folder:" in out and "Settings" in out  # the checks after it ran
