"""relay.quantize: annotate / calibrate / realize on small CNNs and an MLP built in code.

Agreement bar (measured on these random-weight models, logits spread over several units): the
int8 module's top-1 agrees with fp32 on >= 90% of the calibration samples and of 40 held-out
random inputs (32 calibration samples), in every calibrate mode; the integer ops really are integer (int8 conv2d/dense
with int32 accumulation).
"""

from __future__ import annotations

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import relay
from tvmpy.relay.analysis import free_vars
from tvmpy.relay.quantize import QuantizeError, kl_divergence_threshold, requantize
from tvmpy.relay.visitor import dataflow_post_order


def _cnn(seed: int = 0, bn: bool = True):
    """conv-bn-relu x2, maxpool, a residual conv block, global pool, dense (10 classes)."""
    rng = np.random.default_rng(seed)
    params: dict[str, np.ndarray] = {}

    def p(name, arr):
        params[name] = arr.astype("float32")
        return relay.var(name, shape=arr.shape)

    def conv(y, cin, cout, name):
        w = p(name + "_w", rng.normal(0, np.sqrt(2 / (cin * 9)), (cout, cin, 3, 3)))
        y = relay.nn.bias_add(relay.nn.conv2d(y, w, padding=(1, 1)),
                              p(name + "_b", rng.normal(0, 0.1, cout)))
        if bn:
            y = relay.nn.batch_norm(y, p(name + "_g", rng.uniform(0.5, 1.5, cout)),
                                    p(name + "_be", rng.normal(0, 0.1, cout)),
                                    p(name + "_mu", rng.normal(0, 0.1, cout)),
                                    p(name + "_v", rng.uniform(0.5, 1.5, cout)))[0]
        return relay.nn.relu(y)

    x = relay.var("x", shape=(1, 3, 12, 12))
    y = conv(conv(x, 3, 8, "c0"), 8, 16, "c1")
    y = relay.nn.max_pool2d(y, pool_size=(2, 2), strides=(2, 2))
    y = relay.add(y, conv(conv(y, 16, 16, "c2"), 16, 16, "c3"))
    y = relay.nn.batch_flatten(relay.nn.global_avg_pool2d(y))
    y = relay.nn.dense(y, p("fc_w", rng.normal(0, 2.0, (10, 16))))
    return tvm.IRModule.from_expr(relay.Function(free_vars(y), y)), params


def _mlp(seed: int = 1):
    rng = np.random.default_rng(seed)
    x = relay.var("x", shape=(4, 20))
    w1 = relay.var("w1", shape=(32, 20))
    b1 = relay.var("b1", shape=(32,))
    w2 = relay.var("w2", shape=(7, 32))
    y = relay.nn.dense(relay.nn.relu(relay.nn.bias_add(relay.nn.dense(x, w1), b1)), w2)
    params = {"w1": rng.normal(0, 0.3, (32, 20)), "b1": rng.normal(0, 0.1, 32),
              "w2": rng.normal(0, 0.5, (7, 32))}
    return (tvm.IRModule.from_expr(relay.Function(free_vars(y), y)),
            {k: v.astype("float32") for k, v in params.items()})


def _data(shape, n, seed=5):
    rng = np.random.default_rng(seed)
    return [{"x": rng.normal(0, 1, shape).astype("float32")} for _ in range(n)]


def _int_anchors(qmod):
    out = []
    for e in dataflow_post_order(qmod["main"].body):
        if isinstance(e, relay.Call) and getattr(e.op, "name", "") in ("nn.conv2d", "nn.dense"):
            out.append((e.op.name, e.args[0].checked_type.dtype, e.checked_type.dtype))
    return out


def _quantize(mod, params, data, **cfg):
    with relay.quantize.qconfig(**cfg):
        qmod, info = relay.quantize.quantize(mod, params, dataset=data, return_info=True)
    rep = relay.quantize.accuracy_report(mod, qmod, params, data, heldout=40)
    return qmod, info, rep


@pytest.mark.parametrize("cfg", [
    dict(calibrate_mode="global_scale", global_scale=8.0),
    dict(calibrate_mode="kl_divergence", weight_scale="max"),
    dict(calibrate_mode="percentile", weight_scale="max"),
    dict(calibrate_mode="max", weight_scale="power2", per_channel=True),
    dict(calibrate_mode="kl_divergence", weight_scale="max", dtype_input="uint8"),
])
def test_cnn_each_calibrate_mode_agrees_with_fp32(cfg):
    mod, params = _cnn()
    data = _data((1, 3, 12, 12), 32)
    qmod, info, rep = _quantize(mod, params, data, **cfg)
    assert rep.top1_calibration >= 0.9 and rep.top1_heldout >= 0.9, str(rep)
    assert rep.logit_range > 3.0  # the logits are not degenerate
    assert rep.mean_abs_err < 0.05 * rep.logit_range, str(rep)
    anchors = _int_anchors(qmod)
    assert anchors[0] == ("nn.conv2d", "float32", "float32")  # skip_conv_layers=[0] by default
    assert anchors[1:4] == [("nn.conv2d", cfg.get("dtype_input", "int8"), "int32")] * 3
    assert anchors[4] == ("nn.dense", "float32", "float32")  # skip_dense_layer by default
    assert [n for n, _, _ in info.layers] == ["conv2d_1", "conv2d_2", "conv2d_3"]
    assert info.skipped == ["conv2d_0", "dense_0"]


def test_power2_global_scale_requantizes_with_shifts_only():
    mod, params = _cnn(bn=False)  # (a batch norm's scale is not a power of two)
    with relay.quantize.qconfig(calibrate_mode="global_scale", weight_scale="power2"):
        qmod = relay.quantize.quantize(mod, params)  # global_scale needs no data
    text = str(qmod)
    assert "right_shift" in text and "int64" not in text  # no fixed-point multiplies


def test_skip_nothing_quantizes_every_layer():
    mod, params = _cnn()
    data = _data((1, 3, 12, 12), 32)
    qmod, info, rep = _quantize(mod, params, data, calibrate_mode="kl_divergence",
                                weight_scale="max", skip_conv_layers=[], skip_dense_layer=False)
    assert all(a[1] == "int8" and a[2] == "int32" for a in _int_anchors(qmod))
    assert info.skipped == []
    assert rep.top1_calibration >= 0.9 and rep.top1_heldout >= 0.9, str(rep)


@pytest.mark.parametrize("dtype", ["int8", "uint8"])
def test_mlp_dense_layers(dtype):
    mod, params = _mlp()
    data = _data((4, 20), 12)
    qmod, info, rep = _quantize(mod, params, data, calibrate_mode="percentile",
                                weight_scale="max", per_channel=True, skip_dense_layer=False,
                                dtype_input=dtype)
    assert _int_anchors(qmod) == [("nn.dense", dtype, "int32")] * 2
    assert rep.top1_calibration >= 0.9 and rep.top1_heldout >= 0.9, str(rep)


def test_requantize_matches_numpy_rounding():
    rng = np.random.default_rng(0)
    acc = rng.integers(-(1 << 20), 1 << 20, (2, 3, 4, 5)).astype("int32")
    x = relay.var("x", shape=acc.shape, dtype="int32")
    for ratio, out in [(np.float64(2.0 ** -9), "int8"),
                       (np.array([2.0 ** -12, 2.0 ** -10, 2.0 ** -14]), "int8"),
                       (np.float64(0.000123456), "int8"), (np.array([0.37, 1.5, 0.0021]), "int32")]:
        y = requantize(x, ratio, 4, out)
        f = relay.create_executor("debug", tvm.IRModule.from_expr(relay.Function([x], y)))
        got = np.asarray(f.evaluate()(acc))
        r = ratio if np.ndim(ratio) == 0 else ratio.reshape(3, 1, 1)
        want = np.floor(acc.astype(np.float64) * r + 0.5)
        if out == "int8":
            want = np.clip(want, -127, 127)
        assert got.dtype == np.dtype(out)
        assert np.abs(got - want).max() <= (0 if np.all(np.log2(ratio) % 1 == 0) else 1)


@pytest.mark.parametrize("cfg", [dict(weight_scale="max", per_channel=True),
                                 dict(weight_scale="power2", dtype_input="uint8")])
def test_realized_integers_match_the_float_simulation(cfg):
    # an independent check of realize: the same quantization simulated in float
    mod, params = _cnn()
    data = _data((1, 3, 12, 12), 8)
    with relay.quantize.qconfig(calibrate_mode="max", skip_dense_layer=False, **cfg) as c:
        ann = relay.quantize.annotate(relay.quantize.prerequisite_optimize(mod, params), c)
        th = relay.quantize.calibrate(ann, data, c)
        qmod, _ = relay.quantize.realize(ann, th, c)
        sim = relay.quantize.simulate(ann, th, c)
    exact = 0
    for d in data[:4]:
        got = np.asarray(relay.create_executor("debug", qmod).evaluate()(d["x"]))
        want = np.asarray(relay.create_executor("debug", sim).evaluate()(d["x"]))
        err, scale = np.abs(got - want).max(), np.abs(want).max()
        # equal to float precision, but for a rare flip of a rounding tie (realize rounds half
        # up in integers, the simulation half away from zero in float), about one step
        exact += err < 1e-5 * scale
        assert err < 0.02 * scale
    assert exact >= 3


@pytest.mark.parametrize("dtype", ["int8", "uint8"])
def test_strided_grouped_and_depthwise_convs_match_the_simulation(dtype):
    # awkward shapes: 13x11 input, stride 2 with asymmetric padding, a grouped and a depthwise
    # conv (the uint8 form's padding and per-channel correction must follow the groups)
    rng = np.random.default_rng(4)
    x = relay.var("x", shape=(1, 3, 13, 11))
    ws = {"w0": rng.normal(0, 0.5, (6, 3, 3, 3)), "w1": rng.normal(0, 0.5, (6, 3, 3, 2)),
          "w2": rng.normal(0, 0.5, (6, 1, 3, 3)), "w3": rng.normal(0, 0.5, (5, 6, 1, 1))}
    v = {k: relay.var(k, shape=a.shape) for k, a in ws.items()}
    y = relay.nn.relu(relay.nn.conv2d(x, v["w0"], strides=(2, 2), padding=(1, 0, 0, 1)))
    y = relay.nn.relu(relay.nn.conv2d(y, v["w1"], groups=2, padding=(1, 1, 1, 0)))
    y = relay.nn.relu(relay.nn.conv2d(y, v["w2"], groups=6, padding=(1, 1), dilation=(1, 1)))
    y = relay.nn.conv2d(y, v["w3"])
    mod = tvm.IRModule.from_expr(relay.Function(free_vars(y), y))
    params = {k: a.astype("float32") for k, a in ws.items()}
    data = _data((1, 3, 13, 11), 4)
    with relay.quantize.qconfig(calibrate_mode="max", weight_scale="power2", per_channel=True,
                                skip_conv_layers=[], dtype_input=dtype) as c:
        ann = relay.quantize.annotate(relay.quantize.prerequisite_optimize(mod, params), c)
        th = relay.quantize.calibrate(ann, data, c)
        qmod, layers = relay.quantize.realize(ann, th, c)
        sim = relay.quantize.simulate(ann, th, c)
    assert len(layers) == 4
    from tvmpy.contrib import graph_executor

    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(qmod, target="llvm")
    m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    for d in data[:2]:
        m.set_input(x=d["x"])
        m.run()
        got = m.get_output(0).numpy()
        want = np.asarray(relay.create_executor("debug", sim).evaluate()(d["x"]))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


def test_kl_threshold_clips_outliers():
    rng = np.random.default_rng(0)
    v = np.concatenate([rng.normal(0, 1, 20000), [40.0, -35.0]])
    t = kl_divergence_threshold(v)
    assert 2.0 < t < 20.0


def test_uint8_data_is_the_int8_result_exactly():
    # the +128 shift (and the explicit 128 padding) is undone exactly: same integer results
    mod, params = _cnn()
    data = _data((1, 3, 12, 12), 8)
    outs = []
    for dtype in ("int8", "uint8"):
        with relay.quantize.qconfig(calibrate_mode="max", weight_scale="max", dtype_input=dtype):
            qmod = relay.quantize.quantize(mod, params, dataset=data)
        f = relay.create_executor("debug", qmod).evaluate()
        outs.append(np.asarray(f(data[0]["x"])))
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-6, atol=1e-6)


def test_bad_config_and_data_are_clear_errors():
    mod, params = _mlp()
    with pytest.raises(ValueError, match="unknown calibrate_mode"):
        relay.quantize.qconfig(calibrate_mode="entropy")
    with pytest.raises(ValueError, match="unknown options"):
        relay.quantize.qconfig(nbits=8)
    with relay.quantize.qconfig(calibrate_mode="kl_divergence", skip_dense_layer=False):
        with pytest.raises(QuantizeError, match="empty"):
            relay.quantize.quantize(mod, params, dataset=[])
        with pytest.raises(QuantizeError, match="needs a dataset"):
            relay.quantize.quantize(mod, params)
        with pytest.raises(QuantizeError, match="lacks inputs"):
            relay.quantize.quantize(mod, params, dataset=[{"y": np.zeros((4, 20), "float32")}])


def test_qconfig_is_a_scoped_context():
    assert relay.quantize.current_qconfig().calibrate_mode == "global_scale"
    with relay.quantize.qconfig(calibrate_mode="percentile", skip_conv_layers=[1, 2]) as c:
        assert relay.quantize.current_qconfig() is c and c.skip_conv_layers == (1, 2)
    assert relay.quantize.current_qconfig().calibrate_mode == "global_scale"


def _residual_operands(qmod):
    """For each residual add (two non-constant operands): the dtype each operand was before
    its widening casts (int8 when it crosses as int8)."""
    out = []
    for e in dataflow_post_order(qmod["main"].body):
        if isinstance(e, relay.Call) and getattr(e.op, "name", "") == "add" \
                and not any(isinstance(a, relay.Constant) for a in e.args):
            seen = []
            for a in e.args:  # stop_fusion(cast(stop_fusion(int8 tensor), "int32"))
                if isinstance(a, relay.Call) and a.op.name == "annotation.stop_fusion":
                    a = a.args[0].args[0].args[0]
                seen.append(str(a.checked_type.dtype))
            out.append(sorted(seen))
    return out


@pytest.mark.parametrize("calibrate_mode", ["global_scale", "kl_divergence"])
def test_residual_dtype_int8_for_vta(calibrate_mode):
    """qconfig(residual_dtype="int8"): one operand of each residual add crosses as int8 (the
    other conv's function can store int8, as VTA must), the integer region is left through
    int8 too; still agrees with fp32. The default keeps the int32 residual (no stop_fusion)."""
    mod, params = _cnn(3)
    data = _data((1, 3, 12, 12), 32)
    q8, _, rep = _quantize(mod, params, data, calibrate_mode=calibrate_mode,
                           weight_scale="max" if calibrate_mode != "global_scale" else "power2",
                           residual_dtype="int8")
    assert rep.top1_calibration >= 0.9 and rep.top1_heldout >= 0.9, str(rep)
    assert rep.mean_abs_err < 0.05 * rep.logit_range, str(rep)
    assert _residual_operands(q8) == [["int32", "int8"]]
    assert "annotation.stop_fusion" in str(q8)
    q32, _, _ = _quantize(mod, params, data, calibrate_mode=calibrate_mode,
                          weight_scale="max" if calibrate_mode != "global_scale" else "power2")
    assert _residual_operands(q32) == [["int32", "int32"]]
    assert "stop_fusion" not in str(q32)


def test_residual_dtype_bad_values():
    with pytest.raises(ValueError, match="residual_dtype must be"):
        relay.quantize.qconfig(residual_dtype="int16")
    with pytest.raises(ValueError, match="needs dtype_input='int8'"):
        relay.quantize.qconfig(residual_dtype="int8", dtype_input="uint8")


def test_stop_fusion_splits_fused_functions_and_is_dropped():
    """relay stop_fusion (TVM's annotation.stop_fusion): producer and consumer land in two
    fused functions, the call itself in neither; same values."""
    x = relay.var("x", shape=(2, 5), dtype="int32")
    y = relay.add(relay.op.tensor.stop_fusion(relay.multiply(x, relay.const(3, "int32"))),
                  relay.const(1, "int32"))
    mod = relay.transform.FuseOps(2)(relay.transform.InferType()(
        tvm.IRModule.from_expr(relay.Function([x], y))))
    fused = [e for e in dataflow_post_order(mod["main"].body)
             if isinstance(e, relay.Call) and isinstance(e.op, relay.Function)]
    assert len(fused) == 2 and "stop_fusion" not in str(mod)
    lib = relay.build(relay.Function([x], y), target="llvm")
    from tvmpy.contrib import graph_executor
    m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    xin = np.arange(10, dtype="int32").reshape(2, 5) - 4
    m.set_input("x", xin)
    m.run()
    np.testing.assert_array_equal(m.get_output(0).numpy(), xin * 3 + 1)
