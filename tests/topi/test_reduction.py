"""topi reductions against numpy: axis None/int/tuple/negative, keepdims, dtypes, errors."""

import numpy as np
import pytest

from tvmpy import te, topi

from .topi_util import rand, run

CASES = [
    ((5, 7), None, False),
    ((5, 7), 1, False),
    ((5, 7), 0, True),
    ((3, 4, 37), (0, 2), False),
    ((3, 4, 37), -1, True),
    ((2, 3, 5, 17), (1, 2), False),
    ((2, 3, 5, 17), (0, 1, 2, 3), True),
    ((11,), 0, False),
    ((64, 33), 0, False),
    ((7, 129), None, False),  # whole-tensor reduction, vectorized by rfactor
]


@pytest.mark.parametrize("shape,axis,keepdims", CASES)
@pytest.mark.parametrize("op", ["sum", "mean", "max", "min", "prod"])
def test_float_reduce(op, shape, axis, keepdims):
    A = te.placeholder(shape, "float32", name="A")
    a = rand(shape, low=0.5 if op == "prod" else -3, high=1.5 if op == "prod" else 3)
    B = getattr(topi, op)(A, axis=axis, keepdims=keepdims)
    (b,) = run([A], B, [a], schedule="reduce")
    ax = tuple(axis) if isinstance(axis, tuple) else axis
    e = getattr(np, op)(a.astype("float64"), axis=ax, keepdims=keepdims)
    assert b.shape == np.shape(e)
    np.testing.assert_allclose(b, e, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op", ["argmax", "argmin"])
@pytest.mark.parametrize("shape,axis,keepdims",
                         [((5, 7), 1, False), ((3, 4, 37), 0, True), ((3, 4, 37), -1, False),
                          ((6, 13), None, False), ((6, 13), None, True)])
def test_argreduce(op, shape, axis, keepdims):
    A = te.placeholder(shape, "float32", name="A")
    a = rand(shape)
    B = getattr(topi, op)(A, axis=axis, keepdims=keepdims)
    assert B.dtype == "int32"
    (b,) = run([A], B, [a], schedule="reduce")
    np.testing.assert_array_equal(b, getattr(np, op)(a, axis=axis, keepdims=keepdims))


def test_argmax_ties_and_int8():
    A = te.placeholder((4, 6), "int8", name="A")
    a = np.random.default_rng(0).integers(0, 3, (4, 6)).astype("int8")  # many ties
    first, last = run([A], [topi.argmax(A, 1), topi.argmin(A, 1, select_last_index=True)], [a],
                      schedule="reduce")
    np.testing.assert_array_equal(first, np.argmax(a, 1))
    np.testing.assert_array_equal(last, 5 - np.argmin(a[:, ::-1], 1))


@pytest.mark.parametrize("dtype", ["float32", "int8", "int32"])
def test_argreduce_rows_equal_to_the_identity(dtype):
    """Rows whose every value is the reducer identity's (-inf / the type's lowest for argmax,
    +inf / highest for argmin) give index 0 as numpy does, not the identity's -1."""
    lo, hi = ((-np.inf, np.inf) if dtype == "float32" else
              (np.iinfo(dtype).min, np.iinfo(dtype).max))
    a = np.random.default_rng(3).integers(-2, 2, (5, 7)).astype(dtype)
    a[0], a[1], a[2] = lo, hi, lo
    a[2, 4] = hi if dtype != "float32" else 1
    A = te.placeholder(a.shape, dtype, name="A")
    for axis in (1, None):
        outs = [topi.argmax(A, axis), topi.argmin(A, axis), topi.argmax(A, axis, select_last_index=True)]
        first, mn, last = run([A], outs, [a], schedule="reduce")
        np.testing.assert_array_equal(first, np.argmax(a, axis))
        np.testing.assert_array_equal(mn, np.argmin(a, axis))
        flip = a[:, ::-1] if axis == 1 else a.ravel()[::-1]
        np.testing.assert_array_equal(last, flip.shape[-1] - 1 - np.argmax(flip, -1))

@pytest.mark.parametrize("dtype", ["int32", "int8"])
def test_int_reduce(dtype):
    A = te.placeholder((3, 101), dtype, name="A")
    a = rand((3, 101), dtype, low=-0.1, high=0.1)
    s, mx, mn = run([A], [topi.sum(A, 1), topi.max(A, 0), topi.min(A, None)], [a], schedule="reduce")
    np.testing.assert_array_equal(s, a.sum(1, dtype=dtype))
    np.testing.assert_array_equal(mx, a.max(0))
    np.testing.assert_array_equal(mn, a.min())


def test_bool_all_any_sum():
    A = te.placeholder((5, 3), "bool", name="A")
    a = rand((5, 3), "bool")
    al, an, s = run([A], [topi.all(A, 1), topi.any(A, 0), topi.sum(A)], [a], schedule="reduce")
    np.testing.assert_array_equal(al, a.all(1))
    np.testing.assert_array_equal(an, a.any(0))
    assert s == a.sum()


def test_fused_producer_and_c_target():
    # an injective producer is inlined into the reduction
    A = te.placeholder((4, 33), "float32", name="A")
    a = rand((4, 33))
    (b,) = run([A], topi.sum(topi.exp(A), axis=1, keepdims=True), [a], target="c",
               schedule="reduce")
    np.testing.assert_allclose(b, np.exp(a).sum(1, keepdims=True), rtol=1e-5)


@pytest.mark.parametrize("axis", [0, 1])
def test_large_parallel_reduce(axis):
    # axis 0: the output axis is contiguous (vectorized inside the reduction); both parallel
    A = te.placeholder((129, 2053), "float32", name="A")
    a = rand((129, 2053))
    s, m = run([A], [topi.sum(A, axis), topi.argmax(A, axis)], [a], schedule="reduce")
    np.testing.assert_allclose(s, a.sum(axis, dtype="float64"), rtol=1e-4, atol=1e-3)
    np.testing.assert_array_equal(m, a.argmax(axis))


def test_bad_axes():
    A = te.placeholder((3, 4), name="A")
    with pytest.raises(ValueError, match="axis 2 is out of range for a tensor of rank 2"):
        topi.sum(A, axis=2)
    with pytest.raises(ValueError, match="repeated axis"):
        topi.max(A, axis=(1, -1))
    with pytest.raises(TypeError, match="axis must be an int"):
        topi.sum(A, axis=1.0)
    with pytest.raises(TypeError, match="mean: needs a float"):
        topi.mean(te.placeholder((3,), "int32"))


def test_rank0_input():
    A = te.placeholder((), "float32", name="A")
    a = rand(())
    s, m = run([A], [topi.sum(A), topi.argmax(A)], [a], schedule="reduce")
    assert s.shape == () and s == a
    assert m.shape == () and m == 0


def test_rfactor_parallel_on_c_and_generic_schedule():
    A = te.placeholder((129, 2053), "float32", name="A")
    a = rand((129, 2053))
    (s,) = run([A], topi.sum(A, 1, keepdims=True), [a], target="c", schedule="reduce")
    np.testing.assert_allclose(s, a.sum(1, keepdims=True, dtype="float64"), rtol=1e-4, atol=1e-3)
    (m,) = run([A], topi.min(topi.negative(A), axis=0), [a], schedule="generic")
    np.testing.assert_array_equal(m, (-a).min(0))
