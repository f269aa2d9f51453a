"""The compile pipeline: a rendered kernel's GLSL to the SPIR-V binary tinygrad caches.

:mod:`~vkbackend.tinygrad.compiler.compiler` compiles through glslang and writes work-group sizes into kernels on
global ids; ``bf16_spirv`` retypes cooperative matrices to bfloat16 after glslang; ``kernel_format`` is the metadata
line the renderer writes and the compiler reads, and the binary the runtime unpacks.
"""
