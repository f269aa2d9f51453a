"""Sharing vkbackend's device buffers with other GPU libraries, without copies.

- cuda.py: PyTorch tensors and CuPy arrays on an NVIDIA GPU, over buffers exported with
  ``MemoryPool.allocate_exportable`` (CUDA's driver API through ctypes; not yet run on a GPU).

Nothing here is imported by ``import vkbackend``; each module imports its library (libcuda, torch, cupy) only when a
function that needs it is called.
"""
