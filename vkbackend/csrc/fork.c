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
