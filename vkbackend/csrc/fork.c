/* The exit of a process forked from one that opened Vulkan. The driver's own exit handlers were registered in the
 * parent and act on the parent's threads: Mesa's (lavapipe's) joins its queue threads, which do not exist in the
 * child, and crashed (SIGSEGV) in about one exit in five once the child had started and ended a thread of its own.
 * A handler registered in the child runs before every handler registered earlier (they run in reverse order), so
 * it ends the process there with the exit status, after Python's own exit handlers and after flushing C stdio. */
#include <stdlib.h>
#include <unistd.h>

static void vkb_exit_now(int status, void *unused) {
    (void)unused;
    fflush(NULL);
    _exit(status);
}

int vkb_skip_inherited_exit_handlers(void) {
#ifdef __GLIBC__
    return on_exit(vkb_exit_now, NULL);
#else
    return -1;  /* no on_exit: the inherited handlers run */
#endif
}

/* The fork guard of the libraries opened at run time to compile and validate (glslang.c, spirv_val.c): C++ code that
 * holds internal locks (glslang's symbol-table mutex, function-local static guards) while it runs. A child forked
 * while another thread is inside would inherit those locks held forever, so each call runs inside the guard's read
 * side and fork takes its write side first: fork waits for the calls in flight, and new calls wait for fork. */
#include <pthread.h>
#include <string.h>

/* Writers first: with glibc's default (readers first), threads that keep compiling would hold fork off forever. */
#ifdef PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP
#define VKB_FORK_GUARD_INITIALIZER PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP
#else
#define VKB_FORK_GUARD_INITIALIZER PTHREAD_RWLOCK_INITIALIZER
#endif
static pthread_rwlock_t vkb_fork_guard = VKB_FORK_GUARD_INITIALIZER;
static pthread_once_t vkb_fork_guard_once = PTHREAD_ONCE_INIT;
static int vkb_fork_guard_status;

static void vkb_fork_prepare(void) { pthread_rwlock_wrlock(&vkb_fork_guard); }
static void vkb_fork_parent(void) { pthread_rwlock_unlock(&vkb_fork_guard); }
/* The child gets a fresh lock: the inherited one still counts the parent's threads that queued on it, which would
 * block the child's first call for good. */
static void vkb_fork_child(void) {
    pthread_rwlock_t fresh = VKB_FORK_GUARD_INITIALIZER;
    memcpy(&vkb_fork_guard, &fresh, sizeof fresh);
}
static void vkb_fork_guard_register(void) {
    vkb_fork_guard_status = pthread_atfork(vkb_fork_prepare, vkb_fork_parent, vkb_fork_child);
}

/* Registers the fork handlers, once per process; 0 on success. */
static int vkb_fork_guard_install(void) {
    pthread_once(&vkb_fork_guard_once, vkb_fork_guard_register);
    return vkb_fork_guard_status;
}
static void vkb_fork_guard_enter(void) { pthread_rwlock_rdlock(&vkb_fork_guard); }
static void vkb_fork_guard_leave(void) { pthread_rwlock_unlock(&vkb_fork_guard); }
