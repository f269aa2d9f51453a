"""CUDA's clocks for Vulkan work on NVIDIA GPUs: an open device holds the CUDA primary context of its GPU.

NVIDIA's driver clocks a GPU by who uses it. While a CUDA context exists on it, the GPU runs at full clocks; work
that comes only through Vulkan gets an adaptive policy that raises the clocks only under sustained load. A framework's
step that leaves the GPU idle between short bursts (decoding one token at a time, a synchronised training step) then
runs at a fraction of the clock: docs/performance.md ("GPU clocks") has the measurement. So where a device is an
NVIDIA GPU, libcuda loads and CUDA sees the same GPU (matched by UUID), :class:`vkbackend.Device` retains that GPU's
CUDA primary context from open to close. It is the context PyTorch, CuPy and tinygrad's CUDA device share
(``cuDevicePrimaryCtxRetain`` counts references), so where one of them runs in the process it costs nothing more.
``VKBACKEND_CUDA_CLOCKS=0`` (``VulkanConfig.cuda_clocks=False``) turns it off; anywhere else nothing is held.
"""

from __future__ import annotations

import ctypes
import logging

from ..errors import BackendError
from .cuda_driver import CudaDriver, device_with_uuid, driver

__all__ = ["NVIDIA_VENDOR_ID", "ComputeClocks", "hold_compute_clocks"]

log = logging.getLogger("vkbackend")

NVIDIA_VENDOR_ID = 0x10DE  # VkPhysicalDeviceProperties.vendorID (PCI vendor id)


class ComputeClocks:
    """A retained CUDA primary context, which keeps its GPU at CUDA's clocks; :meth:`release` drops it."""

    __slots__ = ("ordinal", "_driver", "_device")

    def __init__(self, drv: CudaDriver, ordinal: int, device: ctypes.c_int) -> None:
        self.ordinal = ordinal  # the CUDA device ordinal of the GPU
        self._driver: CudaDriver | None = drv
        self._device = device

    def release(self) -> None:
        """Drop the reference on the context (once); CUDA destroys it when nobody else holds it."""
        drv, self._driver = self._driver, None
        if drv is None:
            return
        try:
            drv.call("cuDevicePrimaryCtxRelease_v2", self._device)
        except BackendError as error:  # the device closes all the same
            log.warning("releasing the CUDA context held for the GPU's clocks failed: %s", error)


def hold_compute_clocks(vendor_id: int, uuid: bytes) -> ComputeClocks | None:
    """Retain the CUDA primary context of the NVIDIA GPU whose UUID is ``uuid``; None (logged at debug level) for
    another vendor, without libcuda, or where CUDA does not see that GPU."""
    if vendor_id != NVIDIA_VENDOR_ID:
        return None
    try:
        drv = driver()
        ordinal, device = device_with_uuid(drv, uuid)
        context = ctypes.c_void_p()
        drv.call("cuDevicePrimaryCtxRetain", ctypes.byref(context), device)
    except BackendError as error:
        log.debug("no CUDA context held for the GPU's clocks: %s", error)
        return None
    log.debug("holding CUDA device %d's primary context for its clocks", ordinal)
    return ComputeClocks(drv, ordinal, device)
