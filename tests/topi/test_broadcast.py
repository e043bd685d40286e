"""topi broadcast binary ops against numpy: broadcasting, scalars, dtypes, errors."""

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import te, topi
from tvmpy.topi.testing import common_ref as ref

from .topi_util import rand, run

SHAPES = [
    ((5, 7), (5, 7)),
    ((3, 1, 7), (4, 1)),
    ((), (2, 3)),
    ((1,), (13,)),
    ((2, 1, 3, 1), (1, 5, 1, 17)),
    ((31,), (1,)),
]

FLOAT_OPS = ["add", "subtract", "multiply", "divide", "maximum", "minimum", "floor_divide",
             "floor_mod", "power", "equal", "not_equal", "less", "less_equal", "greater",
             "greater_equal"]


@pytest.mark.parametrize("sa,sb", SHAPES)
def test_add_shapes(sa, sb):
    A = te.placeholder(sa, "float32", name="A")
    B = te.placeholder(sb, "float32", name="B")
    C = topi.add(A, B)
    a, b = rand(sa), rand(sb, rng=np.random.default_rng(1))
    (c,) = run([A, B], C, [a, b])
    np.testing.assert_allclose(c, a + b, rtol=1e-6)


@pytest.mark.parametrize("op", FLOAT_OPS)
def test_float_ops(op):
    sa, sb = (3, 1, 7), (4, 1)
    A = te.placeholder(sa, "float32", name="A")
    B = te.placeholder(sb, "float32", name="B")
    a = rand(sa)
    b = rand(sb, rng=np.random.default_rng(1))
    if op in ("divide", "floor_divide", "floor_mod"):
        b = np.where(np.abs(b) < 0.3, 0.7, b).astype("float32")
    if op == "power":
        a = np.abs(a) + 0.1
    C = getattr(topi, op)(A, B)
    (c,) = run([A, B], C, [a, b])
    np.testing.assert_allclose(c, getattr(ref, op)(a, b), rtol=1e-5, atol=1e-5)


INT_OPS = ["add", "subtract", "multiply", "divide", "maximum", "minimum", "floor_divide",
           "floor_mod", "equal", "less", "greater_equal", "bitwise_and", "bitwise_xor"]


@pytest.mark.parametrize("dtype", ["int32", "int8"])
@pytest.mark.parametrize("op", INT_OPS)
def test_int_ops(op, dtype):
    sa, sb = (6, 11), (11,)
    A = te.placeholder(sa, dtype, name="A")
    B = te.placeholder(sb, dtype, name="B")
    a = rand(sa, dtype)
    b = rand(sb, dtype, rng=np.random.default_rng(2))
    if op in ("divide", "floor_divide", "floor_mod"):
        b[b == 0] = 3
    if op == "multiply" and dtype == "int8":
        a, b = a // 4, b // 4
    C = getattr(topi, op)(A, B)
    (c,) = run([A, B], C, [a, b])
    np.testing.assert_array_equal(c, getattr(ref, op)(a, b))


@pytest.mark.parametrize("op", ["logical_and", "logical_or", "logical_xor"])
def test_logical(op):
    A = te.placeholder((4, 9), "bool", name="A")
    B = te.placeholder((1, 9), "bool", name="B")
    a, b = rand((4, 9), "bool"), rand((1, 9), "bool", rng=np.random.default_rng(3))
    (c,) = run([A, B], getattr(topi, op)(A, B), [a, b])
    np.testing.assert_array_equal(c, getattr(np, op)(a, b))


def test_scalar_operands():
    A = te.placeholder((5, 3), "float32", name="A")
    a = rand((5, 3))
    outs = [topi.add(A, 2.5), topi.subtract(1, A), topi.multiply(A, np.float32(3)),
            topi.maximum(0.0, A), topi.divide(A, 2)]
    res = run([A], outs, [a])
    exp = [a + 2.5, 1 - a, a * 3, np.maximum(0, a), a / 2]
    for r, e in zip(res, exp):
        np.testing.assert_allclose(r, e, rtol=1e-6)
    both = topi.multiply(te.var("x"), 2)  # two scalars: the scalar expression itself
    assert isinstance(both, tvm.tir.PrimExpr) and both.dtype == "int32"


def test_int_scalar_keeps_dtype():
    A = te.placeholder((17,), "int8", name="A")
    C = topi.add(A, 3)
    assert C.dtype == "int8"
    a = rand((17,), "int8")
    (c,) = run([A], C, [a])
    np.testing.assert_array_equal(c, a + np.int8(3))


def test_where_and_broadcast_to():
    C = te.placeholder((3, 1), "bool", name="C")
    X = te.placeholder((1, 5), "float32", name="X")
    Y = te.placeholder((3, 5), "float32", name="Y")
    W = topi.where(C, X, Y)
    T = topi.broadcast_to(X, (2, 3, 5))
    c, x, y = rand((3, 1), "bool"), rand((1, 5)), rand((3, 5), rng=np.random.default_rng(5))
    w, t = run([C, X, Y], [W, T], [c, x, y])
    np.testing.assert_array_equal(w, np.where(c, x, y))
    np.testing.assert_array_equal(t, np.broadcast_to(x, (2, 3, 5)))


def test_c_target():
    A = te.placeholder((3, 1, 7), "float32", name="A")
    B = te.placeholder((4, 1), "float32", name="B")
    a, b = rand((3, 1, 7)), rand((4, 1), rng=np.random.default_rng(1))
    (c,) = run([A, B], topi.multiply(A, B), [a, b], target="c")
    np.testing.assert_allclose(c, a * b, rtol=1e-6)


def test_symbolic_shape():
    n = te.var("n")
    A = te.placeholder((n, 3), "float32", name="A")
    B = te.placeholder((3,), "float32", name="B")
    C = topi.add(A, B)
    assert str(C.shape[0]) == "n"


def test_bad_broadcast():
    A = te.placeholder((3, 4), name="A")
    B = te.placeholder((5,), name="B")
    with pytest.raises(ValueError, match=r"\(3, 4\) and \(5,\) cannot be broadcast.*4 vs 5"):
        topi.add(A, B)
    with pytest.raises(ValueError, match="broadcast_to"):
        topi.broadcast_to(A, (2, 3, 5))
    with pytest.raises(TypeError, match="operands must be"):
        topi.add(A, "x")
    with pytest.raises(TypeError, match="power: needs float"):
        topi.power(te.placeholder((2,), "int32"), 2)


@pytest.mark.parametrize("e", [1.0, 2.0, 3.0, 2.5, 0.5])
@pytest.mark.parametrize("as_stage", [False, True])
def test_power_by_small_constant_is_multiplies(e, as_stage):
    """x ** 1, 2, 3 with a constant exponent (T5 RMSNorm's squares, GPT-2 GELU's cube) are
    multiplies, not a pow call per element (8.8 ns/element before); others still pow. The
    exponent is an immediate or, as a relay scalar Constant reaches a fused kernel, a 0-d
    stage computing one; negative bases included."""
    A = te.placeholder((3, 37), "float32", name="A")
    b = te.compute((), lambda: tvm.tir.const(e, "float32"), name="const") if as_stage \
        else tvm.tir.const(e, "float32")
    C = topi.power(A, b[()] if as_stage else b)
    text = str(tvm.lower(topi.x86.schedule_injective([C]), [A, C], simple_mode=True))
    assert ("pow(" in text) == (e not in (1.0, 2.0, 3.0)), text
    a = rand((3, 37))
    if e not in (1.0, 2.0, 3.0):
        a = np.abs(a)
    (c,) = run([A], C, [a])
    np.testing.assert_allclose(c, np.power(a, np.float32(e)), rtol=1e-6, atol=0)
