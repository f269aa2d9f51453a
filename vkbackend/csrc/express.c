/* The express lane (decl/vkb.h): a lone launch that finds the worker parked is recorded and submitted from the park,
 * without the GIL, while the caller goes on to its sync point. The worker arms the lane as it enters a park
 * (vkb_wait_work, fence.c) and disarms it as it leaves; in between, a launcher may claim it once. */
#include <sched.h>
#include <string.h>

#define VKB_EXPRESS_KIND ((uint64_t)0xff)

static uint64_t vkb_express_as(uint64_t state, uint64_t kind) { return (state & ~VKB_EXPRESS_KIND) | kind; }

/* Entering a park: arm the lane, in a new generation, when the worker has readied a batch for it; 1 when armed. */
static int vkb_express_arm(vkb_express *x) {
    if (!x || !x->ready) return 0;
    uint64_t generation = (__atomic_load_n(&x->state, __ATOMIC_RELAXED) >> 8) + 1;
    __atomic_store_n(&x->state, generation << 8 | VKB_EXPRESS_ARMED, __ATOMIC_RELEASE);
    return 1;
}

/* In the park: record and submit what a launcher handed over, if it has; its epoch is the submitter's window's. */
static void vkb_express_serve(vkb_express *x, vkb_progress *progress) {
    uint64_t state = __atomic_load_n(&x->state, __ATOMIC_ACQUIRE);
    if ((state & VKB_EXPRESS_KIND) != VKB_EXPRESS_FULL) return;
    vkb_window *w = &x->window, *main = x->main;
    w->epoch = main->epoch;
    w->barrier_first = main->barrier_first;
    w->words = x->words;
    w->n_words = x->n_words;
    x->result = vkb_submit_batch(w, x->queue, x->fence, progress, 0);
    main->epoch = w->epoch;
    main->barrier_first = w->barrier_first;
    x->ready = 0;  /* its batch is taken */
    __atomic_store_n(&x->state, vkb_express_as(state, VKB_EXPRESS_DONE), __ATOMIC_RELEASE);
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
