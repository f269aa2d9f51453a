"""Test set-up: every test runs under the Khronos validation layer with synchronization validation, and any message
it prints fails the test. Tests that need a device skip with a reason when no Vulkan driver is present."""

from __future__ import annotations

import os
import platform
import subprocess
import tempfile

import pytest

import vkbackend
from vkbackend.errors import BackendError, ErrorStatus

# The first layer version that warns (VALIDATION-SETTINGS) about VK_LAYER_ENABLES, and takes VK_LAYER_VALIDATE_SYNC=1
# instead (the layer's docs/updating_from_VK_EXT_validation_features.md). Older layers, such as Debian 12's 1.3.239,
# know only VK_LAYER_ENABLES.
NEW_LAYER_SETTINGS = (1, 4, 335)


def validation_layer_version() -> tuple[int, int, int] | None:
    """The Khronos validation layer's version, as the loader lists it (no instance is created); None without one."""
    from vkbackend._ffi import vulkan
    from vkbackend.discovery import VALIDATION_LAYER, _enumerate

    try:
        ffi, lib = vulkan()
        layers = _enumerate(lib.vkEnumerateInstanceLayerProperties, "VkLayerProperties")
    except BackendError:
        return None
    for layer in layers:
        if ffi.string(layer.layerName).decode() == VALIDATION_LAYER:
            v = layer.specVersion
            return (v >> 22) & 0x7F, (v >> 12) & 0x3FF, v & 0xFFF
    return None


def sync_validation_settings(version: tuple[int, int, int] | None) -> dict[str, str]:
    """The environment that turns on synchronization validation in the validation layer of ``version``."""
    if version is not None and version >= NEW_LAYER_SETTINGS:
        return {"VK_LAYER_VALIDATE_SYNC": "1"}
    return {"VK_LAYER_ENABLES": "VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT"}


# Before vkbackend creates its instance (child processes inherit it). VKBACKEND_TEST_NO_VALIDATION=1 runs without the
# layer (e.g. on a GPU box that has no validation layer installed); the README's test command never sets it. A
# synchronization setting already in the environment is left as it is.
if os.environ.get("VKBACKEND_TEST_NO_VALIDATION", "") in ("", "0"):
    os.environ.setdefault("VKBACKEND_VALIDATION", "1")
    if not {"VK_LAYER_ENABLES", "VK_LAYER_VALIDATE_SYNC"} & set(os.environ):
        os.environ.update(sync_validation_settings(validation_layer_version()))
os.environ.setdefault("VKBACKEND_CACHE_DIR", tempfile.mkdtemp(prefix="vkbackend-test-cache-"))

KERNELS = os.path.join(os.path.dirname(__file__), "kernels")


def _first_device():
    try:
        found = vkbackend.devices()
    except BackendError as error:
        if error.status is ErrorStatus.DyLibNotFound:
            return None, f"no Vulkan loader: {error.context}"
        raise
    if not found:
        return None, "no Vulkan device (install mesa-vulkan-drivers for lavapipe)"
    return found[0], ""


@pytest.fixture(scope="session")
def device():
    """The first Vulkan device (lavapipe on a machine without a GPU)."""
    dev, reason = _first_device()
    if dev is None:
        pytest.skip(reason)
    return dev


def tinygrad_cpu_compiler_problem() -> str | None:
    """Why tinygrad's CPU device cannot compile here, or None where it can: it runs $CC (default clang; set but empty
    is no compiler, as tinygrad reads it) for a bare target, which gcc, say, refuses. scripts/gpu-test.sh asks too."""
    cc = os.environ.get("CC", "clang")
    command = [cc, "-c", "-x", "c", "-ffreestanding", "-nostdlib", f"--target={platform.machine()}-none-unknown-elf"]
    try:
        subprocess.run([*command, "-", "-o", os.devnull], input=b"int f(void) { return 0; }", capture_output=True,
                       check=True, timeout=60)  # fmt: skip
    except (FileNotFoundError, PermissionError):
        return (f"tinygrad's CPU device compiles C with $CC (default clang), and {cc!r} is not a program here; "
                "install clang and leave CC unset or set CC=clang")  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return (f"tinygrad's CPU device compiles C with $CC (here {cc!r}) for a bare target (--target=...), which "
                f"{cc!r} cannot do; install clang and set CC=clang")  # fmt: skip
    return None


@pytest.fixture(scope="session")
def tinygrad_cpu_device():
    """Skips where tinygrad's CPU device, which tinygrad's tensors lean on for some helpers, cannot compile."""
    problem = tinygrad_cpu_compiler_problem()
    if problem:
        pytest.skip(problem)


@pytest.fixture
def pool(device):
    return device.memory_pool


@pytest.fixture
def kernel(device):
    """kernel(name, **defines) -> program id, compiling tests/kernels/<name>.comp with glslang."""

    def build(name: str, **defines) -> int:
        with open(os.path.join(KERNELS, name + ".comp")) as f:
            return device.compile(vkbackend.compile_glsl(f.read(), defines or None))

    return build


@pytest.fixture(autouse=True)
def no_validation_messages(request):
    """Fail any test during which the validation layer said anything."""
    from vkbackend import testing

    yield
    messages = testing.validation_messages()
    assert not messages, f"validation layer messages during {request.node.nodeid}:\n{messages}"
