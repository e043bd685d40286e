"""The LLVM backend through ``tvm.build`` (schedule -> lowering pipeline -> LLVM -> Module)."""

from __future__ import annotations

import numpy as np

import tvmpy as tvm
from tvmpy import te


def _matmul(n, m, k_):
    A = te.placeholder((n, k_), name="A")
    B = te.placeholder((k_, m), name="B")
    k = te.reduce_axis((0, k_), name="k")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return A, B, C


def test_tiled_vectorized_parallel_matmul_prime_sizes():
    n, m, k_ = 67, 45, 53
    A, B, C = _matmul(n, m, k_)
    s = te.create_schedule(C.op)
    yo, xo, yi, xi = s[C].tile(C.op.axis[0], C.op.axis[1], 8, 16)
    ko, ki = s[C].split(s[C].op.reduce_axis[0], 4)
    s[C].reorder(yo, xo, ko, yi, ki, xi)
    s[C].vectorize(xi)
    s[C].parallel(yo)
    f = tvm.build(s, [A, B, C], target="llvm", name="mm")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, k_)).astype("float32")
    b = rng.standard_normal((k_, m)).astype("float32")
    c = tvm.nd.empty((n, m), "float32")
    f(tvm.nd.array(a), tvm.nd.array(b), c)
    np.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-4, atol=1e-4)
    assert "tvmpy_parallel_run" in f.get_source("ll")


def test_symbolic_size_elementwise_with_intrinsics():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: te.exp(A[i]) * tvm.tir.op.sigmoid(A[i]) + te.sqrt(
        te.abs(A[i])), name="B")
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], 16)
    s[B].vectorize(xi)
    f = tvm.build(s, [A, B], target="llvm", name="ew")
    for size in (1, 16, 37):
        x = np.random.default_rng(size).uniform(-4, 4, size).astype("float32")
        y = tvm.nd.empty((size,), "float32")
        f(tvm.nd.array(x), y)
        ref = np.exp(x) / (1 + np.exp(-x)) + np.sqrt(np.abs(x))
        np.testing.assert_allclose(y.numpy(), ref, rtol=2e-5, atol=1e-5)


def test_row_max_and_sum_reductions():
    n, m = 13, 70
    A = te.placeholder((n, m), name="A")
    k = te.reduce_axis((0, m), name="k")
    M = te.compute((n,), lambda i: te.max(A[i, k], axis=k), name="M")
    k2 = te.reduce_axis((0, m), name="k2")
    S = te.compute((n,), lambda i: te.sum(te.exp(A[i, k2] - M[i]), axis=k2), name="S")
    s = te.create_schedule(S.op)
    s[S].parallel(S.op.axis[0])
    f = tvm.build(s, [A, S], target="llvm", name="lse")
    a = np.random.default_rng(1).standard_normal((n, m)).astype("float32")
    out = tvm.nd.empty((n,), "float32")
    f(tvm.nd.array(a), out)
    ref = np.exp(a - a.max(1, keepdims=True)).sum(1)
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-5)


def test_export_with_vector_math_and_parallel_loads_in_fresh_process(tmp_path):
    import subprocess
    import sys

    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: te.exp(A[i]) + te.tanh(A[i]), name="B")
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], 16)
    s[B].vectorize(xi)
    s[B].parallel(xo)
    f = tvm.build(s, [A, B], target="llvm", name="ex")
    path = str(tmp_path / "ex.so")
    f.export_library(path)
    code = (
        "import numpy as np, tvmpy as tvm\n"
        f"m = tvm.runtime.load_module({path!r})\n"
        "x = np.linspace(-3, 3, 101).astype('float32')\n"
        "y = tvm.nd.empty((101,), 'float32')\n"
        "m(tvm.nd.array(x), y)\n"
        "np.testing.assert_allclose(y.numpy(), np.exp(x) + np.tanh(x), rtol=1e-5)\n"
        "print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_pragma_import_llvm_and_import_c_link_micro_kernels():
    """TVM's way to bring a hand-written kernel into a module: s[C].pragma(axis, "import_llvm",
    ll_source) (here also "import_c"); the kernels are called with call_pure_extern."""
    ll = """
define float @tvmpy_test_sq(float %x) {
  %y = fmul float %x, %x
  ret float %y
}
"""
    c_src = "float tvmpy_test_twice(float x) { return 2.0f * x; }\n"
    n = 29
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: tvm.tir.op.call_pure_extern(
        "float32", "tvmpy_test_sq", A[i]) + tvm.tir.op.call_pure_extern(
        "float32", "tvmpy_test_twice", A[i]), name="B")
    s = te.create_schedule(B.op)
    s[B].pragma(B.op.axis[0], "import_llvm", ll)
    s[B].pragma(B.op.axis[0], "import_c", c_src)
    f = tvm.build(s, [A, B], target="llvm", name="imp")
    x = np.random.default_rng(3).standard_normal(n).astype("float32")
    y = tvm.nd.empty((n,), "float32")
    f(tvm.nd.array(x), y)
    np.testing.assert_allclose(y.numpy(), x * x + 2 * x, rtol=1e-6)
