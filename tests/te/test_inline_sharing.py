"""Inlining shares repeated reads (issue 10: a quantized ViT never finished relay.build).

Plain substitution copies an inlined stage once per read, so a chain of stages each read k
times by the next grows as k**n; ``te.inline.InlineScope`` binds such values once with Let.
The tests make the old behaviour obviously pathological (2**40 / 8**12 copies) and assert the
lowered IR stays linear in the chain's length, and that the results are right.
"""

from __future__ import annotations

import numpy as np
from te_check import check

from tvmpy import te, tir
from tvmpy.te.schedule_ops import schedule_to_primfunc
from tvmpy.tir import expr as E
from tvmpy.tir.functor import post_order_visit


def _size(node) -> int:
    n = [0]
    post_order_visit(node, lambda _: n.__setitem__(0, n[0] + 1))
    return n[0]


def _twice(p):
    return lambda i, j: p[i, j] * 0.5 + p[i, j]


def _chain(n: int):
    """B_k = B_{k-1} * 0.5 + B_{k-1} (each stage reads the previous one twice)."""
    A = te.placeholder((7, 5), name="A")
    t = A
    stages = []
    for k in range(n):
        t = te.compute(t.shape, _twice(t), name=f"B{k}")
        stages.append(t)
    out = te.compute(t.shape, lambda i, j: t[i, j] + 1.0, name="out")
    s = te.create_schedule(out.op)
    for st in stages:
        s[st].compute_inline()
    return A, out, s


def test_repeated_reads_are_bound_once():
    n = 40  # plain substitution: 2**40 copies of A[i, j]
    A, out, s = _chain(n)
    f = schedule_to_primfunc(s, [A, out])
    assert _size(f.body) < 20 * n
    lets = []
    post_order_visit(f.body, lambda x: lets.append(x) if isinstance(x, E.Let) else None)
    # each stage read twice bound once; the last (read once) and A[i, j] (a leaf) are not
    assert len(lets) == n - 1


def test_repeated_reads_compute_the_same_values():
    A, out, s = _chain(6)
    check(s, [A, out], lambda a: _ref_chain(a, 6) + 1.0)


def _ref_chain(a, n):
    for _ in range(n):
        a = a * 0.5 + a
    return a


def test_single_reads_are_not_bound():
    A = te.placeholder((8,), name="A")
    B = te.compute((8,), lambda i: A[i] * 2.0, name="B")
    C = te.compute((8,), lambda i: B[i] + 1.0, name="C")
    s = te.create_schedule(C.op)
    s[B].compute_inline()
    lets = []
    post_order_visit(schedule_to_primfunc(s, [A, C]).body,
                     lambda x: lets.append(x) if isinstance(x, E.Let) else None)
    assert lets == []


def test_guarded_reads_stay_inside_if_then_else():
    # a value read only under a condition is not hoisted out of it: the guard is what keeps the
    # read of A in bounds
    A = te.placeholder((6,), name="A")
    B = te.compute((6,), lambda i: A[i] * A[i] + 1.0, name="B")
    C = te.compute((8,), lambda i: tir.if_then_else(tir.all(i >= 1, i < 7), B[i - 1] * B[i - 1],
                                                      0.0), name="C")
    s = te.create_schedule(C.op)
    s[B].compute_inline()
    f = schedule_to_primfunc(s, [A, C])
    calls = []
    post_order_visit(f.body, lambda x: calls.append(x) if isinstance(x, E.Call)
                     and x.op == "if_then_else" else None)
    assert len(calls) == 1 and isinstance(calls[0].args[1], E.Let)

    def ref(a):
        b = a * a + 1.0
        c = np.zeros(8, "float32")
        c[1:7] = b * b
        return c

    check(s, [A, C], ref)


def test_reads_at_different_indices_are_distinct():
    A = te.placeholder((9,), name="A")
    B = te.compute((9,), lambda i: A[i] * A[i] - A[i], name="B")
    C = te.compute((8,), lambda i: B[i] * B[i + 1] + B[i] - B[i + 1], name="C")
    s = te.create_schedule(C.op)
    s[B].compute_inline()

    def ref(a):
        b = a * a - a
        return b[:-1] * b[1:] + b[:-1] - b[1:]

    check(s, [A, C], ref)


def test_reduction_reads_stay_inside_the_reduction():
    A = te.placeholder((4, 5), name="A")
    B = te.compute((4, 5), lambda i, j: A[i, j] * 3.0 + A[i, j], name="B")
    k = te.reduce_axis((0, 5), name="k")
    C = te.compute((4,), lambda i: te.sum(B[i, k] * B[i, k], axis=k), name="C")
    s = te.create_schedule(C.op)
    s[B].compute_inline()
    check(s, [A, C], lambda a: ((a * 4.0) ** 2).sum(axis=1))


def test_a_stage_copied_more_than_the_budget_is_computed_into_a_buffer():
    # three shifted reads per stage (a 1-D 3-tap stencil of stencils): D is copied 3 times into
    # E, C 9 times. Each copy recomputes C (and the B it inlines) per element; past
    # inline_budget.MAX_COPIES (4) C is written once into a buffer of its own instead
    from tvmpy.te.inline_budget import MAX_COPIES

    n = 13
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0 - 1.0, name="B")
    C = te.compute((n - 2,), lambda i: B[i] - B[i + 1] * B[i + 2], name="C")
    D = te.compute((n - 4,), lambda i: C[i] * C[i + 1] + C[i + 2], name="D")
    E_ = te.compute((n - 6,), lambda i: D[i] + D[i + 1] - D[i + 2], name="E")
    s = te.create_schedule(E_.op)
    for t in (B, C, D):
        s[t].compute_inline()
    assert 3 <= MAX_COPIES < 9
    f = schedule_to_primfunc(s, [A, E_])
    allocs = []
    post_order_visit(f.body, lambda x: allocs.append(x.buffer_var.name)
                     if type(x).__name__ == "Allocate" else None)
    assert allocs == ["C"], allocs

    def ref(a):
        b = a * 2.0 - 1.0
        c = b[:-2] - b[1:-1] * b[2:]
        d = c[:-2] * c[1:-1] + c[2:]
        return d[:-2] + d[1:-1] - d[2:]

    s = te.create_schedule(E_.op)
    for t in (B, C, D):
        s[t].compute_inline()
    check(s, [A, E_], ref)


def _stencil_chain_2d(m: int, w: int, dtype: str):
    # the 3-tap stencil above along the outer axis of an (m, w) tensor: C is computed into a
    # buffer, with its innermost axis (w) as the vector lanes where w fits one 64-byte vector
    A = te.placeholder((m, w), name="A", dtype=dtype)
    B = te.compute((m, w), lambda i, j: A[i, j] * 2.0 - 1.0, name="B")
    C = te.compute((m - 2, w), lambda i, j: B[i, j] - B[i + 1, j] * B[i + 2, j], name="C")
    D = te.compute((m - 4, w), lambda i, j: C[i, j] * C[i + 1, j] + C[i + 2, j], name="D")
    E_ = te.compute((m - 6, w), lambda i, j: D[i, j] + D[i + 1, j] - D[i + 2, j], name="E")
    s = te.create_schedule(E_.op)
    for t in (B, C, D):
        s[t].compute_inline()
    return s, A, E_


def _ref_stencil_2d(a):
    b = a * 2.0 - 1.0
    c = b[:-2] - b[1:-1] * b[2:]
    d = c[:-2] * c[1:-1] + c[2:]
    return d[:-2] + d[1:-1] - d[2:]


def test_a_stage_computed_into_a_buffer_has_its_innermost_axis_vectorized():
    # (w, dtype, vectorized): 5 and 16 float32 lanes fit 64 bytes, 17 does not; 9 float64 lanes
    # do not (8 do); a width of 1 is no vector
    for w, dtype, vec in ((5, "float32", True), (16, "float32", True), (17, "float32", False),
                          (8, "float64", True), (9, "float64", False), (1, "float32", False)):
        s, A, E_ = _stencil_chain_2d(11, w, dtype)
        f = schedule_to_primfunc(s, [A, E_])
        kinds: list[str] = []

        def visit(x, kinds=kinds):
            if type(x).__name__ == "For" and x.loop_var.name.startswith("j"):
                kinds.append(x.kind.name)

        post_order_visit(f.body, visit)
        assert ("VECTORIZED" in str(kinds).upper()) == vec, (w, dtype, kinds)
        s, A, E_ = _stencil_chain_2d(11, w, dtype)
        check(s, [A, E_], _ref_stencil_2d, rtol=1e-5 if dtype == "float32" else 1e-12)
