"""Random schedules through lower_pipeline, checked with the interpreter against numpy."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tvmpy import te
from tvmpy.te.schedule_ops import schedule_to_primfunc
from tvmpy.tir import interpreter
from tvmpy.tir.analysis import lowered_errors, verify_single_definition
from tvmpy.tir.pipeline import lower_pipeline

KINDS = ("none", "vectorize", "unroll", "parallel")


def _workload(kind, n, m):
    A = te.placeholder((n, m), name="A")
    if kind == "chain":
        B = te.compute((n, m), lambda i, j: A[i, j] * 2.0 + 1.0, name="B")
        C = te.compute((n, m), lambda i, j: B[i, j] * B[i, j] - A[i, j], name="C")
        ref = lambda a: (a * 2 + 1) ** 2 - a  # noqa: E731
        return [A], C, B, ref
    if kind == "rowsum":
        k = te.reduce_axis((0, m), name="k")
        B = te.compute((n, m), lambda i, j: A[i, j] + 0.5, name="B")
        C = te.compute((n, 1), lambda i, j: te.sum(B[i, k] * 1.0, axis=k), name="C")
        ref = lambda a: (a + 0.5).sum(axis=1, keepdims=True)  # noqa: E731
        return [A], C, B, ref
    Bm = te.placeholder((m, m), name="W")
    k = te.reduce_axis((0, m), name="k")
    B = te.compute((n, m), lambda i, j: A[i, j] * 3.0, name="B")
    C = te.compute((n, m), lambda i, j: te.sum(B[i, k] * Bm[k, j], axis=k), name="C")
    return [A, Bm], C, B, None


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(kind=st.sampled_from(["chain", "rowsum", "matmul"]), n=st.integers(1, 9),
       m=st.integers(1, 11), f0=st.integers(1, 5), f1=st.integers(1, 6),
       k_in=st.sampled_from(KINDS), k_out=st.sampled_from(KINDS),
       attach=st.sampled_from(["root", "inline", "at_outer", "at_inner"]))
def test_random_schedule(kind, n, m, f0, f1, k_in, k_out, attach):
    inputs, C, B, ref = _workload(kind, n, m)
    s = te.create_schedule(C.op)
    i, j = C.op.axis
    io, ii = s[C].split(i, factor=f0)
    jo, ji = s[C].split(j, factor=f1)
    if C.op.reduce_axis:
        s[C].reorder(io, jo, *C.op.reduce_axis, ii, ji)
    else:
        s[C].reorder(io, jo, ii, ji)
    if attach == "inline":
        s[B].compute_inline()
    elif attach == "at_outer":
        s[B].compute_at(s[C], io)
    elif attach == "at_inner":
        s[B].compute_at(s[C], jo)
    annotate = {"vectorize": s[C].vectorize, "unroll": s[C].unroll,
                "parallel": s[C].parallel}
    if k_in in annotate and not (k_in == "parallel"):
        annotate[k_in](ji)
    if k_out in annotate and k_out != "vectorize" and attach != "at_inner":
        annotate[k_out](io)
    f1_ = schedule_to_primfunc(s, [*inputs, C], "rand")
    f2 = lower_pipeline(f1_)
    assert not lowered_errors(f2)
    verify_single_definition(f2)
    rng = np.random.default_rng(n * 100 + m)
    args = [rng.uniform(-1, 1, [int(x) for x in t.shape]).astype("float32") for t in inputs]
    out_shape = [int(x) for x in C.shape]
    got = rng.uniform(-1, 1, out_shape).astype("float32")
    want = got.copy()
    interpreter.run(f2, [*args, got])
    interpreter.run(f1_, [*args, want])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    if ref is not None:
        np.testing.assert_allclose(got, ref(args[0]), rtol=1e-4, atol=1e-4)
    else:
        np.testing.assert_allclose(got, (args[0] * 3) @ args[1], rtol=1e-4, atol=1e-4)
