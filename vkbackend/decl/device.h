/* Logical device creation: the features we query and enable, queues. */
#define VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO ...
#define VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO ...
#define VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2 ...
#define VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES ...
#define VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES ...
#define VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ROBUSTNESS_2_FEATURES_EXT ...
#define VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_ROBUSTNESS_FEATURES_EXT ...
#define VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR ...
#define VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_BFLOAT16_FEATURES_KHR ...
#define VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR ...

typedef struct {
    VkBool32 robustBufferAccess;
    VkBool32 shaderFloat64;
    VkBool32 shaderInt64;
    VkBool32 shaderInt16;
    VkBool32 sparseBinding;
    ...;
} VkPhysicalDeviceFeatures;
typedef struct { VkStructureType sType; void *pNext; VkPhysicalDeviceFeatures features; } VkPhysicalDeviceFeatures2;
typedef struct {
    VkStructureType sType; void *pNext;
    VkBool32 storageBuffer16BitAccess; VkBool32 uniformAndStorageBuffer16BitAccess; VkBool32 storagePushConstant16;
    ...;
} VkPhysicalDeviceVulkan11Features;
typedef struct {
    VkStructureType sType; void *pNext;
    VkBool32 storageBuffer8BitAccess; VkBool32 uniformAndStorageBuffer8BitAccess; VkBool32 storagePushConstant8;
    VkBool32 shaderBufferInt64Atomics; VkBool32 shaderSharedInt64Atomics;
    VkBool32 shaderFloat16; VkBool32 shaderInt8;
    VkBool32 timelineSemaphore; VkBool32 vulkanMemoryModel; VkBool32 vulkanMemoryModelDeviceScope;
    VkBool32 bufferDeviceAddress; VkBool32 hostQueryReset;
    ...;
} VkPhysicalDeviceVulkan12Features;

/* VK_EXT_robustness2: out-of-bounds accesses checked against the descriptor's range, not the whole VkBuffer, which
 * matters because small buffers are ranges of one shared VkBuffer. */
typedef struct {
    VkStructureType sType; void *pNext; VkBool32 robustBufferAccess2; VkBool32 robustImageAccess2; VkBool32 nullDescriptor;
} VkPhysicalDeviceRobustness2FeaturesEXT;

/* VK_EXT_pipeline_robustness: robustness chosen per pipeline, so kernels whose bounds are proven (tinygrad's) can run
 * without the checks while every other kernel keeps them. */
typedef struct { VkStructureType sType; void *pNext; VkBool32 pipelineRobustness; } VkPhysicalDevicePipelineRobustnessFeaturesEXT;

/* VK_KHR_cooperative_matrix and VK_KHR_shader_bfloat16 (csrc/vk_compat.h where the installed header lacks them):
 * matrix products across a subgroup (tinygrad's tensor cores), and bfloat16 as a shader type. */
typedef struct {
    VkStructureType sType; void *pNext; VkBool32 cooperativeMatrix; VkBool32 cooperativeMatrixRobustBufferAccess;
} VkPhysicalDeviceCooperativeMatrixFeaturesKHR;
typedef struct {
    VkStructureType sType; void *pNext;
    VkBool32 shaderBFloat16Type; VkBool32 shaderBFloat16DotProduct; VkBool32 shaderBFloat16CooperativeMatrix;
} VkPhysicalDeviceShaderBfloat16FeaturesKHR;

/* VK_KHR_pipeline_executable_properties: what the driver's compiler made of a pipeline (registers, spills, ...), for
 * Device.pipeline_statistics; enabled only where asked for (VulkanConfig.pipeline_statistics). */
typedef struct {
    VkStructureType sType; void *pNext; VkBool32 pipelineExecutableInfo;
} VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR;

typedef struct {
    VkStructureType sType; const void *pNext; VkFlags flags; uint32_t queueFamilyIndex; uint32_t queueCount;
    const float *pQueuePriorities;
} VkDeviceQueueCreateInfo;
typedef struct {
    VkStructureType sType; const void *pNext; VkFlags flags;
    uint32_t queueCreateInfoCount; const VkDeviceQueueCreateInfo *pQueueCreateInfos;
    uint32_t enabledLayerCount; const char *const *ppEnabledLayerNames;
    uint32_t enabledExtensionCount; const char *const *ppEnabledExtensionNames;
    const VkPhysicalDeviceFeatures *pEnabledFeatures;
} VkDeviceCreateInfo;

void vkGetPhysicalDeviceFeatures2(VkPhysicalDevice physicalDevice, VkPhysicalDeviceFeatures2 *pFeatures);
VkResult vkCreateDevice(VkPhysicalDevice physicalDevice, const VkDeviceCreateInfo *pCreateInfo, const VkAllocationCallbacks *pAllocator, VkDevice *pDevice);
void vkDestroyDevice(VkDevice device, const VkAllocationCallbacks *pAllocator);
void vkGetDeviceQueue(VkDevice device, uint32_t queueFamilyIndex, uint32_t queueIndex, VkQueue *pQueue);
VkResult vkDeviceWaitIdle(VkDevice device);
