"""The GLSL compute kernels the cases run, compiled to SPIR-V with glslang (``vkbackend.compile_glsl``)."""

from __future__ import annotations

from ..glsl import compile_glsl

INC = """#version 450
layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) buffer Y { float y[]; };
layout(push_constant) uniform PC { uint n; } pc;
void main() { uint i = gl_GlobalInvocationID.x; if (i < pc.n) y[i] += 1.0; }
"""
"""``y += 1`` on the first ``n`` floats: the tiny launch of launch_chain and launch_independent."""

ADD_VEC4 = """#version 450
layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) readonly buffer A { vec4 a[]; };
layout(std430, set = 0, binding = 1) readonly buffer B { vec4 b[]; };
layout(std430, set = 0, binding = 2) writeonly buffer C { vec4 c[]; };
layout(push_constant) uniform PC { uint n4; } pc;
void main() {
  uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256u + gl_LocalInvocationID.x;
  if (i < pc.n4) c[i] = a[i] + b[i];
}
"""
"""``c = a + b`` over ``n4`` vec4s, one vec4 per thread; a 2-D grid when the groups exceed the x limit."""

COMPILE_SET = """#version 450
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) buffer X { float x[]; };
layout(std430, set = 0, binding = 1) readonly buffer W { float w[]; };
layout(push_constant) uniform PC { uint n; float scale; } pc;
void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i >= pc.n) return;
  float v = x[i];
  for (int k = 0; k < 16; ++k) {
    v = v * pc.scale + sin(v + float(VARIANT)) * w[(i + uint(k)) % pc.n];
    if (v > float(VARIANT + 100)) v = sqrt(v);
  }
  x[i] = v + float(VARIANT);
}
"""
"""The compile cases' kernel: each ``VARIANT`` gives distinct SPIR-V, hence a distinct pipeline to build."""


def inc() -> bytes:
    return compile_glsl(INC)


def add_vec4() -> bytes:
    return compile_glsl(ADD_VEC4)


def compile_set(count: int) -> list[bytes]:
    """``count`` distinct kernels (compiled by glslang here, so the compile cases time only ``Device.compile``)."""
    return [compile_glsl(COMPILE_SET, {"VARIANT": i}) for i in range(count)]


def add_grid(n4: int, max_groups_x: int) -> tuple[int, int, int]:
    """Work groups for ADD_VEC4 over ``n4`` vec4s: x up to the device's limit, y for the rest."""
    groups = max(1, -(-n4 // 256))
    gx = min(groups, max_groups_x)
    return gx, -(-groups // gx), 1
