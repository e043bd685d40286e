"""Schedule primitives against numpy: each primitive alone and in combination, on awkward shapes
(primes, non-divisible factors, size-1 axes, symbolic sizes)."""

from __future__ import annotations

import numpy as np
import pytest
from te_check import check

from tvmpy import te, tir


def _ew(n, m, name="B"):
    A = te.placeholder((n, m), name="A")
    B = te.compute((n, m), lambda i, j: A[i, j] * 2.0 + 1.0, name=name)
    return A, B


def _ref_ew(a):
    return a * 2 + 1


@pytest.mark.parametrize("n,m", [(13, 7), (1, 1), (8, 16), (1, 5)])
def test_default_schedule(n, m):
    A, B = _ew(n, m)
    s = te.create_schedule(B.op)
    check(s, [A, B], _ref_ew)


@pytest.mark.parametrize("factor", [1, 3, 4, 13, 20])
def test_split_factor(factor):
    A, B = _ew(13, 7)
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=factor)
    assert s[B].leaf_iter_vars == [xo, xi, B.op.axis[1]]
    check(s, [A, B], _ref_ew)


@pytest.mark.parametrize("nparts", [1, 2, 5, 13, 17])
def test_split_nparts(nparts):
    A, B = _ew(13, 7)
    s = te.create_schedule(B.op)
    s[B].split(B.op.axis[1], nparts=nparts)
    check(s, [A, B], _ref_ew)


def test_split_twice_and_reorder():
    A, B = _ew(29, 11)
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=6)
    xio, xii = s[B].split(xi, factor=4)
    yo, yi = s[B].split(B.op.axis[1], factor=3)
    s[B].reorder(yi, xii, xo, yo, xio)
    assert s[B].leaf_iter_vars == [yi, xii, xo, yo, xio]
    check(s, [A, B], _ref_ew)


@pytest.mark.parametrize("fx,fy", [(4, 4), (5, 3), (1, 7), (32, 2)])
def test_tile(fx, fy):
    A, B = _ew(13, 7)
    s = te.create_schedule(B.op)
    xo, yo, xi, yi = s[B].tile(B.op.axis[0], B.op.axis[1], fx, fy)
    assert s[B].leaf_iter_vars == [xo, yo, xi, yi]
    check(s, [A, B], _ref_ew)


def test_fuse_then_split():
    A, B = _ew(7, 5)
    s = te.create_schedule(B.op)
    f = s[B].fuse(B.op.axis[0], B.op.axis[1])
    fo, fi = s[B].split(f, factor=4)
    s[B].vectorize(fi)
    s[B].parallel(fo)
    check(s, [A, B], _ref_ew)


def test_fuse_three_axes_and_split_inner_first():
    A = te.placeholder((3, 5, 7), name="A")
    B = te.compute((3, 5, 7), lambda i, j, k: A[i, j, k] - 1.5, name="B")
    s = te.create_schedule(B.op)
    i, j, k = B.op.axis
    jo, ji = s[B].split(j, factor=2)
    f = s[B].fuse(i, jo)
    s[B].reorder(ji, f, k)
    f2 = s[B].fuse(f, k)
    s[B].unroll(ji)
    check(s, [A, B], lambda a: a - 1.5)
    assert f2 in s[B].leaf_iter_vars


def test_annotations_kinds_in_ir():
    A, B = _ew(16, 8)
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=4)
    s[B].parallel(xo)
    s[B].unroll(xi)
    s[B].vectorize(B.op.axis[1])
    f = te.schedule_ops.schedule_to_primfunc(s, [A, B], "f") if hasattr(te, "schedule_ops") else None
    from tvmpy.te.schedule_ops import schedule_to_primfunc

    f = schedule_to_primfunc(s, [A, B], "f")
    kinds = []
    body = f.body
    while isinstance(body, tir.For):
        kinds.append(body.kind)
        body = body.body
    assert kinds == [tir.ForKind.PARALLEL, tir.ForKind.UNROLLED, tir.ForKind.VECTORIZED]
    check(s, [A, B], _ref_ew)


def test_symbolic_shape_split():
    n = te.var("n")
    A = te.placeholder((n, 3), name="A")
    B = te.compute((n, 3), lambda i, j: A[i, j] * 2.0 + 1.0, name="B")
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=4)
    s[B].reorder(xi, xo)
    for nv in (1, 4, 13):
        check(s, [A, B], _ref_ew, sizes={n: nv})


def test_symbolic_scalar_param():
    n = te.var("n")
    alpha = te.var("alpha", "float32")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * alpha, name="B")
    s = te.create_schedule(B.op)
    s[B].split(B.op.axis[0], factor=3)
    check(s, [A, B, alpha], lambda a: a * np.float32(2.5), sizes={n: 10, alpha: 2.5})


def test_compute_inline_chain():
    A = te.placeholder((9, 4), name="A")
    B = te.compute((9, 4), lambda i, j: A[i, j] + 1.0, name="B")
    C = te.compute((9, 4), lambda i, j: B[i, j] * B[i, j], name="C")
    D = te.compute((9, 4), lambda i, j: C[i, j] - B[i, j], name="D")
    s = te.create_schedule(D.op)
    s[B].compute_inline()
    s[C].compute_inline()
    from te_check import lower_text

    txt = lower_text(s, [A, D])
    assert "allocate" not in txt
    check(s, [A, D], lambda a: (a + 1) ** 2 - (a + 1))


def test_compute_at_elementwise_nondivisible():
    A = te.placeholder((13, 7), name="A")
    B = te.compute((13, 7), lambda i, j: A[i, j] * 2.0, name="B")
    C = te.compute((13, 7), lambda i, j: B[i, j] + 1.0, name="C")
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=4)
    s[B].compute_at(s[C], xo)
    check(s, [A, C], lambda a: a * 2 + 1)


@pytest.mark.parametrize("at", [0, 1, 2])
def test_compute_at_stencil(at):
    n = 17
    A = te.placeholder((n + 2,), name="A")
    B = te.compute((n + 2,), lambda i: A[i] * 3.0, name="B")
    C = te.compute((n,), lambda i: B[i] + B[i + 1] + B[i + 2], name="C")
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=5)
    s[B].compute_at(s[C], [xo, xi, xi][at])
    if at == 2:
        s[C].vectorize(xi)
    check(s, [A, C], lambda a: 3 * (a[:-2] + a[1:-1] + a[2:]))


def test_compute_at_reduction_consumer_inside_reduce_loop():
    A = te.placeholder((6, 10), name="A")
    B = te.compute((6, 10), lambda i, j: A[i, j] * A[i, j], name="B")
    k = te.reduce_axis((0, 10), name="k")
    C = te.compute((6,), lambda i: te.sum(B[i, k], axis=k), name="C")
    s = te.create_schedule(C.op)
    ko, ki = s[C].split(k, factor=3)
    s[B].compute_at(s[C], ko)
    check(s, [A, C], lambda a: (a * a).sum(1))


def test_compute_at_nested_three_stages():
    A = te.placeholder((11, 6), name="A")
    B = te.compute((11, 6), lambda i, j: A[i, j] + 1.0, name="B")
    C = te.compute((11, 6), lambda i, j: B[i, j] * 2.0, name="C")
    D = te.compute((11, 6), lambda i, j: C[i, j] - 3.0, name="D")
    s = te.create_schedule(D.op)
    xo, xi = s[D].split(D.op.axis[0], factor=4)
    s[C].compute_at(s[D], xo)
    s[B].compute_at(s[C], C.op.axis[0])
    check(s, [A, D], lambda a: (a + 1) * 2 - 3)


def test_compute_root_undoes_attach_and_inline():
    A, B = _ew(5, 6)
    C = te.compute((5, 6), lambda i, j: B[i, j] * 0.5, name="C")
    s = te.create_schedule(C.op)
    s[B].compute_at(s[C], C.op.axis[0])
    s[B].compute_root()
    check(s, [A, C], lambda a: (a * 2 + 1) * 0.5)
    s[B].compute_inline()
    s[B].compute_root()
    check(s, [A, C], lambda a: (a * 2 + 1) * 0.5)


def test_attach_axis_split_after_compute_at_uses_inner():
    A, B = _ew(12, 5)
    C = te.compute((12, 5), lambda i, j: B[i, j] * 0.5, name="C")
    s = te.create_schedule(C.op)
    s[B].compute_at(s[C], C.op.axis[0])
    s[C].split(C.op.axis[0], factor=5)
    check(s, [A, C], lambda a: (a * 2 + 1) * 0.5)


def test_attached_to_inlined_stage_computes_at_root():
    A, B = _ew(4, 5)
    C = te.compute((4, 5), lambda i, j: B[i, j] * 0.5, name="C")
    D = te.compute((4, 5), lambda i, j: C[i, j] + 2.0, name="D")
    s = te.create_schedule(D.op)
    s[B].compute_at(s[C], C.op.axis[1])
    s[C].compute_inline()
    check(s, [A, D], lambda a: (a * 2 + 1) * 0.5 + 2)


def test_reduction_split_reorder_reduce_outside():
    A = te.placeholder((7, 9), name="A")
    k = te.reduce_axis((0, 9), name="k")
    B = te.compute((7,), lambda i: te.sum(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    ko, ki = s[B].split(k, factor=4)
    xo, xi = s[B].split(B.op.axis[0], factor=3)
    s[B].reorder(ko, xo, ki, xi)
    check(s, [A, B], lambda a: a.sum(1))


def test_reduce_max_min_and_where():
    A = te.placeholder((5, 8), name="A")
    k = te.reduce_axis((0, 8), name="k")
    B = te.compute((5,), lambda i: te.max(A[i, k], axis=k), name="B")
    k2 = te.reduce_axis((0, 8), name="k2")
    C = te.compute((5,), lambda i: te.min(A[i, k2], axis=k2, where=k2 > 2), name="C")
    s = te.create_schedule([B.op, C.op])
    check(s, [A, B, C], lambda a: [a.max(1), a[:, 3:].min(1)])


def test_multi_output_compute_one_stage():
    A = te.placeholder((6, 5), name="A")
    B, C = te.compute((6, 5), lambda i, j: (A[i, j] + 1.0, A[i, j] * 3.0), name="BC")
    s = te.create_schedule(B.op)
    assert s[B] is s[C]
    s[B].split(B.op.axis[1], factor=2)
    check(s, [A, B, C], lambda a: [a + 1, a * 3])


def test_argmax_tuple_reducer():
    def fcombine(x, y):
        lhs = tir.Select(x[1] >= y[1], x[0], y[0])
        rhs = tir.Select(x[1] >= y[1], x[1], y[1])
        return lhs, rhs

    def fidentity(t0, t1):
        return tir.const(-1, t0), tir.min_value(t1)

    argmax = te.comm_reducer(lambda x0, x1, y0, y1: fcombine((x0, x1), (y0, y1)), fidentity,
                             name="argmax")
    A = te.placeholder((7, 11), name="A")
    k = te.reduce_axis((0, 11), name="k")
    idx, val = te.compute((7,), lambda i: argmax((k.var, A[i, k]), axis=k), name="T")
    s = te.create_schedule(idx.op)
    ko, ki = s[idx].split(k, factor=4)
    check(s, [A, idx, val], lambda a: [a.argmax(1).astype("int32"), a.max(1)])


def test_size_one_axes():
    A = te.placeholder((1, 5, 1), name="A")
    B = te.compute((1, 5, 1), lambda i, j, k: A[i, j, k] + 4.0, name="B")
    C = te.compute((1, 5, 1), lambda i, j, k: B[i, j, k] * 2.0, name="C")
    s = te.create_schedule(C.op)
    f = s[C].fuse(*C.op.axis)
    s[B].compute_at(s[C], f)
    check(s, [A, C], lambda a: (a + 4) * 2)


def test_pragma_emits_attr():
    A, B = _ew(8, 8)
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=4)
    s[B].pragma(xo, "auto_unroll_max_step", 16)
    s[B].pragma(xo, "unroll_explicit", True)
    from te_check import lower_text

    txt = lower_text(s, [A, B])
    assert "'pragma_auto_unroll_max_step', 16" in txt
    assert "'pragma_unroll_explicit'" in txt
    check(s, [A, B], _ref_ew)
