"""simplify_func: loop-range facts, likely guards, constant ifs, trivial loops and lets."""

from __future__ import annotations

from tir_pass_helpers import assert_same, expect, func, loop

from tvmpy import tir
from tvmpy.tir import expr as E
from tvmpy.tir.transform import simplify_func, storage_flatten_func


def test_redundant_likely_guard_removed():
    A = tir.decl_buffer((16,), "float32", "A")
    B = tir.decl_buffer((16,), "float32", "B")
    o, i = E.Var("o"), E.Var("i")
    body = loop(o, 4, loop(i, 4, tir.IfThenElse(
        tir.likely(o * 4 + i < 16), tir.BufferStore(B, A[o * 4 + i] + 1.0, [o * 4 + i]))))
    f = func([A, B], body)
    g = simplify_func(f)
    expect(g, """
        for o in range(0, 4):
            for i in range(0, 4):
                B[o * 4 + i] = A[o * 4 + i] + 1.0f
    """)
    assert_same(f, g)


def test_needed_guard_kept():
    A = tir.decl_buffer((15,), "float32", "A")
    B = tir.decl_buffer((15,), "float32", "B")
    o, i = E.Var("o"), E.Var("i")
    body = loop(o, 4, loop(i, 4, tir.IfThenElse(
        tir.likely(o * 4 + i < 15), tir.BufferStore(B, A[o * 4 + i] + 1.0, [o * 4 + i]))))
    f = func([A, B], body)
    g = simplify_func(f)
    assert "likely(o * 4 + i < 15)" in str(g)
    assert_same(f, g)


def test_trivial_loops_and_constant_ifs():
    A = tir.decl_buffer((8,), "float32", "A")
    i, j, k = E.Var("i"), E.Var("j"), E.Var("k")
    body = tir.seq(
        loop(i, 1, tir.BufferStore(A, A[i + 2] * 2.0, [i + 2])),
        loop(j, 0, tir.BufferStore(A, 0.0, [j])),
        tir.IfThenElse(E.const(1) > 2, tir.BufferStore(A, 5.0, [0]), tir.BufferStore(A, 7.0, [1])),
        loop(k, 3, tir.IfThenElse(k < 5, tir.BufferStore(A, A[k] + 1.0, [k]))),
    )
    f = func([A], body)
    g = simplify_func(f)
    expect(g, """
        A[2] = A[2] * 2.0f
        A[1] = 7.0f
        for k in range(0, 3):
            A[k] = A[k] + 1.0f
    """)
    assert_same(f, g)


def test_if_branch_facts_and_let():
    A = tir.decl_buffer((10,), "int32", "A")
    i, t = E.Var("i"), E.Var("t")
    inner = tir.IfThenElse(i < 5, tir.BufferStore(A, tir.min(i, 7), [i]),
                           tir.BufferStore(A, tir.max(i, 3), [i]))
    body = loop(i, 10, tir.LetStmt(t, E.const(4), tir.seq(inner, tir.BufferStore(
        A, A[i] + t, [i]))))
    f = func([A], body)
    g = simplify_func(f)
    expect(g, """
        for i in range(0, 10):
            if i < 5:
                A[i] = i
            else:
                A[i] = i
            A[i] = A[i] + 4
    """)
    assert_same(f, g)


def test_symbolic_extent_and_flattened_indices():
    n = E.Var("n")
    A = tir.decl_buffer((n, 4), "float32", "A")
    i, j = E.Var("i"), E.Var("j")
    f = func([A], loop(i, n, loop(j, 4, tir.BufferStore(A, A[i, j] + 1.0, [i, j]))))
    g = simplify_func(storage_flatten_func(f))
    expect(g, """
        for i in range(0, n):
            for j in range(0, 4):
                A[i * 4 + j] = A[i * 4 + j] + 1.0f
    """)
    assert_same(f, g, {"n": 5})


def test_let_of_a_load_is_not_moved_past_a_store():
    A = tir.decl_buffer((2,), "int32", "A")
    t = E.Var("t")
    body = tir.LetStmt(t, A[0], tir.seq(tir.BufferStore(A, 5, [0]),
                                        tir.BufferStore(A, t + 1, [1])))
    f = func([A], body)
    g = simplify_func(f)
    assert "t: int32 = A[0]" in str(g)
    assert_same(f, g)


def test_loop_range_facts_do_not_leak_past_the_loop():
    n = E.Var("n")
    A = tir.decl_buffer((n,), "float32", "A")
    i, j = E.Var("i"), E.Var("j")
    body = tir.seq(
        loop(i, n - 5, tir.BufferStore(A, 3.0, [i])),
        loop(j, tir.max(n - 9, 0), tir.BufferStore(A, 4.0, [j])),
        tir.IfThenElse(n > 5, tir.BufferStore(A, 1.0, [0]), tir.BufferStore(A, 2.0, [0])))
    f = func([A], body)
    g = simplify_func(f)
    assert "if n > 5" in str(g) or "if 5 < n" in str(g), str(g)
    for size in (1, 3, 6, 12):
        assert_same(f, g, {"n": size})
