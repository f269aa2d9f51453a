"""How kernels' work groups meet the device's grid (renderer/work_groups.py): narrow groups run as wider ones
(widen_groups), and a grid longer along x than the device allows is folded onto another axis (fold_groups); the
rewritten source, and results on ``DEV=VK`` compared with numpy, at the device's limits and at small ones a test arch
sets."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from tinygrad import Tensor, Variable, dtypes
from tinygrad.helpers import Context
from tinygrad.uop.ops import Ops, UOp

from vkbackend.tinygrad.renderer.caps import make_arch
from vkbackend.tinygrad.renderer.work_groups import (
    MANY_GROUPS,
    NARROW_GROUP,
    WIDE_GROUP,
    fold_groups,
    widen_groups,
)
from vkbackend.tinygrad.runtime.device_caps import caps_from_info

RNG = np.random.default_rng(7)
BODY = [
    "  float acc0[1];",
    "  int gidx0 = int(gl_WorkGroupID.x); /* {n} */",
    "  acc0[0] = 0.0f;",
    "  data0_{n}[gidx0] = acc0[0];",
]


def special(size, name: str = "gidx0") -> UOp:
    bound = UOp.const(size, dtypes.int) if isinstance(size, int) else size
    return UOp(Ops.SPECIAL, dtypes.int, (bound,), name)


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


# ---------------------------------------------------------------------------------------------------------------------
# grids past the device's limit along x, folded
# ---------------------------------------------------------------------------------------------------------------------

GRID_MAX = (65535, 65535, 65535)


def grid_kernel(sizes: dict[str, int], gid: bool = False) -> tuple[list[str], dict[str, UOp]]:
    """A kernel body that declares the given indices (``gidx0``... or, on global ids, ``idx0``...) as tinygrad
    renders them, and their SPECIALs."""
    builtin = "gl_GlobalInvocationID" if gid else "gl_WorkGroupID"
    lines = [f"  int {name} = int({builtin}.{'xyz'[int(name[-1])]}); /* {n} */" for name, n in sizes.items()]
    return [*lines, "  data0[gidx0] = 1;"], {name: special(n, name) for name, n in sizes.items()}


@pytest.mark.parametrize("gid", [False, True])
def test_a_grid_within_the_limit_is_left_alone(gid):
    prefix = "idx" if gid else "gidx"
    kernel, specials = grid_kernel({f"{prefix}0": 65535, f"{prefix}1": 7}, gid)
    assert fold_groups(kernel, specials, 1, GRID_MAX) == (kernel, None)


def test_a_symbolic_length_is_left_to_the_launch():
    kernel, _ = grid_kernel({"gidx0": 70000})
    specials = {"gidx0": special(Variable("n", 1, 1 << 20))}
    assert fold_groups(kernel, specials, 1, GRID_MAX) == (kernel, None)


def test_a_long_x_folds_into_a_free_axis_with_a_guard():
    kernel, specials = grid_kernel({"gidx0": 100003})
    folded, fold = fold_groups(kernel, specials, 1, GRID_MAX)
    assert fold == (1, 0, 65535)  # rows: the launch's
    assert folded[0].strip() == "uint vk_group_x = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;"
    assert folded[1].strip() == "if (vk_group_x >= 100003u) return;"
    assert folded[2].strip().startswith("int gidx0 = int(vk_group_x);")
    assert folded[3:] == kernel[1:]


def test_a_widened_kernel_folds_what_the_widening_leaves():
    """widen_groups first (one-invocation groups, WIDE_GROUP to a group), then the fold of its groups."""
    n = 40 * 65535 * WIDE_GROUP + 5
    widened, factor, _ = widen_groups(body(n), special(n), [1, 1, 1], LOCAL_MAX)
    folded, fold = fold_groups(widened, {"gidx0": special(n)}, factor, GRID_MAX)
    groups = -(-n // factor)
    assert fold == (1, 0, 65535)
    assert f"if (vk_group_x >= {groups}u) return;" in folded[1]
    assert f"int gidx0 = int(vk_group_x * {factor}u + gl_LocalInvocationID.z);" in folded[3]  # after acc0
    assert f"if (gidx0 >= {n}) return;" in folded[4]


def test_the_fold_takes_z_when_y_is_used():
    kernel, specials = grid_kernel({"gidx0": 100003, "gidx1": 9})
    folded, fold = fold_groups(kernel, specials, 1, GRID_MAX)
    assert fold == (2, 0, 65535)
    assert "gl_WorkGroupID.z * gl_NumWorkGroups.x" in folded[0]
    assert folded[3] == kernel[1]  # gidx1 as it was


def test_with_every_axis_used_the_fold_shares_one():
    """y and z both used: the rows go into y beside its own index (modulo and quotient of the group's y)."""
    kernel, specials = grid_kernel({"gidx0": 100003, "gidx1": 9, "gidx2": 5})
    folded, fold = fold_groups(kernel, specials, 1, GRID_MAX)
    assert fold == (1, 2, 65535)
    assert "(gl_WorkGroupID.y % 2u) * gl_NumWorkGroups.x" in folded[0]
    assert folded[3].strip().startswith("int gidx1 = int((gl_WorkGroupID.y / 2u));")
    assert folded[4] == kernel[2]


def test_kernels_on_global_ids_fold_their_invocations():
    kernel, specials = grid_kernel({"idx0": 200003}, gid=True)
    folded, fold = fold_groups(kernel, specials, 1, GRID_MAX)
    assert fold == (1, 0, 65535)
    assert folded[0].strip() == (
        "uint vk_group_x = (gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x) * gl_WorkGroupSize.x"
        " + gl_LocalInvocationID.x;"
    )
    assert folded[1].strip() == "if (vk_group_x >= 200003u) return;"


def test_a_grid_no_axis_has_room_for_is_refused():
    kernel, specials = grid_kernel({"gidx0": 100003, "gidx1": 65535, "gidx2": 65535})
    with pytest.raises(RuntimeError, match="does not fit this device's maxComputeWorkGroupCount"):
        fold_groups(kernel, specials, 1, GRID_MAX)


@pytest.mark.parametrize("n", [65537, 100003, 3000017])
def test_a_prime_length_past_the_limit_runs(vk_device, n):
    """tinygrad splits a grid axis past the device's limit only by a divisor that fits: a prime number of rows past
    65,535 (lavapipe's limit, and many GPUs') runs, widened 32 rows to a group, and past 65,535 of those folded."""
    a = RNG.integers(-50, 50, (2, n)).astype(np.int32)
    with Context(DEV="VK"):
        assert (Tensor(a).sum(axis=0).numpy() == a.sum(axis=0)).all()
        assert ((Tensor(a[0]) * 3 + 1).numpy() == a[0] * 3 + 1).all()


SMALL_GRID = (64, 64, 64)  # a test arch's limits, so that small tensors fold


def _on_small_grid(vk_device, fn):
    """``fn()`` on VK rendered for a device of SMALL_GRID work groups per axis; the programs' folds, as launched."""
    from vkbackend.tinygrad.runtime.ops_vk import VKProgram

    arch = make_arch(dataclasses.replace(caps_from_info(vk_device.vk.info), global_max=SMALL_GRID))
    seen = []
    call = VKProgram.grid

    def recording_grid(self, global_size, local_size):
        grid, local = call(self, global_size, local_size)
        seen.append((self.fold, grid))
        return grid, local

    with pytest.MonkeyPatch.context() as mp, Context(DEV=f"VK::{arch}", CACHELEVEL=0):
        mp.setattr(VKProgram, "grid", recording_grid)
        fn()
    for fold, grid in seen:
        assert all(g <= m for g, m in zip(grid, SMALL_GRID)), (fold, grid)
    return [fold for fold, _ in seen if fold is not None]


@pytest.mark.parametrize("nolocals", [0, 1])
def test_folded_kernels_against_numpy(vk_device, nolocals):
    """Elementwise and reduce kernels of one, two and three grid axes on a device of 64 x 64 x 64 work groups, folded
    into a free axis or one they share, against numpy; on work groups and on global ids."""
    a = RNG.integers(-50, 50, (3, 5, 7, 13)).astype(np.int32)
    v = RNG.integers(-50, 50, 4093).astype(np.int32)  # a prime: no local size divides it
    b = RNG.integers(-50, 50, (2, 3, 600)).astype(np.int32)  # transposed: three grid axes, the longest past 64

    def run():
        with Context(NOLOCALS=nolocals):
            ta, tv = Tensor(a), Tensor(v)
            assert ((tv * 3 + 1).numpy() == v * 3 + 1).all()
            assert (ta.sum(axis=3).numpy() == a.sum(axis=3)).all()
            assert (ta.permute(3, 1, 2, 0).contiguous().numpy() == a.transpose(3, 1, 2, 0)).all()
            assert (ta.max(axis=1).numpy() == a.max(axis=1)).all()
            assert (Tensor(b).permute(2, 1, 0).contiguous().numpy() == b.transpose(2, 1, 0)).all()

    folds = _on_small_grid(vk_device, run)
    assert folds, "no kernel was folded"
    assert {fold[0] for fold in folds} >= {1}, folds


def test_a_grid_too_long_for_the_device_is_refused_clearly(vk_device):
    a = RNG.integers(-50, 50, 131101).astype(np.int32)  # a prime: one-invocation groups, WIDE_GROUP to a group
    with pytest.raises(RuntimeError, match="does not fit this device's maxComputeWorkGroupCount"):
        _on_small_grid(vk_device, lambda: (Tensor(a) + 1).realize())
