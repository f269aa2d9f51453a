#version 450
// Every 32- and 64-bit push-constant type and a bool, interleaved so 64-bit members need padding. Each launch
// writes the bit patterns of its scalars to row `row` of the outputs, so the host can check every value exactly
// (bit casts, not arithmetic: no rounding, no flushing of denormals, NaN and -0.0 survive).
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
layout(local_size_x = 1) in;
layout(push_constant) uniform Params {
    int i32;
    double f64;
    uint u32;
    int64_t i64;
    float f32;
    uint64_t u64;
    bool flag;
    uint row;
} p;
layout(std430, binding = 0) writeonly buffer Out32 { uint o32[]; };       // 4 words a row: i32, u32, f32, flag
layout(std430, binding = 1) writeonly buffer Out64 { uint64_t o64[]; };   // 3 words a row: f64, i64, u64
void main() {
    o32[p.row * 4u + 0u] = uint(p.i32);
    o32[p.row * 4u + 1u] = p.u32;
    o32[p.row * 4u + 2u] = floatBitsToUint(p.f32);
    o32[p.row * 4u + 3u] = p.flag ? 1u : 0u;
    uvec2 d = unpackDouble2x32(p.f64);
    o64[p.row * 3u + 0u] = uint64_t(d.x) | (uint64_t(d.y) << 32);
    o64[p.row * 3u + 1u] = uint64_t(p.i64);
    o64[p.row * 3u + 2u] = p.u64;
}
