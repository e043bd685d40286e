"""Every schedule primitive, alone and combined, on every backend (llvm, c, interp) against numpy.

Shapes are primes (7, 13, 31), size-1 axes and symbolic sizes (te.var) run at several values
with one build per backend.
"""

from __future__ import annotations

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import te, tir

from .util import TARGETS, check, lowered

SYM = [{"n": 1}, {"n": 7}, {"n": 31}]


def ew2(n=7, m=13, dtype="float32"):
    """B = A * 2 + 1 over (n, m)."""
    A = te.placeholder((n, m), dtype=dtype, name="A")
    B = te.compute((n, m), lambda i, j: A[i, j] * 2.0 + 1.0, name="B")
    return A, B


def ref_ew2(a, **_):
    return a * 2 + 1


def chain(n=7, m=13):
    """A -> B = A + 1 -> C = B * 3 (an intermediate stage B)."""
    A = te.placeholder((n, m), name="A")
    B = te.compute((n, m), lambda i, j: A[i, j] + 1.0, name="B")
    C = te.compute((n, m), lambda i, j: B[i, j] * 3.0, name="C")
    return A, B, C


def ref_chain(a, **_):
    return (a + 1) * 3


def matmul(n=7, m=13, l=31):
    A = te.placeholder((n, l), name="A")
    B = te.placeholder((l, m), name="B")
    k = te.reduce_axis((0, l), name="k")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return A, B, C, k


def ref_mm(a, b, **_):
    return (a.astype("float64") @ b.astype("float64")).astype("float32")


MM_TOL = {"rtol": 1e-5, "atol": 1e-5}


# ---- split -----------------------------------------------------------------------------------
SPLITS = [("factor", 4), ("factor", 7), ("factor", 1), ("factor", 40),
          ("nparts", 3), ("nparts", 1), ("nparts", 40)]


@pytest.mark.parametrize("kind,amount", SPLITS, ids=[f"{k}{a}" for k, a in SPLITS])
def test_split(kind, amount):
    """Split both a symbolic axis and the prime axis 13: divisible or not, 1, > extent."""
    def sched():
        n = te.var("n")
        A, B = ew2(n, 13)
        s = te.create_schedule(B.op)
        s[B].split(B.op.axis[0], **{kind: amount})
        s[B].split(B.op.axis[1], **{kind: amount})
        return s, [A, B]

    check(sched, ref_ew2, SYM)


def test_split_twice_and_symbolic_factor():
    def sched():
        n = te.var("n")
        f = te.var("f")
        A, B = ew2(31, n)
        s = te.create_schedule(B.op)
        xo, xi = s[B].split(B.op.axis[0], factor=5)
        xio, xii = s[B].split(xi, factor=2)
        s[B].split(B.op.axis[1], factor=f)
        return s, [A, B, f]

    check(sched, ref_ew2, [{"n": 7, "f": 3}, {"n": 1, "f": 5}, {"n": 13, "f": 13}])


# ---- tile / fuse / reorder -------------------------------------------------------------------
@pytest.mark.parametrize("factors", [(4, 5), (1, 13), (8, 16)])
def test_tile(factors):
    def sched():
        n = te.var("n")
        A, B = ew2(n, 13)
        s = te.create_schedule(B.op)
        s[B].tile(B.op.axis[0], B.op.axis[1], *factors)
        return s, [A, B]

    check(sched, ref_ew2, SYM)


def test_fuse_all_with_size1_axes():
    def sched():
        A = te.placeholder((7, 1, 13), name="A")
        B = te.compute((7, 1, 13), lambda i, j, k: A[i, j, k] - 0.5, name="B")
        s = te.create_schedule(B.op)
        s[B].fuse(*B.op.axis)
        return s, [A, B]

    check(sched, lambda a: a - 0.5)


def test_fuse_then_split():
    def sched():
        n = te.var("n")
        A, B = ew2(n, 13)
        s = te.create_schedule(B.op)
        f = s[B].fuse(*B.op.axis)
        fo, fi = s[B].split(f, factor=8)
        s[B].split(fo, nparts=3)
        return s, [A, B]

    check(sched, ref_ew2, SYM)


def test_split_then_fuse():
    def sched():
        n = te.var("n")
        A, B = ew2(n, 13)
        s = te.create_schedule(B.op)
        io, ii = s[B].split(B.op.axis[0], factor=3)
        jo, ji = s[B].split(B.op.axis[1], factor=4)
        s[B].reorder(io, jo, ii, ji)
        s[B].fuse(io, jo)
        s[B].fuse(ii, ji)
        return s, [A, B]

    check(sched, ref_ew2, SYM)


def test_reorder_3d():
    def sched():
        A = te.placeholder((7, 13, 5), name="A")
        B = te.compute((7, 13, 5), lambda i, j, k: A[i, j, k] * A[i, j, k], name="B")
        s = te.create_schedule(B.op)
        i, j, k = B.op.axis
        jo, ji = s[B].split(j, factor=4)
        s[B].reorder(k, ji, i, jo)
        return s, [A, B]

    check(sched, lambda a: a * a)


def test_reorder_reduction_outermost():
    def sched():
        A, B, C, k = matmul()
        s = te.create_schedule(C.op)
        i, j = C.op.axis
        s[C].reorder(k, j, i)
        return s, [A, B, C]

    check(sched, ref_mm, **MM_TOL)


# ---- compute_at / inline / root --------------------------------------------------------------
def _stencil(n):
    """B = A + 1 (n+1 rows), C[i, j] = B[i, j] + B[i + 1, j]: the consumer needs a halo of B."""
    A = te.placeholder((n + 1, 13), name="A")
    B = te.compute((n + 1, 13), lambda i, j: A[i, j] + 1.0, name="B")
    C = te.compute((n, 13), lambda i, j: B[i, j] * B[i + 1, j], name="C")
    return A, B, C


def _ref_stencil(a, **_):
    b = a + 1
    return b[:-1] * b[1:]


@pytest.mark.parametrize("level", range(4))
def test_compute_at_every_level(level):
    """compute_at of a stencil's producer at each loop of a tiled consumer (symbolic rows)."""
    def sched():
        n = te.var("n")
        A, B, C = _stencil(n)
        s = te.create_schedule(C.op)
        yo, xo, yi, xi = s[C].tile(C.op.axis[0], C.op.axis[1], 3, 4)
        s[B].compute_at(s[C], [yo, xo, yi, xi][level])
        return s, [A, C]

    check(sched, _ref_stencil, SYM)


@pytest.mark.parametrize("level", range(3))
def test_compute_at_reduction_consumer(level):
    """The producer of a matmul input, attached at i, j and the reduction axis k."""
    def sched():
        A = te.placeholder((7, 31), name="A")
        A2 = te.compute((7, 31), lambda i, k: A[i, k] * 0.5, name="A2")
        B = te.placeholder((31, 13), name="B")
        k = te.reduce_axis((0, 31), name="k")
        C = te.compute((7, 13), lambda i, j: te.sum(A2[i, k] * B[k, j], axis=k), name="C")
        s = te.create_schedule(C.op)
        s[A2].compute_at(s[C], [*C.op.axis, k][level])
        return s, [A, B, C]

    check(sched, lambda a, b: ref_mm(a * 0.5, b), **MM_TOL)


def test_compute_at_chain_of_three():
    def sched():
        A = te.placeholder((13,), name="A")
        B = te.compute((13,), lambda i: A[i] + 1.0, name="B")
        C = te.compute((13,), lambda i: B[i] * 2.0, name="C")
        D = te.compute((13,), lambda i: C[i] - 3.0, name="D")
        s = te.create_schedule(D.op)
        do, di = s[D].split(D.op.axis[0], factor=4)
        s[C].compute_at(s[D], do)
        s[B].compute_at(s[C], C.op.axis[0])
        return s, [A, D]

    check(sched, lambda a: (a + 1) * 2 - 3)


def test_compute_inline():
    def sched():
        A = te.placeholder((7, 13), name="A")
        V = te.placeholder((13,), name="V")
        B = te.compute((7, 13), lambda i, j: A[i, j] + V[j], name="B")  # broadcast read
        C = te.compute((7, 13), lambda i, j: B[i, j] * B[i, j], name="C")
        D = te.compute((7, 13), lambda i, j: C[i, j] + 1.0, name="D")
        s = te.create_schedule(D.op)
        s[B].compute_inline()
        s[C].compute_inline()
        return s, [A, V, D]

    check(sched, lambda a, v: (a + v) ** 2 + 1)


def test_compute_inline_into_reduction():
    def sched():
        A = te.placeholder((7, 31), name="A")
        A2 = te.compute((7, 31), lambda i, k: te.exp(A[i, k]), name="A2")
        k = te.reduce_axis((0, 31), name="k")
        C = te.compute((7,), lambda i: te.sum(A2[i, k], axis=k), name="C")
        s = te.create_schedule(C.op)
        s[A2].compute_inline()
        return s, [A, C]

    check(sched, lambda a: np.exp(a.astype("float64")).sum(1), rtol=1e-5)


def test_compute_root_after_compute_at():
    def sched():
        A, B, C = chain()
        s = te.create_schedule(C.op)
        s[B].compute_at(s[C], C.op.axis[1])
        s[B].compute_root()
        return s, [A, C]

    check(sched, ref_chain)


# ---- caches and scopes -----------------------------------------------------------------------
@pytest.mark.parametrize("scope", ["local", "shared", "global"])
def test_cache_read(scope):
    def sched():
        A, B, C, k = matmul()
        s = te.create_schedule(C.op)
        AA = s.cache_read(A, scope, [C])
        BB = s.cache_read(B, scope, [C])
        io, ii = s[C].split(C.op.axis[0], factor=3)
        s[AA].compute_at(s[C], io)
        s[BB].compute_at(s[C], k)
        return s, [A, B, C]

    check(sched, ref_mm, **MM_TOL)


def test_cache_write_elementwise_symbolic():
    def sched():
        n = te.var("n")
        A, B = ew2(n, 13)
        s = te.create_schedule(B.op)
        BL = s.cache_write(B, "local")
        xo, xi = s[B].split(B.op.axis[1], factor=4)
        s[BL].compute_at(s[B], xo)
        return s, [A, B]

    check(sched, ref_ew2, SYM)


def test_cache_write_reduction():
    def sched():
        A, B, C, k = matmul()
        s = te.create_schedule(C.op)
        CL = s.cache_write(C, "local")
        yo, xo, yi, xi = s[C].tile(C.op.axis[0], C.op.axis[1], 4, 4)
        s[CL].compute_at(s[C], xo)
        ko, ki = s[CL].split(s[CL].op.reduce_axis[0], factor=4)
        s[CL].reorder(ko, ki, *s[CL].op.axis)
        s[CL].vectorize(s[CL].op.axis[1])
        return s, [A, B, C]

    check(sched, ref_mm, **MM_TOL)


def test_cache_write_multi_output():
    def sched():
        A = te.placeholder((7, 13), name="A")
        B, C = te.compute((7, 13), lambda i, j: (A[i, j] + 1.0, A[i, j] * 3.0), name="BC")
        s = te.create_schedule(B.op)
        BL, CL = s.cache_write([B, C], "local")
        xo, xi = s[B].split(B.op.axis[0], factor=2)
        s[BL].compute_at(s[B], xo)
        return s, [A, B, C]

    check(sched, lambda a: [a + 1, a * 3])


@pytest.mark.parametrize("scope", ["local", "shared"])
def test_set_scope(scope):
    def sched():
        A, B, C = chain()
        s = te.create_schedule(C.op)
        s[B].set_scope(scope)
        s[B].compute_at(s[C], C.op.axis[0])
        return s, [A, C]

    check(sched, ref_chain)


def test_storage_align():
    def sched():
        A, B, C = chain(7, 13)
        s = te.create_schedule(C.op)
        s[B].storage_align(B.op.axis[0], 16, 3)
        return s, [A, C]

    check(sched, ref_chain)
    s, args = sched()
    text = lowered(s, args)
    assert "i * 19 + j" in text, text  # the row stride of B: 13 rounded up to 16 * k + 3


# ---- vectorize / unroll / parallel -----------------------------------------------------------
@pytest.mark.parametrize("factor", [8, 4, 5])
def test_vectorize_after_split_with_tail(factor):
    def sched():
        n = te.var("n")
        A, B = ew2(n, 13)
        s = te.create_schedule(B.op)
        jo, ji = s[B].split(B.op.axis[1], factor=factor)
        s[B].vectorize(ji)
        return s, [A, B]

    check(sched, ref_ew2, SYM)


@pytest.mark.parametrize("m", [7, 16, 1])
def test_vectorize_whole_axis(m):
    def sched():
        A, B = ew2(5, m)
        s = te.create_schedule(B.op)
        s[B].vectorize(B.op.axis[1])
        return s, [A, B]

    check(sched, ref_ew2)


def test_vectorize_strided_broadcast_and_transposed_reads():
    def sched():
        A = te.placeholder((7, 26), name="A")
        V = te.placeholder((7,), name="V")
        T = te.placeholder((13, 7), name="T")
        B = te.compute((7, 13), lambda i, j: A[i, 2 * j + 1] * V[i] + T[j, i], name="B")
        s = te.create_schedule(B.op)
        jo, ji = s[B].split(B.op.axis[1], factor=8)
        s[B].vectorize(ji)
        return s, [A, V, T, B]

    check(sched, lambda a, v, t: a[:, 1::2] * v[:, None] + t.T)


def test_vectorize_symbolic_extent_is_scalarized():
    def sched():
        n = te.var("n")
        A, B = ew2(3, n)
        s = te.create_schedule(B.op)
        s[B].vectorize(B.op.axis[1])
        return s, [A, B]

    check(sched, ref_ew2, SYM)


def test_vectorize_select_and_int_ops():
    def sched():
        A = te.placeholder((5, 13), "int32", name="A")
        B = te.compute((5, 13), lambda i, j: tir.Select(A[i, j] > 0, tir.floordiv(A[i, j], 3),
                                                        tir.floormod(A[i, j], 4) * j), name="B")
        s = te.create_schedule(B.op)
        s[B].vectorize(B.op.axis[1])
        return s, [A, B]

    j = np.arange(13)
    check(sched, lambda a: np.where(a > 0, a // 3, (a % 4) * j).astype("int32"))


@pytest.mark.parametrize("factor", [4, 13, 1])
def test_unroll(factor):
    def sched():
        n = te.var("n")
        A, B = ew2(n, 13)
        s = te.create_schedule(B.op)
        jo, ji = s[B].split(B.op.axis[1], factor=factor)
        s[B].unroll(ji)
        s[B].unroll(B.op.axis[0])  # symbolic extent: stays a loop
        return s, [A, B]

    check(sched, ref_ew2, SYM)


def test_parallel_outer_and_reduction():
    def sched():
        A, B, C, k = matmul()
        s = te.create_schedule(C.op)
        s[C].parallel(C.op.axis[0])
        return s, [A, B, C]

    check(sched, ref_mm, **MM_TOL)


def test_parallel_symbolic_fused():
    def sched():
        n = te.var("n")
        A, B = ew2(n, 13)
        s = te.create_schedule(B.op)
        f = s[B].fuse(*B.op.axis)
        fo, fi = s[B].split(f, factor=16)
        s[B].parallel(fo)
        s[B].vectorize(fi)
        return s, [A, B]

    check(sched, ref_ew2, SYM)


def test_nested_parallel_inner_runs_serially():
    def sched():
        A = te.placeholder((7, 13, 5), name="A")
        B = te.compute((7, 13, 5), lambda i, j, k: A[i, j, k] + 2.0, name="B")
        s = te.create_schedule(B.op)
        s[B].parallel(B.op.axis[0])
        s[B].parallel(B.op.axis[2])
        return s, [A, B]

    mods = check(sched, lambda a: a + 2)
    # one parallel region: the inner parallel loop runs serially inside it
    if "llvm" in mods:
        assert mods["llvm"].get_source("ll").count("call void @tvmpy_parallel_run") == 1
    if "c" in mods:
        assert mods["c"].get_source().count("omp parallel") == 1


def test_parallel_with_attached_producer():
    def sched():
        A, B, C = chain(31, 13)
        s = te.create_schedule(C.op)
        s[C].parallel(C.op.axis[0])
        s[B].compute_at(s[C], C.op.axis[0])
        return s, [A, C]

    check(sched, ref_chain)


def test_pragma_auto_unroll():
    def sched():
        A, B, C, k = matmul()
        s = te.create_schedule(C.op)
        ko, ki = s[C].split(k, factor=4)
        io, ii = s[C].split(C.op.axis[0], factor=4)
        s[C].pragma(io, "auto_unroll_max_step", 16)
        s[C].pragma(io, "unroll_explicit", True)
        return s, [A, B, C]

    check(sched, ref_mm, **MM_TOL)


# ---- rfactor ---------------------------------------------------------------------------------
@pytest.mark.parametrize("factor", [4, 5])
def test_rfactor_sum(factor):
    def sched():
        n = te.var("n")
        A = te.placeholder((7, n), name="A")
        k = te.reduce_axis((0, n), name="k")
        B = te.compute((7,), lambda i: te.sum(A[i, k], axis=k), name="B")
        s = te.create_schedule(B.op)
        ko, ki = s[B].split(k, factor=factor)
        BF = s.rfactor(B, ki)
        s[B].parallel(s[B].op.axis[0])  # B's stage now has a new op (as in TVM)
        s[BF].vectorize(BF.op.axis[0])
        return s, [A, B]

    check(sched, lambda a, **_: a.astype("float64").sum(1), SYM, rtol=1e-5, atol=1e-5)


def _argmax():
    def fcombine(x, y):
        lhs = tir.Select(x[1] >= y[1], x[0], y[0])
        rhs = tir.Select(x[1] >= y[1], x[1], y[1])
        return lhs, rhs

    def fidentity(t0, t1):
        return tir.const(-1, t0), te.min_value(t1)

    return te.comm_reducer(fcombine, fidentity, name="argmax")


def test_rfactor_argmax_tuple_reducer():
    def sched():
        argmax = _argmax()
        A = te.placeholder((7, 31), name="A")
        k = te.reduce_axis((0, 31), name="k")
        idx, val = te.compute((7,), lambda i: argmax((k.var, A[i, k]), axis=k), name="T")
        s = te.create_schedule(idx.op)
        ko, ki = s[idx].split(k, factor=4)
        s.rfactor(idx, ki)
        return s, [A, idx, val]

    # ties are measure-zero on random floats; the first maximum is kept when x >= y
    check(sched, lambda a: [a.argmax(1).astype("int32"), a.max(1)])


# ---- threads ---------------------------------------------------------------------------------
def _bound(tags):
    A, B = ew2(8, 16)
    s = te.create_schedule(B.op)
    bx, tx = s[B].split(B.op.axis[0], factor=4)
    s[B].bind(bx, te.thread_axis(tags[0]))
    s[B].bind(tx, te.thread_axis(tags[1]))
    return s, [A, B]


def test_bind_gpu_axes_lower_with_attrs_and_cpu_refuses():
    s, args = _bound(("blockIdx.x", "threadIdx.x"))
    text = lowered(s, args)
    assert "thread_extent" in text and "blockIdx.x" in text and "threadIdx.x" in text, text
    for target in [t for t in TARGETS if t != "interp"]:
        with pytest.raises(Exception, match="thread"):
            tvm.build(s, args, target=target)


def test_vthread_lowers_and_runs():
    def sched():
        A, B = ew2(8, 13)
        s = te.create_schedule(B.op)
        vo, vi = s[B].split(B.op.axis[0], nparts=2)
        s[B].bind(vo, te.thread_axis("vthread"))
        wo, wi = s[B].split(B.op.axis[1], nparts=3)
        s[B].bind(wo, te.thread_axis("vthread", name="vy"))
        return s, [A, B]

    check(sched, ref_ew2)
    s, args = sched()
    assert "virtual_thread" not in lowered(s, args)  # injected away


def test_vthread_with_local_cache():
    def sched():
        A, B, C, k = matmul(8, 12, 31)
        s = te.create_schedule(C.op)
        CL = s.cache_write(C, "local")
        vo, vi = s[C].split(C.op.axis[0], nparts=2)
        s[C].bind(vo, te.thread_axis("vthread"))
        s[CL].compute_at(s[C], vo)
        return s, [A, B, C]

    check(sched, ref_mm, **MM_TOL)


def test_double_buffer():
    def sched():
        A, B, C, k = matmul(7, 13, 31)
        s = te.create_schedule(C.op)
        AA = s.cache_read(A, "shared", [C])
        ko, ki = s[C].split(k, factor=4)
        s[C].reorder(ko, *C.op.axis, ki)
        s[AA].compute_at(s[C], ko)
        s[AA].double_buffer()
        return s, [A, B, C]

    check(sched, ref_mm, **MM_TOL)
    text = lowered(*sched())
    # halves of 7 x 4 floats, the second starting 32-byte aligned (shared): 32 elements apart
    assert "(k.outer + 1) % 2 * 32" in text and "k.outer % 2 * 32" in text, text


# ---- tensorize (one cross-backend case; tests/te/test_tensorize.py has the rest) --------------
def test_tensorize_gemm_all_backends():
    from tvmpy.contrib.microkernel import gemm_intrin

    def sched():
        A = te.placeholder((16, 24), name="A")
        B = te.placeholder((8, 24), name="B")
        k = te.reduce_axis((0, 24), name="k")
        C = te.compute((16, 8), lambda i, j: te.sum(A[i, k] * B[j, k], axis=k), name="C")
        s = te.create_schedule(C.op)
        xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], 8, 8)
        ko, ki = s[C].split(k, factor=8)
        s[C].reorder(xo, yo, ko, xi, yi, ki)
        s[C].tensorize(xi, gemm_intrin(8, 8, 8, "nk"))
        return s, [A, B, C]

    check(sched, lambda a, b: ref_mm(a, b.T), rtol=1e-4, atol=1e-4)


# ---- combinations ----------------------------------------------------------------------------
def test_combined_tiled_matmul_symbolic():
    """tile + cache_write + compute_at + reorder + vectorize + unroll + parallel, symbolic n."""
    def sched():
        n = te.var("n")
        A, B, C, k = matmul(n, 13, 31)
        s = te.create_schedule(C.op)
        CL = s.cache_write(C, "local")
        yo, xo, yi, xi = s[C].tile(C.op.axis[0], C.op.axis[1], 4, 8)
        s[C].parallel(yo)
        s[CL].compute_at(s[C], xo)
        i, j = s[CL].op.axis
        ko, ki = s[CL].split(s[CL].op.reduce_axis[0], factor=4)
        s[CL].reorder(ko, ki, i, j)
        s[CL].unroll(ki)
        s[CL].vectorize(j)
        s[C].vectorize(xi)
        return s, [A, B, C]

    check(sched, ref_mm, SYM, **MM_TOL)


def test_softmax_like_multi_stage():
    def sched():
        A = te.placeholder((7, 13), name="A")
        k = te.reduce_axis((0, 13), name="k")
        M = te.compute((7,), lambda i: te.max(A[i, k], axis=k), name="M")
        E_ = te.compute((7, 13), lambda i, j: te.exp(A[i, j] - M[i]), name="E")
        k2 = te.reduce_axis((0, 13), name="k2")
        S = te.compute((7,), lambda i: te.sum(E_[i, k2], axis=k2), name="S")
        O = te.compute((7, 13), lambda i, j: E_[i, j] / S[i], name="O")
        s = te.create_schedule(O.op)
        s[M].compute_at(s[O], O.op.axis[0])
        s[E_].compute_at(s[O], O.op.axis[0])
        s[S].compute_at(s[O], O.op.axis[0])
        s[O].parallel(O.op.axis[0])
        return s, [A, O]

    def ref(a):
        e = np.exp(a - a.max(1, keepdims=True))
        return e / e.sum(1, keepdims=True)

    check(sched, ref, rtol=1e-5, atol=1e-6)


def test_pragma_auto_unroll_effect_in_lowered_ir():
    def sched(step):
        A = te.placeholder((8, 4), name="A")
        B = te.compute((8, 4), lambda i, j: A[i, j] * 2.0, name="B")
        s = te.create_schedule(B.op)
        io, ii = s[B].split(B.op.axis[0], factor=2)
        s[B].pragma(io, "auto_unroll_max_step", step)
        return s, [A, B]

    text16 = lowered(*sched(16))
    assert "for i.inner" not in text16 and "for j" not in text16, text16  # 2 * 4 <= 16 unrolled
    text4 = lowered(*sched(4))
    assert "for i.inner" in text4 and "for j" not in text4, text4  # only the extent-4 loop
    check(lambda: sched(16), lambda a: a * 2)


def test_unroll_of_symbolic_extent_builds_quietly(capfd):
    n = te.var("n")
    A, B = ew2(n, 13)
    s = te.create_schedule(B.op)
    s[B].unroll(B.op.axis[0])
    tvm.build(s, [A, B], target="llvm")
    assert "loop not unrolled" not in capfd.readouterr().err
