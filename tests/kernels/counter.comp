#version 450
// o[idx] += 1: every launch reads and writes the same buffer, so consecutive launches are a dependent chain.
layout(local_size_x = 1) in;
layout(push_constant) uniform Params { uint idx; } p;
layout(std430, binding = 0) buffer Counts { uint o[]; };
void main() { o[p.idx] += 1u; }
