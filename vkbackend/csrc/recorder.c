/* Records a window of packed launch records into one command buffer: the hot loop of the backend.
 *
 * Records are runs of uint32 words (see vkbackend/submit.py, which writes them):
 *   DISPATCH   kind, program, gx, gy, gz, slot[n_buffers], push[push_words]
 *   COPY       kind, src slot, dst slot, src offset lo/hi, dst offset lo/hi, size lo/hi
 *   TIMESTAMP  kind, query               (top of pipe for even queries, bottom of pipe for odd ones)
 *   RESET_QUERIES kind, first, count
 * Barriers come from hazards: each root slot remembers the barrier epoch of its last read and last write; a record
 * that reads or writes something written in the current epoch, or writes something read in it, gets one global
 * memory barrier first and opens a new epoch. Independent records get none. A record that cannot run (bad grid,
 * unknown program or slot) is skipped and reported; the rest of the window still runs. */

enum { VKB_MAX_BINDINGS = 64 };

#define VKB_STAGES (VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT)
#define VKB_WRITES (VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT)
#define VKB_ACCESSES (VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT)

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
        roots[i]->last_batch = w->batch;
    }
}

static vkb_slot *vkb_root_of(vkb_window *w, vkb_slot *s) {
    vkb_slot *root = vkb_slot_at(w->slots, s->root);
    return root ? root : s;
}

int vkb_record_window(vkb_window *w) {
    const uint32_t *p = w->words, *end = w->words + w->n_words;
    VkPipeline bound = NULL;
    uint32_t set_index = 0;
    VkWriteDescriptorSet writes[VKB_MAX_BINDINGS];
    VkDescriptorBufferInfo infos[VKB_MAX_BINDINGS];
    vkb_slot *roots[VKB_MAX_BINDINGS];
    w->n_dispatches = w->n_barriers = w->n_copies = w->n_errors = 0;
    w->error_code = 0; w->error_program = 0;

    while (p < end) {
        uint32_t kind = p[0];
        if (kind == VKB_RECORD_DISPATCH) {
            if (end - p < 5) { vkb_skip(w, VKB_ERROR_MALFORMED, 0); break; }
            uint32_t prog_id = p[1];
            const vkb_program *prog = prog_id < w->n_programs ? w->programs[prog_id] : NULL;
            if (!prog || prog->n_buffers > VKB_MAX_BINDINGS) { vkb_skip(w, VKB_ERROR_PROGRAM, prog_id); break; }
            const uint32_t *slots = p + 5, *push = slots + prog->n_buffers;
            const uint32_t *next = push + prog->push_words;
            if (next > end) { vkb_skip(w, VKB_ERROR_MALFORMED, prog_id); break; }
            uint32_t gx = p[2], gy = p[3], gz = p[4];
            p = next;
            if (!gx || !gy || !gz || gx > w->max_groups[0] || gy > w->max_groups[1] || gz > w->max_groups[2]) {
                vkb_skip(w, VKB_ERROR_GRID, prog_id);
                if (w->sets) set_index++;
                continue;
            }
            int bad = 0;
            for (uint32_t i = 0; i < prog->n_buffers; i++) {
                vkb_slot *s = vkb_slot_at(w->slots, slots[i]);
                if (!s || !s->buffer) { bad = 1; break; }
                s->last_batch = w->batch;
                roots[i] = vkb_root_of(w, s);
                infos[i] = (VkDescriptorBufferInfo){s->buffer, s->offset, s->range};
                writes[i] = (VkWriteDescriptorSet){VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, NULL, NULL, i, 0, 1,
                                                   VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, NULL, &infos[i], NULL};
            }
            if (bad) { vkb_skip(w, VKB_ERROR_SLOT, prog_id); if (w->sets) set_index++; continue; }
            vkb_order(w, roots, prog->access, prog->n_buffers);
            if (prog->pipeline != bound) {
                vkCmdBindPipeline(w->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, prog->pipeline);
                bound = prog->pipeline;
            }
            if (prog->n_buffers) {
                if (w->sets) {
                    VkDescriptorSet set = w->sets[set_index < w->n_sets ? set_index : w->n_sets - 1];
                    for (uint32_t i = 0; i < prog->n_buffers; i++) writes[i].dstSet = set;
                    vkUpdateDescriptorSets(w->device, prog->n_buffers, writes, 0, NULL);
                    vkCmdBindDescriptorSets(w->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, prog->layout, 0, 1, &set, 0, NULL);
                } else {
                    vkCmdPushDescriptorSetKHR(w->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, prog->layout, 0, prog->n_buffers, writes);
                }
            }
            if (w->sets) set_index++;
            if (prog->push_words)
                vkCmdPushConstants(w->cmd, prog->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, prog->push_words * 4, push);
            vkCmdDispatch(w->cmd, gx, gy, gz);
            w->n_dispatches++;
        } else if (kind == VKB_RECORD_COPY) {
            if (end - p < 9) { vkb_skip(w, VKB_ERROR_MALFORMED, 0); break; }
            vkb_slot *src = vkb_slot_at(w->slots, p[1]), *dst = vkb_slot_at(w->slots, p[2]);
            uint64_t src_off = p[3] | ((uint64_t)p[4] << 32), dst_off = p[5] | ((uint64_t)p[6] << 32);
            uint64_t size = p[7] | ((uint64_t)p[8] << 32);
            p += 9;
            if (!src || !dst || !src->buffer || !dst->buffer) { vkb_skip(w, VKB_ERROR_SLOT, 0); continue; }
            static const uint8_t copy_access[2] = {VKB_ACCESS_READ, VKB_ACCESS_WRITE};
            src->last_batch = dst->last_batch = w->batch;
            roots[0] = vkb_root_of(w, src); roots[1] = vkb_root_of(w, dst);
            vkb_order(w, roots, copy_access, 2);
            VkBufferCopy region = {src->offset + src_off, dst->offset + dst_off, size};
            vkCmdCopyBuffer(w->cmd, src->buffer, dst->buffer, 1, &region);
            w->n_copies++;
        } else if (kind == VKB_RECORD_TIMESTAMP) {
            if (end - p < 2) { vkb_skip(w, VKB_ERROR_MALFORMED, 0); break; }
            uint32_t query = p[1];
            p += 2;
            vkCmdWriteTimestamp(w->cmd, (query & 1) ? VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT : VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT,
                                w->query_pool, query);
        } else if (kind == VKB_RECORD_RESET_QUERIES) {
            if (end - p < 3) { vkb_skip(w, VKB_ERROR_MALFORMED, 0); break; }
            vkCmdResetQueryPool(w->cmd, w->query_pool, p[1], p[2]);
            p += 3;
        } else {
            vkb_skip(w, VKB_ERROR_MALFORMED, 0);
            break;
        }
    }
    /* Make this window's writes visible to the host, for read-backs through mapped staging memory. */
    VkMemoryBarrier to_host = {VK_STRUCTURE_TYPE_MEMORY_BARRIER, NULL, VKB_WRITES, VK_ACCESS_HOST_READ_BIT};
    vkCmdPipelineBarrier(w->cmd, VKB_STAGES, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &to_host, 0, NULL, 0, NULL);
    return (int)w->n_errors;
}

/* Begin, record, end and submit in one call, so the worker gives up and retakes the GIL once per window rather than
 * once per Vulkan call. Returns the first failing VkResult (the window's skipped records are in window->n_errors). */
VkResult vkb_submit_window(vkb_window *w, VkQueue queue, VkFence fence) {
    VkCommandBufferBeginInfo begin = {VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO, NULL,
                                      VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT, NULL};
    VkResult r = vkBeginCommandBuffer(w->cmd, &begin);
    if (r != VK_SUCCESS) return r;
    vkb_record_window(w);
    r = vkEndCommandBuffer(w->cmd);
    if (r != VK_SUCCESS) return r;
    VkSubmitInfo submit = {VK_STRUCTURE_TYPE_SUBMIT_INFO, NULL, 0, NULL, NULL, 1, &w->cmd, 0, NULL};
    return vkQueueSubmit(queue, 1, &submit, fence);
}
