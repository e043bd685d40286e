"""Integer index chains far deeper than Python's recursion limit (an unrolled integer reduction:
10,000 nested Adds) go through the simplifiers, the bound and modular analyses, and lower and
build: the arith layer reads deep chains with an explicit stack, no recursion-limit workaround."""

import sys

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import te, tir
from tvmpy.arith import Analyzer

pytestmark = pytest.mark.usefixtures("default_recursion_limit")  # tests/conftest.py

TERMS = 10_000
DTYPES = ["int32", "int64"]


def _chain(x, n: int):
    """sum(x*k + k % 3 for k in range(n)), as n nested Adds (left-deep, like a reduction)."""
    e = x * 0
    for k in range(1, n):
        e = e + x * k + (k % 3)
    return e


def _collapsed(n: int) -> tuple[int, int]:
    return sum(range(1, n)), sum(k % 3 for k in range(1, n))


def test_deeper_than_the_recursion_limit():
    assert TERMS > 5 * sys.getrecursionlimit()


@pytest.mark.parametrize("dtype", DTYPES)
def test_simplify(dtype):
    x = tir.Var("x", dtype)
    coeff, const = _collapsed(TERMS)
    for simplify in ("simplify", "canonical_simplify", "rewrite_simplify"):
        out = getattr(Analyzer(), simplify)(_chain(x, TERMS))
        assert tvm.ir.structural_equal(out, x * coeff + const), (simplify, out)


@pytest.mark.parametrize("dtype", DTYPES)
def test_right_deep_chain(dtype):
    x = tir.Var("x", dtype)
    e = x
    for k in range(1, TERMS):
        e = (x - k) + e  # the depth is on the right
    out = Analyzer().simplify(e)
    assert tvm.ir.structural_equal(out, x * TERMS - sum(range(TERMS)))


@pytest.mark.parametrize("dtype", DTYPES)
def test_const_int_bound_and_modular_set(dtype):
    x = tir.Var("x", dtype)
    a = Analyzer()
    a.bind(x, tvm.ir.Range(0, 4))
    e = x * 0
    for k in range(1, TERMS):
        e = e + x * 6 + tir.floormod(x + k, 2) * 2  # a floormod atom per term: no collapse
    coeff = 6 * (TERMS - 1)
    b = a.const_int_bound(e)
    assert (b.min_value, b.max_value) == (0, 3 * coeff + 2 * (TERMS - 1))
    m = a.modular_set(e)
    assert m.coeff == 2 and m.base % 2 == 0


def _indexed(n: int, dtype: str):
    """B[i] = A[f(i)] where f is an n-term chain of i; checked against numpy."""
    size = 64
    A = te.placeholder((size,), name="A", dtype="float32")
    B = te.compute(
        (16,),
        lambda i: A[tir.floormod(_chain(tir.Cast(dtype, i), n), size)],
        name="B",
    )
    s = te.create_schedule(B.op)
    coeff, const = _collapsed(n)
    a = np.random.default_rng(0).random(size).astype("float32")
    expect = a[(np.arange(16) * coeff + const) % size]
    return s, [A, B], a, expect


def _check(mod, a, expect) -> None:
    b = tvm.nd.array(np.zeros(expect.shape, "float32"))
    mod(tvm.nd.array(a), b)
    np.testing.assert_array_equal(b.numpy(), expect)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("target", ["llvm", "c"])
def test_lower_and_build(dtype, target):
    s, args, a, expect = _indexed(TERMS, dtype)
    _check(tvm.build(tvm.lower(s, args), target=target), a, expect)


def _opaque(n: int):
    """B[i] = sum of floordiv(i + k, 7) for k < n: distinct atoms, an n-term chain to the end."""
    B = te.compute((8,), lambda i: sum((tir.floordiv(i + k, 7) for k in range(1, n)),
                                       tir.floordiv(i, 7)), name="B")
    s = te.create_schedule(B.op)
    expect = sum((np.arange(8) + k) // 7 for k in range(n)).astype("int32")
    return s, [B], expect


@pytest.mark.parametrize("target", ["llvm", "c"])
def test_build_opaque_chain(target):
    n = 3_000 if target == "llvm" else TERMS  # LLVM's optimiser is slow on huge blocks
    s, args, expect = _opaque(n)
    mod = tvm.build(tvm.lower(s, args), target=target)
    b = tvm.nd.array(np.zeros(8, "int32"))
    mod(b)
    np.testing.assert_array_equal(b.numpy(), expect)
