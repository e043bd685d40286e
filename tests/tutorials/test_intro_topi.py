"""The steps of TVM's tutorial "Introduction to TOPI", in our own code: a row sum written by hand
and with ``topi.sum``; numpy-style arithmetic on te.Tensors with broadcasting; the element-wise
sum and a full reduction scheduled with ``topi.cuda.schedule_reduce`` (CUDA as source that NVRTC
compiles, run on OpenCL/PoCL, and the CPU schedules on llvm); softmax and conv2d + relu from
topi with their schedules (run on llvm, CUDA as codegen). Small shapes; numpy references."""

from __future__ import annotations

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import te, topi
from tvmpy.contrib import nvcc
from tvmpy.topi.testing import conv2d_nchw_python, softmax_python

RNG = np.random.default_rng(26)


def _rand(*shape):
    return RNG.uniform(-1, 1, shape).astype("float32")


def _shape(t):
    return tuple(int(d) for d in t.shape)


def _run(f, arrays, out):
    res = tvm.nd.empty(_shape(out), out.dtype)
    f(*[tvm.nd.array(a) for a in arrays], res)
    return res.numpy()


def _cuda_compiles(f):
    src = f.imported_modules[0].get_source()
    assert "__global__" in src and nvcc.compile_cuda(src)


def test_row_sum_by_hand_and_with_topi():
    n, m = te.var("n"), te.var("m")
    A = te.placeholder((n, m), name="A")
    k = te.reduce_axis((0, m), "k")
    B = te.compute((n,), lambda i: te.sum(A[i, k], axis=k), name="B")
    C = topi.sum(A, axis=1)
    x = _rand(7, 13)
    for out in (B, C):
        s = te.create_schedule(out.op)
        assert "for" in str(tvm.lower(s, [A, out], simple_mode=True))
        f = tvm.build(s, [A, out], "llvm")
        res = tvm.nd.empty((7,), "float32")
        f(tvm.nd.array(x), res)
        tvm.testing.assert_allclose(res.numpy(), x.sum(axis=1), rtol=1e-5, atol=1e-6)


def _sum_graph():
    x, y = 37, 6  # not multiples of a thread block
    a = te.placeholder((x, y, y), name="a")
    b = te.placeholder((y, y), name="b")
    c = a + b  # broadcasting, as numpy
    d = a * b
    e = topi.elemwise_sum([c, d])
    f = e / 2.0
    g = topi.sum(f)
    arrays = [_rand(x, y, y), _rand(y, y)]
    want = ((arrays[0] + arrays[1]) + arrays[0] * arrays[1]).sum(dtype="float64") / 2.0
    return a, b, g, arrays, want


def test_broadcast_arithmetic_and_full_sum_cuda_schedule():
    a, b, g, arrays, want = _sum_graph()
    with tvm.target.Target("cuda"):
        sg = topi.cuda.schedule_reduce(g)
        assert "threadIdx.x" in str(tvm.lower(sg, [a, b], simple_mode=True))
        _cuda_compiles(tvm.build(sg, [a, b, g], "cuda"))
    assert len(sg.stages) >= 1
    with tvm.target.Target("opencl"):  # the same GPU schedule, run on PoCL
        sg = topi.cuda.schedule_reduce(g)
        f = tvm.build(sg, [a, b, g], "opencl")
    tvm.testing.assert_allclose(_run(f, arrays, g), want, rtol=1e-4)


@pytest.mark.parametrize("family", ["generic", "x86"])
def test_full_sum_cpu_schedule(family):
    a, b, g, arrays, want = _sum_graph()
    with tvm.target.Target("llvm"):
        s = getattr(topi, family).schedule_reduce(g)
        f = tvm.build(s, [a, b, g], "llvm")
    tvm.testing.assert_allclose(_run(f, arrays, g), want, rtol=1e-4)


def test_softmax():
    t = te.placeholder((5, 67), name="t")
    sm = topi.nn.softmax(t)
    x = _rand(5, 67) * 4
    want = softmax_python(x, axis=1)
    with tvm.target.Target("llvm"):
        s = topi.x86.schedule_softmax(sm)
        f = tvm.build(s, [t, sm], "llvm")
    tvm.testing.assert_allclose(_run(f, [x], sm), want, rtol=1e-5, atol=1e-7)
    with tvm.target.Target("cuda"):
        s = topi.cuda.schedule_softmax(sm)
        _cuda_compiles(tvm.build(s, [t, sm], "cuda"))


def test_conv2d_relu():
    data = te.placeholder((1, 3, 19, 17), name="data")
    kernel = te.placeholder((10, 3, 5, 5), name="kernel")
    x, w = _rand(1, 3, 19, 17), _rand(10, 3, 5, 5)
    with tvm.target.Target("llvm"):
        conv = topi.nn.conv2d_nchw(data, kernel, 1, 2, 1)
        out = topi.nn.relu(conv)
        s = topi.x86.schedule_conv2d_nchw([out])
        f = tvm.build(s, [data, kernel, out], "llvm")
    got = _run(f, [x, w], out)
    assert got.shape == (1, 10, 19, 17)
    want = np.maximum(conv2d_nchw_python(x, w, 1, 2), 0)
    tvm.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    with tvm.target.Target("cuda"):
        conv = topi.cuda.conv2d_nchw(data, kernel, 1, 2, 1)
        out = topi.nn.relu(conv)
        s = topi.cuda.schedule_conv2d_nchw([out])
        _cuda_compiles(tvm.build(s, [data, kernel, out], "cuda"))
