"""The renderer: tinygrad's linear UOps to GLSL 450 compute shaders.

:mod:`~vkbackend.tinygrad.renderer.renderer` holds ``VKRenderer``; the modules beside it spell GLSL types and casts
(``glsl_types``), plan buffer accesses (``memory_access``), render tinygrad's tensor cores as cooperative matrices
(``tensor_cores``) and unroll loops (``loops``): on every device but a CPU one for more loads in flight (``unroll``),
on lavapipe under its iteration limit (``loop_limit``).  Its input is a device's ``DeviceCaps``, carried in
tinygrad's ``Target.arch`` (``caps``), so a compile worker rebuilds it from the target alone.
"""
