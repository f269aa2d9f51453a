"""CUDA's driver library (libcuda.so.1) through ctypes, opened on first use: what the CUDA interop and the compute
clocks (cuda_clocks.py) call. Nothing here runs at import, so vkbackend imports without CUDA."""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..errors import BackendError, ErrorStatus

__all__ = ["CudaDriver", "device_with_uuid", "driver"]

LIBRARY = "libcuda.so.1"
CUDA_ERROR_OUT_OF_MEMORY = 2


class CudaDriver:
    """libcuda through ctypes, initialised. Every argument is passed as a ctypes object, so none is truncated."""

    def __init__(self, lib: Any) -> None:
        self.lib = lib
        self.call("cuInit", ctypes.c_uint(0))

    def call(self, name: str, *args: Any) -> None:
        """Call ``name``; raise a BackendError naming the CUresult when it fails."""
        result = int(getattr(self.lib, name)(*args))
        if result:
            status = ErrorStatus.MemoryAllocation if result == CUDA_ERROR_OUT_OF_MEMORY else ErrorStatus.Initialization
            raise BackendError(
                status,
                f"{name} failed with {self.error_name(result)}; CUDA and the Vulkan device "
                "must be the same NVIDIA GPU, under the same driver",
            )

    def error_name(self, result: int) -> str:
        """CUDA's name of a CUresult (``CUDA_ERROR_...``)."""
        name = ctypes.c_char_p()
        if self.lib.cuGetErrorName(ctypes.c_int(result), ctypes.byref(name)) == 0 and name.value:
            return str(name.value.decode())
        return f"CUresult {result}"

    @contextmanager
    def current(self, context: ctypes.c_void_p) -> Iterator[None]:
        """``context`` is the calling thread's current CUDA context inside the block."""
        self.call("cuCtxPushCurrent_v2", context)
        try:
            yield
        finally:
            self.call("cuCtxPopCurrent_v2", ctypes.byref(ctypes.c_void_p()))


_lock = threading.Lock()
_loaded: CudaDriver | None = None


def driver() -> CudaDriver:
    """The process's libcuda, loaded and initialised on the first call; ``DyLibNotFoundError`` without it."""
    global _loaded
    with _lock:
        if _loaded is None:
            try:
                lib = ctypes.CDLL(LIBRARY)
            except OSError as error:
                raise BackendError(
                    ErrorStatus.DyLibNotFound,
                    f"CUDA's driver library {LIBRARY} could not be loaded ({error}); it needs an "
                    "NVIDIA GPU and its driver, which installs it",
                ) from None
            _loaded = CudaDriver(lib)
        return _loaded


def device_with_uuid(drv: CudaDriver, uuid: bytes) -> tuple[int, ctypes.c_int]:
    """(ordinal, CUdevice) of the CUDA device whose UUID is ``uuid`` (Vulkan's deviceUUID of the same GPU)."""
    count = ctypes.c_int()
    drv.call("cuDeviceGetCount", ctypes.byref(count))
    seen = []
    for ordinal in range(count.value):
        device, found = ctypes.c_int(), (ctypes.c_char * 16)()
        drv.call("cuDeviceGet", ctypes.byref(device), ctypes.c_int(ordinal))
        drv.call("cuDeviceGetUuid", found, device)
        if found.raw == uuid:
            return ordinal, device
        seen.append(found.raw.hex())
    raise BackendError(
        ErrorStatus.InvalidArgument,
        f"no CUDA device is the Vulkan device (UUID {uuid.hex()}; CUDA's: {', '.join(seen) or 'none'}): "
        "the GPU is one CUDA does not see (check CUDA_VISIBLE_DEVICES) or not an NVIDIA GPU",
    )
