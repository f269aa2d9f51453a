#version 450
// found[k] = big[probes[k]] for k < count, and big[last] = mark (no probe may be `last`), with every buffer reached by
// device address, so `big` may be past maxStorageBufferRange. A buffer past the largest allocation is bound to
// several allocations: probes on either side of their boundaries read each of them.
#extension GL_EXT_buffer_reference : require
layout(local_size_x = 64) in;
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Big { uint w[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) readonly buffer Probes { uint at[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) writeonly buffer Found { uint value[]; };
layout(push_constant) uniform Params { Big big; Probes probes; Found found; uint count; uint last; uint mark; } p;
void main() {
    uint k = gl_GlobalInvocationID.x;
    if (k < p.count) p.found.value[k] = p.big.w[p.probes.at[k]];
    if (k == 0u) p.big.w[p.last] = p.mark;
}
