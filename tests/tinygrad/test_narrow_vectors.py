"""bfloat16, 8- and 16-bit accesses grouped into vector accesses (vkbackend.tinygrad.renderer.narrow_vectors), which
tinygrad's coalescing leaves one element at a time: which are grouped, and which are left alone. Their results on a
device: test_tensors.py (vector loads and stores); the tensor-core kernels: test_tensor_cores.py."""

from __future__ import annotations

import re

import pytest
from _render_only import kernels, render_device
from test_renderer import FULL
from tinygrad import Tensor, dtypes
from tinygrad.uop.ops import Ops, UOp

from vkbackend.tinygrad.renderer.narrow_vectors import NARROW, group_narrow_accesses, known_factor
from vkbackend.tinygrad.renderer.uop_lists import index_const

DEV = render_device("VKNARROW", FULL)


def _accesses(source: str) -> list[str]:
    """The kernel's accesses to its input (data1) and output (data0), in order: ``V<n>(index)`` or ``S<n>(index)``
    for vectors, ``I(index)`` for single elements."""
    out = []
    for m in re.finditer(r"VK_([VS])(\d)_(\d)\(([^,;)]*)|data(\d)_\w+\[VK_I\d_\d\(([^)]*)\)\]", source):
        out.append(f"{m[1]}{m[3]}({m[4]})" if m[1] else f"I{m[5]}({m[6]})")
    return out


@pytest.mark.parametrize("dt", NARROW, ids=str)
@pytest.mark.parametrize(
    ("start", "expected"),
    [
        (0, ["V4(alu0)", "S4(alu0)"]),  # four at a time: the index is a multiple of 4
        (1, ["I1(alu0+1)", "V2(alu0+2)", "I1(alu0+4)", "S4(alu0)"]),  # only the pair whose index is even
        (2, ["V2(alu0+2)", "V2(alu0+4)", "S4(alu0)"]),  # pairs: a multiple of 2, not of 4
    ],
)
def test_narrow_elements_are_read_and_written_as_vectors_where_their_index_is_aligned(dt, start, expected):
    """An elementwise kernel upcast by 4 reads elements start + 4i .. start + 4i + 3 of its input: grouped as far as
    the first one's index is a multiple of the vector's lanes, as tinygrad groups float16's."""
    (lib,) = kernels(DEV, lambda d: (Tensor.empty(4100, dtype=dt, device=d)[start : 4096 + start] * 2).realize())
    body = lib.source.split("void main() {", 1)[1]
    assert sorted(_accesses(body)) == sorted(expected), body


def test_tinygrads_switch_for_its_coalescing_turns_this_grouping_off_too(monkeypatch):
    """DMC=1 leaves every access single: tinygrad's (codegen/late/coalesce.py) and these."""
    from vkbackend.tinygrad.renderer import renderer

    monkeypatch.setattr(renderer, "getenv", lambda key, default=0: 1 if key == "DMC" else default)
    (lib,) = kernels(DEV, lambda d: (Tensor.empty(8192, dtype=dtypes.int16, device=d) * 3).realize())
    body = lib.source.split("void main() {", 1)[1]
    assert _accesses(body) and all(a.startswith("I") for a in _accesses(body)), body


def _list(sink: UOp, order: list[UOp]) -> list[UOp]:
    """The linearised uops of ``sink``: every value first, then the accesses in ``order``, then GROUP and SINK."""
    topo = list(sink.toposort())
    return [u for u in topo if u not in order and u.op not in (Ops.GROUP, Ops.SINK)] + order + topo[-2:]


def _two_by_two(dt=dtypes.bfloat16):
    """Loads of elements 0 and 1 of one argument, stored crosswise to elements 0 and 1 of another."""
    a, out = UOp.param(0, dt, (8,)), UOp.param(1, dt, (8,))
    l0, l1 = a.index(index_const(0)).load(), a.index(index_const(1)).load()
    s0, s1 = out.index(index_const(0)).store(l1), out.index(index_const(1)).store(l0)
    return UOp.sink(UOp(Ops.GROUP, dtypes.void, (s0, s1))), (l0, l1, s0, s1)


def test_runs_of_loads_and_stores_become_vector_accesses_with_the_same_elements():
    sink, (l0, l1, s0, s1) = _two_by_two()
    uops = group_narrow_accesses(_list(sink, [l0, l1, s0, s1]))
    (load,) = [u for u in uops if u.op is Ops.LOAD]
    (store,) = [u for u in uops if u.op is Ops.STORE]
    assert load.src[0].op is Ops.SHRINK and load.shape == (2,) and load.src[0].src[1] is index_const(0)
    assert store.src[0].op is Ops.SHRINK and store.src[0].src[1] is index_const(0)
    values = store.src[1]  # lane 0 is the load's lane 1, and lane 1 its lane 0
    assert values.op is Ops.STACK and [(v.src[0], v.src[1]) for v in values.src] == [
        (load, index_const(1)),
        (load, index_const(0)),
    ]
    assert uops.index(load) < uops.index(store)


@pytest.mark.parametrize(
    "order",
    [
        lambda l0, l1, s0, s1: [l0, s0, l1, s1],  # a store between the loads, and a load between the stores
        lambda l0, l1, s0, s1: [l1, s1, l0, s0],
    ],
)
def test_no_access_moves_past_another_access_to_memory(order):
    """The vector load would read element 1 before a store it came after, and the vector store write element 0 after
    a load it came before: neither is made, whichever buffers the accesses between reach."""
    sink, accesses = _two_by_two()
    uops = _list(sink, order(*accesses))
    assert group_narrow_accesses(uops) is uops


def test_types_tinygrad_groups_itself_and_bool_are_left_alone():
    for dt in (dtypes.float16, dtypes.float32, dtypes.int32, dtypes.bool, dtypes.int64):
        sink, (l0, l1, s0, s1) = _two_by_two(dt)
        uops = _list(sink, [l0, l1, s0, s1])
        assert group_narrow_accesses(uops) is uops, dt


def test_gated_loads_are_left_alone():
    a, out = UOp.param(0, dtypes.int16, (8,)), UOp.param(1, dtypes.int16, (8,))
    gate = UOp.variable("g", 0, 1).ne(0)
    l0, l1 = (UOp(Ops.LOAD, dtypes.int16, (a.index(index_const(i)), UOp.const(0, dtypes.int16), gate)) for i in (0, 1))
    s0, s1 = out.index(index_const(2)).store(l0), out.index(index_const(5)).store(l1)  # not a run: stored one at a time
    sink = UOp.sink(UOp(Ops.GROUP, dtypes.void, (s0, s1)))
    uops = _list(sink, [l0, l1, s0, s1])
    assert group_narrow_accesses(uops) is uops


def test_the_known_factor_of_an_index_is_proven_never_guessed():
    x = UOp.variable("x", 0, 1000, dtypes.int)
    assert (
        known_factor(index_const(12)) == 4
        and known_factor(index_const(0)) == 1 << 16
        and known_factor(index_const(-6)) == 2
    )
    assert known_factor(x) == 1 and known_factor(UOp(Ops.SHL, dtypes.int, (x, index_const(3)))) == 8
    assert known_factor(UOp(Ops.ADD, dtypes.int, (UOp(Ops.SHL, dtypes.int, (x, index_const(3))), index_const(4)))) == 4
    assert known_factor(UOp(Ops.MUL, dtypes.int, (x, index_const(6)))) == 2
    assert known_factor(UOp(Ops.SHL, dtypes.int, (x, UOp.variable("s", 0, 4, dtypes.int)))) == 1  # a shift by what?
    assert known_factor(UOp(Ops.SHR, dtypes.int, (index_const(64), index_const(1)))) == 1  # not followed
