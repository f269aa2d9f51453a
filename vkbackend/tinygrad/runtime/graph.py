"""tinygrad's JIT on ``VK``: a batch of jitted kernels replayed as one :class:`vkbackend.LaunchGraph`.

tinygrad hands a graph runner each batch of kernels its JIT captured (``Compiled.graph``, as ``CUDAGraph`` and
``MetalGraph`` are). Every launch is packed once, here; a replay updates only the launches whose input buffers,
variables or launch dimensions changed, then queues the whole batch with one call. The JIT's variables (a decoder's
position) go into every kernel whose grid stays by one C call (``LaunchGraph.bind_variables``); a kernel whose grid
changed is written over in place, and one with new input buffers or a new work-group size packed again. Without it,
each jitted kernel costs tinygrad's per-kernel Python and a ``Device.launch`` call: the bulk of a batch-1 decoding
step.
"""

from __future__ import annotations

from typing import cast

from tinygrad.device import Buffer, Device
from tinygrad.engine.jit import GraphException, GraphRunner
from tinygrad.uop.ops import Ops, UOp

from vkbackend.errors import BackendError

__all__ = ["VKGraph"]


class VKGraph(GraphRunner):
    """The kernels of one JIT batch on one ``VK`` device, as a :class:`vkbackend.LaunchGraph`."""

    def __init__(self, linear: UOp, input_uops: tuple[UOp, ...] = ()):
        super().__init__(linear, input_uops)
        self.dev = Device[self.calls[0][2][0].device]
        self.bufs: list[list[Buffer]] = []
        self.vals: list[list[int]] = []
        # Per kernel, the two parts of its launch that change apart: the grid (launch dimensions) and the buffers
        # (ids and view offsets); a replay recomputes only what its variables changed.
        self.grids: list[tuple[tuple[int, ...] | None, tuple[int, int, int] | None]] = []
        self.bound: list[tuple[list[int], list[int]]] = []
        zeros = {v: 0 for v in self.vars}
        for j, ((_, ast, bufs, device_vars), runtime) in enumerate(zip(self.calls, self.runtimes)):
            if ast.op is not Ops.PROGRAM or runtime is None:
                raise GraphException(f"VK graph: {ast.op} is not a kernel")
            self.bufs.append(list(bufs))
            self.vals.append([device_vars.get(v.expr, 0) for v in ast.arg.vars])
            self.grids.append(runtime.grid(*ast.arg.launch_dims(zeros)))
            self.bound.append(runtime.bound(self._kernel_buffers(j, bufs)))
        self.graph = self.dev.vk.graph([self._launch(j, self.bound[j]) for j in range(len(self.calls))])
        self.replaced = [j for j, r in enumerate(self.uop_replace) if r]  # kernels whose buffers are inputs
        # Kernels whose only change is their variables take them from self.variables (their self.vals go stale: they
        # are never repacked); the rest, and any whose variable scalar is not a 32- or 64-bit integer, one by one.
        fixed = [
            j
            for j in self.var_vals_replace
            if j not in self.launch_dims_replace and not self.uop_replace[j] and self.grids[j][0] is not None
        ]
        try:
            self.variables = self.graph.bind_variables(self._slots(fixed))
        except BackendError:  # some variable scalar is of another type: leave out the kernels it is in
            fixed = [j for j in fixed if self._bindable(j)]
            self.variables = self.graph.bind_variables(self._slots(fixed))
        self.updatable = sorted({*self.replaced, *self.var_vals_replace, *self.launch_dims_replace} - {*fixed})

    def _bindable(self, j: int) -> bool:
        """Whether every scalar of kernel ``j`` that takes a variable can be fed by the graph's variables."""
        try:
            self.graph.bind_variables(self._slots([j]))
        except BackendError:
            return False
        return True

    def _slots(self, kernels: list[int]) -> list[list[tuple[int, int]]]:
        """Per JIT variable, the (kernel, scalar) pairs of ``kernels`` it feeds."""
        slots: list[list[tuple[int, int]]] = [[] for _ in self.vars]
        for j in kernels:
            for i, v in self.var_vals_replace[j]:
                slots[v].append((j, i))
        return slots

    def _kernel_buffers(self, j: int, bufs: list[Buffer]) -> list:
        """The buffers kernel ``j``'s program binds, of its call's arguments ``bufs``: those its code reads or writes
        (the program's globals, in slot order). A call keeps every argument it was scheduled with, and the kernel may
        have lost some since, to constant folding (as tinygrad's own launch outside a graph selects them)."""
        return [bufs[i]._buf for i in self.calls[j][1].arg.globals]

    def _launch(self, j: int, bound: tuple[list[int], list[int]]):
        """Kernel ``j``'s launch on ``bound``'s buffer ids and view offsets (None while its grid is empty)."""
        grid, local = self.grids[j]
        return None if grid is None else self.runtimes[j].assemble(grid, local, bound, self.vals[j])

    def __call__(self, input_uops: tuple[UOp, ...], var_vals: dict[str, int], wait: bool = False) -> float | None:
        values = [var_vals[v] for v in self.vars]
        self.variables.set(values)
        for j in self.updatable:
            for i, v in self.var_vals_replace.get(j, ()):
                self.vals[j][i] = values[v]
        # Most kernels change only their variables, and some their grid: those are written over their records in
        # place. A new work-group size is another program, and new input buffers other bindings: a whole update.
        whole: set[int] = set()
        regrid: dict[int, tuple[int, ...]] = {}
        for j, global_size, local_size in self.updated_launch_dims(var_vals):
            old_grid, old_local = self.grids[j]
            grid, local = self.grids[j] = self.runtimes[j].grid(global_size, local_size)
            if grid is None or old_grid is None or local != old_local:
                whole.add(j)
            elif grid != old_grid:
                regrid[j] = grid
        rebound: dict[int, tuple[list[int], list[int]]] = {}
        for j in self.replaced:
            # The inputs are not kept past the replay (the record holds its buffers): tinygrad's allocator can then
            # hand a freed input's buffer to the next one (a decoder's next token), whose bindings are those already
            # recorded.
            bufs = list(self.bufs[j])
            for pos, iidx in self.uop_replace[j]:
                bufs[pos] = cast(Buffer, input_uops[iidx].buffer).ensure_allocated()
            bound = self.runtimes[j].bound(self._kernel_buffers(j, bufs))
            if bound != self.bound[j]:
                rebound[j] = bound
                whole.add(j)
        graph = self.graph
        for j in self.updatable:
            if j in whole:
                bound = rebound.get(j, self.bound[j])
                graph.update(j, self._launch(j, bound))
                self.bound[j] = bound  # what the record binds, once it does: a failed update is retried next replay
            elif j in self.var_vals_replace or j in regrid:
                offsets = self.bound[j][1]
                graph.set_scalars(j, [*self.vals[j], *offsets] if offsets else self.vals[j], regrid.get(j))
        if wait:
            return self.graph.launch_timed() * 1e-9
        self.graph.launch()
        return None
