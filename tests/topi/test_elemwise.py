"""topi elementwise unary ops against numpy (float32 and integer dtypes), and bad arguments."""

import numpy as np
import pytest

from tvmpy import te, topi
from tvmpy.topi.testing import common_ref as ref

from .topi_util import rand, run

SHAPE = (3, 37)

FLOAT_CASES = [
    ("relu", ref.relu, {}),
    ("sigmoid", ref.sigmoid, {}),
    ("tanh", np.tanh, {}),
    ("gelu", ref.gelu, {}),
    ("erf", ref.erf, {}),
    ("hard_swish", ref.hard_swish, {}),
    ("exp", np.exp, {}),
    ("abs", np.abs, {}),
    ("negative", np.negative, {}),
    ("floor", np.floor, {}),
    ("ceil", np.ceil, {}),
    ("round", np.round, {}),
    ("trunc", np.trunc, {}),
    ("sign", ref.sign, {}),
    ("softplus", lambda x: np.log1p(np.exp(x)), {}),
]


@pytest.mark.parametrize("name,fref,kw", FLOAT_CASES, ids=[c[0] for c in FLOAT_CASES])
def test_float_unary(name, fref, kw):
    A = te.placeholder(SHAPE, "float32", name="A")
    a = rand(SHAPE)
    (b,) = run([A], getattr(topi, name)(A, **kw), [a])
    np.testing.assert_allclose(b, fref(a).astype("float32"), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name,fref", [("log", np.log), ("sqrt", np.sqrt), ("rsqrt", ref.rsqrt)])
def test_positive_domain(name, fref):
    A = te.placeholder((2, 3, 5), "float32", name="A")
    a = rand((2, 3, 5), low=0.1, high=9)
    (b,) = run([A], getattr(topi, name)(A), [a])
    np.testing.assert_allclose(b, fref(a), rtol=1e-5)


def test_round_half_to_even():
    A = te.placeholder((6,), "float32", name="A")
    a = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 2.4], "float32")
    (b,) = run([A], topi.round(A), [a])
    np.testing.assert_array_equal(b, np.round(a))


def test_leaky_relu_prelu_clip():
    A = te.placeholder((2, 5, 3, 3), "float32", name="A")
    S = te.placeholder((5,), "float32", name="S")
    a, s = rand((2, 5, 3, 3)), rand((5,), rng=np.random.default_rng(4), low=0, high=1)
    outs = [topi.leaky_relu(A, 0.2), topi.prelu(A, S, axis=1), topi.clip(A, -1.5, 0.75),
            topi.prelu(A, te.placeholder((3,), name="S3"), axis=-1)]
    s3 = rand((3,), rng=np.random.default_rng(7))
    S3 = outs[3].op.input_tensors[1]
    lr, pr, cl, pr3 = run([A, S, S3], outs, [a, s, s3])
    np.testing.assert_allclose(lr, ref.leaky_relu(a, 0.2), rtol=1e-6)
    np.testing.assert_allclose(pr, ref.prelu(a, s, 1), rtol=1e-6)
    np.testing.assert_allclose(cl, ref.clip(a, -1.5, 0.75), rtol=1e-6)
    np.testing.assert_allclose(pr3, ref.prelu(a, s3, 3), rtol=1e-6)


@pytest.mark.parametrize("dtype", ["int32", "int8"])
def test_int_unary(dtype):
    A = te.placeholder((4, 19), dtype, name="A")
    a = rand((4, 19), dtype)
    outs = [topi.relu(A), topi.abs(A), topi.negative(A), topi.sign(A), topi.clip(A, -7, 9.5),
            topi.floor(A), topi.logical_not(A)]
    relu, ab, neg, sg, cl, fl, ln = run([A], outs, [a])
    np.testing.assert_array_equal(relu, np.maximum(a, 0))
    np.testing.assert_array_equal(ab, np.abs(a))
    np.testing.assert_array_equal(neg, -a)
    np.testing.assert_array_equal(sg, np.sign(a))
    np.testing.assert_array_equal(cl, np.clip(a, -7, 9))
    np.testing.assert_array_equal(fl, a)
    np.testing.assert_array_equal(ln, np.logical_not(a))


def test_rank0_and_rank4_c_target():
    A = te.placeholder((), "float32", name="A")
    B = te.placeholder((2, 3, 1, 5), "float32", name="B")
    a, b = rand(()), rand((2, 3, 1, 5))
    r0, r4 = run([A, B], [topi.sigmoid(A), topi.gelu(B)], [a, b], target="c")
    np.testing.assert_allclose(r0, ref.sigmoid(a), rtol=1e-5)
    np.testing.assert_allclose(r4, ref.gelu(b), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape", [(2, 3, 1031, 47), (41, 1031, 7), (262147,)])
def test_large_parallel_vectorized(shape):
    # big enough for the parallel path: an innermost axis with a vector tail, a short innermost
    # axis (fused loop), a prime 1-D length
    A = te.placeholder(shape, "float32", name="A")
    a = rand(shape)
    (b,) = run([A], topi.relu(topi.multiply(A, 2.0)), [a])
    np.testing.assert_allclose(b, np.maximum(a * 2, 0))


def test_bad_arguments():
    I32 = te.placeholder((3,), "int32", name="I")
    with pytest.raises(TypeError, match="exp: needs a float tensor"):
        topi.exp(I32)
    with pytest.raises(TypeError, match="expected a te.Tensor"):
        topi.relu(np.zeros(3))
    with pytest.raises(ValueError, match="a_min=2 is greater than a_max=1"):
        topi.clip(I32, 2, 1)
    A = te.placeholder((2, 4), name="A")
    with pytest.raises(ValueError, match="slope has 3 entries but axis 1"):
        topi.prelu(A, te.placeholder((3,), name="S"))
    with pytest.raises(ValueError, match="axis 2 is out of range"):
        topi.prelu(A, te.placeholder((4,), name="S"), axis=2)


def test_symbolic_shapes_x86_schedules():
    import tvmpy as tvm

    n = te.var("n")
    A = te.placeholder((n, 37), "float32", name="A")
    B = te.placeholder((37,), "float32", name="B")
    C = topi.relu(topi.add(A, B))
    R = topi.sum(A, axis=0)
    fc = tvm.build(topi.x86.schedule_injective(C), [A, B, C], "llvm")
    fr = tvm.build(topi.x86.schedule_reduce(R), [A, R], "llvm")
    for rows in (1, 5):
        a, b = rand((rows, 37)), rand((37,), rng=np.random.default_rng(9))
        c, r = tvm.nd.empty((rows, 37), "float32"), tvm.nd.empty((37,), "float32")
        fc(tvm.nd.array(a), tvm.nd.array(b), c)
        fr(tvm.nd.array(a), r)
        np.testing.assert_allclose(c.numpy(), np.maximum(a + b, 0))
        np.testing.assert_allclose(r.numpy(), a.sum(0), rtol=1e-5, atol=1e-6)
