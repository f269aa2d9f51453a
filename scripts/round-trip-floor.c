/* round-trip-floor: what one round trip from the host to the GPU and back costs on a driver, by the ways a program
 * can make it, in plain C (scripts/round-trip-floor.py builds and runs it; see there). It includes the bench's C
 * reference (vkbackend/bench/vulkan_ref.c) for the device, buffers, kernels and commands, and adds:
 *
 *   - the wait: a fence polled with vkWaitForFences(0) or vkGetFenceStatus, or waited for in the driver; a timeline
 *     semaphore polled with vkGetSemaphoreCounterValue, or waited for with vkWaitSemaphores;
 *   - the work: an empty command buffer; one tiny dispatch (with and without the barrier every submission opens
 *     with); that dispatch and a read-back of its first float through a host-visible staging buffer, by
 *     vkCmdCopyBuffer, by a copy kernel, by the dispatch writing it there itself, or straight from device memory the
 *     host maps (DEVICE_LOCAL|HOST_VISIBLE, where the device has it);
 *   - the end of the command buffer (with one tiny dispatch): no barrier, a barrier to the host, or vkbackend's
 *     completion marker (that barrier reaching every later command too, then the trip's number written into a word of
 *     host memory by vkCmdFillBuffer, by vkCmdUpdateBuffer or by a one-invocation kernel, then a barrier to the
 *     host), polled in memory with no fence at all (marker_poll) or with the fence as well; or an event set after the
 *     barrier to the host, polled with vkGetEventStatus (event_poll);
 *   - with VK_EXT_calibrated_timestamps, where the time goes: the GPU's timestamps at the start and end of the
 *     command buffer, placed on the host's clock;
 *   - `memory` mode: `c = a + b` on buffers of plain device memory against host-mappable device memory, and the
 *     host's uncached reads of that memory by size.
 *
 *     round-trip-floor DIR DEVICE_NAME TRIPS [memory]
 *
 * DIR holds inc.spv, add.spv, copy.spv and fused.spv. It prints JSON lines: {"info": ...}, {"memory_type": ...} per
 * type, one {"work": ...} per variant of round trip (min, median, p99 and max of TRIPS round trips after 300 untimed
 * ones, in us, and the medians of each phase), or in `memory` mode {"add": ...} and {"host_read": ...} lines; under
 * VKBACKEND_VALIDATION=1, one {"validation": ...} per message of the Khronos validation layer. */
#define VULKAN_REF_NO_MAIN
#include "vulkan_ref.c"

#include <stddef.h>

#define WARMUP_TRIPS 300
#define FLOATS 64 /* the round trips' buffer */

static PFN_vkCreateSemaphore vkCreateSemaphore;
static PFN_vkGetSemaphoreCounterValue vkGetSemaphoreCounterValue;
static PFN_vkWaitSemaphores vkWaitSemaphores;
static PFN_vkGetFenceStatus vkGetFenceStatus;
static PFN_vkCmdUpdateBuffer vkCmdUpdateBuffer;
static PFN_vkCreateEvent vkCreateEvent;
static PFN_vkCmdSetEvent vkCmdSetEvent;
static PFN_vkGetEventStatus vkGetEventStatus;
static PFN_vkResetEvent vkResetEvent;
static PFN_vkFreeCommandBuffers vkFreeCommandBuffers;
static PFN_vkGetCalibratedTimestampsEXT vkGetCalibratedTimestampsEXT; /* NULL without the extension */

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* The device, with timeline semaphores and, where offered, calibrated timestamps. */
static void open_probe_device(const char *name) {
    static VkPhysicalDeviceVulkan12Features features = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
                                                        .timelineSemaphore = VK_TRUE};
    static const char *calibrated = VK_EXT_CALIBRATED_TIMESTAMPS_EXTENSION_NAME;
    pick_physical_device(name);
    PFN_vkEnumerateDeviceExtensionProperties enumerate = (PFN_vkEnumerateDeviceExtensionProperties)required(
        vkGetInstanceProcAddr(gpu.instance, "vkEnumerateDeviceExtensionProperties"),
        "vkEnumerateDeviceExtensionProperties");
    uint32_t count = 0;
    CHECK(enumerate(gpu.physical, NULL, &count, NULL));
    VkExtensionProperties *extensions = calloc(count ? count : 1, sizeof *extensions);
    if (!extensions) die("out of host memory listing %u extensions", count);
    CHECK(enumerate(gpu.physical, NULL, &count, extensions));
    int has_calibrated = 0;
    for (uint32_t i = 0; i < count; i++) has_calibrated |= !strcmp(extensions[i].extensionName, calibrated);
    free(extensions);
    device_extras.next = &features;
    device_extras.extensions = &calibrated;
    device_extras.extension_count = (uint32_t)has_calibrated;
    open_device(16);
#define LOAD(name) name = (PFN_##name)required(vkGetDeviceProcAddr(gpu.device, #name), #name);
    LOAD(vkCreateSemaphore) LOAD(vkGetSemaphoreCounterValue) LOAD(vkWaitSemaphores) LOAD(vkGetFenceStatus)
    LOAD(vkCmdUpdateBuffer) LOAD(vkCreateEvent) LOAD(vkCmdSetEvent) LOAD(vkGetEventStatus) LOAD(vkResetEvent)
    LOAD(vkFreeCommandBuffers)
    if (has_calibrated) LOAD(vkGetCalibratedTimestampsEXT)
#undef LOAD
}

/* The first memory type with all of `flags` (exactly `flags` with `exact`); UINT32_MAX without one. */
static uint32_t memory_type_with(VkMemoryPropertyFlags flags, int exact) {
    for (uint32_t i = 0; i < gpu.memory.memoryTypeCount; i++) {
        VkMemoryPropertyFlags has = gpu.memory.memoryTypes[i].propertyFlags;
        if (exact ? has == flags : (has & flags) == flags) return i;
    }
    return UINT32_MAX;
}

/* A buffer of `size` bytes in memory type `type`, mapped with `map`. */
static Buffer buffer_of_type(VkDeviceSize size, uint32_t type, int map) {
    Buffer b = {0};
    VkBufferCreateInfo info = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = size,
                               .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                        VK_BUFFER_USAGE_TRANSFER_DST_BIT};
    CHECK(vkCreateBuffer(gpu.device, &info, NULL, &b.buffer));
    VkMemoryRequirements needs;
    vkGetBufferMemoryRequirements(gpu.device, b.buffer, &needs);
    if (!(needs.memoryTypeBits & (1u << type))) die("a buffer cannot live in memory type %u", type);
    VkMemoryAllocateInfo allocate = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .allocationSize = needs.size,
                                     .memoryTypeIndex = type};
    CHECK(vkAllocateMemory(gpu.device, &allocate, NULL, &b.memory));
    CHECK(vkBindBufferMemory(gpu.device, b.buffer, b.memory, 0));
    if (map) CHECK(vkMapMemory(gpu.device, b.memory, 0, VK_WHOLE_SIZE, 0, &b.mapped));
    return b;
}

/* ----- round trips ------------------------------------------------------------------------------------------- */
typedef enum { EMPTY, LAUNCH, READ_COPY, READ_KERNEL, READ_FUSED, READ_MAPPED } Work;
typedef enum { FENCE_POLL, FENCE_STATUS, FENCE_BLOCK, TIMELINE_POLL, TIMELINE_BLOCK, MARKER_POLL, EVENT_POLL } Wait;
typedef enum { END_NONE, END_HOST, END_FILL, END_UPDATE, END_KERNEL, END_EVENT } End; /* after the command buffer's work */
static const char *const work_names[] = {"empty", "launch", "read_copy", "read_kernel", "read_fused", "read_mapped"};
static const char *const wait_names[] = {"fence_poll", "fence_status", "fence_block", "timeline_poll",
                                         "timeline_block", "marker_poll", "event_poll"};
static const char *const end_names[] = {"none", "host_barrier", "marker_fill", "marker_update", "marker_kernel",
                                        "event"};

typedef struct {
    const Kernel *inc, *copy, *fused;
    VkDescriptorSet inc_set, copy_set, fused_set, mapped_set;
    const Buffer *buffer, *staging, *mapped; /* mapped: NULL where the device has no host-mappable device memory */
    const Buffer *marker;                    /* a word of host memory the marker endings write the trip's number into */
    uint32_t marker_value;                   /* (the kernel's: a float it adds 1 to) */
    VkDescriptorSet marker_set;              /* the increment kernel on the marker */
    VkEvent event;
    End end;
    VkQueryPool queries;
    VkSemaphore timeline;
    uint64_t timeline_value;
    double device_ticks, host_ns; /* a calibration: the same moment on the GPU's clock and the host's */
} Probe;

/* One round trip's phases in us: the whole, recording, vkQueueSubmit, the wait; with timestamps, submit to the GPU's
 * start, the GPU's own time, and its end to the host seeing it. */
typedef struct { double total, record, submit, wait, to_gpu, gpu, seen; } Phases;

static void calibrate(Probe *p) {
    VkCalibratedTimestampInfoEXT info[2] = {
        {VK_STRUCTURE_TYPE_CALIBRATED_TIMESTAMP_INFO_EXT, NULL, VK_TIME_DOMAIN_DEVICE_EXT},
        {VK_STRUCTURE_TYPE_CALIBRATED_TIMESTAMP_INFO_EXT, NULL, VK_TIME_DOMAIN_CLOCK_MONOTONIC_EXT}};
    uint64_t stamps[2], deviation;
    CHECK(vkGetCalibratedTimestampsEXT(gpu.device, 2, info, stamps, &deviation));
    p->device_ticks = (double)stamps[0], p->host_ns = (double)stamps[1];
}

static double host_ns_of(const Probe *p, uint64_t ticks) {
    return p->host_ns + ((double)ticks - p->device_ticks) * gpu.properties.limits.timestampPeriod;
}

static void record(const Probe *p, Work work, int opening_barrier, int stamps) {
    VkCommandBufferBeginInfo begin_info = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                           .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    CHECK(vkResetCommandBuffer(gpu.cmd, 0));
    CHECK(vkBeginCommandBuffer(gpu.cmd, &begin_info));
    if (stamps) {
        vkCmdResetQueryPool(gpu.cmd, p->queries, 0, 2);
        vkCmdWriteTimestamp(gpu.cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, p->queries, 0);
    }
    if (opening_barrier) /* as vulkan_ref.c's begin(): the previous submission's writes before this one's accesses */
        barrier(COMPUTE | TRANSFER, VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT, COMPUTE | TRANSFER,
                VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                    VK_ACCESS_TRANSFER_WRITE_BIT);
    if (work == LAUNCH || work == READ_COPY || work == READ_KERNEL || work == READ_MAPPED) {
        kernel_use(p->inc, work == READ_MAPPED ? p->mapped_set : p->inc_set, FLOATS);
        vkCmdDispatch(gpu.cmd, 1, 1, 1);
    }
    if (work == READ_FUSED) {
        kernel_use(p->fused, p->fused_set, FLOATS);
        vkCmdDispatch(gpu.cmd, 1, 1, 1);
    }
    if (work == READ_COPY) {
        barrier(COMPUTE, VK_ACCESS_SHADER_WRITE_BIT, TRANSFER, VK_ACCESS_TRANSFER_READ_BIT);
        VkBufferCopy region = {0, 0, sizeof(float)};
        vkCmdCopyBuffer(gpu.cmd, p->buffer->buffer, p->staging->buffer, 1, &region);
        barrier(TRANSFER, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
    } else if (work == READ_KERNEL) {
        barrier(COMPUTE, VK_ACCESS_SHADER_WRITE_BIT, COMPUTE, VK_ACCESS_SHADER_READ_BIT);
        kernel_use(p->copy, p->copy_set, 1);
        vkCmdDispatch(gpu.cmd, 1, 1, 1);
    }
    if (work == READ_KERNEL || work == READ_FUSED || work == READ_MAPPED)
        barrier(COMPUTE, VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
    if (p->end == END_HOST || p->end == END_EVENT) {
        barrier(COMPUTE | TRANSFER, VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_HOST_BIT,
                VK_ACCESS_HOST_READ_BIT);
    } else if (p->end == END_FILL || p->end == END_UPDATE) { /* as vkbackend's csrc/recorder.c ends a window */
        barrier(COMPUTE | TRANSFER, VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                VK_PIPELINE_STAGE_HOST_BIT | COMPUTE | TRANSFER,
                VK_ACCESS_HOST_READ_BIT | VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                    VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT);
        if (p->end == END_FILL)
            vkCmdFillBuffer(gpu.cmd, p->marker->buffer, 0, sizeof(uint32_t), p->marker_value);
        else
            vkCmdUpdateBuffer(gpu.cmd, p->marker->buffer, 0, sizeof(uint32_t), &p->marker_value);
        barrier(TRANSFER, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
    } else if (p->end == END_KERNEL) {
        barrier(COMPUTE | TRANSFER, VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT, COMPUTE,
                VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
        kernel_use(p->inc, p->marker_set, 1);
        vkCmdDispatch(gpu.cmd, 1, 1, 1);
        barrier(COMPUTE, VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
    }
    if (p->end == END_EVENT) vkCmdSetEvent(gpu.cmd, p->event, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT);
    if (stamps) vkCmdWriteTimestamp(gpu.cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, p->queries, 1);
    CHECK(vkEndCommandBuffer(gpu.cmd));
}

/* One round trip; returns the float it read back (0 for the work that reads nothing). */
static float one_trip(Probe *p, Work work, Wait wait, int opening_barrier, int stamps, Phases *out) {
    uint64_t t0 = now_ns();
    p->marker_value++;
    record(p, work, opening_barrier, stamps);
    uint64_t t1 = now_ns();
    int timeline = wait == TIMELINE_POLL || wait == TIMELINE_BLOCK;
    uint64_t target = p->timeline_value + 1;
    VkTimelineSemaphoreSubmitInfo values = {.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
                                            .signalSemaphoreValueCount = 1, .pSignalSemaphoreValues = &target};
    VkSubmitInfo submit = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .pNext = timeline ? &values : NULL,
                           .commandBufferCount = 1, .pCommandBuffers = &gpu.cmd,
                           .signalSemaphoreCount = timeline ? 1 : 0, .pSignalSemaphores = &p->timeline};
    int fenced = !timeline && wait != MARKER_POLL && wait != EVENT_POLL;
    CHECK(vkQueueSubmit(gpu.queue, 1, &submit, fenced ? gpu.fence : VK_NULL_HANDLE));
    if (timeline) p->timeline_value = target;
    uint64_t t2 = now_ns();
    VkResult r;
    uint64_t value = 0;
    VkSemaphoreWaitInfo wait_info = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO, .semaphoreCount = 1,
                                     .pSemaphores = &p->timeline, .pValues = &target};
    switch (wait) {
    case FENCE_POLL: while ((r = vkWaitForFences(gpu.device, 1, &gpu.fence, VK_TRUE, 0)) == VK_TIMEOUT) {} break;
    case FENCE_STATUS: while ((r = vkGetFenceStatus(gpu.device, gpu.fence)) == VK_NOT_READY) {} break;
    case FENCE_BLOCK: r = vkWaitForFences(gpu.device, 1, &gpu.fence, VK_TRUE, FENCE_TIMEOUT_NS); break;
    case TIMELINE_POLL:
        while ((r = vkGetSemaphoreCounterValue(gpu.device, p->timeline, &value)) == VK_SUCCESS && value < target) {}
        break;
    case MARKER_POLL:
        if (p->end == END_KERNEL)
            while (*(volatile const float *)p->marker->mapped != (float)p->marker_value) {}
        else
            while (__atomic_load_n((const uint32_t *)p->marker->mapped, __ATOMIC_ACQUIRE) != p->marker_value) {}
        r = VK_SUCCESS;
        break;
    case EVENT_POLL: while ((r = vkGetEventStatus(gpu.device, p->event)) == VK_EVENT_RESET) {} break;
    default: r = vkWaitSemaphores(gpu.device, &wait_info, FENCE_TIMEOUT_NS); break;
    }
    if (r == VK_EVENT_SET) r = VK_SUCCESS;
    CHECK(r);
    uint64_t t3 = now_ns();
    float read = 0;
    if (work == READ_COPY || work == READ_KERNEL || work == READ_FUSED) memcpy(&read, p->staging->mapped, sizeof read);
    if (work == READ_MAPPED) memcpy(&read, p->mapped->mapped, sizeof read);
    uint64_t t4 = now_ns();
    if (fenced) CHECK(vkResetFences(gpu.device, 1, &gpu.fence));
    if (wait == MARKER_POLL || wait == EVENT_POLL) CHECK(vkQueueWaitIdle(gpu.queue)); /* untimed: tells Vulkan the
                                                                                         command buffer is done */
    if (wait == EVENT_POLL) CHECK(vkResetEvent(gpu.device, p->event));
    *out = (Phases){(t4 - t0) * 1e-3, (t1 - t0) * 1e-3, (t2 - t1) * 1e-3, (t3 - t2) * 1e-3, 0, 0, 0};
    if (stamps) {
        uint64_t ticks[2];
        CHECK(vkGetQueryPoolResults(gpu.device, p->queries, 0, 2, sizeof ticks, ticks, sizeof ticks[0],
                                    VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT));
        double start = host_ns_of(p, ticks[0]), end = host_ns_of(p, ticks[1]);
        out->to_gpu = (start - (double)t1) * 1e-3, out->gpu = (end - start) * 1e-3, out->seen = ((double)t3 - end) * 1e-3;
    }
    return read;
}

/* The median of one phase over `count` round trips (sorting a copy); min, p99 and max on request, by nearest rank
 * as the bench's round trips (vulkan_ref.c's `percentile`). */
static double phase_median(const Phases *all, long count, size_t field, double *min, double *p99, double *max) {
    double *v = malloc(count * sizeof *v);
    if (!v) die("out of host memory for %ld samples", count);
    for (long i = 0; i < count; i++) v[i] = *(const double *)((const char *)&all[i] + field);
    qsort(v, count, sizeof *v, by_value);
    double median = percentile(v, count, 50);
    if (min) *min = v[0], *p99 = percentile(v, count, 99), *max = v[count - 1];
    free(v);
    return median;
}

/* TRIPS round trips of one variant after WARMUP_TRIPS; a read-back is correct when each brought one more. */
static void variant(Probe *p, Work work, Wait wait, int opening_barrier, int stamps, long trips) {
    Phases *all = malloc(trips * sizeof *all);
    if (!all) die("out of host memory for %ld samples", trips);
    if (stamps) calibrate(p);
    if (p->end == END_KERNEL) { /* the kernel adds 1 to a float: count from 0 (a host write before the submit) */
        memset(p->marker->mapped, 0, sizeof(float));
        p->marker_value = 0;
    }
    int reads = work != EMPTY && work != LAUNCH, correct = 1;
    float last = -1;
    for (long i = -WARMUP_TRIPS; i < trips; i++) {
        Phases phases;
        float value = one_trip(p, work, wait, opening_barrier, stamps, &phases);
        if (reads && last >= 0 && value != last + 1) correct = 0;
        last = value;
        if (i >= 0) all[i] = phases;
    }
    double min, p99, max, median = phase_median(all, trips, offsetof(Phases, total), &min, &p99, &max);
    printf("{\"work\": \"%s\", \"wait\": \"%s\", \"end\": \"%s\", \"opening_barrier\": %d, \"timestamps\": %d, "
           "\"min\": %.2f, \"median\": %.2f, \"p99\": %.2f, \"max\": %.2f, \"record\": %.2f, \"submit\": %.2f, "
           "\"wait_us\": %.2f",
           work_names[work], wait_names[wait], end_names[p->end], opening_barrier, stamps, min, median, p99, max,
           phase_median(all, trips, offsetof(Phases, record), 0, 0, 0),
           phase_median(all, trips, offsetof(Phases, submit), 0, 0, 0),
           phase_median(all, trips, offsetof(Phases, wait), 0, 0, 0));
    if (stamps)
        printf(", \"submit_to_gpu_start\": %.2f, \"gpu\": %.2f, \"gpu_end_to_seen\": %.2f",
               phase_median(all, trips, offsetof(Phases, to_gpu), 0, 0, 0),
               phase_median(all, trips, offsetof(Phases, gpu), 0, 0, 0),
               phase_median(all, trips, offsetof(Phases, seen), 0, 0, 0));
    printf(", \"correct\": %s}\n", correct ? "true" : "false");
    fflush(stdout);
    free(all);
}

static void round_trips(const char *dir, long trips) {
    Probe p = {0};
    VkSemaphoreTypeCreateInfo type = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
                                      .semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE};
    VkSemaphoreCreateInfo semaphore = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, .pNext = &type};
    CHECK(vkCreateSemaphore(gpu.device, &semaphore, NULL, &p.timeline));
    Kernel inc = kernel_new(dir, "inc.spv", 1), add = kernel_new(dir, "add.spv", 3),
           copy = kernel_new(dir, "copy.spv", 2), fused = kernel_new(dir, "fused.spv", 2);
    warm_up(&add, WARM_FLOATS, 1.0);
    Buffer buffer = buffer_new(FLOATS * sizeof(float), DEVICE_LOCAL), staging = buffer_new(FLOATS * sizeof(float), STAGING);
    uint32_t mappable = memory_type_with(VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                             VK_MEMORY_PROPERTY_HOST_COHERENT_BIT, 0);
    Buffer mapped = {0}, marker = buffer_new(64, STAGING);
    memset(marker.mapped, 0, 64);
    zero(&buffer, 1);
    Buffer *one[1] = {&buffer}, *two[2] = {&buffer, &staging};
    p.inc = &inc, p.copy = &copy, p.fused = &fused, p.buffer = &buffer, p.staging = &staging, p.marker = &marker;
    Buffer *marked[1] = {&marker};
    p.marker_set = kernel_bind(&inc, marked, 1);
    VkEventCreateInfo event = {.sType = VK_STRUCTURE_TYPE_EVENT_CREATE_INFO};
    CHECK(vkCreateEvent(gpu.device, &event, NULL, &p.event));
    p.inc_set = kernel_bind(&inc, one, 1), p.copy_set = kernel_bind(&copy, two, 2);
    p.fused_set = kernel_bind(&fused, two, 2);
    if (mappable != UINT32_MAX) {
        mapped = buffer_of_type(FLOATS * sizeof(float), mappable, 1);
        memset(mapped.mapped, 0, FLOATS * sizeof(float));
        Buffer *m[1] = {&mapped};
        p.mapped = &mapped, p.mapped_set = kernel_bind(&inc, m, 1);
    }
    VkQueryPoolCreateInfo queries = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                                     .queryType = VK_QUERY_TYPE_TIMESTAMP, .queryCount = 2};
    CHECK(vkCreateQueryPool(gpu.device, &queries, NULL, &p.queries));
    for (int w = FENCE_POLL; w <= TIMELINE_POLL; w += TIMELINE_POLL - FENCE_POLL) variant(&p, EMPTY, w, 0, 0, trips);
    for (int w = FENCE_POLL; w <= TIMELINE_BLOCK; w++) variant(&p, LAUNCH, w, 1, 0, trips);
    variant(&p, LAUNCH, FENCE_POLL, 0, 0, trips);
    variant(&p, LAUNCH, TIMELINE_POLL, 0, 0, trips);
    for (int work = READ_COPY; work <= READ_MAPPED; work++)
        if (work != READ_MAPPED || p.mapped)
            for (int w = FENCE_POLL; w <= TIMELINE_POLL; w += TIMELINE_POLL - FENCE_POLL) variant(&p, work, w, 1, 0, trips);
    for (End end = END_HOST; end <= END_EVENT; end++) { /* how vkbackend's batches end, and the alternatives */
        p.end = end;
        variant(&p, LAUNCH, FENCE_POLL, 1, 0, trips);
        if (end != END_HOST) variant(&p, LAUNCH, end == END_EVENT ? EVENT_POLL : MARKER_POLL, 1, 0, trips);
        if (end != END_HOST) variant(&p, LAUNCH, end == END_EVENT ? EVENT_POLL : MARKER_POLL, 0, 0, trips);
    }
    p.end = END_NONE;
    if (vkGetCalibratedTimestampsEXT && gpu.timestamp_bits) {
        variant(&p, EMPTY, FENCE_POLL, 0, 1, trips);
        for (int w = FENCE_POLL; w <= TIMELINE_POLL; w += TIMELINE_POLL - FENCE_POLL) variant(&p, LAUNCH, w, 1, 1, trips);
        variant(&p, READ_COPY, FENCE_POLL, 1, 1, trips);
        variant(&p, READ_KERNEL, FENCE_POLL, 1, 1, trips);
        for (End end = END_HOST; end <= END_FILL; end++) {
            p.end = end;
            variant(&p, LAUNCH, end == END_HOST ? FENCE_POLL : MARKER_POLL, 1, 1, trips);
        }
        p.end = END_NONE;
    }
}

/* ----- memory mode ------------------------------------------------------------------------------------------- */
/* `c = a + b` on arrays of plain device memory against host-mappable device memory (best and median of 30, GPU
 * timestamps), then the host's reads of mappable device memory by size (median of 201 memcpy calls). */
static void memory_mode(const char *dir) {
    uint32_t plain = memory_type_with(VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 1);
    uint32_t mappable = memory_type_with(VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                             VK_MEMORY_PROPERTY_HOST_COHERENT_BIT, 0);
    if (mappable == UINT32_MAX) die("%s has no host-mappable device memory", gpu.properties.deviceName);
    if (plain == UINT32_MAX) plain = mappable;
    Kernel add = kernel_new(dir, "add.spv", 3);
    VkQueryPoolCreateInfo info = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                                  .queryType = VK_QUERY_TYPE_TIMESTAMP, .queryCount = 2};
    VkQueryPool queries;
    CHECK(vkCreateQueryPool(gpu.device, &info, NULL, &queries));
    warm_up(&add, WARM_FLOATS, 1.0);
    const long sizes[] = {1L << 20, 16L << 20, 64L << 20};
    for (int s = 0; s < 3; s++)
        for (int which = 0; which < 2; which++) {
            uint32_t type = which ? mappable : plain;
            Buffer a = buffer_of_type(sizes[s], type, 0), b = buffer_of_type(sizes[s], type, 0),
                   c = buffer_of_type(sizes[s], type, 0);
            Buffer *bound[3] = {&a, &b, &c};
            VkDescriptorSet set = kernel_bind(&add, bound, 3);
            double seconds[30];
            for (int rep = 0; rep < 30; rep++) seconds[rep] = time_add(&add, set, (uint32_t)(sizes[s] / 16), queries);
            qsort(seconds, 30, sizeof seconds[0], by_value);
            printf("{\"add\": %ld, \"memory_type\": %u, \"best_gbs\": %.1f, \"median_gbs\": %.1f}\n", sizes[s], type,
                   3.0 * sizes[s] / seconds[0] / 1e9, 3.0 * sizes[s] / percentile(seconds, 30, 50) / 1e9);
            fflush(stdout);
            buffer_free(&a), buffer_free(&b), buffer_free(&c);
        }
    Buffer m = buffer_of_type(1 << 20, mappable, 1);
    memset(m.mapped, 1, 1 << 20);
    char *host = malloc(1 << 20);
    if (!host) die("out of host memory");
    const long reads[] = {4, 64, 256, 1024, 4096, 16384, 65536, 1 << 20};
    for (int r = 0; r < 8; r++) {
        double us[201];
        for (int rep = 0; rep < 201; rep++) {
            uint64_t t0 = now_ns();
            memcpy(host, m.mapped, reads[r]);
            us[rep] = (now_ns() - t0) * 1e-3;
        }
        qsort(us, 201, sizeof us[0], by_value);
        printf("{\"host_read\": %ld, \"min_us\": %.2f, \"median_us\": %.2f, \"max_us\": %.2f}\n", reads[r], us[0],
               percentile(us, 201, 50), us[200]);
        fflush(stdout);
    }
    free(host);
}

/* ----- gaps mode --------------------------------------------------------------------------------------------- */
/* GAP_BATCHES batches of one `c = a + b` each, back to back: the GPU's idle time from one batch's end (its last
 * timestamp, bottom of pipe) to the next one's start (its first, top of pipe: written as the GPU begins to process
 * the batch, so the gap is what the timestamps bound), by the way the batches reach the queue, and by how they end
 * (no end, each opening with a barrier instead; or vkbackend's completion marker). */
#define GAP_BATCHES 24
#define GAP_ROUNDS 6
typedef enum { GAP_ONE_CB, GAP_SUBMITS, GAP_SUBMITS_FENCED, GAP_SUBMITS_PACED, GAP_ONE_SUBMIT_CBS } GapWay;
static const char *const gap_way_names[] = {"one_command_buffer", "submits", "submits_each_fenced", "submits_paced",
                                            "one_submit_many_command_buffers"};

/* One batch's commands into gpu.cmd (begun): timestamps 2i and 2i+1 around the dispatch and its end. */
static void gap_batch(const Kernel *add, VkDescriptorSet set, uint32_t n4, VkQueryPool queries, uint32_t i,
                      End end, const Buffer *marker) {
    uint32_t gx, gy;
    add_grid(n4, &gx, &gy);
    if (end == END_NONE) /* the dispatch before wrote c, and no marker's barrier ordered it: as vulkan_ref.c's begin() */
        barrier(COMPUTE | TRANSFER, VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT, COMPUTE | TRANSFER,
                VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                    VK_ACCESS_TRANSFER_WRITE_BIT);
    vkCmdWriteTimestamp(gpu.cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, queries, 2 * i);
    kernel_use(add, set, n4);
    vkCmdDispatch(gpu.cmd, gx, gy, 1);
    if (end == END_FILL) { /* as csrc/recorder.c ends a window */
        barrier(COMPUTE | TRANSFER, VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                VK_PIPELINE_STAGE_HOST_BIT | COMPUTE | TRANSFER,
                VK_ACCESS_HOST_READ_BIT | VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                    VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT);
        vkCmdFillBuffer(gpu.cmd, marker->buffer, 0, sizeof(uint32_t), i + 1);
        barrier(TRANSFER, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
    }
    vkCmdWriteTimestamp(gpu.cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries, 2 * i + 1);
}

static double gap_variant(const Kernel *add, VkDescriptorSet set, uint32_t n4, GapWay way, End end, Buffer *c,
                        const Buffer *marker, double pace_us) {
    VkQueryPoolCreateInfo info = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                                  .queryType = VK_QUERY_TYPE_TIMESTAMP, .queryCount = 2 * GAP_BATCHES};
    VkQueryPool queries;
    CHECK(vkCreateQueryPool(gpu.device, &info, NULL, &queries));
    VkCommandBuffer cmds[GAP_BATCHES], own = gpu.cmd;
    VkFence fences[GAP_BATCHES];
    VkCommandBufferAllocateInfo alloc = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                         .commandPool = gpu.command_pool, .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                         .commandBufferCount = GAP_BATCHES};
    CHECK(vkAllocateCommandBuffers(gpu.device, &alloc, cmds));
    VkFenceCreateInfo fence_info = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    for (int i = 0; i < GAP_BATCHES; i++) CHECK(vkCreateFence(gpu.device, &fence_info, NULL, &fences[i]));
    double gaps[GAP_ROUNDS * (GAP_BATCHES - 1)], batches[GAP_ROUNDS * GAP_BATCHES], submits[GAP_ROUNDS * GAP_BATCHES];
    long n_gaps = 0, n_batches = 0, n_submits = 0;
    int correct = 1;
    VkCommandBufferBeginInfo begin_info = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                           .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    int in_one = way == GAP_ONE_CB;
    uint64_t mask = gpu.timestamp_bits >= 64 ? ~0ull : (1ull << gpu.timestamp_bits) - 1;
    double period = gpu.properties.limits.timestampPeriod * 1e-3;
    for (int round = 0; round < GAP_ROUNDS; round++) {
        begin(); /* the query pool's reset, and c cleared, in a submission of their own */
        vkCmdResetQueryPool(gpu.cmd, queries, 0, 2 * GAP_BATCHES);
        vkCmdFillBuffer(gpu.cmd, c->buffer, 0, VK_WHOLE_SIZE, 0);
        submit_and_wait();
        memset(marker->mapped, 0, sizeof(uint32_t));
        for (int i = 0; i < (in_one ? 1 : GAP_BATCHES); i++) {
            gpu.cmd = cmds[i];
            CHECK(vkBeginCommandBuffer(gpu.cmd, &begin_info));
            for (int j = in_one ? 0 : i; j < (in_one ? GAP_BATCHES : i + 1); j++)
                gap_batch(add, set, n4, queries, (uint32_t)j, end, marker);
            CHECK(vkEndCommandBuffer(gpu.cmd));
        }
        gpu.cmd = own;
        if (in_one || way == GAP_ONE_SUBMIT_CBS) {
            VkSubmitInfo submit = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
                                   .commandBufferCount = in_one ? 1 : GAP_BATCHES, .pCommandBuffers = cmds};
            uint64_t t = now_ns();
            CHECK(vkQueueSubmit(gpu.queue, 1, &submit, gpu.fence));
            submits[n_submits++] = (now_ns() - t) * 1e-3;
        } else {
            uint64_t next = now_ns();
            for (int i = 0; i < GAP_BATCHES; i++) {
                if (way == GAP_SUBMITS_PACED) { /* a host that submits each batch while the one before runs */
                    while (now_ns() < next) {}
                    next += (uint64_t)(pace_us * 1e3);
                }
                VkSubmitInfo submit = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1,
                                       .pCommandBuffers = &cmds[i]};
                VkFence fence = way == GAP_SUBMITS_FENCED ? fences[i] : i == GAP_BATCHES - 1 ? gpu.fence : VK_NULL_HANDLE;
                uint64_t t = now_ns();
                CHECK(vkQueueSubmit(gpu.queue, 1, &submit, fence));
                submits[n_submits++] = (now_ns() - t) * 1e-3;
            }
        }
        if (way == GAP_SUBMITS_FENCED) {
            CHECK(vkWaitForFences(gpu.device, GAP_BATCHES, fences, VK_TRUE, FENCE_TIMEOUT_NS));
            CHECK(vkResetFences(gpu.device, GAP_BATCHES, fences));
        } else {
            CHECK(vkWaitForFences(gpu.device, 1, &gpu.fence, VK_TRUE, FENCE_TIMEOUT_NS));
            CHECK(vkResetFences(gpu.device, 1, &gpu.fence));
        }
        if (end == END_FILL && *(volatile uint32_t *)marker->mapped != GAP_BATCHES) correct = 0;
        uint64_t ticks[2 * GAP_BATCHES];
        CHECK(vkGetQueryPoolResults(gpu.device, queries, 0, 2 * GAP_BATCHES, sizeof ticks, ticks, sizeof ticks[0],
                                    VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT));
        for (int i = 0; i < GAP_BATCHES; i++) {
            batches[n_batches++] = (double)((ticks[2 * i + 1] - ticks[2 * i]) & mask) * period;
            if (i) { /* negative where the driver began the next batch before the last one's end */
                uint64_t d = (ticks[2 * i] - ticks[2 * i - 1]) & mask;
                gaps[n_gaps++] = (d > mask / 2 ? -(double)((ticks[2 * i - 1] - ticks[2 * i]) & mask) : (double)d) * period;
            }
        }
        for (int i = 0; i < GAP_BATCHES; i++) CHECK(vkResetCommandBuffer(cmds[i], 0));
    }
    float first[4];
    Buffer staging = buffer_new(sizeof first, STAGING);
    download(&staging, c, first, sizeof first);
    for (int k = 0; k < 4; k++) correct &= first[k] == 3.0f; /* a = 1, b = 2 */
    buffer_free(&staging);
    qsort(gaps, n_gaps, sizeof gaps[0], by_value);
    qsort(batches, n_batches, sizeof batches[0], by_value);
    qsort(submits, n_submits, sizeof submits[0], by_value);
    printf("{\"gaps\": \"%s\", \"end\": \"%s\", \"floats\": %u, \"batches\": %d, \"gap_min\": %.2f, "
           "\"gap_median\": %.2f, \"gap_p90\": %.2f, \"gap_max\": %.2f, \"batch_gpu_median\": %.2f, "
           "\"submit_call_median\": %.2f, \"pace_us\": %.1f, \"correct\": %s}\n",
           gap_way_names[way], end_names[end], 4 * n4, GAP_BATCHES, gaps[0], percentile(gaps, n_gaps, 50),
           percentile(gaps, n_gaps, 90), gaps[n_gaps - 1], percentile(batches, n_batches, 50),
           percentile(submits, n_submits, 50), way == GAP_SUBMITS_PACED ? pace_us : 0.0, correct ? "true" : "false");
    fflush(stdout);
    vkFreeCommandBuffers(gpu.device, gpu.command_pool, GAP_BATCHES, cmds);
    for (int i = 0; i < GAP_BATCHES; i++) vkDestroyFence(gpu.device, fences[i], NULL);
    vkDestroyQueryPool(gpu.device, queries, NULL);
    return percentile(batches, n_batches, 50);
}

static void gaps_mode(const char *dir, long floats) {
    if (!gpu.timestamp_bits) die("%s's queue has no timestamps", gpu.properties.deviceName);
    if (floats < 4 || floats % 4) die("gaps FLOATS must be a positive multiple of 4, not %ld", floats);
    if ((uint64_t)floats * 4 > gpu.properties.limits.maxStorageBufferRange)
        die("gaps FLOATS: %ld floats pass %s's maxStorageBufferRange (%u bytes)", floats, gpu.properties.deviceName,
            gpu.properties.limits.maxStorageBufferRange);
    Kernel add = kernel_new(dir, "add.spv", 3);
    warm_up(&add, WARM_FLOATS, 1.0);
    Buffer a = buffer_new(floats * 4, DEVICE_LOCAL), b = buffer_new(floats * 4, DEVICE_LOCAL),
           c = buffer_new(floats * 4, DEVICE_LOCAL), marker = buffer_new(64, STAGING);
    begin();
    vkCmdFillBuffer(gpu.cmd, a.buffer, 0, VK_WHOLE_SIZE, 0x3f800000); /* 1.0f */
    vkCmdFillBuffer(gpu.cmd, b.buffer, 0, VK_WHOLE_SIZE, 0x40000000); /* 2.0f */
    submit_and_wait();
    Buffer *bound[3] = {&a, &b, &c};
    VkDescriptorSet set = kernel_bind(&add, bound, 3);
    uint32_t n4 = (uint32_t)(floats / 4);
    double kernel_us = 0;
    for (End end = END_NONE; end <= END_FILL; end += END_FILL - END_NONE) {
        for (GapWay way = GAP_ONE_CB; way <= GAP_ONE_SUBMIT_CBS; way++) {
            if (way == GAP_ONE_CB && end == END_FILL) continue; /* one command buffer has one end */
            double batch_us = gap_variant(&add, set, n4, way, end, &c, &marker, 0.7 * kernel_us);
            if (way == GAP_ONE_CB) kernel_us = batch_us;
        }
    }
    buffer_free(&a), buffer_free(&b), buffer_free(&c), buffer_free(&marker);
    kernel_free(&add);
}

#ifndef ROUND_TRIP_FLOOR_NO_MAIN /* scripts/interrupt-probe.c includes this file for its round trips */
int main(int argc, char **argv) {
    if (argc < 4 || argc > 6 || (argc >= 5 && strcmp(argv[4], "memory") && strcmp(argv[4], "gaps")))
        die("usage: round-trip-floor DIR DEVICE_NAME TRIPS [memory | gaps FLOATS] (scripts/round-trip-floor.py runs "
            "it)");
    long trips = strtol(argv[3], NULL, 10);
    if (trips <= 0) die("TRIPS must be a positive integer, not '%s'", argv[3]);
    open_loader();
    const char *validation = getenv("VKBACKEND_VALIDATION"); /* as vulkan_ref.c's main reads it */
    open_instance(validation && (!strcasecmp(validation, "1") || !strcasecmp(validation, "true") ||
                                 !strcasecmp(validation, "yes") || !strcasecmp(validation, "on")));
    open_probe_device(argv[2]);
    emit_info("%s, calibrated timestamps: %s", gpu.properties.deviceName, vkGetCalibratedTimestampsEXT ? "yes" : "no");
    for (uint32_t i = 0; i < gpu.memory.memoryTypeCount; i++) {
        uint32_t heap = gpu.memory.memoryTypes[i].heapIndex;
        printf("{\"memory_type\": %u, \"flags\": %u, \"heap\": %u, \"heap_bytes\": %llu}\n", i,
               gpu.memory.memoryTypes[i].propertyFlags, heap,
               (unsigned long long)gpu.memory.memoryHeaps[heap].size);
    }
    if (argc >= 5 && !strcmp(argv[4], "gaps"))
        gaps_mode(argv[1], argc == 6 ? strtol(argv[5], NULL, 10) : 16L << 20); /* gaps_mode checks it */
    else if (argc == 5)
        memory_mode(argv[1]);
    else
        round_trips(argv[1], trips);
    return 0;
}
#endif
