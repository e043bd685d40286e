"""storage_flatten_func: before/after text and interpreter equivalence."""

from __future__ import annotations

import pytest
from tir_pass_helpers import assert_same, expect, func, loop

from tvmpy import tir
from tvmpy.tir import expr as E
from tvmpy.tir.transform import storage_flatten_func


def _copy2d(shape, strides=()):
    A = tir.decl_buffer(shape, "float32", "A")
    B = tir.decl_buffer(shape, "float32", "B", strides=strides)
    i, j = E.Var("i"), E.Var("j")
    body = loop(i, shape[0], loop(j, shape[1], tir.BufferStore(B, A[i, j] + 1.0, [i, j])))
    return func([A, B], body), A, B


def test_flatten_row_major_text():
    f, A, B = _copy2d((3, 5))
    g = storage_flatten_func(f)
    expect(g, """
        for i in range(0, 3):
            for j in range(0, 5):
                B[i * 5 + j] = A[i * 5 + j] + 1.0f
    """)
    # the ABI still sees the multi-dimensional shapes, and the flat buffers share the data var
    assert [s.value for s in g.buffer_map[A.data].shape] == [3, 5]
    store = g.body.body.body
    assert store.buffer.data is B.data and len(store.buffer.shape) == 1
    assert store.buffer.shape[0].value == 15
    assert_same(f, g)


def test_flatten_strided_buffer():
    # storage_align-like padding: row stride 8 for a 3x5 buffer
    A = tir.decl_buffer((3, 5), "float32", "A")
    B = tir.decl_buffer((3, 5), "float32", "B")
    T = tir.decl_buffer((3, 5), "float32", "T", strides=(8, 1), scope="local")
    i, j, i2, j2 = E.Var("i"), E.Var("j"), E.Var("i"), E.Var("j")
    body = tir.Allocate(T, tir.seq(
        loop(i, 3, loop(j, 5, tir.BufferStore(T, A[i, j] * 2.0, [i, j]))),
        loop(i2, 3, loop(j2, 5, tir.BufferStore(B, T[i2, j2] + 1.0, [i2, j2])))))
    f = func([A, B], body)
    g = storage_flatten_func(f)
    expect(g, """
        T = allocate((21,), 'float32', 'local')
        for i in range(0, 3):
            for j in range(0, 5):
                T[i * 8 + j] = A[i * 5 + j] * 2.0f
        for i_1 in range(0, 3):
            for j_1 in range(0, 5):
                B[i_1 * 5 + j_1] = T[i_1 * 8 + j_1] + 1.0f
    """)
    assert_same(f, g)


def test_flatten_symbolic_shape():
    n, m = E.Var("n"), E.Var("m")
    A = tir.decl_buffer((n, m), "float32", "A")
    B = tir.decl_buffer((n, m), "float32", "B")
    i, j = E.Var("i"), E.Var("j")
    f = func([A, B], loop(i, n, loop(j, m, tir.BufferStore(B, A[i, j] * 3.0, [i, j]))))
    g = storage_flatten_func(f)
    expect(g, """
        for i in range(0, n):
            for j in range(0, m):
                B[i * m + j] = A[i * m + j] * 3.0f
    """)
    assert_same(f, g, {"n": 7, "m": 3})


def test_flatten_3d_and_scalar_buffer():
    A = tir.decl_buffer((2, 3, 4), "float32", "A")
    S0 = tir.decl_buffer((), "float32", "S")
    i, j, k = E.Var("i"), E.Var("j"), E.Var("k")
    body = loop(i, 2, loop(j, 3, loop(k, 4, tir.BufferStore(
        S0, S0[()] + A[i, j, k], []))))
    f = func([A, S0], body)
    g = storage_flatten_func(f)
    expect(g, """
        for i in range(0, 2):
            for j in range(0, 3):
                for k in range(0, 4):
                    S[0] = S[0] + A[i * 12 + j * 4 + k]
    """)
    assert_same(f, g)


def test_flatten_elem_offset():
    data = E.Var("A", "handle")
    A = tir.Buffer(data, "float32", (4, 4), (), 0, "A")
    view = tir.Buffer(data, "float32", (2, 2), (4, 1), 5, "A")  # the 2x2 block at (1, 1)
    i, j = E.Var("i"), E.Var("j")
    f = func([A], loop(i, 2, loop(j, 2, tir.BufferStore(view, view[i, j] * 2.0, [i, j]))))
    g = storage_flatten_func(f)
    expect(g, """
        for i in range(0, 2):
            for j in range(0, 2):
                A[5 + i * 4 + j] = A[5 + i * 4 + j] * 2.0f
    """)
    assert_same(f, g)


def test_flatten_wrong_arity_raises():
    A = tir.decl_buffer((3, 5), "float32", "A")
    i = E.Var("i")
    f = func([A], loop(i, 3, tir.BufferStore(A, 1.0, [i])))
    with pytest.raises(IndexError, match="2 dimensions"):
        storage_flatten_func(f)


def test_storage_flatten_pass_takes_tvms_arguments():
    """``StorageFlatten(64)`` (TVM's cache_line_size argument) flattens as ``StorageFlatten()``;
    bad arguments and create_bound_attribute=True are clear errors."""
    import tvmpy as tvm
    from tvmpy.ir import structural_equal

    f, _, _ = _copy2d((3, 7))
    mod = tvm.IRModule({"main": f})
    a = tir.transform.StorageFlatten(64)(mod)["main"]
    b = tir.transform.StorageFlatten()(mod)["main"]
    assert structural_equal(a.body, b.body)
    assert_same(f, a)
    with pytest.raises(TypeError, match="cache_line_size"):
        tir.transform.StorageFlatten("64")
    with pytest.raises(ValueError, match="create_bound_attribute"):
        tir.transform.StorageFlatten(64, create_bound_attribute=True)
