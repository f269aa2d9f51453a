"""The :class:`~vkbackend.tinygrad.renderer.caps.DeviceCaps` of a Vulkan device, read from its
:class:`vkbackend.DeviceInfo`: the types, limits and tensor cores the renderer may use there, and how many buffers one
kernel may bind."""

from __future__ import annotations

from vkbackend.config import env_switch
from vkbackend.dtypes import DType
from vkbackend.tinygrad.renderer.caps import DeviceCaps
from vkbackend.tinygrad.renderer.tensor_cores import device_shapes
from vkbackend.tinygrad.renderer.unroll import LANE_BUDGET

__all__ = [
    "caps_from_info",
    "max_kernel_buffers",
    "is_lavapipe",
    "is_mesa",
    "lays_out_locals",
    "stages_streams",
    "unrolls",
    "LAVAPIPE_LOOP_LIMIT",
]

# gallivm's LP_MAX_TGSI_LOOP_ITERATIONS: the loop iterations one lavapipe invocation runs, all loops together
LAVAPIPE_LOOP_LIMIT = 65535


def is_mesa(info) -> bool:
    """Whether ``info`` (a :class:`vkbackend.DeviceInfo`) is a driver of Mesa's (``driverInfo`` ``Mesa 22.3.6 ...``):
    its drivers share one compiler (NIR)."""
    return str(getattr(info, "driver_info", "")).startswith("Mesa")


def is_lavapipe(info) -> bool:
    """Whether ``info`` (a :class:`vkbackend.DeviceInfo`) is Mesa's lavapipe, whose device name is ``llvmpipe
    (...)``."""
    return "llvmpipe" in str(getattr(info, "name", "")).lower()


def _nonempty(info, name: str) -> bool:
    return bool(info.dtype_capabilities.get(DType[name]))


def _on_but_on_cpu(info, variable: str) -> bool:
    """Switch ``variable`` when set, else whether ``info`` is anything but a CPU device (device type ``cpu``, such as
    lavapipe), so also ``other`` and ``virtual_gpu`` devices."""
    chosen = env_switch(variable)
    return chosen if chosen is not None else getattr(info, "device_type", "") != "cpu"


def unrolls(info) -> bool:
    """Whether tinygrad's innermost loops are unrolled on this device (:mod:`vkbackend.tinygrad.renderer.unroll`):
    ``VKBACKEND_TINYGRAD_UNROLL`` when set, else on every device but a CPU one. What it gains was measured on NVIDIA
    only."""
    return _on_but_on_cpu(info, "VKBACKEND_TINYGRAD_UNROLL")


def lays_out_locals(info) -> bool:
    """Whether the renderer lays a kernel's local dimensions on the work group's axes for its warps
    (:mod:`vkbackend.tinygrad.renderer.local_layout`): ``VKBACKEND_TINYGRAD_LOCAL_LAYOUT`` when set, else on every
    device but a CPU one. What it gains was measured on NVIDIA only."""
    return _on_but_on_cpu(info, "VKBACKEND_TINYGRAD_LOCAL_LAYOUT")


def stages_streams(info) -> bool:
    """Whether loads whose lanes each walk a run of their own are staged through shared memory a tile at a time
    (:mod:`vkbackend.tinygrad.renderer.stream_staging`): ``VKBACKEND_TINYGRAD_STAGE_STREAMS`` when set, else on every
    device but a CPU one. What it gains was measured on NVIDIA only."""
    return _on_but_on_cpu(info, "VKBACKEND_TINYGRAD_STAGE_STREAMS")


def caps_from_info(info) -> DeviceCaps:
    """What the renderer may use on a device, from its :class:`vkbackend.DeviceInfo`.

    8- and 16-bit integers need both the storage feature (``dtype_capabilities``) and arithmetic (``shaderInt8`` /
    ``shaderInt16``); tinygrad's bool is stored as one byte, so it rides on int8. Arguments past the storage range are
    reached by device address where the device has buffer device addresses. Tensor cores: every shape the device can
    run unless ``VKBACKEND_TINYGRAD_TC=0`` (:func:`vkbackend.tinygrad.renderer.tensor_cores.device_shapes`), in the
    chunk layout; which of them tinygrad gets, and in which layout, the VK device settles once the device's layout is
    probed (:func:`vkbackend.tinygrad.runtime.coopmat_layout.with_tensor_cores`)."""
    feats = getattr(info, "features", None)

    def feat(name: str) -> bool:
        return feats is None or name in feats

    i64 = _nonempty(info, "int64")
    subgroup = int(getattr(info, "subgroup_size", 0) or 0)  # the warp the layout and the staging are chosen for
    return DeviceCaps(
        f16=_nonempty(info, "float16"),
        f64=_nonempty(info, "float64") and i64,
        i8=_nonempty(info, "int8") and feat("shaderInt8"),
        i16=_nonempty(info, "int16") and feat("shaderInt16"),
        i64=i64,
        global_max=tuple(int(x) for x in info.max_global_work_dims),
        local_max=tuple(int(x) for x in info.max_local_work_dims),
        local_threads=int(info.max_local_threads),
        shared_max=int(info.local_mem_size),
        # buffers reached by address need 64-bit integers for the address arithmetic of the widest ones
        addresses=bool(getattr(info, "buffer_device_address", False)) and i64,
        storage_range=int(info.max_storage_buffer_range),
        preserve_widths=tuple(
            w for w in (16, 32, 64) if f"shaderSignedZeroInfNanPreserveFloat{w}" in getattr(info, "float_controls", ())
        ),
        loop_limit=LAVAPIPE_LOOP_LIMIT if is_lavapipe(info) else 0,
        # found on lavapipe (Mesa 22.3.6); the fault may lie in the compiler Mesa's drivers share, and the arithmetic
        # costs two instructions a widening
        sext64=is_mesa(info),
        unroll_lanes=LANE_BUDGET if unrolls(info) else 0,
        warp_lanes=subgroup if lays_out_locals(info) else 0,
        stage_lanes=subgroup if stages_streams(info) else 0,
        tc_shapes=(tc := device_shapes(info))[0],
        tc_threads=tc[1],
    )


def max_kernel_buffers(info) -> int:
    """Buffers one kernel may bind: storage-buffer bindings, and one push-constant word per binding for view offsets
    (8 words are kept for the kernel's integer variables)."""
    limit = int(getattr(info, "max_storage_buffers", 32) or 32)
    pc_words = int(getattr(info, "max_push_constants_size", 128) or 128) // 4
    return max(4, min(limit, pc_words - 8, 31))
