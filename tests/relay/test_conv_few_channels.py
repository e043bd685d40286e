"""x86 convolutions with few output channels (a quarter vector at most: an image head, 128 -> 3)
stay in NCHW (``x86_alter_op.few_output_channels``), where ``schedule_conv_nchw_direct`` puts
the output columns along the vector lanes with several column vectors and stacked rows per
channel (``SMALL_OC_ACCUMULATORS``). Built with relay.build at opt_level 3 and run by the graph
executor; compared with numpy on random inputs (awkward sizes, asymmetric padding), and the
layout rule's boundaries checked."""

from __future__ import annotations

import numpy as np
import pytest
from _pass_util import count_ops

import tvmpy as tvm
from tvmpy import relay, te, topi
from tvmpy.contrib import graph_executor
from tvmpy.relay import transform
from tvmpy.relay.op.strategy import x86_alter_op
from tvmpy.relay.op.strategy.x86_alter_op import few_output_channels
from tvmpy.topi.testing import conv2d_nchw_python

DIRECT = "nn.contrib_conv2d_NCHWc"


def _model(ic, oc, h, w, k, pad, stride=1, seed=0, blocked_input=False):
    """conv (+bias, relu) in NCHW with an asymmetric padding (top, left, bottom, right); with
    ``blocked_input`` a 3x3 convolution to 16 channels first (its output arrives NCHW16c)."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (1, ic, h, w)).astype("float32")
    wt = (rng.uniform(-1, 1, (oc, ic, k[0], k[1])) / np.sqrt(ic * k[0] * k[1])).astype("float32")
    b = rng.uniform(-1, 1, oc).astype("float32")
    xv = relay.var("x", shape=x.shape, dtype="float32")
    y, xin = xv, x
    if blocked_input:
        w0 = (rng.uniform(-1, 1, (16, ic, 3, 3)) / np.sqrt(ic * 9)).astype("float32")
        y = relay.nn.relu(relay.nn.conv2d(xv, relay.const(w0), padding=(1, 1), channels=16,
                                          kernel_size=(3, 3)))
        xin = np.maximum(conv2d_nchw_python(x, w0, 1, 1), 0)
        wt = (rng.uniform(-1, 1, (oc, 16, k[0], k[1])) / np.sqrt(16 * k[0] * k[1])).astype(
            "float32")
    y = relay.nn.conv2d(y, relay.const(wt), strides=(stride, stride), padding=pad, channels=oc,
                        kernel_size=k)
    y = relay.nn.relu(relay.nn.bias_add(y, relay.const(b)))
    mod = tvm.IRModule.from_expr(relay.Function([xv], y))
    xp = np.pad(xin, ((0, 0), (0, 0), (pad[0], pad[2]), (pad[1], pad[3])))
    ref = np.maximum(conv2d_nchw_python(xp, wt, stride, 0) + b[None, :, None, None], 0)
    return mod, x, ref


def _alter(mod):
    """AlterOpLayout for 16 float lanes (the cases below count quarter vectors of 16; AVX2's
    8-lane rule is checked in test_few_output_channels_rule): a graph rewrite only, the
    runs (``_run``) build for the host."""
    mod = transform.InferType()(mod)
    with tvm.transform.PassContext(opt_level=3):
        with tvm.target.Target("llvm -mcpu=skylake-avx512"):
            return transform.AlterOpLayout()(mod)


def _run(mod, x):
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target="llvm")
    m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    m.set_input(x=x)
    m.run()
    return m.get_output(0).numpy()


def test_few_output_channels_rule():
    assert few_output_channels(3, 64, (1, 1), 16)
    assert few_output_channels(4, 16, (1, 1), 16)
    assert not few_output_channels(5, 64, (1, 1), 16)  # more than a quarter vector
    assert not few_output_channels(8, 40, (1, 1), 16)  # half a vector: SSDLite's box heads
    assert not few_output_channels(3, 15, (1, 1), 16)  # rows shorter than a vector
    assert not few_output_channels(3, 64, (1, 2), 16)  # strided columns
    assert few_output_channels(2, 8, (2, 1), 8)  # AVX2
    assert not few_output_channels(3, 64, (1, 1), 8)


@pytest.mark.parametrize("ic,oc,h,w,k,pad,blocked", [
    (128, 3, 32, 32, (2, 2), (1, 1, 0, 0), False),  # a transposed conv's RGB phase
    (128, 3, 32, 32, (2, 2), (0, 0, 1, 1), True),
    (17, 3, 19, 37, (3, 3), (1, 1, 1, 1), False),  # primes: no column-vector multiple
    (13, 3, 23, 48, (3, 2), (2, 0, 0, 1), True),  # 48 columns: three column vectors
    (7, 1, 11, 64, (5, 5), (2, 2, 2, 2), False),  # one channel: four column vectors
    (9, 4, 16, 16, (3, 3), (0, 1, 2, 0), False),  # a quarter vector of channels
    (6, 2, 1, 40, (1, 3), (0, 1, 0, 1), False),  # 1-D (height 1)
])
def test_few_channels_stay_nchw_and_match_numpy(ic, oc, h, w, k, pad, blocked):
    mod, x, ref = _model(ic, oc, h, w, k, pad, seed=ic + w, blocked_input=blocked)
    altered = _alter(mod)["main"]
    assert count_ops(altered, DIRECT) == (1 if blocked else 0)
    assert count_ops(altered, "nn.conv2d") == 1
    np.testing.assert_allclose(_run(mod, x), ref, rtol=1e-4, atol=1e-4)


def test_rule_boundaries_keep_nchwc():
    # strided columns, rows shorter than a vector, more than a quarter vector: blocked
    for ic, oc, h, w, k, pad, stride in ((16, 3, 32, 32, (3, 3), (1, 1, 1, 1), 2),
                                         (16, 3, 15, 15, (3, 3), (1, 1, 1, 1), 1),
                                         (16, 5, 32, 32, (3, 3), (1, 1, 1, 1), 1),
                                         (16, 8, 40, 40, (3, 3), (1, 1, 1, 1), 1)):
        mod, x, ref = _model(ic, oc, h, w, k, pad, stride=stride, seed=oc + w)
        assert count_ops(_alter(mod)["main"], "nn.conv2d") == 0
        np.testing.assert_allclose(_run(mod, x), ref, rtol=1e-4, atol=1e-4)
    old = x86_alter_op.NCHW_MAX_OC_FRACTION
    try:
        x86_alter_op.NCHW_MAX_OC_FRACTION = 0  # off: the blocked form
        mod, x, ref = _model(128, 3, 32, 32, (2, 2), (1, 1, 0, 0))
        assert count_ops(_alter(mod)["main"], DIRECT) == 1
        np.testing.assert_allclose(_run(mod, x), ref, rtol=1e-4, atol=1e-4)
    finally:
        x86_alter_op.NCHW_MAX_OC_FRACTION = old


@pytest.mark.parametrize("oc,oh,ow", [(3, 32, 32), (1, 7, 64), (5, 13, 48), (2, 9, 31),
                                      (4, 1, 16)])
def test_nchw_direct_small_channel_tile(oc, oh, ow):
    """topi level: the few-channel tile (column vectors x stacked rows) against numpy."""
    ic, k = 11, 3
    x = te.placeholder((1, ic, oh + k - 1, ow + k - 1), name="x")
    w = te.placeholder((oc, ic, k, k), name="w")
    y = topi.nn.relu(topi.nn.conv2d_nchw(x, w, 1, 0, 1))
    s = topi.x86.schedule_conv2d_nchw([y])
    f = tvm.build(s, [x, w, y], target="llvm")
    rng = np.random.default_rng(oc * 100 + ow)
    xa = rng.uniform(-1, 1, [int(d) for d in x.shape]).astype("float32")
    wa = rng.uniform(-1, 1, [int(d) for d in w.shape]).astype("float32")
    out = tvm.nd.array(np.zeros((1, oc, oh, ow), "float32"))
    f(tvm.nd.array(xa), tvm.nd.array(wa), out)
    np.testing.assert_allclose(out.numpy(), np.maximum(conv2d_nchw_python(xa, wa, 1, 0), 0),
                               rtol=1e-4, atol=1e-4)
