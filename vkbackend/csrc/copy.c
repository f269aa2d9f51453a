/* Host copies for transfers. Called with the GIL released; a large copy is split over threads because one core's
 * memcpy into pinned or write-combined memory is far below what the DMA engine moves. */
#include <pthread.h>

typedef struct { char *dst; const char *src; size_t n; } vkb_copy_part;

static void *vkb_copy_thread(void *arg) {
    vkb_copy_part *p = (vkb_copy_part *)arg;
    memcpy(p->dst, p->src, p->n);
    return NULL;
}

void vkb_copy(void *dst, const void *src, size_t n, int threads) {
    enum { MAX_THREADS = 16, MIN_PART = 4 << 20 };
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    if (threads <= 1 || n < 2 * (size_t)MIN_PART) { memcpy(dst, src, n); return; }
    if ((size_t)threads > n / MIN_PART) threads = (int)(n / MIN_PART);
    vkb_copy_part parts[MAX_THREADS];
    pthread_t ids[MAX_THREADS];
    size_t part = (n / threads + 4095) & ~(size_t)4095, done = 0;
    int started = 0;
    for (int i = 0; i < threads && done < n; i++) {
        size_t len = (n - done < part) ? n - done : part;
        parts[i] = (vkb_copy_part){(char *)dst + done, (const char *)src + done, len};
        done += len;
        if (i == 0) continue;  /* the calling thread takes the first part */
        if (pthread_create(&ids[i], NULL, vkb_copy_thread, &parts[i]) != 0) { memcpy(parts[i].dst, parts[i].src, len); ids[i] = 0; }
        started = i;
    }
    memcpy(parts[0].dst, parts[0].src, parts[0].n);
    for (int i = 1; i <= started; i++) if (ids[i]) pthread_join(ids[i], NULL);
}
