"""Data-flow primitives (cache_read, cache_write, rfactor) and full operators (matmul, conv2d,
softmax) scheduled the way hand-tuned TVM schedules are, against numpy."""

from __future__ import annotations

import numpy as np
import pytest
from te_check import check, lower_text

from tvmpy import te, tir


def _matmul(n, m, l, dtype="float32"):
    A = te.placeholder((n, l), name="A", dtype=dtype)
    B = te.placeholder((l, m), name="B", dtype=dtype)
    k = te.reduce_axis((0, l), name="k")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return A, B, C


def test_cache_read_local_at_consumer():
    A = te.placeholder((10, 6), name="A")
    B = te.compute((10, 6), lambda i, j: A[i, j] * 2.0, name="B")
    s = te.create_schedule(B.op)
    AL = s.cache_read(A, "local", [B])
    assert s[AL].scope == "local"
    xo, xi = s[B].split(B.op.axis[0], factor=3)
    s[AL].compute_at(s[B], xo)
    txt = lower_text(s, [A, B])
    assert "'local'" in txt
    check(s, [A, B], lambda a: a * 2)


def test_cache_read_intermediate_two_readers_one_cached():
    A = te.placeholder((8,), name="A")
    B = te.compute((8,), lambda i: A[i] + 1.0, name="B")
    C = te.compute((8,), lambda i: B[i] * 2.0, name="C")
    D = te.compute((8,), lambda i: B[i] + C[i], name="D")
    s = te.create_schedule(D.op)
    BL = s.cache_read(B, "local", [C])
    s[BL].compute_at(s[C], C.op.axis[0])
    check(s, [A, D], lambda a: (a + 1) + (a + 1) * 2)


def test_cache_write_elementwise():
    A = te.placeholder((7, 9), name="A")
    B = te.compute((7, 9), lambda i, j: A[i, j] - 0.5, name="B")
    s = te.create_schedule(B.op)
    BL = s.cache_write(B, "local")
    xo, xi = s[B].split(B.op.axis[1], factor=4)
    s[BL].compute_at(s[B], xo)
    check(s, [A, B], lambda a: a - 0.5)


@pytest.mark.parametrize("n,m,l,bn", [(32, 32, 32, 8), (17, 13, 11, 4), (1, 5, 3, 2), (9, 1, 7, 4)])
def test_matmul_tiled_cache_write(n, m, l, bn):
    A, B, C = _matmul(n, m, l)
    s = te.create_schedule(C.op)
    CC = s.cache_write(C, "local")
    xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], bn, bn)
    s[CC].compute_at(s[C], yo)
    xc, yc = s[CC].op.axis
    (k,) = s[CC].op.reduce_axis
    ko, ki = s[CC].split(k, factor=4)
    s[CC].reorder(ko, xc, ki, yc)
    s[CC].unroll(ki)
    s[CC].vectorize(yc)
    s[C].parallel(xo)
    txt = lower_text(s, [A, B, C])
    assert f"C.local = allocate(({bn}, {bn}), 'float32', 'local')" in txt
    check(s, [A, B, C], lambda a, b: a @ b, rtol=1e-4)


def test_matmul_packed_b_cache_read_and_rfactor_free_symbolic():
    n = te.var("n")
    A, B, C = _matmul(n, 8, 6)
    s = te.create_schedule(C.op)
    BB = s.cache_read(B, "global", [C])
    xo, xi = s[C].split(C.op.axis[0], factor=4)
    s[BB].compute_at(s[C], xo)
    for nv in (1, 7, 8):
        check(s, [A, B, C], lambda a, b: a @ b, sizes={n: nv})


def test_rfactor_sum_split_inner():
    A = te.placeholder((5, 30), name="A")
    k = te.reduce_axis((0, 30), name="k")
    B = te.compute((5,), lambda i: te.sum(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    ko, ki = s[B].split(k, factor=7)
    BF = s.rfactor(B, ki)
    assert [int(iv.dom.extent) for iv in BF.op.axis] == [7, 5]
    s[BF].compute_at(s[B], s[B].op.axis[0])
    s[BF].reorder(BF.op.axis[1], BF.op.reduce_axis[0], BF.op.axis[0])
    s[BF].vectorize(BF.op.axis[0])
    check(s, [A, B], lambda a: a.sum(1))


@pytest.mark.parametrize("factor_axis", [0, 1, -1])
def test_rfactor_outer_and_factor_axis(factor_axis):
    A = te.placeholder((4, 23), name="A")
    k = te.reduce_axis((0, 23), name="k")
    B = te.compute((4,), lambda i: te.sum(A[i, k] * 2.0, axis=k), name="B")
    s = te.create_schedule(B.op)
    ko, ki = s[B].split(k, nparts=3)
    BF = s.rfactor(B, ko, factor_axis=factor_axis)
    pos = factor_axis if factor_axis >= 0 else 1
    assert int(BF.op.axis[pos].dom.extent) == 3
    check(s, [A, B], lambda a: (a * 2).sum(1))


def test_rfactor_whole_axis_1d():
    A = te.placeholder((37,), name="A")
    k = te.reduce_axis((0, 37), name="k")
    B = te.compute((1,), lambda i: te.sum(A[k], axis=k), name="B")
    s = te.create_schedule(B.op)
    ko, ki = s[B].split(k, factor=8)
    BF = s.rfactor(B, ki)
    s[BF].vectorize(BF.op.axis[0])
    check(s, [A, B], lambda a: a.sum(keepdims=True))


def test_rfactor_argmax_tuple_reducer():
    argmax = te.comm_reducer(
        lambda x0, x1, y0, y1: (tir.Select(x1 >= y1, x0, y0), tir.Select(x1 >= y1, x1, y1)),
        lambda t0, t1: (tir.const(-1, t0), tir.min_value(t1)), name="argmax")
    A = te.placeholder((6, 29), name="A")
    k = te.reduce_axis((0, 29), name="k")
    idx, val = te.compute((6,), lambda i: argmax((k.var, A[i, k]), axis=k), name="T")
    s = te.create_schedule(idx.op)
    ko, ki = s[idx].split(k, factor=5)
    rf = s.rfactor(idx, ki)
    assert isinstance(rf, list) and len(rf) == 2
    s[rf[0]].compute_at(s[idx], s[idx].op.axis[0])
    check(s, [A, idx, val], lambda a: [a.argmax(1).astype("int32"), a.max(1)])


def test_rfactor_where_condition():
    A = te.placeholder((3, 17), name="A")
    k = te.reduce_axis((0, 17), name="k")
    B = te.compute((3,), lambda i: te.sum(A[i, k], axis=k, where=k % 2 == 0), name="B")
    s = te.create_schedule(B.op)
    ko, ki = s[B].split(k, factor=4)
    s.rfactor(B, ko)
    check(s, [A, B], lambda a: a[:, ::2].sum(1))


def test_conv2d_compute_at_padded_input():
    cin, cout, h, w = 3, 4, 9, 7
    X = te.placeholder((1, cin, h, w), name="X")
    W = te.placeholder((cout, cin, 3, 3), name="W")
    P = te.compute((1, cin, h + 2, w + 2),
                   lambda b, c, y, x: te.if_then_else(
                       tir.all(y >= 1, y <= h, x >= 1, x <= w), X[b, c, y - 1, x - 1], 0.0),
                   name="P")
    rc = te.reduce_axis((0, cin), name="rc")
    ry = te.reduce_axis((0, 3), name="ry")
    rx = te.reduce_axis((0, 3), name="rx")
    Y = te.compute((1, cout, h, w),
                   lambda b, f, y, x: te.sum(P[b, rc, y + ry, x + rx] * W[f, rc, ry, rx],
                                             axis=[rc, ry, rx]), name="Y")
    s = te.create_schedule(Y.op)
    b, f, y, x = Y.op.axis
    yo, yi = s[Y].split(y, factor=4)
    s[Y].reorder(b, yo, f, yi, x)
    s[P].compute_at(s[Y], yo)
    txt = lower_text(s, [X, W, Y])
    assert "P = allocate((1, 3, 6, 9), 'float32', 'global')" in txt

    def ref(x, wt):
        xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
        out = np.zeros((1, cout, h, w), np.float32)
        for dy in range(3):
            for dx in range(3):
                out += np.einsum("bchw,fc->bfhw", xp[:, :, dy:dy + h, dx:dx + w], wt[:, :, dy, dx])
        return out

    check(s, [X, W, Y], ref, rtol=1e-4)


def test_softmax_scheduled():
    n, m = 7, 13
    A = te.placeholder((n, m), name="A")
    k1 = te.reduce_axis((0, m), name="k1")
    M = te.compute((n,), lambda i: te.max(A[i, k1], axis=k1), name="M")
    E = te.compute((n, m), lambda i, j: te.exp(A[i, j] - M[i]), name="E")
    k2 = te.reduce_axis((0, m), name="k2")
    S = te.compute((n,), lambda i: te.sum(E[i, k2], axis=k2), name="S")
    O = te.compute((n, m), lambda i, j: E[i, j] / S[i], name="O")
    s = te.create_schedule(O.op)
    io, ii = s[O].split(O.op.axis[0], factor=2)
    s[M].compute_at(s[O], io)
    s[E].compute_at(s[O], io)
    s[S].compute_at(s[O], io)
    s[O].vectorize(O.op.axis[1])

    def ref(a):
        e = np.exp(a - a.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    check(s, [A, O], ref)


def test_multi_output_cache_write_reduction():
    argmax = te.comm_reducer(
        lambda x0, x1, y0, y1: (tir.Select(x1 >= y1, x0, y0), tir.Select(x1 >= y1, x1, y1)),
        lambda t0, t1: (tir.const(-1, t0), tir.min_value(t1)), name="argmax")
    A = te.placeholder((5, 9), name="A")
    k = te.reduce_axis((0, 9), name="k")
    idx, val = te.compute((5,), lambda i: argmax((k.var, A[i, k]), axis=k), name="T")
    s = te.create_schedule(idx.op)
    cache = s.cache_write([idx, val], "local")
    assert len(cache) == 2
    s[cache[0]].compute_at(s[idx], idx.op.axis[0])
    check(s, [A, idx, val], lambda a: [a.argmax(1).astype("int32"), a.max(1)])


def test_integer_reduction_int8_to_int32():
    A = te.placeholder((6, 10), name="A", dtype="int8")
    k = te.reduce_axis((0, 10), name="k")
    B = te.compute((6,), lambda i: te.sum(A[i, k].astype("int32") * 3, axis=k), name="B")
    s = te.create_schedule(B.op)
    ko, ki = s[B].split(k, factor=3)
    s[B].unroll(ki)
    check(s, [A, B], lambda a: (a.astype("int32") * 3).sum(1).astype("int32"))


def test_reduction_with_init_tensor_and_rfactor():
    A = te.placeholder((5, 7), name="A")
    Init = te.placeholder((5,), name="Init")
    k = te.reduce_axis((0, 7), name="k")
    B = te.compute((5,), lambda i: te.sum(A[i, k], axis=k, init=Init[i]), name="B")
    s = te.create_schedule(B.op)
    ko, ki = s[B].split(k, factor=3)
    check(s, [A, Init, B], lambda a, i: a.sum(1) + i)
    s = te.create_schedule(B.op)
    ko, ki = s[B].split(k, factor=3)
    s.rfactor(B, ki)
    check(s, [A, Init, B], lambda a, i: a.sum(1) + i)
