/* vulkan_ref: the launch, round-trip and transfer cases of `python -m vkbackend bench`, written straight against
 * Vulkan in C.
 *
 * It is the bench's "vulkan-c" peer: what a plain C program gets from the same driver for the same work, so that our
 * figures can be read against it. vulkan_ref.py builds it with $CC (or cc), compiles its two kernels (INC and
 * ADD_VEC4 of kernels.py, the ones our cases run) and writes the input arrays, then runs
 *
 *     vulkan_ref DIR DEVICE_NAME LAUNCHES BUFFERS SMALL_FLOATS ELEMS REPS KERNEL_REPS WARMUP_S ROUNDTRIPS
 *                ROUNDTRIP_WARMUP CASES
 *
 * DIR holds inc.spv, add.spv, and (when an array case runs) a.f32 and b.f32 (ELEMS float32 each); the program writes
 * DIR/c.f32, the result of c = a + b as the download case brought it back. DEVICE_NAME picks the device of that name
 * (else the first). CASES is the comma-separated names of the cases to run. On stdout it prints JSON lines:
 * {"info": ...}; {"arrays": N}, the floats per array it used (ELEMS, or fewer where the device cannot bind that
 * many); one {"case": ..., "seconds": ...} per launch or array case, the best of REPS samples after one thrown away;
 * one {"case": ..., "min_us": ..., "median_us": ..., "p99_us": ..., "max_us": ...} per round-trip case, over
 * ROUNDTRIPS round trips timed one by one after ROUNDTRIP_WARMUP untimed ones; "correct" where the program checks
 * the result itself; and under VKBACKEND_VALIDATION=1 one {"validation": ...} per message of the Khronos validation
 * layer. Errors go to stderr, with exit status 1.
 *
 * The loader (libvulkan.so.1, or $VKBACKEND_VULKAN_LIBRARY) is opened with dlopen, so building needs only the
 * Vulkan headers. Buffers live in the memory type the backend picks for its own (memory.py); transfers go through
 * one host-visible staging buffer.
 */
#define _POSIX_C_SOURCE 200809L
#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define FENCE_TIMEOUT_NS 300000000000ull /* 300 s: a GPU that has not finished by then is hung, not slow */
#define COMPUTE VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT
#define TRANSFER VK_PIPELINE_STAGE_TRANSFER_BIT
#define WARM_FLOATS (4L << 20) /* the warm-up's arrays, as OurCases.warm_up's */

/* ----- errors -------------------------------------------------------------------------------------------------- */
static void die(const char *format, ...) {
    va_list args;
    va_start(args, format);
    fputs("vulkan_ref: ", stderr);
    vfprintf(stderr, format, args);
    fputc('\n', stderr);
    va_end(args);
    exit(1);
}

static const char *result_meaning(VkResult result) {
    switch (result) {
    case VK_TIMEOUT: return "VK_TIMEOUT: the GPU did not finish within 300 s (hung, or far too much work)";
    case VK_ERROR_OUT_OF_HOST_MEMORY: return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY: return "VK_ERROR_OUT_OF_DEVICE_MEMORY: try smaller sizes (bench --quick)";
    case VK_ERROR_INITIALIZATION_FAILED: return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST: return "VK_ERROR_DEVICE_LOST: the driver lost the GPU";
    case VK_ERROR_LAYER_NOT_PRESENT:
        return "VK_ERROR_LAYER_NOT_PRESENT: VKBACKEND_VALIDATION=1 needs the Khronos validation layer "
               "(apt-get install vulkan-validationlayers), or unset it";
    case VK_ERROR_EXTENSION_NOT_PRESENT: return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER:
        return "VK_ERROR_INCOMPATIBLE_DRIVER: no Vulkan driver (install the GPU's, or mesa-vulkan-drivers for lavapipe)";
    default: return "see VkResult in vulkan_core.h";
    }
}

/* Every VkResult goes through here: anything but VK_SUCCESS ends the program, naming the call. */
static void check(VkResult result, const char *call) {
    if (result != VK_SUCCESS) die("%s returned %d (%s)", call, (int)result, result_meaning(result));
}
#define CHECK(call) check((call), #call)

/* ----- output: JSON lines ------------------------------------------------------------------------------------ */
static void print_json_string(const char *text) {
    putchar('"');
    for (const unsigned char *c = (const unsigned char *)text; *c; c++) {
        if (*c == '"' || *c == '\\') printf("\\%c", *c);
        else if (*c < 0x20) printf("\\u%04x", *c);
        else putchar(*c);
    }
    putchar('"');
}

static void emit_text(const char *key, const char *text) {
    printf("{\"%s\": ", key);
    print_json_string(text);
    printf("}\n");
    fflush(stdout); /* a crash later keeps what came before */
}

static void emit_info(const char *format, ...) {
    char text[1024];
    va_list args;
    va_start(args, format);
    vsnprintf(text, sizeof text, format, args);
    va_end(args);
    emit_text("info", text);
}

/* A case's line: the best sample in seconds (null without one), and "correct" unless it is -1 (checked by the caller
 * of this program instead). */
static void emit_case(const char *name, double seconds, int correct) {
    printf("{\"case\": \"%s\", \"seconds\": ", name);
    if (seconds > 0) printf("%.9g", seconds);
    else printf("null");
    if (correct >= 0) printf(", \"correct\": %s", correct ? "true" : "false");
    printf("}\n");
    fflush(stdout);
}

/* The best (smallest) sample so far: 0 before the first kept one; sample 0 is a warm-up, thrown away. */
static double keep_best(double best, double seconds, long rep) {
    return rep == 0 || (best > 0 && best <= seconds) ? best : seconds;
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* ----- the Vulkan functions, from libvulkan.so.1 --------------------------------------------------------------- */
#define INSTANCE_FUNCTIONS(X)                                                                                        \
    X(vkDestroyInstance) X(vkEnumeratePhysicalDevices) X(vkGetPhysicalDeviceProperties)                             \
    X(vkGetPhysicalDeviceQueueFamilyProperties) X(vkGetPhysicalDeviceMemoryProperties) X(vkCreateDevice)          \
    X(vkGetDeviceProcAddr)
#define DEVICE_FUNCTIONS(X)                                                                                          \
    X(vkDestroyDevice) X(vkGetDeviceQueue) X(vkCreateBuffer) X(vkDestroyBuffer) X(vkGetBufferMemoryRequirements)   \
    X(vkAllocateMemory) X(vkFreeMemory) X(vkBindBufferMemory) X(vkMapMemory) X(vkCreateShaderModule)                \
    X(vkDestroyShaderModule) X(vkCreateDescriptorSetLayout) X(vkDestroyDescriptorSetLayout)                         \
    X(vkCreatePipelineLayout) X(vkDestroyPipelineLayout) X(vkCreateComputePipelines) X(vkDestroyPipeline)           \
    X(vkCreateDescriptorPool) X(vkDestroyDescriptorPool) X(vkAllocateDescriptorSets) X(vkUpdateDescriptorSets)      \
    X(vkCreateCommandPool) X(vkDestroyCommandPool) X(vkAllocateCommandBuffers) X(vkResetCommandBuffer)              \
    X(vkBeginCommandBuffer) X(vkEndCommandBuffer) X(vkCmdBindPipeline) X(vkCmdBindDescriptorSets)                  \
    X(vkCmdPushConstants) X(vkCmdDispatch) X(vkCmdPipelineBarrier) X(vkCmdFillBuffer) X(vkCmdCopyBuffer)            \
    X(vkCmdResetQueryPool) X(vkCmdWriteTimestamp) X(vkCreateQueryPool) X(vkDestroyQueryPool)                        \
    X(vkGetQueryPoolResults) X(vkCreateFence) X(vkDestroyFence) X(vkResetFences) X(vkWaitForFences)                 \
    X(vkQueueSubmit) X(vkQueueWaitIdle) X(vkDeviceWaitIdle)

#define DECLARE(name) static PFN_##name name;
static PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr;
static PFN_vkCreateInstance vkCreateInstance;
static PFN_vkCreateDebugUtilsMessengerEXT vkCreateDebugUtilsMessengerEXT;
static PFN_vkDestroyDebugUtilsMessengerEXT vkDestroyDebugUtilsMessengerEXT;
INSTANCE_FUNCTIONS(DECLARE)
DEVICE_FUNCTIONS(DECLARE)

static PFN_vkVoidFunction required(PFN_vkVoidFunction function, const char *name) {
    if (!function) die("the Vulkan loader has no %s", name);
    return function;
}
#define LOAD_INSTANCE(name) name = (PFN_##name)required(vkGetInstanceProcAddr(gpu.instance, #name), #name);
#define LOAD_DEVICE(name) name = (PFN_##name)required(vkGetDeviceProcAddr(gpu.device, #name), #name);

/* Everything the cases share: one device, one queue, one command buffer and its fence. */
static struct {
    VkInstance instance;
    VkDebugUtilsMessengerEXT messenger;
    VkPhysicalDevice physical;
    VkPhysicalDeviceProperties properties;
    VkPhysicalDeviceMemoryProperties memory;
    uint32_t family, timestamp_bits;
    VkDevice device;
    VkQueue queue;
    VkCommandPool command_pool;
    VkCommandBuffer cmd;
    VkFence fence;
    VkDescriptorPool descriptor_pool;
} gpu;

/* The Vulkan loader: $VKBACKEND_VULKAN_LIBRARY where set, as the backend opens it, else libvulkan.so.1. */
static void open_loader(void) {
    const char *name = getenv("VKBACKEND_VULKAN_LIBRARY");
    if (!name || !*name) name = "libvulkan.so.1";
    void *library = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!library)
        die("cannot open %s (%s): install the Vulkan loader (Debian/Ubuntu: apt-get install libvulkan1)", name,
            dlerror());
    void *symbol = dlsym(library, "vkGetInstanceProcAddr");
    memcpy(&vkGetInstanceProcAddr, &symbol, sizeof symbol); /* POSIX lets a void * hold a function's address */
    if (!vkGetInstanceProcAddr) die("%s has no vkGetInstanceProcAddr: is it a Vulkan loader?", name);
    vkCreateInstance = (PFN_vkCreateInstance)required(vkGetInstanceProcAddr(NULL, "vkCreateInstance"),
                                                      "vkCreateInstance");
}

/* ----- instance and device ------------------------------------------------------------------------------------- */
static VKAPI_ATTR VkBool32 VKAPI_CALL on_validation_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                            VkDebugUtilsMessageTypeFlagsEXT types,
                                                            const VkDebugUtilsMessengerCallbackDataEXT *data,
                                                            void *user) {
    (void)severity, (void)types, (void)user;
    emit_text("validation", data->pMessage);
    return VK_FALSE;
}

/* The instance; with `validate`, under the Khronos validation layer, its warnings and errors printed as JSON lines
 * (the severities and types the backend collects, csrc/debug.c). */
static void open_instance(int validate) {
    const char *layer = "VK_LAYER_KHRONOS_validation", *extension = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO, .pApplicationName = "vkbackend vulkan_ref",
                             .apiVersion = VK_API_VERSION_1_2};
    VkDebugUtilsMessengerCreateInfoEXT messenger = {
        .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
        .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
        .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT,
        .pfnUserCallback = on_validation_message};
    VkInstanceCreateInfo info = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                                 .pNext = validate ? &messenger : NULL, /* also hears vkCreateInstance itself */
                                 .pApplicationInfo = &app,
                                 .enabledLayerCount = validate ? 1 : 0, .ppEnabledLayerNames = &layer,
                                 .enabledExtensionCount = validate ? 1 : 0, .ppEnabledExtensionNames = &extension};
    CHECK(vkCreateInstance(&info, NULL, &gpu.instance));
    INSTANCE_FUNCTIONS(LOAD_INSTANCE)
    if (validate) {
        LOAD_INSTANCE(vkCreateDebugUtilsMessengerEXT)
        LOAD_INSTANCE(vkDestroyDebugUtilsMessengerEXT)
        CHECK(vkCreateDebugUtilsMessengerEXT(gpu.instance, &messenger, NULL, &gpu.messenger));
    }
}

/* The physical device named `name` (the first one when none is), and its first queue family that computes. */
static void pick_physical_device(const char *name) {
    uint32_t count = 0;
    CHECK(vkEnumeratePhysicalDevices(gpu.instance, &count, NULL));
    if (count == 0) die("no Vulkan device: install the GPU's driver, or mesa-vulkan-drivers for lavapipe");
    VkPhysicalDevice *found = malloc(count * sizeof *found);
    if (!found) die("out of host memory listing %u devices", count);
    CHECK(vkEnumeratePhysicalDevices(gpu.instance, &count, found));
    gpu.physical = found[0];
    for (uint32_t i = 0; i < count; i++) {
        vkGetPhysicalDeviceProperties(found[i], &gpu.properties);
        if (strcmp(gpu.properties.deviceName, name) == 0) {
            gpu.physical = found[i];
            break;
        }
    }
    free(found);
    vkGetPhysicalDeviceProperties(gpu.physical, &gpu.properties);
    if (gpu.properties.apiVersion < VK_API_VERSION_1_2)
        die("%s offers Vulkan %u.%u; the kernels (SPIR-V 1.5) need 1.2", gpu.properties.deviceName,
            VK_API_VERSION_MAJOR(gpu.properties.apiVersion), VK_API_VERSION_MINOR(gpu.properties.apiVersion));
    vkGetPhysicalDeviceMemoryProperties(gpu.physical, &gpu.memory);
    uint32_t family_count = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(gpu.physical, &family_count, NULL);
    VkQueueFamilyProperties *families = malloc(family_count * sizeof *families);
    if (!families) die("out of host memory listing %u queue families", family_count);
    vkGetPhysicalDeviceQueueFamilyProperties(gpu.physical, &family_count, families);
    for (gpu.family = 0; gpu.family < family_count; gpu.family++)
        if (families[gpu.family].queueFlags & VK_QUEUE_COMPUTE_BIT) break;
    if (gpu.family == family_count) die("%s has no queue family that computes", gpu.properties.deviceName);
    gpu.timestamp_bits = families[gpu.family].timestampValidBits;
    free(families);
}

/* What a program that includes this file (scripts/round-trip-floor.c) adds to the device: a pNext chain of features
 * and extensions. The bench's cases need none. */
static struct {
    const void *next;
    const char *const *extensions;
    uint32_t extension_count;
} device_extras;

/* The device with one queue, one command buffer, its fence, and descriptor sets for `max_sets` kernel bindings. */
static void open_device(uint32_t max_sets) {
    float priority = 1.0f;
    VkDeviceQueueCreateInfo queue = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                     .queueFamilyIndex = gpu.family, .queueCount = 1, .pQueuePriorities = &priority};
    VkDeviceCreateInfo info = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, .pNext = device_extras.next,
                               .queueCreateInfoCount = 1, .pQueueCreateInfos = &queue,
                               .enabledExtensionCount = device_extras.extension_count,
                               .ppEnabledExtensionNames = device_extras.extensions};
    CHECK(vkCreateDevice(gpu.physical, &info, NULL, &gpu.device));
    DEVICE_FUNCTIONS(LOAD_DEVICE)
    vkGetDeviceQueue(gpu.device, gpu.family, 0, &gpu.queue);
    VkCommandPoolCreateInfo pool = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                    .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                    .queueFamilyIndex = gpu.family};
    CHECK(vkCreateCommandPool(gpu.device, &pool, NULL, &gpu.command_pool));
    VkCommandBufferAllocateInfo cmd = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                       .commandPool = gpu.command_pool, .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                       .commandBufferCount = 1};
    CHECK(vkAllocateCommandBuffers(gpu.device, &cmd, &gpu.cmd));
    VkFenceCreateInfo fence = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    CHECK(vkCreateFence(gpu.device, &fence, NULL, &gpu.fence));
    VkDescriptorPoolSize size = {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 3 * max_sets};
    VkDescriptorPoolCreateInfo sets = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO, .maxSets = max_sets,
                                       .poolSizeCount = 1, .pPoolSizes = &size};
    CHECK(vkCreateDescriptorPool(gpu.device, &sets, NULL, &gpu.descriptor_pool));
    uint32_t v = gpu.properties.apiVersion;
    emit_info("vulkan-c: %s (Vulkan %u.%u.%u, driver version %#x)", gpu.properties.deviceName, VK_API_VERSION_MAJOR(v),
              VK_API_VERSION_MINOR(v), VK_API_VERSION_PATCH(v), gpu.properties.driverVersion);
}

static void close_device(void) {
    CHECK(vkDeviceWaitIdle(gpu.device));
    vkDestroyDescriptorPool(gpu.device, gpu.descriptor_pool, NULL);
    vkDestroyFence(gpu.device, gpu.fence, NULL);
    vkDestroyCommandPool(gpu.device, gpu.command_pool, NULL);
    vkDestroyDevice(gpu.device, NULL);
    if (gpu.messenger) vkDestroyDebugUtilsMessengerEXT(gpu.instance, gpu.messenger, NULL);
    vkDestroyInstance(gpu.instance, NULL);
}

/* ----- buffers ------------------------------------------------------------------------------------------------- */
typedef struct {
    VkBuffer buffer;
    VkDeviceMemory memory;
    void *mapped; /* staging only */
} Buffer;

typedef enum { DEVICE_LOCAL, STAGING } Placement;

/* memory.py's rule: a type with every `required` flag, then the most `preferred`, the fewest `avoid` and the fewest
 * flags in all (so plain VRAM on a discrete GPU). The weights rank those in that order: each count is at most 32. */
static uint32_t pick_memory_type(uint32_t allowed, VkMemoryPropertyFlags required, VkMemoryPropertyFlags preferred,
                                 VkMemoryPropertyFlags avoid) {
    const VkMemoryPropertyFlags never = VK_MEMORY_PROPERTY_PROTECTED_BIT | VK_MEMORY_PROPERTY_LAZILY_ALLOCATED_BIT;
    uint32_t best = UINT32_MAX;
    long best_score = 0;
    for (uint32_t i = 0; i < gpu.memory.memoryTypeCount; i++) {
        VkMemoryPropertyFlags flags = gpu.memory.memoryTypes[i].propertyFlags;
        if (!(allowed & (1u << i)) || (flags & required) != required || (flags & never)) continue;
        long score = 4096L * __builtin_popcount(flags & preferred) - 64L * __builtin_popcount(flags & avoid) -
                     __builtin_popcount(flags);
        if (best == UINT32_MAX || score > best_score) best = i, best_score = score;
    }
    if (best == UINT32_MAX) die("%s has no memory type with flags %#x for a buffer", gpu.properties.deviceName, required);
    return best;
}

/* A buffer of `size` bytes for storage and copies: device-local like the backend's buffers, or host-visible and
 * mapped like its staging ring (HOST_CACHED where offered, so read-backs are not uncached reads). */
static Buffer buffer_new(VkDeviceSize size, Placement where) {
    Buffer b = {0};
    VkBufferCreateInfo info = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = size,
                               .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                        VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                               .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
    CHECK(vkCreateBuffer(gpu.device, &info, NULL, &b.buffer));
    VkMemoryRequirements needs;
    vkGetBufferMemoryRequirements(gpu.device, b.buffer, &needs);
    const VkMemoryPropertyFlags host = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    uint32_t type = where == DEVICE_LOCAL
        ? pick_memory_type(needs.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT)
        : pick_memory_type(needs.memoryTypeBits, host, VK_MEMORY_PROPERTY_HOST_CACHED_BIT,
                           VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
    VkMemoryAllocateInfo allocate = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .allocationSize = needs.size,
                                     .memoryTypeIndex = type};
    CHECK(vkAllocateMemory(gpu.device, &allocate, NULL, &b.memory));
    CHECK(vkBindBufferMemory(gpu.device, b.buffer, b.memory, 0));
    if (where == STAGING) CHECK(vkMapMemory(gpu.device, b.memory, 0, VK_WHOLE_SIZE, 0, &b.mapped));
    return b;
}

static void buffer_free(Buffer *b) {
    vkDestroyBuffer(gpu.device, b->buffer, NULL);
    vkFreeMemory(gpu.device, b->memory, NULL); /* unmaps a staging buffer too */
}

/* ----- files --------------------------------------------------------------------------------------------------- */
static void path_in(char *path, size_t size, const char *dir, const char *name) {
    if ((size_t)snprintf(path, size, "%s/%s", dir, name) >= size) die("the path %s/%s is too long", dir, name);
}

/* The first `bytes` bytes of DIR/name (all of it when `bytes` is 0, with its size in *size). */
static void *read_file(const char *dir, const char *name, size_t bytes, size_t *size) {
    char path[4096];
    path_in(path, sizeof path, dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) die("cannot open %s: vulkan_ref.py writes it before it runs this program", path);
    if (!bytes) {
        fseek(f, 0, SEEK_END);
        bytes = (size_t)ftell(f);
        fseek(f, 0, SEEK_SET);
    }
    void *data = malloc(bytes ? bytes : 1);
    if (!data) die("out of host memory reading %s (%zu bytes)", path, bytes);
    if (fread(data, 1, bytes, f) != bytes) die("%s holds fewer than %zu bytes", path, bytes);
    fclose(f);
    if (size) *size = bytes;
    return data;
}

static void write_file(const char *dir, const char *name, const void *data, size_t bytes) {
    char path[4096];
    path_in(path, sizeof path, dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, bytes, f) != bytes || fclose(f) != 0) die("cannot write %s", path);
}

/* ----- kernels ------------------------------------------------------------------------------------------------- */
typedef struct {
    VkShaderModule module;
    VkDescriptorSetLayout set_layout;
    VkPipelineLayout layout;
    VkPipeline pipeline;
} Kernel;

/* The compute pipeline of DIR/name: `bindings` storage buffers in set 0 and one uint push constant, as kernels.py's
 * INC and ADD_VEC4 declare. */
static Kernel kernel_new(const char *dir, const char *name, uint32_t bindings) {
    Kernel k;
    size_t size;
    uint32_t *code = read_file(dir, name, 0, &size);
    VkShaderModuleCreateInfo module = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, .codeSize = size,
                                       .pCode = code};
    CHECK(vkCreateShaderModule(gpu.device, &module, NULL, &k.module));
    free(code);
    VkDescriptorSetLayoutBinding binding[3];
    for (uint32_t i = 0; i < bindings; i++)
        binding[i] = (VkDescriptorSetLayoutBinding){.binding = i, .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                                    .descriptorCount = 1, .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};
    VkDescriptorSetLayoutCreateInfo set = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
                                           .bindingCount = bindings, .pBindings = binding};
    CHECK(vkCreateDescriptorSetLayout(gpu.device, &set, NULL, &k.set_layout));
    VkPushConstantRange push = {VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(uint32_t)};
    VkPipelineLayoutCreateInfo layout = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO, .setLayoutCount = 1,
                                         .pSetLayouts = &k.set_layout, .pushConstantRangeCount = 1,
                                         .pPushConstantRanges = &push};
    CHECK(vkCreatePipelineLayout(gpu.device, &layout, NULL, &k.layout));
    VkComputePipelineCreateInfo pipeline = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                  .module = k.module, .pName = "main"},
        .layout = k.layout, .basePipelineIndex = -1};
    CHECK(vkCreateComputePipelines(gpu.device, VK_NULL_HANDLE, 1, &pipeline, NULL, &k.pipeline));
    return k;
}

static void kernel_free(Kernel *k) {
    vkDestroyPipeline(gpu.device, k->pipeline, NULL);
    vkDestroyPipelineLayout(gpu.device, k->layout, NULL);
    vkDestroyDescriptorSetLayout(gpu.device, k->set_layout, NULL);
    vkDestroyShaderModule(gpu.device, k->module, NULL);
}

/* A descriptor set binding `buffers` (whole) to the kernel's bindings 0, 1, ... in order. */
static VkDescriptorSet kernel_bind(const Kernel *k, Buffer *const *buffers, uint32_t count) {
    VkDescriptorSet set;
    VkDescriptorSetAllocateInfo allocate = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                            .descriptorPool = gpu.descriptor_pool, .descriptorSetCount = 1,
                                            .pSetLayouts = &k->set_layout};
    CHECK(vkAllocateDescriptorSets(gpu.device, &allocate, &set));
    VkDescriptorBufferInfo info[3];
    VkWriteDescriptorSet write[3];
    for (uint32_t i = 0; i < count; i++) {
        info[i] = (VkDescriptorBufferInfo){buffers[i]->buffer, 0, VK_WHOLE_SIZE};
        write[i] = (VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, .dstSet = set,
                                          .dstBinding = i, .descriptorCount = 1,
                                          .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, .pBufferInfo = &info[i]};
    }
    vkUpdateDescriptorSets(gpu.device, count, write, 0, NULL);
    return set;
}

/* Binds the kernel with its one push constant, `set` and the uint `n`, for the dispatches that follow. */
static void kernel_use(const Kernel *k, VkDescriptorSet set, uint32_t n) {
    vkCmdBindPipeline(gpu.cmd, VK_PIPELINE_BIND_POINT_COMPUTE, k->pipeline);
    vkCmdBindDescriptorSets(gpu.cmd, VK_PIPELINE_BIND_POINT_COMPUTE, k->layout, 0, 1, &set, 0, NULL);
    vkCmdPushConstants(gpu.cmd, k->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof n, &n);
}

/* ----- commands ------------------------------------------------------------------------------------------------ */
static void barrier(VkPipelineStageFlags src_stage, VkAccessFlags src, VkPipelineStageFlags dst_stage,
                    VkAccessFlags dst) {
    VkMemoryBarrier memory = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = src, .dstAccessMask = dst};
    vkCmdPipelineBarrier(gpu.cmd, src_stage, dst_stage, 0, 1, &memory, 0, NULL, 0, NULL);
}

/* Starts recording the command buffer behind a barrier from every earlier compute and transfer access: submission
 * order alone orders no memory accesses, and every submission here touches what the one before it did. */
static void begin(void) {
    VkCommandBufferBeginInfo info = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                     .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    CHECK(vkResetCommandBuffer(gpu.cmd, 0));
    CHECK(vkBeginCommandBuffer(gpu.cmd, &info));
    barrier(COMPUTE | TRANSFER, VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT, COMPUTE | TRANSFER,
            VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                VK_ACCESS_TRANSFER_WRITE_BIT);
}

/* Ends and submits the command buffer and waits for its fence: blocking in the driver, or with `poll` by checks that
 * never sleep, as a caller that waits for a short round trip does (a thread woken from a blocking wait can take tens
 * of microseconds to run again; CUDA's default synchronisation spins too). */
static void submit_and_wait_for(int poll) {
    CHECK(vkEndCommandBuffer(gpu.cmd));
    VkSubmitInfo submit = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1,
                           .pCommandBuffers = &gpu.cmd};
    CHECK(vkQueueSubmit(gpu.queue, 1, &submit, gpu.fence));
    double deadline = now() + FENCE_TIMEOUT_NS * 1e-9;
    VkResult result;
    while (poll && (result = vkWaitForFences(gpu.device, 1, &gpu.fence, VK_TRUE, 0)) == VK_TIMEOUT && now() < deadline)
        ;
    if (!poll || result == VK_TIMEOUT) result = vkWaitForFences(gpu.device, 1, &gpu.fence, VK_TRUE, FENCE_TIMEOUT_NS);
    CHECK(result);
    CHECK(vkResetFences(gpu.device, 1, &gpu.fence));
}

static void submit_and_wait(void) { submit_and_wait_for(0); }

/* host -> staging (memcpy) -> dst (one copy command): the staged upload. Returns the seconds of the copy alone. */
static double upload(const Buffer *staging, const Buffer *dst, const void *host, VkDeviceSize bytes) {
    memcpy(staging->mapped, host, bytes);
    double start = now();
    begin();
    VkBufferCopy region = {0, 0, bytes};
    vkCmdCopyBuffer(gpu.cmd, staging->buffer, dst->buffer, 1, &region);
    submit_and_wait();
    return now() - start;
}

/* src -> staging (one copy command) -> host (memcpy): the staged download. */
static void download(const Buffer *staging, const Buffer *src, void *host, VkDeviceSize bytes) {
    begin();
    VkBufferCopy region = {0, 0, bytes};
    vkCmdCopyBuffer(gpu.cmd, src->buffer, staging->buffer, 1, &region);
    barrier(TRANSFER, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
    submit_and_wait();
    memcpy(host, staging->mapped, bytes);
}

/* ----- the cases ----------------------------------------------------------------------------------------------- */
typedef struct {
    const char *dir, *device_name, *cases;
    long launches, buffers, small_floats, elems, reps, kernel_reps, roundtrips, roundtrip_warmup;
    double warmup_s;
} Args;

/* Whether `name` is one of the comma-separated names of CASES. */
static int wants(const Args *args, const char *name) {
    size_t length = strlen(name);
    for (const char *at = args->cases; *at;) {
        size_t token = strcspn(at, ",");
        if (token == length && strncmp(at, name, length) == 0) return 1;
        at += token + (at[token] == ',');
    }
    return 0;
}

/* The work groups of ADD_VEC4 over n4 vec4s: x up to the device's limit, y for the rest (kernels.add_grid). */
static void add_grid(uint32_t n4, uint32_t *x, uint32_t *y) {
    uint32_t groups = n4 / 256 + (n4 % 256 != 0), limit = gpu.properties.limits.maxComputeWorkGroupCount[0];
    *x = groups < limit ? groups : limit;
    *y = groups / *x + (groups % *x != 0);
}

/* About `seconds` of back-to-back add kernels on arrays of their own, so that clocks are up before anything is
 * timed, as OurCases.warm_up does. */
static void warm_up(const Kernel *add, long floats, double seconds) {
    Buffer a = buffer_new(floats * 4, DEVICE_LOCAL), b = buffer_new(floats * 4, DEVICE_LOCAL),
           c = buffer_new(floats * 4, DEVICE_LOCAL);
    Buffer *bound[3] = {&a, &b, &c};
    VkDescriptorSet set = kernel_bind(add, bound, 3);
    uint32_t gx, gy;
    add_grid((uint32_t)(floats / 4), &gx, &gy);
    for (double deadline = now() + seconds; now() < deadline;) {
        begin();
        kernel_use(add, set, (uint32_t)(floats / 4));
        for (int i = 0; i < 8; i++) {
            if (i) barrier(COMPUTE, VK_ACCESS_SHADER_WRITE_BIT, COMPUTE, VK_ACCESS_SHADER_WRITE_BIT); /* c again */
            vkCmdDispatch(gpu.cmd, gx, gy, 1);
        }
        submit_and_wait();
    }
    buffer_free(&a), buffer_free(&b), buffer_free(&c);
}

/* One sample: `launches` one-group dispatches of INC, round robin over `count` buffers, recorded into one command
 * buffer and submitted once, timed from the first command recorded to the fence. A buffer is used again only after
 * a barrier: after every dispatch when count is 1 (the dependent chain), once a round otherwise. */
static double time_launches(const Kernel *inc, const VkDescriptorSet *sets, long count, const Args *args) {
    double start = now();
    begin();
    kernel_use(inc, sets[0], (uint32_t)args->small_floats);
    for (long i = 0; i < args->launches; i++) {
        if (i && i % count == 0)
            barrier(COMPUTE, VK_ACCESS_SHADER_WRITE_BIT, COMPUTE, VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
        if (i && count > 1)
            vkCmdBindDescriptorSets(gpu.cmd, VK_PIPELINE_BIND_POINT_COMPUTE, inc->layout, 0, 1, &sets[i % count], 0,
                                    NULL);
        vkCmdDispatch(gpu.cmd, 1, 1, 1);
    }
    submit_and_wait();
    return now() - start;
}

static void zero(Buffer *buffers, long count) {
    begin();
    for (long i = 0; i < count; i++) vkCmdFillBuffer(gpu.cmd, buffers[i].buffer, 0, VK_WHOLE_SIZE, 0);
    submit_and_wait();
}

/* Whether every float of `buffer` (SMALL_FLOATS of them) is `want`, read back through `staging`. */
static int holds(const Buffer *buffer, float want, const Buffer *staging, const Args *args) {
    float *host = malloc(args->small_floats * sizeof(float));
    int right = host != NULL;
    if (right) download(staging, buffer, host, args->small_floats * sizeof(float));
    for (long j = 0; right && j < args->small_floats; j++) right = host[j] == want;
    free(host);
    return right;
}

/* Whether every float of buffer i holds its share of the launches (launches / count, one more for the first
 * launches % count buffers), read back through `staging`. */
static int shares_are_right(Buffer *buffers, long count, const Buffer *staging, const Args *args) {
    int right = 1;
    for (long i = 0; right && i < count; i++)
        right = holds(&buffers[i], (float)(args->launches / count + (i < args->launches % count)), staging, args);
    return right;
}

/* launch_chain (count 1) or launch_independent (count BUFFERS): the best sample, after a reset each. */
static void launch_case(const char *name, const Kernel *inc, long count, const Buffer *staging, const Args *args) {
    Buffer *buffers = calloc(count, sizeof *buffers);
    VkDescriptorSet *sets = calloc(count, sizeof *sets);
    if (!buffers || !sets) die("out of host memory for %ld buffers", count);
    for (long i = 0; i < count; i++) {
        buffers[i] = buffer_new(args->small_floats * sizeof(float), DEVICE_LOCAL);
        Buffer *bound = &buffers[i];
        sets[i] = kernel_bind(inc, &bound, 1);
    }
    double best = 0;
    for (long rep = 0; rep <= args->reps; rep++) {
        zero(buffers, count);
        double seconds = time_launches(inc, sets, count, args);
        best = keep_best(best, seconds, rep);
    }
    emit_case(name, best, shares_are_right(buffers, count, staging, args));
    for (long i = 0; i < count; i++) buffer_free(&buffers[i]);
    free(buffers), free(sets);
}

/* ----- round trips: each timed on its own ----------------------------------------------------------------------- */
typedef enum { SYNC_IDLE, LAUNCH_SYNC, READBACK_SMALL } Trip;

/* One round trip, from the host back to the host. SYNC_IDLE: vkQueueWaitIdle with nothing queued, the wait a plain
 * program has for "everything I submitted" (its last fence is already waited for and reset). LAUNCH_SYNC: one
 * one-group INC dispatch on `buffer`, recorded into the command buffer, submitted with the fence, the fence polled
 * until it signals (as our sync points wait) and reset. READBACK_SMALL: the same with a copy of the buffer's first float into `staging` after the dispatch,
 * in the same command buffer; returns that float as the host reads it. */
static float round_trip(Trip trip, const Kernel *inc, VkDescriptorSet set, const Buffer *buffer,
                        const Buffer *staging, const Args *args) {
    if (trip == SYNC_IDLE) {
        CHECK(vkQueueWaitIdle(gpu.queue));
        return 0;
    }
    begin();
    kernel_use(inc, set, (uint32_t)args->small_floats);
    vkCmdDispatch(gpu.cmd, 1, 1, 1);
    if (trip == READBACK_SMALL) {
        barrier(COMPUTE, VK_ACCESS_SHADER_WRITE_BIT, TRANSFER, VK_ACCESS_TRANSFER_READ_BIT);
        VkBufferCopy region = {0, 0, sizeof(float)};
        vkCmdCopyBuffer(gpu.cmd, buffer->buffer, staging->buffer, 1, &region);
        barrier(TRANSFER, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
    }
    submit_and_wait_for(1);
    float value = 0;
    if (trip == READBACK_SMALL) memcpy(&value, staging->mapped, sizeof value);
    return value;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The p-th percentile of `count` sorted samples by nearest rank: the ceil(p count / 100)-th smallest, as the
 * bench's spec.spread takes it. */
static double percentile(const double *sorted, long count, long p) {
    long rank = (p * count + 99) / 100;
    return sorted[rank > 0 ? rank - 1 : 0];
}

/* sync_idle, launch_sync or readback_small: ROUNDTRIPS round trips timed one by one after ROUNDTRIP_WARMUP untimed
 * ones, on a zeroed buffer of its own (which sync_idle leaves alone); the line gives their min, median, p99 and max
 * in microseconds. Correct when the buffer counted every launch (launch_sync), when every read-back brought the count
 * so far (readback_small); sync_idle's check is that every wait returned VK_SUCCESS (CHECK ends the program else). */
static void round_trip_case(const char *name, Trip trip, const Kernel *inc, const Buffer *staging, const Args *args) {
    long total = args->roundtrip_warmup + args->roundtrips;
    double *samples = malloc(args->roundtrips * sizeof *samples);
    if (!samples) die("out of host memory for %ld samples", args->roundtrips);
    Buffer buffer = buffer_new(args->small_floats * sizeof(float), DEVICE_LOCAL);
    Buffer *bound = &buffer;
    VkDescriptorSet set = trip == SYNC_IDLE ? VK_NULL_HANDLE : kernel_bind(inc, &bound, 1);
    zero(&buffer, 1);
    int correct = 1;
    for (long i = 0; i < total; i++) {
        double start = now();
        float value = round_trip(trip, inc, set, &buffer, staging, args);
        double seconds = now() - start;
        if (i >= args->roundtrip_warmup) samples[i - args->roundtrip_warmup] = seconds;
        if (trip == READBACK_SMALL) correct &= value == (float)(i + 1);
    }
    if (trip == LAUNCH_SYNC) correct = holds(&buffer, (float)total, staging, args);
    qsort(samples, args->roundtrips, sizeof *samples, by_value);
    printf("{\"case\": \"%s\", \"min_us\": %.6g, \"median_us\": %.6g, \"p99_us\": %.6g, \"max_us\": %.6g, "
           "\"correct\": %s}\n", name, samples[0] * 1e6, percentile(samples, args->roundtrips, 50) * 1e6,
           percentile(samples, args->roundtrips, 99) * 1e6, samples[args->roundtrips - 1] * 1e6,
           correct ? "true" : "false");
    fflush(stdout);
    buffer_free(&buffer);
    free(samples);
}

/* One GPU time of c = a + b: two timestamps around one dispatch, as Device.launch_timed takes ours. */
static double time_add(const Kernel *add, VkDescriptorSet set, uint32_t n4, VkQueryPool queries) {
    uint32_t gx, gy;
    add_grid(n4, &gx, &gy);
    begin();
    vkCmdResetQueryPool(gpu.cmd, queries, 0, 2);
    kernel_use(add, set, n4);
    vkCmdWriteTimestamp(gpu.cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, queries, 0);
    vkCmdDispatch(gpu.cmd, gx, gy, 1);
    vkCmdWriteTimestamp(gpu.cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries, 1);
    submit_and_wait();
    uint64_t ticks[2];
    CHECK(vkGetQueryPoolResults(gpu.device, queries, 0, 2, sizeof ticks, ticks, sizeof ticks[0],
                                VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT));
    uint64_t mask = gpu.timestamp_bits >= 64 ? ~0ull : (1ull << gpu.timestamp_bits) - 1;
    return (double)((ticks[1] - ticks[0]) & mask) * gpu.properties.limits.timestampPeriod * 1e-9;
}

/* add_bw: the best of KERNEL_REPS GPU times; none (and a reason) where the queue has no timestamps. */
static void add_case(const Kernel *add, Buffer *a, Buffer *b, Buffer *c, long n, const Args *args) {
    Buffer *bound[3] = {a, b, c};
    VkDescriptorSet set = kernel_bind(add, bound, 3);
    if (!gpu.timestamp_bits) {
        emit_info("vulkan-c: add_bw not timed: the queue family of %s has no timestamps", gpu.properties.deviceName);
        emit_case("add_bw", 0, -1);
        return;
    }
    VkQueryPoolCreateInfo info = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                                  .queryType = VK_QUERY_TYPE_TIMESTAMP, .queryCount = 2};
    VkQueryPool queries;
    CHECK(vkCreateQueryPool(gpu.device, &info, NULL, &queries));
    double best = 0;
    for (long rep = 0; rep <= args->kernel_reps; rep++) {
        double seconds = time_add(add, set, (uint32_t)(n / 4), queries);
        best = keep_best(best, seconds, rep);
    }
    vkDestroyQueryPool(gpu.device, queries, NULL);
    emit_case("add_bw", best, -1); /* the caller checks c.f32 against numpy */
}

/* upload (of a, checked by reading it back), add_bw and download (of c, written to c.f32 for the caller's check),
 * on arrays of n floats. */
static void array_cases(const Kernel *add, long n, const Args *args) {
    VkDeviceSize bytes = (VkDeviceSize)n * sizeof(float);
    float *a = read_file(args->dir, "a.f32", bytes, NULL), *b = read_file(args->dir, "b.f32", bytes, NULL);
    float *c = malloc(bytes);
    if (!c) die("out of host memory for a %lu-byte array", (unsigned long)bytes);
    Buffer staging = buffer_new(bytes, STAGING), da = buffer_new(bytes, DEVICE_LOCAL),
           db = buffer_new(bytes, DEVICE_LOCAL), dc = buffer_new(bytes, DEVICE_LOCAL);
    double best = 0, best_copy = 0;
    for (long rep = 0; rep <= args->reps; rep++) {
        double start = now(), copy = upload(&staging, &da, a, bytes), seconds = now() - start;
        best = keep_best(best, seconds, rep), best_copy = keep_best(best_copy, copy, rep);
    }
    download(&staging, &da, c, bytes);
    emit_case("upload", best, memcmp(a, c, bytes) == 0);
    emit_info("vulkan-c: upload's copy command alone (staging -> device, no memcpy): %.4g GB/s", bytes / best_copy / 1e9);
    upload(&staging, &db, b, bytes);
    add_case(add, &da, &db, &dc, n, args);
    best = 0;
    for (long rep = 0; rep <= args->reps; rep++) {
        memset(c, 0, bytes);
        double start = now();
        download(&staging, &dc, c, bytes);
        double seconds = now() - start;
        best = keep_best(best, seconds, rep);
    }
    emit_case("download", best, -1);
    write_file(args->dir, "c.f32", c, bytes);
    buffer_free(&staging), buffer_free(&da), buffer_free(&db), buffer_free(&dc);
    free(a), free(b), free(c);
}

/* ----- main ---------------------------------------------------------------------------------------------------- */
#ifndef VULKAN_REF_NO_MAIN /* scripts/round-trip-floor.c includes everything above and has a main of its own */
static long positive(const char *text, const char *what) {
    char *end;
    long value = strtol(text, &end, 10);
    if (*end || value <= 0) die("%s must be a positive integer, not '%s'", what, text);
    return value;
}

static Args parse_args(int argc, char **argv) {
    if (argc != 13)
        die("usage: vulkan_ref DIR DEVICE_NAME LAUNCHES BUFFERS SMALL_FLOATS ELEMS REPS KERNEL_REPS WARMUP_S "
            "ROUNDTRIPS ROUNDTRIP_WARMUP CASES (vkbackend/bench/vulkan_ref.py runs it; the comment at the top of "
            "vulkan_ref.c says what each is)");
    Args args = {.dir = argv[1], .device_name = argv[2], .launches = positive(argv[3], "LAUNCHES"),
                 .buffers = positive(argv[4], "BUFFERS"), .small_floats = positive(argv[5], "SMALL_FLOATS"),
                 .elems = positive(argv[6], "ELEMS"), .reps = positive(argv[7], "REPS"),
                 .kernel_reps = positive(argv[8], "KERNEL_REPS"), .warmup_s = atof(argv[9]),
                 .roundtrips = positive(argv[10], "ROUNDTRIPS"), .cases = argv[12]};
    char *end;
    args.roundtrip_warmup = strtol(argv[11], &end, 10);
    if (*end || args.roundtrip_warmup < 0)
        die("ROUNDTRIP_WARMUP must be a non-negative integer, not '%s'", argv[11]);
    return args;
}

int main(int argc, char **argv) {
    Args args = parse_args(argc, argv);
    /* the backend's switch, read as config.env_flag reads it (which has refused any other word before this runs) */
    const char *validation = getenv("VKBACKEND_VALIDATION");
    open_loader();
    open_instance(validation && (!strcasecmp(validation, "1") || !strcasecmp(validation, "true")
                                 || !strcasecmp(validation, "yes") || !strcasecmp(validation, "on")));
    pick_physical_device(args.device_name);
    /* the independent launches' sets, the chain's, launch_sync's, readback_small's, the warm-up's, add's */
    open_device((uint32_t)args.buffers + 5);
    Kernel inc = kernel_new(args.dir, "inc.spv", 1), add = kernel_new(args.dir, "add.spv", 3);
    /* Arrays larger than the device can bind are shrunk to fit, in whole vec4s, as OurCases.add_bw does. */
    long bindable = (long)(gpu.properties.limits.maxStorageBufferRange / sizeof(float));
    long n = (args.elems < bindable ? args.elems : bindable) / 4 * 4;
    if (n == 0) die("ELEMS must be at least 4 (one vec4), not %ld", args.elems);
    printf("{\"arrays\": %ld}\n", n);
    warm_up(&add, n < WARM_FLOATS ? n : WARM_FLOATS, args.warmup_s);
    Buffer staging = buffer_new(args.small_floats * sizeof(float), STAGING);
    if (wants(&args, "launch_chain")) launch_case("launch_chain", &inc, 1, &staging, &args);
    if (wants(&args, "launch_independent")) launch_case("launch_independent", &inc, args.buffers, &staging, &args);
    if (wants(&args, "sync_idle")) round_trip_case("sync_idle", SYNC_IDLE, &inc, &staging, &args);
    if (wants(&args, "launch_sync")) round_trip_case("launch_sync", LAUNCH_SYNC, &inc, &staging, &args);
    if (wants(&args, "readback_small")) round_trip_case("readback_small", READBACK_SMALL, &inc, &staging, &args);
    buffer_free(&staging);
    if (wants(&args, "add_bw") || wants(&args, "upload") || wants(&args, "download")) array_cases(&add, n, &args);
    kernel_free(&inc), kernel_free(&add);
    close_device();
    return 0;
}
#endif
