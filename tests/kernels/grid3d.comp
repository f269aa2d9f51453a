#version 450
// Writes each invocation's gl_GlobalInvocationID at its linearised index (x fastest), with `tag` in the fourth
// word; the tag gets bit 31 set when gl_NumWorkGroups differs from the (gx, gy, gz) scalars.
layout(local_size_x = 4, local_size_y = 2, local_size_z = 2) in;
layout(push_constant) uniform Params { uint gx; uint gy; uint gz; uint tag; } p;
layout(std430, binding = 0) writeonly buffer Out { uvec4 o[]; };
void main() {
    uvec3 size = gl_NumWorkGroups * gl_WorkGroupSize;
    uvec3 g = gl_GlobalInvocationID;
    uint lin = g.x + size.x * (g.y + size.y * g.z);
    uint wrong = gl_NumWorkGroups == uvec3(p.gx, p.gy, p.gz) ? 0u : 0x80000000u;
    o[lin] = uvec4(g, p.tag | wrong);
}
