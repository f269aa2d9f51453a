#version 450
// y = value over n floats (write only).
layout(local_size_x = 64) in;
layout(push_constant) uniform Params { float value; uint n; } p;
layout(std430, binding = 0) writeonly buffer Out { float y[]; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < p.n) y[i] = p.value;
}
