/* Fences, timestamp queries, calibrated timestamps (tracing). */
#define VK_STRUCTURE_TYPE_FENCE_CREATE_INFO ...
#define VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO ...
#define VK_QUERY_TYPE_TIMESTAMP ...
#define VK_QUERY_RESULT_64_BIT ...
#define VK_QUERY_RESULT_WAIT_BIT ...
#define VK_STRUCTURE_TYPE_CALIBRATED_TIMESTAMP_INFO_EXT ...
#define VK_TIME_DOMAIN_DEVICE_EXT ...
#define VK_TIME_DOMAIN_CLOCK_MONOTONIC_EXT ...

typedef struct { VkStructureType sType; const void *pNext; VkFlags flags; } VkFenceCreateInfo;
typedef struct {
    VkStructureType sType; const void *pNext; VkFlags flags; VkQueryType queryType; uint32_t queryCount; VkFlags pipelineStatistics;
} VkQueryPoolCreateInfo;
typedef struct { VkStructureType sType; const void *pNext; VkTimeDomainEXT timeDomain; } VkCalibratedTimestampInfoEXT;

VkResult vkCreateFence(VkDevice device, const VkFenceCreateInfo *pCreateInfo, const VkAllocationCallbacks *pAllocator, VkFence *pFence);
void vkDestroyFence(VkDevice device, VkFence fence, const VkAllocationCallbacks *pAllocator);
VkResult vkResetFences(VkDevice device, uint32_t fenceCount, const VkFence *pFences);
VkResult vkWaitForFences(VkDevice device, uint32_t fenceCount, const VkFence *pFences, VkBool32 waitAll, uint64_t timeout);
VkResult vkGetFenceStatus(VkDevice device, VkFence fence);
VkResult vkQueueWaitIdle(VkQueue queue);
VkResult vkCreateQueryPool(VkDevice device, const VkQueryPoolCreateInfo *pCreateInfo, const VkAllocationCallbacks *pAllocator, VkQueryPool *pQueryPool);
void vkDestroyQueryPool(VkDevice device, VkQueryPool queryPool, const VkAllocationCallbacks *pAllocator);
VkResult vkGetQueryPoolResults(VkDevice device, VkQueryPool queryPool, uint32_t firstQuery, uint32_t queryCount, size_t dataSize, void *pData, VkDeviceSize stride, VkFlags flags);
void vkCmdResetQueryPool(VkCommandBuffer commandBuffer, VkQueryPool queryPool, uint32_t firstQuery, uint32_t queryCount);
void vkCmdWriteTimestamp(VkCommandBuffer commandBuffer, VkFlags pipelineStage, VkQueryPool queryPool, uint32_t query);
VkResult vkGetPhysicalDeviceCalibrateableTimeDomainsEXT(VkPhysicalDevice physicalDevice, uint32_t *pTimeDomainCount, VkTimeDomainEXT *pTimeDomains);
VkResult vkGetCalibratedTimestampsEXT(VkDevice device, uint32_t timestampCount, const VkCalibratedTimestampInfoEXT *pTimestampInfos, uint64_t *pTimestamps, uint64_t *pMaxDeviation);
