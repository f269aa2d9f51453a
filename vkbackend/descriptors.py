"""DescriptorSets: without VK_KHR_push_descriptor, one descriptor set per dispatch, from pools that grow.

A batch takes the sets of its window's dispatches from pools it holds until its fence signals; then the pools are
reset and kept for reuse. A window with more dispatches than a pool has sets takes them from as many pools as it needs
(no allocation asks a pool for more sets than it has left); a pool that runs out is kept too, and the next one made
is twice as large, so nothing has a fixed capacity. Used by the submitter on the worker only.
"""

from __future__ import annotations

from .errors import ErrorStatus, check, vk_error
from .structs import new_struct

__all__ = ["DescriptorSets"]


class DescriptorSets:
    """The descriptor pools of one device."""

    def __init__(self, ctx) -> None:
        self.ctx = ctx
        self._spare: list[tuple[object, int]] = []  # (pool, sets it holds), reset, smallest first
        self._pool_sets = 1024  # the size of the next pool made
        self._allocate_info = new_struct("VkDescriptorSetAllocateInfo")  # made once: allocate runs per batch

    def allocate(self, layouts, count: int, held: list):
        """``VkDescriptorSet[count]`` for the set layouts ``layouts[0:count]``, from pools appended to ``held`` (the
        batch's, given back with :meth:`recycle`).

        Each call to vkAllocateDescriptorSets asks for at most the sets its pool has left, so a window with more
        dispatches than one pool holds takes them from several pools."""
        ffi, lib, ctx = self.ctx.ffi, self.ctx.lib, self.ctx
        sets = ffi.new("VkDescriptorSet[]", count)
        info = self._allocate_info
        done = failed = 0
        while done < count:
            if not held or held[-1][2] == 0:
                if held:  # a pool ran out within a window: the next one made is twice as large
                    self._pool_sets *= 2
                self._pool(held)
            entry = held[-1]
            n = min(count - done, entry[2])
            info.descriptorPool, info.descriptorSetCount, info.pSetLayouts = entry[0], n, layouts + done
            result = lib.vkAllocateDescriptorSets(ctx.device, info, sets + done)
            if result == 0:
                done += n
                entry[2] -= n
                failed = 0
                continue
            # Out of pool memory although it has sets left (a driver may count more finely): the pool is done, and the
            # next one is taken. A second failure in a row, on a fresh pool, is a real error.
            failed += 1
            if failed > 1:
                check(result, "vkAllocateDescriptorSets", ErrorStatus.MemoryAllocation)
            entry[2] = 0
        return sets

    def _pool(self, held: list):
        """A pool for at least the current pool size: a reset spare one, else a new one; appended to ``held`` as
        ``[pool, sets it holds, sets it has left]``."""
        ffi, lib, ctx = self.ctx.ffi, self.ctx.lib, self.ctx
        n = self._pool_sets
        fitting = [i for i, (_, sets) in enumerate(self._spare) if sets >= n]
        if fitting:
            pool, n = self._spare.pop(fitting[0])
        else:
            info = new_struct(
                "VkDescriptorPoolCreateInfo",
                maxSets=n,
                poolSizeCount=1,
                pPoolSizes={
                    "type": lib.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                    "descriptorCount": n * ctx.info.max_storage_buffers,
                },
            )
            out = ffi.new("VkDescriptorPool*")
            check(
                lib.vkCreateDescriptorPool(ctx.device, info, ffi.NULL, out),
                "vkCreateDescriptorPool",
                ErrorStatus.MemoryAllocation,
            )
            pool = out[0]
        held.append([pool, n, n])
        return pool

    def recycle(self, held: list) -> None:
        """Reset a completed (or never submitted) batch's pools and keep them for reuse; empties ``held``. A pool that
        cannot be reset is destroyed instead, and the failure kept for the next sync point (the batch's completions
        must run whatever happens here)."""
        ffi, lib, dev = self.ctx.ffi, self.ctx.lib, self.ctx.device
        for pool, n, _ in held:
            result = lib.vkResetDescriptorPool(dev, pool, 0)
            if result == 0:
                self._spare.append((pool, n))
            else:
                self.ctx.fail(vk_error(result, "vkResetDescriptorPool", ErrorStatus.KernelSync))
                lib.vkDestroyDescriptorPool(dev, pool, ffi.NULL)
        self._spare.sort(key=lambda p: p[1])
        held.clear()

    def destroy(self, batches_held: list[list]) -> None:
        """Destroy the spare pools and those the batches still hold (the device is idle)."""
        ffi, lib, dev = self.ctx.ffi, self.ctx.lib, self.ctx.device
        for held in [self._spare, *batches_held]:
            for pool, *_ in held:
                lib.vkDestroyDescriptorPool(dev, pool, ffi.NULL)
            held.clear()
