/* Base types: scalars, handles and the enums we use as plain integers.
 * Joined first by build_vulkan.py. Enum types are `int...` so the compiler picks the real width; their values come
 * from the real header through `#define NAME ...`. VkResult and its codes are generated from the header itself. */
typedef uint32_t VkFlags;
typedef uint32_t VkBool32;
typedef uint64_t VkDeviceSize;
typedef uint64_t VkDeviceAddress;
typedef int... VkStructureType;
typedef int... VkPhysicalDeviceType;
typedef int... VkSharingMode;
typedef int... VkDescriptorType;
typedef int... VkPipelineBindPoint;
typedef int... VkCommandBufferLevel;
typedef int... VkQueryType;
typedef int... VkTimeDomainEXT;
typedef int... VkShaderStageFlagBits;
typedef int... VkDebugUtilsMessageSeverityFlagBitsEXT;
typedef int... VkComponentTypeKHR;   /* VK_KHR_cooperative_matrix: csrc/vk_compat.h where the header lacks it */
typedef int... VkScopeKHR;

/* Dispatchable handles. */
typedef struct VkInstance_T *VkInstance;
typedef struct VkPhysicalDevice_T *VkPhysicalDevice;
typedef struct VkDevice_T *VkDevice;
typedef struct VkQueue_T *VkQueue;
typedef struct VkCommandBuffer_T *VkCommandBuffer;
/* Non-dispatchable handles (pointers on 64-bit platforms, which is all we build for). */
typedef struct VkBuffer_T *VkBuffer;
typedef struct VkBufferView_T *VkBufferView;
typedef struct VkDeviceMemory_T *VkDeviceMemory;
typedef struct VkFence_T *VkFence;
typedef struct VkSemaphore_T *VkSemaphore;
typedef struct VkSampler_T *VkSampler;
typedef struct VkShaderModule_T *VkShaderModule;
typedef struct VkPipeline_T *VkPipeline;
typedef struct VkPipelineLayout_T *VkPipelineLayout;
typedef struct VkPipelineCache_T *VkPipelineCache;
typedef struct VkDescriptorSetLayout_T *VkDescriptorSetLayout;
typedef struct VkDescriptorPool_T *VkDescriptorPool;
typedef struct VkDescriptorSet_T *VkDescriptorSet;
typedef struct VkCommandPool_T *VkCommandPool;
typedef struct VkQueryPool_T *VkQueryPool;
typedef struct VkDebugUtilsMessengerEXT_T *VkDebugUtilsMessengerEXT;

typedef struct VkAllocationCallbacks VkAllocationCallbacks;  /* always NULL: the driver's own allocator */

#define VK_HEADER_VERSION ...
#define VK_API_VERSION_1_2 ...
#define VK_API_VERSION_1_3 ...
#define VK_TRUE ...
#define VK_FALSE ...
