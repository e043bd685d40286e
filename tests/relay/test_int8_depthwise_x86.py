"""x86 int8 depthwise convolution in the channel-blocked layout
(``topi/x86/depthwise_int8.py``, ``nn.contrib_depthwise_conv2d_NCHWc_int8``) and the
zero-point ``nn.pad`` folded into the int8 convolutions (their ``pad_value``): exact integer
equality with numpy int64 references; a quantized MobileNet-like chain stays blocked. Kernels
run built for this machine (its best int8 instruction set); the VNNI path is also compiled for
a VNNI CPU and its IR checked, and run only where this CPU has VNNI."""

from __future__ import annotations

import numpy as np
import pytest

import tvmpy as tvm
from tests.topi.int8_util import (
    HOST,
    IR_TARGETS,
    isa_target,
)
from tests.topi.int8_util import build as _build
from tests.topi.int8_util import requant as _requant
from tests.topi.int8_util import requant_np as _requant_np
from tests.topi.int8_util import run as _run
from tests.topi.int8_util import s8 as _s8
from tests.topi.int8_util import u8 as _u8
from tvmpy import relay, te
from tvmpy.topi import testing
from tvmpy.topi.x86 import depthwise_int8 as dw

RNG = np.random.default_rng(23)


def _pad_np(x, pad, value):
    pt, pl, pb, pr = pad
    return np.pad(x.astype(np.int64), ((0, 0), (0, 0), (pt, pb), (pl, pr)),
                  constant_values=value)


def _conv_np(x, w, stride=1, pad=(0, 0, 0, 0), groups=1, zp=0):
    """Direct int64 convolution of NCHW ``x`` (padded with ``zp``) and OIHW ``w``."""
    # exact: the float64 sums of int8 products stay far below 2**53
    return testing.group_conv2d_nchw_python(_pad_np(x, pad, zp), w.astype(np.int64), stride, 0,
                                            1, groups)


def _altered(f):
    mod = tvm.IRModule.from_expr(f)
    with tvm.target.Target(HOST), tvm.transform.PassContext(opt_level=3):
        return str(relay.transform.AlterOpLayout()(relay.transform.InferType()(mod)))


def _kernels(lib):
    ll = lib.get_lib().get_source("ll")
    return [ln.split("@")[1].split("(")[0] for ln in ll.splitlines()
            if ln.startswith("define i32 @fused")]


# ---- topi ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("n,c,h,w,cb,stride,pad,k,zp", [
    (2, 32, 13, 11, 16, 1, (1, 1, 1, 1), 3, 77),
    (1, 16, 20, 17, 16, 2, (0, 0, 1, 1), 3, 0),
    (1, 24, 7, 7, 8, 1, (2, 1, 2, 3), 5, 255),
    (1, 3, 9, 5, 3, 2, (1, 1, 1, 1), 3, 5),
    (2, 16, 1, 1, 16, 1, (1, 1, 1, 1), 3, 9),
])  # fmt: skip
def test_topi_depthwise_int8_exact(n, c, h, w, cb, stride, pad, k, zp):
    x, wt = _u8(n, c, h, w), _s8(c, 1, k, k)
    xb = x.reshape(n, c // cb, cb, h, w).transpose(0, 1, 3, 4, 2).copy()
    kb = dw.pack_depthwise_kernel_int8_np(wt, cb)
    with tvm.target.Target(HOST):
        X, K = te.placeholder(xb.shape, "uint8"), te.placeholder(kb.shape, "int8")
        out = dw.depthwise_conv2d_NCHWc_int8(X, K, stride, pad, 1, zp)
        s = dw.schedule_depthwise_conv2d_NCHWc_int8([out])
        f = tvm.build(s, [X, K, out], HOST)
    o = tvm.nd.empty(tuple(int(d) for d in out.shape), "int32")
    f(tvm.nd.array(xb), tvm.nd.array(kb), o)
    ref = _conv_np(x, wt, stride, pad, groups=c, zp=zp)
    np.testing.assert_array_equal(o.numpy().transpose(0, 1, 4, 2, 3).reshape(ref.shape), ref)


@pytest.mark.parametrize("n,cc,h,w,stride,pad,kh,kw,zp", [
    (2, 2, 13, 11, 1, (1, 1, 1, 1), 3, 3, 77),
    (1, 1, 20, 17, 2, (0, 0, 1, 1), 3, 3, 0),
    (1, 3, 7, 9, 1, (2, 1, 2, 3), 5, 4, 255),
    (1, 1, 6, 5, 2, (0, 1, 0, 0), 2, 1, 5),
    (2, 1, 1, 1, 1, (1, 1, 1, 1), 3, 3, 9),
])  # fmt: skip
def test_topi_depthwise_int8_vnni_path_exact(n, cc, h, w, stride, pad, kh, kw, zp):
    """The VNNI path (4-D kernel: a window row's taps as one vpdpbusd)."""
    c = cc * 16
    x, wt = _u8(n, c, h, w), _s8(c, 1, kh, kw)
    xb = x.reshape(n, cc, 16, h, w).transpose(0, 1, 3, 4, 2).copy()
    kb = dw.pack_depthwise_kernel_dot_np(wt)
    target = isa_target("vnni")
    with tvm.target.Target(target):
        X, K = te.placeholder(xb.shape, "uint8"), te.placeholder(kb.shape, "int8")
        out = dw.depthwise_conv2d_NCHWc_int8(X, K, stride, pad, 1, zp, "int32", 8, (kh, kw))
        s = dw.schedule_depthwise_conv2d_NCHWc_int8([out])
        f = tvm.build(s, [X, K, out], target)
    assert "vpdpbusd" in f.get_source("ll")
    o = tvm.nd.empty(tuple(int(d) for d in out.shape), "int32")
    f(tvm.nd.array(xb), tvm.nd.array(kb), o)
    ref = _conv_np(x, wt, stride, pad, groups=c, zp=zp)
    np.testing.assert_array_equal(o.numpy().transpose(0, 1, 4, 2, 3).reshape(ref.shape), ref)


@pytest.mark.parametrize("isa", ["vnni", "avx512bw", "avx2"])
def test_depthwise_int8_path_by_target(isa):
    """VNNI targets take the vpdpbusd path, others the int16-product one (the IR of a CPU with
    that instruction set); both exact (run for this machine where its CPU has it)."""
    x, w = _u8(1, 32, 9, 8), _s8(32, 1, 3, 3)
    graph = _dw_graph(x.shape, w, 2, (1, 1, 1, 1), 12)
    dot = isa == "vnni"
    assert ("vpdpbusd" in _build(graph, IR_TARGETS[isa]).get_lib().get_source("ll")) == dot
    lib = _build(graph, isa_target(isa))
    assert ("vpdpbusd" in lib.get_lib().get_source("ll")) == dot
    ref = _requant_np(_conv_np(x, w, 2, (1, 1, 1, 1), groups=32, zp=12), 0.01, 7)
    np.testing.assert_array_equal(_run(lib, x=x), ref)


def test_topi_depthwise_int8_bad_input():
    X, K = te.placeholder((1, 2, 5, 5, 16), "uint8"), te.placeholder((2, 1, 3, 3, 1, 8), "int8")
    with pytest.raises(ValueError, match="do not match"):
        dw.depthwise_conv2d_NCHWc_int8(X, K, 1, 1, 1)
    K = te.placeholder((2, 1, 3, 3, 1, 16), "int8")
    with pytest.raises(ValueError, match="uint8"):
        dw.depthwise_conv2d_NCHWc_int8(X, K, 1, 1, 1, 300)
    with pytest.raises(ValueError, match="uint8 data"):
        dw.depthwise_conv2d_NCHWc_int8(te.placeholder((1, 2, 5, 5, 16), "int8"), K, 1, 1, 1)


# ---- relay: depthwise with the zero-point pad ---------------------------------------------------
def _dw_graph(shape, w, stride, pad, zp):
    X = relay.var("x", shape=shape, dtype="uint8")
    pt, pl, pb, pr = pad
    y = relay.nn.pad(X, ((0, 0), (0, 0), (pt, pb), (pl, pr)), pad_value=float(zp))
    y = relay.nn.conv2d(y, relay.const(w), strides=(stride, stride), groups=shape[1],
                        kernel_size=w.shape[2:], channels=shape[1], out_dtype="int32")
    return relay.Function([X], _requant(y, 0.01, 7))


@pytest.mark.parametrize("n,c,h,stride,pad,zp", [
    (2, 24, 10, 1, (1, 1, 1, 1), 128),
    (1, 57, 9, 2, (0, 0, 1, 1), 3),
    (1, 3, 8, 2, (1, 1, 1, 1), 255),
    (2, 32, 7, 1, (1, 2, 1, 0), 0),
])  # fmt: skip
def test_depthwise_int8_relay_exact(n, c, h, stride, pad, zp):
    x, w = _u8(n, c, h, h + 1), _s8(c, 1, 3, 3)
    lib = _build(_dw_graph(x.shape, w, stride, pad, zp))
    names = _kernels(lib)
    assert any("depthwise_conv2d_NCHWc_int8" in nm for nm in names), names
    # the zero-point pad is folded (channels padded to the block travel with the transform)
    pads = [nm for nm in names if "pad" in nm]
    assert pads == ([] if c % 16 == 0 else ["fused_nn_pad_layout_transform"]), names
    ref = _requant_np(_conv_np(x, w, stride, pad, groups=c, zp=zp), 0.01, 7)
    np.testing.assert_array_equal(_run(lib, x=x), ref)
    ref2 = _run(_build(_dw_graph(x.shape, w, stride, pad, zp), "llvm", 2), x=x)
    np.testing.assert_array_equal(ref2, ref)


def test_depthwise_int8_in_the_interpreter():
    """The altered graph (the blocked op, pad folded) evaluates in the reference interpreter."""
    x, w = _u8(2, 20, 6, 5), _s8(20, 1, 3, 3)
    mod = tvm.IRModule.from_expr(_dw_graph(x.shape, w, 2, (1, 1, 1, 1), 31))
    with tvm.target.Target(HOST), tvm.transform.PassContext(opt_level=3):
        mod = relay.transform.InferType()(mod)
        mod = relay.transform.AlterOpLayout()(mod)
    text = str(mod)
    assert "contrib_depthwise_conv2d_NCHWc_int8" in text and "pad_value=31" in text
    assert text.count("nn.pad(") == 1  # the channels 20 -> 32 only
    out = relay.create_executor("debug", mod=mod).evaluate()(x)
    ref = _requant_np(_conv_np(x, w, 2, (1, 1, 1, 1), groups=20, zp=31), 0.01, 7)
    np.testing.assert_array_equal(np.asarray(getattr(out, "numpy", lambda: out)()), ref)


def test_plain_int8_conv_folds_the_zero_point_pad():
    x, w = _u8(2, 3, 9, 9), _s8(24, 3, 3, 3)
    X = relay.var("x", shape=x.shape, dtype="uint8")
    y = relay.nn.pad(X, ((0, 0), (0, 0), (1, 1), (1, 1)), pad_value=100.0)
    y = relay.nn.conv2d(y, relay.const(w), strides=(2, 2), out_dtype="int32")
    f = relay.Function([X], _requant(y, 0.003, 5))
    text = _altered(f)
    assert "pad_value=100" in text and text.count("nn.pad(") == 1  # the channels 3 -> 4 only
    lib = _build(f)
    ref = _requant_np(_conv_np(x, w, 2, (1, 1, 1, 1), zp=100), 0.003, 5)
    np.testing.assert_array_equal(_run(lib, x=x), ref)


def test_inverted_residual_stays_blocked():
    """1x1 expand -> zero-point pad -> depthwise 3x3 stride 2 -> 1x1 project: one transform
    into the blocked layout and one out, no pad kernel, exact."""
    x = _u8(2, 16, 12, 12)
    w1, w2, w3 = _s8(64, 16, 1, 1), _s8(64, 1, 3, 3), _s8(32, 64, 1, 1)
    X = relay.var("x", shape=x.shape, dtype="uint8")
    y = _requant(relay.nn.conv2d(X, relay.const(w1), out_dtype="int32"), 0.004, 9)
    y = relay.nn.pad(y, ((0, 0), (0, 0), (1, 1), (1, 1)), pad_value=9.0)
    y = relay.nn.conv2d(y, relay.const(w2), strides=(2, 2), groups=64, out_dtype="int32")
    y = _requant(y, 0.01, 11)
    y = _requant(relay.nn.conv2d(y, relay.const(w3), out_dtype="int32"), 0.002, -3, "int8")
    lib = _build(relay.Function([X], y))
    names = _kernels(lib)
    assert len([nm for nm in names if "layout_transform" in nm]) == 2, names
    assert not any("pad" in nm for nm in names), names
    r = _requant_np(_conv_np(x, w1), 0.004, 9)
    r = _requant_np(_conv_np(r, w2, 2, (1, 1, 1, 1), groups=64, zp=9), 0.01, 11)
    ref = _requant_np(_conv_np(r, w3), 0.002, -3, "int8")
    np.testing.assert_array_equal(_run(lib, x=x), ref)


def test_qdq_mobilenet_v2_blocked_matches_generic_and_onnxruntime():
    """onnxruntime's quantize_static (QDQ, per-channel) MobileNetV2 at 64x64: at opt_level 3
    every convolution runs blocked (no NCHW depthwise, no pad kernel besides the input's), the
    output equals the opt_level 2 build's (generic integer kernels) exactly, and is within a few
    output quantization steps of onnxruntime's int8 run."""
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("onnxruntime.quantization")
    from tvmpy.relay.testing import compare, onnx_models
    from tvmpy.relay.testing import quantized_models as qm

    model = onnx_models.mobilenet_v2(batch=1, image=64)
    # 7-bit weights: onnxruntime's AVX2 u8s8 kernels saturate full-range ones (8 output steps
    # off on a Zen 3, while tvmpy's opt 2 and opt 3 builds agree exactly)
    q = qm.quantize_static(model, reduce_range=True)
    mod, params = compare.import_onnx(q)
    lib3, _ = compare.build(mod, params, opt_level=3)
    names = _kernels(lib3)
    assert sum("depthwise_conv2d_NCHWc_int8" in nm for nm in names) == 17, names
    assert not any(nm.startswith("fused_nn_conv2d") for nm in names), names
    assert sum("nn_pad" in nm for nm in names) == 1, names  # the image's channels 3 -> 4
    lib2, _ = compare.build(mod, params, opt_level=2)
    run3, run2 = compare.tvm_runner(lib3), compare.tvm_runner(lib2)
    sess = ort.InferenceSession(q.SerializeToString(), providers=["CPUExecutionProvider"])
    from onnx import numpy_helper

    # the output's step: the scale of the classifier's QuantizeLinear (then Identity)
    step = float(next(numpy_helper.to_array(i) for i in q.graph.initializer
                      if i.name == "fc_scale"))
    for seed in range(3):
        feeds = onnx_models.input_feeds(model, seed=1000 + seed)
        a, b, c = run3(feeds)[0], run2(feeds)[0], sess.run(None, feeds)[0]
        np.testing.assert_array_equal(a, b)
        assert float(np.abs(a - c).max()) / step <= 5
        assert a.argmax() == c.argmax()


@pytest.mark.parametrize("groups", [1, 16])
def test_pad_not_folded_when_the_conv_pads_too(groups):
    """A non-zero pad value before a convolution with its own (zero) padding cannot fold into
    one pad value: the pad stays a separate op, and the result is still exact."""
    x, w = _u8(1, 16, 7, 6), _s8(16, 16 // groups, 3, 3)
    X = relay.var("x", shape=x.shape, dtype="uint8")
    y = relay.nn.pad(X, ((0, 0), (0, 0), (1, 0), (0, 2)), pad_value=50.0)
    y = relay.nn.conv2d(y, relay.const(w), padding=(1, 1), groups=groups, out_dtype="int32")
    f = relay.Function([X], y)
    assert "nn.pad(" in _altered(f)
    xp = _pad_np(x, (1, 0, 0, 2), 50)
    ref = _conv_np(xp, w, 1, (1, 1, 1, 1), groups=groups)
    np.testing.assert_array_equal(_run(_build(f), x=x), ref)


def test_dilated_depthwise_int8():
    x, w = _u8(1, 16, 11, 9), _s8(16, 1, 3, 3)
    X = relay.var("x", shape=x.shape, dtype="uint8")
    y = relay.nn.pad(X, ((0, 0), (0, 0), (2, 2), (2, 2)), pad_value=4.0)
    y = relay.nn.conv2d(y, relay.const(w), dilation=(2, 2), groups=16, out_dtype="int32")
    lib = _build(relay.Function([X], y))
    assert any("depthwise_conv2d_NCHWc_int8" in nm for nm in _kernels(lib))
    w_dil = np.zeros((16, 1, 5, 5), np.int64)
    w_dil[:, :, ::2, ::2] = w
    np.testing.assert_array_equal(_run(lib, x=x), _conv_np(x, w_dil, 1, (2, 2, 2, 2), 16, 4))


def test_depthwise_int8_op_rejects_a_bad_pad_value():
    from tvmpy.relay.op.nn_int8 import contrib_depthwise_conv2d_nchwc_int8

    X = relay.var("x", shape=(1, 1, 5, 5, 16), dtype="uint8")
    K = relay.var("k", shape=(1, 1, 3, 3, 1, 16), dtype="int8")
    y = contrib_depthwise_conv2d_nchwc_int8(X, K, (1, 1), (1, 1, 1, 1), (1, 1), (3, 3),
                                            "NCHW16c", "OIHW1i16o", pad_value=256)
    with pytest.raises(Exception, match="pad_value"):
        relay.transform.InferType()(tvm.IRModule.from_expr(relay.Function([X, K], y)))


def test_24_channels_stay_blocked():
    """A 24-channel int8 conv (padded to 32 output lanes) is cropped by whole NCHW8c blocks; a
    residual add and the next int8 convs read NCHW8c: no transform between them."""
    x = _u8(2, 16, 9, 9)
    w1, w2, w3 = _s8(24, 16, 1, 1), _s8(24, 24, 3, 3), _s8(40, 24, 1, 1)
    X = relay.var("x", shape=x.shape, dtype="uint8")
    a = _requant(relay.nn.conv2d(X, relay.const(w1), out_dtype="int32"), 0.004, 9)
    b = relay.nn.pad(a, ((0, 0), (0, 0), (1, 1), (1, 1)), pad_value=9.0)
    b = _requant(relay.nn.conv2d(b, relay.const(w2), out_dtype="int32"), 0.001, 9)
    s = relay.cast(relay.clip(relay.cast(a, "int32") + relay.cast(b, "int32"), 0, 255), "uint8")
    y = _requant(relay.nn.conv2d(s, relay.const(w3), out_dtype="int32"), 0.002, -3, "int8")
    lib = _build(relay.Function([X], y))
    names = _kernels(lib)
    # the image in; the crops stay blocked (the last one's transform out fused into it)
    transforms = [nm for nm in names if "layout_transform" in nm and "strided_slice" not in nm]
    assert transforms == ["fused_layout_transform"], names
    ra = _requant_np(_conv_np(x, w1), 0.004, 9)
    rb = _requant_np(_conv_np(ra, w2, 1, (1, 1, 1, 1), zp=9), 0.001, 9)
    rs = np.clip(ra.astype(np.int32) + rb, 0, 255).astype("uint8")
    ref = _requant_np(_conv_np(rs, w3), 0.002, -3, "int8")
    np.testing.assert_array_equal(_run(lib, x=x), ref)
