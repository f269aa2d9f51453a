"""Errors people can catch: ``BackendError(status, context)`` is the subclass of its status, out of memory is also a
``MemoryError``, bad arguments also a ``ValueError`` (wrong types also a ``TypeError``); errors survive pickling; and
without a loader, a driver or a device the message says what to install or set."""

from __future__ import annotations

import copy
import glob
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
from _reliability import run_script

import vkbackend
from vkbackend import testing
from vkbackend._ffi import lib
from vkbackend.errors import (
    NO_DEVICE_HINT,
    NO_DRIVER_HINT,
    BackendError,
    DeviceLostError,
    DLPackExportError,
    DyLibNotFoundError,
    ErrorStatus,
    InitializationError,
    InvalidArgumentError,
    InvalidArgumentTypeError,
    KernelCompilationError,
    KernelLaunchError,
    KernelSyncError,
    MemoryAllocationError,
    check,
)

ROOT = Path(__file__).resolve().parents[1]
CLASSES = {
    ErrorStatus.DyLibNotFound: DyLibNotFoundError,
    ErrorStatus.Initialization: InitializationError,
    ErrorStatus.MemoryAllocation: MemoryAllocationError,
    ErrorStatus.KernelCompilation: KernelCompilationError,
    ErrorStatus.KernelLaunch: KernelLaunchError,
    ErrorStatus.KernelSync: KernelSyncError,
    ErrorStatus.DeviceLost: DeviceLostError,
    ErrorStatus.InvalidArgument: InvalidArgumentError,
}


@pytest.mark.parametrize("status", list(ErrorStatus))
def test_the_constructor_makes_the_subclass_of_the_status(status):
    error = BackendError(status, "what happened; what to do")
    assert type(error) is CLASSES[status]
    assert isinstance(error, BackendError)
    assert error.status is status and error.context == "what happened; what to do"
    assert str(error) == f"{status.value}: what happened; what to do"
    again = CLASSES[status](status, "by its own name")  # a subclass takes the same arguments
    assert type(again) is CLASSES[status] and again.status is status


def test_builtin_types_catch_what_they_should():
    assert isinstance(BackendError(ErrorStatus.MemoryAllocation, "x"), MemoryError)
    assert isinstance(BackendError(ErrorStatus.InvalidArgument, "x"), ValueError)
    wrong_type = InvalidArgumentTypeError(ErrorStatus.InvalidArgument, "x")
    assert isinstance(wrong_type, TypeError) and isinstance(wrong_type, ValueError)
    assert wrong_type.status is ErrorStatus.InvalidArgument
    no_export = DLPackExportError(ErrorStatus.InvalidArgument, "x")  # the DLPack protocol's type for "cannot export"
    assert isinstance(no_export, BufferError) and isinstance(no_export, ValueError)
    for status in set(ErrorStatus) - {ErrorStatus.MemoryAllocation, ErrorStatus.InvalidArgument}:
        assert not isinstance(BackendError(status, "x"), (MemoryError, ValueError, TypeError)), status
    with pytest.raises(MemoryError):
        check(lib.VK_ERROR_OUT_OF_DEVICE_MEMORY, "vkAllocateMemory")


@pytest.mark.parametrize(
    "error",
    [BackendError(status, f"{status.name} context") for status in ErrorStatus]
    + [
        InvalidArgumentTypeError(ErrorStatus.InvalidArgument, "wrong type"),
        DLPackExportError(ErrorStatus.InvalidArgument, "no export"),
    ],
)
def test_errors_pickle_and_copy_as_themselves(error):
    for clone in (pickle.loads(pickle.dumps(error)), copy.copy(error)):
        assert type(clone) is type(error)
        assert (clone.status, clone.context, str(clone)) == (error.status, error.context, str(error))


def test_out_of_memory_on_the_device_is_a_memory_error(device, pool):
    with pytest.raises(MemoryError) as caught:
        pool.allocate(pool.free_bytes + (1 << 30))
    assert caught.value.status is ErrorStatus.MemoryAllocation
    # Buffers earlier tests released are freed at this sync point: with frees pending, a failed allocation waits for
    # them and tries again (MemoryPool._reclaim), and the one injected failure would not be seen.
    device.sync()
    testing.inject("vkAllocateMemory", "VK_ERROR_OUT_OF_DEVICE_MEMORY")
    try:
        with pytest.raises(MemoryAllocationError, match="VK_ERROR_OUT_OF_DEVICE_MEMORY"):
            pool.allocate(32 << 20)  # its own VkDeviceMemory
    finally:
        testing.clear()


def test_bad_arguments_are_value_and_type_errors(device, pool, kernel):
    buf = pool.allocate(64)
    try:
        with pytest.raises(ValueError):
            pool.allocate(-1)
        with pytest.raises(ValueError):
            pool.view(buf, 3, 8)
        with pytest.raises(TypeError):
            pool.host_to_pool([1, 2, 3], buf)
        with pytest.raises(TypeError):
            device.compile("#version 450")
        with pytest.raises(TypeError):
            vkbackend.compile_glsl(b"#version 450")
        with pytest.raises(ValueError):
            vkbackend.compile_glsl("#version 450", entry_point="not an identifier")
        with pytest.raises(ValueError):
            device.launch(kernel("add"), [buf], [1])  # three buffers wanted
    finally:
        pool.release(buf)


def test_check_says_what_to_do_where_the_result_tells():
    with pytest.raises(InitializationError) as caught:
        check(lib.VK_ERROR_INCOMPATIBLE_DRIVER, "vkCreateInstance", ErrorStatus.Initialization)
    assert caught.value.context.endswith(NO_DRIVER_HINT)
    with pytest.raises(InitializationError) as caught:
        check(lib.VK_ERROR_INITIALIZATION_FAILED, "vkEnumeratePhysicalDevices (count)", ErrorStatus.Initialization)
    assert caught.value.context.endswith(NO_DEVICE_HINT)
    with pytest.raises(InitializationError) as caught:  # elsewhere the same code has other causes: no hint
        check(lib.VK_ERROR_INITIALIZATION_FAILED, "vkCreateDevice for llvmpipe", ErrorStatus.Initialization)
    assert caught.value.context == "vkCreateDevice for llvmpipe failed with VK_ERROR_INITIALIZATION_FAILED"


def run(args: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    """A fresh interpreter with this checkout's vkbackend and ``env`` on top of the suite's environment."""
    full = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), **env}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=full, cwd=ROOT, timeout=120)


def test_no_driver_says_what_to_install_and_set():
    no_driver = {"VK_DRIVER_FILES": "/nonexistent/no_icd.json", "VK_ICD_FILENAMES": "/nonexistent/no_icd.json"}
    result = run_script("open_devices", env=no_driver)
    assert result.returncode == 0, result.stderr
    kind, _, message = result.stdout.split(" | ", 2)
    assert kind == "InitializationError"
    for needed in (
        "VK_ERROR_INCOMPATIBLE_DRIVER",
        "apt-get install mesa-vulkan-drivers",
        "GPU vendor",
        "VK_DRIVER_FILES",
        "VK_ICD_FILENAMES",
    ):
        assert needed in message, (needed, message)
    cli = run(["-m", "vkbackend", "info"], **no_driver)
    assert cli.returncode == 1 and "apt-get install mesa-vulkan-drivers" in cli.stderr
    assert "Traceback" not in cli.stderr


def test_no_loader_says_what_to_install_and_set():
    result = run(["-m", "vkbackend", "info"], VKBACKEND_VULKAN_LIBRARY="/nonexistent/libvulkan.so.1")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    for needed in ("DyLibNotFound", "/nonexistent/libvulkan.so.1", "mesa-vulkan-drivers", "VKBACKEND_VULKAN_LIBRARY"):
        assert needed in result.stderr, (needed, result.stderr)


def test_no_device_says_what_to_install():
    """Only a hardware driver whose GPU is not here: the loader has a driver but no device."""
    manifests = [
        m
        for d in ("/usr/share/vulkan/icd.d", "/etc/vulkan/icd.d")
        for m in sorted(glob.glob(f"{d}/*.json"))
        if "lvp" not in os.path.basename(m)
    ]
    if not manifests:
        pytest.skip("no hardware Vulkan driver installed to ask for a device it cannot find")
    env = {"VK_DRIVER_FILES": manifests[0], "VK_ICD_FILENAMES": manifests[0]}
    result = run(["-m", "vkbackend", "info"], **env)
    if result.returncode == 0:
        pytest.skip(f"{manifests[0]} found its device on this machine")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "apt-get install mesa-vulkan-drivers" in result.stderr, result.stderr
    opened = run_script("open_devices", env=env)
    assert "mesa-vulkan-drivers" in opened.stdout or opened.stdout.strip() == "[]", opened.stdout


def test_devices_configured_out_is_explained():
    result = run(["-m", "vkbackend", "info"], VKBACKEND_DEVICE_IDS="")
    assert result.returncode == 1 and "VKBACKEND_DEVICE_IDS" in result.stderr and "Traceback" not in result.stderr
