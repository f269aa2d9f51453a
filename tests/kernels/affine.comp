#version 450
// y = a * x + b over n floats.
layout(local_size_x = 64) in;
layout(push_constant) uniform Params { float a; float b; uint n; } p;
layout(std430, binding = 0) readonly buffer In { float x[]; };
layout(std430, binding = 1) writeonly buffer Out { float y[]; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < p.n) y[i] = p.a * x[i] + p.b;
}
