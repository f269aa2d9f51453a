"""tinygrad's JIT on ``VK``: a batch of jitted kernels replayed as one :class:`vkbackend.LaunchGraph`.

tinygrad hands a graph runner each batch of kernels its JIT captured (``Compiled.graph``, as ``CUDAGraph`` and
``MetalGraph`` are). Every launch is packed once, here; a replay updates only the launches whose input buffers,
variables or launch dimensions changed, then queues the whole batch with one call. Without it, each jitted kernel
costs tinygrad's per-kernel Python and a ``Device.launch`` call: the bulk of a batch-1 decoding step.
"""

from __future__ import annotations

from typing import cast

from tinygrad.device import Buffer, Device
from tinygrad.engine.jit import GraphException, GraphRunner
from tinygrad.uop.ops import Ops, UOp

__all__ = ["VKGraph"]


class VKGraph(GraphRunner):
    """The kernels of one JIT batch on one ``VK`` device, as a :class:`vkbackend.LaunchGraph`."""

    def __init__(self, linear: UOp, input_uops: tuple[UOp, ...] = ()):
        super().__init__(linear, input_uops)
        self.dev = Device[self.calls[0][2][0].device]
        self.bufs: list[list[Buffer]] = []
        self.vals: list[list[int]] = []
        self.dims: list[tuple[tuple, tuple | None]] = []
        launches = []
        zeros = {v: 0 for v in self.vars}
        for (_, ast, bufs, device_vars), runtime in zip(self.calls, self.runtimes):
            if ast.op is not Ops.PROGRAM or runtime is None:
                raise GraphException(f"VK graph: {ast.op} is not a kernel")
            self.bufs.append(list(bufs))
            self.vals.append([device_vars.get(v.expr, 0) for v in ast.arg.vars])
            self.dims.append(ast.arg.launch_dims(zeros))
            launches.append(self._launch_args(len(launches)))
        self.launches = launches
        self.graph = self.dev.vk.graph(launches)
        self.updatable = sorted({j for j, r in enumerate(self.uop_replace) if r}
                                | self.var_vals_replace.keys() | self.launch_dims_replace.keys())

    def _launch_args(self, j: int):
        return self.runtimes[j].launch_args([b._buf for b in self.bufs[j]], *self.dims[j], self.vals[j])

    def __call__(self, input_uops: tuple[UOp, ...], var_vals: dict[str, int], wait: bool = False) -> float | None:
        for j, i, v in self.updated_vars(var_vals):
            self.vals[j][i] = v
        for j, global_size, local_size in self.updated_launch_dims(var_vals):
            self.dims[j] = (global_size, local_size)
        for j in self.updatable:
            for pos, iidx in self.uop_replace[j]:
                self.bufs[j][pos] = cast(Buffer, input_uops[iidx].buffer).ensure_allocated()
            launch = self._launch_args(j)
            if launch != self.launches[j]:
                self.graph.update(j, launch)
                self.launches[j] = launch
        if wait:
            return self.graph.launch_timed() * 1e-9
        self.graph.launch()
        return None
