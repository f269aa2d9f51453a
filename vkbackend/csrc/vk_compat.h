/* Vulkan declarations newer than the oldest header vkbackend builds against (Debian 12's, 1.3.239):
 * VK_KHR_cooperative_matrix (in the header from 1.3.255) and VK_KHR_shader_bfloat16 (from 1.4.311).
 *
 * Included by build_vulkan.py right after <vulkan/vulkan.h>. Each value and struct is written here once, from the
 * Vulkan registry, under a vkb_ name. Where the installed header lacks the extension, the Vulkan names are defined
 * from ours; where it has it, ours are checked against the header's at compile time (every value, every field's
 * offset and size, each struct's size), so a mistake here fails the build instead of corrupting memory. The cdef
 * (decl/instance.h, decl/device.h) declares the Vulkan names either way, and cffi checks those against this. */
#include <stddef.h>

#define VKB_FIELD(S, T, name) T name;
#define VKB_SAME_FIELD(S, T, name) \
    _Static_assert(offsetof(S, name) == offsetof(vkb_##S, name) && sizeof(((S *)0)->name) == sizeof(((vkb_##S *)0)->name), \
                   #S "." #name " differs from the installed Vulkan header");
#define VKB_SAME_STRUCT(S, FIELDS) \
    FIELDS(VKB_SAME_FIELD, S) \
    _Static_assert(sizeof(S) == sizeof(vkb_##S), "sizeof(" #S ") differs from the installed Vulkan header");
#define VKB_SAME_VALUE(name) _Static_assert((long long)(name) == (long long)(vkb_##name), \
                                            #name " differs from the installed Vulkan header");

/* ----- VK_KHR_cooperative_matrix ---------------------------------------------------------------------------------- */
#define vkb_VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR 1000506000
#define vkb_VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR 1000506001
#define vkb_VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_PROPERTIES_KHR 1000506002
#define vkb_VK_COMPONENT_TYPE_FLOAT16_KHR 0
#define vkb_VK_COMPONENT_TYPE_FLOAT32_KHR 1
#define vkb_VK_COMPONENT_TYPE_FLOAT64_KHR 2
#define vkb_VK_COMPONENT_TYPE_SINT8_KHR 3
#define vkb_VK_COMPONENT_TYPE_SINT16_KHR 4
#define vkb_VK_COMPONENT_TYPE_SINT32_KHR 5
#define vkb_VK_COMPONENT_TYPE_SINT64_KHR 6
#define vkb_VK_COMPONENT_TYPE_UINT8_KHR 7
#define vkb_VK_COMPONENT_TYPE_UINT16_KHR 8
#define vkb_VK_COMPONENT_TYPE_UINT32_KHR 9
#define vkb_VK_COMPONENT_TYPE_UINT64_KHR 10
#define vkb_VK_SCOPE_DEVICE_KHR 1
#define vkb_VK_SCOPE_WORKGROUP_KHR 2
#define vkb_VK_SCOPE_SUBGROUP_KHR 3
#define vkb_VK_SCOPE_QUEUE_FAMILY_KHR 5

#define VKB_COOPERATIVE_MATRIX_PROPERTIES_FIELDS(F, S) \
    F(S, VkStructureType, sType) F(S, void *, pNext) F(S, uint32_t, MSize) F(S, uint32_t, NSize) F(S, uint32_t, KSize) \
    F(S, VkComponentTypeKHR, AType) F(S, VkComponentTypeKHR, BType) F(S, VkComponentTypeKHR, CType) \
    F(S, VkComponentTypeKHR, ResultType) F(S, VkBool32, saturatingAccumulation) F(S, VkScopeKHR, scope)
#define VKB_COOPERATIVE_MATRIX_FEATURES_FIELDS(F, S) \
    F(S, VkStructureType, sType) F(S, void *, pNext) F(S, VkBool32, cooperativeMatrix) \
    F(S, VkBool32, cooperativeMatrixRobustBufferAccess)
#define VKB_COOPERATIVE_MATRIX_DEVICE_PROPERTIES_FIELDS(F, S) \
    F(S, VkStructureType, sType) F(S, void *, pNext) F(S, VkShaderStageFlags, cooperativeMatrixSupportedStages)

#ifdef VK_KHR_cooperative_matrix
typedef VkComponentTypeKHR vkb_VkComponentTypeKHR;
typedef VkScopeKHR vkb_VkScopeKHR;
#else
typedef enum { vkb_VK_COMPONENT_TYPE_MAX_ENUM_KHR = 0x7FFFFFFF } vkb_VkComponentTypeKHR;
typedef enum { vkb_VK_SCOPE_MAX_ENUM_KHR = 0x7FFFFFFF } vkb_VkScopeKHR;
typedef vkb_VkComponentTypeKHR VkComponentTypeKHR;
typedef vkb_VkScopeKHR VkScopeKHR;
#endif
typedef struct { VKB_COOPERATIVE_MATRIX_PROPERTIES_FIELDS(VKB_FIELD, _) } vkb_VkCooperativeMatrixPropertiesKHR;
typedef struct { VKB_COOPERATIVE_MATRIX_FEATURES_FIELDS(VKB_FIELD, _) } vkb_VkPhysicalDeviceCooperativeMatrixFeaturesKHR;
typedef struct { VKB_COOPERATIVE_MATRIX_DEVICE_PROPERTIES_FIELDS(VKB_FIELD, _) }
    vkb_VkPhysicalDeviceCooperativeMatrixPropertiesKHR;

#ifdef VK_KHR_cooperative_matrix
VKB_SAME_VALUE(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR)
VKB_SAME_VALUE(VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR)
VKB_SAME_VALUE(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_PROPERTIES_KHR)
VKB_SAME_VALUE(VK_COMPONENT_TYPE_FLOAT16_KHR) VKB_SAME_VALUE(VK_COMPONENT_TYPE_FLOAT32_KHR)
VKB_SAME_VALUE(VK_COMPONENT_TYPE_FLOAT64_KHR) VKB_SAME_VALUE(VK_COMPONENT_TYPE_SINT8_KHR)
VKB_SAME_VALUE(VK_COMPONENT_TYPE_SINT16_KHR) VKB_SAME_VALUE(VK_COMPONENT_TYPE_SINT32_KHR)
VKB_SAME_VALUE(VK_COMPONENT_TYPE_SINT64_KHR) VKB_SAME_VALUE(VK_COMPONENT_TYPE_UINT8_KHR)
VKB_SAME_VALUE(VK_COMPONENT_TYPE_UINT16_KHR) VKB_SAME_VALUE(VK_COMPONENT_TYPE_UINT32_KHR)
VKB_SAME_VALUE(VK_COMPONENT_TYPE_UINT64_KHR)
VKB_SAME_VALUE(VK_SCOPE_DEVICE_KHR) VKB_SAME_VALUE(VK_SCOPE_WORKGROUP_KHR) VKB_SAME_VALUE(VK_SCOPE_SUBGROUP_KHR)
VKB_SAME_VALUE(VK_SCOPE_QUEUE_FAMILY_KHR)
_Static_assert(sizeof(VkComponentTypeKHR) == 4 && sizeof(VkScopeKHR) == 4, "Vulkan enums are 32-bit");
VKB_SAME_STRUCT(VkCooperativeMatrixPropertiesKHR, VKB_COOPERATIVE_MATRIX_PROPERTIES_FIELDS)
VKB_SAME_STRUCT(VkPhysicalDeviceCooperativeMatrixFeaturesKHR, VKB_COOPERATIVE_MATRIX_FEATURES_FIELDS)
VKB_SAME_STRUCT(VkPhysicalDeviceCooperativeMatrixPropertiesKHR, VKB_COOPERATIVE_MATRIX_DEVICE_PROPERTIES_FIELDS)
#else
#define VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR \
    ((VkStructureType)vkb_VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR)
#define VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR \
    ((VkStructureType)vkb_VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR)
#define VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_PROPERTIES_KHR \
    ((VkStructureType)vkb_VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_PROPERTIES_KHR)
#define VK_COMPONENT_TYPE_FLOAT16_KHR ((VkComponentTypeKHR)vkb_VK_COMPONENT_TYPE_FLOAT16_KHR)
#define VK_COMPONENT_TYPE_FLOAT32_KHR ((VkComponentTypeKHR)vkb_VK_COMPONENT_TYPE_FLOAT32_KHR)
#define VK_COMPONENT_TYPE_FLOAT64_KHR ((VkComponentTypeKHR)vkb_VK_COMPONENT_TYPE_FLOAT64_KHR)
#define VK_COMPONENT_TYPE_SINT8_KHR ((VkComponentTypeKHR)vkb_VK_COMPONENT_TYPE_SINT8_KHR)
#define VK_COMPONENT_TYPE_SINT16_KHR ((VkComponentTypeKHR)vkb_VK_COMPONENT_TYPE_SINT16_KHR)
#define VK_COMPONENT_TYPE_SINT32_KHR ((VkComponentTypeKHR)vkb_VK_COMPONENT_TYPE_SINT32_KHR)
#define VK_COMPONENT_TYPE_SINT64_KHR ((VkComponentTypeKHR)vkb_VK_COMPONENT_TYPE_SINT64_KHR)
#define VK_COMPONENT_TYPE_UINT8_KHR ((VkComponentTypeKHR)vkb_VK_COMPONENT_TYPE_UINT8_KHR)
#define VK_COMPONENT_TYPE_UINT16_KHR ((VkComponentTypeKHR)vkb_VK_COMPONENT_TYPE_UINT16_KHR)
#define VK_COMPONENT_TYPE_UINT32_KHR ((VkComponentTypeKHR)vkb_VK_COMPONENT_TYPE_UINT32_KHR)
#define VK_COMPONENT_TYPE_UINT64_KHR ((VkComponentTypeKHR)vkb_VK_COMPONENT_TYPE_UINT64_KHR)
#define VK_SCOPE_DEVICE_KHR ((VkScopeKHR)vkb_VK_SCOPE_DEVICE_KHR)
#define VK_SCOPE_WORKGROUP_KHR ((VkScopeKHR)vkb_VK_SCOPE_WORKGROUP_KHR)
#define VK_SCOPE_SUBGROUP_KHR ((VkScopeKHR)vkb_VK_SCOPE_SUBGROUP_KHR)
#define VK_SCOPE_QUEUE_FAMILY_KHR ((VkScopeKHR)vkb_VK_SCOPE_QUEUE_FAMILY_KHR)
typedef vkb_VkCooperativeMatrixPropertiesKHR VkCooperativeMatrixPropertiesKHR;
typedef vkb_VkPhysicalDeviceCooperativeMatrixFeaturesKHR VkPhysicalDeviceCooperativeMatrixFeaturesKHR;
typedef vkb_VkPhysicalDeviceCooperativeMatrixPropertiesKHR VkPhysicalDeviceCooperativeMatrixPropertiesKHR;
#endif
typedef VkResult (VKAPI_PTR *vkb_PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR)(
    VkPhysicalDevice physicalDevice, uint32_t *pPropertyCount, VkCooperativeMatrixPropertiesKHR *pProperties);
#ifdef VK_KHR_cooperative_matrix
_Static_assert(__builtin_types_compatible_p(PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR,
                                            vkb_PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR),
               "PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR differs from the installed Vulkan header");
#else
typedef vkb_PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR;
#endif

/* ----- VK_KHR_shader_bfloat16 ------------------------------------------------------------------------------------ */
#define vkb_VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_BFLOAT16_FEATURES_KHR 1000141000
#define vkb_VK_COMPONENT_TYPE_BFLOAT16_KHR 1000141000

#define VKB_SHADER_BFLOAT16_FEATURES_FIELDS(F, S) \
    F(S, VkStructureType, sType) F(S, void *, pNext) F(S, VkBool32, shaderBFloat16Type) \
    F(S, VkBool32, shaderBFloat16DotProduct) F(S, VkBool32, shaderBFloat16CooperativeMatrix)
typedef struct { VKB_SHADER_BFLOAT16_FEATURES_FIELDS(VKB_FIELD, _) } vkb_VkPhysicalDeviceShaderBfloat16FeaturesKHR;

#ifdef VK_KHR_shader_bfloat16
VKB_SAME_VALUE(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_BFLOAT16_FEATURES_KHR)
VKB_SAME_VALUE(VK_COMPONENT_TYPE_BFLOAT16_KHR)
VKB_SAME_STRUCT(VkPhysicalDeviceShaderBfloat16FeaturesKHR, VKB_SHADER_BFLOAT16_FEATURES_FIELDS)
#else
#define VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_BFLOAT16_FEATURES_KHR \
    ((VkStructureType)vkb_VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_BFLOAT16_FEATURES_KHR)
#define VK_COMPONENT_TYPE_BFLOAT16_KHR ((VkComponentTypeKHR)vkb_VK_COMPONENT_TYPE_BFLOAT16_KHR)
typedef vkb_VkPhysicalDeviceShaderBfloat16FeaturesKHR VkPhysicalDeviceShaderBfloat16FeaturesKHR;
#endif
