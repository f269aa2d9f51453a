/* Waiting for the GPU without blocking in the driver, and handing its completion to a waiting caller.
 *
 * A batch has completed once its fence has signalled or, submitted without one, once the completion marker has
 * reached its serial (marker.c; decl/vkb.h says why most batches have no fence).
 *
 * A blocking vkWaitForFences can oversleep by milliseconds on Linux with NVIDIA's driver (wgpu and llama.cpp
 * report ~10 ms stutters). So every wait polls: a status check with a zero timeout (which never sleeps in the
 * driver), yielding the core for the first microseconds of the wait and then sleeping in short slices, with the
 * calling thread's timer slack lowered so that a slice is a slice (the worker's for good; a caller's only while its
 * wait sleeps, then given back). Called with the GIL released.
 *
 * The worker is a Python thread, so each time it leaves one of these waits it must take the GIL. Taking it from a
 * caller that holds it blocks the worker in the interpreter until the caller releases it, and then costs a thread
 * wake-up (tens of microseconds, more in a virtual machine) at the moment the caller starts to wait for the worker.
 * So the worker takes the GIL when it is free: a kicked worker stays here until a caller waits in
 * vkb_wait_completed (which it does with the GIL released), or until the kick is progress->grace_ns old (a caller
 * that queued work and went on with other things). For the same reason, a worker that has just released a waiting
 * caller does not go back to Python while that caller runs: it waits here for its next work (the hold).
 *
 * A caller at a sync point waits here for the worker to publish that it has completed the batch the caller needs
 * (run its completions: frees, staging buffers given back). It spins on the published serial with the GIL
 * released, so the worker never waits for the GIL while it completes the batch and the caller is running when the
 * serial appears; while a caller waits, the worker's wait on its batch also spins for longer before it sleeps
 * (progress->spin_ns), since a slice can oversleep in a virtual machine.
 *
 * A caller that queues a batch of launches and then runs more Python before its sync point (a framework's JIT replay)
 * would leave the GPU idle meanwhile, since the worker waits for the GIL to be free. So it hands the work over: it
 * waits in vkb_hand_over, GIL released, until the worker has begun to submit, and runs on while the worker records.
 * The worker, once submitted, lingers in vkb_submit_batch until the caller waits or hands more work over (or for a
 * grace), again so that it takes the GIL when it is free.
 *
 * The last batch in flight, when nothing runs on its completion (no frees, no staging buffers to give back), is
 * published from here the moment it completes (vkb_wait_last): the waiting caller runs on while the worker holds,
 * and the worker's Python recycles the batch afterwards. */
#include <sched.h>
#include <sys/prctl.h>
#include <time.h>

enum {
    VKB_SLICE_NS = 10000,
    VKB_HANDOFF_NS = 20000,         /* the longest a publish waits for the caller to leave */
    VKB_TIMER_SLACK_NS = 1000
};

/* The worker's thread is ours: its slack stays lowered. */
static void vkb_lower_timer_slack(void) {
    static __thread int lowered;
    if (!lowered) { prctl(PR_SET_TIMERSLACK, (unsigned long)VKB_TIMER_SLACK_NS, 0, 0, 0); lowered = 1; }
}

/* A caller's thread is not: its slack is lowered while its wait sleeps in slices and given back after (`*before`: the
 * slack it had, 0 while not lowered). */
static void vkb_lower_callers_slack(unsigned long *before) {
    if (*before) return;
    long slack = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
    if (slack <= VKB_TIMER_SLACK_NS) return;  /* already as low: nothing to give back */
    prctl(PR_SET_TIMERSLACK, (unsigned long)VKB_TIMER_SLACK_NS, 0, 0, 0);
    *before = (unsigned long)slack;
}

/* One step of a polling wait that has waited `waited` of `timeout_ns`: 0 to poll again, 1 when the time is up. */
static int vkb_pause(uint64_t waited, uint64_t timeout_ns, uint64_t spin_ns) {
    if (waited >= timeout_ns) return 1;
    if (waited < spin_ns) { sched_yield(); return 0; }
    uint64_t left = timeout_ns - waited;
    struct timespec slice = {0, (long)(left < VKB_SLICE_NS ? left : VKB_SLICE_NS)};
    nanosleep(&slice, NULL);
    return 0;
}

/* Whether a caller waits for the worker with the GIL released: at a sync point or handing work over. */
static int vkb_caller_waits(const vkb_progress *progress) {
    return __atomic_load_n(&progress->waiters, __ATOMIC_ACQUIRE) || __atomic_load_n(&progress->handing, __ATOMIC_ACQUIRE);
}

/* Whether a worker kicked (first seen at *kicked_at, 0 before) should take the GIL now: a caller waits with the GIL
 * released, or the kick is grace_ns old. */
static int vkb_kick_ready(const vkb_progress *progress, uint64_t *kicked_at) {
    if (!__atomic_load_n(&progress->kick, __ATOMIC_ACQUIRE)) return 0;
    if (vkb_caller_waits(progress)) return 1;
    uint64_t now = vkb_now_ns();
    if (!*kicked_at) *kicked_at = now;
    return now - *kicked_at >= progress->grace_ns;
}

/* The worker enters a wait or a submit in C: a caller that yielded the GIL to it may take it back. */
static void vkb_in_c(vkb_progress *progress) { __atomic_store_n(&progress->worker_python, 0, __ATOMIC_RELEASE); }

/* The worker returns to Python, which needs the GIL: a launching caller yields it (vkb_yield_gil). */
static void vkb_to_python(vkb_progress *progress) { __atomic_store_n(&progress->worker_python, 1, __ATOMIC_RELEASE); }

static VkResult vkb_poll_batch(VkDevice device, VkFence fence, uint64_t serial, uint64_t timeout_ns,
                               const vkb_progress *progress, int kicked) {
    vkb_lower_timer_slack();
    uint64_t start = vkb_now_ns(), kicked_at = 0, probed = start;
    for (;;) {
        VkResult r = vkb_batch_status(device, fence, serial, progress, &probed);
        if (r != VK_TIMEOUT) return r;
        if (kicked && vkb_kick_ready(progress, &kicked_at)) return VK_NOT_READY;
        int waited_on = __atomic_load_n(&progress->waiters, __ATOMIC_RELAXED) != 0;
        if (vkb_pause(vkb_now_ns() - start, timeout_ns, waited_on ? progress->spin_ns : VKB_SPIN_NS)) return VK_TIMEOUT;
    }
}

VkResult vkb_wait_batch(VkDevice device, VkFence fence, uint64_t serial, uint64_t timeout_ns, vkb_progress *progress,
                        int kicked) {
    vkb_in_c(progress);
    VkResult r = vkb_poll_batch(device, fence, serial, timeout_ns, progress, kicked);
    vkb_to_python(progress);
    return r;
}

int vkb_yield_gil(vkb_progress *progress, uint64_t timeout_ns) {
    uint64_t start = vkb_now_ns();
    uint32_t turns = __atomic_load_n(&progress->worker_turns, __ATOMIC_ACQUIRE);
    for (;;) {
        if (!__atomic_load_n(&progress->worker_python, __ATOMIC_ACQUIRE)) return 1;
        if (__atomic_load_n(&progress->worker_turns, __ATOMIC_ACQUIRE) != turns) return 1;
        if (vkb_now_ns() - start >= timeout_ns) return 0;
        sched_yield();
    }
}

int vkb_wait_completed(vkb_progress *progress, const uint64_t *target, uint64_t timeout_ns) {
    __atomic_add_fetch(&progress->waiters, 1, __ATOMIC_ACQ_REL);
    uint64_t start = vkb_now_ns();
    unsigned long slack = 0;
    int done = 0, targeted = 0;
    for (;;) {
        uint64_t want = __atomic_load_n(target, __ATOMIC_ACQUIRE);
        if (want != VKB_SERIAL_UNPUBLISHED) {
            if (!targeted) {  /* wanted first: a publisher that counts this caller reads a wanted it has set */
                __atomic_store_n(&progress->wanted, want, __ATOMIC_RELEASE);
                __atomic_add_fetch(&progress->targeted, 1, __ATOMIC_ACQ_REL);
                targeted = 1;
            }
            if (__atomic_load_n(&progress->completed, __ATOMIC_ACQUIRE) >= want) { done = 1; break; }
        }
        uint64_t waited = vkb_now_ns() - start;
        if (waited >= progress->spin_ns) vkb_lower_callers_slack(&slack);
        if (vkb_pause(waited, timeout_ns, progress->spin_ns)) break;
    }
    if (targeted) __atomic_sub_fetch(&progress->targeted, 1, __ATOMIC_ACQ_REL);
    __atomic_sub_fetch(&progress->waiters, 1, __ATOMIC_ACQ_REL);
    if (slack) prctl(PR_SET_TIMERSLACK, slack, 0, 0, 0);
    return done;
}

/* Polls, not a futex: a thread woken from a blocking wait can take tens of microseconds to run again (more in a
 * virtual machine), which a launch followed by a sync point would pay every time the worker had gone idle. A kick
 * seen within spin_ns holds the worker here until it is ready (vkb_kick_ready). Meanwhile the express lane is armed
 * where the worker readied it (express.c): a lone launch is submitted from here, and its serial published once it
 * has run; the park lasts while it runs, and spin_ns more after. */
static int vkb_park(vkb_progress *progress, uint64_t spin_ns, int armed) {
    vkb_lower_timer_slack();
    vkb_in_c(progress);
    vkb_express *express = progress->express;
    int ready, lane = VKB_LANE_QUIET;
    uint64_t start = vkb_now_ns(), kicked_at = 0;
    for (;;) {
        if (armed) lane = vkb_express_step(express, progress);
        if (lane == VKB_LANE_NEEDS_PYTHON) { ready = 1; break; }
        if (lane == VKB_LANE_COMPLETED) start = vkb_now_ns();
        if ((ready = vkb_kick_ready(progress, &kicked_at))) break;
        if (lane != VKB_LANE_RUNNING && !kicked_at && vkb_now_ns() - start >= spin_ns) break;
        sched_yield();
    }
    if (armed) vkb_express_disarm(express, progress);
    vkb_to_python(progress);
    return ready;
}

int vkb_wait_work(vkb_progress *progress, uint64_t spin_ns) {
    return vkb_park(progress, spin_ns, vkb_express_arm(progress->express));
}

void vkb_publish_target(uint64_t *target, uint64_t serial) {
    __atomic_store_n(target, serial, __ATOMIC_RELEASE);
}

/* How many callers wait for a published target when the caller whose target was published last waits for `serial` or
 * an earlier one (a publish of `serial` releases it); 0 otherwise. `wanted` is that last caller's: with several
 * callers at once a publish may hold for one it does not release, or not hold for one it does (time, not results).
 * A caller still waiting for its target (a mark the worker has not reached) does not count: the publish cannot
 * release it, and a worker that held for it would only delay the mark. */
static uint32_t vkb_releases(const vkb_progress *progress, uint64_t serial) {
    uint32_t targeted = __atomic_load_n(&progress->targeted, __ATOMIC_ACQUIRE);
    return targeted && serial >= __atomic_load_n(&progress->wanted, __ATOMIC_ACQUIRE) ? targeted : 0;
}

void vkb_publish_completed(vkb_progress *progress, uint64_t serial, uint64_t hold_ns) {
    /* a hold's lane is armed before the publish: the caller it releases may launch again at once */
    int armed = hold_ns && vkb_releases(progress, serial) && vkb_express_arm(progress->express);
    __atomic_store_n(&progress->completed, serial, __ATOMIC_RELEASE);
    uint32_t released = vkb_releases(progress, serial);
    if (!released) {
        if (armed) vkb_express_disarm(progress->express, progress);  /* no hold: serves a claim made meanwhile */
        return;
    }
    /* the released caller leaves its wait first, so that it, not the worker, takes the GIL next */
    uint64_t start = vkb_now_ns();
    while (__atomic_load_n(&progress->targeted, __ATOMIC_ACQUIRE) >= released && vkb_now_ns() - start < VKB_HANDOFF_NS)
        sched_yield();
    if (hold_ns) vkb_park(progress, hold_ns, armed || vkb_express_arm(progress->express));
}

VkResult vkb_wait_last(VkDevice device, VkFence fence, uint64_t serial, uint64_t timeout_ns, vkb_progress *progress,
                       uint64_t hold_ns, VkResult *reset) {
    vkb_in_c(progress);
    VkResult r = vkb_poll_batch(device, fence, serial, timeout_ns, progress, 1);
    /* a fence that cannot be reset is an error its waiter must see: the worker's Python publishes after reporting it */
    *reset = VK_SUCCESS;
    if (r == VK_SUCCESS && (!fence || (*reset = vkResetFences(device, 1, &fence)) == VK_SUCCESS))
        vkb_publish_completed(progress, serial, hold_ns);
    vkb_to_python(progress);
    return r;
}

uint64_t vkb_express_settle(vkb_express *express, uint64_t seen, uint64_t timeout_ns) {
    uint64_t start = vkb_now_ns(), state;
    while ((state = __atomic_load_n(&express->state, __ATOMIC_ACQUIRE)) == seen && vkb_now_ns() - start < timeout_ns)
        sched_yield();
    return state;
}

int vkb_hand_over(vkb_progress *progress, uint32_t seen, uint64_t timeout_ns) {
    __atomic_add_fetch(&progress->hand_overs, 1, __ATOMIC_ACQ_REL);
    __atomic_add_fetch(&progress->handing, 1, __ATOMIC_ACQ_REL);
    uint64_t start = vkb_now_ns();
    int started;
    while (!(started = __atomic_load_n(&progress->submits, __ATOMIC_ACQUIRE) != seen) && vkb_now_ns() - start < timeout_ns)
        sched_yield();
    __atomic_sub_fetch(&progress->handing, 1, __ATOMIC_ACQ_REL);
    return started;
}

VkResult vkb_submit_counted(vkb_window *window, VkQueue queue, VkFence fence, vkb_progress *progress) {
    __atomic_add_fetch(&progress->submits, 1, __ATOMIC_ACQ_REL);
    uint64_t start = vkb_now_ns();
    VkResult r = vkb_submit_window(window, queue, fence);
    window->submit_ns = vkb_now_ns() - start;
    return r;
}

VkResult vkb_submit_batch(vkb_window *window, VkQueue queue, VkFence fence, vkb_progress *progress, uint64_t linger_ns) {
    vkb_in_c(progress);
    /* not ended by `handing`, which counts the caller who handed this over while it is still in vkb_hand_over; a hand-
     * over that begins from here on is another caller's (or the same caller's next): the GIL is free for us now */
    uint32_t hand_overs = __atomic_load_n(&progress->hand_overs, __ATOMIC_ACQUIRE);
    VkResult r = vkb_submit_counted(window, queue, fence, progress);
    uint64_t start = vkb_now_ns();
    while (linger_ns && !__atomic_load_n(&progress->waiters, __ATOMIC_ACQUIRE) &&
           __atomic_load_n(&progress->hand_overs, __ATOMIC_ACQUIRE) == hand_overs && vkb_now_ns() - start < linger_ns)
        sched_yield();
    vkb_to_python(progress);
    return r;
}
