"""The simplifier's process-wide memo (tvmpy.arith.simplify_memo): results are remembered under
the expression's structure with variables by name plus what the analyzer knows, so the index
arithmetic a kernel repeats in every stage (one loop nest per stage, loop variables of one name)
is simplified once. A hit must give exactly what the simplifier computes afresh, over the asking
expression's own variables; different facts, or two variables sharing a name, must not collide."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_arith_property import RANGES, VARS, bool_exprs, int_exprs

from tvmpy import arith, tir
from tvmpy.arith import divmod_rules, simplify_memo
from tvmpy.arith.sum_form import clear_caches
from tvmpy.ir.node import structural_equal
from tvmpy.tir import expr as E
from tvmpy.tir.functor import collect_vars, substitute


def _analyzer(ranges: dict) -> arith.Analyzer:
    ana = arith.Analyzer()
    for v, (lo, hi) in ranges.items():
        ana.bind(v, tir.Range(lo, hi - lo + 1))
    return ana


def _renamed(vs: list) -> dict:
    """Fresh variables of the same names and kinds."""
    return {v: type(v)(v.name, v.dtype) for v in vs}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(int_exprs(), bool_exprs()), st.booleans())
def test_a_hit_equals_a_fresh_simplification_over_the_asking_variables(e, constrained):
    """Simplify ``e``, then the same expression over fresh variables of the same names: the
    second (a memo hit) equals the memo-free result and names only the fresh variables."""
    clear_caches()
    cond = E.LT(VARS[0], VARS[1]) if constrained else E.const(True)
    ren = _renamed(VARS)
    e2, cond2 = substitute(e, ren), substitute(cond, ren)
    with simplify_memo.disabled():
        ana = _analyzer({ren[v]: r for v, r in RANGES.items()})
        with ana.constraint_scope(cond2):
            want = ana.simplify(e2)
    ana1 = _analyzer(RANGES)
    with ana1.constraint_scope(cond):
        ana1.simplify(e)
    ana2 = _analyzer({ren[v]: r for v, r in RANGES.items()})
    with ana2.constraint_scope(cond2):
        got = ana2.simplify(e2)
    assert structural_equal(got, want, map_free_vars=False), (e, got, want)
    assert not any(v in RANGES for v in collect_vars(got))


def test_same_names_with_other_ranges_or_facts_do_not_collide():
    i1, i2 = tir.Var("i"), tir.Var("i")
    a1 = _analyzer({i1: (0, 23)})
    assert structural_equal(a1.simplify(tir.floormod(i1, 24)), i1, map_free_vars=False)
    a2 = _analyzer({i2: (0, 47)})  # the same name, a wider range: the modulo stays
    out = a2.simplify(tir.floormod(i2, 24))
    assert isinstance(out, E.FloorMod) and out.a is i2
    with a2.constraint_scope(i2 < 24):  # a fact makes it go
        assert a2.simplify(tir.floormod(i2, 24)) is i2
    out = a2.simplify(tir.floormod(i2, 24))  # and outside the scope it stays
    assert isinstance(out, E.FloorMod)


def test_two_variables_sharing_a_name_are_not_merged():
    x1, x2 = tir.Var("x"), tir.Var("x")
    ana = _analyzer({x1: (0, 9), x2: (0, 9)})
    out = ana.simplify(x1 + x2 - x1 + 1)
    assert structural_equal(out, x2 + 1, map_free_vars=False)
    out = ana.simplify((x1 * 3 + x2) - (x2 * 3 + x1))  # 2*x1 - 2*x2, not 0
    assert set(map(id, collect_vars(out))) == {id(x1), id(x2)}


def test_bound_values_are_part_of_the_key():
    i, j1, j2 = tir.Var("i"), tir.Var("j"), tir.Var("j")
    a1 = _analyzer({i: (0, 7)})
    a1.bind(j1, i + 1)
    a2 = _analyzer({i: (0, 7)})
    a2.bind(j2, i * 2)
    assert structural_equal(a1.simplify(j1 * 2), i * 2 + 2, map_free_vars=False)
    assert structural_equal(a2.simplify(j2 * 2), i * 4, map_free_vars=False)


def test_a_repeated_stage_index_is_simplified_once(monkeypatch):
    """The index arithmetic of a second loop nest over a loop variable of the same name and
    range is not recomputed (the rules behind floordiv run for the first nest only)."""
    clear_caches()
    calls = [0]
    orig = divmod_rules.DivModRules._divmod

    def counted(self, *a, **k):
        calls[0] += 1
        return orig(self, *a, **k)

    monkeypatch.setattr(divmod_rules.DivModRules, "_divmod", counted)

    def index(i):
        return tir.floormod(i, 6) // 3 * 60 + i // 6 * 15 + tir.floormod(i, 3) * 5

    i1 = tir.Var("i0.i1.fused")
    first = _analyzer({i1: (0, 23)}).simplify(index(i1))
    n1 = calls[0]
    assert n1 > 0
    i2 = tir.Var("i0.i1.fused")
    second = _analyzer({i2: (0, 23)}).simplify(index(i2))
    assert calls[0] == n1
    assert structural_equal(second, substitute(first, {i1: i2}), map_free_vars=False)
    assert collect_vars(second) == [i2]
    with simplify_memo.disabled():
        i3 = tir.Var("i0.i1.fused")
        _analyzer({i3: (0, 23)}).simplify(index(i3))
    assert calls[0] > n1
