"""loop_partition_func: guards leave the main loop; correct for prime, symbolic and padded ranges."""

from __future__ import annotations

import pytest
from tir_pass_helpers import assert_same, expect, func, loop

from tvmpy import tir
from tvmpy.tir import expr as E
from tvmpy.tir.transform import loop_partition_func, simplify_func, storage_flatten_func


def _split_copy(n, factor):
    """B[x] = A[x] * 2 over a split loop with a likely guard (non-divisible split)."""
    A = tir.decl_buffer((n,), "float32", "A")
    B = tir.decl_buffer((n,), "float32", "B")
    xo, xi = E.Var("xo"), E.Var("xi")
    nparts = (n + factor - 1) // factor
    idx = xo * factor + xi
    body = loop(xo, nparts, loop(xi, factor, tir.IfThenElse(
        tir.likely(idx < n), tir.BufferStore(B, A[idx] * 2.0, [idx]))))
    return func([A, B], body)


def _pipeline(f):
    return simplify_func(loop_partition_func(simplify_func(storage_flatten_func(f))))


def test_partition_text_constant():
    f = _split_copy(10, 4)
    g = _pipeline(f)
    expect(g, """
        for xo in range(0, 2):
            for xi in range(0, 4):
                B[xo * 4 + xi] = A[xo * 4 + xi] * 2.0f
        for xi_1 in range(0, 2):
            B[xi_1 + 8] = A[xi_1 + 8] * 2.0f
    """)
    assert "likely" not in str(g)
    assert_same(f, g)


@pytest.mark.parametrize("n,factor", [(7, 3), (13, 4), (31, 8), (5, 8), (1, 4), (16, 4)])
def test_partition_prime_extents(n, factor):
    f = _split_copy(n, factor)
    g = _pipeline(f)
    assert "likely" not in str(g)
    assert_same(f, g)


def test_partition_symbolic_extent():
    n = E.Var("n")
    A = tir.decl_buffer((n,), "float32", "A")
    B = tir.decl_buffer((n,), "float32", "B")
    xo, xi = E.Var("xo"), E.Var("xi")
    idx = xo * 8 + xi
    body = loop(xo, (n + 7) // 8, loop(xi, 8, tir.IfThenElse(
        tir.likely(idx < n), tir.BufferStore(B, A[idx] + 1.0, [idx]))))
    f = func([A, B], body)
    g = _pipeline(f)
    main = g.body.seq[0]
    assert isinstance(main, tir.For) and "likely" not in str(main)
    for size in (1, 7, 8, 9, 16, 23, 37):
        assert_same(f, g, {"n": size})


def test_partition_lower_bound_guard_padding():
    # out[i] = in[i - 2] when 2 <= i < 2 + 9, else 0  (padding on both sides)
    A = tir.decl_buffer((9,), "float32", "A")
    B = tir.decl_buffer((13,), "float32", "B")
    i = E.Var("i")
    cond = tir.likely(tir.all(i >= 2, i < 11))
    body = loop(i, 13, tir.BufferStore(B, tir.if_then_else(cond, A[i - 2], 0.0), [i]))
    f = func([A, B], body)
    g = _pipeline(f)
    expect(g, """
        for i in range(0, 2):
            B[i] = 0.0f
        for i_1 in range(0, 9):
            B[i_1 + 2] = A[i_1]
        for i_2 in range(0, 2):
            B[i_2 + 11] = 0.0f
    """)
    assert_same(f, g)


def test_partition_two_dimensional_guards():
    n, m = 11, 6
    A = tir.decl_buffer((n, m), "float32", "A")
    B = tir.decl_buffer((n, m), "float32", "B")
    yo, yi, xo, xi = (E.Var(s) for s in ("yo", "yi", "xo", "xi"))
    y, x = yo * 4 + yi, xo * 4 + xi
    body = loop(yo, 3, loop(xo, 2, loop(yi, 4, loop(xi, 4, tir.IfThenElse(
        tir.likely(tir.all(y < n, x < m)), tir.BufferStore(B, A[y, x] * 3.0, [y, x]))))))
    f = func([A, B], body)
    g = _pipeline(f)
    assert_same(f, g)
    # the fully inner part of the tile loop nest has no guard
    first = g.body.seq[0] if isinstance(g.body, tir.SeqStmt) else g.body
    assert "likely" not in str(first.body.seq[0] if isinstance(first.body, tir.SeqStmt)
                               else first.body)


def test_nonlinear_guard_left_alone():
    A = tir.decl_buffer((20,), "float32", "A")
    i = E.Var("i")
    body = loop(i, 20, tir.IfThenElse(tir.likely(i * i < 50), tir.BufferStore(A, 1.0, [i])))
    f = func([A], body)
    g = loop_partition_func(f)
    assert g is f
    assert_same(f, simplify_func(g))


def test_guard_reading_memory_not_partitioned():
    # the bound A[0] changes inside the loop: no fixed split point exists
    A = tir.decl_buffer((1,), "int32", "A")
    B = tir.decl_buffer((8,), "int32", "B")
    i = E.Var("i")
    body = loop(i, 8, tir.IfThenElse(tir.likely(i < A[0]), tir.seq(
        tir.BufferStore(B, i, [i]), tir.BufferStore(A, A[0] - 1, [0]))))
    f = func([A, B], body)
    assert loop_partition_func(f) is f


def _parallel_split_copy(n, factor):
    """_split_copy with the outer loop parallel."""
    f = _split_copy(n, factor)
    outer = f.body
    return f.with_body(outer.replace(kind=tir.ForKind.PARALLEL))


@pytest.mark.parametrize("n,factor", [(10, 4), (31, 8), (5, 8), (1, 4), (16, 4)])
def test_parallel_loop_keeps_its_tail_inside(n, factor):
    """A parallel loop is not split into loops (the tail would run after the parallel part,
    on one thread): its body branches into the main part and the guarded tail."""
    f = _parallel_split_copy(n, factor)
    g = _pipeline(f)
    assert_same(f, g)
    if n <= factor:
        return  # (one iteration: the loop is gone)
    top = g.body
    assert isinstance(top, tir.For) and top.kind == tir.ForKind.PARALLEL
    if n % factor:
        assert isinstance(top.body, tir.IfThenElse) and "likely" not in str(top.body.then_case)
    else:
        assert "likely" not in str(g)


@pytest.mark.parametrize("batch,n,factor", [(3, 10, 4), (2, 7, 8), (4, 16, 4), (3, 13, 5),
                                             (1, 9, 2)])
def test_parallel_fused_loop_branches_on_the_inner_axis(batch, n, factor):
    """``fuse(batch, xo)``: the guard ``(f % nparts) * factor + xi < n`` is linear in
    ``f % nparts``; the body branches on that term."""
    A = tir.decl_buffer((batch, n), "float32", "A")
    B = tir.decl_buffer((batch, n), "float32", "B")
    f_, xi = E.Var("f"), E.Var("xi")
    nparts = (n + factor - 1) // factor
    b, x = f_ // nparts, f_ % nparts * factor + xi
    body = loop(f_, batch * nparts, loop(xi, factor, tir.IfThenElse(
        tir.likely(x < n), tir.BufferStore(B, A[b, x] + 1.0, [b, x]))), kind=tir.ForKind.PARALLEL)
    f = func([A, B], body)
    g = _pipeline(f)
    assert_same(f, g)
    top = g.body
    assert isinstance(top, tir.For) and top.kind == tir.ForKind.PARALLEL
    if n % factor and n > factor:
        assert isinstance(top.body, tir.IfThenElse) and "likely" not in str(top.body.then_case)
        assert "%" in str(top.body.condition) or batch == 1  # (batch 1: f % nparts == f)


def _overhanging_copy(n, factor, nparts, lower=False):
    """A split loop over more chunks than ``n`` needs (a compute_at region wider than the
    stage): ``nparts * factor > n + factor``; ``lower``: the guard is ``idx >= k`` instead."""
    A = tir.decl_buffer((nparts * factor,), "float32", "A")
    B = tir.decl_buffer((nparts * factor,), "float32", "B")
    xo, xi = E.Var("xo"), E.Var("xi")
    idx = xo * factor + xi
    cond = idx >= nparts * factor - n if lower else idx < n
    body = loop(xo, nparts, loop(xi, factor, tir.IfThenElse(
        tir.likely(cond), tir.BufferStore(B, A[idx] * 2.0, [idx]))))
    return func([A, B], body)


@pytest.mark.parametrize("n,factor,nparts", [(37, 16, 4), (5, 8, 3), (17, 4, 9), (32, 16, 4)])
@pytest.mark.parametrize("lower", [False, True])
def test_partition_overhanging_chunks_are_dropped(n, factor, nparts, lower):
    """Chunks wholly outside the guard vanish: the one partly inside gets a constant extent
    (a vectorizable tail) instead of a loop over chunks with a symbolic inner extent."""
    f = _overhanging_copy(n, factor, nparts, lower)
    g = _pipeline(f)
    text = str(g)
    assert "likely" not in text and "max(" not in text and "min(" not in text, text
    assert_same(f, g)
