"""vkbackend.interop.cuda on a machine without CUDA.

What runs here: importing the module needs neither libcuda nor torch; without libcuda the error says what is
missing; the ctypes structs have cuda.h's layout; and, against a stand-in for libcuda (a Python object playing the
driver API), the bookkeeping: CUDA gets a duplicate of the descriptor and the memory's real size, the Vulkan buffer
is held while mapped, the array interface describes the mapping, and unmapping undoes every step. None of it shows
that CUDA accepts the memory: that is scripts/cuda-interop-check.py's job, on an NVIDIA GPU.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import importlib.util
import os
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from vkbackend import DyLibNotFoundError, InitializationError, InvalidArgumentError, InvalidArgumentTypeError
from vkbackend.config import VulkanConfig
from vkbackend.interop import cuda, cuda_driver
from vkbackend.interop.cuda_clocks import NVIDIA_VENDOR_ID, hold_compute_clocks

MAPPED_AT = 0x7F0000000000
REPO = Path(__file__).resolve().parents[1]


class FakeLibcuda:
    """The driver API calls interop.cuda makes, on a pretend GPU 1 of two whose UUID is ``uuid``."""

    def __init__(self, uuid: bytes, fail: str = "") -> None:
        self.uuid, self.fail = uuid, fail
        self.contexts, self.stack, self.imports, self.mappings = 0, [], {}, set()
        self.desc: dict = {}

    def _result(self, name: str) -> int:
        return 999 if name == self.fail else 0

    def cuInit(self, flags):
        return 0

    def cuGetErrorName(self, result, name):
        name._obj.value = b"CUDA_ERROR_STAND_IN"
        return 0

    def cuDeviceGetCount(self, count):
        count._obj.value = 2
        return 0

    def cuDeviceGet(self, device, ordinal):
        device._obj.value = 100 + ordinal.value
        return 0

    def cuDeviceGetUuid(self, out, device):
        out.raw = self.uuid if device.value == 101 else bytes(range(16))
        return 0

    def cuDevicePrimaryCtxRetain(self, context, device):
        context._obj.value, self.contexts = 0xC0, self.contexts + 1
        return 0

    def cuDevicePrimaryCtxRelease_v2(self, device):
        self.contexts -= 1
        return 0

    def cuCtxPushCurrent_v2(self, context):
        self.stack.append(context.value)
        return 0

    def cuCtxPopCurrent_v2(self, out):
        out._obj.value = self.stack.pop()
        return 0

    def cuCtxSynchronize(self):
        return 0

    def cuImportExternalMemory(self, out, desc):
        d = desc._obj
        self.desc = {
            "type": d.type,
            "size": d.size,
            "flags": d.flags,
            "fd": d.handle.fd,
            "open": os.path.exists(f"/proc/self/fd/{d.handle.fd}"),
            "context": self.stack[-1:],
        }
        if self._result("cuImportExternalMemory"):
            return 999
        out._obj.value = 0xE0 + len(self.imports)
        self.imports[out._obj.value] = d.handle.fd  # the driver owns the descriptor from here on
        return 0

    def cuExternalMemoryGetMappedBuffer(self, ptr, memory, desc):
        ptr._obj.value = MAPPED_AT
        self.mappings.add(MAPPED_AT)
        self.desc["mapped"] = (desc._obj.offset, desc._obj.size)
        return 0

    def cuMemFree_v2(self, ptr):
        self.mappings.remove(ptr.value)
        return 0

    def cuDestroyExternalMemory(self, memory):
        os.close(self.imports.pop(memory.value))
        return 0


def _descriptors() -> dict[str, str]:
    """This process's open descriptors and what each refers to (one closed while they are listed, such as the
    listing's own, left out)."""
    found = {}
    for fd in os.listdir("/proc/self/fd"):
        try:
            found[fd] = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            pass
    return found


def _the_drivers(target: str) -> bool:
    """A descriptor the driver opens for itself and keeps: a regular file with a path (NVIDIA's shader cache, opened
    during a pipeline creation) or a device node (NVIDIA's /dev/nvidia0, opened for memory objects such as the pool's
    chunks). Exported memory on lavapipe is neither (a memfd, whose path does not exist), so there every descriptor
    the interop paths leak is caught."""
    try:
        mode = os.stat(target).st_mode if target.startswith("/") else 0
    except OSError:
        return False
    return stat.S_ISREG(mode) or stat.S_ISCHR(mode)


@pytest.fixture
def exported(device):
    if "VK_KHR_external_memory_fd" not in device.info.extensions:
        pytest.skip(f"{device.info.name} has no VK_KHR_external_memory_fd")
    pool = device.memory_pool
    ext = pool.allocate_exportable(4096)
    before = _descriptors()
    yield ext
    gc.collect()
    device.sync()  # buffers the test released are freed once the GPU is done: a driver's descriptor for one goes then
    leaked = {fd: to for fd, to in _descriptors().items() if before.get(fd) != to and not _the_drivers(to)}
    assert not leaked, f"descriptors leaked: {leaked}"
    if pool.is_live(ext.buffer):
        pool.release(ext.buffer)
    ext.close()


@pytest.fixture
def stand_in(exported, monkeypatch):
    fake = FakeLibcuda(exported.device_uuid)
    monkeypatch.setattr(cuda_driver, "_loaded", cuda_driver.CudaDriver(fake))
    return fake


def test_the_module_imports_without_cuda_or_torch():
    code = (
        "import sys, vkbackend.interop.cuda, vkbackend.interop.cuda_driver as c; "
        "assert c._loaded is None and not {'torch', 'cupy'} & set(sys.modules), sorted(sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_the_structs_have_the_layout_of_cuda_h():
    assert ctypes.sizeof(cuda._HandleDesc) == 104  # int type; union {int fd; 2 pointers}; u64 size; flags; u32[16]
    assert (cuda._HandleDesc.handle.offset, cuda._HandleDesc.size.offset, cuda._HandleDesc.flags.offset) == (8, 24, 32)
    assert ctypes.sizeof(cuda._BufferDesc) == 88 and cuda._BufferDesc.flags.offset == 16


@pytest.mark.skipif(ctypes.util.find_library("cuda") is not None, reason="this machine has libcuda")
def test_without_the_nvidia_driver_the_error_says_what_is_missing(exported, monkeypatch):
    monkeypatch.setattr(cuda_driver, "_loaded", None)
    with pytest.raises(DyLibNotFoundError, match="libcuda.so.1.*NVIDIA GPU and its driver"):
        cuda.import_to_cuda(exported)
    exported.pool.release(exported.buffer)
    assert not exported.pool.is_live(exported.buffer)  # the failed import held no reference


def test_a_mapping_holds_the_buffer_and_unmaps_when_its_last_array_goes(exported, stand_in):
    pool = exported.pool
    mapped = cuda.import_to_cuda(exported)
    desc = stand_in.desc
    assert desc["type"] == cuda.CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD and desc["size"] == exported.size
    assert desc["flags"] == cuda.CUDA_EXTERNAL_MEMORY_DEDICATED and desc["mapped"] == (0, exported.nbytes)
    assert desc["open"] and desc["fd"] != exported.fd and desc["context"] == [0xC0]  # a duplicate, in the context
    assert (mapped.ptr, mapped.nbytes, mapped.device) == (MAPPED_AT, 4096, 1) and stand_in.stack == []
    pool.release(exported.buffer)
    exported.close()
    assert pool.is_live(exported.buffer)  # the mapping's reference keeps it
    array = mapped.array(np.float32, (2, 512))
    assert array.__cuda_array_interface__ == {
        "shape": (2, 512),
        "typestr": "<f4",
        "data": (MAPPED_AT, False),
        "strides": None,
        "version": 3,
    }
    assert mapped.array("uint8").__cuda_array_interface__["shape"] == (4096,)
    del mapped
    gc.collect()
    assert stand_in.mappings and pool.is_live(exported.buffer)  # the array holds the mapping
    del array
    gc.collect()
    assert not stand_in.mappings and not stand_in.imports and stand_in.contexts == 0 and stand_in.stack == []
    assert not pool.is_live(exported.buffer)


def test_close_unmaps_at_once(exported, stand_in):
    mapped = cuda.import_to_cuda(exported)
    mapped.close()
    mapped.close()
    assert not stand_in.imports and stand_in.contexts == 0
    with pytest.raises(InvalidArgumentError, match="closed"):
        mapped.array()


def test_a_failed_import_closes_the_duplicate_and_holds_nothing(exported, stand_in):
    stand_in.fail = "cuImportExternalMemory"
    with pytest.raises(InitializationError, match="cuImportExternalMemory failed with CUDA_ERROR_STAND_IN"):
        cuda.import_to_cuda(exported)
    assert not os.path.exists(f"/proc/self/fd/{stand_in.desc['fd']}")  # the duplicate, closed again
    assert stand_in.contexts == 0 and stand_in.stack == []
    exported.pool.release(exported.buffer)
    assert not exported.pool.is_live(exported.buffer)


def test_a_gpu_cuda_does_not_see_is_refused(exported, monkeypatch):
    monkeypatch.setattr(cuda_driver, "_loaded", cuda_driver.CudaDriver(FakeLibcuda(bytes(16))))
    with pytest.raises(InvalidArgumentError, match="no CUDA device is the Vulkan device.*CUDA_VISIBLE_DEVICES"):
        cuda.import_to_cuda(exported)


def test_views_are_checked(exported, stand_in):
    mapped = cuda.import_to_cuda(exported)
    with pytest.raises(InvalidArgumentError, match="does not fit"):
        mapped.array(np.float64, 513)
    with pytest.raises(InvalidArgumentError, match="does not fit"):
        mapped.array(np.int8, (-1,))
    with pytest.raises(InvalidArgumentTypeError, match="not a plain number type"):
        mapped.array(object)
    with pytest.raises(InvalidArgumentTypeError):
        cuda.import_to_cuda(exported.buffer)  # type: ignore[arg-type]
    mapped.close()


def test_the_gpu_checks_vulkan_half_runs_here(device, exported):
    """scripts/cuda-interop-check.py's kernels on lavapipe (its PyTorch half needs CUDA), over two grid rows."""
    spec = importlib.util.spec_from_file_location("cuda_interop_check", REPO / "scripts" / "cuda-interop-check.py")
    assert spec is not None and spec.loader is not None
    check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check)
    n = check.LOCAL * check.GROUPS_X + 77
    with device.memory_pool.allocate_exportable(4 * n) as big:
        check.vulkan_fill(device, big.buffer, n, 3)
        assert check.vulkan_mismatches(device, big.buffer, n, 3) == 0
        assert check.vulkan_mismatches(device, big.buffer, n, 1) == n - 1  # all but x[0]
        device.memory_pool.release(big.buffer)


def test_an_nvidia_device_holds_the_cuda_context_of_its_gpu_until_released(monkeypatch):
    fake = FakeLibcuda(bytes(range(100, 116)))
    monkeypatch.setattr(cuda_driver, "_loaded", cuda_driver.CudaDriver(fake))
    held = hold_compute_clocks(NVIDIA_VENDOR_ID, fake.uuid)
    assert held is not None and held.ordinal == 1 and fake.contexts == 1
    held.release()
    held.release()  # once only
    assert fake.contexts == 0


def test_clocks_hold_nothing_for_another_vendor_or_a_gpu_cuda_does_not_see(monkeypatch):
    fake = FakeLibcuda(bytes(range(100, 116)))
    monkeypatch.setattr(cuda_driver, "_loaded", cuda_driver.CudaDriver(fake))
    assert hold_compute_clocks(0x1002, fake.uuid) is None
    assert hold_compute_clocks(NVIDIA_VENDOR_ID, bytes(16)) is None
    assert fake.contexts == 0


@pytest.mark.skipif(ctypes.util.find_library("cuda") is not None, reason="this machine has libcuda")
def test_clocks_hold_nothing_without_the_nvidia_driver(monkeypatch):
    monkeypatch.setattr(cuda_driver, "_loaded", None)
    assert hold_compute_clocks(NVIDIA_VENDOR_ID, bytes(16)) is None


def test_the_clocks_switch_is_checked():
    with pytest.raises(InvalidArgumentError, match="cuda_clocks"):
        VulkanConfig(cuda_clocks="yes")
    assert VulkanConfig(cuda_clocks=False).resolved_cuda_clocks() is False
