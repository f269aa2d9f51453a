#version 450
// y[i] = a * x[i] + y[i] with both buffers reached by device address, so they may be larger than
// maxStorageBufferRange; `first` lets a grid of 65,535 work groups cover any part of them.
#extension GL_EXT_buffer_reference : require
layout(local_size_x = 256) in;
layout(buffer_reference, std430, buffer_reference_align = 4) readonly buffer X { float x[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Y { float y[]; };
layout(push_constant) uniform Params { X src; float a; Y dst; uint first; uint n; } p;
void main() {
    uint i = p.first + gl_GlobalInvocationID.x;
    if (i < p.n) p.dst.y[i] = p.a * p.src.x[i] + p.dst.y[i];
}
