"""structs.py, the one maker of Vulkan structs: sType from the struct's name (irregular names included), nested Python
data made cdata and kept alive with the struct (and no longer), clear errors for a wrong field or value. No device."""

from __future__ import annotations

import gc
import re
import weakref
from pathlib import Path

import pytest

from vkbackend import structs
from vkbackend._ffi import ffi, lib
from vkbackend.errors import BackendError, ErrorStatus
from vkbackend.structs import chain, new_array, new_struct, structure_type_name

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    "name, constant",
    [
        ("VkBufferCreateInfo", "VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO"),
        ("VkMemoryGetFdInfoKHR", "VK_STRUCTURE_TYPE_MEMORY_GET_FD_INFO_KHR"),
        ("VkPhysicalDeviceProperties2", "VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2"),
        ("VkPhysicalDeviceVulkan12Features", "VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES"),
        ("VkPhysicalDeviceRobustness2FeaturesEXT", "VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ROBUSTNESS_2_FEATURES_EXT"),
        ("VkPhysicalDeviceShaderBfloat16FeaturesKHR", "VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_BFLOAT16_FEATURES_KHR"),
    ],
)
def test_stype_comes_from_the_name(name, constant):
    assert structure_type_name(name) == constant
    assert new_struct(name).sType == getattr(lib, constant)


def test_irregular_names_are_looked_up():
    # the rule alone splits the number off its word; the registry keeps it joined
    name = "VkPhysicalDeviceShaderBfloat16FeaturesKHR"
    assert name in structs.IRREGULAR
    assert structure_type_name(name) == "VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_BFLOAT16_FEATURES_KHR"


def test_every_declared_struct_with_an_stype_has_its_constant():
    checked = 0
    for name in ffi.list_types()[0]:
        ctype = ffi.typeof(name)
        if ctype.kind != "struct":
            continue
        try:
            ffi.sizeof(ctype)  # also completes the struct, so that .fields can be read
        except ffi.error:
            continue  # opaque (VkAllocationCallbacks)
        if "sType" in dict(ctype.fields):
            assert new_struct(name).sType == getattr(lib, structure_type_name(name)), name
            checked += 1
    assert checked > 30


def test_a_struct_without_stype_takes_its_fields():
    size = new_struct("VkDescriptorPoolSize", type=lib.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, descriptorCount=3)
    assert (size.type, size.descriptorCount) == (lib.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 3)


def _scribble() -> list:
    """Allocate and fill memory, so that whatever freed memory a struct still pointed to would be overwritten."""
    return [ffi.new("char[]", b"x" * 63) for _ in range(10_000)]


def test_nested_data_stays_alive_after_gc():
    info = new_struct(
        "VkInstanceCreateInfo",
        pApplicationInfo={"pApplicationName": "vkbackend", "apiVersion": 7},
        enabledExtensionCount=2,
        ppEnabledExtensionNames=["VK_EXT_one", b"VK_KHR_two"],
    )
    pipeline = new_struct("VkComputePipelineCreateInfo", stage={"pName": "main"}, basePipelineIndex=-1)
    pool = new_struct("VkDescriptorPoolCreateInfo", poolSizeCount=2, pPoolSizes=[{"descriptorCount": 5}, {}])
    gc.collect()
    junk = _scribble()
    app = info.pApplicationInfo
    assert (app.sType, app.apiVersion) == (lib.VK_STRUCTURE_TYPE_APPLICATION_INFO, 7)
    assert ffi.string(app.pApplicationName) == b"vkbackend"
    assert [ffi.string(info.ppEnabledExtensionNames[i]) for i in range(2)] == [b"VK_EXT_one", b"VK_KHR_two"]
    # a struct held by value gets its sType too, and what it points to lives with the outer struct
    assert pipeline.stage.sType == lib.VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO
    assert ffi.string(pipeline.stage.pName) == b"main"
    assert (pool.pPoolSizes[0].descriptorCount, pool.pPoolSizes[1].descriptorCount) == (5, 0)
    del junk


def test_given_cdata_lives_as_long_as_the_struct_and_no_longer():
    flags = new_struct("VkMemoryAllocateFlagsInfo", flags=lib.VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT)
    alive = weakref.ref(flags)
    info = new_struct("VkMemoryAllocateInfo", pNext=flags, allocationSize=64)
    del flags
    gc.collect()
    assert alive() is not None and info.pNext == alive()
    del info
    gc.collect()
    assert alive() is None


def test_buffers_none_and_arrays():
    spirv = bytes(range(16))
    module = new_struct("VkShaderModuleCreateInfo", codeSize=len(spirv), pCode=spirv)
    assert bytes(ffi.buffer(module.pCode, len(spirv))) == spirv
    cache = new_struct("VkPipelineCacheCreateInfo", initialDataSize=0, pInitialData=None)
    assert cache.pInitialData == ffi.NULL
    infos = new_array("VkCalibratedTimestampInfoEXT", [{"timeDomain": 1}, {"timeDomain": 2}])
    assert [(i.sType, i.timeDomain) for i in infos] == [
        (lib.VK_STRUCTURE_TYPE_CALIBRATED_TIMESTAMP_INFO_EXT, d) for d in (1, 2)
    ]
    assert list(new_array("uint32_t", [4, 5])) == [4, 5]


def test_chain_links_and_keeps_alive():
    head = new_struct("VkPhysicalDeviceFeatures2")
    f11, f12 = new_struct("VkPhysicalDeviceVulkan11Features"), new_struct("VkPhysicalDeviceVulkan12Features")
    alive = weakref.ref(f12)
    chain(head, f11, f12)
    assert head.pNext == f11 and f11.pNext == f12 and f12.pNext == ffi.NULL
    del f11, f12
    gc.collect()
    assert alive() is not None
    del head
    gc.collect()
    assert alive() is None


def test_errors_name_the_struct_and_the_field():
    with pytest.raises(TypeError, match=r"VkFenceCreateInfo has no field 'flgs' \(its fields: sType, pNext, flags\)"):
        new_struct("VkFenceCreateInfo", flgs=1)
    with pytest.raises(TypeError, match="sType is filled from the struct's name"):
        new_struct("VkFenceCreateInfo", sType=lib.VK_STRUCTURE_TYPE_FENCE_CREATE_INFO)
    with pytest.raises(TypeError, match=r"VkMemoryAllocateInfo has no field 'nope'"):
        new_struct("VkBufferCreateInfo", pNext=new_struct("VkMemoryAllocateInfo", nope=1))
    with pytest.raises(TypeError, match=r"VkPipelineCacheCreateInfo.pInitialData: a void \* cannot be made from 5"):
        new_struct("VkPipelineCacheCreateInfo", pInitialData=5)
    with pytest.raises(TypeError, match=r"VkDeviceCreateInfo.pQueueCreateInfos: VkDeviceQueueCreateInfo has no field"):
        new_struct("VkDeviceCreateInfo", pQueueCreateInfos={"queueIndex": 0})
    with pytest.raises(TypeError, match="is not a struct"):
        new_struct("uint32_t")


def test_a_struct_whose_constant_is_missing_says_where_to_declare_it(monkeypatch):
    monkeypatch.setitem(structs.IRREGULAR, "VkFenceCreateInfo", "VK_STRUCTURE_TYPE_NOT_DECLARED")
    monkeypatch.setattr(structs, "_layouts", {})
    with pytest.raises(LookupError, match=r"no VK_STRUCTURE_TYPE_NOT_DECLARED; declare it in vkbackend/decl/\*\.h"):
        new_struct("VkFenceCreateInfo")


def test_no_module_types_a_structure_type_again():
    """Every struct the package makes is made by structs.py, so no other module names a VK_STRUCTURE_TYPE_."""
    typed = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in (ROOT / "vkbackend").rglob("*.py")
        if path.name != "structs.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"VK_STRUCTURE_TYPE_|\"sType\"", line)
    ]
    assert typed == []


def test_listed_counts_again_while_the_list_grows_and_fills_each_stype():
    """``listed`` asks for the count, fills structs that carry their sType, counts again after VK_INCOMPLETE (a list
    that grew in between), and gives each entry through ``convert``."""
    sizes = iter([2, 3])  # the driver's list grows once between the count and the fill
    stype = lib.VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR
    calls = []

    def vkFakeList(count, items):  # noqa: N802 - named as a Vulkan function, which error messages use
        if items == ffi.NULL:
            count[0] = size = next(sizes)
            calls.append(("count", size))
            return 0
        seen = [items[i].sType for i in range(count[0])]
        calls.append(("fill", len(seen)))
        if len(seen) < 3:
            return lib.VK_INCOMPLETE
        assert seen == [stype] * 3
        for i in range(3):
            items[i].MSize = 10 + i
        return 0

    got = structs.listed(vkFakeList, "VkCooperativeMatrixPropertiesKHR", lambda p: int(p.MSize))
    assert got == [10, 11, 12]
    assert calls == [("count", 2), ("fill", 2), ("count", 3), ("fill", 3)]


def test_listed_gives_up_on_a_list_that_never_stops_growing():
    def vkFakeList(count, items):  # noqa: N802
        count[0] = 1
        return 0 if items == ffi.NULL else lib.VK_INCOMPLETE

    with pytest.raises(BackendError, match=r"vkFakeList still listed more after 8 counts") as error:
        structs.listed(vkFakeList, "VkCooperativeMatrixPropertiesKHR", lambda p: p, status=ErrorStatus.Initialization)
    assert error.value.status is ErrorStatus.Initialization


def test_listed_raises_the_calls_typed_error():
    def vkFakeList(count, items):  # noqa: N802
        return lib.VK_ERROR_OUT_OF_HOST_MEMORY

    with pytest.raises(BackendError, match=r"vkFakeList for a program \(count\) failed with VK_ERROR_OUT_OF_HOST"):
        structs.listed(vkFakeList, "VkCooperativeMatrixPropertiesKHR", lambda p: p, what="vkFakeList for a program")
