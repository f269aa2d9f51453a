"""Fixtures for the tinygrad plugin's tests.

Everything here skips cleanly: without tinygrad 0.14.0 (``pip install 'vkbackend[tinygrad]'``), without
glslangValidator (renderer tests) or without a Vulkan device (end-to-end tests)."""

from __future__ import annotations

import importlib.metadata
import shutil

import pytest


def _tinygrad_problem() -> str | None:
    try:
        version = importlib.metadata.version("tinygrad")
    except importlib.metadata.PackageNotFoundError:
        return "tinygrad is not installed (pip install 'vkbackend[tinygrad]')"
    return None if version == "0.14.0" else f"the VK plugin targets tinygrad 0.14.0, found {version}"


# without tinygrad 0.14.0 the test modules are not even imported (they import tinygrad at the top)
if (_problem := _tinygrad_problem()) is not None:
    collect_ignore_glob = ["test_*.py"]

    def pytest_report_header(config):
        return f"tinygrad plugin tests skipped: {_problem}"
else:
    import vkbackend.tinygrad  # noqa: F401 - installs the tinygrad.runtime.ops_vk import hook


@pytest.fixture(scope="session")
def glslang():
    if shutil.which("glslangValidator") is None:
        pytest.skip("glslangValidator is not installed (apt-get install glslang-tools)")


@pytest.fixture(scope="session")
def vk_device():
    """tinygrad's ``VK`` device, or a skip when there is no Vulkan driver."""
    from tinygrad import Device

    from vkbackend.errors import BackendError

    try:
        return Device["VK"]
    except (BackendError, RuntimeError) as e:
        pytest.skip(f"no usable Vulkan device for tinygrad: {e}")


@pytest.fixture(scope="session")
def vk_devices_count(vk_device) -> int:
    from vkbackend.tinygrad.runtime.ops_vk import vk_device_ids

    return len(vk_device_ids())


@pytest.fixture
def kernel_sources(monkeypatch) -> list[str]:
    """The GLSL of every kernel tinygrad's VK device loads from here on (VKProgram), in order."""
    from vkbackend.tinygrad.runtime import ops_vk

    seen: list[str] = []
    init = ops_vk.VKProgram.__init__

    def record(self, dev, obj):
        init(self, dev, obj)
        seen.append(self.lib.source)

    monkeypatch.setattr(ops_vk.VKProgram, "__init__", record)
    return seen
