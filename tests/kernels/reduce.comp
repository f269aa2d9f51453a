#version 450
// One partial sum per work group of WG invocations, by a tree reduction in shared memory. T is float or uint.
#ifndef WG
#define WG 128
#endif
#ifndef T
#define T float
#endif
layout(local_size_x = WG) in;
layout(push_constant) uniform Params { uint n; } p;
layout(std430, binding = 0) readonly buffer In { T x[]; };
layout(std430, binding = 1) writeonly buffer Partial { T partial[]; };
shared T s[WG];
void main() {
    uint i = gl_GlobalInvocationID.x, l = gl_LocalInvocationID.x;
    s[l] = i < p.n ? x[i] : T(0);
    barrier();
    for (uint stride = WG / 2u; stride > 0u; stride >>= 1u) {
        if (l < stride) s[l] += s[l + stride];
        barrier();
    }
    if (l == 0u) partial[gl_WorkGroupID.x] = s[0];
}
