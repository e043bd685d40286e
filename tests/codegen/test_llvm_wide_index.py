"""LLVM codegen: a scalar int32 element index is computed in i64 (+, -, * over sign-extended
leaves; codegen/llvm_codegen.py ``WIDE_INDEX``), the width of the address, so that LLVM need
not prove each i32 index expression free of signed wrap (issue 28 point 5: that proof was ~40%
of an auto-scheduler conv candidate's build). The results stay numpy's where intermediate
offsets are negative, the index holds a floordiv/floormod or a symbolic size."""

from __future__ import annotations

import re

import numpy as np

import tvmpy as tvm
from tvmpy import te, tir
from tvmpy.codegen import llvm_codegen
from tvmpy.tir.op import if_then_else


def _padded_stencil(n: int, m: int):
    A = te.placeholder((n, m), name="A")
    P = te.compute((n + 2, m + 2), lambda i, j: if_then_else(
        tir.all(i >= 1, i <= n, j >= 1, j <= m), A[i - 1, j - 1], 0.0), name="P")
    B = te.compute((n, m), lambda i, j: P[i, j] + P[i + 2, j + 1] * 2.0 - P[i + 1, j + 2],
                   name="B")
    s = te.create_schedule(B.op)
    io, ii = s[B].split(B.op.axis[0], factor=4)  # a tail: 4 does not divide 7
    s[P].compute_at(s[B], io)
    return s, [A, B]


def _stencil_ref(a):
    n, m = a.shape
    p = np.zeros((n + 2, m + 2), a.dtype)
    p[1:-1, 1:-1] = a
    return p[:n, :m] + p[2:, 1:m + 1] * 2 - p[1:n + 1, 2:]


def test_scalar_element_indices_are_i64_and_right():
    s, args = _padded_stencil(7, 5)
    f = tvm.build(s, args, "llvm")
    ll = f.get_source("ll")
    geps = re.findall(r"getelementptr inbounds float, ptr %[\w.]+, (i\d+) ", ll)
    assert geps and set(geps) == {"i64"}, set(geps)
    a = np.random.default_rng(0).uniform(-1, 1, (7, 5)).astype("float32")
    b = tvm.nd.empty((7, 5), "float32")
    f(tvm.nd.array(a), b)
    np.testing.assert_allclose(b.numpy(), _stencil_ref(a), rtol=1e-6, atol=1e-6)


def test_floordiv_and_symbolic_indices():
    n = te.var("n")
    A = te.placeholder((n, 6), name="A")
    B = te.compute((n * 6,), lambda k: A[k // 6, k % 6] * 3.0 - A[(n * 6 - 1 - k) // 6, 5 - k % 6],
                   name="B")
    s = te.create_schedule(B.op)
    f = tvm.build(s, [A, B], "llvm")
    for rows in (1, 3, 11):
        a = np.random.default_rng(rows).uniform(-1, 1, (rows, 6)).astype("float32")
        b = tvm.nd.empty((rows * 6,), "float32")
        f(tvm.nd.array(a), b)
        np.testing.assert_allclose(b.numpy(), a.ravel() * 3 - a.ravel()[::-1],
                                   rtol=1e-6, atol=1e-6)  # FMA contraction


def test_i32_indices_still_build_the_same_results(monkeypatch):
    """The switch's other side (``WIDE_INDEX = False``, the code before) computes the same."""
    monkeypatch.setattr(llvm_codegen, "WIDE_INDEX", False)
    s, args = _padded_stencil(7, 5)
    f = tvm.build(s, args, "llvm")
    assert "getelementptr inbounds float, ptr %" in f.get_source("ll")
    a = np.random.default_rng(1).uniform(-1, 1, (7, 5)).astype("float32")
    b = tvm.nd.empty((7, 5), "float32")
    f(tvm.nd.array(a), b)
    np.testing.assert_allclose(b.numpy(), _stencil_ref(a), rtol=1e-6, atol=1e-6)
