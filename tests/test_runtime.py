"""The native module, loading without a driver, device discovery and DeviceInfo."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from _reliability import run_script

import vkbackend
from vkbackend import BackendError, DType, ErrorStatus, VulkanConfig
from vkbackend._ffi import lib
from vkbackend.errors import status_for

ROOT = Path(__file__).resolve().parent.parent


def test_header_version_matches_the_real_header():
    sys.path.insert(0, str(ROOT))
    try:
        from build_vulkan import find_vulkan_header  # where the build looks: VULKAN_SDK, C_INCLUDE_PATH, CPATH, /usr
    finally:
        sys.path.remove(str(ROOT))
    try:
        header = find_vulkan_header() / "vulkan" / "vulkan_core.h"
    except SystemExit:
        pytest.skip(
            "no vulkan/vulkan_core.h where the build looks (VULKAN_SDK, C_INCLUDE_PATH, CPATH, /usr/include, "
            "/usr/local/include): set the variable the build used to compare with it"
        )
    version = int(re.search(r"#define VK_HEADER_VERSION (\d+)", header.read_text()).group(1))
    assert lib.VK_HEADER_VERSION == version


def test_every_vk_error_code_maps_to_a_status():
    codes = [name for name in dir(lib) if name.startswith("VK_ERROR_")]
    assert "VK_ERROR_DEVICE_LOST" in codes and len(codes) > 20
    unmapped = [name for name in codes if status_for(name) is None]
    assert not unmapped, f"errors.py has no status for {unmapped}"
    assert status_for("VK_ERROR_DEVICE_LOST") is ErrorStatus.DeviceLost
    assert status_for("VK_ERROR_OUT_OF_DEVICE_MEMORY") is ErrorStatus.MemoryAllocation


def test_check_raises_typed_errors():
    from vkbackend.errors import check

    check(0, "fine")
    with pytest.raises(BackendError) as info:
        check(lib.VK_ERROR_OUT_OF_DEVICE_MEMORY, "vkAllocateMemory")
    assert info.value.status is ErrorStatus.MemoryAllocation
    assert "VK_ERROR_OUT_OF_DEVICE_MEMORY" in str(info.value)
    with pytest.raises(BackendError) as info:  # a lost device stays DeviceLost whatever the caller asks for
        check(lib.VK_ERROR_DEVICE_LOST, "vkQueueSubmit", ErrorStatus.KernelLaunch)
    assert info.value.status is ErrorStatus.DeviceLost


def test_import_works_without_a_loader_and_devices_says_what_to_install():
    env = {"VKBACKEND_VULKAN_LIBRARY": "/nonexistent/libvulkan.so.1", "VKBACKEND_DEVICE_IDS": "0"}
    result = run_script("open_devices", env=env)
    assert result.returncode == 0, result.stderr
    _, status, message = result.stdout.split(" | ", 2)
    assert status == "DyLibNotFound"
    assert "libvulkan" in message and "apt-get install" in message


def test_configured_out():
    assert vkbackend.devices(VulkanConfig(device_ids=[])) == []
    # configured out: no loader is even opened
    result = run_script("open_devices", env={"VKBACKEND_DEVICE_IDS": "", "VKBACKEND_VULKAN_LIBRARY": "/nonexistent"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_unknown_device_id(device):
    with pytest.raises(BackendError) as info:
        vkbackend.devices(VulkanConfig(device_ids=[99]))
    assert info.value.status is ErrorStatus.InvalidArgument


def test_devices_returns_the_open_device(device):
    assert vkbackend.devices(VulkanConfig(device_ids=[0]))[0] is device


@pytest.fixture(scope="module")
def vulkaninfo(tmp_path_factory):
    if not shutil.which("vulkaninfo"):
        pytest.skip("vulkaninfo not installed (apt-get install vulkan-tools)")
    out = tmp_path_factory.mktemp("vi") / "vi.json"
    env = {**os.environ, "XDG_RUNTIME_DIR": str(out.parent)}
    env.pop("VK_LAYER_ENABLES", None)
    env.pop("VK_LAYER_VALIDATE_SYNC", None)
    subprocess.run(["vulkaninfo", "--json=0", "-o", str(out)], capture_output=True, env=env, timeout=120)
    if not out.exists():
        pytest.skip("vulkaninfo --json produced nothing")
    return json.loads(out.read_text())["capabilities"]["device"]


def test_info_matches_vulkaninfo(device, vulkaninfo):
    props = vulkaninfo["properties"]
    p = props["VkPhysicalDeviceProperties"]
    limits = p["limits"]
    info = device.info
    assert info.name == p["deviceName"]
    assert info.vendor_id == p["vendorID"] and info.device_id == p["deviceID"]
    assert info.max_global_work_dims == tuple(limits["maxComputeWorkGroupCount"])
    assert info.max_local_work_dims == tuple(limits["maxComputeWorkGroupSize"])
    assert info.max_local_threads == limits["maxComputeWorkGroupInvocations"]
    assert info.local_mem_size == limits["maxComputeSharedMemorySize"]
    assert info.min_storage_buffer_offset_alignment == limits["minStorageBufferOffsetAlignment"]
    assert info.max_storage_buffer_range == limits["maxStorageBufferRange"]
    assert info.max_push_constants_size == limits["maxPushConstantsSize"]
    assert info.max_memory_allocation_size == props["VkPhysicalDeviceMaintenance3Properties"]["maxMemoryAllocationSize"]
    assert info.memory_heaps and any(h.device_local for h in info.memory_heaps)
    exts = vulkaninfo["extensions"]
    assert info.extensions == frozenset(exts)
    controls = props.get("VkPhysicalDeviceFloatControlsProperties") or props.get("VkPhysicalDeviceVulkan12Properties")
    if controls is not None:  # vulkaninfo lists it where the device has VK_KHR_shader_float_controls
        assert info.float_controls == {
            name for name in controls if name.startswith("shaderSignedZeroInfNanPreserve") and controls[name]
        }
    if "VkPhysicalDeviceVulkan13Properties" in props:
        assert info.max_subgroup_size == props["VkPhysicalDeviceVulkan13Properties"]["maxSubgroupSize"]
    else:
        assert info.max_subgroup_size == info.subgroup_size


def test_an_enumeration_past_its_first_array_grows_until_it_has_every_entry(device, monkeypatch):
    """Enumerations ask for many entries in one call (before an instance exists each call loads every driver); a
    driver with more than that answers VK_INCOMPLETE, and the array grows until the list is whole."""
    from vkbackend import discovery

    ffi, _ = discovery.vulkan()
    raw = discovery.query_physical_devices()[device.index].handle
    calls = []

    def counted(*args):
        calls.append(ffi.cast("uint32_t*", args[-2])[0])
        return lib.vkEnumerateDeviceExtensionProperties(*args)

    counted.__name__ = "vkEnumerateDeviceExtensionProperties"

    def names() -> list[str]:
        found = discovery._enumerate(counted, "VkExtensionProperties", raw, ffi.NULL)
        return sorted(ffi.string(e.extensionName).decode() for e in found)

    whole = names()
    assert set(whole) == device.info.extensions
    assert len(calls) == 1 or len(whole) > discovery._ENUMERATE_FIRST
    monkeypatch.setattr(discovery, "_ENUMERATE_FIRST", 1)
    calls.clear()
    assert names() == whole
    assert calls[0] == 1 and len(calls) >= 2 and calls[-1] >= len(whole)

    def never_whole(*args):
        return lib.VK_INCOMPLETE

    monkeypatch.setattr(discovery, "_ENUMERATE_MOST", 16)
    with pytest.raises(BackendError, match="still answered VK_INCOMPLETE for 16 entries"):
        discovery._enumerate(never_whole, "VkExtensionProperties", raw, ffi.NULL)


def test_info_dtypes_follow_the_features(device):
    caps = device.info.dtype_capabilities
    # VK_KHR_shader_bfloat16 gives bfloat16 loads, stores and conversions, no arithmetic
    assert caps[DType.bfloat16] == (
        frozenset({"load", "store", "cast"}) if "shaderBFloat16Type" in device.info.features else frozenset()
    )
    assert caps[DType.float32] >= {"exp2", "log2", "sin", "sqrt"}
    if caps[DType.float64]:
        assert not caps[DType.float64] & {"exp", "exp2", "log", "log2", "sin", "cos", "pow"}
    assert bool(caps[DType.int64]) == ("shaderInt64" in device.info.features)
    assert bool(caps[DType.float16]) == ({"shaderFloat16", "storageBuffer16BitAccess"} <= device.info.features)
    assert len(set(device.info.max_local_work_dims)) >= 1  # per axis, not the x limit copied


def test_info_cooperative_matrix_shapes(device):
    """Shapes only where VK_KHR_cooperative_matrix and its feature are enabled (lavapipe has neither: empty)."""
    info = device.info
    if "cooperativeMatrix" not in info.features:
        assert info.cooperative_matrix_shapes == ()
        return
    assert info.cooperative_matrix_shapes
    for shape in info.cooperative_matrix_shapes:
        assert min(shape.m, shape.n, shape.k) > 0 and shape.scope in ("subgroup", "workgroup", "device", "queue_family")


def test_cooperative_matrix_shape_from_properties():
    """A VkCooperativeMatrixPropertiesKHR as the driver fills it, to the record DeviceInfo holds."""
    from types import SimpleNamespace

    from vkbackend._ffi import vulkan
    from vkbackend.cooperative_matrix import CooperativeMatrixShape, shape_from_properties

    lib = vulkan()[1]
    fake = SimpleNamespace(
        MSize=16,
        NSize=8,
        KSize=16,
        AType=lib.VK_COMPONENT_TYPE_BFLOAT16_KHR,
        BType=lib.VK_COMPONENT_TYPE_BFLOAT16_KHR,
        CType=lib.VK_COMPONENT_TYPE_FLOAT32_KHR,
        ResultType=lib.VK_COMPONENT_TYPE_FLOAT32_KHR,
        saturatingAccumulation=0,
        scope=lib.VK_SCOPE_SUBGROUP_KHR,
    )
    assert shape_from_properties(fake) == CooperativeMatrixShape(
        16, 8, 16, "bfloat16", "bfloat16", "float32", "float32", False, "subgroup"
    )
    # the registry's values (csrc/vk_compat.h defines them where the header lacks the extension)
    assert (lib.VK_COMPONENT_TYPE_FLOAT16_KHR, lib.VK_COMPONENT_TYPE_BFLOAT16_KHR, lib.VK_SCOPE_SUBGROUP_KHR) == (
        0,
        1000141000,
        3,
    )
    odd = SimpleNamespace(**{**vars(fake), "AType": 1000491002, "scope": 4})  # an fp8 type; no scope 4 exists
    assert (shape_from_properties(odd).a_type, shape_from_properties(odd).scope) == (
        "vk_component_type_1000491002",
        "vk_scope_4",
    )


def test_free_bytes_comes_from_the_heap(pool, device):
    """The figure is the driver's budget less what is in use, so it moves with a dedicated allocation of ours. Other
    processes on the GPU (the suite's other workers on a real one) move it too: one of a few tries must see ours."""
    heap = max(device.info.memory_heaps, key=lambda h: h.size if h.device_local else 0)
    drops = []
    for _ in range(5):
        free = pool.free_bytes
        assert 0 < free <= heap.size
        buf = pool.allocate(64 << 20)  # a dedicated allocation: the figure must move
        try:
            drops.append(free - pool.free_bytes)
        finally:
            pool.release(buf)
        device.sync()  # the release's memory is given back before the next try
        if drops[-1] >= 32 << 20:
            break
    assert max(drops) >= 32 << 20, drops


def test_info_cli_lists_the_device(device):
    result = subprocess.run(
        [sys.executable, "-m", "vkbackend", "info"], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert device.info.name in result.stdout
    assert "heap 0" in result.stdout and "dtypes:" in result.stdout


def test_validation_messages_drop_only_the_known_driver_message():
    """The NVIDIA driver's stack message is dropped by its exact text, in either layout of the layer; anything else,
    the same text with more after it included, is kept."""
    from vkbackend.discovery import KNOWN_DRIVER_MESSAGES, _drop_known

    known = KNOWN_DRIVER_MESSAGES[0]
    kept = (
        "[error] Validation Error: [ VUID-x ] Object 0: handle = 0x1 | MessageID = 0x2 | a real problem\n"
        "on two lines\n"
        f"[error] {known} and more\n"
    )
    text = (
        f"[warning] {known}\n"
        + kept[: kept.index("[error] vkGet")]
        + f"[warning] Validation Warning: [ Loader ] | MessageID = 0x3 | {known}\n"
        + kept[kept.index("[error] vkGet") :]
    )
    assert _drop_known(text) == kept
    assert _drop_known("") == ""
