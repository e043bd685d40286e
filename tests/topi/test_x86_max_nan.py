"""Float max/min on x86 (codegen ``llvm_arith._x86_min_max``: MAXPS/MINPS with a NaN fix-up):
NaN propagates from either operand (numpy's semantics), for every x86 level (SSE2, AVX2,
AVX-512), elementwise and in every max reduction (max pool, global max pool, reduce max over
any axes, softmax's row max), at awkward shapes (primes, size 1, a narrow kept axis), with NaN,
+-inf and signed zeros placed first, last and in the middle of the reduced windows."""

from __future__ import annotations

import platform

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import te, topi
from tvmpy.codegen import llvm_arith
from tvmpy.target.cpu_features import host_isa_features
from tvmpy.topi import nn, testing


def _runnable(level: str, needs: str) -> pytest.param:
    ok = platform.machine() in ("x86_64", "AMD64") and needs in host_isa_features()
    return pytest.param(f"llvm -mcpu={level}", marks=pytest.mark.skipif(
        not ok, reason=f"this CPU lacks {needs}"))


# SSE2, AVX2 (+FMA), AVX-512: each x86 level this machine can run
TARGETS = [_runnable("x86-64", "sse2"), _runnable("x86-64-v3", "avx2"),
           _runnable("x86-64-v4", "avx512f")]
SPECIALS = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 3.5, 1e-40]


def _build(target, ins, out, schedule):
    with tvm.target.Target(target):
        s = schedule([out])
        return tvm.build(s, [*ins, out], target)


def _run(f, out, *arrays):
    res = tvm.nd.array(np.full(tuple(int(d) for d in out.shape), 7.0, out.dtype))
    f(*[tvm.nd.array(a) for a in arrays], res)
    return res.numpy()


def _same(got, want):
    """Equal values, NaN where numpy has NaN (a reduction's zero sign is not compared: numpy's
    depends on the order too)."""
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=0)


def _elementwise_schedule(outs):
    s = te.create_schedule([o.op for o in outs])
    for o in outs:
        (x,) = s[o].op.axis
        _, xi = s[o].split(x, factor=16)
        s[o].vectorize(xi)
    return s


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("vector", [False, True])
def test_elementwise_max_min_specials(target, dtype, vector):
    """Every pair of specials (81, a vector tail), a constant operand on either side (relu's
    ``max(x, 0)``; ``clip``'s nonzero bounds, one MAXPS/MINPS each, ties included): exactly numpy's ``maximum``/``minimum``, bit for bit (NaN from either
    side; a +0/-0 tie gives the second operand, as numpy and the interpreter do)."""
    a = np.repeat(np.array(SPECIALS, dtype), len(SPECIALS))
    b = np.tile(np.array(SPECIALS, dtype), len(SPECIALS))
    n = a.size
    A, B = te.placeholder((n,), dtype, "A"), te.placeholder((n,), dtype, "B")
    zero = tvm.tir.const(0.0, dtype)
    exprs = {"max": lambda i: te.max(A[i], B[i]), "min": lambda i: te.min(A[i], B[i]),
             "max0": lambda i: te.max(A[i], zero), "0max": lambda i: te.max(zero, A[i]),
             "min0": lambda i: te.min(zero, A[i]),
             "clip": lambda i: te.min(te.max(A[i], tvm.tir.const(-1.0, dtype)),
                                      tvm.tir.const(3.5, dtype))}
    z = np.zeros_like(a)
    want = {"max": np.maximum(a, b), "min": np.minimum(a, b), "max0": np.maximum(a, z),
            "0max": np.maximum(z, a), "min0": np.minimum(z, a),
            "clip": np.minimum(np.maximum(a, -1.0), 3.5)}
    sched = _elementwise_schedule if vector else (lambda outs: te.create_schedule(
        [o.op for o in outs]))
    for name, fn in exprs.items():
        C = te.compute((n,), fn, name="C")
        got = _run(_build(target, [A, B], C, sched), C, a, b)
        _same(got, want[name])
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want[name]), err_msg=name)


def _plant(x):
    """NaN first, last and in the middle of some rows of the reduced block; +inf, -inf and
    all-(-inf) / all-(-0) rows in others (rows: the flattened leading dims)."""
    rows = x.reshape(x.shape[0] * x.shape[1] if x.ndim > 2 else x.shape[0], -1)
    n = rows.shape[1]
    specials = [(np.nan, 0), (np.nan, n - 1), (np.nan, n // 2), (np.inf, n // 3),
                (-np.inf, 0), ("all-inf", 0), ("all-zero", 0)]
    for r, (v, j) in enumerate(specials[:rows.shape[0]]):
        if v == "all-inf":
            rows[r] = -np.inf
        elif v == "all-zero":
            rows[r] = -0.0
        else:
            rows[r, j] = v
    return x


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("shape", [(1, 7, 7, 7), (1, 7, 13, 13), (2, 3, 1, 1), (1, 7, 17, 5),
                                   (1, 7, 3, 16), (1, 7, 56, 56), (1, 2, 1, 29)])
def test_global_max_pool_nan(target, shape):
    A = te.placeholder(shape, name="A")
    a = _plant(np.random.default_rng(3).uniform(-1, 1, shape).astype("float32"))
    out = nn.global_pool(A, "max")
    got = _run(_build(target, [A], out, topi.x86.schedule_global_pool), out, a)
    _same(got, np.max(a, axis=(2, 3), keepdims=True))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("shape", [(1, 7, 17, 13), (2, 7, 1, 1), (1, 7, 9, 31)])
def test_max_pool_nan(target, shape):
    """The separable max pool (what the x86 strategy builds): 3x3 stride 2 pad 1."""
    A = te.placeholder(shape, name="A")
    a = _plant(np.random.default_rng(4).uniform(-1, 1, shape).astype("float32"))
    out = nn.pool2d(A, (3, 3), (2, 2), (1, 1), (1, 1, 1, 1), "max", separable=True)
    got = _run(_build(target, [A], out, topi.x86.schedule_pool), out, a)
    want = testing.pool2d_python(a, (3, 3), (2, 2), (1, 1), (1, 1, 1, 1), "max")
    _same(got, want)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("shape,axis", [((7, 517, 7), (0, 1)), ((7, 13), 1), ((7, 3), 0),
                                        ((1,), 0), ((7, 33, 2), (0, 2)), ((2, 7, 5), None),
                                        ((7, 1000), 1), ((3, 7, 4), (0, 1))])
@pytest.mark.parametrize("op", ["max", "min"])
def test_reduce_max_min_nan(target, shape, axis, op):
    A = te.placeholder(shape, name="A")
    a = _plant(np.random.default_rng(5).uniform(-1, 1, shape).astype("float32"))
    out = getattr(topi, op)(A, axis=axis, keepdims=True)
    got = _run(_build(target, [A], out, topi.x86.schedule_reduce), out, a)
    _same(got, getattr(np, op)(a, axis=axis, keepdims=True))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("shape", [(7, 37), (7, 1), (7, 128)])
def test_softmax_nan(target, shape):
    """A NaN or +inf in a row makes the row NaN (numpy's reference); a -inf entry gives 0."""
    X = te.placeholder(shape, name="X")
    rng = np.random.default_rng(6)
    x = rng.uniform(-4, 4, shape).astype("float32")
    n = shape[1]
    x[0, n - 1] = np.nan
    x[1, 0] = np.nan
    x[2, n // 2] = np.inf
    x[3, 0] = -np.inf
    out = nn.softmax_by_reciprocal(X, -1)
    got = _run(_build(target, [X], out, topi.x86.schedule_softmax), out, x)
    with np.errstate(invalid="ignore"):
        want = testing.softmax_python(x, -1)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="x86 lowering")
def test_x86_lowering_is_maxps_not_llvm_maximum():
    """The x86 lowering emits no ``llvm.maximum``; the switch restores it (for A/B runs)."""
    A = te.placeholder((64,), name="A")
    out = topi.max(A, axis=0)
    with tvm.target.Target("llvm"):
        s = topi.x86.schedule_reduce([out])
    assert "llvm.maximum" not in tvm.build(s, [A, out], "llvm").get_source("ll")
    saved = llvm_arith.X86_SELECT_MINMAX
    llvm_arith.X86_SELECT_MINMAX = False
    try:
        assert "llvm.maximum" in tvm.build(s, [A, out], "llvm").get_source("ll")
    finally:
        llvm_arith.X86_SELECT_MINMAX = saved


def test_narrow_kept_axis_is_one_local_vector():
    """A max over axes (0, 1) of (3, 517, 7): the 7 kept lanes are one vector accumulated in a
    local buffer inside the reduction loops (was a scalar loop per output)."""
    A = te.placeholder((3, 517, 7), name="A")
    out = topi.max(A, axis=(0, 1), keepdims=True)
    with tvm.target.Target("llvm"):
        s = topi.x86.schedule_reduce([out])
    text = str(tvm.lower(s, [A, out], simple_mode=True))
    assert "allocate((7,), 'float32', 'local')" in text and "ramp(0, 1, 7)" in text


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="x86 lowering")
@pytest.mark.parametrize("op", ["max", "min"])
def test_reduction_update_keeps_the_accumulator_on_a_tie(op):
    """``acc = max(acc, x)`` is emitted in the reduction's form (the NaN test of ``x`` off the
    accumulator's chain), whose +-0 tie keeps ``acc``: [-0, +0] reduces to -0 (and [+0, -0]
    to +0), where the elementwise form would give the second; NaN still propagates."""
    A = te.placeholder((2, 2), name="A")
    k = te.reduce_axis((0, 2), name="k")
    red = te.max if op == "max" else te.min
    out = te.compute((2,), lambda i: red(A[i, k], axis=k), name="out")
    f = tvm.build(te.create_schedule(out.op), [A, out], "llvm")
    got = _run(f, out, np.array([[-0.0, 0.0], [0.0, -0.0]], "float32"))
    np.testing.assert_array_equal(np.signbit(got), [True, False])
    assert np.isnan(_run(f, out, np.array([[1.0, np.nan], [np.nan, 1.0]], "float32"))).all()
