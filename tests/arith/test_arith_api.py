"""Smoke tests of the public arith API (detailed rule tests live in the other files)."""

from tvmpy import arith, tir
from tvmpy.tir import Range, Var


def test_public_api_basics():
    a = arith.Analyzer()
    i, j, x, y = Var("i"), Var("j"), Var("x"), Var("y")
    n = tir.SizeVar("n")
    a.bind(j, Range(0, 8))
    a.bind(i, Range(0, 64))
    assert a.can_prove_equal(a.simplify((i * 8 + j) // 8), i)
    assert a.can_prove_equal(a.simplify((i * 8 + j) % 8), j)
    assert a.simplify((x // 4) * 4 + x % 4) is x
    assert a.can_prove(i * 16 + j < 1024)
    assert not a.can_prove(i * 16 + j < 1015)
    b = a.const_int_bound(i * 8 + j)
    assert (b.min_value, b.max_value) == (0, 511)
    m = a.modular_set(i * 8 + 4)
    assert (m.coeff, m.base) == (8, 4)
    s = a.int_set(x * 8 + y, {x: Range(0, 4), y: Range(0, 8)})
    assert (s.min_value.value, s.max_value.value) == (0, 31)
    assert not a.can_prove(x < n)
    with a.constraint_scope(x < n):
        assert a.can_prove(x < n)
        assert a.can_prove(x * 4 + 3 < n * 4)
    assert not a.can_prove(x < n)
    assert a.const_int_bound(n).min_value == 0
    coeffs = arith.detect_linear_equation(x * 4 + y * n + 3, [x, y])
    assert [str(c) for c in coeffs] == ["4", "n", "3"]


def test_module_level_helpers_stay_functions():
    arith.Analyzer()  # importing the engine must not shadow arith.simplify
    x = Var("x")
    assert str(arith.simplify(x * 2 - x)) == "x"
    assert arith.can_prove(x < x + 1)
