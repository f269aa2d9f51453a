/* Shader modules, descriptor and pipeline layouts, compute pipelines and the pipeline cache; descriptor pools for
 * devices without VK_KHR_push_descriptor; what a pipeline's executables report (VK_KHR_pipeline_executable_properties). */
#define VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO ...
#define VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO ...
#define VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO ...
#define VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO ...
#define VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO ...
#define VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO ...
#define VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO ...
#define VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO ...
#define VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET ...
#define VK_SHADER_STAGE_COMPUTE_BIT ...
#define VK_DESCRIPTOR_TYPE_STORAGE_BUFFER ...
#define VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR ...
#define VK_PIPELINE_BIND_POINT_COMPUTE ...
#define VK_STRUCTURE_TYPE_PIPELINE_ROBUSTNESS_CREATE_INFO_EXT ...
#define VK_PIPELINE_ROBUSTNESS_BUFFER_BEHAVIOR_DEVICE_DEFAULT_EXT ...
#define VK_PIPELINE_ROBUSTNESS_BUFFER_BEHAVIOR_DISABLED_EXT ...
#define VK_PIPELINE_ROBUSTNESS_IMAGE_BEHAVIOR_DEVICE_DEFAULT_EXT ...
#define VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR ...
#define VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR ...
#define VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_PROPERTIES_KHR ...
#define VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR ...
#define VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR ...
#define VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR ...
#define VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR ...
#define VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR ...
#define VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_FLOAT64_KHR ...

typedef struct VkSpecializationInfo VkSpecializationInfo;
typedef struct VkDescriptorImageInfo VkDescriptorImageInfo;
typedef struct { VkStructureType sType; const void *pNext; VkFlags flags; size_t codeSize; const uint32_t *pCode; } VkShaderModuleCreateInfo;
typedef struct {
    uint32_t binding; VkDescriptorType descriptorType; uint32_t descriptorCount; VkFlags stageFlags;
    const VkSampler *pImmutableSamplers;
} VkDescriptorSetLayoutBinding;
typedef struct {
    VkStructureType sType; const void *pNext; VkFlags flags; uint32_t bindingCount; const VkDescriptorSetLayoutBinding *pBindings;
} VkDescriptorSetLayoutCreateInfo;
typedef struct { VkFlags stageFlags; uint32_t offset; uint32_t size; } VkPushConstantRange;
typedef struct {
    VkStructureType sType; const void *pNext; VkFlags flags; uint32_t setLayoutCount; const VkDescriptorSetLayout *pSetLayouts;
    uint32_t pushConstantRangeCount; const VkPushConstantRange *pPushConstantRanges;
} VkPipelineLayoutCreateInfo;
typedef struct {
    VkStructureType sType; const void *pNext; VkFlags flags; VkShaderStageFlagBits stage; VkShaderModule module;
    const char *pName; const VkSpecializationInfo *pSpecializationInfo;
} VkPipelineShaderStageCreateInfo;
typedef struct {
    VkStructureType sType; const void *pNext; VkFlags flags; VkPipelineShaderStageCreateInfo stage;
    VkPipelineLayout layout; VkPipeline basePipelineHandle; int32_t basePipelineIndex;
} VkComputePipelineCreateInfo;
typedef int... VkPipelineRobustnessBufferBehaviorEXT;
typedef int... VkPipelineRobustnessImageBehaviorEXT;
typedef struct {
    VkStructureType sType; const void *pNext;
    VkPipelineRobustnessBufferBehaviorEXT storageBuffers; VkPipelineRobustnessBufferBehaviorEXT uniformBuffers;
    VkPipelineRobustnessBufferBehaviorEXT vertexInputs; VkPipelineRobustnessImageBehaviorEXT images;
} VkPipelineRobustnessCreateInfoEXT;
typedef struct { VkStructureType sType; const void *pNext; VkFlags flags; size_t initialDataSize; const void *pInitialData; } VkPipelineCacheCreateInfo;
typedef struct { VkDescriptorType type; uint32_t descriptorCount; } VkDescriptorPoolSize;
typedef struct {
    VkStructureType sType; const void *pNext; VkFlags flags; uint32_t maxSets; uint32_t poolSizeCount; const VkDescriptorPoolSize *pPoolSizes;
} VkDescriptorPoolCreateInfo;
typedef struct {
    VkStructureType sType; const void *pNext; VkDescriptorPool descriptorPool; uint32_t descriptorSetCount;
    const VkDescriptorSetLayout *pSetLayouts;
} VkDescriptorSetAllocateInfo;
typedef struct { VkBuffer buffer; VkDeviceSize offset; VkDeviceSize range; } VkDescriptorBufferInfo;
typedef struct {
    VkStructureType sType; const void *pNext; VkDescriptorSet dstSet; uint32_t dstBinding; uint32_t dstArrayElement;
    uint32_t descriptorCount; VkDescriptorType descriptorType; const VkDescriptorImageInfo *pImageInfo;
    const VkDescriptorBufferInfo *pBufferInfo; const VkBufferView *pTexelBufferView;
} VkWriteDescriptorSet;
typedef struct { VkStructureType sType; const void *pNext; VkPipeline pipeline; } VkPipelineInfoKHR;
typedef struct {
    VkStructureType sType; void *pNext; VkFlags stages; char name[...]; char description[...]; uint32_t subgroupSize;
} VkPipelineExecutablePropertiesKHR;
typedef struct {
    VkStructureType sType; const void *pNext; VkPipeline pipeline; uint32_t executableIndex;
} VkPipelineExecutableInfoKHR;
typedef int... VkPipelineExecutableStatisticFormatKHR;
typedef union { VkBool32 b32; int64_t i64; uint64_t u64; double f64; } VkPipelineExecutableStatisticValueKHR;
typedef struct {
    VkStructureType sType; void *pNext; char name[...]; char description[...];
    VkPipelineExecutableStatisticFormatKHR format; VkPipelineExecutableStatisticValueKHR value;
} VkPipelineExecutableStatisticKHR;

VkResult vkCreateShaderModule(VkDevice device, const VkShaderModuleCreateInfo *pCreateInfo, const VkAllocationCallbacks *pAllocator, VkShaderModule *pShaderModule);
void vkDestroyShaderModule(VkDevice device, VkShaderModule shaderModule, const VkAllocationCallbacks *pAllocator);
VkResult vkCreateDescriptorSetLayout(VkDevice device, const VkDescriptorSetLayoutCreateInfo *pCreateInfo, const VkAllocationCallbacks *pAllocator, VkDescriptorSetLayout *pSetLayout);
void vkDestroyDescriptorSetLayout(VkDevice device, VkDescriptorSetLayout descriptorSetLayout, const VkAllocationCallbacks *pAllocator);
VkResult vkCreatePipelineLayout(VkDevice device, const VkPipelineLayoutCreateInfo *pCreateInfo, const VkAllocationCallbacks *pAllocator, VkPipelineLayout *pPipelineLayout);
void vkDestroyPipelineLayout(VkDevice device, VkPipelineLayout pipelineLayout, const VkAllocationCallbacks *pAllocator);
VkResult vkCreateComputePipelines(VkDevice device, VkPipelineCache pipelineCache, uint32_t createInfoCount, const VkComputePipelineCreateInfo *pCreateInfos, const VkAllocationCallbacks *pAllocator, VkPipeline *pPipelines);
void vkDestroyPipeline(VkDevice device, VkPipeline pipeline, const VkAllocationCallbacks *pAllocator);
VkResult vkCreatePipelineCache(VkDevice device, const VkPipelineCacheCreateInfo *pCreateInfo, const VkAllocationCallbacks *pAllocator, VkPipelineCache *pPipelineCache);
void vkDestroyPipelineCache(VkDevice device, VkPipelineCache pipelineCache, const VkAllocationCallbacks *pAllocator);
VkResult vkGetPipelineCacheData(VkDevice device, VkPipelineCache pipelineCache, size_t *pDataSize, void *pData);
VkResult vkCreateDescriptorPool(VkDevice device, const VkDescriptorPoolCreateInfo *pCreateInfo, const VkAllocationCallbacks *pAllocator, VkDescriptorPool *pDescriptorPool);
void vkDestroyDescriptorPool(VkDevice device, VkDescriptorPool descriptorPool, const VkAllocationCallbacks *pAllocator);
VkResult vkResetDescriptorPool(VkDevice device, VkDescriptorPool descriptorPool, VkFlags flags);
VkResult vkAllocateDescriptorSets(VkDevice device, const VkDescriptorSetAllocateInfo *pAllocateInfo, VkDescriptorSet *pDescriptorSets);
VkResult vkGetPipelineExecutablePropertiesKHR(VkDevice device, const VkPipelineInfoKHR *pPipelineInfo, uint32_t *pExecutableCount, VkPipelineExecutablePropertiesKHR *pProperties);
VkResult vkGetPipelineExecutableStatisticsKHR(VkDevice device, const VkPipelineExecutableInfoKHR *pExecutableInfo, uint32_t *pStatisticCount, VkPipelineExecutableStatisticKHR *pStatistics);
