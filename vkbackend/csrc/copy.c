/* Host copies for transfers. Called with the GIL released; a large copy is split over threads because one core's
 * memcpy into pinned or write-combined memory is far below what the DMA engine moves. */
#include <pthread.h>

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

static void *vkb_copy_thread(void *arg) {
    vkb_copy_part *p = (vkb_copy_part *)arg;
    p->fn(p->dst, p->src, p->n);
    return NULL;
}

static void vkb_copy_split(vkb_copy_fn fn, void *dst, const void *src, size_t n, int threads) {
    enum { MAX_THREADS = 16, MIN_PART = 4 << 20 };
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    if (threads <= 1 || n < 2 * (size_t)MIN_PART) { fn(dst, src, n); return; }
    if ((size_t)threads > n / MIN_PART) threads = (int)(n / MIN_PART);
    vkb_copy_part parts[MAX_THREADS];
    pthread_t ids[MAX_THREADS];
    /* whole pages, each share rounded up, so that the threads' parts cover all n bytes */
    size_t part = ((n + threads - 1) / threads + 4095) & ~(size_t)4095, done = 0;
    int started = 0;
    for (int i = 0; i < threads && done < n; i++) {
        size_t len = (n - done < part) ? n - done : part;
        parts[i] = (vkb_copy_part){fn, (char *)dst + done, (const char *)src + done, len};
        done += len;
        if (i == 0) continue;  /* the calling thread takes the first part */
        if (pthread_create(&ids[i], NULL, vkb_copy_thread, &parts[i]) != 0) {
            fn(parts[i].dst, parts[i].src, len);
            ids[i] = 0;
        }
        started = i;
    }
    fn(parts[0].dst, parts[0].src, parts[0].n);
    for (int i = 1; i <= started; i++) if (ids[i]) pthread_join(ids[i], NULL);
}

/* Below this a copy's destination fits in cache and may well be read soon: cached stores. */
enum { VKB_STREAM_MIN = 1 << 20 };

void vkb_copy(void *dst, const void *src, size_t n, int threads) { vkb_copy_split(vkb_memcpy, dst, src, n, threads); }

void vkb_copy_streaming(void *dst, const void *src, size_t n, int threads) {
    vkb_copy_split(n >= VKB_STREAM_MIN ? vkb_copy_stream : vkb_memcpy, dst, src, n, threads);
}
