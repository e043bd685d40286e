"""``tvm.contrib.cblas`` (TVM's extern BLAS wrappers): te.extern stages whose generated code calls
the C BLAS functions of the registry directly, checked against numpy."""

from __future__ import annotations

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import te
from tvmpy.contrib import cblas
from tvmpy.runtime import packed_func


@pytest.fixture
def rng():
    return np.random.default_rng(2026)


def _np(t):
    return tuple(int(s) for s in t.shape)


@pytest.mark.parametrize("target", ["llvm", "c"])
@pytest.mark.parametrize("transa,transb", [(False, False), (True, False), (False, True),
                                           (True, True)])
@pytest.mark.parametrize("n,k,m", [(1, 1, 1), (13, 7, 29), (64, 31, 1)])
def test_matmul(target, transa, transb, n, k, m, rng):
    A = te.placeholder((k, n) if transa else (n, k), name="A")
    B = te.placeholder((m, k) if transb else (k, m), name="B")
    bias = te.var("bias", dtype="float32")
    C = cblas.matmul(A, B, transa, transb)
    assert _np(C) == (n, m)
    D = te.compute(C.shape, lambda i, j: C[i, j] + bias, name="D")
    f = tvm.build(te.create_schedule(D.op), [A, B, D, bias], target)
    a = rng.uniform(-1, 1, _np(A)).astype("float32")
    b = rng.uniform(-1, 1, _np(B)).astype("float32")
    d = tvm.nd.empty((n, m), "float32")
    f(tvm.nd.array(a), tvm.nd.array(b), d, 0.75)
    ref = (a.T if transa else a) @ (b.T if transb else b) + 0.75
    tvm.testing.assert_allclose(d.numpy(), ref, rtol=1e-5, atol=1e-5)


def test_matmul_float64_symbolic_rows(rng):
    n = te.var("n")
    A = te.placeholder((n, 17), name="A", dtype="float64")
    B = te.placeholder((17, 5), name="B", dtype="float64")
    C = cblas.matmul(A, B)
    f = tvm.build(te.create_schedule(C.op), [A, B, C], "llvm")
    for rows in (1, 23):
        a, b = rng.standard_normal((rows, 17)), rng.standard_normal((17, 5))
        c = tvm.nd.empty((rows, 5), "float64")
        f(tvm.nd.array(a), tvm.nd.array(b), c)
        tvm.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("iterative", [False, True])
@pytest.mark.parametrize("ba,bb", [(3, 3), (1, 4), (5, 1)])
@pytest.mark.parametrize("transa,transb", [(False, False), (True, True), (False, True)])
def test_batch_matmul(ba, bb, transa, transb, iterative, rng):
    n, k, m = 7, 11, 3
    A = te.placeholder((ba, k, n) if transa else (ba, n, k), name="A")
    B = te.placeholder((bb, m, k) if transb else (bb, k, m), name="B")
    C = cblas.batch_matmul(A, B, transa, transb, iterative=iterative)
    assert _np(C) == (max(ba, bb), n, m)
    f = tvm.build(te.create_schedule(C.op), [A, B, C], "llvm")
    a = rng.uniform(-1, 1, _np(A)).astype("float32")
    b = rng.uniform(-1, 1, _np(B)).astype("float32")
    c = tvm.nd.empty(_np(C), "float32")
    f(tvm.nd.array(a), tvm.nd.array(b), c)
    ref = np.matmul(a.transpose(0, 2, 1) if transa else a, b.transpose(0, 2, 1) if transb else b)
    tvm.testing.assert_allclose(c.numpy(), ref, rtol=1e-5, atol=1e-5)


def test_generated_code_calls_blas_without_python(monkeypatch, rng):
    """After the one lookup per library, each call is a direct C call: no registry lookup and
    no Python wrapper runs (PackedFunc.__call__ is not entered)."""
    looked_up = []
    find = packed_func._find
    monkeypatch.setattr(packed_func, "_find", lambda name: looked_up.append(name) or find(name))
    entered = []
    call = packed_func.PackedFunc.__call__
    monkeypatch.setattr(packed_func.PackedFunc, "__call__",
                        lambda self, *a: entered.append(self.name) or call(self, *a))
    A = te.placeholder((8, 8), name="A")
    B = te.placeholder((8, 8), name="B")
    C = cblas.matmul(A, B)
    f = tvm.build(te.create_schedule(C.op), [A, B, C], "llvm")
    looked_up.clear()
    a, b = rng.uniform(size=(8, 8)).astype("float32"), rng.uniform(size=(8, 8)).astype("float32")
    c = tvm.nd.empty((8, 8), "float32")
    for _ in range(4):
        f(tvm.nd.array(a), tvm.nd.array(b), c)
    assert looked_up == ["tvm.contrib.cblas.matmul"] and entered == []
    tvm.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-5)


def test_bad_inputs():
    A = te.placeholder((4, 5), name="A")
    with pytest.raises(ValueError, match="reduction extents differ"):
        cblas.matmul(A, A)
    with pytest.raises(TypeError, match="float32 or float64"):
        cblas.matmul(te.placeholder((4, 4), dtype="int32"), te.placeholder((4, 4), dtype="int32"))
    with pytest.raises(ValueError, match="2 dimensions"):
        cblas.matmul(te.placeholder((4, 4, 4)), A)
    with pytest.raises(TypeError, match="te.Tensor"):
        cblas.matmul(np.zeros((4, 5)), A)
    with pytest.raises(TypeError, match="float64"):
        cblas.matmul(te.placeholder((4, 5), dtype="float64"), te.placeholder((5, 4)))
    with pytest.raises(ValueError, match="do not broadcast"):
        cblas.batch_matmul(te.placeholder((2, 3, 4)), te.placeholder((3, 4, 3)))


def test_bad_call_from_generated_code_is_an_error():
    """The C function checks what generated code hands it: a clear error, not a crash."""
    A = te.placeholder((4, 5), name="A")
    B = te.placeholder((4, 5), name="B")
    C = te.extern((4, 5), [A, B],
                  lambda ins, outs: tvm.tir.call_packed("tvm.contrib.cblas.matmul", ins[0],
                                                        ins[1], outs[0], False, False), name="C")
    f = tvm.build(te.create_schedule(C.op), [A, B, C], "llvm")
    a, c = tvm.nd.array(np.ones((4, 5), "float32")), tvm.nd.empty((4, 5), "float32")
    with pytest.raises(RuntimeError, match="cblas.matmul.*failed.*shapes do not match: A 4x5, "
                                           "B 4x5, C 4x5"):
        f(a, a, c)
    D = te.extern((4, 5), [A],
                  lambda ins, outs: tvm.tir.call_packed("tvm.contrib.cblas.matmul", ins[0], 1.5,
                                                        outs[0]), name="D")
    g = tvm.build(te.create_schedule(D.op), [A, D], "c")
    with pytest.raises(RuntimeError, match="argument 1 must be an array"):
        g(a, c)
    with pytest.raises(ValueError, match="Cannot find global function 'tvm.contrib.cblas.gemv'"):
        tvm.get_global_func("tvm.contrib.cblas.gemv")
