"""Index expressions evaluated lane by lane (vkbackend.tinygrad.renderer.index_values): the kernel language's integer
semantics, what cannot be evaluated, and a compile worker's imports."""

from __future__ import annotations

import subprocess
import sys

import pytest
from tinygrad import dtypes
from tinygrad.uop.ops import Ops, UOp

from vkbackend.tinygrad.renderer.index_values import Unknown, evaluate

LANES = [-7, -1, 0, 3, 8]


def _lidx(size: int = 8) -> UOp:
    return UOp(Ops.SPECIAL, dtypes.int32, (UOp.const(size, dtypes.int32),), "lidx0")


def _alu(op: Ops, *src: UOp) -> UOp:
    return UOp(op, dtypes.int32, src)


def _values(u: UOp, lanes: list[int] = LANES) -> list[int]:
    return evaluate(u, [lanes], {})


def test_division_and_modulo_truncate_or_floor_as_the_op_says():
    x, three = _lidx(), UOp.const(3, dtypes.int32)
    # C's (and GLSL's) division truncates towards zero and the remainder takes the dividend's sign; the floor ops
    # round down and take the divisor's
    assert _values(_alu(Ops.CDIV, x, three)) == [-2, 0, 0, 1, 2]
    assert _values(_alu(Ops.CMOD, x, three)) == [-1, -1, 0, 0, 2]
    assert _values(_alu(Ops.FLOORDIV, x, three)) == [-3, -1, 0, 1, 2]
    assert _values(_alu(Ops.FLOORMOD, x, three)) == [2, 2, 0, 0, 2]


def test_comparisons_give_0_or_1_and_where_picks_per_lane():
    x, zero = _lidx(), UOp.const(0, dtypes.int32)
    below = UOp(Ops.CMPLT, dtypes.bool, (x, zero))
    assert _values(below) == [1, 1, 0, 0, 0]
    assert _values(UOp(Ops.CMPNE, dtypes.bool, (x, zero))) == [1, 1, 0, 1, 1]
    assert _values(_alu(Ops.WHERE, below, _alu(Ops.NEG, x), x)) == [7, 1, 0, 3, 8]  # |x|
    as_int = UOp(Ops.CAST, dtypes.int32, (below,))
    assert _values(_alu(Ops.MULACC, as_int, x, UOp.const(100, dtypes.int32))) == [93, 99, 100, 100, 100]


def test_shifts_and_bitwise_ops_are_twos_complement():
    x = _lidx()
    assert _values(_alu(Ops.SHR, x, UOp.const(1, dtypes.int32))) == [-4, -1, 0, 1, 4]  # arithmetic shift
    assert _values(_alu(Ops.SHL, x, UOp.const(2, dtypes.int32))) == [-28, -4, 0, 12, 32]
    assert _values(_alu(Ops.AND, x, UOp.const(6, dtypes.int32))) == [0, 6, 0, 2, 0]
    assert _values(_alu(Ops.XOR, x, UOp.const(-1, dtypes.int32))) == [6, 0, -1, -4, -9]


def test_loops_sit_at_their_least_value_unless_fixed_and_group_ids_are_0():
    loop = UOp.range(16, 0)
    gidx = UOp(Ops.SPECIAL, dtypes.int32, (UOp.const(64, dtypes.int32),), "gidx0")
    index = _alu(Ops.ADD, _alu(Ops.MUL, loop, UOp.const(100, dtypes.int32)), _alu(Ops.ADD, _lidx(), gidx))
    assert evaluate(index, [[0, 1, 2]], {}) == [0, 1, 2]
    assert evaluate(index, [[0, 1, 2]], {}, {loop: 5}) == [500, 501, 502]


def test_what_cannot_be_evaluated_raises():
    x = _lidx()
    with pytest.raises(Unknown):  # a lane divides by zero
        _values(_alu(Ops.CDIV, UOp.const(1, dtypes.int32), x))
    with pytest.raises(Unknown):  # a shift the kernel's language leaves undefined
        _values(_alu(Ops.SHL, x, UOp.const(64, dtypes.int32)))
    with pytest.raises(Unknown):
        _values(UOp.const(1.5, dtypes.float32))
    with pytest.raises(OverflowError):  # a value past int64, not wrapped around
        _values(_alu(Ops.MUL, x, UOp.const(2**62, dtypes.int64)))


def test_memo_keeps_values_between_calls():
    x = _lidx()
    doubled = _alu(Ops.ADD, x, x)
    memo: dict = {}
    first = evaluate(doubled, [LANES], memo)
    assert memo[doubled] is first and evaluate(doubled, [LANES], memo) is first


def test_a_compile_worker_renders_and_compiles_without_numpy():
    # tinygrad's compile workers are new processes; one that imported numpy would pay for it on every start
    code = (
        "import sys, tinygrad\n"
        "before = 'numpy' in sys.modules\n"
        "import vkbackend.tinygrad.renderer.renderer, vkbackend.tinygrad.compiler.compiler\n"
        "print(before, 'numpy' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "False"]
