"""``python -m vkbackend bench``: our figures beside a raw-Vulkan C program's, wgpu-py's and PyTorch CUDA's, each
with a correctness check.

Modules: ``spec`` (the cases, sizes and records), ``timing`` (the one timing loop), ``kernels`` (our GLSL),
``cases`` (our cases on one device), ``compile_probe`` (the compile cases' fresh process), ``peers`` (the C
reference, wgpu-py and torch, each in a child process, skipped when it cannot run), ``vulkan_ref`` (the C reference:
building and running ``vulkan_ref.c``, checking its results), ``child`` (running those children), ``report``
(table, JSON, plot), ``units`` (the unit each figure is shown in), ``runner`` (the driver). Submodules load on
first use, so the children (``python -m vkbackend.bench.peers`` / ``.compile_probe``) import only what they need.

``bench --tinygrad`` is the subpackage ``tinygrad`` (``tinygrad.runner`` drives it; its ``__init__`` lists the rest).
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["run"]


def run(
    device: int = 0,
    json_path: str | None = None,
    plot_path: str | None = None,
    quick: bool = False,
    cases: Sequence[str] | None = None,
) -> int:
    """Run every case (or those named in ``cases``) on device ``device`` and on each importable peer; print the
    table; write the JSON and plot.

    Returns the exit code: 0 when every one of our cases ran and passed its correctness check, 1 when one did not,
    2 when the device could not be opened or a case name is unknown. See ``runner.run``.
    """
    from .runner import run as run_bench

    return run_bench(device=device, json_path=json_path, plot_path=plot_path, quick=quick, cases=cases)
