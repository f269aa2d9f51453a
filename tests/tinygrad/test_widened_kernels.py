"""Kernels of narrow work groups run as wider groups (renderer.widen_groups): the widened source, and results on
``DEV=VK`` compared with numpy at sizes the group width does and does not divide."""

from __future__ import annotations

import numpy as np
import pytest
from tinygrad import Tensor, Variable, dtypes
from tinygrad.helpers import Context
from tinygrad.uop.ops import Ops, UOp

from vkbackend.tinygrad.renderer.renderer import MANY_GROUPS, NARROW_GROUP, WIDE_GROUP, widen_groups

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


LOCAL_MAX = (1024, 1024, 64)


def widen_single(kernel, gidx0):
    """widen_groups on a kernel of one-invocation groups: (kernel, factor), checking the axis it took."""
    kernel, factor, axis = widen_groups(kernel, gidx0, [1, 1, 1], LOCAL_MAX)
    assert axis == (2 if factor > 1 else 0)
    return kernel, factor


def test_a_size_the_width_does_not_divide_gets_a_guard():
    kernel, width = widen_single(body(50257), special(50257))
    assert width == WIDE_GROUP
    assert kernel[1].strip().startswith(f"int gidx0 = int(gl_WorkGroupID.x * {WIDE_GROUP}u + gl_LocalInvocationID.z);")
    assert kernel[2].strip() == "if (gidx0 >= 50257) return;"
    assert kernel[3:] == body(50257)[2:]


def test_a_size_the_width_divides_needs_no_guard():
    kernel, width = widen_single(body(4 * WIDE_GROUP), special(4 * WIDE_GROUP))
    assert width == WIDE_GROUP
    assert not any("return" in line for line in kernel)


def test_a_small_size_is_one_group():
    kernel, width = widen_single(body(5), special(5))
    assert width == 5 and not any("return" in line for line in kernel)


@pytest.mark.parametrize("reason", ["symbolic", "barrier", "shared", "no gidx0"])
def test_kernels_that_could_tell_are_left_alone(reason):
    gidx0 = special(Variable("n", 1, 100) if reason == "symbolic" else 64)
    kernel = body(64) + (["  barrier();"] if reason == "barrier" else [])
    kernel = (["  shared float temp0[16];"] if reason == "shared" else []) + kernel
    got, width = widen_single(kernel, None if reason == "no gidx0" else gidx0)
    assert (got, width) == (kernel, 1)


@pytest.mark.parametrize(
    "local, axis, factor",
    [
        ([32, 1, 1], 2, NARROW_GROUP // 32),
        ([16, 2, 1], 2, NARROW_GROUP // 32),
        ([8, 4, 2], None, 1),
        ([64, 2, 1], None, 1),
    ],
)
def test_narrow_groups_merge_along_their_outermost_free_axis(local, axis, factor):
    """Groups of 2..NARROW_GROUP-1 invocations take the old group's index on the outermost local axis of size 1, so a
    warp's lanes keep their layout; groups with no free axis, or already wide, are left alone."""
    kernel, got, got_axis = widen_groups(body(4096), special(4096), list(local), LOCAL_MAX, MANY_GROUPS)
    assert got == factor
    if factor == 1:
        assert kernel == body(4096)
        return
    assert got_axis == axis
    assert kernel[1].strip().startswith(f"int gidx0 = int(gl_WorkGroupID.x * {factor}u + gl_LocalInvocationID.z);")
    assert not any("return" in line for line in kernel)


def test_a_kernel_that_reads_the_free_axis_is_left_alone():
    kernel = body(64) + ["  int z = int(gl_LocalInvocationID.z);"]
    assert widen_groups(kernel, special(64), [32, 1, 1], LOCAL_MAX, MANY_GROUPS) == (kernel, 1, 0)


@pytest.mark.parametrize("groups", [None, 512, MANY_GROUPS - 1])
def test_narrow_groups_too_few_to_fill_the_gpu_are_left_alone(groups):
    """A reduction's first stage (tinygrad's sum of 64 Mi floats: 512 groups of 32) fits on the GPU at once: merged,
    it would leave multiprocessors idle. Symbolic group counts are left alone too."""
    assert widen_groups(body(512), special(512), [32, 1, 1], LOCAL_MAX, groups) == (body(512), 1, 0)


def test_the_merge_stays_within_the_axis_limit():
    kernel, factor, axis = widen_groups(body(4096), special(4096), [1, 1, 1], (1024, 1024, 8))
    assert (factor, axis) == (8, 2)


@pytest.mark.parametrize("n", [1, 5, 127, 128, 129, 4096 + 3, 1 << 16])
def test_elementwise_and_reduce_results_at_many_sizes(vk_device, n):
    """Elementwise and reduce kernels (tinygrad's groups of 32 and fewer, widened) against numpy, at sizes the merge
    does and does not divide."""
    a = RNG.uniform(-1, 1, n).astype(np.float32)
    b = RNG.uniform(-1, 1, n).astype(np.float32)
    with Context(DEV="VK"):
        ta, tb = Tensor(a), Tensor(b)
        np.testing.assert_allclose((ta * 2 + tb).numpy(), a * 2 + b, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(ta.sum().numpy(), a.astype(np.float64).sum(), rtol=1e-4, atol=1e-4)


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
