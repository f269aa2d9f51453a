"""Kernels of one-invocation work groups run as wider groups (renderer.widen_single_invocation_groups): the widened
source, and results on ``DEV=VK`` compared with numpy at sizes the group width does and does not divide."""

from __future__ import annotations

import numpy as np
import pytest
from tinygrad import Tensor, Variable, dtypes
from tinygrad.helpers import Context
from tinygrad.uop.ops import Ops, UOp

from vkbackend.tinygrad.renderer.renderer import WIDE_GROUP, widen_single_invocation_groups

RNG = np.random.default_rng(7)
BODY = [
    "  float acc0[1];",
    "  int gidx0 = int(gl_WorkGroupID.x); /* {n} */",
    "  acc0[0] = 0.0f;",
    "  data0_{n}[gidx0] = acc0[0];",
]


def special(size) -> UOp:
    bound = UOp.const(size, dtypes.int) if isinstance(size, int) else size
    return UOp(Ops.SPECIAL, dtypes.int, (bound,), "gidx0")


def body(n: int) -> list[str]:
    return [line.format(n=n) for line in BODY]


def test_a_size_the_width_does_not_divide_gets_a_guard():
    kernel, width = widen_single_invocation_groups(body(50257), special(50257))
    assert width == WIDE_GROUP
    assert kernel[1].strip().startswith("int gidx0 = int(gl_GlobalInvocationID.x);")
    assert kernel[2].strip() == "if (gidx0 >= 50257) return;"
    assert kernel[3:] == body(50257)[2:]


def test_a_size_the_width_divides_needs_no_guard():
    kernel, width = widen_single_invocation_groups(body(4 * WIDE_GROUP), special(4 * WIDE_GROUP))
    assert width == WIDE_GROUP
    assert not any("return" in line for line in kernel)


def test_a_small_size_is_one_group():
    kernel, width = widen_single_invocation_groups(body(5), special(5))
    assert width == 5 and not any("return" in line for line in kernel)


@pytest.mark.parametrize("reason", ["symbolic", "barrier", "shared", "no gidx0"])
def test_kernels_that_could_tell_are_left_alone(reason):
    gidx0 = special(Variable("n", 1, 100) if reason == "symbolic" else 64)
    kernel = body(64) + (["  barrier();"] if reason == "barrier" else [])
    kernel = (["  shared float temp0[16];"] if reason == "shared" else []) + kernel
    got, width = widen_single_invocation_groups(kernel, None if reason == "no gidx0" else gidx0)
    assert (got, width) == (kernel, 1)


@pytest.mark.parametrize("rows", [1, 3, 31, 32, 33, 1021, 50257])
def test_matrix_vector_products_at_odd_row_counts(vk_device, rows):
    """The LM head's shape (a row count with no factor a local size could take) and its neighbours."""
    w = RNG.uniform(-1, 1, (rows, 96)).astype(np.float32)
    x = RNG.uniform(-1, 1, (1, 96)).astype(np.float32)
    with Context(DEV="VK"):
        got = (Tensor(x) @ Tensor(w).T).numpy()
    np.testing.assert_allclose(got, x @ w.T, rtol=1e-5, atol=1e-5)


def test_a_widened_kernel_runs_widened(vk_device):
    """The program tinygrad launches for a prime row count carries the widening, and its grid covers every row."""
    from vkbackend.tinygrad.runtime.ops_vk import VKProgram

    seen = []
    call = VKProgram.grid

    def recording_grid(self, global_size, local_size):
        grid, local = call(self, global_size, local_size)
        seen.append((self.widen, list(global_size), grid))
        return grid, local

    w = RNG.integers(-50, 50, (1021, 8)).astype(np.int32)
    with pytest.MonkeyPatch.context() as mp, Context(DEV="VK"):
        mp.setattr(VKProgram, "grid", recording_grid)
        got = Tensor(w).sum(axis=1).numpy()
    assert (got == w.sum(axis=1)).all()
    widened = [(width, gs, grid) for width, gs, grid in seen if width > 1]
    assert widened, seen
    for width, gs, grid in widened:
        assert grid[0] * width >= gs[0] > (grid[0] - 1) * width
