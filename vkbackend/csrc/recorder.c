/* Records a window of records (see decl/vkb.h for their layout) and submits it: the hot loop of the backend.
 *
 * Barriers come from hazards: each root slot remembers the barrier epoch of its last read and last write; a record
 * that reads or writes something written in the current epoch, or writes something read in it, gets one global
 * memory barrier first and opens a new epoch. Independent records get none. A record that cannot run (bad grid,
 * unknown slot, a released program's tombstone) is skipped and reported; the rest of the window still runs. A
 * malformed record, or a dispatch of an unknown program index, ends the window: the length of what follows it cannot
 * be known. */
#include <string.h>

#define VKB_STAGES (VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT)
#define VKB_WRITES (VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT)
#define VKB_ACCESSES (VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT)

/* The number of words of the record at p, and for a dispatch its program; 0 when it cannot be read, with the reason
 * in *error (VKB_ERROR_PROGRAM: a dispatch of an unknown program, else VKB_ERROR_MALFORMED). */
static size_t vkb_record_length(const vkb_window *w, const uint32_t *p, const vkb_program **prog, int *error) {
    size_t left = (size_t)(w->words + w->n_words - p), n = 0;
    *prog = NULL;
    *error = VKB_ERROR_MALFORMED;
    switch (p[0]) {
    case VKB_RECORD_DISPATCH:
        if (left < 5) return 0;
        *prog = p[1] < w->n_programs ? w->programs[p[1]] : NULL;
        if (!*prog || (*prog)->n_buffers + (*prog)->n_addresses > VKB_MAX_BINDINGS) { *error = VKB_ERROR_PROGRAM; return 0; }
        n = 5 + (*prog)->n_buffers + (*prog)->n_addresses + (*prog)->push_words;
        break;
    case VKB_RECORD_COPY: n = 9; break;
    case VKB_RECORD_TIMESTAMP: n = 2; break;
    case VKB_RECORD_RESET_QUERIES: n = 3; break;
    default: return 0;
    }
    return n <= left ? n : 0;
}

uint32_t vkb_window_set_layouts(const vkb_window *w, VkDescriptorSetLayout *out, uint32_t capacity) {
    uint32_t count = 0;
    const vkb_program *prog;
    int error;
    for (const uint32_t *p = w->words, *end = w->words + w->n_words; p < end;) {
        size_t n = vkb_record_length(w, p, &prog, &error);
        if (!n) break;
        if (prog && prog->pipeline) { if (count < capacity) out[count] = prog->set_layout; count++; }
        p += n;
    }
    return count;
}

static void vkb_barrier(vkb_window *w, VkFlags dst_stages, VkFlags dst_access) {
    VkMemoryBarrier barrier = {VK_STRUCTURE_TYPE_MEMORY_BARRIER, NULL, VKB_WRITES, dst_access};
    vkCmdPipelineBarrier(w->cmd, VKB_STAGES, dst_stages, 0, 1, &barrier, 0, NULL, 0, NULL);
    w->n_barriers++;
}

static void vkb_skip(vkb_window *w, int code, uint32_t program) {
    if (w->n_errors++ == 0) { w->error_code = code; w->error_program = program; }
}

/* Hazard check over (root, access) pairs; opens a new epoch with a barrier when needed, then marks the accesses. */
static void vkb_order(vkb_window *w, vkb_slot *const *roots, const uint8_t *access, uint32_t n) {
    int hazard = 0;
    for (uint32_t i = 0; i < n && !hazard; i++) {
        if (roots[i]->write_epoch == w->epoch) hazard = 1;                                   /* RAW, WAW */
        else if ((access[i] & VKB_ACCESS_WRITE) && roots[i]->read_epoch == w->epoch) hazard = 1; /* WAR */
    }
    if (hazard) { vkb_barrier(w, VKB_STAGES, VKB_ACCESSES); w->epoch++; }
    for (uint32_t i = 0; i < n; i++) {
        if (access[i] & VKB_ACCESS_READ) roots[i]->read_epoch = w->epoch;
        if (access[i] & VKB_ACCESS_WRITE) roots[i]->write_epoch = w->epoch;
    }
}

/* The slot `number` names, if it holds a buffer, and its root. */
static vkb_slot *vkb_live_slot(vkb_window *w, uint32_t number, vkb_slot **root) {
    vkb_slot *s = vkb_slot_at(w->slots, number);
    if (!s || !s->buffer) return NULL;
    vkb_slot *r = vkb_slot_at(w->slots, s->root);
    *root = r ? r : s;
    return s;
}

static void vkb_record_dispatch(vkb_window *w, const uint32_t *p, const vkb_program *prog, uint32_t *set_index,
                                VkPipeline *bound) {
    VkWriteDescriptorSet writes[VKB_MAX_BINDINGS];
    VkDescriptorBufferInfo infos[VKB_MAX_BINDINGS];
    vkb_slot *roots[VKB_MAX_BINDINGS];
    uint32_t n_slots = prog->n_buffers + prog->n_addresses;
    const uint32_t *slots = p + 5, *push = slots + n_slots;
    uint32_t gx = p[2], gy = p[3], gz = p[4];
    if (!prog->pipeline) { vkb_skip(w, VKB_ERROR_PROGRAM, p[1]); return; }  /* released: a tombstone, no set */
    VkDescriptorSet set = w->sets ? w->sets[*set_index < w->n_sets ? *set_index : w->n_sets - 1] : NULL;
    if (w->sets) (*set_index)++;  /* one set per dispatch, skipped or not */
    if (!gx || !gy || !gz || gx > w->max_groups[0] || gy > w->max_groups[1] || gz > w->max_groups[2]) {
        vkb_skip(w, VKB_ERROR_GRID, p[1]);
        return;
    }
    for (uint32_t i = 0; i < n_slots; i++) {
        vkb_slot *s = vkb_live_slot(w, slots[i], &roots[i]);
        if (!s) { vkb_skip(w, VKB_ERROR_SLOT, p[1]); return; }
        if (i >= prog->n_buffers) continue;  /* reached by address: ordered below, not bound */
        infos[i] = (VkDescriptorBufferInfo){s->buffer, s->offset, s->range};
        writes[i] = (VkWriteDescriptorSet){VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, NULL, set, i, 0, 1,
                                           VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, NULL, &infos[i], NULL};
    }
    vkb_order(w, roots, prog->access, n_slots);
    if (prog->pipeline != *bound) {
        vkCmdBindPipeline(w->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, prog->pipeline);
        *bound = prog->pipeline;
    }
    if (prog->n_buffers && set) {
        vkUpdateDescriptorSets(w->device, prog->n_buffers, writes, 0, NULL);
        vkCmdBindDescriptorSets(w->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, prog->layout, 0, 1, &set, 0, NULL);
    } else if (prog->n_buffers) {
        vkCmdPushDescriptorSetKHR(w->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, prog->layout, 0, prog->n_buffers, writes);
    }
    if (prog->push_words)
        vkCmdPushConstants(w->cmd, prog->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, prog->push_words * 4, push);
    vkCmdDispatch(w->cmd, gx, gy, gz);
    w->n_dispatches++;
}

static void vkb_record_copy(vkb_window *w, const uint32_t *p) {
    static const uint8_t copy_access[2] = {VKB_ACCESS_READ, VKB_ACCESS_WRITE};
    vkb_slot *roots[2];
    vkb_slot *src = vkb_live_slot(w, p[1], &roots[0]), *dst = vkb_live_slot(w, p[2], &roots[1]);
    if (!src || !dst) { vkb_skip(w, VKB_ERROR_SLOT, 0); return; }
    vkb_order(w, roots, copy_access, 2);
    uint64_t src_off = p[3] | ((uint64_t)p[4] << 32), dst_off = p[5] | ((uint64_t)p[6] << 32);
    VkBufferCopy region = {src->offset + src_off, dst->offset + dst_off, p[7] | ((uint64_t)p[8] << 32)};
    vkCmdCopyBuffer(w->cmd, src->buffer, dst->buffer, 1, &region);
    w->n_copies++;
}

/* Records the records from p on into w->cmd, until the window ends or (with stop_at) once w->n_dispatches reaches
 * stop_at; returns where it stopped (the window's end after a record it cannot read). */
static const uint32_t *vkb_record_records(vkb_window *w, const uint32_t *p, uint32_t stop_at, uint32_t *set_index) {
    VkPipeline bound = NULL;  /* a command buffer begins with no pipeline bound */
    const vkb_program *prog;
    int error;
    const uint32_t *end = w->words + w->n_words;
    if (w->barrier_first) { vkb_barrier(w, VKB_STAGES, VKB_ACCESSES); w->epoch++; w->barrier_first = 0; }
    while (p < end && !(stop_at && w->n_dispatches >= stop_at)) {
        size_t n = vkb_record_length(w, p, &prog, &error);
        if (!n) { vkb_skip(w, error, p[0] == VKB_RECORD_DISPATCH && end - p >= 2 ? p[1] : 0); return end; }
        switch (p[0]) {
        case VKB_RECORD_DISPATCH: vkb_record_dispatch(w, p, prog, set_index, &bound); break;
        case VKB_RECORD_COPY: vkb_record_copy(w, p); break;
        case VKB_RECORD_TIMESTAMP:
            vkCmdWriteTimestamp(w->cmd, (p[1] & 1) ? VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT : VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT,
                                w->query_pool, p[1]);
            break;
        case VKB_RECORD_RESET_QUERIES: vkCmdResetQueryPool(w->cmd, w->query_pool, p[1], p[2]); break;
        }
        p += n;
    }
    return p;
}

/* The end of a window: its writes visible to the host (read-backs through mapped memory), then, once they are done,
 * the completion marker (decl/vkb.h). That first barrier also orders everything later on the queue after the whole
 * window (its second scope is every later command, in this submission and the next), and so the marker's write after
 * the previous batch's: memory a batch used may be reused as soon as the marker says it has completed, before a fence
 * has told the host so (submit.py). */
static void vkb_record_end(const vkb_window *w, VkCommandBuffer cmd) {
    VkMemoryBarrier done = {VK_STRUCTURE_TYPE_MEMORY_BARRIER, NULL, VKB_WRITES, VK_ACCESS_HOST_READ_BIT | VKB_ACCESSES};
    vkCmdPipelineBarrier(cmd, VKB_STAGES, VK_PIPELINE_STAGE_HOST_BIT | VKB_STAGES, 0, 1, &done, 0, NULL, 0, NULL);
    if (w->marker_source) {
        VkBufferCopy from_host = {w->marker_source, 0, 4};
        vkCmdCopyBuffer(cmd, w->marker_buffer, w->marker_buffer, 1, &from_host);
    } else {
        vkCmdFillBuffer(cmd, w->marker_buffer, 0, 4, w->marker_value);
    }
    VkMemoryBarrier marker = {VK_STRUCTURE_TYPE_MEMORY_BARRIER, NULL, VK_ACCESS_TRANSFER_WRITE_BIT, VK_ACCESS_HOST_READ_BIT};
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &marker, 0, NULL, 0, NULL);
}

/* Begin, record, end and submit one command buffer: the records from *p on (see vkb_record_records). */
static VkResult vkb_submit_records(vkb_window *w, VkCommandBuffer cmd, const uint32_t **p, uint32_t stop_at,
                                   uint32_t *set_index, VkQueue queue, VkFence fence) {
    VkCommandBufferBeginInfo begin = {VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO, NULL,
                                      w->recording ? 0 : VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT, NULL};
    VkResult r = vkBeginCommandBuffer(cmd, &begin);
    if (r != VK_SUCCESS) return r;
    VkCommandBuffer window_cmd = w->cmd;
    w->cmd = cmd;  /* the recording helpers record into w->cmd */
    *p = vkb_record_records(w, *p, stop_at, set_index);
    if (!stop_at) {
        vkb_record_end(w, cmd);
        w->epoch++;  /* the end's first barrier orders every later command after the window: no hazard carries over */
    }
    w->cmd = window_cmd;
    r = vkEndCommandBuffer(cmd);
    if (r != VK_SUCCESS) return r;
    VkSubmitInfo submit = {VK_STRUCTURE_TYPE_SUBMIT_INFO, NULL, 0, NULL, NULL, 1, &cmd, 0, NULL};
    return vkQueueSubmit(queue, 1, &submit, fence);
}

/* The program entry of each dispatch in the window's words, in order, into out (at most `capacity`); how many there
 * are, or -1 when a record cannot be read. */
static int vkb_window_programs(const vkb_window *w, const vkb_program **out, uint32_t capacity) {
    uint32_t count = 0;
    const vkb_program *prog;
    int error;
    for (const uint32_t *p = w->words, *end = w->words + w->n_words; p < end;) {
        size_t n = vkb_record_length(w, p, &prog, &error);
        if (!n) return -1;
        if (prog) { if (count < capacity) out[count] = prog; count++; }
        p += n;
    }
    return (int)count;
}

/* Whether the window's recording (decl/vkb.h, vkb_recording) holds these records as they would be recorded now. */
static int vkb_recording_holds(const vkb_window *w, const vkb_recording *rec, uint64_t generation) {
    const vkb_program *programs[VKB_RECORDING_DISPATCHES];
    if (rec->cmd != w->cmd || (rec->head_cmd && rec->head_cmd != w->head_cmd) || rec->slots_generation != generation ||
        rec->barrier_first != w->barrier_first || rec->n_words != w->n_words ||
        memcmp(rec->words, w->words, w->n_words * sizeof *w->words))
        return 0;
    int n = vkb_window_programs(w, programs, VKB_RECORDING_DISPATCHES);
    return n == (int)rec->n_programs && !memcmp(programs, rec->programs, n * sizeof *programs);
}

/* Keep what was just recorded into w->cmd (and its head into w->head_cmd, where that went first), from the epoch
 * `epoch`, against slot table `generation`; or nothing. */
static void vkb_recording_keep(const vkb_window *w, vkb_recording *rec, uint64_t generation, uint32_t barrier_first,
                               uint32_t epoch) {
    rec->cmd = NULL;
    if (w->n_errors || w->n_words > VKB_RECORDING_WORDS) return;
    int n = vkb_window_programs(w, rec->programs, VKB_RECORDING_DISPATCHES);
    if (n < 0 || n > VKB_RECORDING_DISPATCHES) return;
    rec->n_programs = (uint32_t)n;
    memcpy(rec->words, w->words, w->n_words * sizeof *w->words);
    rec->n_words = (uint32_t)w->n_words;
    rec->slots_generation = generation;
    rec->barrier_first = barrier_first;
    rec->epochs = w->epoch - epoch;
    rec->n_dispatches = w->n_dispatches; rec->n_barriers = w->n_barriers; rec->n_copies = w->n_copies;
    rec->head_cmd = w->head_submitted ? w->head_cmd : NULL;
    rec->cmd = w->cmd;
}

/* Record and submit in one call, so the worker gives up and retakes the GIL once per window rather than once per
 * Vulkan call. Barriers recorded into the second command buffer order it after the head too (they cover everything
 * earlier in submission order on the queue). A window with a recording kept (w->recording) that holds its records
 * submits that again: the same commands (a head that went first and the rest, as two command buffers of one
 * submission), with the hazard state they leave (every access of the window is ordered before anything after it by
 * its end, so a barrier epoch is all that carries over). */
VkResult vkb_submit_window(vkb_window *w, VkQueue queue, VkFence fence) {
    uint32_t set_index = 0, epoch = w->epoch, barrier_first = w->barrier_first;
    const uint32_t *p = w->words;
    vkb_recording *rec = w->recording;
    uint64_t generation = rec ? vkb_slots_generation(w->slots) : 0;
    w->n_dispatches = w->n_barriers = w->n_copies = w->n_errors = 0;
    w->error_code = 0; w->error_program = 0;
    w->head_submitted = w->fence_submitted = 0;
    w->reused = 0;
    if (w->marker_source) w->marker_host[w->marker_source / 4] = w->marker_value;  /* visible to what is submitted next */
    if (rec && vkb_recording_holds(w, rec, generation)) {
        VkCommandBuffer cmds[2] = {rec->head_cmd, w->cmd};
        uint32_t n_cmds = rec->head_cmd ? 2 : 1;
        VkSubmitInfo submit = {VK_STRUCTURE_TYPE_SUBMIT_INFO, NULL, 0, NULL, NULL, n_cmds, cmds + 2 - n_cmds, 0, NULL};
        VkResult r = vkQueueSubmit(queue, 1, &submit, fence);
        if (r != VK_SUCCESS) { rec->cmd = NULL; return r; }
        w->epoch += rec->epochs;
        w->barrier_first = 0;
        w->n_dispatches = rec->n_dispatches; w->n_barriers = rec->n_barriers; w->n_copies = rec->n_copies;
        w->fence_submitted = fence != VK_NULL_HANDLE;
        w->reused = 1;
        return r;
    }
    if (rec) rec->cmd = NULL;  /* recorded anew below */
    /* the window's dispatches of live programs: one set layout each */
    if (w->head_cmd && w->head_dispatches && vkb_window_set_layouts(w, NULL, 0) > 2 * w->head_dispatches) {
        VkResult r = vkb_submit_records(w, w->head_cmd, &p, w->head_dispatches, &set_index, queue, VK_NULL_HANDLE);
        if (r != VK_SUCCESS) return r;
        w->head_submitted = 1;
        if (!fence) fence = w->split_fence;  /* should the rest fail, a fence submitted alone still covers the head */
    }
    VkResult r = vkb_submit_records(w, w->cmd, &p, 0, &set_index, queue, fence);
    /* a head already runs: the fence, submitted alone, still signals once it is done */
    w->fence_submitted = fence && (r == VK_SUCCESS || (w->head_submitted && vkQueueSubmit(queue, 0, NULL, fence) == VK_SUCCESS));
    if (rec && r == VK_SUCCESS) vkb_recording_keep(w, rec, generation, barrier_first, epoch);
    return r;
}
