"""A program's Vulkan objects: making its shader module, descriptor-set layout, pipeline layout and compute pipeline,
and destroying them; and :class:`PipelineMakers`, the threads that make pipelines in the background.

Vulkan lets any thread create and destroy these objects (the pipeline cache synchronises itself: it is not created
externally synchronised), so the worker need not make them: it only lists a made program in the table its records
name programs by (programs.py), in queue order. A pipeline can take the driver tens of milliseconds to compile; made on
another thread, that overlaps what the caller does next, and the launches queued behind it wait on the worker.

Each function takes a ``programs.Program`` (not named in the annotations: programs.py imports this module).
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING

from .errors import ErrorStatus, check
from .structs import listed, new_struct

if TYPE_CHECKING:
    from .context import DeviceContext
    from .types import PipelineExecutable

__all__ = ["access", "make", "destroy", "executables", "keeps_statistics", "PipelineMakers"]

MAKERS = 8  # the most threads one device makes pipelines on (the H200's driver made 28 in 0.15 s on 8, 0.47 on one)


def access(ctx: DeviceContext, prog):
    """``prog``'s C access flags (read, write) per buffer, bound ones first: what the recorder's hazard tracking and a
    tombstone read."""
    lib = ctx.lib
    flags = bytes(
        (lib.VKB_ACCESS_READ if b.readable else 0) | (lib.VKB_ACCESS_WRITE if b.writable else 0)
        for b in (*prog.info.buffers, *prog.info.addresses)
    )
    return ctx.ffi.new("uint8_t[]", flags or b"\0")


def make(ctx: DeviceContext, prog, spirv: bytes, cache) -> None:
    """Make ``prog``'s shader module, layouts and pipeline against pipeline cache ``cache``, and its C entry
    (``prog.c_program``); on a failure (``KernelCompilation``, or whatever else stopped it) what was made is destroyed
    first."""
    ffi, lib, dev = ctx.ffi, ctx.lib, ctx.device
    if prog.access is None:
        prog.access = access(ctx, prog)
    created = []  # (destroy function, handle) to undo on failure

    def create(function, info, handle_type: str, destroy_fn):
        handle = ffi.new(handle_type + "*")
        check(
            function(dev, info, ffi.NULL, handle), f"{function.__name__} for {prog.name}", ErrorStatus.KernelCompilation
        )
        created.append((destroy_fn, handle[0]))
        return handle

    try:
        minfo = new_struct("VkShaderModuleCreateInfo", codeSize=len(spirv), pCode=spirv)
        module = create(lib.vkCreateShaderModule, minfo, "VkShaderModule", lib.vkDestroyShaderModule)
        flags = lib.VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR if ctx.info.push_descriptors else 0
        dinfo = new_struct(
            "VkDescriptorSetLayoutCreateInfo",
            flags=flags,
            bindingCount=prog.n_buffers,
            pBindings=[
                {
                    "binding": i,
                    "descriptorType": lib.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                    "descriptorCount": 1,
                    "stageFlags": lib.VK_SHADER_STAGE_COMPUTE_BIT,
                }
                for i in range(prog.n_buffers)
            ],
        )
        set_layout = create(
            lib.vkCreateDescriptorSetLayout, dinfo, "VkDescriptorSetLayout", lib.vkDestroyDescriptorSetLayout
        )
        linfo = new_struct(
            "VkPipelineLayoutCreateInfo",
            setLayoutCount=1,
            pSetLayouts=set_layout,
            pushConstantRangeCount=1 if prog.push_words else 0,
            pPushConstantRanges={
                "stageFlags": lib.VK_SHADER_STAGE_COMPUTE_BIT,
                "offset": 0,
                "size": prog.push_words * 4,
            },
        )
        layout = create(lib.vkCreatePipelineLayout, linfo, "VkPipelineLayout", lib.vkDestroyPipelineLayout)
        unchecked = None
        if not prog.robust:
            unchecked = new_struct(
                "VkPipelineRobustnessCreateInfoEXT",
                storageBuffers=lib.VK_PIPELINE_ROBUSTNESS_BUFFER_BEHAVIOR_DISABLED_EXT,
                uniformBuffers=lib.VK_PIPELINE_ROBUSTNESS_BUFFER_BEHAVIOR_DEVICE_DEFAULT_EXT,
                vertexInputs=lib.VK_PIPELINE_ROBUSTNESS_BUFFER_BEHAVIOR_DEVICE_DEFAULT_EXT,
                images=lib.VK_PIPELINE_ROBUSTNESS_IMAGE_BEHAVIOR_DEVICE_DEFAULT_EXT,
            )
        pinfo = new_struct(
            "VkComputePipelineCreateInfo",
            pNext=unchecked,
            # asked for (VulkanConfig.pipeline_statistics): what the driver's compiler made of it is kept (executables)
            flags=lib.VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR if keeps_statistics(ctx) else 0,
            stage={"stage": lib.VK_SHADER_STAGE_COMPUTE_BIT, "module": module[0], "pName": prog.info.entry_point},
            layout=layout[0],
            basePipelineIndex=-1,
        )
        pipeline = ffi.new("VkPipeline*")
        check(
            lib.vkCreateComputePipelines(dev, cache, 1, pinfo, ffi.NULL, pipeline),
            f"vkCreateComputePipelines for {prog.name}",
            ErrorStatus.KernelCompilation,
        )
    except BaseException:
        for destroy_fn, handle in reversed(created):
            destroy_fn(dev, handle, ffi.NULL)
        raise
    lib.vkDestroyShaderModule(dev, module[0], ffi.NULL)
    prog.pipeline, prog.layout, prog.set_layout = pipeline[0], layout[0], set_layout[0]
    prog.c_program = ffi.new(
        "vkb_program*",
        {
            "pipeline": prog.pipeline,
            "layout": prog.layout,
            "set_layout": prog.set_layout,
            "n_buffers": prog.n_buffers,
            "n_addresses": prog.n_addresses,
            "push_words": prog.push_words,
            "access": prog.access,
        },
    )


def keeps_statistics(ctx: DeviceContext) -> bool:
    """Whether the device's pipelines keep their executables' statistics (``VulkanConfig.pipeline_statistics``, on a
    device with ``VK_KHR_pipeline_executable_properties``)."""
    return "pipelineExecutableInfo" in ctx.info.features


def executables(ctx: DeviceContext, prog) -> list[PipelineExecutable]:
    """What the driver reports of each executable of ``prog``'s pipeline, made with its statistics kept."""
    ffi, lib = ctx.ffi, ctx.lib
    info = new_struct("VkPipelineInfoKHR", pipeline=prog.pipeline)
    found = listed(
        lib.vkGetPipelineExecutablePropertiesKHR,
        "VkPipelineExecutablePropertiesKHR",
        lambda p: (
            ffi.string(p.name).decode(errors="replace"),
            ffi.string(p.description).decode(errors="replace"),
            int(p.subgroupSize),
        ),
        ctx.device,
        info,
        what=f"vkGetPipelineExecutablePropertiesKHR for {prog.name}",
    )
    return [
        {"name": name, "description": description, "subgroup_size": size, "statistics": _statistics(ctx, prog, index)}
        for index, (name, description, size) in enumerate(found)
    ]


def _statistics(ctx: DeviceContext, prog, index: int) -> dict[str, int | float | bool]:
    """Executable ``index``'s statistics of ``prog``'s pipeline, by name."""
    ffi, lib = ctx.ffi, ctx.lib
    values = {
        lib.VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR: lambda v: bool(v.b32),
        lib.VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR: lambda v: int(v.i64),
        lib.VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR: lambda v: int(v.u64),
        lib.VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_FLOAT64_KHR: lambda v: float(v.f64),
    }
    info = new_struct("VkPipelineExecutableInfoKHR", pipeline=prog.pipeline, executableIndex=index)
    return dict(
        listed(
            lib.vkGetPipelineExecutableStatisticsKHR,
            "VkPipelineExecutableStatisticKHR",
            lambda s: (
                ffi.string(s.name).decode(errors="replace"),
                values.get(s.format, lambda v: int(v.u64))(s.value),
            ),
            ctx.device,
            info,
            what=f"vkGetPipelineExecutableStatisticsKHR for {prog.name}",
        )
    )


def destroy(ctx: DeviceContext, prog) -> None:
    """Destroy what :func:`make` made for ``prog`` (nothing where it failed); no launch of it may be running."""
    ffi, lib, dev = ctx.ffi, ctx.lib, ctx.device
    if prog.pipeline is not None:
        lib.vkDestroyPipeline(dev, prog.pipeline, ffi.NULL)
        lib.vkDestroyPipelineLayout(dev, prog.layout, ffi.NULL)
        lib.vkDestroyDescriptorSetLayout(dev, prog.set_layout, ffi.NULL)
        prog.pipeline = prog.layout = prog.set_layout = None


class PipelineMakers:
    """The threads one device makes pipelines on in the background (at most :data:`MAKERS`, started on first use and
    ended by :meth:`shutdown`)."""

    def __init__(self, ctx: DeviceContext) -> None:
        self._ctx = ctx
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._shut = False

    def submit(self, prog, spirv: bytes, cache) -> Future:
        """Make ``prog``'s pipeline (:func:`make`) on one of the threads; the future's exception is its failure. The
        device's closed error once :meth:`shutdown` has run (its device is being destroyed)."""
        with self._lock:
            if self._shut:
                raise self._ctx.closed_error()
            if self._pool is None:
                self._pool = ThreadPoolExecutor(
                    max_workers=min(MAKERS, os.cpu_count() or 1), thread_name_prefix="vkbackend-pipelines"
                )
            try:
                return self._pool.submit(make, self._ctx, prog, spirv, cache)
            except RuntimeError as error:
                if "interpreter shutdown" not in str(error):
                    raise
                # the interpreter is exiting: concurrent.futures takes no more work, so make it here
                made: Future = Future()
                try:
                    make(self._ctx, prog, spirv, cache)
                except BaseException as error:
                    made.set_exception(error)
                else:
                    made.set_result(None)
                return made

    def shutdown(self) -> None:
        """Wait for every pipeline being made and end the threads; later submits raise the closed error."""
        with self._lock:
            pool, self._pool, self._shut = self._pool, None, True
        if pool is not None:
            pool.shutdown(wait=True)
