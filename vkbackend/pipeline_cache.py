"""PipelineCache: the device's VkPipelineCache, seeded from disk when a device opens and written back when it closes.

The file is named by the device's pipeline-cache UUID, vendor, device and driver version, and its header is checked
before the driver sees it, so another device's or a corrupt file is ignored rather than handed over.
"""

from __future__ import annotations

import logging
import struct
from pathlib import Path

from .cache_files import device_stem, write_atomically
from .config import cache_dir
from .errors import ErrorStatus, check, result_name
from .structs import new_struct

log = logging.getLogger("vkbackend")

__all__ = ["PipelineCache"]

HEADER = struct.Struct("<4I16s")  # VkPipelineCacheHeaderVersionOne: size, version, vendor, device, UUID


class PipelineCache:
    """One device's pipeline cache: opened, saved and destroyed on the worker; pipelines are made against it on any
    thread (it is not created externally synchronised, so the driver synchronises it)."""

    def __init__(self, ctx) -> None:
        self.ctx = ctx
        info = ctx.info
        self.path: Path = cache_dir() / f"{device_stem(info)}.bin"
        self.handle = ctx.ffi.NULL

    def open(self) -> None:
        """Create the VkPipelineCache, seeded from disk when the file is this device's; anything else is ignored."""
        ffi, lib = self.ctx.ffi, self.ctx.lib
        data = b""
        try:
            data = self.path.read_bytes()
            if not self._matches(data):
                log.info("ignoring pipeline cache %s: not this device's or corrupt", self.path)
                data = b""
        except OSError:
            pass
        info = new_struct("VkPipelineCacheCreateInfo", initialDataSize=len(data), pInitialData=data or None)
        out = ffi.new("VkPipelineCache*")
        result = lib.vkCreatePipelineCache(self.ctx.device, info, ffi.NULL, out)
        if result != 0 and data:  # a driver that rejects the data: start empty
            log.info("the driver refused the pipeline cache %s (%s); starting empty", self.path, result_name(result))
            info.initialDataSize, info.pInitialData = 0, ffi.NULL
            result = lib.vkCreatePipelineCache(self.ctx.device, info, ffi.NULL, out)
        check(result, "vkCreatePipelineCache", ErrorStatus.Initialization)
        self.handle = out[0]

    def _matches(self, data: bytes) -> bool:
        if len(data) < HEADER.size:
            return False
        size, version, vendor, device, uuid = HEADER.unpack_from(data)
        info = self.ctx.info
        return (
            size >= HEADER.size
            and version == 1
            and vendor == info.vendor_id
            and device == info.device_id
            and uuid.hex() == info.pipeline_cache_uuid
        )

    def save(self) -> None:
        """Write the cache atomically (a temporary file renamed over the old one). A failure is logged, not raised:
        it only costs the next process its warm start."""
        ffi, lib = self.ctx.ffi, self.ctx.lib
        if self.handle == ffi.NULL:
            return
        size = ffi.new("size_t*")
        result = lib.vkGetPipelineCacheData(self.ctx.device, self.handle, size, ffi.NULL)
        buf = ffi.new("char[]", size[0]) if result == 0 and size[0] else None
        if buf is not None:
            result = lib.vkGetPipelineCacheData(self.ctx.device, self.handle, size, buf)
        if result != 0:
            log.warning("could not read the pipeline cache back (%s); it is not saved", result_name(result))
            return
        if buf is None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_atomically(self.path, memoryview(ffi.buffer(buf, size[0])))
        except OSError as error:
            log.warning("could not save the pipeline cache to %s: %s", self.path, error)

    def destroy(self) -> None:
        """Save, then destroy the VkPipelineCache."""
        self.save()
        if self.handle != self.ctx.ffi.NULL:
            self.ctx.lib.vkDestroyPipelineCache(self.ctx.device, self.handle, self.ctx.ffi.NULL)
            self.handle = self.ctx.ffi.NULL
