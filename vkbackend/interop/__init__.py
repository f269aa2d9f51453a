"""Sharing vkbackend's device buffers with other GPU libraries, without copies.

- cuda.py: PyTorch tensors and CuPy arrays on an NVIDIA GPU, over buffers exported with
  ``MemoryPool.allocate_exportable`` (CUDA's driver API through ctypes; not yet run on a GPU).
- cuda_clocks.py: an open device on an NVIDIA GPU holds that GPU's CUDA context, so it runs at CUDA's clocks.
- cuda_driver.py: libcuda through ctypes, which both use.

Each module imports its library (libcuda, torch, cupy) only when a function that needs it is called: ``import
vkbackend`` loads none of them.
"""
