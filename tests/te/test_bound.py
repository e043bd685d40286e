"""Bound inference: the range of every loop, through split/fuse relations and compute_at."""

from __future__ import annotations

import pytest

from tvmpy import te, tir
from tvmpy.arith import simplify
from tvmpy.ir.node import structural_equal
from tvmpy.te.bound import ScheduleView, infer_bound


def _ext(b, iv):
    e = simplify(b.ranges[iv].extent)
    return e.value if isinstance(e, tir.IntImm) else e


def _bounds(s, args=()):
    view = ScheduleView(s)
    return infer_bound(view, [view.stage_of(t) for t in args])


def test_split_and_fuse_ranges():
    A = te.placeholder((10, 6), name="A")
    B = te.compute((10, 6), lambda i, j: A[i, j], name="B")
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=4)
    s[B].reorder(xo, B.op.axis[1], xi)
    jo, ji = s[B].split(B.op.axis[1], nparts=4)
    f = s[B].fuse(jo, ji)
    b = _bounds(s)
    assert (_ext(b, xo), _ext(b, xi)) == (3, 4)
    assert (_ext(b, jo), _ext(b, ji), _ext(b, f)) == (4, 2, 8)


def test_compute_at_region_is_what_the_consumer_reads():
    A = te.placeholder((20,), name="A")
    B = te.compute((20,), lambda i: A[i] * 2.0, name="B")
    C = te.compute((16,), lambda i: B[i] + B[i + 4], name="C")
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=4)
    s[B].compute_at(s[C], xo)
    b = _bounds(s)
    r = b.ranges[B.op.axis[0]]
    assert _ext(b, B.op.axis[0]) == 8
    # the region starts at xo * 4: it moves with the enclosing loop
    assert structural_equal(simplify(r.min - xo.var * 4), tir.const(0))


def test_compute_at_inner_loop_gives_single_point():
    A = te.placeholder((5, 7), name="A")
    B = te.compute((5, 7), lambda i, j: A[i, j] * 2.0, name="B")
    C = te.compute((5, 7), lambda i, j: B[i, j] + 1.0, name="C")
    s = te.create_schedule(C.op)
    s[B].compute_at(s[C], C.op.axis[1])
    b = _bounds(s)
    assert (_ext(b, B.op.axis[0]), _ext(b, B.op.axis[1])) == (1, 1)
    s[B].compute_at(s[C], C.op.axis[0])
    b = _bounds(s)
    assert (_ext(b, B.op.axis[0]), _ext(b, B.op.axis[1])) == (1, 7)


@pytest.mark.parametrize("memo", [True, False])
def test_compute_at_under_fused_then_split_thread_is_one_point(memo):
    """A local stage attached at the thread of ``split(fuse(c, p), 32)``: one (c, p) per thread,
    so its region is the 3 values of one point (was 3 x 40: the split's pass-up returned equal
    but distinct bounds for the fused point and the fuse relaxed ``p``; whether they were the
    same object depended on the simplifier memo, so a process's second build differed from its
    first: GPU Winograd's transforms got 3072-301,056-float local arrays)."""
    from tvmpy.arith import simplify_memo

    def region():
        A = te.placeholder((6, 40), name="A")
        B = te.compute((6, 3, 40), lambda c, k, p: A[c, p] * (k + 1.0), name="B")
        C = te.compute((6, 40), lambda c, p: B[c, 0, p] + B[c, 1, p] + B[c, 2, p], name="C")
        s = te.create_schedule(C.op)
        bx, tx = s[C].split(s[C].fuse(*s[C].op.axis), factor=32)
        s[C].bind(bx, te.thread_axis("blockIdx.x"))
        s[C].bind(tx, te.thread_axis("threadIdx.x"))
        s[B].set_scope("local")
        s[B].compute_at(s[C], tx)
        b = _bounds(s)
        return [_ext(b, ax) for ax in B.op.axis]

    saved = simplify_memo._enabled
    simplify_memo._enabled = memo
    try:
        assert region() == [1, 3, 1]
        assert region() == [1, 3, 1]  # a second build in the process, as well
    finally:
        simplify_memo._enabled = saved


def test_root_stage_covers_union_of_consumers():
    A = te.placeholder((12,), name="A")
    B = te.compute((12,), lambda i: A[i] * 2.0, name="B")
    C = te.compute((4,), lambda i: B[i + 1], name="C")
    D = te.compute((4,), lambda i: B[i + 6] + C[i], name="D")
    s = te.create_schedule(D.op)
    b = _bounds(s)
    r = b.ranges[B.op.axis[0]]
    assert simplify(r.min).value == 1 and _ext(b, B.op.axis[0]) == 9


def test_outputs_and_root_args_cover_their_whole_shape():
    A = te.placeholder((12,), name="A")
    B = te.compute((12,), lambda i: A[i] * 2.0, name="B")
    C = te.compute((4,), lambda i: B[i + 1], name="C")
    s = te.create_schedule(C.op)
    assert _ext(_bounds(s), B.op.axis[0]) == 4
    assert _ext(_bounds(s, [A, B, C]), B.op.axis[0]) == 12


def test_conv_like_window_through_reduction_loops():
    A = te.placeholder((12,), name="A")
    P = te.compute((12,), lambda i: A[i] + 0.0, name="P")
    r = te.reduce_axis((0, 3), name="r")
    C = te.compute((10,), lambda i: te.sum(P[i + r], axis=r), name="C")
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=5)
    s[P].compute_at(s[C], xo)
    assert _ext(_bounds(s), P.op.axis[0]) == 7  # 5 outputs + 3-wide window - 1
    s[P].compute_at(s[C], r)
    assert _ext(_bounds(s), P.op.axis[0]) == 1


def test_fused_consumer_relaxes_both_parts():
    A = te.placeholder((4, 6), name="A")
    B = te.compute((4, 6), lambda i, j: A[i, j] * 2.0, name="B")
    C = te.compute((4, 6), lambda i, j: B[i, j] + 1.0, name="C")
    s = te.create_schedule(C.op)
    f = s[C].fuse(*C.op.axis)
    fo, fi = s[C].split(f, factor=6)
    s[B].compute_at(s[C], fo)
    b = _bounds(s)
    assert (_ext(b, B.op.axis[0]), _ext(b, B.op.axis[1])) == (1, 6)
    s2 = te.create_schedule(C.op)
    f = s2[C].fuse(*C.op.axis)
    fo, fi = s2[C].split(f, factor=4)
    s2[B].compute_at(s2[C], fo)
    b = _bounds(s2)
    # 4 consecutive fused indices may straddle two rows: rows [f*4//6, (f*4+3)//6], all columns
    assert _ext(b, B.op.axis[1]) == 6


def test_symbolic_extent_split():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i], name="B")
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=8)
    b = _bounds(s)
    assert _ext(b, xi) == 8
    assert structural_equal(simplify(b.ranges[xo].extent), simplify((n + 7) // 8))


def test_shared_cache_relaxes_thread_loops_local_does_not():
    A = te.placeholder((64, 8), name="A")
    B = te.compute((64, 8), lambda i, j: A[i, j] * 2.0, name="B")
    s = te.create_schedule(B.op)
    AS = s.cache_read(A, "shared", [B])
    AL = s.cache_read(AS, "local", [B])
    bx, xi = s[B].split(B.op.axis[0], factor=16)
    tx, xii = s[B].split(xi, factor=4)
    s[B].bind(bx, te.thread_axis("blockIdx.x"))
    s[B].bind(tx, te.thread_axis("threadIdx.x"))
    s[AS].compute_at(s[B], tx)
    s[AL].compute_at(s[B], tx)
    b = _bounds(s)
    # shared: the whole block's tile (4 threads x 4 rows); local: this thread's 4 rows
    assert _ext(b, AS.op.axis[0]) == 16
    assert _ext(b, AL.op.axis[0]) == 4


def _clipped_case(n: int):
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0 + 1.0, name="B")
    h = n // 2
    # each branch reads inside B, but interval arithmetic, which ignores the condition, sees
    # the union [-(n - h), n + h - 1]: past both ends of B's n elements
    C = te.compute((n,), lambda i: tir.if_then_else(i < h, B[i + (n - h)], B[i - h]), name="C")
    return A, B, C


def test_root_region_past_the_domain_is_cut_to_the_domain():
    for n in (7, 8, 1, 2):
        _, B, C = _clipped_case(n)
        s = te.create_schedule(C.op)
        b = _bounds(s)
        r = b.ranges[B.op.axis[0]]
        assert simplify(r.min).value == 0 and _ext(b, B.op.axis[0]) == n, n


def test_root_region_cut_to_the_domain_computes_the_right_values():
    import numpy as np

    import tvmpy as tvm

    for n in (7, 8, 1):
        A, B, C = _clipped_case(n)
        s = te.create_schedule(C.op)
        f = tvm.build(s, [A, C], "llvm")
        a = np.random.default_rng(n).uniform(-1, 1, n).astype("float32")
        c = tvm.nd.array(np.zeros(n, "float32"))
        f(tvm.nd.array(a), c)
        h = n // 2
        ref = np.concatenate([a[n - h:], a[:n - h]]) * 2 + 1
        np.testing.assert_allclose(c.numpy(), ref, rtol=1e-6)


def test_split_factor_past_its_parent_runs_the_parent_extent():
    """A stage attached inside a tile narrower than its own split factors (the auto-scheduler's
    follow-splits): the factor loop runs the parent's extent, not the factor (TVM's tightened
    PassDownDomain); nparts alike. Root stages and symbolic parents keep the factor."""
    A = te.placeholder((30, 24), name="A")
    B = te.compute((30, 24), lambda i, j: A[i, j] * 2.0, name="B")
    C = te.compute((30, 24), lambda i, j: B[i, j] + 1.0, name="C")
    s = te.create_schedule(C.op)
    co, ci = s[C].split(C.op.axis[0], factor=3)
    s[B].compute_at(s[C], co)
    bo, bi = s[B].split(B.op.axis[0], factor=14)  # the region is 3 rows
    jo, ji = s[B].split(B.op.axis[1], nparts=30)  # 24 columns in 30 parts
    b = _bounds(s)
    assert (_ext(b, B.op.axis[0]), _ext(b, bo), _ext(b, bi)) == (3, 1, 3)
    assert (_ext(b, jo), _ext(b, ji)) == (24, 1)
    # a root stage keeps its factor: its loops are what producers attached to it compute
    R = te.compute((5,), lambda i: A[i, 0], name="R")
    sr = te.create_schedule(R.op)
    ro, ri = sr[R].split(R.op.axis[0], factor=8)
    assert (_ext(_bounds(sr), ro), _ext(_bounds(sr), ri)) == (1, 8)
    # not provably smaller: the factor stays
    n = te.var("n")
    A2 = te.placeholder((n,), name="A2")
    B2 = te.compute((n,), lambda i: A2[i], name="B2")
    s2 = te.create_schedule(B2.op)
    xo, xi = s2[B2].split(B2.op.axis[0], factor=8)
    assert _ext(_bounds(s2), xi) == 8


@pytest.mark.parametrize("rows,factor", [(3, 14), (5, 5), (1, 4), (7, 3)])
def test_tightened_split_lowers_and_computes_the_right_values(rows, factor):
    """B's rows split by ``factor`` inside C's tiles of ``rows`` (the last tile partial):
    a factor past the tile loops the tile's rows only, and the values are right."""
    import numpy as np

    import tvmpy as tvm

    A = te.placeholder((rows * 4 + 1, 6), name="A")
    B = te.compute(A.shape, lambda i, j: A[i, j] * 2.0, name="B")
    C = te.compute(A.shape, lambda i, j: B[i, j] - 1.0, name="C")
    s = te.create_schedule(C.op)
    co, ci = s[C].split(C.op.axis[0], factor=rows)
    s[B].compute_at(s[C], co)
    s[B].split(B.op.axis[0], factor=factor)
    txt = str(tvm.lower(s, [A, C]))
    if factor > rows:
        assert f"range(0, {factor})" not in txt, txt
    f = tvm.build(s, [A, C], "llvm")
    a = np.random.default_rng(rows).uniform(-1, 1, [int(d) for d in A.shape]).astype("float32")
    c = tvm.nd.array(np.zeros(a.shape, "float32"))
    f(tvm.nd.array(a), c)
    np.testing.assert_allclose(c.numpy(), a * 2 - 1, rtol=1e-6)


def test_thread_bound_split_keeps_its_factor():
    """A split whose loop is bound to a thread keeps its extent (the launched threads)."""
    A = te.placeholder((64, 8), name="A")
    B = te.compute((64, 8), lambda i, j: A[i, j] * 2.0, name="B")
    C = te.compute((64, 8), lambda i, j: B[i, j] + 1.0, name="C")
    s = te.create_schedule(C.op)
    bx, xi = s[C].split(C.op.axis[0], factor=2)
    s[C].bind(bx, te.thread_axis("blockIdx.x"))
    s[B].compute_at(s[C], bx)
    bo, bi = s[B].split(B.op.axis[0], factor=32)
    s[B].bind(bi, te.thread_axis("threadIdx.x"))
    b = _bounds(s)
    assert _ext(b, B.op.axis[0]) == 2
    assert _ext(b, bi) == 32
