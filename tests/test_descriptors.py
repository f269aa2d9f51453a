"""Descriptor sets without VK_KHR_push_descriptor (vkbackend/descriptors.py): a window with more dispatches than one
pool has sets takes them from several pools, and no vkAllocateDescriptorSets call asks a pool for more sets than it
has left (the validation layer of 1.4 reports that; the one of Debian 12 does not, hence the model of the driver
below as well as the run on the device)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from _reliability import run_isolated, spin_grids

from vkbackend._ffi import vulkan
from vkbackend.descriptors import DescriptorSets
from vkbackend.errors import BackendError, ErrorStatus

OUT_OF_POOL_MEMORY = -1000069000


class PoolModel:
    """The descriptor-pool calls of a driver that keeps count of each pool's sets, and of every allocation asked."""

    def __init__(self, ffi, lib) -> None:
        self._ffi, self._lib = ffi, lib
        self.pools: dict[int, list[int]] = {}  # handle -> [maxSets, sets allocated]
        self.asked: list[tuple[int, int, int]] = []  # (pool, sets asked, sets it had left)
        self.fail: list[int] = []  # results to return from the next allocations

    def __getattr__(self, name: str):
        return getattr(self._lib, name)

    def _key(self, pool) -> int:
        return int(self._ffi.cast("uintptr_t", pool))

    def vkCreateDescriptorPool(self, device, info, allocator, out) -> int:
        handle = len(self.pools) + 1
        self.pools[handle] = [info.maxSets, 0]
        out[0] = self._ffi.cast("VkDescriptorPool", handle)
        return 0

    def vkAllocateDescriptorSets(self, device, info, out) -> int:
        key = self._key(info.descriptorPool)
        sets, used = self.pools[key]
        self.asked.append((key, info.descriptorSetCount, sets - used))
        if self.fail:
            return self.fail.pop(0)
        if info.descriptorSetCount > sets - used:
            return OUT_OF_POOL_MEMORY
        self.pools[key][1] += info.descriptorSetCount
        return 0

    def vkResetDescriptorPool(self, device, pool, flags) -> int:
        self.pools[self._key(pool)][1] = 0
        return 0

    def vkDestroyDescriptorPool(self, device, pool, allocator) -> None:
        del self.pools[self._key(pool)]


@pytest.fixture
def model():
    ffi, lib = vulkan()
    driver = PoolModel(ffi, lib)
    ctx = SimpleNamespace(
        ffi=ffi, lib=driver, device=ffi.NULL, info=SimpleNamespace(max_storage_buffers=8), fail=lambda error: None
    )
    return driver, DescriptorSets(ctx), ffi


def test_a_window_larger_than_a_pool_takes_sets_from_several(model):
    driver, sets, ffi = model
    held: list = []
    sets.allocate(ffi.new("VkDescriptorSetLayout[]", 3504), 3504, held)
    assert all(asked <= left for _, asked, left in driver.asked), driver.asked
    assert sum(asked for _, asked, _ in driver.asked) == 3504
    assert [n for _, n, _ in held] == [1024, 2048, 4096]  # each pool that ran out made the next one twice as large
    sets.recycle(held)
    sets.allocate(ffi.new("VkDescriptorSetLayout[]", 3504), 3504, held)  # the next window fits the largest one
    assert len(held) == 1 and all(asked <= left for _, asked, left in driver.asked)
    sets.recycle(held)
    sets.destroy([])
    assert driver.pools == {}


def test_a_pool_out_of_memory_is_left_for_the_next_and_a_second_failure_raises(model):
    driver, sets, ffi = model
    held: list = []
    driver.fail = [OUT_OF_POOL_MEMORY]
    sets.allocate(ffi.new("VkDescriptorSetLayout[]", 10), 10, held)
    assert len(held) == 2 and held[1][2] == held[1][1] - 10
    driver.fail = [OUT_OF_POOL_MEMORY, OUT_OF_POOL_MEMORY]
    with pytest.raises(BackendError) as info:
        sets.allocate(ffi.new("VkDescriptorSetLayout[]", 10), 10, held)
    assert info.value.status is ErrorStatus.MemoryAllocation
    sets.destroy([held])


def test_a_window_of_more_dispatches_than_a_pool_holds_runs(device):
    """Two kernels of about 2 s keep the GPU busy, so the worker holds back (two batches in flight) while 3,000
    launches queue: they go into one window, with more dispatches than the first pool has sets, and all run."""
    r = run_isolated("descriptors_big_window", timeout=120, env={"SPIN_GRIDS": json.dumps(spin_grids(device, 2))})
    assert r["push"] is False
    assert r["largest_window"] > 1024, r  # the first pool's sets
    assert r["exact"] and r["close"] == "ok"
    assert r["validation"] == ""
