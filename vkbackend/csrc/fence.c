/* Waiting for a fence without blocking in the driver.
 *
 * A blocking vkWaitForFences can oversleep by milliseconds on Linux with NVIDIA's driver (wgpu and llama.cpp
 * report ~10 ms stutters; here a 2 ms tinygrad step with a sync took 8 ms in one step of ten). Every sync point and
 * every poll of the worker waits on a fence, so one oversleep stalls the GPU and the caller alike. So the worker
 * polls instead: vkWaitForFences with a zero timeout (a status check that never sleeps in the driver), yielding the
 * core for the first microseconds of the wait and then sleeping in short slices, with the calling thread's timer
 * slack lowered so that a slice is a slice. Called with the GIL released; the cost is one status check every few
 * microseconds on a thread that has nothing else to do. */
#include <sched.h>
#include <sys/prctl.h>
#include <time.h>

enum { VKB_SPIN_NS = 50000, VKB_SLICE_NS = 10000, VKB_TIMER_SLACK_NS = 1000 };

static uint64_t vkb_now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

VkResult vkb_wait_fence(VkDevice device, VkFence fence, uint64_t timeout_ns) {
    static __thread int slack_lowered;
    if (!slack_lowered) { prctl(PR_SET_TIMERSLACK, (unsigned long)VKB_TIMER_SLACK_NS, 0, 0, 0); slack_lowered = 1; }
    uint64_t start = vkb_now_ns();
    for (;;) {
        VkResult r = vkWaitForFences(device, 1, &fence, VK_TRUE, 0);
        if (r != VK_TIMEOUT) return r;
        uint64_t waited = vkb_now_ns() - start;
        if (waited >= timeout_ns) return VK_TIMEOUT;
        if (waited < VKB_SPIN_NS) { sched_yield(); continue; }
        uint64_t left = timeout_ns - waited;
        struct timespec slice = {0, (long)(left < VKB_SLICE_NS ? left : VKB_SLICE_NS)};
        nanosleep(&slice, NULL);
    }
}
