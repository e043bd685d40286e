"""Primitives in combination, on awkward shapes, on every backend: where the bugs hide.

Each case is one schedule a user could plausibly write (conv2d with padding, transposes, reshapes,
softmax pieces, multi-output stages, parallel loops holding per-iteration buffers...), checked
against numpy for several symbolic sizes with one build per backend.
"""

from __future__ import annotations

import numpy as np

import tvmpy as tvm
from tvmpy import te, tir

from .util import TARGETS, check, positive

SYM = [{"n": 1}, {"n": 7}, {"n": 31}]


def test_parallel_loop_with_per_iteration_buffer():
    """Each parallel iteration owns its producer buffer: no sharing between threads."""
    def sched():
        n = te.var("n")
        A = te.placeholder((n, 257), name="A")
        B = te.compute((n, 257), lambda i, j: A[i, j] * 2.0 + 1.0, name="B")
        k = te.reduce_axis((0, 257), name="k")
        C = te.compute((n, 257), lambda i, j: B[i, j] * 0.5 + B[i, 256 - j], name="C")
        s = te.create_schedule(C.op)
        s[C].parallel(C.op.axis[0])
        s[B].compute_at(s[C], C.op.axis[0])
        s[B].vectorize(s[B].op.axis[1])
        del k
        return s, [A, C]

    def ref(a, **_):
        b = a * 2 + 1
        return b * 0.5 + b[:, ::-1]

    check(sched, ref, [{"n": 2}, {"n": 9}, {"n": 64}])


def test_parallel_reduction_with_local_accumulator():
    def sched():
        n = te.var("n")
        A = te.placeholder((n, 64), name="A")
        B = te.placeholder((64, 13), name="B")
        k = te.reduce_axis((0, 64), name="k")
        C = te.compute((n, 13), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
        s = te.create_schedule(C.op)
        CL = s.cache_write(C, "local")
        s[C].parallel(C.op.axis[0])
        s[CL].compute_at(s[C], C.op.axis[0])
        s[CL].reorder(s[CL].op.reduce_axis[0], *s[CL].op.axis)
        s[CL].vectorize(s[CL].op.axis[1])
        return s, [A, B, C]

    check(sched, lambda a, b, **_: a.astype("float64") @ b, [{"n": 3}, {"n": 40}],
          rtol=1e-5, atol=1e-5)


def test_conv2d_with_padding_inline_and_tiling():
    def sched():
        n = te.var("n")
        data = te.placeholder((2, n, n), name="data")
        w = te.placeholder((3, 2, 3, 3), name="w")
        pad = te.compute((2, n + 2, n + 2), lambda c, y, x: te.if_then_else(
            tir.all(y >= 1, y <= n, x >= 1, x <= n), data[c, y - 1, x - 1], 0.0), name="pad")
        rc = te.reduce_axis((0, 2), name="rc")
        ry = te.reduce_axis((0, 3), name="ry")
        rx = te.reduce_axis((0, 3), name="rx")
        out = te.compute((3, n, n), lambda f, y, x: te.sum(
            pad[rc, y + ry, x + rx] * w[f, rc, ry, rx], axis=[rc, ry, rx]), name="out")
        s = te.create_schedule(out.op)
        f, y, x = s[out].op.axis
        yo, yi = s[out].split(y, factor=3)
        xo, xi = s[out].split(x, factor=4)
        s[out].reorder(f, yo, xo, rc, ry, yi, rx, xi)
        s[pad].compute_inline()
        s[out].vectorize(xi)
        s[out].unroll(rx)
        return s, [data, w, out]

    def ref(d, w, n):
        p = np.pad(d.astype("float64"), ((0, 0), (1, 1), (1, 1)))
        o = np.zeros((3, n, n))
        for f in range(3):
            for c in range(2):
                for dy in range(3):
                    for dx in range(3):
                        o[f] += p[c, dy:dy + n, dx:dx + n] * w[f, c, dy, dx]
        return o

    check(sched, ref, [{"n": 1}, {"n": 5}, {"n": 13}], rtol=1e-5, atol=1e-5)


def test_conv2d_padding_stage_attached():
    def sched():
        data = te.placeholder((2, 11, 11), name="data")
        w = te.placeholder((3, 2, 3, 3), name="w")
        pad = te.compute((2, 13, 13), lambda c, y, x: te.if_then_else(
            tir.all(y >= 1, y <= 11, x >= 1, x <= 11), data[c, y - 1, x - 1], 0.0), name="pad")
        rc = te.reduce_axis((0, 2), name="rc")
        ry = te.reduce_axis((0, 3), name="ry")
        rx = te.reduce_axis((0, 3), name="rx")
        out = te.compute((3, 11, 11), lambda f, y, x: te.sum(
            pad[rc, y + ry, x + rx] * w[f, rc, ry, rx], axis=[rc, ry, rx]), name="out")
        s = te.create_schedule(out.op)
        f, y, x = s[out].op.axis
        yo, yi = s[out].split(y, factor=4)
        s[out].reorder(yo, f, yi, x)
        s[pad].compute_at(s[out], yo)
        s[out].parallel(yo)
        return s, [data, w, out]

    def ref(d, w):
        p = np.pad(d.astype("float64"), ((0, 0), (1, 1), (1, 1)))
        o = np.zeros((3, 11, 11))
        for f in range(3):
            for c in range(2):
                for dy in range(3):
                    for dx in range(3):
                        o[f] += p[c, dy:dy + 11, dx:dx + 11] * w[f, c, dy, dx]
        return o

    check(sched, ref, rtol=1e-5, atol=1e-5)


def test_transpose_vectorized_strided_store():
    def sched():
        n = te.var("n")
        A = te.placeholder((13, n), name="A")
        B = te.compute((n, 13), lambda i, j: A[j, i], name="B")
        s = te.create_schedule(B.op)
        s[B].reorder(B.op.axis[1], B.op.axis[0])
        io, ii = s[B].split(B.op.axis[0], factor=8)
        s[B].reorder(B.op.axis[1], io, ii)
        s[B].vectorize(ii)
        return s, [A, B]

    check(sched, lambda a, **_: a.T, SYM)


def test_reshape_floordiv_floormod_vectorized():
    def sched():
        A = te.placeholder((31 * 6,), name="A")
        B = te.compute((31, 6), lambda i, j: A[i * 6 + j], name="B")
        C = te.compute((186,), lambda k: B[tir.floordiv(k, 6), tir.floormod(k, 6)] * 2.0, name="C")
        s = te.create_schedule(C.op)
        ko, ki = s[C].split(C.op.axis[0], factor=8)
        s[C].vectorize(ki)
        s[B].compute_at(s[C], ko)
        return s, [A, C]

    check(sched, lambda a: a * 2)


def test_broadcast_size1_axes_symbolic():
    def sched():
        n = te.var("n")
        A = te.placeholder((n, 1, 5), name="A")
        V = te.placeholder((1, 7, 1), name="V")
        B = te.compute((n, 7, 5), lambda i, j, k: A[i, 0, k] * V[0, j, 0], name="B")
        s = te.create_schedule(B.op)
        f = s[B].fuse(B.op.axis[1], B.op.axis[2])
        fo, fi = s[B].split(f, factor=4)
        s[B].vectorize(fi)
        s[B].parallel(B.op.axis[0])
        return s, [A, V, B]

    check(sched, lambda a, v, **_: a * v, SYM)


def test_scalar_argument_in_vectorized_body():
    def sched():
        n = te.var("n")
        alpha = te.var("alpha", "float32")
        shift = te.var("shift", "int32")
        A = te.placeholder((n,), name="A")
        I = te.placeholder((n,), "int32", name="I")
        B = te.compute((n,), lambda i: A[i] * alpha, name="B")
        C = te.compute((n,), lambda i: I[i] + shift * i, name="C")
        s = te.create_schedule([B.op, C.op])
        for t in (B, C):
            xo, xi = s[t].split(t.op.axis[0], factor=8)
            s[t].vectorize(xi)
        return s, [A, I, alpha, shift, B, C]

    def ref(a, i, n, alpha, shift):
        return [a * np.float32(alpha), i + shift * np.arange(n, dtype="int32")]

    check(sched, ref, [{"n": 5, "alpha": 1.5, "shift": 3}, {"n": 19, "alpha": -2.0, "shift": -7}])


def test_fuse_reduction_axes_and_split():
    def sched():
        A = te.placeholder((7, 5, 13), name="A")
        j = te.reduce_axis((0, 5), name="j")
        k = te.reduce_axis((0, 13), name="k")
        B = te.compute((7,), lambda i: te.sum(A[i, j, k], axis=[j, k]), name="B")
        s = te.create_schedule(B.op)
        f = s[B].fuse(j, k)
        fo, fi = s[B].split(f, factor=4)
        s[B].unroll(fi)
        return s, [A, B]

    check(sched, lambda a: a.astype("float64").sum((1, 2)), rtol=1e-5, atol=1e-5)


def test_rfactor_factor_axis_and_reduce_over_rfactor():
    def sched():
        n = te.var("n")
        A = te.placeholder((n, 37), name="A")
        k = te.reduce_axis((0, 37), name="k")
        B = te.compute((n,), lambda i: te.max(A[i, k], axis=k), name="B")
        s = te.create_schedule(B.op)
        ko, ki = s[B].split(k, nparts=4)
        BF = s.rfactor(B, ko, factor_axis=1)
        s[BF].compute_at(s[B], s[B].op.axis[0])
        return s, [A, B]

    check(sched, lambda a, **_: a.max(1), SYM)


def test_multi_output_stage_attached_into_consumer():
    def sched():
        n = te.var("n")
        A = te.placeholder((n, 13), name="A")
        P, Q = te.compute((n, 13), lambda i, j: (A[i, j] + 1.0, A[i, j] * A[i, j]), name="PQ")
        C = te.compute((n, 13), lambda i, j: P[i, j] - Q[i, j], name="C")
        s = te.create_schedule(C.op)
        xo, xi = s[C].split(C.op.axis[1], factor=4)
        s[P].compute_at(s[C], xo)
        return s, [A, C]

    check(sched, lambda a, **_: (a + 1) - a * a, SYM)


def test_compute_at_with_symbolic_split_factor_and_unroll():
    def sched():
        n = te.var("n")
        f = te.var("f")
        A = te.placeholder((n + 2,), name="A")
        B = te.compute((n + 2,), lambda i: A[i] * 3.0, name="B")
        C = te.compute((n,), lambda i: B[i] + B[i + 1] + B[i + 2], name="C")
        s = te.create_schedule(C.op)
        xo, xi = s[C].split(C.op.axis[0], factor=f)
        s[B].compute_at(s[C], xo)
        s[B].unroll(s[B].op.axis[0])
        return s, [A, C, f]

    def ref(a, **_):
        b = a * 3
        return b[:-2] + b[1:-1] + b[2:]

    check(sched, ref, [{"n": 1, "f": 1}, {"n": 10, "f": 3}, {"n": 31, "f": 8}, {"n": 5, "f": 9}])


def test_cache_read_local_inside_vectorized_parallel():
    def sched():
        n = te.var("n")
        A = te.placeholder((n, 24), name="A")
        B = te.compute((n, 24), lambda i, j: te.sqrt(A[i, j]) + A[i, 23 - j], name="B")
        s = te.create_schedule(B.op)
        AL = s.cache_read(A, "local", [B])
        s[B].parallel(B.op.axis[0])
        jo, ji = s[B].split(B.op.axis[1], factor=8)
        s[AL].compute_at(s[B], B.op.axis[0])
        s[AL].vectorize(s[AL].op.axis[1])
        s[B].vectorize(ji)
        return s, [A, B]

    check(sched, lambda a, **_: np.sqrt(a) + a[:, ::-1], SYM, gens={"A": positive})


def test_storage_align_with_compute_at_and_vectorize():
    def sched():
        A = te.placeholder((13, 17), name="A")
        B = te.compute((13, 17), lambda i, j: A[i, j] * 2.0, name="B")
        C = te.compute((13, 17), lambda i, j: B[i, j] + B[i, 16 - j], name="C")
        s = te.create_schedule(C.op)
        io, ii = s[C].split(C.op.axis[0], factor=4)
        s[B].compute_at(s[C], io)
        s[B].storage_align(s[B].op.axis[0], 8, 5)
        s[B].vectorize(s[B].op.axis[1])
        return s, [A, C]

    check(sched, lambda a: a * 2 + (a * 2)[:, ::-1])


def test_double_buffer_symbolic():
    def sched():
        n = te.var("n")
        A = te.placeholder((n, 20), name="A")
        B = te.placeholder((20,), name="B")
        k = te.reduce_axis((0, 20), name="k")
        C = te.compute((n,), lambda i: te.sum(A[i, k] * B[k], axis=k), name="C")
        s = te.create_schedule(C.op)
        AS = s.cache_read(A, "shared", [C])
        ko, ki = s[C].split(k, factor=3)
        s[C].reorder(ko, C.op.axis[0], ki)
        s[AS].compute_at(s[C], ko)
        s[AS].double_buffer()
        return s, [A, B, C]

    check(sched, lambda a, b, **_: a.astype("float64") @ b, SYM, rtol=1e-5, atol=1e-5)


def test_vthread_nondivisible():
    def sched():
        A = te.placeholder((13, 7), name="A")
        B = te.compute((13, 7), lambda i, j: A[i, j] + 3.0, name="B")
        s = te.create_schedule(B.op)
        vo, vi = s[B].split(B.op.axis[0], nparts=3)
        s[B].bind(vo, te.thread_axis("vthread"))
        return s, [A, B]

    check(sched, lambda a: a + 3)


def test_int8_uint8_reductions_wrap():
    def sched():
        A = te.placeholder((7, 41), "int8", name="A")
        U = te.placeholder((7, 41), "uint8", name="U")
        k = te.reduce_axis((0, 41), name="k")
        S = te.compute((7,), lambda i: te.sum(A[i, k] * A[i, k], axis=k), name="S")
        k2 = te.reduce_axis((0, 41), name="k2")
        T = te.compute((7,), lambda i: te.sum(U[i, k2].astype("int32") * 3, axis=k2), name="T")
        s = te.create_schedule([S.op, T.op])
        ko, ki = s[S].split(k, factor=8)
        return s, [A, U, S, T]

    def gen(rng, shape, dtype):
        return rng.integers(0 if dtype == "uint8" else -128, 128 if dtype == "int8" else 256,
                            size=shape).astype(dtype)

    def ref(a, u):
        sq = (a.astype("int64") ** 2).astype("int8")
        return [sq.astype("int64").sum(1).astype("int8"), (u.astype("int32") * 3).sum(1)]

    check(sched, ref, gens={"A": gen, "U": gen})


def test_where_reduction_symbolic_and_init():
    def sched():
        n = te.var("n")
        A = te.placeholder((7, n), name="A")
        k = te.reduce_axis((0, n), name="k")
        B = te.compute((7,), lambda i: te.sum(A[i, k], axis=k, where=k % 2 == 0), name="B")
        k2 = te.reduce_axis((0, n), name="k2")
        C = te.compute((7,), lambda i: te.min(A[i, k2], axis=k2, init=0.5), name="C")
        s = te.create_schedule([B.op, C.op])
        return s, [A, B, C]

    def ref(a, **_):
        return [a[:, ::2].astype("float64").sum(1), np.minimum(a.min(1), 0.5)]

    check(sched, ref, SYM, rtol=1e-5, atol=1e-6)


def test_softmax_rows_symbolic_vectorized():
    def sched():
        n = te.var("n")
        A = te.placeholder((5, n), name="A")
        k = te.reduce_axis((0, n), name="k")
        M = te.compute((5,), lambda i: te.max(A[i, k], axis=k), name="M")
        E_ = te.compute((5, n), lambda i, j: te.exp(A[i, j] - M[i]), name="E")
        k2 = te.reduce_axis((0, n), name="k2")
        S = te.compute((5,), lambda i: te.sum(E_[i, k2], axis=k2), name="S")
        O = te.compute((5, n), lambda i, j: E_[i, j] / S[i], name="O")
        s = te.create_schedule(O.op)
        for t in (M, E_, S):
            s[t].compute_at(s[O], O.op.axis[0])
        jo, ji = s[O].split(O.op.axis[1], factor=8)
        s[O].vectorize(ji)
        eo, ei = s[E_].split(s[E_].op.axis[1], factor=4)
        s[E_].vectorize(ei)
        s[O].parallel(O.op.axis[0])
        return s, [A, O]

    def ref(a, **_):
        e = np.exp(a - a.max(1, keepdims=True))
        return e / e.sum(1, keepdims=True)

    check(sched, ref, SYM, rtol=1e-5, atol=1e-6)


def test_sibling_loop_range_does_not_leak():
    """B's loop runs only when n >= 4; C after it must not assume so (max(n - 4, 0) kept)."""
    def sched():
        n = te.var("n")
        A = te.placeholder((n,), name="A")
        B = te.compute((n - 3,), lambda i: A[i] * 2.0, name="B")
        C = te.compute((n,), lambda i: A[i] + A[tir.max(n - 4, 0)], name="C")
        s = te.create_schedule([B.op, C.op])
        return s, [A, B, C]

    def ref(a, n):
        return [a[: n - 3] * 2, a + a[max(n - 4, 0)]]

    check(sched, ref, [{"n": 3}, {"n": 4}, {"n": 9}])


def test_zero_size_symbolic_parallel_vectorized():
    def sched():
        n = te.var("n")
        A = te.placeholder((n, 9), name="A")
        B = te.compute((n, 9), lambda i, j: A[i, j] + 1.0, name="B")
        s = te.create_schedule(B.op)
        s[B].parallel(B.op.axis[0])
        jo, ji = s[B].split(B.op.axis[1], 4)
        s[B].vectorize(ji)
        return s, [A, B]

    check(sched, lambda a, **_: a + 1, [{"n": 0}, {"n": 1}, {"n": 5}])


def test_compute_at_inside_vectorized_loop():
    """The producer attached under the vectorized loop: the loop is scalarized, results exact."""
    def sched():
        A = te.placeholder((7, 13), name="A")
        B = te.compute((7, 13), lambda i, j: A[i, j] * 2.0, name="B")
        C = te.compute((7, 13), lambda i, j: B[i, j] + 1.0, name="C")
        s = te.create_schedule(C.op)
        jo, ji = s[C].split(C.op.axis[1], 4)
        s[C].vectorize(ji)
        s[B].compute_at(s[C], ji)
        return s, [A, C]

    check(sched, lambda a: a * 2 + 1)


def test_two_producers_at_different_levels_of_a_tile():
    def sched():
        A = te.placeholder((13, 11), name="A")
        B = te.compute((13, 11), lambda i, j: A[i, j] + 1.0, name="B")
        C = te.compute((13, 11), lambda i, j: A[i, j] * 2.0, name="C")
        D = te.compute((13, 11), lambda i, j: B[i, j] * C[i, j], name="D")
        s = te.create_schedule(D.op)
        yo, xo, yi, xi = s[D].tile(D.op.axis[0], D.op.axis[1], 4, 3)
        s[B].compute_at(s[D], xo)
        s[C].compute_at(s[D], yi)
        return s, [A, D]

    check(sched, lambda a: (a + 1) * (a * 2))


def test_rfactor_symbolic_nparts_parallel():
    def sched():
        n = te.var("n")
        A = te.placeholder((n,), name="A")
        k = te.reduce_axis((0, n), name="k")
        B = te.compute((1,), lambda i: te.sum(A[k], axis=k), name="B")
        s = te.create_schedule(B.op)
        ko, ki = s[B].split(k, nparts=4)
        BF = s.rfactor(B, ko)
        s[BF].parallel(BF.op.axis[0])
        return s, [A, B]

    check(sched, lambda a, **_: a.astype("float64").sum(keepdims=True),
          [{"n": 1}, {"n": 3}, {"n": 37}], rtol=1e-5, atol=1e-5)


def test_vectorized_division_by_symbolic_divisor():
    def sched():
        d = te.var("d")
        A = te.placeholder((13,), "int32", name="A")
        B = te.compute((13,), lambda i: tir.floordiv(A[i] + i, d) + tir.floormod(i, d), name="B")
        s = te.create_schedule(B.op)
        s[B].vectorize(B.op.axis[0])
        return s, [A, B, d]

    i = np.arange(13)
    check(sched, lambda a, d: ((a + i) // d + i % d).astype("int32"),
          [{"d": 3}, {"d": -2}, {"d": 1}])


def test_cache_write_reduction_with_inlined_input():
    def sched():
        A = te.placeholder((7, 13), name="A")
        P = te.compute((7, 13), lambda i, j: A[i, j] * 2.0, name="P")
        k = te.reduce_axis((0, 13), name="k")
        B = te.compute((7,), lambda i: te.sum(P[i, k], axis=k), name="B")
        s = te.create_schedule(B.op)
        BL = s.cache_write(B, "local")
        s[P].compute_inline()
        s[BL].compute_at(s[B], B.op.axis[0])
        return s, [A, B]

    check(sched, lambda a: (a * 2).astype("float64").sum(1), rtol=1e-5, atol=1e-5)


def test_zero_d_tensor_and_composite_dims():
    def sched():
        n = te.var("n")
        A = te.placeholder((n + 1,), name="A")
        k = te.reduce_axis((0, n + 1), name="k")
        S = te.compute((), lambda: te.sum(A[k], axis=k), name="S")
        B = te.compute((n,), lambda i: A[i] + A[i + 1] - S[()], name="B")
        P = te.placeholder((n * 2,), name="P")
        C = te.compute((n,), lambda i: P[2 * i] * P[2 * i + 1], name="C")
        s = te.create_schedule([B.op, C.op])
        return s, [A, P, S, B, C]

    def ref(a, p, **_):
        tot = a.astype("float64").sum()
        return [np.array(tot), a[:-1] + a[1:] - tot, p[0::2] * p[1::2]]

    check(sched, ref, [{"n": 1}, {"n": 6}], rtol=1e-5, atol=1e-5)


def test_float64_int64_scalar_arguments():
    def sched():
        x = te.var("x", "float64")
        k = te.var("k", "int64")
        A = te.placeholder((9,), "float64", name="A")
        B = te.compute((9,), lambda i: A[i] * x + k.astype("float64"), name="B")
        return te.create_schedule(B.op), [A, x, k, B]

    check(sched, lambda a, x, k: a * x + k, [{"x": 0.1, "k": 2 ** 40}, {"x": -3.0, "k": -5}])


def test_argmax_rfactor_parallel():
    def sched():
        def fcombine(x, y):
            return (tir.Select(x[1] >= y[1], x[0], y[0]), tir.Select(x[1] >= y[1], x[1], y[1]))

        argmax = te.comm_reducer(fcombine, lambda a, b: (tir.const(-1, a), te.min_value(b)))
        A = te.placeholder((5, 37), name="A")
        k = te.reduce_axis((0, 37), name="k")
        idx, val = te.compute((5,), lambda i: argmax((k.var, A[i, k]), axis=k), name="T")
        s = te.create_schedule(idx.op)
        ko, ki = s[idx].split(k, factor=8)
        s.rfactor(idx, ki)
        s[idx].parallel(s[idx].op.axis[0])
        return s, [A, idx, val]

    check(sched, lambda a: [a.argmax(1).astype("int32"), a.max(1)])


def test_double_buffer_under_vthread():
    def sched():
        A = te.placeholder((8, 24), name="A")
        B = te.placeholder((24,), name="B")
        k = te.reduce_axis((0, 24), name="k")
        C = te.compute((8,), lambda i: te.sum(A[i, k] * B[k], axis=k), name="C")
        s = te.create_schedule(C.op)
        AS = s.cache_read(A, "shared", [C])
        vo, vi = s[C].split(C.op.axis[0], nparts=2)
        ko, ki = s[C].split(k, factor=4)
        s[C].reorder(vo, ko, vi, ki)
        s[C].bind(vo, te.thread_axis("vthread"))
        s[AS].compute_at(s[C], ko)
        s[AS].double_buffer()
        return s, [A, B, C]

    check(sched, lambda a, b: a.astype("float64") @ b, rtol=1e-5, atol=1e-5)


def test_symbolic_where_with_rfactor():
    def sched():
        n = te.var("n")
        A = te.placeholder((4, n), name="A")
        k = te.reduce_axis((0, n), name="k")
        B = te.compute((4,), lambda i: te.sum(A[i, k], axis=k, where=k < n - 1), name="B")
        s = te.create_schedule(B.op)
        ko, ki = s[B].split(k, 4)
        s.rfactor(B, ki)
        return s, [A, B]

    check(sched, lambda a, **_: a[:, :-1].astype("float64").sum(1), [{"n": 1}, {"n": 2}, {"n": 11}],
          rtol=1e-5, atol=1e-5)


def test_awkward_and_duplicate_tensor_names():
    """Names are the user's: C keywords, dots, spaces, non-ASCII, leading digits, duplicates."""
    def sched():
        n = te.var("int")
        A = te.placeholder((n,), name="float")
        B = te.compute((n,), lambda i: A[i] + 1.0, name="return")
        C = te.compute((n,), lambda i: B[i] * 2.0, name="B.x y-ü")
        D = te.compute((n,), lambda i: C[i] - 1.0, name="1D")
        V = te.placeholder((n,), name="float")  # same name as A
        E = te.compute((n,), lambda i: D[i] * V[i], name="float")
        s = te.create_schedule(E.op)
        s[B].compute_at(s[C], C.op.axis[0])
        return s, [A, V, E]

    check(sched, lambda a, v, **_: ((a + 1) * 2 - 1) * v, [{"int": 1}, {"int": 9}])


def test_int64_symbolic_sizes():
    def sched():
        n = te.var("n", "int64")
        m = te.var("m")
        A = te.placeholder((n, 5), name="A")
        k = te.reduce_axis((0, n), name="k")
        B = te.compute((5,), lambda j: te.sum(A[k, j], axis=k), name="B")
        C = te.compute((n, 5), lambda i, j: A[i, j] * 2.0, name="C")
        P = te.placeholder((n, m), name="P")
        Q = te.compute((n, m), lambda i, j: P[i, j] + 1.0, name="Q")
        s = te.create_schedule([B.op, C.op, Q.op])
        io, ii = s[C].split(C.op.axis[0], 4)
        s[C].vectorize(C.op.axis[1])
        s[C].parallel(io)
        s[B].split(k, 3)
        f = s[Q].fuse(*Q.op.axis)
        fo, fi = s[Q].split(f, 4)
        s[Q].vectorize(fi)
        return s, [A, P, B, C, Q]

    check(sched, lambda a, p, **_: [a.astype("float64").sum(0), a * 2, p + 1],
          [{"n": 1, "m": 1}, {"n": 10, "m": 7}], rtol=1e-5, atol=1e-5)


def test_tuple_reducers_with_rfactor_and_cache_write():
    def sched():
        A = te.placeholder((7, 13), name="A")
        k = te.reduce_axis((0, 13), name="k")
        sum_prod = te.comm_reducer(lambda x, y: (x[0] + y[0], x[1] * y[1]),
                                   lambda a, b: (tir.const(0, a), tir.const(1, b)))
        S, P = te.compute((7,), lambda i: sum_prod((A[i, k], A[i, k]), axis=k), name="SP")
        k2 = te.reduce_axis((0, 13), name="k2")

        def fcombine(x, y):
            return (tir.Select(x[1] >= y[1], x[0], y[0]), tir.Select(x[1] >= y[1], x[1], y[1]))

        argmax = te.comm_reducer(fcombine, lambda a, b: (tir.const(-1, a), te.min_value(b)))
        idx, val = te.compute((7,), lambda i: argmax((k2.var, A[i, k2]), axis=k2), name="AM")
        s = te.create_schedule([S.op, idx.op])
        ko, ki = s[S].split(k, 4)
        s.rfactor(S, ki)
        IL, VL = s.cache_write([idx, val], "local")
        s[IL].compute_at(s[idx], idx.op.axis[0])
        return s, [A, S, P, idx, val]

    def ref(a):
        a64 = a.astype("float64")
        return [a64.sum(1), a64.prod(1), a.argmax(1).astype("int32"), a.max(1)]

    check(sched, ref, rtol=1e-5, atol=1e-6)


def test_binds_with_symbolic_strides():
    """An argument bound to a Buffer with a symbolic row stride: read off the array passed."""
    from tvmpy.tir import decl_buffer

    n = te.var("n")
    s_a = te.var("sA")
    A = te.placeholder((n, 5), name="A")
    B = te.compute((n, 5), lambda i, j: A[i, j] * 2.0, name="B")
    s = te.create_schedule(B.op)
    io, ii = s[B].split(B.op.axis[1], 4)
    s[B].vectorize(ii)
    binds = {A: decl_buffer((n, 5), "float32", "A", strides=[s_a, 1])}
    assert "A[i * sA" in str(tvm.lower(s, [A, B], binds=binds))
    big = np.random.default_rng(0).uniform(-1, 1, (6, 9)).astype("float32")
    for target in TARGETS:
        f = tvm.build(s, [A, B], target=target, binds=binds)
        for a in (big[:, :5], np.ascontiguousarray(big[:, :5]), big[::-2, 2:7], big[:1, :5]):
            b = np.full(a.shape, np.nan, "float32")
            f(a, b)
            np.testing.assert_array_equal(b, a * 2, err_msg=f"{target} strides {a.strides}")
