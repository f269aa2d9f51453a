"""The Vulkan instance, physical devices, what they can do (DeviceInfo), and logical-device creation."""

from __future__ import annotations

import atexit
import logging
import os
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from . import trace
from ._ffi import vulkan
from .config import VulkanConfig, debug_enabled, validation_enabled
from .cooperative_matrix import CooperativeMatrixShape, query_shapes
from .dtypes import DType, dtype_capabilities
from .errors import BackendError, ErrorStatus, check
from .structs import chain, new_struct

log = logging.getLogger("vkbackend")
_D = TypeVar("_D")  # whatever open_device opens (a Device: device.py imports this module)

VALIDATION_LAYER = "VK_LAYER_KHRONOS_validation"
# Device extensions the backend uses when the device lists them.
WANTED_EXTENSIONS = (
    "VK_KHR_push_descriptor",
    "VK_EXT_memory_budget",
    "VK_KHR_portability_subset",
    "VK_EXT_robustness2",
    "VK_EXT_pipeline_robustness",
    "VK_KHR_external_memory_fd",
    "VK_KHR_cooperative_matrix",
    "VK_KHR_shader_bfloat16",
)
# Features we enable when offered, by the struct that holds them (a core struct, or an extension's: see
# EXTENSION_FEATURES). The robustness features are enabled by the configuration instead (create_device).
WANTED_FEATURES = {
    "features": ("shaderInt64", "shaderInt16", "shaderFloat64"),
    "vulkan11": ("storageBuffer16BitAccess", "uniformAndStorageBuffer16BitAccess", "storagePushConstant16"),
    "vulkan12": (
        "storageBuffer8BitAccess",
        "uniformAndStorageBuffer8BitAccess",
        "storagePushConstant8",
        "shaderFloat16",
        "shaderInt8",
        "timelineSemaphore",
        "vulkanMemoryModel",
        "vulkanMemoryModelDeviceScope",
        "shaderBufferInt64Atomics",
        "shaderSharedInt64Atomics",
        "bufferDeviceAddress",
    ),
    "VK_KHR_cooperative_matrix": ("cooperativeMatrix",),
    "VK_KHR_shader_bfloat16": ("shaderBFloat16Type", "shaderBFloat16CooperativeMatrix"),
    "VK_KHR_pipeline_executable_properties": ("pipelineExecutableInfo",),
}
FLOAT_CONTROLS = (
    "shaderSignedZeroInfNanPreserveFloat16",
    "shaderSignedZeroInfNanPreserveFloat32",
    "shaderSignedZeroInfNanPreserveFloat64",
)
# The feature struct of each extension that has one we use, chained only where the extension is there.
EXTENSION_FEATURES = {
    "VK_EXT_robustness2": "VkPhysicalDeviceRobustness2FeaturesEXT",
    "VK_EXT_pipeline_robustness": "VkPhysicalDevicePipelineRobustnessFeaturesEXT",
    "VK_KHR_cooperative_matrix": "VkPhysicalDeviceCooperativeMatrixFeaturesKHR",
    "VK_KHR_shader_bfloat16": "VkPhysicalDeviceShaderBfloat16FeaturesKHR",
    "VK_KHR_pipeline_executable_properties": "VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR",
}
# An extension whose use hangs on one feature is enabled only where the device offers that feature.
EXTENSION_NEEDS = {
    "VK_KHR_cooperative_matrix": "cooperativeMatrix",
    "VK_KHR_shader_bfloat16": "shaderBFloat16Type",
    "VK_KHR_pipeline_executable_properties": "pipelineExecutableInfo",
}
# Extensions a device enables only where its config asks for them (diagnostics).
ASKED_EXTENSIONS = ("VK_KHR_pipeline_executable_properties",)
DEVICE_TYPES = {
    "VK_PHYSICAL_DEVICE_TYPE_OTHER": "other",
    "VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU": "integrated_gpu",
    "VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU": "discrete_gpu",
    "VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU": "virtual_gpu",
    "VK_PHYSICAL_DEVICE_TYPE_CPU": "cpu",
}


@dataclass(frozen=True)
class MemoryHeap:
    """One memory heap: its size, whether it is device-local, and the budget the driver gives this process."""

    size: int
    device_local: bool
    budget: int


@dataclass(frozen=True)
class DeviceInfo:
    """What a device is and what it can do. Work-group limits are per axis (x, y, z)."""

    name: str
    vendor_id: int
    device_id: int
    device_type: str
    api_version: str
    driver_version: int
    max_global_work_dims: tuple[int, int, int]
    max_local_work_dims: tuple[int, int, int]
    max_local_threads: int
    local_mem_size: int
    subgroup_size: int
    min_storage_buffer_offset_alignment: int
    max_storage_buffer_range: int
    max_memory_allocation_size: int
    max_memory_allocation_count: int
    max_push_constants_size: int
    max_storage_buffers: int
    timestamp_period_ns: float
    timestamps: bool
    memory_heaps: tuple[MemoryHeap, ...]
    extensions: frozenset[str]
    features: frozenset[str]
    push_descriptors: bool
    robust_buffer_access: bool
    # Robustness can be turned off per program (Device.compile(robust=False)): VK_EXT_pipeline_robustness is enabled
    pipeline_robustness: bool
    pipeline_cache_uuid: str
    # Kernels can reach buffers by device address (GLSL buffer_reference), so buffers past maxStorageBufferRange work
    buffer_device_address: bool
    # The float-control properties that hold (shaderSignedZeroInfNanPreserveFloat32...): what a kernel may ask of the
    # driver's floating-point optimisations
    float_controls: frozenset[str]
    dtype_capabilities: dict[DType, frozenset[str]] = field(hash=False, compare=False)
    subgroup_operations: int = 0  # VkSubgroupFeatureFlags the device supports in compute shaders
    max_subgroup_size: int = 0  # the largest subgroup a SPIR-V 1.6 kernel may get (Vulkan 1.3), else subgroup_size
    cooperative_matrix_shapes: tuple[CooperativeMatrixShape, ...] = ()  # VK_KHR_cooperative_matrix's; () without it
    driver_name: str = ""  # the driver's own name and version text (Vulkan 1.2's driverName, driverInfo), e.g.
    driver_info: str = ""  # "llvmpipe", "Mesa 22.3.6 (LLVM 15.0.6)"
    # A buffer past the largest allocation is one VkBuffer bound to several allocations (memory/sparse.py): the device
    # has sparseBinding and the queue family in use binds sparse memory
    sparse_binding: bool = False
    sparse_address_space_size: int = 0  # the bytes all sparse buffers together may span (sparseAddressSpaceSize)


def _text(chars) -> str:
    """A fixed-size, NUL-terminated char array of a Vulkan struct as text (a driver may fill it with any bytes)."""
    ffi, _ = vulkan()
    return ffi.string(chars).decode(errors="replace")


def version_string(v: int) -> str:
    return f"{(v >> 22) & 0x7F}.{(v >> 12) & 0x3FF}.{v & 0xFFF}"


_ENUMERATE_FIRST = 512  # entries asked for at first: so many that one call does on the drivers we know
_ENUMERATE_MOST = 1 << 16  # a driver that still answers VK_INCOMPLETE for this many is broken


def _enumerate(call, ctype: str, *args) -> list:
    """Vulkan's enumeration into an array that grows while the driver reports VK_INCOMPLETE. It asks once, with room
    to spare, instead of asking for the count first: before an instance exists, every such call makes the loader load
    each driver (about 0.2 s for NVIDIA's)."""
    ffi, lib = vulkan()
    capacity = _ENUMERATE_FIRST
    while True:
        count = ffi.new("uint32_t*", capacity)
        items = ffi.new(f"{ctype}[]", capacity)
        result = call(*args, count, items)
        if result == lib.VK_INCOMPLETE and capacity < _ENUMERATE_MOST:
            capacity *= 4
            continue
        if result == lib.VK_INCOMPLETE:
            raise BackendError(
                ErrorStatus.Initialization,
                f"{call.__name__} still answered VK_INCOMPLETE for {capacity} entries; the Vulkan driver is broken",
            )
        check(result, call.__name__, ErrorStatus.Initialization)
        return _owned(ctype, items, count[0])


def _create_instance(api: int, layers: list[str], extensions: list[str]):
    """A new VkInstance with ``layers`` and ``extensions``, and with ``VK_KHR_portability_enumeration`` where the
    loader has it (MoltenVK and other portability drivers are listed only then).

    The loaders since 2022 implement that extension themselves, so it is asked for without listing the instance's
    extensions first: before an instance exists, that list makes the loader find and load every driver (twice, with
    Debian 12's loader), which creating the instance then does again. An older loader refuses the extension with
    ``VK_ERROR_EXTENSION_NOT_PRESENT``, and the instance is created without it."""
    ffi, lib = vulkan()
    out = ffi.new("VkInstance*")
    for portability in (True, False):
        names = [*extensions, "VK_KHR_portability_enumeration"] if portability else extensions
        info = new_struct(
            "VkInstanceCreateInfo",
            flags=lib.VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR if portability else 0,
            pApplicationInfo={"pApplicationName": "vkbackend", "apiVersion": api},
            enabledLayerCount=len(layers),
            ppEnabledLayerNames=layers,
            enabledExtensionCount=len(names),
            ppEnabledExtensionNames=names,
        )
        result = lib.vkCreateInstance(info, ffi.NULL, out)
        if not (portability and result == lib.VK_ERROR_EXTENSION_NOT_PRESENT):
            break
        log.debug("the Vulkan loader lacks VK_KHR_portability_enumeration: the instance is created without it")
    check(result, "vkCreateInstance", ErrorStatus.Initialization)
    return out[0]


class Instance:
    """The process's one VkInstance (Vulkan 1.2 or newer), with validation when VKBACKEND_VALIDATION=1."""

    _current: "Instance | None" = None
    _lock = threading.Lock()
    forked_from: int | None = None  # in a process forked from one with a live instance: the parent's pid

    @classmethod
    def get(cls) -> "Instance":
        if cls.forked_from is not None:
            raise BackendError(ErrorStatus.Initialization, fork_message("Vulkan"))
        with cls._lock:
            if cls._current is None:
                cls._current = Instance()
                atexit.register(cls._current.destroy)
            return cls._current

    def __init__(self) -> None:
        if debug_enabled() and not log.handlers:  # VKBACKEND_DEBUG=1: bring-up, submissions, validation messages
            handler = logging.StreamHandler()
            handler.setFormatter(logging.Formatter("vkbackend: %(message)s"))
            log.addHandler(handler)
            log.setLevel(logging.DEBUG)
        ffi, lib = vulkan()
        version = ffi.new("uint32_t*")
        check(lib.vkEnumerateInstanceVersion(version), "vkEnumerateInstanceVersion", ErrorStatus.Initialization)
        if version[0] < lib.VK_API_VERSION_1_2:
            raise BackendError(
                ErrorStatus.Initialization,
                f"the Vulkan loader supports {version_string(version[0])}; vkbackend needs 1.2 or newer. "
                "Update libvulkan1 and the driver.",
            )
        api = min(version[0], lib.VK_API_VERSION_1_3)
        layers: list[str] = []
        extensions: list[str] = []
        self.validation = validation_enabled()
        if self.validation:
            available = {
                ffi.string(p.layerName).decode()
                for p in _enumerate(lib.vkEnumerateInstanceLayerProperties, "VkLayerProperties")
            }
            if VALIDATION_LAYER not in available:
                raise BackendError(
                    ErrorStatus.Initialization,
                    "VKBACKEND_VALIDATION=1 but the Khronos validation layer is not installed "
                    "(apt-get install vulkan-validationlayers)",
                )
            layers.append(VALIDATION_LAYER)
            extensions.append("VK_EXT_debug_utils")
        self.handle = _create_instance(api, layers, extensions)
        self.api_version = api
        names = ffi.new("char[]", 4096)
        if lib.vkb_load_instance_functions(self.handle, names, 4096):
            lib.vkDestroyInstance(self.handle, ffi.NULL)
            raise BackendError(
                ErrorStatus.Initialization,
                f"the Vulkan loader lacks functions vkbackend needs: {ffi.string(names).decode()}; "
                "update libvulkan1 (the loader) and the driver",
            )
        log.debug("instance %s created", version_string(api))
        self.messenger = None
        if self.validation:
            messenger = ffi.new("VkDebugUtilsMessengerEXT*")
            check(
                lib.vkb_debug_messenger_create(self.handle, messenger),
                "vkCreateDebugUtilsMessengerEXT",
                ErrorStatus.Initialization,
            )
            self.messenger = messenger[0]
        self.pid = os.getpid()  # the exit handler of a forked child must leave the parent's instance alone
        self._devices: dict[int, Any] = {}  # the open Device of each index, closed before the instance goes
        self._devices_lock = threading.Lock()
        self.abandoned: list = []  # devices closed while their GPU work still ran (see Device.close)

    def physical_devices(self) -> list:
        ffi, lib = vulkan()
        return _enumerate(lib.vkEnumeratePhysicalDevices, "VkPhysicalDevice", self.handle)

    def open_device(self, index: int, open_device: Callable[[], _D]) -> _D:
        """The device open at ``index``; else the one ``open_device()`` opens, handed out from now on until
        :meth:`forget_device`. Opening holds the lock that forgetting takes, so neither sees the other half done."""
        with self._devices_lock:
            device = self._devices.get(index)
            if device is None:
                device = self._devices[index] = open_device()
            return device

    def forget_device(self, index: int, device: object, if_none_left: Callable[[], None]) -> None:
        """Stop handing out ``device`` (it is closing: the next :meth:`open_device` opens a new one); then, when no
        device is left open, ``if_none_left()``, under the lock that opening holds."""
        with self._devices_lock:
            if self._devices.get(index) is device:
                del self._devices[index]
            if not self._devices:
                if_none_left()

    def destroy(self) -> None:
        if os.getpid() != self.pid:  # the exit of a forked child: these objects are the parent's
            return
        ffi, lib = vulkan()
        with self._devices_lock:
            still_open = list(self._devices.values())
        for device in still_open:
            device.close()
        if self.handle is None:
            return
        if self.abandoned:  # an instance must outlive its devices, and these are still in use
            log.warning(
                "leaving the Vulkan instance in place: %d device(s) were abandoned with work running",
                len(self.abandoned),
            )
            return
        if self.messenger is not None:
            lib.vkDestroyDebugUtilsMessengerEXT(self.handle, self.messenger, ffi.NULL)
        lib.vkDestroyInstance(self.handle, ffi.NULL)
        self.handle = None
        with Instance._lock:
            if Instance._current is self:
                Instance._current = None


def fork_message(what: str) -> str:
    """What to tell a forked child that uses ``what`` (a device, or Vulkan itself) of its parent."""
    return (
        f"{what} was opened in process {Instance.forked_from}, and this process was forked from it: a forked "
        "child cannot use its parent's Vulkan objects, nor start Vulkan afresh (the driver's state is the "
        "parent's). Use multiprocessing's 'spawn' or 'forkserver' start method, or fork before vkbackend.devices()"
    )


def _after_fork_in_child() -> None:
    """Leave Vulkan to the parent: devices() refuses to start it afresh here (context.py makes the parent's devices
    unusable)."""
    instance = Instance._current
    if instance is None:
        return
    Instance.forked_from = instance.pid
    # The driver's C exit handlers would act on the parent's threads (csrc/fork.c); Python's own still run.
    vulkan()[1].vkb_skip_inherited_exit_handlers()


os.register_at_fork(after_in_child=_after_fork_in_child)


# Messages that are not about vkbackend, dropped by validation_messages by their exact text. The NVIDIA driver's own
# layer stack (driver 580, validation layer 1.4.363, on an H200) asks the validation layer for an instance function
# through vkGetDeviceProcAddr in every process that creates a device, even one that does nothing else; vkbackend never
# calls vkGetDeviceProcAddr.
KNOWN_DRIVER_MESSAGES = (
    "vkGetDeviceProcAddr(): pName is trying to grab vkGetPhysicalDeviceVideoEncodeQualityLevelPropertiesKHR which is "
    "an instance level function",
)


def is_known_driver_message(message: str) -> bool:
    """Whether one message (its text, without the severity) is one of KNOWN_DRIVER_MESSAGES: the whole text, or its
    last part in the layer's "... | MessageID = 0x... | text" layout."""
    text = message.strip()
    return any(text == known or text.endswith("| " + known) for known in KNOWN_DRIVER_MESSAGES)


def validation_messages() -> str:
    """Take the validation messages collected since the last call ('' when there are none), less those of
    ``KNOWN_DRIVER_MESSAGES``."""
    ffi, lib = vulkan()
    buf = ffi.new("char[]", 1 << 16)
    n = lib.vkb_debug_take_messages(buf, 1 << 16)
    return _drop_known(ffi.buffer(buf, n)[:].decode(errors="replace"))


def _drop_known(text: str) -> str:
    """``text`` (messages as csrc/debug.c writes them) less the messages of ``KNOWN_DRIVER_MESSAGES``. Each message
    starts a line with its severity ("[error] " or "[warning] "); its text may span lines."""
    messages = re.split(r"(?m)^(?=\[(?:error|warning)\] )", text)
    return "".join(m for m in messages if not (m and is_known_driver_message(m.split("] ", 1)[-1])))


@dataclass
class PhysicalDevice:
    """A physical device that can run compute, with everything queried from it that bring-up needs."""

    index: int
    handle: object
    queue_family: int
    queue_flags: int  # the VkQueueFlags of queue_family
    timestamp_bits: int
    properties: object  # VkPhysicalDeviceProperties2 (cdata, kept alive here)
    vulkan11: object
    vulkan12: object
    push_props: object
    features: object  # the queried VkPhysicalDeviceFeatures2 chain
    feature_groups: dict  # its structs by WANTED_FEATURES group (see _feature_chain)
    extensions: frozenset[str]
    memory_types: list[tuple[int, int]]  # (propertyFlags, heapIndex)
    heaps: list[tuple[int, int]]  # (size, flags)
    max_subgroup_size: int
    cooperative_matrix_shapes: tuple[CooperativeMatrixShape, ...]  # for compute shaders; () without the extension

    def offers(self, group: str, feature: str) -> bool:
        """Whether the device offers ``feature`` of the struct ``group`` (False where it lacks the extension)."""
        struct = self.feature_groups.get(group)
        return struct is not None and bool(getattr(struct, feature))


def query_physical_devices() -> list[PhysicalDevice]:
    """Every physical device with a compute queue and Vulkan 1.2, in the driver's order."""
    ffi, lib = vulkan()
    instance = Instance.get()
    found = []
    for raw in instance.physical_devices():
        props = new_struct("VkPhysicalDeviceProperties2")
        v11 = new_struct("VkPhysicalDeviceVulkan11Properties")
        v12 = new_struct("VkPhysicalDeviceVulkan12Properties")
        push = new_struct("VkPhysicalDevicePushDescriptorPropertiesKHR")
        exts = frozenset(
            ffi.string(e.extensionName).decode()
            for e in _enumerate(lib.vkEnumerateDeviceExtensionProperties, "VkExtensionProperties", raw, ffi.NULL)
        )
        chain(props, *([v11, v12, push] if "VK_KHR_push_descriptor" in exts else [v11, v12]))
        lib.vkGetPhysicalDeviceProperties2(raw, props)
        name = ffi.string(props.properties.deviceName).decode()
        if props.properties.apiVersion < lib.VK_API_VERSION_1_2:
            log.info("skipping %s: Vulkan %s < 1.2", name, version_string(props.properties.apiVersion))
            continue
        families = _enumerate_void(
            lambda c, p: lib.vkGetPhysicalDeviceQueueFamilyProperties(raw, c, p), "VkQueueFamilyProperties"
        )
        compute = [i for i, f in enumerate(families) if f.queueFlags & lib.VK_QUEUE_COMPUTE_BIT and f.queueCount > 0]
        if not compute:
            log.info("skipping %s: no compute queue", name)
            continue
        # Prefer a family with timestamps, and among those the first (usually the universal queue).
        family = next((i for i in compute if families[i].timestampValidBits), compute[0])
        feats, groups = _feature_chain(exts)
        lib.vkGetPhysicalDeviceFeatures2(raw, feats)
        mem = new_struct("VkPhysicalDeviceMemoryProperties2")
        lib.vkGetPhysicalDeviceMemoryProperties2(raw, mem)
        mp = mem.memoryProperties
        found.append(
            PhysicalDevice(
                index=len(found),
                handle=raw,
                queue_family=family,
                queue_flags=families[family].queueFlags,
                timestamp_bits=families[family].timestampValidBits,
                properties=props,
                vulkan11=v11,
                vulkan12=v12,
                push_props=push if "VK_KHR_push_descriptor" in exts else None,
                features=feats,
                feature_groups=groups,
                extensions=exts,
                memory_types=[
                    (mp.memoryTypes[i].propertyFlags, mp.memoryTypes[i].heapIndex) for i in range(mp.memoryTypeCount)
                ],
                heaps=[(mp.memoryHeaps[i].size, mp.memoryHeaps[i].flags) for i in range(mp.memoryHeapCount)],
                max_subgroup_size=_max_subgroup_size(
                    raw, min(instance.api_version, props.properties.apiVersion), v11.subgroupSize
                ),
                cooperative_matrix_shapes=_cooperative_matrix_shapes(raw, exts),
            )
        )
    return found


def _max_subgroup_size(raw, api_version: int, subgroup_size: int) -> int:
    """Vulkan 1.3's maxSubgroupSize (a SPIR-V 1.6 module may run with any size up to it), else ``subgroup_size``."""
    _, lib = vulkan()
    if api_version < lib.VK_API_VERSION_1_3:
        return subgroup_size
    v13 = new_struct("VkPhysicalDeviceVulkan13Properties")
    props = new_struct("VkPhysicalDeviceProperties2", pNext=v13)
    lib.vkGetPhysicalDeviceProperties2(raw, props)
    return int(v13.maxSubgroupSize) or subgroup_size


def _cooperative_matrix_shapes(raw, exts: frozenset[str]) -> tuple[CooperativeMatrixShape, ...]:
    """The device's cooperative-matrix shapes where compute shaders may use them, else ()."""
    _, lib = vulkan()
    if "VK_KHR_cooperative_matrix" not in exts:
        return ()
    stages = new_struct("VkPhysicalDeviceCooperativeMatrixPropertiesKHR")
    props = new_struct("VkPhysicalDeviceProperties2", pNext=stages)
    lib.vkGetPhysicalDeviceProperties2(raw, props)
    if not stages.cooperativeMatrixSupportedStages & lib.VK_SHADER_STAGE_COMPUTE_BIT:
        return ()
    return query_shapes(raw)


def _feature_chain(extensions) -> tuple:
    """Zeroed feature structs chained from a VkPhysicalDeviceFeatures2, to query or to enable: ``(head, groups)``,
    ``groups`` naming each struct by its WANTED_FEATURES group (``"features"``, ``"vulkan11"``, ``"vulkan12"``, and
    the extension name of each struct of EXTENSION_FEATURES whose extension is in ``extensions``)."""
    feats = new_struct("VkPhysicalDeviceFeatures2")
    f11 = new_struct("VkPhysicalDeviceVulkan11Features")
    f12 = new_struct("VkPhysicalDeviceVulkan12Features")
    chained = {ext: new_struct(name) for ext, name in EXTENSION_FEATURES.items() if ext in extensions}
    chain(feats, f11, f12, *chained.values())
    return feats, {"features": feats.features, "vulkan11": f11, "vulkan12": f12, **chained}


def _enumerate_void(call, ctype: str) -> list:
    ffi, _ = vulkan()
    count = ffi.new("uint32_t*")
    call(count, ffi.NULL)
    items = ffi.new(f"{ctype}[]", count[0])
    call(count, items)
    return _owned(ctype, items, count[0])


def _owned(ctype: str, items, count: int) -> list:
    """The first ``count`` entries of a cdata array as values that outlive it: ``items[i]`` of a struct array is a view
    into the array's memory, freed with the array, so each struct is copied into memory of its own."""
    ffi, _ = vulkan()
    if ffi.typeof(ctype).kind != "struct":
        return [items[i] for i in range(count)]  # handles and numbers are values already
    return [ffi.new(f"{ctype}*", items[i]) for i in range(count)]


@dataclass
class DeviceHandles:
    """A created logical device and the facts every other unit needs about it."""

    physical: PhysicalDevice
    device: object
    queue: object
    extensions: frozenset[str]
    features: frozenset[str]
    info: DeviceInfo


def memory_budget(physical: PhysicalDevice, budget_ext: bool) -> list[tuple[int, int]]:
    """(budget, usage) per heap: the driver's figures with VK_EXT_memory_budget, else (heap size, 0)."""
    _, lib = vulkan()
    if not budget_ext:
        return [(size, 0) for size, _ in physical.heaps]
    budget = new_struct("VkPhysicalDeviceMemoryBudgetPropertiesEXT")
    mem = new_struct("VkPhysicalDeviceMemoryProperties2", pNext=budget)
    lib.vkGetPhysicalDeviceMemoryProperties2(physical.handle, mem)
    return [(budget.heapBudget[i], budget.heapUsage[i]) for i in range(len(physical.heaps))]


def create_device(physical: PhysicalDevice, config: VulkanConfig) -> DeviceHandles:
    """Create the logical device with the features and extensions the backend uses, and describe it."""
    ffi, lib = vulkan()
    wanted = WANTED_EXTENSIONS + (("VK_EXT_calibrated_timestamps",) if trace.enabled else ())  # GPU times in traces
    if config.resolved_pipeline_statistics():
        wanted += ASKED_EXTENSIONS
    enabled_exts = [e for e in wanted if e in physical.extensions]
    if not config.push_descriptors and "VK_KHR_push_descriptor" in enabled_exts:
        enabled_exts.remove("VK_KHR_push_descriptor")
    robust = config.resolved_robust_buffer_access() and physical.offers("features", "robustBufferAccess")
    robust2 = robust and physical.offers("VK_EXT_robustness2", "robustBufferAccess2")
    if not robust2 and "VK_EXT_robustness2" in enabled_exts:
        enabled_exts.remove("VK_EXT_robustness2")
    # Per-pipeline robustness only matters where the device is robust: it lets proven kernels opt out.
    per_pipeline = robust and physical.offers("VK_EXT_pipeline_robustness", "pipelineRobustness")
    if not per_pipeline and "VK_EXT_pipeline_robustness" in enabled_exts:
        enabled_exts.remove("VK_EXT_pipeline_robustness")
    enabled_exts = [e for e in enabled_exts if e not in EXTENSION_NEEDS or physical.offers(e, EXTENSION_NEEDS[e])]
    feats, groups = _feature_chain(enabled_exts)
    enabled: set[str] = set()
    for group, dst in groups.items():
        for name in WANTED_FEATURES.get(group, ()):
            if physical.offers(group, name):
                setattr(dst, name, 1)
                enabled.add(name)
    if robust:
        feats.features.robustBufferAccess = 1
        enabled.add("robustBufferAccess")
    if robust2:  # bounds checked against each descriptor's range: sub-allocated neighbours are safe too
        groups["VK_EXT_robustness2"].robustBufferAccess2 = 1
        enabled.add("robustBufferAccess2")
    if per_pipeline:
        groups["VK_EXT_pipeline_robustness"].pipelineRobustness = 1
        enabled.add("pipelineRobustness")
    # Buffers past the largest allocation bind their memory on the one queue we create, so its family must do it too.
    if physical.offers("features", "sparseBinding") and physical.queue_flags & lib.VK_QUEUE_SPARSE_BINDING_BIT:
        feats.features.sparseBinding = 1
        enabled.add("sparseBinding")
    info = new_struct(
        "VkDeviceCreateInfo",
        pNext=feats,
        queueCreateInfoCount=1,
        pQueueCreateInfos={"queueFamilyIndex": physical.queue_family, "queueCount": 1, "pQueuePriorities": [1.0]},
        enabledExtensionCount=len(enabled_exts),
        ppEnabledExtensionNames=enabled_exts,
    )
    out = ffi.new("VkDevice*")
    name = ffi.string(physical.properties.properties.deviceName).decode()
    check(
        lib.vkCreateDevice(physical.handle, info, ffi.NULL, out),
        f"vkCreateDevice for {name}",
        ErrorStatus.Initialization,
    )
    queue = ffi.new("VkQueue*")
    lib.vkGetDeviceQueue(out[0], physical.queue_family, 0, queue)
    exts = frozenset(enabled_exts)
    features = frozenset(enabled)
    log.debug("opened %s: extensions %s, features %s", name, sorted(exts), sorted(features))
    return DeviceHandles(physical, out[0], queue[0], exts, features, describe(physical, exts, features, robust))


def describe(physical: PhysicalDevice, exts: frozenset[str], features: frozenset[str], robust: bool) -> DeviceInfo:
    """DeviceInfo from the queried properties."""
    ffi, lib = vulkan()
    p = physical.properties.properties
    limits = p.limits
    heaps = []
    for (size, flags), (budget, usage) in zip(physical.heaps, memory_budget(physical, "VK_EXT_memory_budget" in exts)):
        heaps.append(
            MemoryHeap(
                size=size, device_local=bool(flags & lib.VK_MEMORY_HEAP_DEVICE_LOCAL_BIT), budget=max(0, budget - usage)
            )
        )
    push_descriptors = "VK_KHR_push_descriptor" in exts
    max_buffers = limits.maxPerStageDescriptorStorageBuffers
    if push_descriptors:
        max_buffers = min(max_buffers, physical.push_props.maxPushDescriptors)
    return DeviceInfo(
        name=ffi.string(p.deviceName).decode(),
        vendor_id=p.vendorID,
        device_id=p.deviceID,
        device_type=next((kind for name, kind in DEVICE_TYPES.items() if getattr(lib, name) == p.deviceType), "other"),
        api_version=version_string(p.apiVersion),
        driver_version=p.driverVersion,
        driver_name=_text(physical.vulkan12.driverName),
        driver_info=_text(physical.vulkan12.driverInfo),
        max_global_work_dims=tuple(limits.maxComputeWorkGroupCount[i] for i in range(3)),
        max_local_work_dims=tuple(limits.maxComputeWorkGroupSize[i] for i in range(3)),
        max_local_threads=limits.maxComputeWorkGroupInvocations,
        local_mem_size=limits.maxComputeSharedMemorySize,
        subgroup_size=physical.vulkan11.subgroupSize,
        min_storage_buffer_offset_alignment=limits.minStorageBufferOffsetAlignment,
        max_storage_buffer_range=limits.maxStorageBufferRange,
        max_memory_allocation_size=physical.vulkan11.maxMemoryAllocationSize,
        max_memory_allocation_count=limits.maxMemoryAllocationCount,
        max_push_constants_size=limits.maxPushConstantsSize,
        max_storage_buffers=min(max_buffers, lib.VKB_MAX_BINDINGS),  # the recorder's per-dispatch arrays
        timestamp_period_ns=float(limits.timestampPeriod),
        timestamps=physical.timestamp_bits > 0,
        memory_heaps=tuple(heaps),
        extensions=physical.extensions,
        features=features,
        push_descriptors=push_descriptors,
        robust_buffer_access=robust,
        pipeline_robustness="pipelineRobustness" in features,
        pipeline_cache_uuid=bytes(p.pipelineCacheUUID).hex(),
        buffer_device_address="bufferDeviceAddress" in features,
        float_controls=frozenset(name for name in FLOAT_CONTROLS if getattr(physical.vulkan12, name)),
        dtype_capabilities=dtype_capabilities(features),
        subgroup_operations=(
            physical.vulkan11.subgroupSupportedOperations
            if physical.vulkan11.subgroupSupportedStages & lib.VK_SHADER_STAGE_COMPUTE_BIT
            else 0
        ),
        max_subgroup_size=physical.max_subgroup_size,
        cooperative_matrix_shapes=physical.cooperative_matrix_shapes if "cooperativeMatrix" in features else (),
        sparse_binding="sparseBinding" in features,
        sparse_address_space_size=limits.sparseAddressSpaceSize if "sparseBinding" in features else 0,
    )
