"""tinygrad's ``VK`` device, backed by vkbackend.

tinygrad finds a device ``X`` by importing ``tinygrad.runtime.ops_x`` and taking the class whose lowercased name is
``xdevice``; :mod:`vkbackend.tinygrad._hook` makes ``tinygrad.runtime.ops_vk`` an alias of this module without
touching tinygrad.  ``VK`` (or ``VK:0``) runs on the first device ``vkbackend.devices()`` would open, ``VK:n`` on
the n-th, each opened when it is first used (:func:`vk_device`).

* :class:`VKAllocator`: buffers from the device's :class:`vkbackend.MemoryPool`; views (``_offset``) through
  ``pool.view`` at the offset rounded down to ``minStorageBufferOffsetAlignment``, the remainder travelling with the
  buffer and reaching the kernel as a push-constant word (see the renderer); copies between ``VK`` devices through
  ``pool_to_pool``.
* :class:`VKProgram`: every launch is ``Device.launch`` (batched, hazard-tracked, asynchronous); ``wait=True`` is
  ``Device.launch_timed`` (GPU time, in seconds).  Kernels on global ids run with the local size tinygrad asks for
  where it divides the global size (``VKProgram.fit_local_size``), one compiled variant per size.
* :class:`VKDevice`: ``synchronize`` is ``Device.sync``.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import sys
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

from tinygrad.device import BufferSpec, Compiled, LRUAllocator, Program, TinyELF

from vkbackend import glslang_lib
from vkbackend.config import VulkanConfig, env_flag
from vkbackend.errors import BackendError, ErrorStatus
from vkbackend.ids import label
from vkbackend.tinygrad.compiler.compiler import compile_variant, with_local_size
from vkbackend.tinygrad.compiler.kernel_format import unpack_lib
from vkbackend.tinygrad.renderer.caps import make_arch
from vkbackend.tinygrad.renderer.renderer import VKRenderer
from vkbackend.tinygrad.runtime import layout_cache
from vkbackend.tinygrad.runtime.coopmat_layout import Probed, probe_compiles, probe_layout, with_tensor_cores
from vkbackend.tinygrad.runtime.device_caps import caps_from_info, max_kernel_buffers

if TYPE_CHECKING:
    from vkbackend.device import Device

log = logging.getLogger("vkbackend")

__all__ = [
    "VKDevice",
    "VKAllocator",
    "VKProgram",
    "VKBuffer",
    "VKRenderer",
    "vk_device",
    "vk_device_ids",
    "caps_from_info",
]


# ---------------------------------------------------------------------------------------------------------------------
# vkbackend devices, each opened when its VK:n is first used
# ---------------------------------------------------------------------------------------------------------------------

_ids_lock = threading.Lock()
_ids: list[int] | None = None


def vk_device_ids() -> list[int]:
    """The indices (vkbackend's discovery order) of the Vulkan devices that ``VK:0``, ``VK:1``, ... run on: those
    ``vkbackend.devices()`` opens (every device with a compute queue, or those ``VKBACKEND_DEVICE_IDS`` names), found
    once per process without opening any."""
    global _ids
    with _ids_lock:
        if _ids is None:
            from vkbackend.discovery import query_physical_devices  # noqa: PLC0415

            # an index past the devices is refused by vkbackend.devices() when its VK:n opens
            wanted = VulkanConfig.from_env().device_ids
            _ids = list(range(len(query_physical_devices()))) if wanted is None else list(wanted)
        return _ids


def vk_device(n: int) -> Device:
    """The ``vkbackend.Device`` that tinygrad's ``VK:n`` runs on, opened on first use (it alone: a process on one GPU
    of several holds no other), and shared by every ``VK:n`` on that GPU: like tinygrad's ``CPU:n``, ``VK:n`` past the
    last GPU is another tinygrad device on GPU ``n`` modulo their count."""
    import vkbackend  # noqa: PLC0415

    ids = vk_device_ids()
    return vkbackend.devices(dataclasses.replace(VulkanConfig.from_env(), device_ids=[ids[n % len(ids)]]))[0]


_tc_layouts: dict[int, Probed] = {}  # a device's index -> its cooperative matrices' register layout, probed once


def _tc_layout(device, caps) -> Probed:
    """The register layout of ``device``'s cooperative matrices and the shapes that hold it
    (coopmat_layout.probe_layout), probed once per device (two first users may both probe, and get the same
    answer), and not at all where a process before this one probed the same GPU and driver (layout_cache.py) and
    this one compiles the probe. A probe the device failed is not kept: tensor cores stage (or are off by default)
    for this VK device, and the next one probes again."""
    key = device.index
    if key in _tc_layouts:
        return _tc_layouts[key]
    kept = layout_cache.load(device.info, caps)
    # the kept answer holds for this process where it compiles the probe (glslang 13), as its tensor-core kernels
    if kept is not None and probe_compiles(kept.shapes, int(device.info.local_mem_size)):
        return _tc_layouts.setdefault(key, kept)
    device.sync()  # an earlier launch's error is raised here, as at any sync point, not taken for the probe's
    try:
        probed = probe_layout(device, caps)
    except BackendError as error:
        log.warning("vkbackend: the cooperative-matrix layout probe failed on %s: %s", device.info.name, error)
        return Probed("chunk", caps.tc_shapes)
    layout_cache.store(device.info, caps, probed)
    return _tc_layouts.setdefault(key, probed)


# ---------------------------------------------------------------------------------------------------------------------
# buffers
# ---------------------------------------------------------------------------------------------------------------------


class VKBuffer:
    """A tinygrad opaque buffer: a pool buffer id, and for views the byte offset into it the kernel must add."""

    __slots__ = ("pool", "id", "base", "offset", "rem", "nbytes", "is_view", "__weakref__")

    def __init__(self, pool, buf_id: int, base: int, offset: int, rem: int, nbytes: int, is_view: bool):
        self.pool, self.id, self.base, self.offset, self.rem, self.nbytes, self.is_view = (
            pool,
            buf_id,
            base,
            offset,
            rem,
            nbytes,
            is_view,
        )

    def __del__(self):
        # views are never passed to _free by tinygrad: the pool view (which retains its parent) goes with the object
        if self.is_view:
            self.pool.release_from_finalizer(self.id)

    def __repr__(self):
        return f"VKBuffer({label(self.id)}, base {label(self.base)}, offset={self.offset}, nbytes={self.nbytes})"


class VKAllocator(LRUAllocator["VKDevice"]):
    def __init__(self, dev: "VKDevice"):
        super().__init__(dev)
        self.pool = dev.vk.memory_pool
        self.align = max(1, int(dev.vk.info.min_storage_buffer_offset_alignment))

    def _alloc(self, size: int, options: BufferSpec) -> VKBuffer:
        # out of device memory raises MemoryAllocationError, a MemoryError: tinygrad's LRUAllocator frees its cache
        # and tries again
        buf_id = self.pool.allocate(size)
        if options.zero:
            self.pool.host_to_pool(bytes(size), buf_id)
        return VKBuffer(self.pool, buf_id, buf_id, 0, 0, size, False)

    def _free(self, opaque: VKBuffer, options: BufferSpec):
        if not opaque.is_view:  # tinygrad frees from its Buffer's finalizer: see MemoryPool.release_from_finalizer
            self.pool.release_from_finalizer(opaque.id)

    def _offset(self, buf: VKBuffer, size: int, offset: int) -> VKBuffer:
        absolute = buf.offset + offset
        aligned = absolute - absolute % self.align
        rem = absolute - aligned
        view_id = self.pool.view(buf.base, aligned, rem + size)
        return VKBuffer(self.pool, view_id, buf.base, absolute, rem, size, True)

    def _copyin(self, dest: VKBuffer, src: memoryview):
        self.pool.host_to_pool(src, dest.id, dest.rem)

    def _copyout(self, dest: memoryview, src: VKBuffer):
        self.pool.pool_to_host(src.id, dest, src.rem)

    def _transfer(self, dest: VKBuffer, src: VKBuffer, sz: int, src_dev: "VKDevice", dest_dev: "VKDevice"):
        if dest.rem == 0 and src.rem == 0 and dest.nbytes == src.nbytes == sz:
            dest_dev.allocator.pool.pool_to_pool(src_dev.allocator.pool, src.id, dest.id)
        else:  # a view at an unaligned offset: through the host
            tmp = memoryview(bytearray(sz))
            src_dev.allocator._copyout(tmp, src)
            dest_dev.allocator._copyin(dest, tmp)


# ---------------------------------------------------------------------------------------------------------------------
# programs
# ---------------------------------------------------------------------------------------------------------------------


_GRIDS_KEPT = 1024  # grid() answers a program keeps (a JIT's position variable takes up to its context's length)


class VKProgram(Program["VKDevice"]):
    def __init__(self, dev: "VKDevice", obj: TinyELF):
        self.dev, self.name = dev, obj.name
        self.lib = unpack_lib(obj.lib)
        meta = self.lib.meta
        self.local = tuple(meta["local"])
        self.uses_gid = bool(meta["gid"])
        self.widen = int(meta.get("widen", 1))  # old work groups along x per work group (renderer: widened kernels)
        self.fold = meta.get("fold")  # (axis, rows or 0, limit): the grid along x folded onto that axis (renderer)
        self.sizes = [tuple(b["sizes"]) for b in meta["bindings"]]
        # the launch passes bound arguments first, then those reached by device address (renderer: "address")
        order = sorted(range(len(meta["bindings"])), key=lambda i: bool(meta["bindings"][i].get("address")))
        self.buffer_order = None if order == sorted(order) else order
        info = dev.vk.info
        self.local_max = tuple(int(x) for x in info.max_local_work_dims)
        self.max_threads = int(info.max_local_threads)
        # compiled variants: (VK_VIEWS, work-group size of a kernel on global ids, else None) -> program
        self.variants: dict[tuple[bool, tuple[int, int, int] | None], int] = {}
        self._grids: dict[tuple, tuple] = {}  # grid()'s answers by (global size, local size)
        self._views_spirv: bytes | None = None
        self.prog = self.program(False, (1, 1, 1) if self.uses_gid else None)

    @staticmethod
    def fit_local_size(
        total: Sequence[int], wanted: Sequence[int], max_dims: Sequence[int], max_threads: int
    ) -> tuple[int, int, int]:
        """The work-group size for a kernel on global ids: ``wanted`` where it divides the ``total`` invocations of each
        dimension, else the largest size below it that does, within the device's limits.

        tinygrad renders such kernels without a bounds check (CUDA fails the launch when the sizes do not divide, and
        tinygrad's local-size search skips that candidate), so every invocation must be a real one."""
        local = []
        for t, w, m in zip(total, wanted, max_dims):
            size = max(1, min(int(w), int(m), int(t)))
            while t % size:
                size -= 1
            local.append(size)
        while math.prod(local) > max_threads:
            i = local.index(max(local))
            size = local[i] - 1
            while total[i] % size:
                size -= 1
            local[i] = size
        return (local[0], local[1], local[2])

    def program(self, views: bool, local: tuple[int, int, int] | None) -> int:
        """The program of one variant, compiled on first use: per-binding view offsets or not (``VK_VIEWS``), and for
        a kernel on global ids its work-group size (see
        :func:`vkbackend.tinygrad.compiler.compiler.with_local_size`)."""
        if (prog := self.variants.get((views, local))) is not None:
            return prog
        if views:
            if self._views_spirv is None:
                self._views_spirv = compile_variant(self.lib.source, views=True)
            spirv = self._views_spirv
        else:
            spirv = self.lib.spirv
        if local is not None:
            spirv = with_local_size(spirv, local)
        # tinygrad proves its kernels' bounds, so they need no robust buffer access (which costs up to several times
        # a kernel's time on NVIDIA); where the device cannot choose per pipeline, its own setting holds.
        # VKBACKEND_TINYGRAD_ROBUST=1 keeps the checks (to measure them, or to chase a kernel that reads out of bounds).
        robust = env_flag("VKBACKEND_TINYGRAD_ROBUST", False)
        # made in the background: tinygrad renders and compiles its next kernel while the driver makes this pipeline
        prog = self.variants[(views, local)] = self.dev.vk.compile(spirv, robust=robust, background=True)
        return prog

    def __call__(
        self,
        *bufs: VKBuffer,
        global_size: tuple = (1, 1, 1),
        local_size: tuple | None = (1, 1, 1),
        vals: tuple = (),
        wait: bool = False,
        **kw,
    ) -> float | None:
        launch = self.launch_args(bufs, global_size, local_size, vals)
        if launch is None:
            return 0.0 if wait else None
        if wait:
            return self.dev.vk.launch_timed(*launch) * 1e-9
        try:
            self.dev.vk.launch(*launch)
        except BackendError as error:
            # a launch raises no earlier error, so this is its own program's: its pipeline could not be made, and the
            # next call compiles it again
            if error.status is ErrorStatus.KernelCompilation:
                self.forget_variant(launch[0])
            raise
        return None

    def forget_variant(self, prog: int) -> None:
        """Drop the compiled variant ``prog`` (its pipeline could not be made), so that its next use compiles it
        again."""
        for key, value in list(self.variants.items()):
            if value == prog:
                del self.variants[key]
                self.dev.vk.release_program(prog)

    def launch_args(self, bufs, global_size, local_size, vals) -> tuple[int, list[int], list, tuple[int, ...]] | None:
        """``(program, buffer ids, scalars, grid)`` for ``vkbackend.Device.launch``; None for an empty grid."""
        grid, local = self.grid(global_size, local_size)
        return None if grid is None else self.assemble(grid, local, self.bound(bufs), vals)

    def assemble(
        self, grid: tuple[int, ...], local, bound: tuple[list[int], list[int]], vals
    ) -> tuple[int, list[int], list, tuple[int, ...]]:
        """The launch for a non-empty ``grid`` and work-group size from ``grid()``, and ``bound()``'s ids and offsets:
        view offsets select the ``VK_VIEWS`` variant and follow the scalars."""
        ids, offsets = bound
        return self.program(bool(offsets), local), ids, [*vals, *offsets], grid

    def grid(self, global_size, local_size) -> tuple[tuple[int, ...] | None, tuple[int, int, int] | None]:
        """The launch's grid (None when it is empty) and, for a kernel on global ids, its work-group size; each answer
        is kept (a JIT's replay asks again for the sizes its variables take, token after token)."""
        key = (tuple(global_size), None if local_size is None else tuple(local_size))
        found = self._grids.get(key)
        if found is None:
            if len(self._grids) >= _GRIDS_KEPT:
                self._grids.clear()
            found = self._grids[key] = self._fit_grid(global_size, local_size)
        return found

    def _fit_grid(self, global_size, local_size) -> tuple[tuple[int, ...] | None, tuple[int, int, int] | None]:
        gs = list(global_size) + [1] * (3 - len(global_size))
        local = None
        if self.uses_gid:
            # tinygrad's global size is total/local (a fraction when local does not divide the total): launch the
            # total as whole work groups of a size that divides it
            ls = list(local_size or (1, 1, 1)) + [1] * (3 - len(local_size or ()))
            total = [max(0, round(g * size)) for g, size in zip(gs, ls)]
            local = self.fit_local_size(total, ls, self.local_max, self.max_threads)
            grid = [t // size for t, size in zip(total, local)]
        else:
            grid = [int(g) for g in gs]
            grid[0] = -(-grid[0] // self.widen)
        if self.fold is not None:  # rows fixed by the kernel, or 0: as many as the length needs
            axis, rows, limit = self.fold
            rows = rows or -(-grid[0] // limit)
            grid[0] = -(-grid[0] // rows)
            grid[axis] *= rows
        return (tuple(grid) if min(grid) > 0 else None), local

    def bound(self, bufs) -> tuple[list[int], list[int]]:
        """The buffer ids in the launch's order, and the view offsets the ``VK_VIEWS`` variant takes (empty when no
        buffer is a view at an offset the alignment does not cover)."""
        ids = [b.id for b in bufs] if self.buffer_order is None else [bufs[i].id for i in self.buffer_order]
        if not any(b.rem for b in bufs):
            return ids, []
        for b, sizes in zip(bufs, self.sizes):
            if any(b.rem % s for s in sizes):
                raise RuntimeError(
                    f"{self.name}: a view at byte offset {b.offset} is not aligned to its element size {max(sizes)}"
                )
        return ids, [b.rem for b in bufs]

    def __del__(self):
        for p in getattr(self, "variants", {}).values():
            try:
                self.dev.vk.release_program(p)
            except Exception:
                if sys is not None and not sys.is_finalizing():  # at exit the module's globals may be gone already
                    raise  # ... and the device may already be closed


# ---------------------------------------------------------------------------------------------------------------------
# the device
# ---------------------------------------------------------------------------------------------------------------------


class VKDevice(Compiled):
    def __init__(self, device: str):
        idx = int(device.split(":")[1]) if ":" in device else 0
        # this process compiles (the layout probe below, tinygrad's kernels it lowers itself): glslang sets up while
        # the device opens
        glslang_lib.set_up_in_background()
        count = len(vk_device_ids())
        if not count:
            raise RuntimeError("vkbackend found no Vulkan device (is a driver such as mesa-vulkan-drivers installed?)")
        if idx >= count and not env_flag("VKBACKEND_TINYGRAD_VIRTUAL", True):
            raise RuntimeError(f"{device}: vkbackend has {count} Vulkan device(s) (VK:0 to VK:{count - 1})")
        self.vk = vk_device(idx)  # VK:n past the last GPU: another tinygrad device (own buffers, shared queue)
        info = self.vk.info
        caps = caps_from_info(info)
        if caps.tc_shapes:  # tinygrad's registers straight into cooperative matrices where the layout is known
            caps = with_tensor_cores(caps, _tc_layout(self.vk, caps))
        if not caps.i8:
            raise RuntimeError(
                f"{info.name}: tinygrad on Vulkan needs 8-bit storage and shaderInt8 (tinygrad's bool is one byte)"
            )
        # tinygrad splits kernels that would bind more buffers than this (keyed by device name, read at schedule time)
        from tinygrad.schedule.rangeify import DEVICE_MAX_BUFS  # noqa: PLC0415

        DEVICE_MAX_BUFS["VK"] = min(DEVICE_MAX_BUFS.get("VK", 1 << 30), max_kernel_buffers(info))
        # imported here: tinygrad's jit (which graph.py imports) imports this module's package
        from vkbackend.tinygrad.runtime.graph import VKGraph  # noqa: PLC0415

        graph = VKGraph if env_flag("VKBACKEND_TINYGRAD_GRAPH", True) else None
        super().__init__(device, VKAllocator(self), [VKRenderer], VKProgram, graph, arch=make_arch(caps))

    def synchronize(self):
        self.vk.sync()

    def finalize(self):
        # vkbackend closes its devices at interpreter exit; waiting here makes tinygrad's atexit order harmless
        try:
            self.vk.sync()
        except Exception:
            pass  # noqa: BLE001 - nothing to report to at exit
