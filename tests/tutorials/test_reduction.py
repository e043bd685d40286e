"""The steps of TVM's tutorial "Reduction" on tvmpy: a row sum with te.sum on symbolic sizes,
splitting the reduction axis, binding rows to GPU threads, rfactor, the cross-thread reduction
(CUDA C through NVRTC; run on PoCL's OpenCL device), a 2D convolution reducing over
two axes, and a custom commutative reducer (te.comm_reducer). Checked against numpy."""

from __future__ import annotations

import numpy as np
import pytest

import tvmpy as tvm
import tvmpy.testing
from tvmpy import te

RNG = np.random.default_rng(2610)


def _opencl():
    """PoCL's OpenCL device: installed wherever the suite runs (README), so its absence fails."""
    dev = tvm.cl(0)
    assert dev.exist, "no OpenCL device (install pyopencl + pocl-opencl-icd)"
    return dev
SIZES = [(128, 128), (37, 101), (1, 5), (3, 1)]


def _row_sum():
    n, m = te.var("n"), te.var("m")
    A = te.placeholder((n, m), name="A")
    k = te.reduce_axis((0, m), "k")
    B = te.compute((n,), lambda i: te.sum(A[i, k], axis=k), name="B")
    return A, B


def _check_row_sum(f, dev=None, sizes=SIZES):
    dev = dev or tvm.cpu(0)
    for n, m in sizes:
        a = RNG.uniform(size=(n, m)).astype("float32")
        b = tvm.nd.array(np.full(n, np.nan, "float32"), dev)
        f(tvm.nd.array(a, dev), b)
        tvm.testing.assert_allclose(b.numpy(), a.sum(axis=1), rtol=1e-4)


def _loop_names(func):
    out = []
    # pre-order: a loop before the loops inside it, siblings in program order
    tvm.tir.stmt_functor.ir_transform(
        func.body, lambda s: out.append(s.loop_var.name), None, ["tir.For"])
    return out


def test_row_sum_and_split_reduction_axis():
    A, B = _row_sum()
    s = te.create_schedule(B.op)
    assert _loop_names(tvm.lower(s, [A, B], simple_mode=True)) == ["i", "k"]
    _check_row_sum(tvm.build(s, [A, B], "llvm"))
    ko, ki = s[B].split(B.op.reduce_axis[0], factor=16)
    xo, xi = s[B].split(B.op.axis[0], factor=32)
    names = _loop_names(tvm.lower(s, [A, B], simple_mode=True))
    assert {"i.outer", "i.inner", "k.outer", "k.inner"} <= set(names)
    assert names.index("k.outer") < names.index("k.inner")
    _check_row_sum(tvm.build(s, [A, B], "llvm"))


def _rows_on_threads():
    A, B = _row_sum()
    s = te.create_schedule(B.op)
    s[B].split(B.op.reduce_axis[0], factor=16)
    xo, xi = s[B].split(B.op.axis[0], factor=32)
    s[B].bind(xo, te.thread_axis("blockIdx.x"))
    s[B].bind(xi, te.thread_axis("threadIdx.x"))
    return s, [A, B]


def test_rows_bound_to_gpu_threads():
    s, args = _rows_on_threads()
    src = tvm.build(s, args, "cuda").imported_modules[0].get_source()
    assert "blockIdx.x" in src and "threadIdx.x" in src
    _check_row_sum(tvm.build(s, args, "opencl"), _opencl())


def test_rfactor():
    A, B = _row_sum()
    s = te.create_schedule(B.op)
    ko, ki = s[B].split(B.op.reduce_axis[0], factor=16)
    BF = s.rfactor(B, ki)
    assert BF.op.name == "B.rf" and tuple(BF.shape)[0] == 16
    assert [iv.var.name for iv in s[B].op.reduce_axis] == ["k.inner.v"]
    body = str(s[B].op.body)
    assert "sum(" in body and "B.rf" in body
    _check_row_sum(tvm.build(s, [A, B], "llvm"))


def _cross_thread(rows_per_block):
    A, B = _row_sum()
    s = te.create_schedule(B.op)
    ko, ki = s[B].split(B.op.reduce_axis[0], factor=16)
    BF = s.rfactor(B, ki)
    xo, xi = s[B].split(s[B].op.axis[0], factor=rows_per_block)
    s[B].bind(xo, te.thread_axis("blockIdx.x"))
    s[B].bind(xi, te.thread_axis("threadIdx.y"))
    tx = te.thread_axis("threadIdx.x")
    s[B].bind(s[B].op.reduce_axis[0], tx)
    s[BF].compute_at(s[B], s[B].op.reduce_axis[0])
    s[B].set_store_predicate(tx.var.equal(0))
    return s, [A, B]


def test_cross_thread_reduction_cuda_source():
    s, args = _cross_thread(32)
    f = tvm.build(s, args, "cuda")
    src = f.imported_modules[0].get_source()
    assert "threadIdx.y" in src and "threadIdx.x" in src
    assert "__shfl" in src or "__shared__" in src  # the 16 partial sums combine across threads
    assert ".entry" in f.imported_modules[0].get_source("ptx")


def test_cross_thread_reduction_runs_on_opencl():
    s, args = _cross_thread(16)  # 16 x 16 threads: within target opencl's 256 per block
    _check_row_sum(tvm.build(s, args, "opencl"), _opencl())


def test_cross_thread_reduction_block_too_large_for_opencl_is_refused():
    s, args = _cross_thread(32)  # 512 threads
    with pytest.raises(ValueError, match="max_threads_per_block"):
        tvm.build(s, args, "opencl")


def test_convolution_reduces_over_two_axes():
    n = te.var("n")
    Input = te.placeholder((n, n), name="Input")
    Filter = te.placeholder((3, 3), name="Filter")
    di = te.reduce_axis((0, 3), name="di")
    dj = te.reduce_axis((0, 3), name="dj")
    Output = te.compute((n - 2, n - 2), lambda i, j: te.sum(
        Input[i + di, j + dj] * Filter[di, dj], axis=[di, dj]), name="Output")
    s = te.create_schedule(Output.op)
    assert _loop_names(tvm.lower(s, [Input, Filter, Output], simple_mode=True)) == [
        "i", "j", "di", "dj"]
    f = tvm.build(s, [Input, Filter, Output], "llvm")
    for size in (3, 11):
        x = RNG.uniform(-1, 1, (size, size)).astype("float32")
        w = RNG.uniform(-1, 1, (3, 3)).astype("float32")
        out = tvm.nd.array(np.full((size - 2, size - 2), np.nan, "float32"))
        f(tvm.nd.array(x), tvm.nd.array(w), out)
        want = np.array([[np.sum(x[i:i + 3, j:j + 3] * w) for j in range(size - 2)]
                         for i in range(size - 2)])
        tvm.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-6)


def test_custom_product_reducer():
    n, m = te.var("n"), te.var("m")
    product = te.comm_reducer(lambda x, y: x * y, lambda t: tvm.tir.const(1, dtype=t),
                              name="product")
    A = te.placeholder((n, m), name="A")
    k = te.reduce_axis((0, m), name="k")
    B = te.compute((n,), lambda i: product(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    f = tvm.build(s, [A, B], "llvm")
    for rows, cols in ((6, 9), (1, 1), (4, 0)):  # an empty reduction gives the identity
        a = RNG.uniform(0.5, 1.5, (rows, cols)).astype("float32")
        b = tvm.nd.array(np.full(rows, np.nan, "float32"))
        f(tvm.nd.array(a), b)
        tvm.testing.assert_allclose(b.numpy(), np.prod(a, axis=1), rtol=1e-5)
