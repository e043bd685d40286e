"""FakeQuantizationToInteger on hand-built relay graphs: what it rewrites, what it leaves, and
that the rewritten graph computes what the fake-quantized one does."""

import numpy as np
import pytest
from _qnn_util import build_run

import tvmpy as tvm
from tvmpy import relay
from tvmpy.relay import qnn
from tvmpy.relay.interpreter import evaluate
from tvmpy.relay.qnn.transform import FakeQuantizationToInteger

rng = np.random.default_rng(12)
c = relay.const


def _ops(mod):
    out = []
    relay.post_order_visit(mod["main"].body, lambda e: out.append(e.op.name)
                           if isinstance(e, relay.Call) and isinstance(e.op, relay.op.Op)
                           else None)
    return out


def _check(func, x, exact=True):
    mod = relay.transform.InferType()(tvm.IRModule.from_expr(func))
    expect = np.asarray(evaluate(mod["main"], x))  # the fake-quantized graph, as written
    rewritten = FakeQuantizationToInteger()(mod)
    got = np.asarray(evaluate(rewritten["main"], x))
    (compiled,) = build_run(mod, {"x": x})
    for g in (got, compiled):
        if exact:
            np.testing.assert_array_equal(g, expect)
        else:
            assert np.abs(g.astype(np.int64) - expect.astype(np.int64)).max() <= 1
    return _ops(rewritten)


def test_data_movement_and_clamps_run_on_the_integers():
    x = (rng.standard_normal((1, 4, 5, 6)) * 2).astype("float32")
    xv = relay.var("x", shape=x.shape)
    s, z = c(0.05), c(120, "int32")
    d = qnn.op.dequantize(qnn.op.quantize(xv, s, z, out_dtype="uint8"), s, z)
    y = relay.nn.pad(d, ((0, 0), (0, 0), (1, 1), (2, 0)), pad_value=0.5)
    y = relay.strided_slice(y, [0, 1, 0, 0], [1, 4, 6, 7])
    y = relay.nn.relu(y)
    y = relay.clip(y, -1.0, 3.0)
    y = relay.transpose(y, (0, 2, 3, 1))
    y = relay.reshape(y, (1, -1))
    y = relay.nn.max_pool2d(relay.reshape(y, (1, 1, 6, 21)), (2, 3), (2, 3))
    out = qnn.op.quantize(y, c(0.04), c(3, "int32"), out_dtype="uint8")
    ops = _check(relay.Function([xv], out), x)
    assert "qnn.dequantize" not in ops and "nn.relu" not in ops, ops
    assert ops.count("qnn.requantize") == 1 and "clip" in ops


def test_conv_bias_relu_becomes_qnn_conv2d_with_per_channel_weights():
    x = rng.standard_normal((1, 3, 7, 7)).astype("float32")
    xv = relay.var("x", shape=x.shape)
    w = rng.integers(-127, 128, (5, 3, 3, 3)).astype("int8")
    sw = rng.uniform(0.01, 0.03, 5).astype("float32")
    sx, zx = np.float32(0.03), np.int32(128)
    dx = qnn.op.dequantize(qnn.op.quantize(xv, c(sx), c(zx), out_dtype="uint8"), c(sx), c(zx))
    dw = qnn.op.dequantize(c(w), c(sw), c(np.zeros(5, "int32")), axis=0)
    bias_q = rng.integers(-300, 300, 5).astype("int32")
    db = qnn.op.dequantize(c(bias_q), c(sx * sw), c(np.zeros(5, "int32")), axis=0)
    y = relay.nn.relu(relay.nn.bias_add(relay.nn.conv2d(dx, dw, padding=1), db))
    out = qnn.op.quantize(y, c(0.02), c(0, "int32"), out_dtype="uint8")
    ops = _check(relay.Function([xv], out), x, exact=False)  # float conv sums vs int32: ties
    assert "qnn.conv2d" in ops and "nn.conv2d" not in ops and "nn.relu" not in ops, ops


@pytest.mark.parametrize("op", ["add", "multiply", "subtract"])
def test_binary_under_a_quantize(op):
    x = rng.standard_normal((2, 3)).astype("float32")
    xv = relay.var("x", shape=x.shape)
    a = qnn.op.dequantize(qnn.op.quantize(xv, c(0.02), c(5, "int32")), c(0.02), c(5, "int32"))
    b = qnn.op.dequantize(qnn.op.quantize(relay.sin(xv), c(0.01), c(-3, "int32")), c(0.01),
                          c(-3, "int32"))
    out = qnn.op.quantize(getattr(relay, op)(a, b), c(0.03), c(1, "int32"))
    ops = _check(relay.Function([xv], out), x, exact=False)
    assert {"add": "qnn.add", "multiply": "qnn.mul", "subtract": "qnn.subtract"}[op] in ops


def test_unsupported_region_is_left_alone():
    x = rng.standard_normal((2, 3)).astype("float32")
    xv = relay.var("x", shape=x.shape)
    d = qnn.op.dequantize(qnn.op.quantize(xv, c(0.02), c(5, "int32")), c(0.02), c(5, "int32"))
    out = qnn.op.quantize(relay.exp(d), c(0.05), c(0, "int32"))
    ops = _check(relay.Function([xv], out), x)
    assert "exp" in ops and ops.count("qnn.dequantize") == 1
