/* The express lane (decl/vkb.h): a lone launch that finds the worker parked is recorded and submitted from the park,
 * without the GIL, while the caller goes on to its sync point. The worker arms the lane as it enters a park
 * (vkb_wait_work, fence.c) and disarms it as it leaves. In between, a launcher may claim it; the park serves the
 * claim, polls the batch's fence, publishes its serial once it has signalled, and arms again (a new generation) into
 * the same batch: a caller that launches and syncs in a loop never waits for the worker's Python. */
#include <sched.h>
#include <string.h>

#define VKB_EXPRESS_KIND ((uint64_t)0xff)

static uint64_t vkb_express_as(uint64_t state, uint64_t kind) { return (state & ~VKB_EXPRESS_KIND) | kind; }

static void vkb_express_arm_next(vkb_express *x) {
    uint64_t generation = (__atomic_load_n(&x->state, __ATOMIC_RELAXED) >> 8) + 1;
    __atomic_store_n(&x->state, generation << 8 | VKB_EXPRESS_ARMED, __ATOMIC_RELEASE);
}

/* Entering a park: arm the lane when the worker has readied a batch for it; 1 when armed. */
static int vkb_express_arm(vkb_express *x) {
    if (!x || !x->ready) return 0;
    x->served = x->in_use = x->running = 0;
    x->fence_result = VK_SUCCESS;
    vkb_express_arm_next(x);
    return 1;
}

/* In the park: record and submit what a launcher handed over; its epoch is the submitter's window's. */
static void vkb_express_serve(vkb_express *x, vkb_progress *progress) {
    uint64_t state = __atomic_load_n(&x->state, __ATOMIC_ACQUIRE);
    vkb_window *w = &x->window, *main = x->main;
    w->epoch = main->epoch;
    w->barrier_first = main->barrier_first;
    w->words = x->words;
    w->n_words = x->n_words;
    x->result = vkb_submit_batch(w, x->queue, x->fence, progress, 0);
    x->served++;
    x->in_use = x->running = x->result == VK_SUCCESS;
    x->batches += x->result == VK_SUCCESS;
    x->dispatches += w->n_dispatches;
    x->barriers += w->n_barriers;
    x->copies += w->n_copies;
    x->submit_ns += w->submit_ns;
    main->epoch = w->epoch;
    main->barrier_first = w->barrier_first;
    __atomic_store_n(&x->state, vkb_express_as(state, VKB_EXPRESS_DONE), __ATOMIC_RELEASE);
}

/* What the park does about the lane, each time it looks. */
enum { VKB_LANE_QUIET, VKB_LANE_RUNNING, VKB_LANE_COMPLETED, VKB_LANE_NEEDS_PYTHON };

/* In the park: serve a hand-over; poll its batch's fence, and once it has signalled arm again into the same batch
 * (its fence reset; the recorder begins its command buffer anew) and publish its serial: armed first, so that the
 * caller it releases finds the lane armed for its next launch. A batch with skipped records, one that failed to
 * submit, and a fence that cannot be read or reset are left to the worker's Python (VKB_LANE_NEEDS_PYTHON), which
 * reports the error before anyone waiting for that batch is released. */
static int vkb_express_step(vkb_express *x, vkb_progress *progress) {
    if (x->running) {
        VkResult r = vkWaitForFences(x->window.device, 1, &x->fence, VK_TRUE, 0);
        if (r == VK_TIMEOUT) return VKB_LANE_RUNNING;
        if (r != VK_SUCCESS) { x->fence_result = r; return VKB_LANE_NEEDS_PYTHON; }  /* still running */
        x->running = 0;
        if ((r = vkResetFences(x->window.device, 1, &x->fence)) != VK_SUCCESS) {
            x->fence_result = r;  /* completed, its fence still signalled */
            return VKB_LANE_NEEDS_PYTHON;
        }
        x->in_use = 0;
        uint64_t completed = x->serial++;
        vkb_express_arm_next(x);
        vkb_publish_completed(progress, completed, 0);
        return VKB_LANE_COMPLETED;
    }
    if ((__atomic_load_n(&x->state, __ATOMIC_ACQUIRE) & VKB_EXPRESS_KIND) != VKB_EXPRESS_FULL) return VKB_LANE_QUIET;
    vkb_express_serve(x, progress);
    return x->running && !x->window.n_errors ? VKB_LANE_RUNNING : VKB_LANE_NEEDS_PYTHON;
}

/* Leaving the park: disarm, unless a launcher has claimed the lane; then serve it first. */
static void vkb_express_disarm(vkb_express *x, vkb_progress *progress) {
    uint64_t state = __atomic_load_n(&x->state, __ATOMIC_ACQUIRE);
    for (;;) {
        switch (state & VKB_EXPRESS_KIND) {
        case VKB_EXPRESS_ARMED:
            if (__atomic_compare_exchange_n(&x->state, &state, vkb_express_as(state, VKB_EXPRESS_OFF), 0,
                                            __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
                return;
            break;  /* claimed meanwhile: `state` is the new value */
        case VKB_EXPRESS_CLAIMED:  /* the launcher is copying its record */
            sched_yield();
            state = __atomic_load_n(&x->state, __ATOMIC_ACQUIRE);
            break;
        case VKB_EXPRESS_FULL:
            vkb_express_serve(x, progress);
            return;
        default:  /* served */
            return;
        }
    }
}

int vkb_express_launch(vkb_express *x, uint64_t seen, const char *record, size_t nbytes) {
    if ((seen & VKB_EXPRESS_KIND) != VKB_EXPRESS_ARMED || !nbytes || nbytes % 4 || nbytes > sizeof x->words) return 0;
    if (!__atomic_compare_exchange_n(&x->state, &seen, vkb_express_as(seen, VKB_EXPRESS_CLAIMED), 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_RELAXED))
        return 0;
    memcpy(x->words, record, nbytes);
    x->n_words = (uint32_t)(nbytes / 4);
    __atomic_store_n(&x->state, vkb_express_as(seen, VKB_EXPRESS_FULL), __ATOMIC_RELEASE);
    return 1;
}
