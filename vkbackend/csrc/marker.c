/* The completion marker (decl/vkb.h): every batch ends by writing the low 32 bits of its serial into a host-mapped
 * word, and one submitted without a fence has completed once the word has reached its serial. A fence tells of a lost
 * device; the word cannot (a lost GPU writes nothing more), so a wait on it asks the loss probe, a fence never
 * submitted, now and then. */
#include <time.h>

enum { VKB_LOSS_PROBE_NS = 1000000 };  /* how often a wait on the marker asks whether the device was lost */

static uint64_t vkb_now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

int vkb_marker_reached(const vkb_progress *progress, uint64_t serial) {
    uint32_t seen = __atomic_load_n(progress->marker, __ATOMIC_ACQUIRE);
    return (int32_t)(seen - (uint32_t)serial) >= 0;  /* serials in flight are far less than 2^31 apart */
}

/* Whether batch `serial` has completed: its fence's status where it was submitted with one (`fence` not NULL), else
 * VK_SUCCESS or VK_TIMEOUT by the marker, or the loss probe's error (asked when *probed_ns is VKB_LOSS_PROBE_NS old). */
static VkResult vkb_batch_status(VkDevice device, VkFence fence, uint64_t serial, const vkb_progress *progress,
                                 uint64_t *probed_ns) {
    if (fence) return vkWaitForFences(device, 1, &fence, VK_TRUE, 0);
    if (vkb_marker_reached(progress, serial)) return VK_SUCCESS;
    uint64_t now = vkb_now_ns();
    if (now - *probed_ns < VKB_LOSS_PROBE_NS) return VK_TIMEOUT;
    *probed_ns = now;
    VkResult r = vkGetFenceStatus(device, progress->loss_probe);
    return r == VK_NOT_READY || r == VK_SUCCESS ? VK_TIMEOUT : r;
}
