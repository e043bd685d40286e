"""Unit tests of the analyses: constant bounds, modular sets, interval sets, linear detection,
variable bindings and constraint scopes."""

from __future__ import annotations

import pytest

from tvmpy import arith, tir
from tvmpy.arith import ConstIntBound, IntervalSet
from tvmpy.tir import Range, SizeVar, Var, const
from tvmpy.tir import expr as E

x, y, z = Var("x"), Var("y"), Var("z")
i, j = Var("i"), Var("j")
n, m = SizeVar("n"), SizeVar("m")


def bound(e, **ranges) -> tuple[int, int]:
    ana = arith.Analyzer()
    for name, (lo, hi) in ranges.items():
        ana.bind(globals()[name], Range(lo, hi))
    b = ana.const_int_bound(e)
    return b.min_value, b.max_value


# ---- const_int_bound ---------------------------------------------------------------------------
def test_const_int_bound_rules():
    r = {"x": (-4, 5), "y": (0, 8)}  # x in [-4, 4], y in [0, 7]
    assert bound(x + y, **r) == (-4, 11)
    assert bound(x - y, **r) == (-11, 4)
    assert bound(x * y, **r) == (-28, 28)
    assert bound(x // 2, **r) == (-2, 2)
    assert bound(tir.truncdiv(x, 3), **r) == (-1, 1)
    assert bound(x % 3, **r) == (0, 2)
    assert bound(y % 16, **r) == (0, 7)
    assert bound(tir.truncmod(x, 3), **r) == (-2, 2)
    assert bound(tir.min(x, y), **r) == (-4, 4)
    assert bound(tir.max(x, y), **r) == (0, 7)
    assert bound(tir.Select(x < 0, y, x), **r) == (-4, 7)
    assert bound(x < y, **r) == (0, 1)
    assert bound(E.Cast("int8", y * 100), **r) == (-128, 127)  # may wrap: the type's range
    assert bound(E.Cast("int64", y), **r) == (0, 7)
    assert bound(E.Ramp(y, const(2), 4), **r) == (0, 13)


def test_const_int_bound_unbounded_and_sizevar():
    ana = arith.Analyzer()
    b = ana.const_int_bound(x)
    assert (b.min_value, b.max_value) == (-(2**31), 2**31 - 1)  # int32 range
    b = ana.const_int_bound(E.Var("w", "int64"))
    assert (b.min_value, b.max_value) == (ConstIntBound.NEG_INF, ConstIntBound.POS_INF)
    b = ana.const_int_bound(E.SizeVar("s", "int64"))
    assert (b.min_value, b.max_value) == (0, ConstIntBound.POS_INF)
    assert ana.const_int_bound(n * 4 + 1).min_value == 1
    with pytest.raises(TypeError, match="integer"):
        ana.const_int_bound(Var("f", "float32"))


def test_const_int_bound_symbolic_range_and_binding():
    ana = arith.Analyzer()
    ana.bind(n, Range(1, 65))
    ana.bind(x, Range(0, n))  # x < n <= 64
    assert ana.const_int_bound(x).max_value == 63
    ana.bind(y, x * 2 + 1)  # bound to an expression
    b = ana.const_int_bound(y)
    assert (b.min_value, b.max_value) == (1, 127)
    assert str(ana.simplify(y - x)) == "x + 1"


# ---- modular_set -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "expr, want",
    [
        (x * 8 + 4, (8, 4)),
        (x * 8 + y * 12, (4, 0)),
        (x * 6 - 9, (6, 3)),
        ((x * 8 + 4) // 4, (2, 1)),
        ((x * 8 + 5) % 4, (0, 1)),
        ((x * 6 + 1) % 4, (2, 1)),
        (tir.min(x * 4, y * 8 + 4), (4, 0)),
        (tir.Select(x < 0, x * 4 + 1, x * 2 + 3), (2, 1)),
        (const(7), (0, 7)),
        (x // 3, (1, 0)),
    ],
)
def test_modular_set(expr, want):
    ms = arith.Analyzer().modular_set(expr)
    assert (ms.coeff, ms.base) == want


def test_modular_set_from_binding_and_constraint():
    ana = arith.Analyzer()
    ana.bind(y, x * 16)
    assert (ana.modular_set(y + 4).coeff, ana.modular_set(y + 4).base) == (16, 4)
    with ana.constraint_scope(z % 8 == 0):
        ms = ana.modular_set(z * 2 + 3)
        assert (ms.coeff, ms.base) == (16, 3)
        assert ana.can_prove(z % 4 == 0)
    assert not ana.can_prove(z % 4 == 0)


# ---- IntervalSet / eval_set --------------------------------------------------------------------
def ends(s: IntervalSet) -> tuple[str, str]:
    return str(s.min_value), str(s.max_value)


def test_eval_set_affine_and_divmod():
    dom = {x: Range(0, 4), y: Range(0, 8)}
    assert ends(arith.eval_set(x * 8 + y, dom)) == ("0", "31")
    assert ends(arith.eval_set(x * -2 + 1, dom)) == ("-5", "1")
    assert ends(arith.eval_set((x * 8 + y) // 4, dom)) == ("0", "7")
    assert ends(arith.eval_set(y % 4, dom)) == ("0", "3")
    assert ends(arith.eval_set(tir.min(x, y - 2), dom)) == ("-2", "3")
    assert ends(arith.eval_set(x * y, dom)) == ("0", "21")


def test_eval_set_symbolic():
    dom = {i: Range(0, n)}
    s = arith.eval_set(i * 4 + j, dom)
    assert ends(s) == ("j", "n * 4 + j - 4")
    assert ends(arith.eval_set(z, dom)) == ("z", "z")  # not in the domain: a point
    assert arith.eval_set(z, dom).is_single_point()
    r = arith.eval_set(i * 4 + 3, dom).to_range()
    assert (str(r.min), str(r.extent)) == ("3", "n * 4 - 3")
    s = arith.eval_set(i * j, dom)  # sign of j unknown
    assert s.is_everything()
    with pytest.raises(ValueError, match="unbounded"):
        s.to_range()


def test_interval_set_algebra():
    a = IntervalSet(const(0), const(10))
    b = IntervalSet(const(5), const(20))
    assert ends(a.union(b)) == ("0", "20")
    assert ends(a.intersect(b)) == ("5", "10")
    assert IntervalSet.everything().is_everything()
    assert IntervalSet.empty().is_empty()
    assert ends(IntervalSet.empty().union(a)) == ("0", "10")
    assert ends(IntervalSet.from_range(Range(2, 6))) == ("2", "5")
    assert not IntervalSet(const(0), arith.pos_inf).has_upper_bound()
    ana = arith.Analyzer()
    ana.bind(x, Range(0, 10))
    s = ana.int_set(x + 1, {x: IntervalSet(const(0), const(3))})
    assert ends(s) == ("1", "4")
    with pytest.raises(TypeError, match="Range or IntervalSet"):
        arith.eval_set(x, {x: "oops"})


# ---- detect_linear_equation --------------------------------------------------------------------
def strs(xs):
    return None if xs is None else [str(v) for v in xs]


def test_detect_linear_equation():
    assert strs(arith.detect_linear_equation(x * 4 + y * n + 3, [x, y])) == ["4", "n", "3"]
    assert strs(arith.detect_linear_equation((x + 2) * 8 - z, [x])) == ["8", "16 - z"]
    assert strs(arith.detect_linear_equation(z * 3, [x])) == ["0", "z * 3"]
    assert arith.detect_linear_equation(x // 2, [x]) is None
    assert arith.detect_linear_equation(x * x, [x]) is None
    assert arith.detect_linear_equation(x * y, [x, y]) is None
    assert arith.detect_linear_equation(Var("f", "float32"), [x]) is None


# ---- bindings and constraint scopes ------------------------------------------------------------
def test_constraint_scope_and_nesting():
    ana = arith.Analyzer()
    ana.bind(i, Range(0, 100))
    with ana.constraint_scope(i < n):
        assert ana.can_prove(i < n)
        assert ana.can_prove(i * 4 + 3 < n * 4)
        assert not ana.can_prove(i * 4 + 4 < n * 4)
        with ana.constraint_scope(tir.all(x >= 2, x < 4)):
            assert str(ana.simplify(x // 2)) == "1"
            assert ana.can_prove(i < n)
        assert str(ana.simplify(x // 2)) == "x // 2"
        assert ana.can_prove(tir.likely(i < n + 1))
    assert not ana.can_prove(i < n)
    with ana.constraint_scope(E.Not(i >= 10)):
        assert str(ana.simplify(tir.min(i, 9))) == "i"
    with ana.constraint_scope(i == 5):
        assert str(ana.simplify(i * 2)) == "10"


def test_rebinding_replaces_old_facts():
    ana = arith.Analyzer()
    ana.bind(i, Range(0, n))
    assert ana.can_prove(i < n)
    ana.bind(i, Range(0, m))
    assert not ana.can_prove(i < n)
    assert ana.can_prove(i < m)


def test_can_prove_is_conservative_and_checks_types():
    ana = arith.Analyzer()
    assert not ana.can_prove(x < y)
    assert not ana.can_prove(E.Not(x < y))
    assert ana.can_prove(n >= 0)
    assert ana.can_prove_equal(x * 2 + x, x * 3)
    assert not ana.can_prove_equal(x * 2, x * 3)
    with pytest.raises(TypeError, match="boolean"):
        ana.can_prove(x + 1)
    with pytest.raises(TypeError, match="Var"):
        ana.bind(x + 1, 3)


def test_empty_range_binding_says_nothing():
    ana = arith.Analyzer()
    ana.bind(x, Range(0, 0))
    assert not ana.can_prove(x < 0)


def test_let_expressions():
    ana = arith.Analyzer()
    ana.bind(x, Range(0, 10))
    v = Var("v")
    e = E.Let(v, x * 4, v + 1)
    b = ana.const_int_bound(e)
    assert (b.min_value, b.max_value) == (1, 37)
    ms = ana.modular_set(e)
    assert (ms.coeff, ms.base) == (4, 1)
    assert ana.const_int_bound(v).max_value == 2**31 - 1  # the let binding does not leak
    assert str(ana.simplify(E.Let(v, x, v * 2 - x))) == "x"  # a var value is substituted
    assert str(ana.simplify(E.Let(v, x * 4, v // 4))) == "(let v = x * 4 in v // 4)"


def test_fused_symbolic_guard_needs_scaled_fact():
    ana = arith.Analyzer()
    ana.bind(i, Range(0, n))
    ana.bind(j, Range(0, m))
    assert ana.can_prove(i * m + j < n * m)
    assert not ana.can_prove(i * m + j < n * m - 1)
    assert not ana.can_prove(i * x + j < n * x)  # x may be negative
    ana.bind(x, Range(-5, 0))  # x < 0: (i + 1) * x <= n * x is false
    assert not ana.can_prove(i * x + x <= n * x)


def test_nested_division_guard_of_a_fused_symbolic_loop():
    """``fused // n // 4 < 1`` over ``fused in [0, 4n)`` (a fused (1, 4, n) loop's outer index):
    the division rule applies to the inner division too; not when the bound does not hold."""
    ana = arith.Analyzer()
    ana.bind(i, Range(0, n * 4))
    assert ana.can_prove(i // n // 4 < 1)
    assert ana.can_prove(i // n // 2 <= 1)
    assert not ana.can_prove(i // n // 2 < 1)
    ana.bind(j, Range(0, n * 5))
    assert not ana.can_prove(j // n // 4 < 1)
    assert not ana.can_prove(i // x // 4 < 1)  # x may be negative or zero


def test_update_with_known_facts():
    ana = arith.Analyzer()
    ana.update(x, ConstIntBound(0, 15))
    assert str(ana.simplify(x // 16)) == "0"
    ana.update(y, arith.ModularSet(8, 0))
    assert ana.can_prove(y % 4 == 0)
    with pytest.raises(TypeError, match="ConstIntBound or ModularSet"):
        ana.update(x, (0, 1))


def test_bind_keeps_the_variable_dtype():
    ana = arith.Analyzer()
    ana.bind(x, const(5, "int64"))  # integers are cast to the variable's dtype
    assert str(ana.simplify(x + 1)) == "6"
    w = Var("w", "int64")
    ana.bind(w, Range(0, n))  # an int32 range for an int64 variable
    assert ana.can_prove(w < E.Cast("int64", n))
    with pytest.raises(TypeError, match="dtype float32"):
        ana.bind(y, const(1.5))
    with pytest.raises(TypeError, match="PrimExpr or Range"):
        ana.bind(y, "abc")


def test_bounds_follow_rebinding_of_dependencies():
    ana = arith.Analyzer()
    ana.bind(n, Range(1, 65))
    ana.bind(x, Range(0, n))
    ana.bind(y, x * 2)
    assert ana.const_int_bound(y).max_value == 126
    ana.bind(n, Range(1, 9))  # x and y depend on n: their bounds follow
    assert ana.const_int_bound(x).max_value == 7
    assert ana.const_int_bound(y).max_value == 14
    ana.bind(z, Range(0, z + 1))  # self-referential: no infinite recursion
    assert ana.const_int_bound(z).min_value == 0
