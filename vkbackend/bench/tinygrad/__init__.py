"""``python -m vkbackend bench --tinygrad``: tinygrad workloads (training steps, matmuls, GPT-2-shaped decoding,
ResNet) on tinygrad's VK device (this backend) beside tinygrad's CUDA or CPU device and eager PyTorch, with checksums
that must agree (docs/performance.md).

Modules: ``runner`` (the driver), ``spec`` (cases, sizes, records), ``protocol`` (seeded data, checksums, the timing
protocol), ``models`` and ``cases`` (the workloads in tinygrad), ``torch_twins`` (the same in PyTorch), ``kernels``
(per-kernel GPU times of a captured JIT), ``call_times`` (calls and time of wrapped functions, for scripts/),
``decoding`` (the decode scripts' command line and warmed decoder) and
``child`` (one implementation and workload per process: ``python -m vkbackend.bench.tinygrad.child``). They share
``vkbackend.bench``'s child, report, spec and units modules.

Nothing is imported here: ``spec`` and ``protocol`` are plain Python and numpy, so the PyTorch child runs without
tinygrad. Every import in this package is absolute, and ``import tinygrad`` / ``from tinygrad import ...`` is the
real tinygrad, never this package.
"""

from __future__ import annotations
