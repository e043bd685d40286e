"""x86 direct NCHWc convolutions of an input that arrives in NCHW read it in place
(``data_layout="NCHW"`` on ``nn.contrib_conv2d_NCHWc``; config ``relay.x86.conv_nchw_input``):
no layout_transform before the convolution. Built with relay.build at opt_level 3 and run by
the graph executor, compared with numpy on random inputs at awkward shapes; the structure
(which transforms remain) checked on the rewritten graph."""

from __future__ import annotations

import numpy as np
import pytest
from _pass_util import count_ops

import tvmpy as tvm
from tvmpy import relay
from tvmpy.contrib import graph_executor
from tvmpy.relay import transform
from tvmpy.relay.op.strategy.x86_alter_op import NCHW_INPUT_MAX_CHANNEL_VECTORS, block_lanes
from tvmpy.topi.testing import conv2d_nchw_python

DIRECT = "nn.contrib_conv2d_NCHWc"


def _model(ic, oc, hw, k, stride, batch=1, seed=0, weight_param=False, dilation=1):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (batch, ic, hw, hw)).astype("float32")
    w = (rng.uniform(-1, 1, (oc, ic, k, k)) / np.sqrt(ic * k * k)).astype("float32")
    b = rng.uniform(-1, 1, oc).astype("float32")
    xv = relay.var("x", shape=x.shape, dtype="float32")
    wv = relay.var("w", shape=w.shape, dtype="float32") if weight_param else relay.const(w)
    pad = (k // 2) * dilation
    y = relay.nn.conv2d(xv, wv, strides=(stride, stride), padding=(pad,) * 4,
                        dilation=(dilation, dilation), channels=oc, kernel_size=(k, k))
    y = relay.nn.relu(relay.nn.bias_add(y, relay.const(b)))
    mod = tvm.IRModule.from_expr(relay.Function([xv, wv] if weight_param else [xv], y))
    ref = conv2d_nchw_python(x, w, stride, pad, dilation) + b[None, :, None, None]
    return mod, x, w, np.maximum(ref, 0)


def _config(flag):
    return {"relay.x86.winograd": False, "relay.x86.conv_nchw_input": flag}


def _alter(mod, flag=True):
    mod = transform.InferType()(mod)
    with tvm.transform.PassContext(opt_level=3, config=_config(flag)):
        with tvm.target.Target("llvm"):
            return transform.AlterOpLayout()(mod)


def _build_run(mod, inputs, params=None, flag=True):
    with tvm.transform.PassContext(opt_level=3, config=_config(flag)):
        lib = relay.build(mod, target="llvm", params=params)
    m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    m.set_input(**inputs)
    m.run()
    return m.get_output(0).numpy()


def _data_layouts(mod):
    out = []
    relay.post_order_visit(mod["main"], lambda e: out.append(e.attrs.data_layout)
                           if isinstance(e, relay.Call) and getattr(e.op, "name", "") == DIRECT
                           else None)
    return out


@pytest.mark.parametrize("ic,oc,hw,k,stride,batch", [
    (3, 24, 56, 3, 1, 1),
    (3, 24, 17, 3, 2, 1),
    (1, 16, 13, 3, 1, 1),      # one input channel
    (24, 57, 13, 3, 2, 1),     # 57 out: padded to 64, cropped
    (57, 24, 17, 3, 1, 2),     # block 3 of 57 input channels, batch 2
    (3, 64, 17, 7, 2, 1),      # 7x7 stem (padding as a separate stage)
    (57, 57, 9, 1, 2, 1),      # 1x1 stride 2
    (24, 16, 8, 1, 1, 2),      # 1x1 stride 1, batch 2 (not the matmul form), 8 columns
])
def test_nchw_input_read_in_place(ic, oc, hw, k, stride, batch):
    mod, x, _, ref = _model(ic, oc, hw, k, stride, batch, seed=ic + oc + hw)
    new = _alter(mod)
    if ic > NCHW_INPUT_MAX_CHANNEL_VECTORS * block_lanes(tvm.target.Target("llvm")):  # AVX2: 57
        (layout,) = _data_layouts(new)
        assert layout.endswith("c"), layout
        np.testing.assert_allclose(_build_run(mod, {"x": x}), ref, rtol=1e-4, atol=1e-4)
        return
    assert _data_layouts(new) == ["NCHW"]
    # only the output side's transform (and the crop of padded channels) is left
    assert count_ops(new["main"], "layout_transform") == 1
    got = _build_run(mod, {"x": x})
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
    off = _build_run(mod, {"x": x}, flag=False)
    np.testing.assert_allclose(off, ref, rtol=1e-4, atol=1e-4)


def test_config_off_keeps_the_input_transform():
    mod, _, _, _ = _model(3, 24, 13, 3, 1)
    new = _alter(mod, flag=False)
    assert _data_layouts(new) == ["NCHW3c"]
    assert count_ops(new["main"], "layout_transform") == 2
    with pytest.raises(ValueError, match="conv_nchw_input must be True or False"):
        with tvm.transform.PassContext(opt_level=3,
                                       config={"relay.x86.conv_nchw_input": "yes"}):
            relay.build(mod, target="llvm")


def test_dilation_and_weight_parameter():
    mod, x, w, ref = _model(5, 17, 17, 3, 1, seed=4, weight_param=True, dilation=2)
    assert _data_layouts(_alter(mod)) == ["NCHW"]
    np.testing.assert_allclose(_build_run(mod, {"x": x, "w": w}), ref, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(_build_run(mod, {"x": x}, params={"w": w}), ref, rtol=1e-4,
                               atol=1e-4)


def test_second_conv_reads_blocked_and_shared_input():
    """The graph input feeds two convolutions (both read it in place); the convolution after
    the first reads its blocked output (no transform in between)."""
    rng = np.random.default_rng(9)
    x = rng.uniform(-1, 1, (1, 24, 13, 13)).astype("float32")
    w1 = (rng.uniform(-1, 1, (32, 24, 3, 3)) / 8).astype("float32")
    w2 = (rng.uniform(-1, 1, (57, 24, 3, 3)) / 8).astype("float32")
    w3 = (rng.uniform(-1, 1, (57, 32, 3, 3)) / 8).astype("float32")
    xv = relay.var("x", shape=x.shape, dtype="float32")
    a = relay.nn.relu(relay.nn.conv2d(xv, relay.const(w1), padding=(1, 1)))
    b = relay.nn.relu(relay.nn.conv2d(xv, relay.const(w2), strides=(2, 2), padding=(1, 1)))
    y = relay.nn.conv2d(a, relay.const(w3), strides=(2, 2), padding=(1, 1))
    mod = tvm.IRModule.from_expr(relay.Function([xv], relay.add(y, b)))
    new = _alter(mod)
    lanes = tvm.target.Target("llvm").vector_lanes("float32")  # 32 channels: 16 AVX-512, 8 AVX2
    assert sorted(_data_layouts(new)) == ["NCHW", "NCHW", f"NCHW{min(lanes, 16)}c"]
    ra = np.maximum(conv2d_nchw_python(x, w1, 1, 1), 0)
    rb = np.maximum(conv2d_nchw_python(x, w2, 2, 1), 0)
    ref = conv2d_nchw_python(ra, w3, 2, 1) + rb
    np.testing.assert_allclose(_build_run(mod, {"x": x}), ref, rtol=1e-4, atol=1e-4)


def test_type_relation_checks_plain_data():
    x = relay.var("x", shape=(1, 6, 9, 9), dtype="float32")
    w = relay.var("w", shape=(2, 2, 3, 3, 4, 8), dtype="float32")  # 2 x 4 = 8 input channels
    call = relay.op.registry.make_call(DIRECT, [x, w], {
        "strides": (1, 1), "padding": (1, 1, 1, 1), "dilation": (1, 1), "groups": 1,
        "channels": 16, "kernel_size": (3, 3), "data_layout": "NCHW",
        "kernel_layout": "OIHW4i8o", "out_layout": "NCHW8c", "out_dtype": ""})
    with pytest.raises(Exception, match="input channels"):
        transform.InferType()(tvm.IRModule.from_expr(relay.Function([x, w], call)))


@pytest.mark.parametrize("ic,oc,k", [(464, 64, 1), (24, 16, 3)])
def test_narrow_input_is_blocked_first(ic, oc, k):
    """An NCHW input narrower than NCHW_INPUT_MIN_WIDTH (7 columns: ShuffleNetV2's last
    convolution) goes through a layout_transform to the blocked layout instead."""
    mod, x, _, ref = _model(ic, oc, 7, k, 1, seed=ic)
    new = _alter(mod)
    (layout,) = _data_layouts(new)
    assert layout != "NCHW" and layout.endswith("c")
    assert count_ops(new["main"], "layout_transform") >= 2  # the input's and the output's
    np.testing.assert_allclose(_build_run(mod, {"x": x}), ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("vectors,extra,in_place", [(4, 0, True), (4, 1, False), (24, 0, False)])
def test_many_input_channels_are_blocked_first(vectors, extra, in_place):
    """More than NCHW_INPUT_MAX_CHANNEL_VECTORS vectors of the host's lanes of input channels:
    the input goes through a layout_transform (a 1-D convolution of 384 channels over 3000
    columns read in place: 3.6x slower on AVX2); at the limit it is read in place. Both against
    numpy."""
    lanes = block_lanes(tvm.target.Target("llvm"))
    assert NCHW_INPUT_MAX_CHANNEL_VECTORS == 4
    ic = vectors * lanes + extra
    rng = np.random.default_rng(ic)
    xv = rng.uniform(-1, 1, (1, ic, 1, 61)).astype("float32")
    wv = rng.uniform(-1, 1, (16, ic, 1, 3)).astype("float32")
    x = relay.var("x", shape=xv.shape)
    conv = relay.nn.conv2d(x, relay.const(wv), padding=(0, 1))
    mod = tvm.IRModule.from_expr(relay.Function([x], conv))
    (layout,) = _data_layouts(_alter(mod))
    assert (layout == "NCHW") == in_place, layout
    ref = conv2d_nchw_python(xv, wv, 1, (0, 1))
    np.testing.assert_allclose(_build_run(mod, {"x": xv}), ref, rtol=1e-4, atol=1e-4)
