/* The C side of the types and constants declared in decl/helpers.h (cffi checks that the two agree). */
enum { VKB_RECORD_DISPATCH = 0, VKB_RECORD_COPY = 1, VKB_RECORD_TIMESTAMP = 2, VKB_RECORD_RESET_QUERIES = 3 };
enum { VKB_ACCESS_READ = 1, VKB_ACCESS_WRITE = 2 };
enum { VKB_ERROR_GRID = 1, VKB_ERROR_PROGRAM = 2, VKB_ERROR_SLOT = 3, VKB_ERROR_MALFORMED = 4 };

typedef struct {
    VkBuffer buffer; uint64_t offset; uint64_t range;
    uint32_t root; uint32_t read_epoch; uint32_t write_epoch; uint32_t last_batch;
} vkb_slot;
typedef struct vkb_slot_table vkb_slot_table;

typedef struct {
    VkPipeline pipeline; VkPipelineLayout layout;
    uint32_t n_buffers; uint32_t push_words;
    const uint8_t *access;
} vkb_program;

typedef struct {
    VkCommandBuffer cmd; VkDevice device; VkQueryPool query_pool;
    vkb_slot_table *slots;
    vkb_program *const *programs; uint32_t n_programs;
    const uint32_t *words; size_t n_words;
    uint32_t batch;
    uint32_t max_groups[3];
    uint32_t epoch;
    const VkDescriptorSet *sets;
    uint32_t n_sets;
    uint32_t n_dispatches, n_barriers, n_copies;
    uint32_t n_errors, error_program; int error_code;
} vkb_window;
