"""DescriptorSets: without VK_KHR_push_descriptor, one descriptor set per dispatch, from pools that grow.

A batch takes the sets of its window's dispatches from pools it holds until its fence signals; then the pools are
reset and kept for reuse. A pool too small for a window is kept too, and the next one made is twice as large, so
nothing has a fixed capacity. Used by the submitter on the worker only.
"""
from __future__ import annotations

from .errors import ErrorStatus, check, vk_error

__all__ = ["DescriptorSets"]


class DescriptorSets:
    """The descriptor pools of one device."""

    def __init__(self, ctx) -> None:
        self.ctx = ctx
        self._spare: list[tuple[object, int]] = []   # (pool, sets it holds), reset, smallest first
        self._pool_sets = 1024                        # the size of the next pool made

    def allocate(self, layouts, count: int, held: list):
        """``VkDescriptorSet[count]`` for the set layouts ``layouts[0:count]``, from pools appended to ``held`` (the
        batch's, given back with :meth:`recycle`)."""
        ffi, lib, ctx = self.ctx.ffi, self.ctx.lib, self.ctx
        sets = ffi.new("VkDescriptorSet[]", count)
        done = 0
        while done < count:
            pool = held[-1][0] if held else self._pool(held)
            n = count - done
            info = ffi.new("VkDescriptorSetAllocateInfo*", {
                "sType": lib.VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO, "descriptorPool": pool,
                "descriptorSetCount": n, "pSetLayouts": layouts + done})
            if lib.vkAllocateDescriptorSets(ctx.device, info, sets + done) == 0:
                done += n
                continue
            # The pool is too small for all at once (out of pool memory): take what fits one by one, then grow.
            info.descriptorSetCount = 1
            while done < count:
                info.pSetLayouts = layouts + done
                if lib.vkAllocateDescriptorSets(ctx.device, info, sets + done) != 0:
                    break
                done += 1
            if done < count:
                self._pool_sets *= 2
                self._pool(held)
        return sets

    def _pool(self, held: list):
        """A pool for at least the current pool size: a reset spare one, else a new one; appended to ``held``."""
        ffi, lib, ctx = self.ctx.ffi, self.ctx.lib, self.ctx
        n = self._pool_sets
        fitting = [i for i, (_, sets) in enumerate(self._spare) if sets >= n]
        if fitting:
            pool, n = self._spare.pop(fitting[0])
        else:
            size = ffi.new("VkDescriptorPoolSize*", {"type": lib.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                                     "descriptorCount": n * ctx.info.max_storage_buffers})
            info = ffi.new("VkDescriptorPoolCreateInfo*", {"sType": lib.VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
                                                           "maxSets": n, "poolSizeCount": 1, "pPoolSizes": size})
            out = ffi.new("VkDescriptorPool*")
            check(lib.vkCreateDescriptorPool(ctx.device, info, ffi.NULL, out), "vkCreateDescriptorPool",
                  ErrorStatus.MemoryAllocation)
            pool = out[0]
        held.append((pool, n))
        return pool

    def recycle(self, held: list) -> None:
        """Reset a completed (or never submitted) batch's pools and keep them for reuse; empties ``held``. A pool that
        cannot be reset is destroyed instead, and the failure kept for the next sync point (the batch's completions
        must run whatever happens here)."""
        ffi, lib, dev = self.ctx.ffi, self.ctx.lib, self.ctx.device
        for pool, n in held:
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
            for pool, _ in held:
                lib.vkDestroyDescriptorPool(dev, pool, ffi.NULL)
            held.clear()
