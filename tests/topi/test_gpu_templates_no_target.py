"""topi.cuda computes and schedules called with no ``with tvm.target.Target(...)`` around them,
as TVM's docs call them: the autotvm dispatch has no tuned config, so it falls back to the
default config with a warning (TVM's FallbackContext) instead of failing; the kernels built for
OpenCL (PoCL) match numpy, prime and size-1 shapes included."""

from __future__ import annotations

import logging

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import autotvm, te, topi
from tvmpy.target import Target
from tvmpy.topi import testing as ref

RNG = np.random.default_rng(126)


def _run(s, tensors, inputs):
    f = tvm.build(s, tensors, target="opencl")
    dev = tvm.opencl(0)
    out_t = tensors[-1]
    out = tvm.nd.empty(tuple(int(d) for d in out_t.shape), out_t.dtype, dev)
    f(*[tvm.nd.array(x, dev) for x in inputs], out)
    return out.numpy()


@pytest.fixture
def fresh_fallback(monkeypatch):
    """A fresh fallback context, so that its once-per-context warning is emitted here."""
    monkeypatch.setattr(autotvm.task.dispatcher.DispatchContext, "current",
                        autotvm.task.dispatcher.FallbackContext())


@pytest.mark.parametrize("n,c,hw,oc,k,stride,pad", [(1, 3, 13, 7, 3, 1, 1), (2, 1, 5, 1, 1, 2, 0)])
def test_conv2d_nchw_cuda_without_target_context(n, c, hw, oc, k, stride, pad, caplog,
                                                 fresh_fallback):
    assert Target.current() is None
    A = te.placeholder((n, c, hw, hw), name="A")
    W = te.placeholder((oc, c, k, k), name="W")
    with caplog.at_level(logging.WARNING):
        C = topi.cuda.conv2d_nchw(A, W, stride, pad, 1)
        s = topi.cuda.schedule_conv2d_nchw([C])
    assert "no tuned config" in caplog.text and "conv2d_nchw.cuda" in caplog.text
    a = RNG.uniform(-1, 1, (n, c, hw, hw)).astype("float32")
    w = RNG.uniform(-1, 1, (oc, c, k, k)).astype("float32")
    got = _run(s, [A, W, C], [a, w])
    tvm.testing.assert_allclose(got, ref.conv2d_nchw_python(a, w, stride, pad), rtol=1e-4,
                                atol=1e-4)


def test_dense_cuda_without_target_context(fresh_fallback):
    X = te.placeholder((3, 17), name="X")
    W = te.placeholder((5, 17), name="W")
    D = topi.cuda.dense(X, W)
    s = topi.cuda.schedule_dense([D])
    x = RNG.uniform(-1, 1, (3, 17)).astype("float32")
    w = RNG.uniform(-1, 1, (5, 17)).astype("float32")
    tvm.testing.assert_allclose(_run(s, [X, W, D], [x, w]), x @ w.T, rtol=1e-4, atol=1e-4)
