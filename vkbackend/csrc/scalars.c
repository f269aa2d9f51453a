/* A graph's variables written into its packed records (graph.py, GraphVariables): each slot is one integer
 * push-constant member of one launch's dispatch record, fed by one of the variables. Every value is checked against
 * every slot it feeds before anything is written, so a value that does not fit leaves the records as they were. */
#include <stdint.h>
#include <string.h>

int vkb_write_variables(uint8_t *blob, const uint64_t *offsets, const uint8_t *kinds, const uint32_t *variables,
                        uint32_t n_slots, const int64_t *values) {
    for (uint32_t i = 0; i < n_slots; i++) {
        int64_t v = values[variables[i]];
        int fits;
        switch (kinds[i]) {
        case VKB_SCALAR_I32: fits = v >= INT32_MIN && v <= INT32_MAX; break;
        case VKB_SCALAR_U32: fits = v >= 0 && v <= (int64_t)UINT32_MAX; break;
        case VKB_SCALAR_I64: fits = 1; break;
        case VKB_SCALAR_U64: fits = v >= 0; break;
        default: fits = 0;
        }
        if (!fits) return (int)i;
    }
    for (uint32_t i = 0; i < n_slots; i++) {
        int64_t v = values[variables[i]];
        if (kinds[i] == VKB_SCALAR_I32 || kinds[i] == VKB_SCALAR_U32) {
            uint32_t word = (uint32_t)v;  /* in the host's order: records.py packs little-endian, for such hosts */
            memcpy(blob + offsets[i], &word, 4);
        } else {
            memcpy(blob + offsets[i], &v, 8);
        }
    }
    return -1;
}
