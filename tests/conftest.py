"""Test set-up: every test runs under the Khronos validation layer with synchronization validation, and any message
it prints fails the test. Tests that need a device skip with a reason when no Vulkan driver is present."""
from __future__ import annotations

import os
import tempfile

import pytest

# Before vkbackend creates its instance. VKBACKEND_TEST_NO_VALIDATION=1 runs without the layer (e.g. on a GPU box
# that has no validation layer installed); the README's test command never sets it.
if os.environ.get("VKBACKEND_TEST_NO_VALIDATION", "") in ("", "0"):
    os.environ.setdefault("VKBACKEND_VALIDATION", "1")
    os.environ.setdefault("VK_LAYER_ENABLES", "VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT")
os.environ.setdefault("VKBACKEND_CACHE_DIR", tempfile.mkdtemp(prefix="vkbackend-test-cache-"))

import vkbackend  # noqa: E402
from vkbackend.errors import BackendError, ErrorStatus  # noqa: E402

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
    from vkbackend import discovery
    yield
    if discovery.Instance._current is not None:
        messages = discovery.validation_messages()
        assert not messages, f"validation layer messages during {request.node.nodeid}:\n{messages}"
