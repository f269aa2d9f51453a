/* Instance creation, layers and extensions, physical-device enumeration and queries. */
#define VK_STRUCTURE_TYPE_APPLICATION_INFO ...
#define VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO ...
#define VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2 ...
#define VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_PROPERTIES ...
#define VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_PROPERTIES ...
#define VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PUSH_DESCRIPTOR_PROPERTIES_KHR ...
#define VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2 ...
#define VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT ...
#define VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR ...
#define VK_PHYSICAL_DEVICE_TYPE_OTHER ...
#define VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU ...
#define VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU ...
#define VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU ...
#define VK_PHYSICAL_DEVICE_TYPE_CPU ...
#define VK_QUEUE_COMPUTE_BIT ...
#define VK_QUEUE_SPARSE_BINDING_BIT ...
#define VK_MEMORY_HEAP_DEVICE_LOCAL_BIT ...
#define VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES ...

typedef struct {
    VkStructureType sType; const void *pNext; const char *pApplicationName; uint32_t applicationVersion;
    const char *pEngineName; uint32_t engineVersion; uint32_t apiVersion;
} VkApplicationInfo;
typedef struct {
    VkStructureType sType; const void *pNext; VkFlags flags; const VkApplicationInfo *pApplicationInfo;
    uint32_t enabledLayerCount; const char *const *ppEnabledLayerNames;
    uint32_t enabledExtensionCount; const char *const *ppEnabledExtensionNames;
} VkInstanceCreateInfo;
typedef struct { char extensionName[...]; uint32_t specVersion; } VkExtensionProperties;
typedef struct { char layerName[...]; uint32_t specVersion; uint32_t implementationVersion; char description[...]; } VkLayerProperties;

typedef struct {
    uint32_t maxMemoryAllocationCount;
    uint32_t maxStorageBufferRange;
    uint32_t maxPushConstantsSize;
    uint32_t maxPerStageDescriptorStorageBuffers;
    uint32_t maxComputeSharedMemorySize;
    uint32_t maxComputeWorkGroupCount[3];
    uint32_t maxComputeWorkGroupInvocations;
    uint32_t maxComputeWorkGroupSize[3];
    VkDeviceSize minStorageBufferOffsetAlignment;
    VkDeviceSize nonCoherentAtomSize;
    float timestampPeriod;
    VkBool32 timestampComputeAndGraphics;
    VkDeviceSize sparseAddressSpaceSize;
    ...;
} VkPhysicalDeviceLimits;
typedef struct {
    uint32_t apiVersion; uint32_t driverVersion; uint32_t vendorID; uint32_t deviceID;
    VkPhysicalDeviceType deviceType; char deviceName[...]; uint8_t pipelineCacheUUID[...];
    VkPhysicalDeviceLimits limits;
    ...;
} VkPhysicalDeviceProperties;
typedef struct { VkStructureType sType; void *pNext; VkPhysicalDeviceProperties properties; } VkPhysicalDeviceProperties2;
typedef struct {
    VkStructureType sType; void *pNext; uint8_t deviceUUID[16]; uint32_t subgroupSize; VkFlags subgroupSupportedStages;
    VkFlags subgroupSupportedOperations; VkDeviceSize maxMemoryAllocationSize; ...;
} VkPhysicalDeviceVulkan11Properties;
/* Float controls: whether kernels may ask for IEEE infinities, NaNs and signed zeros to be kept (SPIR-V's
 * SignedZeroInfNanPreserve), which a driver's default optimisations may drop. */
typedef struct {
    VkStructureType sType; void *pNext;
    char driverName[...]; char driverInfo[...];   /* the driver's own name and version text, e.g. "Mesa 22.3.6" */
    VkBool32 shaderSignedZeroInfNanPreserveFloat16; VkBool32 shaderSignedZeroInfNanPreserveFloat32;
    VkBool32 shaderSignedZeroInfNanPreserveFloat64;
    ...;
} VkPhysicalDeviceVulkan12Properties;
typedef struct { VkStructureType sType; void *pNext; uint32_t maxPushDescriptors; } VkPhysicalDevicePushDescriptorPropertiesKHR;
typedef struct {
    VkStructureType sType; void *pNext; uint32_t minSubgroupSize; uint32_t maxSubgroupSize; ...;
} VkPhysicalDeviceVulkan13Properties;

typedef struct { VkFlags propertyFlags; uint32_t heapIndex; } VkMemoryType;
typedef struct { VkDeviceSize size; VkFlags flags; } VkMemoryHeap;
typedef struct {
    uint32_t memoryTypeCount; VkMemoryType memoryTypes[...];
    uint32_t memoryHeapCount; VkMemoryHeap memoryHeaps[...];
} VkPhysicalDeviceMemoryProperties;
typedef struct { VkStructureType sType; void *pNext; VkPhysicalDeviceMemoryProperties memoryProperties; } VkPhysicalDeviceMemoryProperties2;
typedef struct {
    VkStructureType sType; void *pNext; VkDeviceSize heapBudget[...]; VkDeviceSize heapUsage[...];
} VkPhysicalDeviceMemoryBudgetPropertiesEXT;
typedef struct { uint32_t width; uint32_t height; uint32_t depth; } VkExtent3D;
typedef struct {
    VkFlags queueFlags; uint32_t queueCount; uint32_t timestampValidBits; VkExtent3D minImageTransferGranularity;
} VkQueueFamilyProperties;

VkResult vkEnumerateInstanceVersion(uint32_t *pApiVersion);
VkResult vkEnumerateInstanceLayerProperties(uint32_t *pPropertyCount, VkLayerProperties *pProperties);
VkResult vkCreateInstance(const VkInstanceCreateInfo *pCreateInfo, const VkAllocationCallbacks *pAllocator, VkInstance *pInstance);
void vkDestroyInstance(VkInstance instance, const VkAllocationCallbacks *pAllocator);
VkResult vkEnumeratePhysicalDevices(VkInstance instance, uint32_t *pPhysicalDeviceCount, VkPhysicalDevice *pPhysicalDevices);
void vkGetPhysicalDeviceProperties2(VkPhysicalDevice physicalDevice, VkPhysicalDeviceProperties2 *pProperties);
void vkGetPhysicalDeviceMemoryProperties2(VkPhysicalDevice physicalDevice, VkPhysicalDeviceMemoryProperties2 *pMemoryProperties);
void vkGetPhysicalDeviceQueueFamilyProperties(VkPhysicalDevice physicalDevice, uint32_t *pQueueFamilyPropertyCount, VkQueueFamilyProperties *pQueueFamilyProperties);
VkResult vkEnumerateDeviceExtensionProperties(VkPhysicalDevice physicalDevice, const char *pLayerName, uint32_t *pPropertyCount, VkExtensionProperties *pProperties);

/* VK_KHR_cooperative_matrix: the matrix products a device's cooperative matrices compute (csrc/vk_compat.h defines
 * these where the installed header lacks the extension, and VK_KHR_shader_bfloat16's component type). */
#define VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR ...
#define VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_PROPERTIES_KHR ...
#define VK_COMPONENT_TYPE_FLOAT16_KHR ...
#define VK_COMPONENT_TYPE_FLOAT32_KHR ...
#define VK_COMPONENT_TYPE_FLOAT64_KHR ...
#define VK_COMPONENT_TYPE_SINT8_KHR ...
#define VK_COMPONENT_TYPE_SINT16_KHR ...
#define VK_COMPONENT_TYPE_SINT32_KHR ...
#define VK_COMPONENT_TYPE_SINT64_KHR ...
#define VK_COMPONENT_TYPE_UINT8_KHR ...
#define VK_COMPONENT_TYPE_UINT16_KHR ...
#define VK_COMPONENT_TYPE_UINT32_KHR ...
#define VK_COMPONENT_TYPE_UINT64_KHR ...
#define VK_COMPONENT_TYPE_BFLOAT16_KHR ...
#define VK_SCOPE_DEVICE_KHR ...
#define VK_SCOPE_WORKGROUP_KHR ...
#define VK_SCOPE_SUBGROUP_KHR ...
#define VK_SCOPE_QUEUE_FAMILY_KHR ...
typedef struct {
    VkStructureType sType; void *pNext; uint32_t MSize; uint32_t NSize; uint32_t KSize;
    VkComponentTypeKHR AType; VkComponentTypeKHR BType; VkComponentTypeKHR CType; VkComponentTypeKHR ResultType;
    VkBool32 saturatingAccumulation; VkScopeKHR scope;
} VkCooperativeMatrixPropertiesKHR;
typedef struct { VkStructureType sType; void *pNext; VkFlags cooperativeMatrixSupportedStages; } VkPhysicalDeviceCooperativeMatrixPropertiesKHR;

VkResult vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR(VkPhysicalDevice physicalDevice, uint32_t *pPropertyCount, VkCooperativeMatrixPropertiesKHR *pProperties);
