"""unroll_loop_func (explicit, pragmas), remove_no_op_func and lower_intrin_func."""

from __future__ import annotations

import numpy as np
import pytest
from tir_pass_helpers import assert_same, expect, func, loop

from tvmpy import tir
from tvmpy.tir import expr as E
from tvmpy.tir.stmt import ForKind
from tvmpy.tir.transform import (
    lower_intrin_func,
    remove_no_op_func,
    simplify_func,
    unroll_loop_func,
)
from tvmpy.tir.transform.lower_intrin import GENERIC_RULES

U = ForKind.UNROLLED


def _acc(outer_kind=ForKind.SERIAL, inner_kind=ForKind.SERIAL, n=4, m=3):
    A = tir.decl_buffer((n * m,), "float32", "A")
    B = tir.decl_buffer((n,), "float32", "B")
    i, j = E.Var("i"), E.Var("j")
    body = loop(i, n, loop(j, m, tir.BufferStore(B, B[i] + A[i * m + j], [i]), inner_kind),
                outer_kind)
    return func([A, B], body), i


def test_explicit_unroll_text():
    f, _ = _acc(inner_kind=U, n=2, m=3)
    g = simplify_func(unroll_loop_func(f))
    expect(g, """
        for i in range(0, 2):
            B[i] = B[i] + A[i * 3]
            B[i] = B[i] + A[i * 3 + 1]
            B[i] = B[i] + A[i * 3 + 2]
    """)
    assert_same(f, g)


def test_unroll_symbolic_stays_hint():
    n = E.Var("n")
    A = tir.decl_buffer((n,), "float32", "A")
    i = E.Var("i")
    f = func([A], loop(i, n, tir.BufferStore(A, A[i] * 2.0, [i]), U))
    g = unroll_loop_func(f)
    assert g.body.kind == U
    assert_same(f, g, {"n": 5})


@pytest.mark.parametrize("max_step,expect_loops", [(16, 0), (8, 1), (2, 2)])
def test_auto_unroll_max_step_pragma(max_step, expect_loops):
    f, i = _acc(n=4, m=3)
    f = f.with_body(tir.AttrStmt(i, "pragma_auto_unroll_max_step", max_step, f.body))
    g = unroll_loop_func(f)
    loops = []
    tir.post_order_visit(g.body, lambda s: loops.append(s) if isinstance(s, tir.For) else None)
    assert len(loops) == expect_loops
    assert "pragma_auto_unroll_max_step" not in str(g)
    assert_same(f, g)


def test_unroll_explicit_false_marks_loops():
    f, i = _acc(n=4, m=3)
    body = tir.AttrStmt(i, "pragma_auto_unroll_max_step", 64,
                        tir.AttrStmt(i, "pragma_unroll_explicit", 0, f.body))
    f = f.with_body(body)
    g = unroll_loop_func(f)
    assert isinstance(g.body, tir.For) and g.body.kind == U and g.body.body.kind == U
    assert_same(f, g)


def test_unrolled_copies_have_fresh_variables():
    A = tir.decl_buffer((6,), "float32", "A")
    i, j = E.Var("i"), E.Var("j")
    f = func([A], loop(i, 2, loop(j, 3, tir.BufferStore(A, A[i * 3 + j] + 1.0, [i * 3 + j])),
                       U))
    g = unroll_loop_func(f)
    a, b = g.body.seq
    assert a.loop_var is not b.loop_var
    assert_same(f, g)


def test_remove_no_op():
    A = tir.decl_buffer((4,), "float32", "A")
    i, j, t = E.Var("i"), E.Var("j"), E.Var("t")
    body = tir.seq(
        loop(i, 4, tir.Evaluate(0)),
        tir.BufferStore(A, A[1], [1]),
        tir.IfThenElse(t > 0, tir.Evaluate(0), tir.BufferStore(A, 2.0, [0])),
        tir.LetStmt(E.Var("v"), t + 1, tir.Evaluate(0)),
        loop(j, 4, tir.BufferStore(A, A[j] * 3.0, [j])),
    )
    f = func([A, t], body)
    g = remove_no_op_func(f)
    expect(g, """
        if not t > 0:
            A[0] = 2.0f
        for j in range(0, 4):
            A[j] = A[j] * 3.0f
    """)
    assert_same(f, g, {"t": -2})


def test_lower_intrin_default_is_identity_and_generic_rules_are_exact():
    A = tir.decl_buffer((8,), "float32", "A")
    B = tir.decl_buffer((8,), "float32", "B")
    i = E.Var("i")
    val = tir.sigmoid(A[i]) + tir.rsqrt(A[i]) + tir.exp10(A[i] * 0.1)
    f = func([A, B], loop(i, 8, tir.BufferStore(B, val, [i])))
    assert lower_intrin_func(f, tir_target()) is f
    g = lower_intrin_func(f, rules=GENERIC_RULES)
    s = str(g)
    assert "sigmoid" not in s and "rsqrt" not in s and "exp10" not in s
    got = assert_same(f, g, rtol=1e-5)
    assert np.isfinite(got[1]).all()


def tir_target():
    from tvmpy.target import Target

    return Target("llvm")


def test_remove_no_op_keeps_asserts_and_extern_lets():
    A = tir.decl_buffer((4,), "float32", "A")
    n, v = E.Var("n"), E.Var("v")
    body = tir.seq(
        tir.AssertStmt(n > 0, "n must be positive", tir.Evaluate(0)),
        tir.LetStmt(v, tir.call_extern("int32", "side_effect"), tir.Evaluate(0)),
        tir.BufferStore(A, 1.0, [0]))
    g = remove_no_op_func(func([A, n], body))
    s = str(g)
    assert "assert n > 0" in s and "side_effect" in s


def test_unrolled_copies_keep_only_the_select_branch_they_take():
    """Each copy of an unrolled loop substitutes a constant index, so ``select(j == k, ...)``
    chains (the Winograd transforms pick matrix rows so) keep one branch, before Simplify."""
    A = tir.decl_buffer((5,), "float32", "A")
    B = tir.decl_buffer((5,), "float32", "B")
    i, j = E.Var("i"), E.Var("j")
    pick = E.Select(j == 0, A[0] * 2.0,
                    E.Select(E.And(j >= 1, j < 3), A[j] + 1.0,
                             E.Select(E.Not(j == 4), A[j] - A[0], A[4] * A[j])))
    body = loop(i, 1, loop(j, 5, tir.BufferStore(B, pick + B[j], [j]), U))
    f = func([A, B], body)
    g = unroll_loop_func(f)
    selects = []
    tir.functor.post_order_visit(g.body, lambda n: selects.append(n)
                                 if isinstance(n, E.Select) else None)
    assert not selects
    assert_same(f, g)


def test_unrolled_copies_keep_only_the_branch_of_a_broadcast_condition():
    """After VectorizeLoop the Winograd transforms' row picks are vector selects whose
    condition broadcasts ``j == k``: each unrolled copy keeps only the branch it takes (the
    copies used to carry every branch: 455 KB of loop IR for one ResNet-18 kernel, 115 KB
    now), whatever the condition's lanes."""
    lanes = 4
    A = tir.decl_buffer((5 * lanes,), "float32", "A")
    B = tir.decl_buffer((5 * lanes,), "float32", "B")
    j = E.Var("j")
    vec = lambda base: E.Ramp(base, 1, lanes)  # noqa: E731
    row = lambda k: A[vec(E.const(k * lanes))]  # noqa: E731
    pick = E.Select(E.Broadcast(j == 0, lanes), row(0) * E.Broadcast(2.0, lanes),
                    E.Select(E.Broadcast(E.And(j >= 1, j < 3), lanes), A[vec(j * lanes)],
                             E.Select(E.Broadcast(E.Not(j == 4), lanes), row(3) - row(1),
                                      row(4) * row(2))))
    body = loop(j, 5, tir.BufferStore(B, pick, [vec(j * lanes)]), U)
    f = func([A, B], body)
    g = unroll_loop_func(f)
    selects = []
    tir.functor.post_order_visit(g.body, lambda n: selects.append(n)
                                 if isinstance(n, E.Select) else None)
    assert not selects
    assert_same(f, g)
