/* interrupt-probe: what a GPU's completion costs the CPUs, in plain C (scripts/interrupt-probe.py builds and runs
 * it; see there). It includes scripts/round-trip-floor.c (and through it the bench's C reference) for the device and
 * its round trips, and adds, per plan MODE:SAMPLER_CPU:TRIP_CPU:
 *
 *   - round trips of one MODE on a thread pinned to TRIP_CPU: a tiny dispatch recorded each time and its fence
 *     polled (fence_poll) or waited for in the driver (fence_block), or a timeline semaphore polled (timeline_poll);
 *     a command buffer recorded once and submitted again and again, signalling a timeline semaphore that is polled
 *     (resubmit_timeline), or signalling nothing while its kernel writes a host-mapped word that is polled
 *     (resubmit_memory_poll); or no GPU work, the same time spent spinning (idle);
 *   - meanwhile a sampler thread pinned to SAMPLER_CPU (-1: none) reads the clock in a loop and adds up the gaps of
 *     over 5 us, the time it did not run;
 *   - the interrupts each CPU took (/proc/interrupts lines that fired at least once every 20 round trips) and the
 *     irq, softirq and steal ticks of both CPUs (/proc/stat).
 *
 *     interrupt-probe DIR TRIPS PLAN...     (PLAN: MODE:SAMPLER_CPU:TRIP_CPU, or `scan`: fence_poll with the
 *                                            sampler on every CPU in turn)
 *
 * DIR holds round-trip-floor's kernels. One JSON line per plan: the round trips' min / median / p99 / max in us, the
 * sampler's gaps per round trip, the ticks, and the interrupts per round trip by line and CPU. */
#define _GNU_SOURCE
#define ROUND_TRIP_FLOOR_NO_MAIN
#include "round-trip-floor.c"

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#define GAP_NS 5000 /* a longer gap between two clock reads is time the sampler did not run */
#define MAX_LINES 256
#define MAX_CPUS 256

static void pin(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set)) die("cannot pin a thread to CPU %d", cpu);
}

typedef struct {
    int cpu;
    volatile int stop, ready, counting;
    long gaps;
    double gap_us, max_us;
} Sampler;

static void *sample(void *arg) {
    Sampler *s = arg;
    pin(s->cpu);
    s->ready = 1;
    uint64_t last = now_ns();
    while (!s->stop) {
        uint64_t t = now_ns(), d = t - last;
        if (d > GAP_NS && s->counting) {
            s->gaps++;
            s->gap_us += d * 1e-3;
            if (d * 1e-3 > s->max_us) s->max_us = d * 1e-3;
        }
        last = t;
    }
    return NULL;
}

/* /proc/interrupts: each line's name (number and description) and its count per CPU. */
typedef struct {
    int lines, cpus;
    char name[MAX_LINES][64];
    long long count[MAX_LINES][MAX_CPUS];
} Interrupts;

static void read_interrupts(Interrupts *q) {
    char line[16384];
    q->lines = q->cpus = 0;
    FILE *f = fopen("/proc/interrupts", "r");
    if (!f) return;
    if (fgets(line, sizeof line, f))
        for (char *save, *t = strtok_r(line, " \n", &save); t; t = strtok_r(NULL, " \n", &save)) q->cpus++;
    if (q->cpus > MAX_CPUS) q->cpus = MAX_CPUS;
    while (q->lines < MAX_LINES && fgets(line, sizeof line, f)) {
        char *save, *t = strtok_r(line, " \n", &save);
        if (!t) continue;
        int k = q->lines++;
        snprintf(q->name[k], sizeof q->name[k], "%s", t);
        for (int c = 0; c < q->cpus; c++) q->count[k][c] = (t = strtok_r(NULL, " \n", &save)) ? atoll(t) : 0;
        while ((t = strtok_r(NULL, " \n", &save)) && strlen(q->name[k]) + strlen(t) + 2 < sizeof q->name[k]) {
            strcat(q->name[k], " ");
            strcat(q->name[k], t);
        }
    }
    fclose(f);
}

/* The irq, softirq and steal ticks of `cpu` (/proc/stat); zeros where it cannot be read. */
static void read_ticks(int cpu, long long ticks[3]) {
    char line[512], want[32];
    snprintf(want, sizeof want, "cpu%d ", cpu);
    ticks[0] = ticks[1] = ticks[2] = 0;
    FILE *f = fopen("/proc/stat", "r");
    if (!f) return;
    while (fgets(line, sizeof line, f)) {
        long long v[8] = {0};
        if (strncmp(line, want, strlen(want))) continue;
        sscanf(line + strlen(want), "%lld %lld %lld %lld %lld %lld %lld %lld", &v[0], &v[1], &v[2], &v[3], &v[4],
               &v[5], &v[6], &v[7]);
        ticks[0] = v[5], ticks[1] = v[6], ticks[2] = v[7];
    }
    fclose(f);
}

typedef enum { FENCE_POLLED, FENCE_BLOCKED, TIMELINE_POLLED, RESUBMIT_TIMELINE, RESUBMIT_MEMORY, IDLE, MODES } Mode;
static const char *const mode_names[] = {"fence_poll", "fence_block", "timeline_poll", "resubmit_timeline",
                                         "resubmit_memory_poll", "idle"};

static Probe probe;
static Buffer mapped;
static VkCommandBuffer again_timeline, again_memory; /* recorded once, SIMULTANEOUS_USE */

/* A command buffer of the tiny dispatch (on the mapped buffer with `memory`), recorded once, resubmittable. */
static VkCommandBuffer record_once(int memory) {
    VkCommandBuffer cmd, saved = gpu.cmd;
    VkCommandBufferAllocateInfo allocate = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                            .commandPool = gpu.command_pool,
                                            .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY, .commandBufferCount = 1};
    CHECK(vkAllocateCommandBuffers(gpu.device, &allocate, &cmd));
    VkCommandBufferBeginInfo begin_info = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                           .flags = VK_COMMAND_BUFFER_USAGE_SIMULTANEOUS_USE_BIT};
    gpu.cmd = cmd; /* vulkan_ref.c's helpers record into gpu.cmd */
    CHECK(vkBeginCommandBuffer(cmd, &begin_info));
    barrier(COMPUTE | TRANSFER, VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT, COMPUTE | TRANSFER,
            VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
    kernel_use(probe.inc, memory ? probe.mapped_set : probe.inc_set, FLOATS);
    vkCmdDispatch(cmd, 1, 1, 1);
    barrier(COMPUTE, VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
    CHECK(vkEndCommandBuffer(cmd));
    gpu.cmd = saved;
    return cmd;
}

/* One round trip of `mode`, in us. */
static double trip(Mode mode) {
    uint64_t start = now_ns();
    Phases phases;
    if (mode == FENCE_POLLED || mode == FENCE_BLOCKED || mode == TIMELINE_POLLED) {
        Wait wait = mode == FENCE_POLLED ? FENCE_POLL : mode == FENCE_BLOCKED ? FENCE_BLOCK : TIMELINE_POLL;
        one_trip(&probe, LAUNCH, wait, 1, 0, &phases);
    } else if (mode == RESUBMIT_TIMELINE) {
        uint64_t target = probe.timeline_value + 1, value = 0;
        VkTimelineSemaphoreSubmitInfo values = {.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
                                                .signalSemaphoreValueCount = 1, .pSignalSemaphoreValues = &target};
        VkSubmitInfo submit = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .pNext = &values, .commandBufferCount = 1,
                               .pCommandBuffers = &again_timeline, .signalSemaphoreCount = 1,
                               .pSignalSemaphores = &probe.timeline};
        CHECK(vkQueueSubmit(gpu.queue, 1, &submit, VK_NULL_HANDLE));
        probe.timeline_value = target;
        while (vkGetSemaphoreCounterValue(gpu.device, probe.timeline, &value) == VK_SUCCESS && value < target) {}
    } else if (mode == RESUBMIT_MEMORY) {
        volatile float *word = (volatile float *)mapped.mapped;
        float want = word[0] + 1;
        VkSubmitInfo submit = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1,
                               .pCommandBuffers = &again_memory};
        CHECK(vkQueueSubmit(gpu.queue, 1, &submit, VK_NULL_HANDLE));
        while (word[0] < want) {}
    } else {
        while (now_ns() - start < 20000) {}
    }
    return (now_ns() - start) * 1e-3;
}

static void run(Mode mode, int sampler_cpu, int trip_cpu, long trips) {
    pin(trip_cpu);
    Sampler sampler = {.cpu = sampler_cpu};
    pthread_t thread;
    if (sampler_cpu >= 0) {
        if (pthread_create(&thread, NULL, sample, &sampler)) die("cannot start the sampler thread");
        while (!sampler.ready) {}
    }
    for (int i = 0; i < WARMUP_TRIPS; i++) trip(mode);
    static Interrupts before, after;
    long long sampler_ticks[2][3], trip_ticks[2][3];
    double *times = malloc(trips * sizeof *times);
    if (!times) die("out of host memory for %ld samples", trips);
    read_interrupts(&before);
    read_ticks(sampler_cpu, sampler_ticks[0]), read_ticks(trip_cpu, trip_ticks[0]);
    sampler.counting = 1;
    uint64_t start = now_ns();
    for (long i = 0; i < trips; i++) times[i] = trip(mode);
    double wall = (now_ns() - start) * 1e-3;
    sampler.counting = 0;
    read_interrupts(&after);
    read_ticks(sampler_cpu, sampler_ticks[1]), read_ticks(trip_cpu, trip_ticks[1]);
    sampler.stop = 1;
    if (sampler_cpu >= 0) pthread_join(thread, NULL);
    CHECK(vkQueueWaitIdle(gpu.queue)); /* the resubmitted command buffers have completed */
    qsort(times, trips, sizeof *times, by_value);
    printf("{\"mode\": \"%s\", \"sampler_cpu\": %d, \"trip_cpu\": %d, \"min\": %.2f, \"median\": %.2f, \"p99\": %.2f, "
           "\"max\": %.2f, \"wall_us\": %.0f, \"sampler_gaps_per_trip\": %.3f, \"sampler_gap_us_per_trip\": %.2f, "
           "\"sampler_gap_max_us\": %.1f, \"sampler_ticks\": [%lld, %lld, %lld], \"trip_ticks\": [%lld, %lld, %lld], "
           "\"interrupts_per_trip\": {",
           mode_names[mode], sampler_cpu, trip_cpu, times[0], percentile(times, trips, 50),
           percentile(times, trips, 99), times[trips - 1], wall, (double)sampler.gaps / trips, sampler.gap_us / trips,
           sampler.max_us, sampler_ticks[1][0] - sampler_ticks[0][0], sampler_ticks[1][1] - sampler_ticks[0][1],
           sampler_ticks[1][2] - sampler_ticks[0][2], trip_ticks[1][0] - trip_ticks[0][0],
           trip_ticks[1][1] - trip_ticks[0][1], trip_ticks[1][2] - trip_ticks[0][2]);
    const char *separator = "";
    for (int k = 0; k < after.lines && k < before.lines; k++)
        for (int c = 0; c < after.cpus; c++) {
            long long fired = after.count[k][c] - before.count[k][c];
            if (fired * 20 < trips) continue;
            printf("%s\"%s @ CPU %d\": %.3f", separator, after.name[k], c, (double)fired / trips);
            separator = ", ";
        }
    printf("}}\n");
    fflush(stdout);
    free(times);
}

int main(int argc, char **argv) {
    if (argc < 4) die("usage: interrupt-probe DIR TRIPS PLAN... (scripts/interrupt-probe.py runs it)");
    long trips = strtol(argv[2], NULL, 10);
    if (trips <= 0) die("TRIPS must be a positive integer, not '%s'", argv[2]);
    open_loader();
    open_instance(0);
    open_probe_device("");
    emit_info("%s", gpu.properties.deviceName);
    VkSemaphoreTypeCreateInfo type = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
                                      .semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE};
    VkSemaphoreCreateInfo semaphore = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, .pNext = &type};
    CHECK(vkCreateSemaphore(gpu.device, &semaphore, NULL, &probe.timeline));
    static Kernel inc, add;
    static Buffer buffer, staging;
    inc = kernel_new(argv[1], "inc.spv", 1), add = kernel_new(argv[1], "add.spv", 3);
    warm_up(&add, WARM_FLOATS, 0.5);
    buffer = buffer_new(FLOATS * sizeof(float), DEVICE_LOCAL), staging = buffer_new(FLOATS * sizeof(float), STAGING);
    zero(&buffer, 1);
    Buffer *one[1] = {&buffer};
    probe.inc = &inc, probe.buffer = &buffer, probe.staging = &staging, probe.inc_set = kernel_bind(&inc, one, 1);
    uint32_t mappable = memory_type_with(VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                             VK_MEMORY_PROPERTY_HOST_COHERENT_BIT, 0);
    if (mappable == UINT32_MAX) die("%s has no host-mappable device memory", gpu.properties.deviceName);
    mapped = buffer_of_type(FLOATS * sizeof(float), mappable, 1);
    memset(mapped.mapped, 0, FLOATS * sizeof(float));
    Buffer *m[1] = {&mapped};
    probe.mapped = &mapped, probe.mapped_set = kernel_bind(&inc, m, 1);
    again_timeline = record_once(0), again_memory = record_once(1);
    int cpus = (int)sysconf(_SC_NPROCESSORS_ONLN);
    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "scan")) {
            for (int cpu = 0; cpu < cpus; cpu++) run(FENCE_POLLED, cpu, cpu == cpus - 1 ? 0 : cpus - 1, trips);
            continue;
        }
        char name[64];
        int sampler_cpu, trip_cpu, mode = MODES;
        if (sscanf(argv[i], "%63[^:]:%d:%d", name, &sampler_cpu, &trip_cpu) != 3)
            die("a plan is MODE:SAMPLER_CPU:TRIP_CPU or scan, not '%s'", argv[i]);
        for (int k = 0; k < MODES; k++)
            if (!strcmp(name, mode_names[k])) mode = k;
        if (mode == MODES) die("no mode '%s' (fence_poll, fence_block, timeline_poll, resubmit_timeline, "
                               "resubmit_memory_poll, idle)", name);
        if (sampler_cpu >= cpus || trip_cpu < 0 || trip_cpu >= cpus || sampler_cpu == trip_cpu)
            die("'%s': the CPUs must be two different ones of 0..%d (the sampler's may be -1: none)", argv[i], cpus - 1);
        run((Mode)mode, sampler_cpu, trip_cpu, trips);
    }
    return 0;
}
