#version 450
// z = x + y over n floats.
layout(local_size_x = 64) in;
layout(push_constant) uniform Params { uint n; } p;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Y { float y[]; };
layout(std430, binding = 2) writeonly buffer Z { float z[]; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < p.n) z[i] = x[i] + y[i];
}
