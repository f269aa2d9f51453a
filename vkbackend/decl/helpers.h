/* Our own C helpers (vkbackend/csrc/*.c). Joined last by build_vulkan.py. */

/* loader.c: libvulkan is opened at run time; every vk* function above is a small static wrapper that calls through
 * the dispatch table this fills (and counts successes and honours injected faults, see fault.c). */
#define VKB_FN_COUNT ...
int vkb_open_library(const char *path, char *err, size_t errlen);
int vkb_library_loaded(void);
int vkb_load_instance_functions(VkInstance instance);
int vkb_function_index(const char *name);
const char *vkb_function_name(int fn);
int vkb_has_function(int fn);
uint64_t vkb_success_count(int fn);

/* fault.c: testing hook; the call to `fn` after `after` successful ones returns `result`, once. */
void vkb_fault_inject(int fn, int result, int after);
void vkb_fault_clear(void);
int vkb_fault_pending(void);

/* debug.c: validation messages are kept in C and handed to Python on request. */
int vkb_debug_messenger_create(VkInstance instance, VkDebugUtilsMessengerEXT *messenger);
uint64_t vkb_debug_message_count(void);
size_t vkb_debug_take_messages(char *out, size_t capacity);

/* fork.c: in a forked child, exit without running the exit handlers inherited from the parent (the driver's). */
int vkb_skip_inherited_exit_handlers(void);

/* copy.c: memcpy with the GIL released (cffi releases it around every call), split over threads when large. */
void vkb_copy(void *dst, const void *src, size_t n, int threads);

/* fence.c: wait for a fence by polling (a blocking vkWaitForFences can oversleep by milliseconds on some drivers). */
VkResult vkb_wait_fence(VkDevice device, VkFence fence, uint64_t timeout_ns);

/* slots.c: the table of buffer slots that launch records name by number. Written under the memory pool's lock by
 * whichever thread allocates; read by the worker's recorder. Chunks never move, so readers need no lock. */
typedef struct {
    VkBuffer buffer; uint64_t offset; uint64_t range;
    uint32_t root;        /* the slot whose hazard state this one shares (itself, or a view's parent) */
    uint32_t read_epoch;  /* hazard state: the barrier epoch of the last read / write */
    uint32_t write_epoch;
    uint32_t last_batch;  /* serial of the last batch that used it */
} vkb_slot;
typedef struct vkb_slot_table vkb_slot_table;
vkb_slot_table *vkb_slots_new(void);
void vkb_slots_delete(vkb_slot_table *table);
int vkb_slots_set(vkb_slot_table *table, uint32_t slot, VkBuffer buffer, uint64_t offset, uint64_t range, uint32_t root);
uint32_t vkb_slots_last_batch(vkb_slot_table *table, uint32_t slot);

/* recorder.c: one call records a whole window of packed records into one command buffer. */
#define VKB_RECORD_DISPATCH ...
#define VKB_RECORD_COPY ...
#define VKB_RECORD_TIMESTAMP ...
#define VKB_RECORD_RESET_QUERIES ...
#define VKB_ACCESS_READ ...
#define VKB_ACCESS_WRITE ...
#define VKB_ERROR_GRID ...
#define VKB_ERROR_PROGRAM ...
#define VKB_ERROR_SLOT ...
#define VKB_ERROR_MALFORMED ...
typedef struct {
    VkPipeline pipeline; VkPipelineLayout layout;
    uint32_t n_buffers; uint32_t push_words;
    const uint8_t *access;   /* VKB_ACCESS_* per binding, from SPIR-V reflection */
} vkb_program;
typedef struct {
    VkCommandBuffer cmd; VkDevice device; VkQueryPool query_pool;
    vkb_slot_table *slots;
    vkb_program *const *programs; uint32_t n_programs;
    const uint32_t *words; size_t n_words;
    uint32_t batch;
    uint32_t max_groups[3];
    uint32_t epoch;                /* in and out: the barrier epoch carries across windows */
    const VkDescriptorSet *sets;   /* NULL: push descriptors; else one set per dispatch, in order */
    uint32_t n_sets;
    uint32_t n_dispatches, n_barriers, n_copies;   /* out */
    uint32_t n_errors, error_program; int error_code; /* out: the first record that was skipped, and why */
} vkb_window;
int vkb_record_window(vkb_window *window);
VkResult vkb_submit_window(vkb_window *window, VkQueue queue, VkFence fence);
