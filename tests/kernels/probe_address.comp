#version 450
// found[k] = big[probes[k]] for k < count, and big[last] = mark (no probe may be `last`), with every buffer reached by
// device address, so `big` may be past maxStorageBufferRange. A buffer past the largest allocation is bound to
// several allocations: probes on either side of their boundaries read each of them. `big`'s words are reached by
// 64-bit address arithmetic: an array index is 32-bit, and NVIDIA's offset arithmetic wraps with it past 4 GiB. Word
// indices are 64-bit: a buffer past 16 GiB has more than 2^32 words.
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_buffer_reference2 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
layout(local_size_x = 64) in;
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Big { uint w[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Word { uint v; };
layout(buffer_reference, std430, buffer_reference_align = 8) readonly buffer Probes { uint64_t at[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) writeonly buffer Found { uint value[]; };
layout(push_constant) uniform Params { Big big; Probes probes; Found found; uint count; uint mark; uint64_t last; } p;
Word word(uint64_t i) { return Word(uint64_t(p.big) + uint64_t(i) * 4ul); }
void main() {
    uint k = gl_GlobalInvocationID.x;
    if (k < p.count) p.found.value[k] = word(p.probes.at[k]).v;
    if (k == 0u) word(p.last).v = p.mark;
}
