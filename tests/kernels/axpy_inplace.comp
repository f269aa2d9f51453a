#version 450
// y = y * a + x over n floats: y is read and written.
layout(local_size_x = 64) in;
layout(push_constant) uniform Params { float a; uint n; } p;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) buffer Y { float y[]; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < p.n) y[i] = y[i] * p.a + x[i];
}
