/* Fault injection for tests, checked by every generated wrapper of a function that returns VkResult. One fault at a
 * time: cheap (one load and compare per call) and enough to test each failure path in turn. */
static volatile int vkb_fault_fn = -1;
static volatile int vkb_fault_result;
static volatile int vkb_fault_after;

void vkb_fault_inject(int fn, int result, int after) {
    vkb_fault_result = result; vkb_fault_after = after;
    __atomic_store_n(&vkb_fault_fn, fn, __ATOMIC_SEQ_CST);
}
void vkb_fault_clear(void) { __atomic_store_n(&vkb_fault_fn, -1, __ATOMIC_SEQ_CST); }
int vkb_fault_pending(void) { return vkb_fault_fn >= 0; }

/* Returns nonzero (and the result to return) when this call of `fn` is the one to fail. */
static inline int vkb_fault_fires(int fn, VkResult *result) {
    if (__builtin_expect(vkb_fault_fn != fn, 1)) return 0;
    if (__atomic_fetch_sub(&vkb_fault_after, 1, __ATOMIC_SEQ_CST) > 0) return 0;
    int expected = fn;
    if (!__atomic_compare_exchange_n(&vkb_fault_fn, &expected, -1, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) return 0;
    *result = (VkResult)vkb_fault_result;
    return 1;
}
