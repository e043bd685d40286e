"""inject_virtual_thread_func and inject_double_buffer_func: text and interpreter equivalence."""

from __future__ import annotations

import pytest
from tir_pass_helpers import assert_same, expect, func, loop

from tvmpy import tir
from tvmpy.tir import expr as E
from tvmpy.tir.transform import (
    inject_double_buffer_func,
    inject_virtual_thread_func,
    simplify_func,
    storage_flatten_func,
)


def _vthread(n):
    return E.IterVar(E.Range(0, n), E.Var("vt"), E.IterVar.ThreadIndex, "vthread")


def _vt_func(nvt, width=4):
    A = tir.decl_buffer((nvt * width,), "float32", "A")
    C = tir.decl_buffer((nvt * width,), "float32", "C")
    L = tir.decl_buffer((width,), "float32", "L", scope="local")
    vt = _vthread(nvt)
    i, i2 = E.Var("i"), E.Var("i")
    body = tir.AttrStmt(vt, "virtual_thread", nvt, tir.Allocate(L, tir.seq(
        loop(i, width, tir.BufferStore(L, A[vt.var * width + i] * 2.0, [i])),
        loop(i2, width, tir.BufferStore(C, L[i2] + 1.0, [vt.var * width + i2])))))
    return func([A, C], body)


def test_vthread_text_interleaved_with_local_dimension():
    f = _vt_func(2)
    g = simplify_func(inject_virtual_thread_func(storage_flatten_func(f)))
    expect(g, """
        L = allocate((8,), 'float32', 'local')
        for i in range(0, 4):
            L[i] = A[i] * 2.0f
            L[i + 4] = A[i + 4] * 2.0f
        for i_1 in range(0, 4):
            C[i_1] = L[i_1] + 1.0f
            C[i_1 + 4] = L[i_1 + 4] + 1.0f
    """)
    assert_same(f, g)


@pytest.mark.parametrize("nvt", [1, 3, 17])
def test_vthread_counts(nvt):
    f = _vt_func(nvt, 3)
    g = inject_virtual_thread_func(storage_flatten_func(f))
    assert "virtual_thread" not in str(g)
    assert_same(f, g)


def test_vthread_shared_statement_and_accumulation():
    # a statement independent of vt is kept once only when it is idempotent
    A = tir.decl_buffer((6,), "float32", "A")
    S0 = tir.decl_buffer((2,), "float32", "S")
    T = tir.decl_buffer((1,), "float32", "T")
    vt = _vthread(3)
    body = tir.AttrStmt(vt, "virtual_thread", 3, tir.seq(
        tir.BufferStore(T, A[1] * 5.0, [0]),                 # idempotent: kept once
        tir.BufferStore(S0, S0[0] + A[vt.var * 2], [0]),    # depends on vt
        tir.BufferStore(S0, S0[1] + 1.0, [1]),               # not idempotent: replicated
    ))
    f = func([A, S0, T], body)
    g = simplify_func(inject_virtual_thread_func(f))
    assert str(g).count("T[0] = A[1] * 5.0f") == 1
    assert str(g).count("S[1] = S[1] + 1.0f") == 3
    assert_same(f, g)


def test_vthread_symbolic_extent_rejected():
    n = E.Var("n")
    A = tir.decl_buffer((4,), "float32", "A")
    vt = _vthread(2)
    f = func([A, n], tir.AttrStmt(vt, "virtual_thread", n, tir.BufferStore(A, 1.0, [vt.var])))
    with pytest.raises(ValueError, match="constant extent"):
        inject_virtual_thread_func(f)


def _db_func(iters=5, width=8):
    A = tir.decl_buffer((iters, width), "float32", "A")
    C = tir.decl_buffer((iters, width), "float32", "C")
    S_ = tir.decl_buffer((width,), "float32", "S", scope="local")
    k, i, j = E.Var("k"), E.Var("i"), E.Var("j")
    body = loop(k, iters, tir.Allocate(S_, tir.seq(
        tir.AttrStmt(S_.data, "double_buffer_scope", 1,
                     loop(i, width, tir.BufferStore(S_, A[k, i], [i]))),
        loop(j, width, tir.BufferStore(C, S_[j] * 2.0 + C[k, j], [k, j])))))
    return func([A, C], body)


def test_double_buffer_text():
    f = _db_func()
    g = simplify_func(inject_double_buffer_func(storage_flatten_func(f)))
    expect(g, """
        S = allocate((16,), 'float32', 'local')
        with attr(S, 'double_buffer_write', 1):
            for i in range(0, 8):
                S[i] = A[i]
        for k in range(0, 5):
            if k + 1 < 5:
                with attr(S, 'double_buffer_write', 1):
                    for i_1 in range(0, 8):
                        S[(k + 1) % 2 * 8 + i_1] = A[k * 8 + i_1 + 8]
            for j in range(0, 8):
                C[k * 8 + j] = S[k % 2 * 8 + j] * 2.0f + C[k * 8 + j]
    """)
    assert_same(f, g)


@pytest.mark.parametrize("iters,width", [(1, 3), (2, 5), (7, 4)])
def test_double_buffer_shapes(iters, width):
    f = _db_func(iters, width)
    g = inject_double_buffer_func(storage_flatten_func(f))
    assert "double_buffer_scope" not in str(g)
    assert_same(f, g)


def test_double_buffer_refused_when_producer_reads_loop_written_data():
    # the producer reads C, which the consumer writes in the same loop: left single-buffered
    A = tir.decl_buffer((4, 4), "float32", "A")
    C = tir.decl_buffer((5, 4), "float32", "C")
    S_ = tir.decl_buffer((4,), "float32", "S", scope="local")
    k, i, j = E.Var("k"), E.Var("i"), E.Var("j")
    body = loop(k, 4, tir.Allocate(S_, tir.seq(
        tir.AttrStmt(S_.data, "double_buffer_scope", 1,
                     loop(i, 4, tir.BufferStore(S_, C[k, i] + A[k, i], [i]))),
        loop(j, 4, tir.BufferStore(C, S_[j], [k + 1, j])))))
    f = func([A, C], body)
    g = inject_double_buffer_func(storage_flatten_func(f))
    assert "double_buffer" not in str(g)
    assert "allocate((4,)" in str(g)
    assert_same(f, g)


def test_double_buffer_nonzero_loop_min_and_allocation_outside_loop():
    A = tir.decl_buffer((7, 4), "float32", "A")
    C = tir.decl_buffer((7, 4), "float32", "C")
    S_ = tir.decl_buffer((4,), "float32", "S", scope="local")
    k, i, j = E.Var("k"), E.Var("i"), E.Var("j")
    body = tir.Allocate(S_, loop(k, 5, tir.seq(
        tir.AttrStmt(S_.data, "double_buffer_scope", 1,
                     loop(i, 4, tir.BufferStore(S_, A[k, i] * 3.0, [i]))),
        loop(j, 4, tir.BufferStore(C, S_[j] + 1.0, [k, j]))), lo=2))
    f = func([A, C], body)
    g = inject_double_buffer_func(storage_flatten_func(f))
    assert "allocate((8,)" in str(g) and "double_buffer_write" in str(g)
    assert_same(f, g)
