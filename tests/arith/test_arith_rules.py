"""Unit tests of the simplifier, one group per rule family, written as before -> after text."""

from __future__ import annotations

import pytest

from tvmpy import arith, tir
from tvmpy.tir import Range, SizeVar, Var, const
from tvmpy.tir import expr as E

x, y, z = Var("x"), Var("y"), Var("z")
i, j, k = Var("i"), Var("j"), Var("k")
n, m = SizeVar("n"), SizeVar("m")


def simp(e, **ranges) -> str:
    ana = arith.Analyzer()
    for name, (lo, hi) in ranges.items():
        ana.bind(globals()[name], Range(lo, hi))
    return str(ana.simplify(e))


def c32(v: int) -> E.IntImm:
    return const(v, "int32")


# ---- constant folding -------------------------------------------------------------------------
@pytest.mark.parametrize(
    "expr, want",
    [
        (c32(7) // c32(2), "3"),
        (c32(-7) // c32(2), "-4"),
        (c32(7) // c32(-2), "-4"),
        (c32(-7) % c32(2), "1"),
        (c32(7) % c32(-2), "-1"),
        (tir.truncdiv(c32(-7), c32(2)), "-3"),
        (tir.truncmod(c32(-7), c32(2)), "-1"),
        (tir.truncdiv(c32(7), c32(-2)), "-3"),
        (tir.truncmod(c32(7), c32(-2)), "1"),
        (c32(2**31 - 1) + c32(1), "-2147483648"),
        (c32(-(2**31)) - c32(1), "2147483647"),
        (c32(65536) * c32(65536), "0"),
        (tir.min(c32(3), c32(-4)), "-4"),
        (tir.max(c32(3), c32(-4)), "3"),
        (c32(3) < c32(4), "True"),
        (c32(3) == c32(4), "False"),
        (const(1.5) * const(2.0), "3.0f"),
        (const(1.0) / const(4.0), "0.25f"),
        (const(0.1) + const(0.2), "0.30000001192092896f"),  # float32 arithmetic, not float64
        (const(0.1, "float64") + const(0.2, "float64"), "float64(0.30000000000000004)"),
    ],
)
def test_constant_folding(expr, want):
    assert simp(expr) == want


def test_fold_wraparound_narrow_and_unsigned():
    assert simp(const(250, "uint8") + const(10, "uint8")) == "uint8(4)"
    assert simp(const(0, "uint8") - const(1, "uint8")) == "uint8(255)"
    assert simp(const(127, "int8") + const(1, "int8")) == "int8(-128)"
    assert simp(const(2**31 - 1, "int64") + const(1, "int64")) == "int64(2147483648)"
    assert simp(tir.truncdiv(const(-(2**31), "int32"), const(-1, "int32"))) == "-2147483648"


def test_fold_casts():
    assert simp(E.Cast("int8", c32(300))) == "int8(44)"
    assert simp(E.Cast("uint8", c32(-1))) == "uint8(255)"
    assert simp(E.Cast("int32", const(-2.7))) == "-2"  # C truncation toward zero
    assert simp(E.Cast("float32", const(0.1, "float64"))) == "0.10000000149011612f"
    assert simp(E.Cast("bool", c32(5))) == "True"
    # NaN / out-of-range float -> int is undefined in C: left for the target
    assert "int32(" in simp(E.Cast("int32", const(float("nan"))))
    assert "int32(" in simp(E.Cast("int32", const(1e20, "float64")))


def test_fold_int_intrinsics():
    assert simp(tir.bitwise_and(c32(12), c32(10))) == "8"
    assert simp(tir.shift_right(c32(-8), c32(1))) == "-4"
    assert simp(tir.shift_right(const(255, "uint8"), const(4, "uint8"))) == "uint8(15)"
    assert simp(tir.popcount(c32(-1))) == "32"


def test_division_by_zero_is_not_folded():
    e = E.FloorDiv(x, c32(0))
    assert simp(e) == str(e)
    assert simp(E.FloorDiv(c32(3), c32(0))) == "3 // 0"


def test_floats_are_never_reassociated():
    a, b = Var("a", "float32"), Var("b", "float32")
    for e in [(a + b) - b, a + const(0.0), a * const(2.0) + a, (a + const(1.0)) + const(2.0)]:
        assert simp(e) == str(e)
    assert simp(a / const(1.0)) == "a"  # exact


# ---- canonical form ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "expr, want",
    [
        (x + y - x, "y"),
        ((x + 1) * 2 - x * 2, "2"),
        (y + x * 8, "x * 8 + y"),
        (x * 2 + y * 3 - (y * 3 + x), "x"),
        (x * y - y * x, "0"),
        ((x + y) * (x - y), "x * x - y * y"),
        (c32(5) - x, "5 - x"),
        (z - x * 4 - 1 + x * 4, "z - 1"),
        (tir.min(x, y) + tir.max(y, x) - x, "y"),
    ],
)
def test_canonical_sums(expr, want):
    assert simp(expr) == want


def test_canonical_form_is_order_independent():
    a = (i * 32 + j) * 1024 + k * 4
    b = k * 4 + j * 1024 + i * 32768
    assert simp(a) == simp(b) == "i * 32768 + j * 1024 + k * 4"


def test_narrow_types_get_only_exact_identities():
    a = Var("a", "int8")
    assert simp(a + const(0, "int8")) == "a"
    assert simp(a - a) == "int8(0)"
    e = (a + const(100, "int8")) - const(100, "int8")  # may wrap: keep
    assert simp(e) == str(e)


# ---- division and modulo -----------------------------------------------------------------------
@pytest.mark.parametrize(
    "expr, want",
    [
        ((i * 8 + j) // 8, "i"),
        ((i * 8 + j) % 8, "j"),
        ((x * 4 + y) % 4, "y % 4"),
        ((x // 4) * 4 + x % 4, "x"),
        (x % 32 // 4 * 4 + x % 4, "x % 32"),
        (x - (x // 8) * 8, "x % 8"),
        ((x * 4 + 2) // 2, "x * 2 + 1"),
        ((x * 4 + 6) % 4, "2"),
        ((x // 2) // 3, "x // 6"),
        ((x % 8) % 4, "x % 4"),
        ((x // 4) % 8, "x % 32 // 4"),
        ((i * 16 + j * 4 + k) // 8, "i * 2 + j // 2"),
        ((i * 16 + j * 4 + k) % 8, "j % 2 * 4 + k"),
        ((i * 8 + j + 8) // 8, "i + 1"),
        ((i * 8 + j + 9) // 8, "(j + 1) // 8 + i + 1"),
        (tir.truncdiv(i * 8 + j, 8), "i"),
        (tir.truncmod(i * 8 + j, 8), "j"),
        (tir.truncdiv(x * 4, 4), "x"),
        (tir.truncmod(x * 4 + 2, 2), "0"),
    ],
)
def test_div_mod(expr, want):
    assert simp(expr, i=(0, 16), j=(0, 8), k=(0, 4)) == want


def test_trunc_division_with_negative_dividend_is_kept():
    e = tir.truncdiv(x + 1, 2)
    assert simp(e, x=(-5, 5)) == str(e)
    assert simp(tir.truncdiv(x, 8), x=(-7, 8)) == "0"
    assert simp(tir.truncmod(x, 8), x=(-7, 8)) == "x"
    assert simp((x + 8) // 8, x=(-8, 0)) == "0"  # floor: x in [-8, -1]


def test_symbolic_divisor():
    ana = arith.Analyzer()
    ana.bind(i, Range(0, n))
    ana.bind(j, Range(0, m))
    assert str(ana.simplify((i * m + j) // m)) == "i"
    assert str(ana.simplify((i * m + j) % m)) == "j"
    assert str(ana.simplify(x // m * m + x % m)) == "x"
    assert str(ana.simplify((n - 1) // n)) == "0"
    assert ana.can_prove(x % m < m)


# ---- min / max ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "expr, want",
    [
        (tir.min(x + 3, x + 5), "x + 3"),
        (tir.max(tir.max(x, 3), 5), "max(x, 5)"),
        (tir.min(x, x), "x"),
        (tir.min(i, 100), "i"),
        (tir.max(i, 100), "100"),
        (tir.min(i * 4 + j, 63), "i * 4 + j"),
        (tir.min(x + 2, y + 2), "min(x, y) + 2"),
        (tir.max(c32(3), x), "max(x, 3)"),
    ],
)
def test_min_max(expr, want):
    assert simp(expr, i=(0, 16), j=(0, 4)) == want


# ---- comparisons, logic, select ----------------------------------------------------------------
@pytest.mark.parametrize(
    "expr, want",
    [
        (i * 16 + j < 256, "True"),
        (i * 16 + j < 255, "i * 16 + j < 255"),
        (i >= 16, "False"),
        (x < x + 1, "True"),
        (x * 2 == x * 2 + 1, "False"),
        (x * 2 != x * 2 + 1, "True"),
        (x * 4 == y * 4 + 2, "False"),  # differ modulo 4
        (tir.all(x < y, x >= y), "False"),
        (tir.any(x < y, x >= y), "True"),
        (tir.all(x < 5, x < 7), "x < 5"),
        (tir.any(x < 5, x < 7), "x < 7"),
        (E.Not(x < y), "x >= y"),
        (E.Not(E.Not(x < y)), "x < y"),
        (tir.likely(i < 16), "True"),
        (tir.Select(x < x + 1, y, z), "y"),
        (tir.Select(x < y, z, z), "z"),
        (tir.if_then_else(i < 0, x, y), "y"),
    ],
)
def test_logic(expr, want):
    assert simp(expr, i=(0, 16), j=(0, 16)) == want


def test_float_comparisons_are_not_negated():
    a, b = Var("a", "float32"), Var("b", "float32")
    assert simp(E.Not(a < b)) == "not a < b"  # NaN: not (a < b) != (a >= b)
    assert simp(a == a) == "a == a"


# ---- div/mod pairs of congruent dividends (the index of a reshape) ---------------------------
@pytest.mark.parametrize(
    "expr, want",
    [
        # floormod reduced its dividend's coefficients first: (x*16 + i) % 13 -> (x*3 + i) % 13
        (tir.floordiv(x * 16 + i, 13) * 13 + tir.floormod(x * 16 + i, 13), "x * 16 + i"),
        (tir.floordiv(x * 16 + i, 13) * 13 + tir.floormod(x * 3 + i, 13), "x * 16 + i"),
        (tir.floormod(x * 3 + i, 13) + tir.floordiv(x * 16 + i, 13) * 13, "x * 16 + i"),
        # scaled, with extra terms and the constant reduced too
        (tir.floordiv(x * 16 + 20, 13) * 26 + y + tir.floormod(x * 3 + 7, 13) * 2,
         "x * 32 + y + 40"),
        # an outer split taken out of the dividend: x % 196 * 16 == x * 16 (mod 56)
        (x // 196 * 3136 + (x % 196 * 16 + i) // 56 * 56 + (x * 16 + i) % 56, "x * 16 + i"),
        # the truncating pair of one dividend (any sign)
        (tir.truncdiv(x, 7) * 7 + tir.truncmod(x, 7), "x"),
        (tir.truncmod(x, 7) * 3 + y + tir.truncdiv(x, 7) * 21, "x * 3 + y"),
    ],
)
def test_congruent_div_mod_pairs_merge(expr, want):
    assert simp(expr, i=(0, 16)) == want


@pytest.mark.parametrize(
    "expr",
    [
        tir.floordiv(x * 16 + i, 13) * 13 + tir.floormod(x * 4 + i, 13),  # 12x != 0 (mod 13)
        tir.floordiv(x + 1, 13) * 13 + tir.floormod(x, 13),  # off by one
        tir.floordiv(x, 13) * 13 + tir.floormod(x + 13, 26),  # another divisor
        tir.truncdiv(x + 13, 13) * 13 + tir.truncmod(x, 13),  # trunc: only equal dividends
    ],
)
def test_non_congruent_div_mod_pairs_stay(expr):
    ana = arith.Analyzer()
    out = ana.simplify(expr)
    assert "//" in str(out) or "truncdiv" in str(out), out


def test_merged_split_changes_another_pairs_coefficient():
    # merging q // 3 * 3 + q % 3 (q = x // 2 * 2) adds 2 * (x // 2) to the sum: the pair
    # x // 2 * 2 + x % 2 must then not be merged with its old coefficient (x was returned)
    q = x // 2 * 2
    for div, mod in ((tir.floordiv, tir.floormod), (tir.truncdiv, tir.truncmod)):
        e = div(q, 3) * 3 + mod(q, 3) + (x % 2 + x // 2 * 2)
        assert simp(e) == "x // 2 * 4 + x % 2"


def _ramp(base, lanes=16, stride=1):
    return E.Ramp(base, c32(stride), lanes)


def _bc(v, lanes=16):
    return E.Broadcast(c32(v) if isinstance(v, int) else v, lanes)


@pytest.mark.parametrize(
    "expr, want",
    [
        (E.FloorDiv(_ramp(x * 16), _bc(13)) * _bc(13) + E.FloorMod(_ramp(x * 16), _bc(13)),
         "ramp(x * 16, 1, 16)"),
        (E.FloorDiv(_ramp(x * 16), _bc(13)) * _bc(13) + E.FloorMod(_ramp(x * 3), _bc(13)),
         "ramp(x * 16, 1, 16)"),
        (_bc(13) * E.FloorDiv(_ramp(x * 16), _bc(13)) + E.FloorMod(_ramp(x * 3 + 13), _bc(13)),
         "ramp(x * 16, 1, 16)"),
        # (x // c) * (c * k) + (x % c) * k -> x * k, extra terms in between
        (E.FloorMod(_ramp(x * 3), _bc(13)) * _bc(2) + _bc(y)
         + E.FloorDiv(_ramp(x * 16), _bc(13)) * _bc(26), "ramp(x * 32 + y, 2, 16)"),
        # strides congruent modulo c
        (E.FloorDiv(_ramp(x, 4, 3), _bc(5, 4)) * _bc(5, 4) + E.FloorMod(_ramp(x, 4, 8), _bc(5, 4)),
         "ramp(x, 3, 4)"),
        # after an outer split of the base (the reshape (64, 56, 56) -> (64, 3136) index)
        (_bc(x // 196 * 3136) + E.FloorDiv(_ramp(x % 196 * 16), _bc(56)) * _bc(56)
         + E.FloorMod(_ramp(x * 16), _bc(56)), "ramp(x * 16, 1, 16)"),
        (E.Div(_ramp(x * 16), _bc(13)) * _bc(13) + E.Mod(_ramp(x * 16), _bc(13)),
         "ramp(x * 16, 1, 16)"),
    ],
)
def test_vector_div_mod_pairs_merge_to_a_ramp(expr, want):
    assert simp(expr) == want


def test_vector_div_mod_pairs_not_congruent_stay():
    for e in [
        E.FloorDiv(_ramp(x * 16), _bc(13)) * _bc(13) + E.FloorMod(_ramp(x * 4), _bc(13)),
        E.FloorDiv(_ramp(x, 4, 3), _bc(5, 4)) * _bc(5, 4) + E.FloorMod(_ramp(x, 4, 4), _bc(5, 4)),
        E.Div(_ramp(x + 13), _bc(13)) * _bc(13) + E.Mod(_ramp(x), _bc(13)),
    ]:
        assert "//" in str(simp(e)) or "truncdiv" in str(simp(e))


# ---- vectors -----------------------------------------------------------------------------------
def test_ramp_broadcast_rules():
    r = E.Ramp(x * 8, c32(1), 8)
    assert simp(r + E.Broadcast(c32(2), 8)) == "ramp(x * 8 + 2, 1, 8)"
    assert simp(r * E.Broadcast(c32(2), 8)) == "ramp(x * 16, 2, 8)"
    assert simp(E.FloorDiv(r, E.Broadcast(c32(8), 8))) == "broadcast(x, 8)"
    assert simp(E.FloorMod(r, E.Broadcast(c32(8), 8))) == "ramp(0, 1, 8)"
    assert simp(E.FloorDiv(E.Ramp(x * 8, c32(8), 4), E.Broadcast(c32(8), 4))) == "ramp(x, 1, 4)"
    assert simp(E.Ramp(x, c32(0), 4)) == "broadcast(x, 4)"
    e = E.FloorDiv(E.Ramp(x, c32(1), 8), E.Broadcast(c32(8), 8))  # crosses a block: kept
    assert simp(e) == str(e)
    e = E.FloorDiv(E.Ramp(x * 3, c32(1), 4), E.Broadcast(c32(3), 4))  # last lane is the next block
    assert simp(e) == str(e)
    assert simp(E.FloorDiv(E.Ramp(x * 4, c32(1), 4), E.Broadcast(c32(4), 4))) == "broadcast(x, 4)"


def test_vector_comparisons_decided_for_all_lanes():
    ana = arith.Analyzer()
    ana.bind(x, Range(0, 4))
    r = E.Ramp(x * 8, c32(1), 8)
    assert str(ana.simplify(r < E.Broadcast(c32(32), 8))) == "broadcast(True, 8)"
    assert str(ana.simplify(r >= E.Broadcast(c32(32), 8))) == "broadcast(False, 8)"
    e = r < E.Broadcast(c32(31), 8)  # the last lane of the last x differs
    assert str(ana.simplify(e)) == str(e)
    with ana.constraint_scope(x * 8 + 8 <= n):
        assert str(ana.simplify(tir.likely(r < E.Broadcast(n, 8)))) == "broadcast(True, 8)"


def test_symbolic_split_guards_and_extents():
    """What a non-divisible split of a fused symbolic loop produces."""
    ana = arith.Analyzer()
    o, t = Var("o"), Var("t")
    assert str(ana.simplify(tir.min(m * n // 8, (m * n + 7) // 8))) == "m * n // 8"
    assert str(ana.simplify(tir.max(x * 4, (x + 1) * 4))) == "x * 4 + 4"
    ana.bind(o, Range(0, m * n // 8))
    ana.bind(t, Range(0, 8))
    assert str(ana.simplify(tir.likely((o * 8 + t) // m < n))) == "True"
    assert str(ana.simplify((o * 8 + t) // m >= n)) == "False"
    e = (o * 8 + t) // m < n - 1  # not provable
    assert str(ana.simplify(e)) == str(e)


def test_round_trip_casts():
    w, f, b = Var("w", "int64"), Var("f", "float32"), Var("b", "int8")
    assert simp(E.Cast("int32", E.Cast("int64", x))) == "x"
    assert simp(E.Cast("int8", E.Cast("float32", b))) == "b"
    assert simp(E.Cast("float32", E.Cast("float64", f))) == "f"
    for e in [
        E.Cast("int64", E.Cast("int32", w)),
        E.Cast("int32", E.Cast("float32", x)),
        E.Cast("int32", E.Cast("int16", x)),
    ]:
        assert simp(e) == str(e)  # the inner cast loses information


def test_stable_operand_order():
    assert simp(tir.min(y, x)) == simp(tir.min(x, y)) == "min(x, y)"
    assert simp(tir.max(c32(3), x)) == "max(x, 3)"
    assert simp(E.EQ(c32(0), x)) == "x == 0"
    assert simp(E.NE(y, x)) == "x != y"
    assert simp(E.LT(c32(0), x)) == "x > 0"


def test_select_of_compared_operands_is_min_max():
    assert simp(tir.Select(x < y, x, y)) == "min(x, y)"
    assert simp(tir.Select(x <= y, y, x)) == "max(x, y)"
    assert simp(tir.Select(x > y, x, y)) == "max(x, y)"
    assert simp(tir.Select(x >= y, y, x)) == "min(x, y)"
    a, b = Var("a", "float32"), Var("b", "float32")
    e = tir.Select(a < b, a, b)  # NaN: not a min
    assert simp(e) == str(e)


def test_if_then_else_branches_use_their_condition():
    ana = arith.Analyzer()
    ana.bind(i, Range(0, 64))
    e = tir.if_then_else(E.LT(i, n), tir.min(i, n - 1), tir.max(i - n, 0))
    assert str(ana.simplify(e)) == "if_then_else(i < n, i, i - n)"
    # select evaluates both sides: its branches must not assume the condition
    e = tir.Select(E.LT(i, n), tir.min(i, n - 1), c32(0))
    assert str(ana.simplify(e)) == "select(i < n, min(n - 1, i), 0)"
