/* The express lane (decl/vkb.h): a lone launch or graph replay that finds the worker parked is recorded and
 * submitted from the park, without the GIL, while the caller goes on to its sync point. The worker arms the lane as it
 * enters a park (vkb_wait_work, fence.c) and disarms it as it leaves. In between, a launcher may claim it; the park
 * serves the claim into the next batch of its ring and arms again while that has room (the batch after it is free,
 * and fewer than `max_running` of the lane's batches run), so that a read-back's copy can follow a launch onto the
 * GPU at once. It polls the oldest running batch (its fence, or the completion marker) and, once it has completed,
 * publishes its serial; a fence that has signalled is reset and frees every batch before it, and the lane arms again
 * once it has room. A caller that launches or replays a graph (and reads back) and syncs in a loop never waits for
 * the worker's Python, and only one batch in `fence_every` signals a fence. */
#include <sched.h>
#include <string.h>

#define VKB_EXPRESS_KIND ((uint64_t)0xff)

static uint64_t vkb_express_as(uint64_t state, uint64_t kind) { return (state & ~VKB_EXPRESS_KIND) | kind; }

static void vkb_express_arm_next(vkb_express *x) {
    uint64_t generation = (__atomic_load_n(&x->state, __ATOMIC_RELAXED) >> 8) + 1;
    __atomic_store_n(&x->state, generation << 8 | VKB_EXPRESS_ARMED, __ATOMIC_RELEASE);
}

/* Entering a park: arm the lane when the worker has readied its batches; 1 when armed. */
static int vkb_express_arm(vkb_express *x) {
    if (!x || !x->ready) return 0;
    x->served = x->running = x->next = x->oldest = 0;
    x->retired = 0;
    x->probed_ns = vkb_now_ns();
    for (int i = 0; i < VKB_EXPRESS_SLOTS; i++) {
        vkb_express_slot *slot = &x->slots[i];
        slot->in_use = slot->running = slot->fenced = 0;
        slot->result = slot->fence_result = VK_SUCCESS;
    }
    vkb_express_arm_next(x);
    return 1;
}

static uint32_t vkb_express_after(uint32_t slot) { return (slot + 1) % VKB_EXPRESS_SLOTS; }

/* Room for another serve: its batch is free, and fewer than max_running batches of the lane run (the worker keeps as
 * few queued on the GPU, which bounds the driver's command memory). */
static int vkb_express_has_room(const vkb_express *x) {
    return !x->slots[x->next].in_use && x->running < x->max_running;
}

/* Record and submit what a launcher handed over into the next batch (its epoch is the submitter's window's), with
 * its fence when it takes the ring's last free batch, `fence_every` batches have gone without one, or (onto an idle
 * GPU) its head goes first; in the park (`rearm`), arm again while the lane has room. 1 when it went to the GPU
 * whole. */
static int vkb_express_serve(vkb_express *x, vkb_progress *progress, int rearm) {
    uint64_t state = __atomic_load_n(&x->state, __ATOMIC_ACQUIRE);
    vkb_express_slot *slot = &x->slots[x->next];
    vkb_window *w = &slot->window, *main = x->main;
    int fenced = x->slots[vkb_express_after(x->next)].in_use || x->unfenced + 1 >= x->fence_every;
    w->epoch = main->epoch;
    w->barrier_first = main->barrier_first;
    w->words = x->words;
    w->n_words = x->n_words;
    w->marker_value = (uint32_t)x->serial;
    w->head_dispatches = x->running ? 0 : x->head_dispatches;  /* the GPU idle: it starts on the head at once */
    w->split_fence = slot->fence;
    slot->result = vkb_submit_counted(w, x->queue, fenced ? slot->fence : VK_NULL_HANDLE, progress);
    slot->serial = x->serial;
    slot->fenced = w->fence_submitted;
    x->served++;
    x->next = vkb_express_after(x->next);
    main->epoch = w->epoch;
    main->barrier_first = w->barrier_first;
    x->submit_ns += w->submit_ns;  /* like the worker's windows: a failed submit's time counts, its work does not */
    if (slot->result != VK_SUCCESS) {
        __atomic_store_n(&x->state, vkb_express_as(state, VKB_EXPRESS_DONE), __ATOMIC_RELEASE);
        return 0;
    }
    x->unfenced = slot->fenced ? 0 : x->unfenced + 1;
    x->batches++;
    x->heads += w->head_submitted;
    x->dispatches += w->n_dispatches;
    x->barriers += w->n_barriers;
    x->copies += w->n_copies;
    x->reused += w->reused;
    x->serial++;
    slot->in_use = slot->running = 1;
    x->running++;
    if (rearm && !w->n_errors && vkb_express_has_room(x))
        vkb_express_arm_next(x);
    else
        __atomic_store_n(&x->state, vkb_express_as(state, VKB_EXPRESS_DONE), __ATOMIC_RELEASE);
    return !w->n_errors;
}

/* What the park does about the lane, each time it looks. */
enum { VKB_LANE_QUIET, VKB_LANE_RUNNING, VKB_LANE_COMPLETED, VKB_LANE_NEEDS_PYTHON };

/* In the park: poll the oldest running batch and once it has completed publish its serial; a fence it signalled is
 * reset first, which frees every completed batch and arms the lane again if it was waiting for a free one (armed
 * before the publish, so that the caller it releases finds the lane armed for its next launch); then serve a
 * hand-over. A batch with skipped records, a failed submit, and a batch or fence that cannot be polled or reset end
 * the lane's part in the park (VKB_LANE_NEEDS_PYTHON): the worker's Python reports the error before anyone waiting
 * for that batch is released. */
static int vkb_express_step(vkb_express *x, vkb_progress *progress) {
    int completed = 0;
    if (x->running) {
        vkb_express_slot *old = &x->slots[x->oldest];
        VkResult r = vkb_batch_status(old->window.device, old->fenced ? old->fence : VK_NULL_HANDLE, old->serial,
                                       progress, &x->probed_ns);
        if (r != VK_TIMEOUT) {
            if (r != VK_SUCCESS) { old->fence_result = r; return VKB_LANE_NEEDS_PYTHON; }  /* still running */
            old->running = 0;
            x->running--;
            x->oldest = vkb_express_after(x->oldest);
            if (old->fenced) {
                if ((r = vkResetFences(old->window.device, 1, &old->fence)) != VK_SUCCESS) {
                    old->fence_result = r;  /* completed, its fence still signalled */
                    return VKB_LANE_NEEDS_PYTHON;
                }
                x->retired = old->serial;
                for (int i = 0; i < VKB_EXPRESS_SLOTS; i++)
                    if (!x->slots[i].running) x->slots[i].in_use = 0;
            }
            /* served with no room after it (a failed serve ends the park instead): arm again now there is */
            if ((__atomic_load_n(&x->state, __ATOMIC_ACQUIRE) & VKB_EXPRESS_KIND) == VKB_EXPRESS_DONE &&
                vkb_express_has_room(x))
                vkb_express_arm_next(x);
            vkb_publish_completed(progress, old->serial, 0);
            completed = 1;
        }
    }
    if ((__atomic_load_n(&x->state, __ATOMIC_ACQUIRE) & VKB_EXPRESS_KIND) == VKB_EXPRESS_FULL &&
        !vkb_express_serve(x, progress, 1))
        return VKB_LANE_NEEDS_PYTHON;
    if (x->running) return VKB_LANE_RUNNING;
    return completed ? VKB_LANE_COMPLETED : VKB_LANE_QUIET;
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
            vkb_express_serve(x, progress, 0);  /* tracked by the worker's Python, however it went */
            return;
        default:  /* served */
            return;
        }
    }
}

int64_t vkb_express_launch(vkb_express *x, uint64_t seen, const char *record, size_t nbytes) {
    if ((seen & VKB_EXPRESS_KIND) != VKB_EXPRESS_ARMED || !nbytes || nbytes % 4 || nbytes > sizeof x->words) return -1;
    if (!__atomic_compare_exchange_n(&x->state, &seen, vkb_express_as(seen, VKB_EXPRESS_CLAIMED), 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_RELAXED))
        return -1;
    int64_t serial = (int64_t)x->serial;  /* claimed: no serve moves it on before this claim's */
    memcpy(x->words, record, nbytes);
    x->n_words = (uint32_t)(nbytes / 4);
    __atomic_store_n(&x->state, vkb_express_as(seen, VKB_EXPRESS_FULL), __ATOMIC_RELEASE);
    return serial;
}

int64_t vkb_express_served_in(const vkb_express *x, uint64_t seen) {
    if (!x) return -1;
    __atomic_thread_fence(__ATOMIC_ACQUIRE);  /* the caller's read of the state comes before the reads below */
    uint32_t served = __atomic_load_n(&x->served, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    return __atomic_load_n(&x->state, __ATOMIC_RELAXED) == seen ? (int64_t)served : -1;
}

/* The lane's serial for its next serve and (in *running) its running batches, where armed with `queued` served and
 * unchanged across the reads; -1 otherwise. */
static int64_t vkb_express_read_served(const vkb_express *x, uint32_t queued, uint32_t *running) {
    if (!x) return -1;
    uint64_t state = __atomic_load_n(&x->state, __ATOMIC_ACQUIRE);
    if ((state & VKB_EXPRESS_KIND) != VKB_EXPRESS_ARMED) return -1;
    uint32_t served = __atomic_load_n(&x->served, __ATOMIC_RELAXED);
    uint64_t after_last = __atomic_load_n(&x->serial, __ATOMIC_RELAXED);
    *running = __atomic_load_n(&x->running, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (served != queued || __atomic_load_n(&x->state, __ATOMIC_RELAXED) != state) return -1;
    return (int64_t)after_last;
}

int64_t vkb_express_all_served(const vkb_express *x, uint32_t queued) {
    uint32_t running;
    return vkb_express_read_served(x, queued, &running);
}

int vkb_express_all_completed(const vkb_express *x, uint32_t queued) {
    uint32_t running;
    return vkb_express_read_served(x, queued, &running) >= 0 && !running;
}
