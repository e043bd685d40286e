"""The separable pool compute (``pool2d/3d(..., separable=True)``: window rows, then columns)
with the x86 schedule, against the numpy references, over attribute combinations and awkward
shapes; and the x86 strategy choosing it in relay builds."""

from __future__ import annotations

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import relay, te, topi
from tvmpy.topi import nn, testing

from .nn_util import check

# (kernel, stride, dilation, padding (top, left, bottom, right))
WINDOWS = [
    ((3, 3), (2, 2), (1, 1), (1, 1, 1, 1)),     # ResNet's stem pool
    ((2, 3), (1, 2), (1, 2), (0, 1, 2, 0)),     # dilated, asymmetric padding
    ((3, 2), (3, 1), (2, 1), (2, 0, 1, 1)),
    ((1, 3), (1, 2), (1, 1), (0, 1, 0, 1)),     # one window row: the one-stage compute
    ((3, 1), (2, 1), (1, 1), (1, 0, 1, 0)),     # one window column: likewise
]
KINDS = [("max", False, True), ("max", True, True), ("avg", False, False),
         ("avg", True, False), ("avg", False, True), ("avg", True, True)]
SHAPES = [(1, 3, 7, 7), (2, 57, 13, 17), (1, 1, 17, 13), (1, 2, 4, 40)]


@pytest.mark.parametrize("pool_type,ceil_mode,cip", KINDS)
@pytest.mark.parametrize("window", WINDOWS)
@pytest.mark.parametrize("shape", SHAPES)
def test_pool2d_separable(shape, window, pool_type, ceil_mode, cip):
    k, stride, dil, pad = window
    A = te.placeholder(shape, name="A")
    out = nn.pool2d(A, k, stride, dil, pad, pool_type, ceil_mode,
                    count_include_pad=cip, separable=True)
    check([A], out, topi.x86.schedule_pool,
          lambda a: testing.pool2d_python(a, k, stride, dil, pad, pool_type, ceil_mode, cip),
          seed=sum(shape))


def test_pool2d_separable_one_pixel_and_fused_epilogue():
    A = te.placeholder((1, 5, 1, 1), name="A")
    out = nn.pool2d(A, 3, 2, 1, 1, "max", separable=True)  # a window of padding and one pixel
    check([A], out, topi.x86.schedule_pool,
          lambda a: testing.pool2d_python(a, 3, 2, 1, 1, "max"))
    B = te.placeholder((1, 3, 9, 11), name="B")
    out = topi.relu(nn.pool2d(B, 3, 2, 1, 1, "avg", True, count_include_pad=False,
                              separable=True))
    check([B], out, topi.x86.schedule_pool,
          lambda b: np.maximum(testing.pool2d_python(b, 3, 2, 1, 1, "avg", True, False), 0))
    check([B], out, topi.x86.schedule_pool,
          lambda b: np.maximum(testing.pool2d_python(b, 3, 2, 1, 1, "avg", True, False), 0),
          target="c")


@pytest.mark.parametrize("pool_type,ceil_mode,cip", [("max", True, True), ("avg", False, False),
                                                     ("avg", True, True)])
def test_pool3d_separable(pool_type, ceil_mode, cip):
    A = te.placeholder((1, 3, 5, 7, 13), name="A")
    out = nn.pool3d(A, (2, 3, 3), (1, 2, 2), (1, 1, 2), (0, 1, 1, 1, 0, 1), pool_type,
                    ceil_mode, count_include_pad=cip, separable=True)
    check([A], out, topi.x86.schedule_pool,
          lambda a: testing.pool_nd_python(a, [2, 3, 3], [1, 2, 2], [1, 1, 2], [0, 1, 1],
                                           [1, 0, 1], pool_type, ceil_mode, cip))


def test_separable_builds_a_rows_stage():
    A = te.placeholder((1, 3, 9, 9), name="A")
    out = nn.pool2d(A, 3, 2, 1, 1, "max", separable=True)
    assert [t.op.tag for t in out.op.input_tensors] == ["pool_rows"]
    flat = nn.pool2d(A, (1, 3), 2, 1, 1, "max", separable=True)
    assert [t.op.tag for t in flat.op.input_tensors] != ["pool_rows"]


@pytest.mark.parametrize("op,kwargs,ref", [
    (relay.nn.max_pool2d, dict(pool_size=(3, 3), strides=(2, 2), padding=(1, 1)),
     lambda a: testing.pool2d_python(a, 3, 2, 1, 1, "max")),
    (relay.nn.avg_pool2d, dict(pool_size=(3, 2), strides=(2, 1), padding=(1, 0, 0, 1),
                               ceil_mode=True, count_include_pad=False),
     lambda a: testing.pool2d_python(a, (3, 2), (2, 1), 1, (1, 0, 0, 1), "avg", True, False)),
    (relay.nn.global_avg_pool2d, {}, lambda a: testing.global_pool_python(a, "avg")),
    (relay.nn.global_max_pool2d, {}, lambda a: testing.global_pool_python(a, "max")),
])
@pytest.mark.parametrize("opt_level", [2, 3])
def test_relay_pool_x86_strategy(op, kwargs, ref, opt_level):
    a = np.random.default_rng(3).uniform(-1, 1, (1, 57, 13, 17)).astype("float32")
    x = relay.var("x", shape=a.shape)
    mod = tvm.IRModule.from_expr(relay.Function([x], relay.nn.relu(op(x, **kwargs))))
    with tvm.transform.PassContext(opt_level=opt_level):
        lib = relay.build(mod, target="llvm")
    from tvmpy.contrib import graph_executor

    m = graph_executor.GraphModule(lib["default"](tvm.cpu()))
    m.set_input("x", a)
    m.run()
    np.testing.assert_allclose(m.get_output(0).numpy(), np.maximum(ref(a), 0), rtol=1e-5,
                               atol=1e-6)


@pytest.mark.parametrize("pool_type", ["max", "avg"])
@pytest.mark.parametrize("shape", [(1, 5, 16, 16), (2, 3, 17, 19), (1, 1, 1, 300), (1, 2, 7, 7)])
def test_global_pool_vector_plane(pool_type, shape):
    """Planes of >= 256 values are reduced 16 lanes at a time (rfactor; a masked tail when the
    plane is not a multiple of 16); smaller ones keep the scalar loop."""
    A = te.placeholder(shape, name="A")
    check([A], nn.global_pool(A, pool_type), topi.x86.schedule_global_pool,
          lambda a: testing.global_pool_python(a, pool_type), rtol=1e-5, atol=1e-6)
    out = topi.relu(nn.global_pool(A, pool_type))
    check([A], out, topi.x86.schedule_global_pool,
          lambda a: np.maximum(testing.global_pool_python(a, pool_type), 0), rtol=1e-5,
          atol=1e-6)


def test_global_pool_vector_plane_reshaping_epilogue():
    A = te.placeholder((1, 3, 20, 20), name="A")
    out = topi.reshape(nn.global_pool(A, "avg"), (1, 3))
    check([A], out, topi.x86.schedule_global_pool,
          lambda a: testing.global_pool_python(a, "avg").reshape(1, 3), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("pool_type", ["max", "avg"])
@pytest.mark.parametrize("shape", [(1, 57, 7, 7), (2, 3, 13, 4), (1, 5, 3, 16), (1, 4, 9, 3)])
def test_global_pool_small_planes(pool_type, shape):
    """Small planes: avg sums a vector of the W columns over H (W in 4..16), max stays scalar."""
    A = te.placeholder(shape, name="A")
    check([A], nn.global_pool(A, pool_type), topi.x86.schedule_global_pool,
          lambda a: testing.global_pool_python(a, pool_type), rtol=1e-5, atol=1e-6)
