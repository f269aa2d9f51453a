#version 450
// Local size from a specialization constant (default 32): o[i] = i.
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint LOCAL = 32u;
layout(std430, binding = 0) writeonly buffer Out { uint o[]; };
void main() { o[gl_GlobalInvocationID.x] = gl_GlobalInvocationID.x; }
