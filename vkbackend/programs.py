"""ProgramCache: SPIR-V in, compute pipelines out, cached by content and persisted through a VkPipelineCache.

Reflection (spirv.py) runs in the caller's thread, so malformed SPIR-V and interfaces over the device's limits fail
there, before anything reaches the driver. Pipelines are created on the worker. Each program gets a slot in a C
table (``vkb_program*[]``) that launch records name by number.
"""
from __future__ import annotations

import hashlib
import logging
import os
import struct
import threading
from pathlib import Path

from .config import cache_dir
from .context import DeviceContext, next_id
from .errors import BackendError, ErrorStatus, InvalidArgumentTypeError, check
from .spirv import ProgramInfo, reflect
from .validation import check_capabilities, validator

log = logging.getLogger("vkbackend")

RECORD_HEADER = "<5I"   # kind, program, gx, gy, gz
CACHE_HEADER = struct.Struct("<4I16s")  # VkPipelineCacheHeaderVersionOne


class Program:
    """A compiled program: its reflected interface, its pipeline and how to pack one launch of it."""

    __slots__ = ("id", "slot", "name", "info", "record", "n_buffers", "n_scalars", "refcount", "pipeline", "layout",
                 "set_layout", "c_program", "access", "key", "robust")

    def __init__(self, prog_id: int, slot: int, key: bytes, info: ProgramInfo, robust: bool = True) -> None:
        self.id = prog_id   # the public id, unique in the process (context.next_id)
        self.slot = slot    # its index in the device's C program table, which launch records name
        self.key = key
        self.info = info
        self.robust = robust    # False: its pipeline runs without bounds checks (VK_EXT_pipeline_robustness)
        self.name = f"{info.entry_point}#{prog_id}[{key[:8].decode()}]"
        self.n_buffers = len(info.buffers)
        self.n_scalars = len(info.push_constants)
        self.record = struct.Struct(RECORD_HEADER + "I" * self.n_buffers + push_format(info))
        self.refcount = 1
        self.pipeline = self.layout = self.set_layout = None
        self.c_program = self.access = None

    @property
    def push_words(self) -> int:
        return (self.info.push_constant_size + 3) // 4

    def make_packer(self, slot_of: dict, max_grid: tuple[int, int, int], ctx, append):
        """A function ``(buffers, scalars, grid)`` specialised for this program's argument counts, which packs one
        launch record and queues it with ``append`` (with ``append=None`` it returns the record: a LaunchGraph's).

        It is the whole per-launch cost in the caller's thread, so it is generated with the counts unrolled: unpacking
        fixed-size sequences, a few comparisons, one ``struct.pack`` and one append. Anything unusual (a wrong count,
        an unknown buffer, a GridArg, a short grid, a scalar out of range, a device that is not ``ctx.usable``) raises
        KeyError/ValueError/TypeError/struct.error before queueing anything, and Device.launch then takes the slow
        path, which explains the problem, handles the case or waits for room.
        Strictness costs little here (about 20 ns a launch on lavapipe, measured): no float or bool equals a buffer id
        (context.next_id), struct refuses floats for integers, of the bools only True could pass the grid's range
        check and it is looked for, and two or more buffers are indexed once, which a set (bound in its hash order,
        it once overwrote a read-only input) cannot be.
        """
        bufs = [f"b{i}" for i in range(self.n_buffers)]
        scalars = [f"s{i}" for i in range(self.n_scalars)]
        mx, my, mz = (int(m) for m in max_grid)
        args = ", ".join([f"0, {int(self.slot)}, gx, gy, gz"] + [f"slot_of[{b}]" for b in bufs] + scalars)
        lines = ["def pack(buffers, scalars, grid):",
                 f"    [{', '.join(bufs)}] = buffers",
                 f"    [{', '.join(scalars)}] = scalars",
                 "    gx, gy, gz = grid",
                 *(["    buffers[0]"] if len(bufs) > 1 else []),
                 f"    if 0 < gx <= {mx} and 0 < gy <= {my} and 0 < gz <= {mz} and gx is not True and gy is not True"
                 " and gz is not True and ctx.usable:",
                 *([f"        return record({args})"] if append is None else
                   [f"        append(record({args}))", "        return"]),
                 "    raise ValueError('grid out of range, or the device not usable now')"]
        namespace = {"record": self.record.pack, "slot_of": slot_of, "ctx": ctx, "append": append}
        exec(compile("\n".join(lines) + "\n", f"<launch packer of {self.name}>", "exec"), namespace)
        return namespace["pack"]


def push_format(info: ProgramInfo) -> str:
    """struct format of the push-constant block: members at their offsets, padded to whole words."""
    fmt, pos = "", 0
    for member in sorted(info.push_constants, key=lambda m: m.offset):
        if member.offset < pos:
            raise BackendError(ErrorStatus.KernelCompilation, f"push-constant member {member.name} overlaps another")
        fmt += "x" * (member.offset - pos) + member.format
        pos = member.offset + member.size
    size = (info.push_constant_size + 3) // 4 * 4
    return fmt + "x" * (size - pos)


class ProgramCache:
    """Programs of one device by id; the same SPIR-V and entry point give the same program (reference counted)."""

    def __init__(self, ctx: DeviceContext) -> None:
        self.ctx = ctx
        ffi = ctx.ffi
        self._lock = threading.Lock()
        self._create_lock = threading.Lock()
        self._by_key: dict[bytes, Program] = {}
        self.programs: dict[int, Program] = {}   # live programs; Device.launch reads this directly
        self._all: dict[int, Program] = {}       # by table slot, including released ones still queued
        self._next_slot = 0                      # slots are not reused either: a queued record names one program
        self.capacity = 64
        self.table = ffi.new("vkb_program*[]", self.capacity)
        self.pipeline_cache = ffi.NULL
        self.cache_path = self._cache_path()

    # ----- the persistent pipeline cache ------------------------------------------------------------------------
    def _cache_path(self) -> Path:
        info = self.ctx.info
        return cache_dir() / f"{info.pipeline_cache_uuid}-{info.vendor_id:04x}-{info.device_id:04x}-{info.driver_version:08x}.bin"

    def open_pipeline_cache(self) -> None:
        """Create the VkPipelineCache, seeded from disk when the file is this device's; anything else is ignored."""
        ffi, lib = self.ctx.ffi, self.ctx.lib
        data = b""
        try:
            data = self.cache_path.read_bytes()
            if not self._cache_matches(data):
                log.info("ignoring pipeline cache %s: not this device's or corrupt", self.cache_path)
                data = b""
        except OSError:
            pass
        keep = ffi.from_buffer(data) if data else ffi.NULL
        info = ffi.new("VkPipelineCacheCreateInfo*", {"sType": lib.VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO,
                                                      "initialDataSize": len(data), "pInitialData": keep})
        out = ffi.new("VkPipelineCache*")
        result = lib.vkCreatePipelineCache(self.ctx.device, info, ffi.NULL, out)
        if result != 0 and data:  # a driver that rejects the data: start empty
            info.initialDataSize, info.pInitialData = 0, ffi.NULL
            result = lib.vkCreatePipelineCache(self.ctx.device, info, ffi.NULL, out)
        check(result, "vkCreatePipelineCache", ErrorStatus.Initialization)
        self.pipeline_cache = out[0]

    def _cache_matches(self, data: bytes) -> bool:
        if len(data) < CACHE_HEADER.size:
            return False
        size, version, vendor, device, uuid = CACHE_HEADER.unpack_from(data)
        info = self.ctx.info
        return (size >= CACHE_HEADER.size and version == 1 and vendor == info.vendor_id and device == info.device_id
                and uuid.hex() == info.pipeline_cache_uuid)

    def save_pipeline_cache(self) -> None:
        """Write the pipeline cache atomically (a temporary file renamed over the old one)."""
        ffi, lib = self.ctx.ffi, self.ctx.lib
        if self.pipeline_cache == ffi.NULL:
            return
        size = ffi.new("size_t*")
        if lib.vkGetPipelineCacheData(self.ctx.device, self.pipeline_cache, size, ffi.NULL) != 0 or size[0] == 0:
            return
        buf = ffi.new("char[]", size[0])
        if lib.vkGetPipelineCacheData(self.ctx.device, self.pipeline_cache, size, buf) != 0:
            return
        try:
            self.cache_path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.cache_path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_bytes(ffi.buffer(buf, size[0])[:])
            os.replace(tmp, self.cache_path)
        except OSError as error:
            log.warning("could not save the pipeline cache to %s: %s", self.cache_path, error)

    # ----- compile / release ------------------------------------------------------------------------------------
    def compile(self, spirv: bytes, entry_point: str = "main", robust: bool = True) -> int:
        """The program id for ``spirv``'s ``entry_point``; compiled once, then served from the cache.

        ``robust=False`` runs the program without bounds checks on its storage buffers where the device can choose per
        pipeline (``DeviceInfo.pipeline_robustness``); elsewhere the device-wide setting holds.
        """
        self.ctx.ensure_usable()
        if not isinstance(spirv, (bytes, bytearray, memoryview)):
            raise InvalidArgumentTypeError(ErrorStatus.InvalidArgument, f"compile needs SPIR-V bytes, got {type(spirv).__name__}")
        if not isinstance(entry_point, str):
            raise BackendError(ErrorStatus.InvalidArgument, f"compile: entry_point must be a str, got {entry_point!r}")
        spirv = bytes(spirv)
        digest = hashlib.sha256(spirv).hexdigest()
        robust = robust or not self.ctx.info.pipeline_robustness   # without the extension there is nothing to choose
        key = (digest + "\0" + entry_point + ("" if robust else "\0unchecked")).encode()
        with self._lock:
            prog = self._by_key.get(key)
            if prog is not None:
                prog.refcount += 1
                return prog.id
        info = reflect(spirv, entry_point, require_code=True)  # truncated modules never reach the driver
        self._check_limits(info)
        check_capabilities(info, self.ctx.info)
        validator.check(spirv, digest)  # spirv-val, or a clear error: invalid SPIR-V can crash the driver
        with self._create_lock:  # one creation at a time, so threads compiling the same SPIR-V share one program
            with self._lock:
                prog = self._by_key.get(key)
                if prog is not None:
                    prog.refcount += 1
                    return prog.id
                prog = Program(next_id(), self._next_slot, key, info, robust)
                self._next_slot += 1
            self.ctx.worker.call(self._create, prog, spirv)
            with self._lock:
                self._by_key[key] = prog
                self.programs[prog.id] = prog
        return prog.id

    def _check_limits(self, info: ProgramInfo) -> None:
        dev = self.ctx.info
        problems = []
        if len(info.buffers) > dev.max_storage_buffers:
            problems.append(f"{len(info.buffers)} storage buffers (the device allows {dev.max_storage_buffers})")
        if [b.binding for b in info.buffers] != list(range(len(info.buffers))):
            problems.append("bindings that are not 0..n-1 (launch binds buffers in binding order; leave no gaps)")
        if info.push_constant_size > dev.max_push_constants_size:
            problems.append(f"{info.push_constant_size} bytes of push constants (the device allows {dev.max_push_constants_size})")
        lx, ly, lz = info.local_size
        if any(v > m for v, m in zip(info.local_size, dev.max_local_work_dims)) or lx * ly * lz > dev.max_local_threads:
            problems.append(f"local size {info.local_size} (the device allows {dev.max_local_work_dims}, "
                            f"{dev.max_local_threads} threads)")
        if info.shared_memory_bytes > dev.local_mem_size:
            problems.append(f"{info.shared_memory_bytes} bytes of shared memory (the device has {dev.local_mem_size})")
        if problems:
            raise BackendError(ErrorStatus.KernelCompilation,
                               f"entry point {info.entry_point!r} needs " + "; ".join(problems) + f" on {dev.name}")

    def _create(self, prog: Program, spirv: bytes) -> None:
        """On the worker: shader module, layouts and pipeline, then the program's slot in the C table."""
        ctx = self.ctx
        ffi, lib, dev = ctx.ffi, ctx.lib, ctx.device
        created = []  # (destroy function, handle) to undo on failure
        try:
            code = ffi.from_buffer("uint32_t[]", spirv)
            minfo = ffi.new("VkShaderModuleCreateInfo*", {"sType": lib.VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                                          "codeSize": len(spirv), "pCode": code})
            module = ffi.new("VkShaderModule*")
            check(lib.vkCreateShaderModule(dev, minfo, ffi.NULL, module), f"vkCreateShaderModule for {prog.name}",
                  ErrorStatus.KernelCompilation)
            created.append((lib.vkDestroyShaderModule, module[0]))
            bindings = ffi.new("VkDescriptorSetLayoutBinding[]", max(1, prog.n_buffers))
            for i in range(prog.n_buffers):
                bindings[i].binding = i
                bindings[i].descriptorType = lib.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER
                bindings[i].descriptorCount = 1
                bindings[i].stageFlags = lib.VK_SHADER_STAGE_COMPUTE_BIT
            flags = lib.VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR if ctx.info.push_descriptors else 0
            dinfo = ffi.new("VkDescriptorSetLayoutCreateInfo*", {
                "sType": lib.VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO, "flags": flags,
                "bindingCount": prog.n_buffers, "pBindings": bindings})
            set_layout = ffi.new("VkDescriptorSetLayout*")
            check(lib.vkCreateDescriptorSetLayout(dev, dinfo, ffi.NULL, set_layout),
                  f"vkCreateDescriptorSetLayout for {prog.name}", ErrorStatus.KernelCompilation)
            created.append((lib.vkDestroyDescriptorSetLayout, set_layout[0]))
            push = ffi.new("VkPushConstantRange*", {"stageFlags": lib.VK_SHADER_STAGE_COMPUTE_BIT, "offset": 0,
                                                    "size": prog.push_words * 4})
            linfo = ffi.new("VkPipelineLayoutCreateInfo*", {
                "sType": lib.VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO, "setLayoutCount": 1,
                "pSetLayouts": set_layout, "pushConstantRangeCount": 1 if prog.push_words else 0,
                "pPushConstantRanges": push})
            layout = ffi.new("VkPipelineLayout*")
            check(lib.vkCreatePipelineLayout(dev, linfo, ffi.NULL, layout), f"vkCreatePipelineLayout for {prog.name}",
                  ErrorStatus.KernelCompilation)
            created.append((lib.vkDestroyPipelineLayout, layout[0]))
            entry = ffi.new("char[]", prog.info.entry_point.encode())
            unchecked = ffi.NULL
            if not prog.robust:
                unchecked = ffi.new("VkPipelineRobustnessCreateInfoEXT*", {
                    "sType": lib.VK_STRUCTURE_TYPE_PIPELINE_ROBUSTNESS_CREATE_INFO_EXT,
                    "storageBuffers": lib.VK_PIPELINE_ROBUSTNESS_BUFFER_BEHAVIOR_DISABLED_EXT,
                    "uniformBuffers": lib.VK_PIPELINE_ROBUSTNESS_BUFFER_BEHAVIOR_DEVICE_DEFAULT_EXT,
                    "vertexInputs": lib.VK_PIPELINE_ROBUSTNESS_BUFFER_BEHAVIOR_DEVICE_DEFAULT_EXT,
                    "images": lib.VK_PIPELINE_ROBUSTNESS_IMAGE_BEHAVIOR_DEVICE_DEFAULT_EXT})
            pinfo = ffi.new("VkComputePipelineCreateInfo*", {
                "sType": lib.VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO, "pNext": unchecked,
                "stage": {"sType": lib.VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                          "stage": lib.VK_SHADER_STAGE_COMPUTE_BIT, "module": module[0], "pName": entry},
                "layout": layout[0], "basePipelineIndex": -1})
            pipeline = ffi.new("VkPipeline*")
            check(lib.vkCreateComputePipelines(dev, self.pipeline_cache, 1, pinfo, ffi.NULL, pipeline),
                  f"vkCreateComputePipelines for {prog.name}", ErrorStatus.KernelCompilation)
        except BackendError:
            for destroy, handle in reversed(created):
                destroy(dev, handle, ffi.NULL)
            raise
        lib.vkDestroyShaderModule(dev, module[0], ffi.NULL)
        prog.pipeline, prog.layout, prog.set_layout = pipeline[0], layout[0], set_layout[0]
        access = bytes((1 if b.readable else 0) | (2 if b.writable else 0) for b in prog.info.buffers)
        prog.access = ffi.new("uint8_t[]", access or b"\0")
        prog.c_program = ffi.new("vkb_program*", {"pipeline": prog.pipeline, "layout": prog.layout,
                                                  "n_buffers": prog.n_buffers, "push_words": prog.push_words,
                                                  "access": prog.access})
        if prog.slot >= self.capacity:
            grown = ffi.new("vkb_program*[]", max(self.capacity * 2, prog.slot + 1))
            ffi.memmove(grown, self.table, ffi.sizeof("vkb_program*") * self.capacity)
            self.table, self.capacity = grown, len(grown)
        self.table[prog.slot] = prog.c_program
        with self._lock:  # listed here, on the worker: a caller woken by close() must not leave its pipeline behind
            self._all[prog.slot] = prog

    def get(self, prog_id: int) -> Program:
        try:
            return self.programs[prog_id]
        except (KeyError, TypeError):
            raise BackendError(ErrorStatus.InvalidArgument,
                               f"program {prog_id!r} is not a live program of {self.ctx.info.name} (never compiled, or "
                               "released)") from None

    def release(self, prog_id: int) -> None:
        """Drop one reference; at zero the pipeline is destroyed once no queued launch uses it."""
        with self._lock:
            prog = self.get(prog_id)
            prog.refcount -= 1
            if prog.refcount > 0:
                return
            del self.programs[prog_id]
            del self._by_key[prog.key]
        self.ctx.worker.defer(lambda: self._destroy(prog))

    def _destroy(self, prog: Program) -> None:
        ffi, lib, dev = self.ctx.ffi, self.ctx.lib, self.ctx.device
        self.table[prog.slot] = ffi.NULL
        lib.vkDestroyPipeline(dev, prog.pipeline, ffi.NULL)
        lib.vkDestroyPipelineLayout(dev, prog.layout, ffi.NULL)
        lib.vkDestroyDescriptorSetLayout(dev, prog.set_layout, ffi.NULL)
        with self._lock:
            self._all.pop(prog.slot, None)

    def name(self, slot: int) -> str:
        """The name of the program in table slot ``slot`` (records name programs by slot)."""
        prog = self._all.get(slot)
        return prog.name if prog else f"slot {slot}"

    def set_layout(self, slot: int):
        return self._all[slot].set_layout

    def destroy(self) -> None:
        """Save the pipeline cache and destroy every pipeline (the device must be idle)."""
        ffi, lib = self.ctx.ffi, self.ctx.lib
        for prog in list(self._all.values()):
            self._destroy(prog)
        self.programs.clear()
        self._by_key.clear()
        self.save_pipeline_cache()
        if self.pipeline_cache != ffi.NULL:
            lib.vkDestroyPipelineCache(self.ctx.device, self.pipeline_cache, ffi.NULL)
            self.pipeline_cache = ffi.NULL
