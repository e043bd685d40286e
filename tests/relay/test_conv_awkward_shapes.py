"""x86 convolutions at channel counts and map sizes that are not multiples of the vector width
or of the register tile (issue 12): output channels padded to whole vector blocks by
AlterOpLayout (zero filters, cropped on the way out), register tiles for any output width
(``default_ow_tile``), layout transforms of short rows. Built with relay.build at opt_level 3
and run by the graph executor; compared with numpy on random inputs, direct and Winograd."""

from __future__ import annotations

import numpy as np
import pytest
from _pass_util import count_ops

import tvmpy as tvm
from tvmpy import relay, te, topi
from tvmpy.contrib import graph_executor
from tvmpy.relay import transform
from tvmpy.relay.op.strategy.x86_alter_op import (
    POINTWISE_MIN_PIXELS,
    block_lanes,
    conv_padding,
    padded_block,
    vector_block,
)
from tvmpy.topi.nn.conv2d import conv2d_infer_layout
from tvmpy.topi.testing import conv2d_nchw_python
from tvmpy.topi.x86.conv2d_nchwc import MAX_OW_TILE, default_ow_tile, schedule_conv2d_NCHWc

WINO = "nn.contrib_conv2d_winograd_nchwc"
LANES = block_lanes(tvm.target.Target("llvm"))  # the host's block: 16 with AVX-512, 8 AVX2
DIRECT = "nn.contrib_conv2d_NCHWc"


def _conv_model(ic, oc, hw, k, stride, seed=0, weight_param=False):
    """conv (+bias, relu), NCHW; the weight a constant (or a parameter to bind)."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (1, ic, hw, hw)).astype("float32")
    w = (rng.uniform(-1, 1, (oc, ic, k, k)) / np.sqrt(ic * k * k)).astype("float32")
    b = rng.uniform(-1, 1, oc).astype("float32")
    xv = relay.var("x", shape=x.shape, dtype="float32")
    wv = relay.var("w", shape=w.shape, dtype="float32") if weight_param else relay.const(w)
    y = relay.nn.conv2d(xv, wv, strides=(stride, stride), padding=(k // 2,) * 4,
                        channels=oc, kernel_size=(k, k))
    y = relay.nn.relu(relay.nn.bias_add(y, relay.const(b)))
    params = [xv, wv] if weight_param else [xv]
    mod = tvm.IRModule.from_expr(relay.Function(params, y))
    ref = np.maximum(conv2d_nchw_python(x, w, stride, k // 2) + b[None, :, None, None], 0)
    return mod, x, w, ref


def _build_run(mod, inputs, params=None, winograd="auto"):
    with tvm.transform.PassContext(opt_level=3, config={"relay.x86.winograd": winograd}):
        lib = relay.build(mod, target="llvm", params=params)
    m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    m.set_input(**inputs)
    m.run()
    return m.get_output(0).numpy()


def _alter(mod, winograd="auto"):
    mod = transform.InferType()(mod)
    with tvm.transform.PassContext(opt_level=3, config={"relay.x86.winograd": winograd}):
        with tvm.target.Target("llvm"):
            return transform.AlterOpLayout()(mod)


def test_padded_block_rule():
    assert padded_block(57, 3, 16) == (16, 64)  # block 3 of 57: padded
    assert padded_block(19, 1, 16) == (16, 32)
    assert padded_block(24, 12, 16) == (12, 24)  # three quarters of a vector: kept
    assert padded_block(40, 8, 16) == (8, 40)  # half a vector: kept
    assert padded_block(3, 3, 16) == (3, 3)  # all the channels in one block: kept
    assert padded_block(7, 7, 8) == (7, 7)
    assert padded_block(57, 3, 8) == (8, 64)  # AVX2
    # half a vector: padded for a long reduction when it adds at most 1/16 of the channels
    assert padded_block(1000, 8, 16, reduction=512) == (16, 1008)
    assert padded_block(264, 8, 16, reduction=264 * 9) == (16, 272)
    assert padded_block(1000, 8, 16, reduction=120) == (8, 1000)  # short reduction: kept
    assert padded_block(232, 8, 16, reduction=232) == (16, 240)  # ShuffleNetV2's 7x7 1x1s
    assert padded_block(40, 8, 16, reduction=1024) == (8, 40)  # 8 more of 40: kept
    assert padded_block(120, 8, 16, reduction=1024) == (8, 120)  # 8 more of 120: kept
    assert padded_block(248, 8, 16, reduction=1024) == (16, 256)  # 8 more of 248: padded
    # a block of no register width (7, 14, 5, 15 lanes): whole vectors for a long reduction
    assert padded_block(182, 7, 8, reduction=576) == (8, 184)  # SSDLite's class head, AVX2
    assert padded_block(182, 14, 16, reduction=576) == (16, 192)
    assert padded_block(255, 15, 16, reduction=256) == (16, 256)  # YOLO's head
    assert padded_block(255, 5, 8, reduction=256) == (8, 256)
    assert padded_block(182, 7, 8, reduction=32) == (7, 182)  # short reduction: kept
    assert padded_block(182, 14, 16, reduction=64) == (14, 182)
    # the reduction that pays for the crop grows with the lanes (pad_min_reduction)
    assert padded_block(116, 4, 8, reduction=116) == (8, 120)  # ShuffleNetV2, AVX2
    assert padded_block(116, 4, 8, reduction=56) == (4, 116)
    assert padded_block(232, 8, 16, reduction=116) == (8, 232)
    assert padded_block(24, 12, 16, reduction=1024) == (16, 32)


@pytest.mark.parametrize("ic,oc,hw,k,stride,wino", [
    (24, 57, 7, 3, 1, False),
    (57, 57, 13, 1, 1, False),    # 1x1 of an NCHW input: a matmul
    (57, 57, 13, 1, 2, False),    # 1x1 stride 2: NCHWc, 57 out padded to 64
    (64, 24, 7, 1, 1, False),     # 1x1 on a 7x7 map: too few columns for the matmul
    (64, 24, 9, 1, 1, False),
    (64, 57, 17, 3, 2, False),
    (3, 57, 17, 7, 2, False),
    (57, 19, 13, 3, 1, True),     # Winograd, 57 input channels (block 3), 19 out padded to 32
    (24, 57, 17, 3, 1, True),
    (57, 24, 13, 3, 1, True),     # nothing padded (24: block 12), Winograd over a 13x13 map
    (3, 24, 13, 3, 2, False),
    (5, 17, 9, 3, 1, False),
    (17, 5, 1, 3, 1, False),      # a 1x1 map
    (300, 1000, 13, 1, 2, False),  # 1000 out (block 8) padded to 1008: 63 blocks, 3 a tile
    (264, 264, 9, 3, 2, False),   # 264 out padded to 272: 17 blocks, one a tile
    (40, 120, 25, 1, 2, False),   # 1x1, 15 blocks of 8 (not padded): 3 a tile, 7 + 6 columns
    (24, 40, 21, 1, 2, False),    # 1x1, 5 blocks of 8: 5 a tile, 4 + 4 + 3 columns
    (17, 80, 13, 1, 2, False),    # 1x1, 5 blocks of 16: 4 + 3 columns
    (24, 48, 9, 1, 2, False),     # 1x1, 3 blocks of 16, 5 columns
    (40, 120, 13, 3, 1, False),   # 3x3, 15 blocks of 8: one a tile
    (232, 232, 7, 1, 1, False),   # 232 out (29 blocks of 8) padded to 240: 15 of 16
    (136, 152, 5, 3, 2, False),   # 3x3 stride 2, 152 out padded to 160
    (64, 182, 10, 3, 1, True),    # Winograd, 182 out (block 7 / 14: no register width) padded
    (128, 182, 5, 3, 2, False),   # the same head direct, stride 2
])
def test_conv_matches_numpy(ic, oc, hw, k, stride, wino):
    mod, x, _, ref = _conv_model(ic, oc, hw, k, stride, seed=ic + oc + hw)
    new = _alter(mod, winograd=4 if wino else False)
    assert count_ops(new["main"], WINO) == (1 if wino else 0)
    pointwise = k == 1 and stride == 1 and hw * hw >= POINTWISE_MIN_PIXELS
    assert count_ops(new["main"], "nn.matmul") == (1 if pointwise else 0)
    # the padded output channels are cropped in NCHW
    bn = vector_block(oc, conv2d_infer_layout(ic, oc, LANES)[1], LANES)
    padded = padded_block(oc, bn, LANES, ic * k * k)[1] != oc and not pointwise
    assert count_ops(new["main"], "strided_slice") == (1 if padded else 0)
    got = _build_run(mod, {"x": x}, winograd=4 if wino else False)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


def test_padded_conv_output_channels_and_crop():
    mod, _, _, _ = _conv_model(24, 57, 13, 3, 1)
    call = transform.InferType()(mod)["main"].body.args[0].args[0]
    assert conv_padding(call, tvm.target.Target("llvm")) == (8, LANES, 64)  # 24: block 8
    new = _alter(mod, winograd=False)
    convs = []
    relay.post_order_visit(new["main"], lambda e: convs.append(e) if isinstance(e, relay.Call)
                           and getattr(e.op, "name", "") == DIRECT else None)
    (conv,) = convs
    assert tuple(conv.checked_type.shape) == (1, 64 // LANES, 13, 13, LANES)
    assert tuple(new["main"].checked_type.ret_type.shape) == (1, 57, 13, 13)


@pytest.mark.parametrize("wino", [False, True])
def test_weight_parameter_bound_or_fed(wino):
    """A weight that is a parameter: padded in the graph (folded once bound)."""
    mod, x, w, ref = _conv_model(24, 57, 13, 3, 1, seed=5, weight_param=True)
    cfg = 4 if wino else False
    got = _build_run(mod, {"x": x}, params={"w": w}, winograd=cfg)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
    got = _build_run(mod, {"x": x, "w": w}, winograd=cfg)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


def test_chain_of_padded_convolutions():
    """57 -> 57 -> 19 channels: each crop feeds the next convolution's input block."""
    rng = np.random.default_rng(7)
    x = rng.uniform(-1, 1, (1, 57, 17, 17)).astype("float32")
    w1 = (rng.uniform(-1, 1, (57, 57, 3, 3)) / 20).astype("float32")
    w2 = (rng.uniform(-1, 1, (19, 57, 1, 1)) / 8).astype("float32")
    xv = relay.var("x", shape=x.shape, dtype="float32")
    y = relay.nn.relu(relay.nn.conv2d(xv, relay.const(w1), padding=(1, 1)))
    y = relay.nn.conv2d(y, relay.const(w2), strides=(2, 2))
    mod = tvm.IRModule.from_expr(relay.Function([xv], y))
    ref = np.maximum(conv2d_nchw_python(x, w1, 1, 1), 0)
    ref = conv2d_nchw_python(ref, w2, 2, 0)
    got = _build_run(mod, {"x": x})
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("flag", [True, False])
def test_pointwise_matmul_only_for_nchw_inputs(flag):
    """A 1x1 convolution of the graph input becomes a matmul; one after an NCHWc convolution
    reads its blocked output (no transform back); the config turns the matmul form off."""
    rng = np.random.default_rng(11)
    x = rng.uniform(-1, 1, (1, 19, 13, 13)).astype("float32")
    w1 = (rng.uniform(-1, 1, (40, 19, 1, 1)) / 4).astype("float32")
    w2 = (rng.uniform(-1, 1, (32, 40, 3, 3)) / 10).astype("float32")
    w3 = (rng.uniform(-1, 1, (57, 32, 1, 1)) / 6).astype("float32")
    xv = relay.var("x", shape=x.shape, dtype="float32")
    y = relay.nn.relu(relay.nn.conv2d(xv, relay.const(w1)))
    y = relay.nn.relu(relay.nn.conv2d(y, relay.const(w2), padding=(1, 1)))
    y = relay.nn.conv2d(y, relay.const(w3))
    mod = tvm.IRModule.from_expr(relay.Function([xv], y))
    mod = transform.InferType()(mod)
    with tvm.transform.PassContext(opt_level=3, config={"relay.x86.winograd": False,
                                                        "relay.x86.pointwise_matmul": flag}):
        with tvm.target.Target("llvm"):
            new = transform.AlterOpLayout()(mod)
        lib = relay.build(mod, target="llvm")
    assert count_ops(new["main"], "nn.matmul") == (1 if flag else 0)
    assert count_ops(new["main"], DIRECT) == (2 if flag else 3)
    m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    m.set_input(x=x)
    m.run()
    ref = np.maximum(conv2d_nchw_python(x, w1, 1, 0), 0)
    ref = np.maximum(conv2d_nchw_python(ref, w2, 1, 1), 0)
    ref = conv2d_nchw_python(ref, w3, 1, 0)
    np.testing.assert_allclose(m.get_output(0).numpy(), ref, rtol=1e-4, atol=1e-4)


def test_pointwise_matmul_map_limits(monkeypatch):
    """Too few pixels (columns of the product): NCHWc; any larger map: the matmul, unless
    POINTWISE_MAX_PIXELS is set."""
    from tvmpy.relay.op.strategy import x86_alter_op

    low = int((POINTWISE_MIN_PIXELS - 1) ** 0.5)
    for hw, want in ((low, 0), (low + 1, 1), (56, 1), (57, 1)):
        mod, _, _, _ = _conv_model(8, 24, hw, 1, 1)
        assert count_ops(_alter(mod)["main"], "nn.matmul") == want
    monkeypatch.setattr(x86_alter_op, "POINTWISE_MAX_PIXELS", 1024)
    for hw, want in ((32, 1), (33, 0)):
        mod, _, _, _ = _conv_model(8, 24, hw, 1, 1)
        assert count_ops(_alter(mod)["main"], "nn.matmul") == want


def test_pointwise_wide_convs_stay_nchwc(monkeypatch):
    """From POINTWISE_NCHWC_MIN_CHANNELS input and output channels a 1x1 convolution stays an
    NCHWc convolution (both counts at the limit; one below keeps the matmul); the result is
    numpy's on prime channel counts either way."""
    from tvmpy.relay.op.strategy import x86_alter_op

    assert x86_alter_op.POINTWISE_NCHWC_MIN_CHANNELS == 1024
    mod, _, _, _ = _conv_model(1024, 1024, 8, 1, 1)
    assert count_ops(_alter(mod)["main"], "nn.matmul") == 0
    mod, _, _, _ = _conv_model(1024, 1023, 8, 1, 1)
    assert count_ops(_alter(mod)["main"], "nn.matmul") == 1
    monkeypatch.setattr(x86_alter_op, "POINTWISE_NCHWC_MIN_CHANNELS", 37)
    for ic, oc, want in ((37, 41, 0), (41, 37, 0), (31, 41, 1)):
        mod, x, _, ref = _conv_model(ic, oc, 9, 1, 1, seed=ic + oc)
        assert count_ops(_alter(mod)["main"], "nn.matmul") == want
        np.testing.assert_allclose(_build_run(mod, {"x": x}), ref, rtol=1e-4, atol=1e-4)


def test_pointwise_matmul_large_awkward_maps():
    """The matmul form on maps above the old 1024-pixel limit, awkward channels, vs numpy."""
    for ic, oc, hw in ((57, 24, 56), (3, 57, 33), (24, 1, 41)):
        mod, x, _, ref = _conv_model(ic, oc, hw, 1, 1, seed=ic + hw)
        assert count_ops(_alter(mod)["main"], "nn.matmul") == 1
        got = _build_run(mod, {"x": x})
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


def test_pointwise_weight_parameter_and_bad_config():
    mod, x, w, ref = _conv_model(57, 24, 9, 1, 1, seed=2, weight_param=True)
    np.testing.assert_allclose(_build_run(mod, {"x": x, "w": w}), ref, rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="pointwise_matmul must be True or False"):
        with tvm.transform.PassContext(opt_level=3,
                                       config={"relay.x86.pointwise_matmul": "yes"}):
            relay.build(mod, target="llvm")


def test_default_ow_tile():
    assert default_ow_tile(7) == 7 and default_ow_tile(9) == 9 and default_ow_tile(1) == 1
    assert default_ow_tile(56) == 8 and default_ow_tile(28) == 7 and default_ow_tile(12) == 6
    assert default_ow_tile(13) == 7  # two tiles, 7 + 6
    assert default_ow_tile(17) == 9  # 9 + 8
    assert default_ow_tile(23) == 8  # 8 + 8 + 7
    for ow in range(1, 120):
        r = default_ow_tile(ow)
        assert 1 <= r <= MAX_OW_TILE
        tiles = -(-ow // r)
        assert tiles == -(-ow // MAX_OW_TILE) or ow % r == 0


@pytest.mark.parametrize("hw,stride", [(13, 1), (17, 1), (11, 2), (19, 1)])
def test_nchwc_tail_tiles_match_numpy(hw, stride):
    """The NCHWc schedule with the default tile widths, including a tail tile."""
    rng = np.random.default_rng(hw)
    ic, oc, bn = 16, 32, 16
    x = rng.uniform(-1, 1, (1, ic, hw, hw)).astype("float32")
    w = rng.uniform(-1, 1, (oc, ic, 3, 3)).astype("float32")
    A = te.placeholder((1, ic // bn, hw, hw, bn), name="A")
    K = te.placeholder((oc // bn, ic // bn, 3, 3, bn, bn), name="K")
    out = topi.nn.conv2d_NCHWc(A, K, stride, 1, 1)
    f = tvm.build(schedule_conv2d_NCHWc([out]), [A, K, out], "llvm")
    xa = x.reshape(1, ic // bn, bn, hw, hw).transpose(0, 1, 3, 4, 2)
    wk = w.reshape(oc // bn, bn, ic // bn, bn, 3, 3).transpose(0, 2, 4, 5, 3, 1)
    o = tvm.nd.empty([int(d) for d in out.shape])
    f(tvm.nd.array(np.ascontiguousarray(xa)), tvm.nd.array(np.ascontiguousarray(wk)), o)
    got = o.numpy().transpose(0, 1, 4, 2, 3).reshape(1, oc, *o.shape[2:4])
    np.testing.assert_allclose(got, conv2d_nchw_python(x, w, stride, 1), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape,src,dst", [
    ((1, 57, 13, 13), "NCHW", "NCHW3c"),
    ((1, 19, 7, 7), "NCHW", "NCHW1c"),
    ((1, 4, 13, 13, 16), "NCHW16c", "NCHW"),
    ((1, 2, 7, 5, 16), "NCHW16c", "NCHW"),
    ((1, 3, 4, 6), "NCHW", "NCHW3c"),
])
def test_layout_transform_short_rows(shape, src, dst):
    from tvmpy.relay.op.numpy_impl import layout_transform_np

    x = np.random.default_rng(1).uniform(-1, 1, shape).astype("float32")
    xv = relay.var("x", shape=shape, dtype="float32")
    mod = tvm.IRModule.from_expr(relay.Function(
        [xv], relay.nn.relu(relay.layout_transform(xv, src, dst))))
    got = _build_run(mod, {"x": x})
    np.testing.assert_array_equal(got, np.maximum(layout_transform_np(x, src, dst), 0))


def test_vector_block_rule():
    """Blocks that are no register width (10, 12, 15 lanes) give way to the largest
    power-of-two divisor when it fills at least half a vector."""
    from tvmpy.relay.op.strategy.x86_alter_op import vector_block

    for c, bn, lanes, want in [(40, 10, 16, 8), (72, 12, 16, 8), (120, 15, 16, 8),
                               (1000, 10, 16, 8), (24, 12, 16, 8), (96, 16, 16, 16),
                               (12, 12, 16, 12),  # no power of two of half a vector: kept
                               (20, 10, 16, 10), (57, 3, 16, 3), (6, 6, 16, 6),
                               (12, 6, 8, 4), (40, 8, 8, 8), (1, 1, 16, 1), (48, 16, 16, 16),
                               (80, 16, 32, 16), (160, 32, 32, 32), (224, 16, 16, 16)]:
        assert vector_block(c, bn, lanes) == want, (c, bn, lanes)


def _blocked_chain(c_mid, c_out, hw, k, stride, seed):
    """conv 3x3 (NCHWc producer) -> depthwise kxk (stride) -> conv 1x1 -> relu: the
    MobileNet/EfficientNet inverted residual pattern at a channel count ``c_mid``."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (1, 5, hw, hw)).astype("float32")
    w1 = (rng.uniform(-1, 1, (c_mid, 5, 3, 3)) / 6).astype("float32")
    wd = (rng.uniform(-1, 1, (c_mid, 1, k, k)) / k).astype("float32")
    w2 = (rng.uniform(-1, 1, (c_out, c_mid, 1, 1)) / np.sqrt(c_mid)).astype("float32")
    xv = relay.var("x", shape=x.shape, dtype="float32")
    y = relay.nn.relu(relay.nn.conv2d(xv, relay.const(w1), padding=(1, 1)))
    y = relay.nn.relu(relay.nn.conv2d(y, relay.const(wd), strides=(stride, stride),
                                      padding=(k // 2,) * 4, groups=c_mid))
    y = relay.nn.relu(relay.nn.conv2d(y, relay.const(w2)))
    mod = tvm.IRModule.from_expr(relay.Function([xv], y))
    ref = np.maximum(conv2d_nchw_python(x, w1, 1, 1), 0)
    dw = np.concatenate([conv2d_nchw_python(ref[:, i:i + 1], wd[i:i + 1], stride, k // 2)
                         for i in range(c_mid)], axis=1)
    ref = np.maximum(conv2d_nchw_python(np.maximum(dw, 0), w2, 1, 0), 0)
    return mod, x, ref


@pytest.mark.parametrize("c_mid,c_out,hw,k,stride", [
    (40, 120, 13, 5, 2),   # blocks 8 (not 10 / 15), odd map, stride 2
    (72, 24, 11, 3, 1),    # 72: block 8 (not 12)
    (120, 1000 // 5, 7, 5, 1),  # 200 out: block 8, 25 chunks (odd)
    (24, 40, 1, 3, 1),     # a 1x1 map
])
def test_power_of_two_blocks_match_numpy(c_mid, c_out, hw, k, stride):
    mod, x, ref = _blocked_chain(c_mid, c_out, hw, k, stride, seed=c_mid + hw)
    lanes = tvm.target.Target("llvm").vector_lanes("float32")
    layouts = [c.attrs.out_layout for c in _calls_of(_alter(mod, winograd=False), DIRECT)]
    if lanes == 16:
        assert layouts == ["NCHW8c", "NCHW8c", "NCHW8c"]
    got = _build_run(mod, {"x": x}, winograd=False)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


def _calls_of(mod, name):
    out = []
    relay.post_order_visit(mod["main"], lambda e: out.append(e) if isinstance(e, relay.Call)
                           and getattr(e.op, "name", "") == name else None)
    return out
