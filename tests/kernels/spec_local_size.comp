#version 450
// Local size through a specialization constant (SpecId 0, default 32; the WorkgroupSize built-in): o[i] = i.
layout(local_size_x_id = 0, local_size_x = 32) in;
layout(std430, binding = 0) writeonly buffer Out { uint o[]; };
void main() { o[gl_GlobalInvocationID.x] = gl_GlobalInvocationID.x; }
