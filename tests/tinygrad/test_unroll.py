"""Innermost loops unrolled on every device but a CPU one (vkbackend.tinygrad.renderer.unroll): which loops, by how
much, and that the results stay exact. The renderer knows the lane budget from the arch (``unroll64``); a CPU device
(lavapipe) leaves it off unless ``VKBACKEND_TINYGRAD_UNROLL=1``, so the device tests here turn it on through
``DEV=VK::<arch>``."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest
from _render_only import BASE, kernels, render_device
from _shared_checks import check_arch_token, check_matmul_and_1x1_convolution, check_on_but_on_cpu
from tinygrad import Context, Tensor, Variable, dtypes
from tinygrad.uop.ops import Ops, UOp

from vkbackend.tinygrad.renderer import renderer
from vkbackend.tinygrad.renderer.caps import TCShape, make_arch
from vkbackend.tinygrad.renderer.memory_access import global_load_lanes
from vkbackend.tinygrad.renderer.unroll import LANE_BUDGET, MAX_FACTOR, unroll_factors
from vkbackend.tinygrad.runtime.device_caps import caps_from_info, unrolls

RNG = np.random.default_rng(3)
UNROLLED = render_device("VKUNROLL", dataclasses.replace(BASE, unroll_lanes=LANE_BUDGET))
PLAIN = render_device("VKNOUNROLL", BASE)
# both passes, as on lavapipe with unrolling switched on
BOTH = render_device("VKUNROLLLOOPS", dataclasses.replace(BASE, unroll_lanes=LANE_BUDGET, loop_limit=65535))
LOOP = re.compile(r"for \(int (\w+) = 0; \1 < (\d+); \1\+\+\) \{")


def _loops(source: str) -> dict[str, int]:
    """The constant loops of a kernel's source, by variable: their trip counts."""
    return {name: int(n) for name, n in LOOP.findall(source)}


def _factors(source: str) -> dict[str, int]:
    """The unrolled loops of a kernel's source, by variable: their factors."""
    return {name: int(u) for name, u in re.findall(r"for \(int (\w+)_u = 0; \1_u < \S+; \1_u \+= (\d+)\)", source)}


def _loop_body(source: str, name: str) -> str:
    """The body of loop ``name`` (as tinygrad wrote it) in ``source``, up to its first inner loop."""
    return source.split(f"{name}++) {{", 1)[1].split("}", 1)[0].split("for (", 1)[0]


def _row_sum(dev: str) -> None:
    Tensor.empty(64, 1000, device=dev).sum(1).realize()


def _scalar_row_sum(dev: str) -> None:
    with Context(NOOPT=1):  # no upcast: one scalar load an iteration
        _row_sum(dev)


def _matmul(dev: str) -> None:
    (Tensor.empty(256, 256, device=dev) @ Tensor.empty(256, 256, device=dev)).realize()


# ----- rendering (no GPU) ------------------------------------------------------------------------------------------


def test_the_budget_travels_in_the_arch():
    check_arch_token(BASE, "unroll_lanes", "unroll", LANE_BUDGET)


def test_every_device_but_a_cpu_one_unrolls_unless_asked(monkeypatch):
    check_on_but_on_cpu(unrolls, "VKBACKEND_TINYGRAD_UNROLL", monkeypatch)


def test_a_loop_of_vec4_loads_is_unrolled_by_the_largest_factor_with_a_tail(glslang):
    (plain,) = kernels(PLAIN, _row_sum)
    (unrolled,) = kernels(UNROLLED, _row_sum)
    (name, n), *_ = _loops(plain.source).items()
    assert not _factors(plain.source)
    assert re.findall(r"VK_V\d+_\d+\(|data\d+_\d+\[", _loop_body(plain.source, name)) == ["VK_V1_4("]
    # one vec4 load an iteration, 4 lanes: the budget would allow 16 copies, MAX_FACTOR (8) is the most; a tail loop
    # for the iterations the factor does not divide
    assert MAX_FACTOR == 8 and 4 * 16 <= LANE_BUDGET
    assert _factors(unrolled.source) == {name: MAX_FACTOR}
    assert unrolled.source.count(f"int {name} = {name}_u+") == MAX_FACTOR
    if n % MAX_FACTOR:
        assert f"for (int {name} = {n // MAX_FACTOR * MAX_FACTOR}; {name} < {n}; {name}++) {{" in unrolled.source


def test_the_factor_keeps_the_copies_loads_within_the_budget(glslang):
    (plain,) = kernels(PLAIN, _matmul)
    (unrolled,) = kernels(UNROLLED, _matmul)
    ((name, u),) = _factors(unrolled.source).items()
    body = plain.source.split(f"{name}++) {{", 1)[1].split("\n  }", 1)[0]
    lanes = len(re.findall(r"data\d+_\d+\[", body)) + sum(int(w) for w in re.findall(r"VK_V\d+_(\d+)\(", body))
    assert lanes * u <= LANE_BUDGET < lanes * u * 2, (lanes, u)


@pytest.mark.parametrize("layout", ["chunk", "nv"])
def test_loops_around_tensor_cores_are_left_alone(glslang, layout):
    # chunk: the tiles staged through shared memory (barriers in the loop); nv: registers straight into the matrices
    tc = dataclasses.replace(BASE, tc_threads=32, tc_shapes=(TCShape(16, 16, 16, "f16", "f32"),), tc_layout=layout)
    plain = render_device(f"VKTC{layout.upper()}", tc)
    # a budget that the loop's loads would fit many times over
    unrolled = render_device(f"VKTCUNROLL{layout.upper()}", dataclasses.replace(tc, unroll_lanes=64 * LANE_BUDGET))

    def fn(dev):
        (
            Tensor.empty(256, 256, dtype=dtypes.half, device=dev)
            @ Tensor.empty(256, 256, dtype=dtypes.half, device=dev)
        ).realize()

    (k,) = kernels(unrolled, fn)
    assert "coopMat" in k.source and _loops(k.source), "not a tensor-core kernel with a loop"
    assert [k.source] == [x.source for x in kernels(plain, fn)]


def test_a_long_loop_of_scalar_loads_is_unrolled_by_max_factor_only(glslang):
    # one scalar load an iteration: the budget would allow 64 copies
    (plain,) = kernels(PLAIN, _scalar_row_sum)
    (unrolled,) = kernels(UNROLLED, _scalar_row_sum)
    assert _loops(plain.source) == {"Ridx0": 1000}
    assert re.findall(r"VK_V\d+_\d+\(|data\d+_\d+\[", _loop_body(plain.source, "Ridx0")) == ["data1_64000["]
    assert _factors(unrolled.source) == {"Ridx0": 8} and unrolled.source.count("int Ridx0 = Ridx0_u+") == 8
    assert "for (int Ridx0_u = 0; Ridx0_u < 1000; Ridx0_u += 8) {" in unrolled.source  # 8 divides 1000: no tail


def test_a_short_loop_is_unrolled_by_no_more_than_its_trip_count(glslang):
    def short(dev):
        with Context(NOOPT=1):  # tinygrad would otherwise write a reduction of 5 out itself
            Tensor.empty(64, 5, device=dev).sum(1).realize()

    (plain,) = kernels(PLAIN, short)
    (unrolled,) = kernels(UNROLLED, short)
    assert _loops(plain.source) == {"Ridx0": 5} and "Ridx0_u" not in plain.source
    # one scalar load an iteration would allow MAX_FACTOR copies, but 4 is the largest power of two within 5: the
    # 4 copies written out (one round of a main loop), then a tail loop for the last iteration
    assert re.findall(r"^ +int Ridx0 = (\d+);$", unrolled.source, re.M) == ["0", "1", "2", "3"]
    assert "for (int Ridx0 = 4; Ridx0 < 5; Ridx0++) {" in unrolled.source and "Ridx0_u" not in unrolled.source


def test_a_loop_without_global_loads_is_left_alone(glslang):
    # the one load, of x, does not depend on the loop and is made before it: the loop only computes
    def computed(dev):
        x = Tensor.empty(64, 1, device=dev)
        (x * Tensor.arange(1000).to(dev).float().reshape(1, 1000)).exp2().sum(1).realize()

    (plain,) = kernels(PLAIN, computed)
    (unrolled,) = kernels(UNROLLED, computed)
    ((name, _),) = _loops(plain.source).items()
    body = _loop_body(plain.source, name)
    assert "exp2" in body and not re.search(r"VK_V\d+_\d+\(|data\d+_\d+\[", body), body
    assert unrolled.source == plain.source


def test_a_loop_over_shared_memory_is_left_alone(glslang):
    # tinygrad sums 4096 floats in one work group: each invocation sums its part from global memory (unrolled), then,
    # after a barrier, a loop adds the group's partial sums from shared memory (no global load: left as written)
    fn = lambda dev: Tensor.empty(4096, device=dev).sum().realize()  # noqa: E731
    (plain,) = kernels(PLAIN, fn)
    (unrolled,) = kernels(UNROLLED, fn)
    (first, _), (second, _) = _loops(plain.source).items()
    shared_loop = plain.source[plain.source.index(f"for (int {second} = 0") :].split("}", 1)[0]
    assert "barrier();" in plain.source.split(shared_loop)[0] and re.search(r"= buf\d+\[", shared_loop), shared_loop
    assert not re.search(r"VK_V\d+_\d+\(|data\d+_\d+\[", shared_loop), shared_loop
    assert _factors(unrolled.source) == {first: MAX_FACTOR} and shared_loop in unrolled.source


def test_a_loop_with_a_symbolic_bound_is_left_alone(glslang):
    def fn(dev):
        v = Variable("n", 1, 3000).bind(1000)
        Tensor.empty(64, 3000, device=dev)[:, :v].sum(1).realize()

    (plain,) = kernels(PLAIN, fn)
    (unrolled,) = kernels(UNROLLED, fn)
    assert "for (int Ridx0 = 0; Ridx0 < data" in plain.source and "data1_" in _loop_body(plain.source, "Ridx0")
    assert unrolled.source == plain.source


def test_only_the_innermost_of_nested_loops_is_unrolled(glslang):
    def nested(dev):
        with Context(NOOPT=1):
            a = Tensor.empty(64, 32, 1, device=dev)
            bs = [Tensor.empty(64, 32, 100, device=dev) for _ in range(8)]
            (a * sum(bs[1:], bs[0])).sum((1, 2)).realize()

    (plain,) = kernels(PLAIN, nested)
    (unrolled,) = kernels(UNROLLED, nested)
    assert _loops(plain.source) == {"Ridx0": 32, "Ridx1": 100}
    # the outer loop loads a itself (1 lane), the inner loop the 8 b's: 8 lanes an iteration, 8 copies fill the
    # budget exactly; were a's load counted against the inner loop too, 9 lanes would allow only 4
    assert len(re.findall(r"data\d+_\d+\[", _loop_body(plain.source, "Ridx0"))) == 1
    assert len(re.findall(r"data\d+_\d+\[", _loop_body(plain.source, "Ridx1"))) == 8 and 8 * 8 == LANE_BUDGET
    assert _factors(unrolled.source) == {"Ridx1": 8}
    assert "for (int Ridx0 = 0; Ridx0 < 32; Ridx0++) {" in unrolled.source


def test_a_loop_with_a_barrier_keeps_its_schedule(glslang, monkeypatch):
    # none of tinygrad's kernels tried has a BARRIER op inside an innermost loop: a group reduction's barrier follows
    # its loop (above), and tensor cores staged through shared memory keep theirs in the WMMA helper, a WMMA op in the
    # uops. So a barrier is put into the loop of a row sum's uops by hand.
    seen: list = []
    monkeypatch.setattr(renderer, "unroll_for_loads", lambda tree, uops, budget: seen.append(uops))

    def row_sum(dev):  # a shape of its own: a kernel tinygrad compiled before is not rendered again
        with Context(NOOPT=1):
            Tensor.empty(48, 1000, device=dev).sum(1).realize()

    kernels(UNROLLED, row_sum)
    (uops,) = seen
    assert unroll_factors(uops) == {"Ridx0": MAX_FACTOR}
    load = next(i for i, u in enumerate(uops) if global_load_lanes(u))
    assert any(u.op is Ops.RANGE for u in uops[:load]) and not any(u.op is Ops.END for u in uops[:load])
    assert unroll_factors([*uops[: load + 1], UOp(Ops.BARRIER), *uops[load + 1 :]]) == {}


def test_past_the_loop_limit_the_loop_limit_unrolls_further(glslang):
    def long_sum(n):
        return lambda dev: Tensor.empty(n, dtype=dtypes.int32, device=dev).cast(dtypes.int64).sum().realize()

    # 262,147 iterations unrolled by 8 for loads run 32,773: under lavapipe's limit, the limit's pass has nothing to do
    (k,) = kernels(BOTH, long_sum(262147))
    assert _factors(k.source) == {"Ridx0": 8}
    # 600,011 unrolled by 8 would still run 75,006: the limit's pass doubles the factor
    (k,) = kernels(BOTH, long_sum(600011))
    assert _factors(k.source) == {"Ridx0": 16}


# ----- on the device -----------------------------------------------------------------------------------------------


@pytest.fixture
def unrolled_vk(vk_device):
    """tinygrad's VK device with unrolling on (also on lavapipe, where it is off by default)."""
    caps = dataclasses.replace(vk_device.renderer.caps, unroll_lanes=LANE_BUDGET)
    with Context(DEV=f"VK::{make_arch(caps)}"):
        yield vk_device


def test_this_device_unrolls_unless_it_is_a_cpu_one(vk_device, monkeypatch):
    monkeypatch.delenv("VKBACKEND_TINYGRAD_UNROLL", raising=False)
    info = vk_device.vk.info
    assert caps_from_info(info).unroll_lanes == (0 if info.device_type == "cpu" else LANE_BUDGET), info.device_type


def test_unrolled_reductions_are_exact(unrolled_vk, kernel_sources):
    a = RNG.integers(-1000, 1000, (64, 1003), dtype=np.int32)  # 1003: a tail loop after the unrolled main loop
    # one loop of 600,011: unrolled by 8 still past lavapipe's loop limit (75,006 iterations), so there the limit's
    # pass unrolls it further, by 16
    b = RNG.integers(-1000, 1000, 600011, dtype=np.int32)
    np.testing.assert_array_equal(Tensor(a).sum(1).numpy(), a.sum(1))
    np.testing.assert_array_equal(Tensor(a).max(1).numpy(), a.max(1))
    assert Tensor(b).cast(dtypes.int64).sum().item() == int(b.astype(np.int64).sum())
    assert any(_factors(src) for src in kernel_sources), "no kernel was unrolled"
    (long_sum,) = [src for src in kernel_sources if "600011" in src]
    assert set(_factors(long_sum).values()) == {16 if unrolled_vk.renderer.caps.loop_limit else 8}


def test_unrolled_matmul_and_convolution_match_numpy(unrolled_vk, kernel_sources):
    check_matmul_and_1x1_convolution(RNG, (96, 160, 72), (2, 64, 7, 7), 32, rtol=1e-5)
    assert any(_factors(src) for src in kernel_sources), "no kernel was unrolled"
