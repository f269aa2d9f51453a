#version 450
// y = 2 * x and z = x + 1 over n floats: one input, two outputs.
layout(local_size_x = 64) in;
layout(push_constant) uniform Params { uint n; } p;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Y { float y[]; };
layout(std430, binding = 2) writeonly buffer Z { float z[]; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < p.n) { y[i] = 2.0 * x[i]; z[i] = x[i] + 1.0; }
}
