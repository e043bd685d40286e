"""x86 reductions over the input's contiguous axis keep several independent vector
accumulators (``topi.x86.pooling.accumulators``) when the axis holds enough vectors: equal to
numpy at awkward extents (primes, a tail after the last whole vector, one vector), NaN
propagation of max, fused producers, a full reduction."""

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import te, topi


def _build(shape, fn, schedule_for="llvm", **kw):
    """Scheduled for ``schedule_for`` (the host unless a test states its vector count for
    another width), built for and run on the host."""
    A = te.placeholder(shape, name="A")
    with tvm.target.Target(schedule_for):
        B = fn(A, **kw)
        s = topi.x86.schedule_reduce([B])
        f = tvm.build(s, [A, B], "llvm")
    return f, str(tvm.lower(s, [A, B], simple_mode=True)), B


def _run(f, B, a):
    out = tvm.nd.array(np.full(tuple(int(d) for d in B.shape), np.nan, "float32"))
    f(tvm.nd.array(a), out)
    return out.numpy()


@pytest.mark.parametrize("shape", [(3, 1000), (7, 517), (1, 4096), (2, 5, 131), (4, 127),
                                   (2, 64), (1, 16), (5, 33)])
@pytest.mark.parametrize("op", ["sum", "max", "min", "mean"])
def test_innermost_reduction_matches_numpy(shape, op):
    rng = np.random.default_rng(sum(shape))
    a = rng.uniform(-1, 1, shape).astype("float32")
    f, _, B = _build(shape, getattr(topi, op), axis=-1)
    ref = getattr(np, op)(a.astype("float64"), axis=-1)
    np.testing.assert_allclose(_run(f, B, a), ref, rtol=1e-5, atol=2e-5)
    if op == "max":
        a.reshape(-1, shape[-1])[0, -1] = np.nan  # in the tail / last accumulator
        got = _run(f, B, a)
        assert np.isnan(got.reshape(-1)[0]) and not np.isnan(got.reshape(-1)[1:]).any()


def test_long_axis_keeps_several_accumulators_short_axis_one():
    wide = "llvm -mcpu=skylake-avx512"  # 16 lanes: 40 floats are 2.5 vectors (5 on AVX2)
    _, text, _ = _build((3, 1000), topi.sum, schedule_for=wide, axis=-1)
    assert ".rf.rf" in text  # k vectors -> one vector -> lanes
    _, text, _ = _build((3, 40), topi.sum, schedule_for=wide, axis=-1)
    assert ".rf.rf" not in text and ".rf" in text


def test_fused_producer_and_full_reduction():
    A = te.placeholder((6, 1031), name="A")
    sq = te.compute(A.shape, lambda i, j: A[i, j] * A[i, j], name="sq")
    with tvm.target.Target("llvm"):
        B = topi.sum(sq, axis=1)
        s = topi.x86.schedule_reduce([B])
        f = tvm.build(s, [A, B], "llvm")
        C = topi.sum(A)
        fc = tvm.build(topi.x86.schedule_reduce([C]), [A, C], "llvm")
    a = np.random.default_rng(1).uniform(-1, 1, (6, 1031)).astype("float32")
    np.testing.assert_allclose(_run(f, B, a), (a.astype("float64") ** 2).sum(1), rtol=1e-5)
    out = tvm.nd.empty((), "float32")
    fc(tvm.nd.array(a), out)
    np.testing.assert_allclose(out.numpy(), a.astype("float64").sum(), rtol=1e-4, atol=1e-4)
