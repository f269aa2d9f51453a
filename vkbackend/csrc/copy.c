/* Host copies for transfers. Called with the GIL released; a large copy is split over threads because one core's
 * memcpy into pinned or write-combined memory is far below what the DMA engine moves. */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>

typedef void (*vkb_copy_fn)(char *dst, const char *src, size_t n);
typedef struct { vkb_copy_fn fn; char *dst; const char *src; size_t n; } vkb_copy_part;

static void vkb_memcpy(char *dst, const char *src, size_t n) { memcpy(dst, src, n); }

#if defined(__x86_64__) || defined(_M_X64)
#include <emmintrin.h>
/* A cached store first reads its destination line (read for ownership): a third of a large copy's memory traffic,
 * wasted when the destination is not read soon (the caller's array after a download). Streaming stores write whole
 * lines without reading them. glibc's memcpy streams only past a threshold derived from the last-level cache's size
 * (151 MiB on the H200's host), far above a transfer's parts. Into staging (an upload) memcpy is faster on that host:
 * docs/performance.md. */
static void vkb_copy_stream(char *dst, const char *src, size_t n) {
    size_t head = -(uintptr_t)dst & 63;  /* up to a line boundary, so that each streamed line is written whole */
    if (head > n) head = n;
    memcpy(dst, src, head);
    dst += head, src += head, n -= head;
    for (; n >= 64; dst += 64, src += 64, n -= 64) {
        __m128i a = _mm_loadu_si128((const __m128i *)src), b = _mm_loadu_si128((const __m128i *)(src + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(src + 32)), d = _mm_loadu_si128((const __m128i *)(src + 48));
        _mm_stream_si128((__m128i *)dst, a);
        _mm_stream_si128((__m128i *)(dst + 16), b);
        _mm_stream_si128((__m128i *)(dst + 32), c);
        _mm_stream_si128((__m128i *)(dst + 48), d);
    }
    memcpy(dst, src, n);
    _mm_sfence();  /* streaming stores are weakly ordered: visible before the caller (or the join) goes on */
}
#else
static void vkb_copy_stream(char *dst, const char *src, size_t n) { memcpy(dst, src, n); }
#endif

/* A copy of 2 * MIN_PART or more is split into shares of at least MIN_PART, rounded up to whole pages (the last one
 * shorter), at most one per thread it may use; whichever thread is free takes the next. */
enum { MAX_THREADS = 16, MIN_PART = 1 << 20 };

/* The crew: copy threads kept for the process, so that a split copy does not start threads of its own (starting and
 * joining seven took 0.3-0.5 ms on a 2-core host, about what a 4 MiB part's copy takes). A copy lists its parts in
 * the crew's job and wakes it; the caller and the crew's threads take parts from the job until none is left, and the
 * caller returns once every part is done. One copy uses the crew at a time: another that finds it busy starts threads
 * of its own. The crew's threads block the asynchronous signals: a signal a crew thread caught would interrupt no
 * Python thread's blocking call, as Python expects its handlers to. A forked child, which has none of the crew's
 * threads, begins with an empty crew. */
typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t work, done;  /* work: a job was listed; done: its last part finished */
    vkb_copy_part *parts;
    int n_parts, next, left;    /* the job's parts; the next one to take; those not yet finished */
    int busy, members;          /* a copy uses the crew; threads started */
    uint64_t served, alone;     /* split copies the crew served; those that found it busy and started threads */
} vkb_crew;
static vkb_crew crew = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER};
static pthread_once_t crew_once = PTHREAD_ONCE_INIT;

static void vkb_crew_reset_in_child(void) {
    vkb_crew fresh = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER};
    memcpy(&crew, &fresh, sizeof fresh);
}
static void vkb_crew_register(void) { pthread_atfork(NULL, NULL, vkb_crew_reset_in_child); }

/* Under crew.lock: take and copy parts until none is left, the lock released around each copy. */
static void vkb_crew_take_parts(void) {
    while (crew.next < crew.n_parts) {
        vkb_copy_part *p = &crew.parts[crew.next++];
        pthread_mutex_unlock(&crew.lock);
        p->fn(p->dst, p->src, p->n);
        pthread_mutex_lock(&crew.lock);
        if (--crew.left == 0) pthread_cond_signal(&crew.done);
    }
}

static void *vkb_crew_member(void *unused) {
    (void)unused;
    pthread_mutex_lock(&crew.lock);
    for (;;) {
        while (crew.next >= crew.n_parts) pthread_cond_wait(&crew.work, &crew.lock);
        vkb_crew_take_parts();
    }
}

/* Under crew.lock: start members until there are `wanted` (as many as can be started). */
static void vkb_crew_grow(int wanted) {
    sigset_t all, old;
    pthread_attr_t attr;
    if (crew.members >= wanted || pthread_attr_init(&attr) != 0) return;
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    sigfillset(&all);
    static const int faults[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL};  /* a fault stays fatal, and is reported */
    for (size_t i = 0; i < sizeof faults / sizeof *faults; i++) sigdelset(&all, faults[i]);
    pthread_sigmask(SIG_SETMASK, &all, &old);  /* a new thread inherits the mask */
    while (crew.members < wanted) {
        pthread_t id;
        if (pthread_create(&id, &attr, vkb_crew_member, NULL) != 0) break;
        crew.members++;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
}

/* Copy `n` parts with the crew's help; 0 (nothing copied) when another copy is using it. */
static int vkb_crew_copy(vkb_copy_part *parts, int n) {
    pthread_once(&crew_once, vkb_crew_register);
    pthread_mutex_lock(&crew.lock);
    if (crew.busy) { crew.alone++; pthread_mutex_unlock(&crew.lock); return 0; }
    crew.busy = 1, crew.served++;
    vkb_crew_grow(n - 1);
    crew.parts = parts, crew.n_parts = n, crew.next = 0, crew.left = n;
    pthread_cond_broadcast(&crew.work);
    vkb_crew_take_parts();  /* with no member started, the caller copies every part */
    while (crew.left) pthread_cond_wait(&crew.done, &crew.lock);
    crew.parts = NULL, crew.n_parts = crew.next = 0, crew.busy = 0;
    pthread_mutex_unlock(&crew.lock);
    return 1;
}

void vkb_copy_crew_counts(int *members, uint64_t *served, uint64_t *alone) {
    pthread_mutex_lock(&crew.lock);
    *members = crew.members, *served = crew.served, *alone = crew.alone;
    pthread_mutex_unlock(&crew.lock);
}

static void *vkb_copy_thread(void *arg) {
    vkb_copy_part *p = (vkb_copy_part *)arg;
    p->fn(p->dst, p->src, p->n);
    return NULL;
}

/* The parts on threads started for this copy (the crew is busy with another). */
static void vkb_copy_own_threads(vkb_copy_part *parts, int n) {
    pthread_t ids[MAX_THREADS];
    for (int i = 1; i < n; i++)
        if (pthread_create(&ids[i], NULL, vkb_copy_thread, &parts[i]) != 0) {
            parts[i].fn(parts[i].dst, parts[i].src, parts[i].n);
            ids[i] = 0;
        }
    parts[0].fn(parts[0].dst, parts[0].src, parts[0].n);
    for (int i = 1; i < n; i++) if (ids[i]) pthread_join(ids[i], NULL);
}

static void vkb_copy_split(vkb_copy_fn fn, void *dst, const void *src, size_t n, int threads) {
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    if (threads <= 1 || n < 2 * (size_t)MIN_PART) { fn(dst, src, n); return; }
    if ((size_t)threads > n / MIN_PART) threads = (int)(n / MIN_PART);
    vkb_copy_part parts[MAX_THREADS];
    /* whole pages, each share rounded up, so that the threads' parts cover all n bytes */
    size_t part = ((n + threads - 1) / threads + 4095) & ~(size_t)4095, done = 0;
    int count = 0;
    while (done < n) {
        size_t len = (n - done < part) ? n - done : part;
        parts[count++] = (vkb_copy_part){fn, (char *)dst + done, (const char *)src + done, len};
        done += len;
    }
    if (!vkb_crew_copy(parts, count)) vkb_copy_own_threads(parts, count);
}

/* Below this a copy's destination fits in cache and may well be read soon: cached stores. */
enum { VKB_STREAM_MIN = 1 << 20 };

void vkb_copy(void *dst, const void *src, size_t n, int threads) { vkb_copy_split(vkb_memcpy, dst, src, n, threads); }

void vkb_copy_streaming(void *dst, const void *src, size_t n, int threads) {
    vkb_copy_split(n >= VKB_STREAM_MIN ? vkb_copy_stream : vkb_memcpy, dst, src, n, threads);
}
