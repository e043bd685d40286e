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


# --- the budget: guards at N nested levels (issue 25 point 2) ---------------------------------

def _nested_guards(shape):
    """A padded stencil over len(shape) axes, each split twice non-divisibly (3, then 2), the
    padding stage computed inside the tile: ``likely`` guards at every level."""
    import tvmpy as tvm
    from tvmpy import te

    A = te.placeholder(tuple(shape), name="A")
    P = te.compute(tuple(s + 2 for s in shape), lambda *i: tir.if_then_else(
        tir.all(*[tir.all(v >= 1, v < s + 1) for v, s in zip(i, shape)]),
        A(*[v - 1 for v in i]), 0.0), name="P")
    B = te.compute(tuple(shape), lambda *i: P(*i) + P(*[v + 2 for v in i]), name="B")
    s = te.create_schedule(B.op)
    levels = []
    for ax in B.op.axis:
        o, i = s[B].split(ax, factor=3)
        oo, oi = s[B].split(o, factor=2)
        levels.append((oo, oi, i))
    s[B].reorder(*[lv[0] for lv in levels], *[lv[1] for lv in levels], *[lv[2] for lv in levels])
    s[P].compute_at(s[B], levels[-1][1])
    return tvm, s, [A, B]


def _stencil_ref(a):
    import numpy as np

    p = np.pad(a, 1)
    return p[tuple(slice(0, n) for n in a.shape)] + p[tuple(slice(2, n + 2) for n in a.shape)]


def _partitioned(n_levels, max_growth="default"):
    """(statements before LoopPartition, after it, partitioned func) for the N-level stencil."""
    from tvmpy.tir.transform.loop_partition import stmt_count

    tvm, s, args = _nested_guards([7 + 2 * k for k in range(n_levels)])
    seen = []

    def spy(f):
        g = loop_partition_func(f) if max_growth == "default" else loop_partition_func(f, max_growth)
        seen.append((stmt_count(f.body), stmt_count(g.body), g))
        return g

    with tvm.transform.PassContext(disabled_pass=["LoopPartition"],
                                   config={"tir.add_lower_pass": [(1, spy)]}):
        tvm.lower(s, args)
    return seen[0]


@pytest.mark.parametrize("n_levels", [1, 2, 3, 4, 5, 6])
def test_budget_nested_guards_grow_linearly(n_levels):
    """Unbounded, the parts' inner loops are partitioned again: 34, 141, 593, 2507 statements
    for 1..4 levels (x4.2 a level). With the budget the count stays linear in the depth."""
    before, after, g = _partitioned(n_levels)
    assert before <= 11 + 4 * n_levels  # the schedule itself is linear
    assert after <= 64 + 40 * n_levels, (n_levels, before, after)
    assert "likely" in str(g) or n_levels == 1  # the budget left some guards (edge parts)


def test_budget_unbounded_is_exponential():
    """The test above would fail without the budget (``max_growth=None``: the full partition)."""
    before, after, _ = _partitioned(3, None)
    assert after > 64 + 40 * 3, after


@pytest.mark.parametrize("n_levels,max_growth", [(1, "default"), (2, 100), (3, 100)])
def test_budget_not_hit_changes_nothing(n_levels, max_growth):
    """Below the budget the result is the full partition, statement for statement."""
    _, n_full, full = _partitioned(n_levels, None)
    _, n_budget, budget = _partitioned(n_levels, max_growth)
    assert n_full == n_budget and str(full) == str(budget)


@pytest.mark.parametrize("shape,max_growth", [((5, 7, 4), "default"), ((4, 5, 7, 5), "default"),
                                              ((1, 5, 3, 7), "default"), ((5, 7, 4), 1.0),
                                              ((4, 5, 7, 5), 1.0), ((5, 7, 4), None)])
def test_budget_nested_guards_numpy(shape, max_growth):
    """Built (LoopPartition budgeted: edge-depth fallback, the lenient run, unbounded) and
    compared with numpy."""
    import numpy as np

    tvm, s, args = _nested_guards(list(shape))
    cfg = {} if max_growth == "default" else {"tir.LoopPartition.max_growth": max_growth}
    with tvm.transform.PassContext(config=cfg):
        f = tvm.build(s, args)
    a = np.random.default_rng(1).uniform(0.5, 2.0, shape).astype("float32")
    b = tvm.nd.array(np.zeros(shape, "float32"))
    f(tvm.nd.array(a), b)
    np.testing.assert_allclose(b.numpy(), _stencil_ref(a), rtol=1e-6)


@pytest.mark.parametrize("max_growth", [1.0, 1.5, 2.5])
def test_budget_lenient_run_keeps_guards(monkeypatch, max_growth):
    """A budget too small even for the main parts (no floor): loops whose parts would pass it
    stay whole (guards kept); the result fits and is still correct (interpreted)."""
    from tvmpy.tir.transform import loop_partition as lp

    monkeypatch.setattr(lp, "MIN_BUDGET", 0)
    runs = []
    init = lp._Partitioner.__init__

    def spy_init(self, *a, **k):
        runs.append(k.get("strict", True))
        init(self, *a, **k)

    monkeypatch.setattr(lp._Partitioner, "__init__", spy_init)
    tvm, s, args = _nested_guards([4, 5, 7])
    seen = []

    def spy(fn):
        g = loop_partition_func(fn, max_growth)
        seen.append((fn, g))
        return g

    with tvm.transform.PassContext(disabled_pass=["LoopPartition"],
                                   config={"tir.add_lower_pass": [(1, spy)]}):
        tvm.lower(s, args)
    fn, g = seen[0]
    assert runs[-1] is False  # the lenient run made the result
    assert lp.stmt_count(g.body) <= max_growth * lp.stmt_count(fn.body)
    assert_same(fn, g)


@pytest.mark.parametrize("bad", [0, -2, "8"])
def test_budget_bad_config_is_an_error(bad):
    import tvmpy as tvm

    with pytest.raises(ValueError, match="max_growth"):
        with tvm.transform.PassContext(config={"tir.LoopPartition.max_growth": bad}):
            loop_partition_func(_split_copy(10, 4))
