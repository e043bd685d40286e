"""Tutorial check: TVM's "External Tensor Functions" (tutorials/language/extern_op.py), its steps
in our own code, small and offline: a BLAS call as a te.extern stage (through call_packed and
through the contrib.cblas wrapper) followed by a scheduled bias add, then a Python function
registered with tvm.register_func and called from the generated code."""

from __future__ import annotations

import numpy as np

import tvmpy as tvm
from tvmpy import te
from tvmpy.contrib import cblas


def test_extern_op_tutorial_steps():
    rng = np.random.default_rng(7)
    # the tutorial starts by checking that the BLAS functions are available
    assert tvm.get_global_func("tvm.contrib.cblas.matmul", allow_missing=True)

    # step 1: an extern stage calling the registered BLAS function, then a bias stage
    rows, inner, cols = 97, 40, 61
    bias = te.var("bias", dtype="float32")
    A = te.placeholder((rows, inner), name="A")
    B = te.placeholder((inner, cols), name="B")
    C = te.extern((rows, cols), [A, B],
                  lambda ins, outs: tvm.tir.call_packed("tvm.contrib.cblas.matmul", ins[0],
                                                        ins[1], outs[0], False, False),
                  name="C")
    D = te.compute(C.shape, lambda i, j: C[i, j] + bias, name="D")
    dev = tvm.cpu(0)
    f = tvm.build(te.create_schedule(D.op), [A, B, D, bias], "llvm")
    a = tvm.nd.array(rng.uniform(size=(rows, inner)).astype("float32"), dev)
    b = tvm.nd.array(rng.uniform(size=(inner, cols)).astype("float32"), dev)
    d = tvm.nd.array(np.zeros((rows, cols), dtype="float32"), dev)
    f(a, b, d, 10.0)
    tvm.testing.assert_allclose(d.numpy(), np.dot(a.numpy(), b.numpy()) + 10, rtol=1e-5)

    # step 2: the contrib wrapper gives the same stage
    C2 = cblas.matmul(A, B)
    D2 = te.compute(C2.shape, lambda i, j: C2[i, j] + bias, name="D")
    f2 = tvm.build(te.create_schedule(D2.op), [A, B, D2, bias], "llvm")
    d2 = tvm.nd.array(np.zeros((rows, cols), dtype="float32"), dev)
    f2(a, b, d2, -3.0)
    tvm.testing.assert_allclose(d2.numpy(), np.dot(a.numpy(), b.numpy()) - 3, rtol=1e-5)

    # step 3: a Python function as the extern stage, through the global registry
    kinds = []

    @tvm.register_func("tvm.contrib.my_tvm_addone", override=True)
    def my_tvm_addone(x, y):
        kinds.append((type(x), type(y)))
        tvm.nd.array(x.numpy() + 1).copyto(y)

    n = 1023
    X = te.placeholder((n,), name="A")
    Y = te.extern(X.shape, [X],
                  lambda ins, outs: tvm.tir.call_packed("tvm.contrib.my_tvm_addone", ins[0],
                                                        outs[0]),
                  name="C")
    g = tvm.build(te.create_schedule(Y.op), [X, Y], "llvm")
    x = tvm.nd.array(rng.uniform(size=(n,)).astype(X.dtype), dev)
    y = tvm.nd.array(rng.uniform(size=(n,)).astype(Y.dtype), dev)
    g(x, y)
    tvm.testing.assert_allclose(y.numpy(), x.numpy() + 1, rtol=1e-5)
    assert kinds == [(tvm.nd.NDArray, tvm.nd.NDArray)]
