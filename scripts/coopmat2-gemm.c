/* coopmat2-gemm: C = A @ B (M = N = K = S, row-major) with VK_NV_cooperative_matrix2's workgroup-scope matrices, one
 * BM x BN tile of C per work group, timed with GPU timestamps (scripts/coopmat2-gemm.py compiles the kernels, builds
 * this and runs it; see there). Prints the driver's cooperative-matrix-2 properties and flexible dimensions, then for
 * each "spv:WG:BM:BN:BK[:flags]" argument (flags: b, bfloat16 inputs; h, float16 results) a check of 512 entries of
 * the first product against a double-precision reference, and TFLOP/s (median [min-max] of 7 submissions of 10
 * products). Exits 1 when a check fails or a kernel cannot run. Needs Vulkan headers that define
 * VK_NV_cooperative_matrix2 and VK_KHR_shader_bfloat16 (1.4.363 was used), and links libvulkan.so.1.
 */
#include <vulkan/vulkan.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <stdint.h>

#define CK(x)                                                                      \
    do {                                                                           \
        VkResult r_ = (x);                                                         \
        if (r_ != VK_SUCCESS) {                                                    \
            fprintf(stderr, "%s:%d %s -> %d\n", __FILE__, __LINE__, #x, r_);       \
            exit(1);                                                               \
        }                                                                          \
    } while (0)

static VkDevice dev; static VkPhysicalDevice pd; static VkQueue q; static uint32_t qf;
static VkPhysicalDeviceMemoryProperties mp;

static uint32_t memtype(uint32_t bits, VkMemoryPropertyFlags want) {
    for (uint32_t i = 0; i < mp.memoryTypeCount; i++)
        if ((bits >> i & 1) && (mp.memoryTypes[i].propertyFlags & want) == want) return i;
    fprintf(stderr, "no memory type\n"); exit(1);
}
typedef struct { VkBuffer b; VkDeviceMemory m; void *p; } Buf;
static Buf mkbuf(VkDeviceSize n, int host) {
    Buf r = {0};
    VkBufferCreateInfo bi = {VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, 0, 0, n,
        VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT, 0,
            0, 0};
    CK(vkCreateBuffer(dev, &bi, 0, &r.b));
    VkMemoryRequirements req; vkGetBufferMemoryRequirements(dev, r.b, &req);
    VkMemoryAllocateInfo ai = {VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, 0, req.size,
        memtype(req.memoryTypeBits,
            host ? VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT |
                       VK_MEMORY_PROPERTY_HOST_CACHED_BIT
                                         : VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT)};
    CK(vkAllocateMemory(dev, &ai, 0, &r.m));
    CK(vkBindBufferMemory(dev, r.b, r.m, 0));
    if (host) CK(vkMapMemory(dev, r.m, 0, n, 0, &r.p));
    return r;
}
static VkCommandPool pool;
static VkCommandBuffer begin(void) {
    VkCommandBufferAllocateInfo ai = {VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, 0, pool,
        VK_COMMAND_BUFFER_LEVEL_PRIMARY, 1};
    VkCommandBuffer cb; CK(vkAllocateCommandBuffers(dev, &ai, &cb));
    VkCommandBufferBeginInfo bi = {VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO, 0,
        VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    CK(vkBeginCommandBuffer(cb, &bi));
    return cb;
}
static void finish(VkCommandBuffer cb) {
    CK(vkEndCommandBuffer(cb));
    VkSubmitInfo si = {VK_STRUCTURE_TYPE_SUBMIT_INFO, 0, 0, 0, 0, 1, &cb};
    CK(vkQueueSubmit(q, 1, &si, VK_NULL_HANDLE));
    CK(vkQueueWaitIdle(q));
    vkFreeCommandBuffers(dev, pool, 1, &cb);
}
static void barrier(VkCommandBuffer cb) {
    VkMemoryBarrier mb = {VK_STRUCTURE_TYPE_MEMORY_BARRIER, 0,
        VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                          VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT};
    vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, 0, 1, &mb, 0, 0,
        0, 0);
}
static uint16_t f2h(float f) {  // round to nearest even, no denormal care needed for [-1, 1] data
    uint32_t x; memcpy(&x, &f, 4);
    uint32_t s = (x >> 16) & 0x8000; int e = ((x >> 23) & 0xff) - 127 + 15; uint32_t m = x & 0x7fffff;
    if (e <= 0) return s;
    uint32_t h = s | (e << 10) | (m >> 13); uint32_t rest = m & 0x1fff;
    if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) h++;
    return h;
}
static float h2f(uint16_t h) {
    uint32_t s = (h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff, x;
    if (e == 0) x = s; else x = s | ((e - 15 + 127) << 23) | (m << 13);
    float f; memcpy(&f, &x, 4); return f;
}
static uint16_t f2b(float f) { uint32_t x; memcpy(&x, &f, 4); x += 0x7fff + ((x >> 16) & 1); return x >> 16; }
static float b2f(uint16_t b) { uint32_t x = (uint32_t)b << 16; float f; memcpy(&f, &x, 4); return f; }
static int cmpd(const void *a, const void *b) { double x = *(double *)a, y = *(double *)b; return x < y ? -1 : x > y; }

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: %s S spv:WG:BM:BN:BK[:flags] ...\n", argv[0]); return 2; }
    uint32_t S = atoi(argv[1]);
    VkApplicationInfo app = {VK_STRUCTURE_TYPE_APPLICATION_INFO, 0, "cm2", 0, 0, 0, VK_API_VERSION_1_3};
    VkInstanceCreateInfo ici = {VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, 0, 0, &app};
    VkInstance inst; CK(vkCreateInstance(&ici, 0, &inst));
    uint32_t n = 0;
    CK(vkEnumeratePhysicalDevices(inst, &n, 0));
    VkPhysicalDevice *pds = calloc(n ? n : 1, sizeof *pds);
    CK(vkEnumeratePhysicalDevices(inst, &n, pds));
    pd = VK_NULL_HANDLE;
    int has_bf16 = 0;
    for (uint32_t i = 0; i < n && !pd; i++) {  // the first device with VK_NV_cooperative_matrix2
        uint32_t ne = 0;
        CK(vkEnumerateDeviceExtensionProperties(pds[i], 0, &ne, 0));
        VkExtensionProperties *e = calloc(ne ? ne : 1, sizeof *e);
        CK(vkEnumerateDeviceExtensionProperties(pds[i], 0, &ne, e));
        int cm2 = 0, bf16 = 0;
        for (uint32_t j = 0; j < ne; j++) {
            cm2 |= !strcmp(e[j].extensionName, VK_NV_COOPERATIVE_MATRIX_2_EXTENSION_NAME);
            bf16 |= !strcmp(e[j].extensionName, VK_KHR_SHADER_BFLOAT16_EXTENSION_NAME);
        }
        if (cm2) { pd = pds[i]; has_bf16 = bf16; }
        free(e);
    }
    if (!pd) { fprintf(stderr, "no device offers VK_NV_cooperative_matrix2\n"); return 3; }
    VkPhysicalDeviceCooperativeMatrix2PropertiesNV p2 = {
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_PROPERTIES_NV};
    VkPhysicalDeviceProperties2 pr = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, &p2};
    vkGetPhysicalDeviceProperties2(pd, &pr);
    printf("device %s driver %u.%u timestampPeriod %.3f; cm2 max wg %u, max dim %u, reserved smem %u, smem %u\n",
           pr.properties.deviceName, pr.properties.driverVersion >> 22, (pr.properties.driverVersion >> 14) & 0xff,
           pr.properties.limits.timestampPeriod, p2.cooperativeMatrixWorkgroupScopeMaxWorkgroupSize,
           p2.cooperativeMatrixFlexibleDimensionsMaxDimension, p2.cooperativeMatrixWorkgroupScopeReservedSharedMemory,
           pr.properties.limits.maxComputeSharedMemorySize);
    PFN_vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV flex =
        (void *)vkGetInstanceProcAddr(inst, "vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV");
    uint32_t nf = 0; CK(flex(pd, &nf, 0));
    VkCooperativeMatrixFlexibleDimensionsPropertiesNV *fl = calloc(nf, sizeof *fl);
    for (uint32_t i = 0; i < nf; i++)
        fl[i].sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_FLEXIBLE_DIMENSIONS_PROPERTIES_NV;
    CK(flex(pd, &nf, fl));
    for (uint32_t i = 0; i < nf; i++)
        printf("flex %u: gran %ux%ux%u A%d B%d C%d R%d sat%d scope%d wg%u\n", i, fl[i].MGranularity, fl[i].NGranularity,
               fl[i].KGranularity, fl[i].AType, fl[i].BType, fl[i].CType, fl[i].ResultType,
                   fl[i].saturatingAccumulation,
               fl[i].scope, fl[i].workgroupInvocations);
    vkGetPhysicalDeviceMemoryProperties(pd, &mp);

    VkPhysicalDeviceShaderBfloat16FeaturesKHR fb = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_BFLOAT16_FEATURES_KHR};
    VkPhysicalDeviceCooperativeMatrix2FeaturesNV f2 = {
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_FEATURES_NV,
                                                        has_bf16 ? &fb : 0};
    VkPhysicalDeviceCooperativeMatrixFeaturesKHR fk = {
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR, &f2};
    VkPhysicalDeviceVulkan13Features f13 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES, &fk};
    VkPhysicalDeviceVulkan12Features f12 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES, &f13};
    VkPhysicalDeviceVulkan11Features f11 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES, &f12};
    VkPhysicalDeviceFeatures2 f = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, &f11};
    vkGetPhysicalDeviceFeatures2(pd, &f);
    printf("cm2 features: wgscope %d flexdims %d reductions %d conversions %d perelement %d tensoraddr %d "
           "blockloads %d; bf16 %d/%d\n",
           f2.cooperativeMatrixWorkgroupScope, f2.cooperativeMatrixFlexibleDimensions, f2.cooperativeMatrixReductions,
           f2.cooperativeMatrixConversions, f2.cooperativeMatrixPerElementOperations,
               f2.cooperativeMatrixTensorAddressing,
           f2.cooperativeMatrixBlockLoads, fb.shaderBFloat16Type, fb.shaderBFloat16CooperativeMatrix);
    f.features.robustBufferAccess = VK_FALSE; f12.bufferDeviceAddressCaptureReplay = VK_FALSE;
    f12.bufferDeviceAddressMultiDevice = VK_FALSE;
    const char *exts[] = {"VK_KHR_cooperative_matrix", "VK_NV_cooperative_matrix2", "VK_KHR_shader_bfloat16"};
    uint32_t n_exts = has_bf16 ? 3 : 2;
    float prio = 1.0f;
    uint32_t nq = 8; VkQueueFamilyProperties qp[8]; vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, qp);
    for (qf = 0; qf < nq && !(qp[qf].queueFlags & VK_QUEUE_COMPUTE_BIT); qf++) {}
    if (qf == nq) { fprintf(stderr, "no compute queue\n"); return 3; }
    VkDeviceQueueCreateInfo qci = {VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, 0, 0, qf, 1, &prio};
    VkDeviceCreateInfo dci = {VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, &f, 0, 1, &qci, 0, 0, n_exts, exts, 0};
    CK(vkCreateDevice(pd, &dci, 0, &dev));
    vkGetDeviceQueue(dev, qf, 0, &q);
    VkCommandPoolCreateInfo cpi = {VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO, 0,
        VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT, qf};
    CK(vkCreateCommandPool(dev, &cpi, 0, &pool));

    size_t nin = (size_t)S * S, inb = nin * 2, outb = nin * 4;
    Buf A16 = mkbuf(inb, 0), B16 = mkbuf(inb, 0), Abf = mkbuf(inb, 0), Bbf = mkbuf(inb, 0), C = mkbuf(outb, 0);
    Buf st = mkbuf(outb > 2 * inb ? outb : 2 * inb, 1);
    float *af = malloc(nin * 4), *bf = malloc(nin * 4), *ab = malloc(nin * 4), *bb = malloc(nin * 4);
    srand(1);
    for (size_t i = 0; i < nin; i++) {
        float x = (float)rand() / RAND_MAX * 2 - 1, y = (float)rand() / RAND_MAX * 2 - 1;
        uint16_t *s = st.p; s[i] = f2h(x); s[nin + i] = f2h(y); af[i] = h2f(s[i]); bf[i] = h2f(s[nin + i]);
    }
    VkCommandBuffer cb = begin();
    VkBufferCopy c0 = {0, 0, inb}, c1 = {inb, 0, inb};
    vkCmdCopyBuffer(cb, st.b, A16.b, 1, &c0); vkCmdCopyBuffer(cb, st.b, B16.b, 1, &c1); finish(cb);
    for (size_t i = 0; i < nin; i++) {
        uint16_t *s = st.p;
        s[i] = f2b(af[i] * 0.999f);
        s[nin + i] = f2b(bf[i] * 0.999f);
        ab[i] = b2f(s[i]);
        bb[i] = b2f(s[nin + i]);
    }
    cb = begin(); vkCmdCopyBuffer(cb, st.b, Abf.b, 1, &c0); vkCmdCopyBuffer(cb, st.b, Bbf.b, 1, &c1); finish(cb);

    VkDescriptorSetLayoutBinding bnd[3];
    for (int i = 0; i < 3; i++) bnd[i] = (VkDescriptorSetLayoutBinding){i, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1,
        VK_SHADER_STAGE_COMPUTE_BIT, 0};
    VkDescriptorSetLayoutCreateInfo dli = {VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO, 0, 0, 3, bnd};
    VkDescriptorSetLayout dsl; CK(vkCreateDescriptorSetLayout(dev, &dli, 0, &dsl));
    VkPushConstantRange pcr = {VK_SHADER_STAGE_COMPUTE_BIT, 0, 12};
    VkPipelineLayoutCreateInfo pli = {VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO, 0, 0, 1, &dsl, 1, &pcr};
    VkPipelineLayout pl; CK(vkCreatePipelineLayout(dev, &pli, 0, &pl));
    VkDescriptorPoolSize ps = {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 6};
    VkDescriptorPoolCreateInfo dpi = {VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO, 0, 0, 2, 1, &ps};
    VkDescriptorPool dp; CK(vkCreateDescriptorPool(dev, &dpi, 0, &dp));
    VkDescriptorSet ds[2]; VkDescriptorSetLayout dsls[2] = {dsl, dsl};
    VkDescriptorSetAllocateInfo dai = {VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO, 0, dp, 2, dsls};
    CK(vkAllocateDescriptorSets(dev, &dai, ds));
    for (int s = 0; s < 2; s++) {
        VkDescriptorBufferInfo bi[3] = {{s ? Abf.b : A16.b, 0, VK_WHOLE_SIZE}, {s ? Bbf.b : B16.b, 0, VK_WHOLE_SIZE},
            {C.b, 0, VK_WHOLE_SIZE}};
        VkWriteDescriptorSet w = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, 0, ds[s], 0, 0, 3,
            VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 0, bi};
        vkUpdateDescriptorSets(dev, 1, &w, 0, 0);
    }
    VkQueryPoolCreateInfo qpi = {VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO, 0, 0, VK_QUERY_TYPE_TIMESTAMP, 2};
    VkQueryPool qpool; CK(vkCreateQueryPool(dev, &qpi, 0, &qpool));

    int failed = 0;
    for (int a = 2; a < argc; a++) {
        char file[256]; uint32_t sc[4]; char flags[16] = "";
        if (sscanf(argv[a], "%255[^:]:%u:%u:%u:%u:%15s", file, &sc[0], &sc[1], &sc[2], &sc[3],
            flags) < 5) { fprintf(stderr, "bad %s\n", argv[a]); failed = 1; continue; }
        int isbf = strchr(flags, 'b') != 0, out16 = strchr(flags, 'h') != 0;
        if (!sc[0] || !sc[1] || !sc[2] || !sc[3]) { printf("%s: sizes must be above 0\n",
            argv[a]); failed = 1; continue; }
        if (isbf && !has_bf16) { printf("%s: the device has no VK_KHR_shader_bfloat16\n",
            argv[a]); failed = 1; continue; }
        if (S % sc[1] || S % sc[2] || S % sc[3]) { printf("%s: tile does not divide %u\n", argv[a], S); continue; }
        FILE *fh = fopen(file, "rb"); if (!fh) { printf("%s: no file\n", argv[a]); failed = 1; continue; }
        static uint32_t code[1 << 16];
        size_t nb = fread(code, 1, sizeof code, fh);
        int whole = feof(fh);
        fclose(fh);
        if (!whole) { printf("%s: more than %zu bytes of SPIR-V\n", argv[a], sizeof code); failed = 1; continue; }
        VkShaderModuleCreateInfo smi = {VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, 0, 0, nb, code};
        VkShaderModule sm; CK(vkCreateShaderModule(dev, &smi, 0, &sm));
        VkSpecializationMapEntry me[4]; for (int i = 0; i < 4; i++) me[i] = (VkSpecializationMapEntry){i, i * 4, 4};
        VkSpecializationInfo spi = {4, me, 16, sc};
        VkComputePipelineCreateInfo cpci = {VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO, 0, 0,
            {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, 0, 0, VK_SHADER_STAGE_COMPUTE_BIT, sm, "main",
                &spi}, pl};
        VkPipeline pipe; VkResult r = vkCreateComputePipelines(dev, VK_NULL_HANDLE, 1, &cpci, 0, &pipe);
        if (r != VK_SUCCESS) {
            printf("%s: pipeline creation -> %d\n", argv[a], r);
            vkDestroyShaderModule(dev, sm, 0);
            failed = 1;
            continue;
        }
        uint32_t pc[3] = {S, S, S};
        const int R = 10, RUNS = 7;
        double t[RUNS];
        for (int run = -1; run < RUNS; run++) {
            cb = begin();
            vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pipe);
            vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pl, 0, 1, &ds[isbf], 0, 0);
            vkCmdPushConstants(cb, pl, VK_SHADER_STAGE_COMPUTE_BIT, 0, 12, pc);
            if (run < 0) {  // the checked product starts from NaNs, not from the last kernel's result
                vkCmdFillBuffer(cb, C.b, 0, VK_WHOLE_SIZE, 0xFFFFFFFFu);
                barrier(cb);
            }
            vkCmdResetQueryPool(cb, qpool, 0, 2);
            vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, qpool, 0);
            for (int i = 0; i < (run < 0 ? 1 : R); i++) { if (i) barrier(cb); vkCmdDispatch(cb, S / sc[2], S / sc[1],
                1); }
            vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, qpool, 1);
            finish(cb);
            uint64_t ts[2]; CK(vkGetQueryPoolResults(dev, qpool, 0, 2, 16, ts, 8,
                VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT));
            if (run >= 0) t[run] = (ts[1] - ts[0]) * pr.properties.limits.timestampPeriod * 1e-9 / R;
            else {  // check the first product against a double reference on sampled entries
                cb = begin(); VkBufferCopy cc = {0, 0, out16 ? nin * 2 : outb}; vkCmdCopyBuffer(cb, C.b, st.b, 1,
                    &cc); finish(cb);
                double worst = 0; int bad = 0;
                for (int k = 0; k < 512; k++) {
                    size_t i = (size_t)rand() % S, j = (size_t)rand() % S; double ref = 0, mag = 0;
                    const float *x = isbf ? ab : af, *y = isbf ? bb : bf;
                    for (size_t l = 0; l < S; l++) {
                        double term = (double)x[i * S + l] * y[l * S + j];
                        ref += term;
                        mag += fabs(term);
                    }
                    double got = out16 ? h2f(((uint16_t *)st.p)[i * S + j]) : ((float *)st.p)[i * S + j];
                    double err = fabs(got - ref) / (mag + 1e-6);
                    if (err > worst) worst = err;
                    if (err > (out16 ? 2e-3 : 1e-4) || got != got) bad++;
                }
                printf("%s: check %s (worst relative error %.2e over 512 entries)\n", argv[a], bad ? "FAILED" : "ok",
                       worst);
                failed |= bad != 0;
            }
        }
        qsort(t, RUNS, sizeof t[0], cmpd);
        double fl2 = 2.0 * S * S * S * 1e-12;
        printf("%s: %u^3 %.1f TFLOP/s median [%.1f-%.1f], %.1f us a product\n", argv[a], S, fl2 / t[RUNS / 2],
            fl2 / t[RUNS - 1], fl2 / t[0], t[RUNS / 2] * 1e6);
        fflush(stdout);
        vkDestroyPipeline(dev, pipe, 0); vkDestroyShaderModule(dev, sm, 0);
    }
    return failed;
}
