/* The buffer slot table: fixed-size chunks allocated on first use, reached through a fixed directory, so a slot's
 * address never changes and the worker can read while another thread adds slots. */
#include <stdlib.h>

enum { VKB_SLOT_CHUNK = 4096, VKB_SLOT_CHUNKS = VKB_MAX_SLOTS / VKB_SLOT_CHUNK };

struct vkb_slot_table {
    vkb_slot *chunks[VKB_SLOT_CHUNKS];
    uint64_t generation;  /* moved on by every vkb_slots_set (decl/vkb.h) */
};

vkb_slot_table *vkb_slots_new(void) { return (vkb_slot_table *)calloc(1, sizeof(vkb_slot_table)); }

void vkb_slots_delete(vkb_slot_table *table) {
    if (!table) return;
    for (int i = 0; i < VKB_SLOT_CHUNKS; i++) free(table->chunks[i]);
    free(table);
}

static inline vkb_slot *vkb_slot_at(vkb_slot_table *table, uint32_t slot) {
    vkb_slot *chunk = table->chunks[(slot / VKB_SLOT_CHUNK) % VKB_SLOT_CHUNKS];
    return (slot < (uint32_t)VKB_MAX_SLOTS && chunk) ? &chunk[slot % VKB_SLOT_CHUNK] : NULL;
}

int vkb_slots_set(vkb_slot_table *table, uint32_t slot, VkBuffer buffer, uint64_t offset, uint64_t range, uint32_t root) {
    if (slot >= (uint32_t)VKB_MAX_SLOTS) return -1;
    vkb_slot **chunk = &table->chunks[slot / VKB_SLOT_CHUNK];
    if (!*chunk) {
        vkb_slot *fresh = (vkb_slot *)calloc(VKB_SLOT_CHUNK, sizeof(vkb_slot));
        if (!fresh) return -1;
        __atomic_store_n(chunk, fresh, __ATOMIC_RELEASE);
    }
    vkb_slot *s = &(*chunk)[slot % VKB_SLOT_CHUNK];
    s->buffer = buffer; s->offset = offset; s->range = range; s->root = root;
    s->read_epoch = 0; s->write_epoch = 0;
    __atomic_add_fetch(&table->generation, 1, __ATOMIC_RELEASE);
    return 0;
}

uint64_t vkb_slots_generation(vkb_slot_table *table) { return __atomic_load_n(&table->generation, __ATOMIC_ACQUIRE); }
