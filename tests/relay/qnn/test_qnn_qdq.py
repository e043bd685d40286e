"""ONNX QDQ models (onnxruntime's quantize_static, per-channel) through relay.build: the
FakeQuantizationToInteger pass turns every DequantizeLinear -> Conv/Gemm/... -> QuantizeLinear
region into QNN ops, so the graph runs integer conv2d/dense, and the result agrees with
onnxruntime's int8 run."""

import numpy as np
import pytest
from _qnn_util import build_run
from qdq_models import float_attention, quantized_cnn

pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
pytest.importorskip("onnxruntime.quantization")

import tvmpy as tvm  # noqa: E402
from tvmpy import relay  # noqa: E402
from tvmpy.relay.qnn import transform as qnn_transform  # noqa: E402


def _calls(expr):
    out = []
    relay.post_order_visit(expr, lambda e: out.append(e) if isinstance(e, relay.Call)
                           and isinstance(e.op, relay.op.Op) else None)
    return out


def _output_step(model) -> float:
    """The scale of the DequantizeLinear producing the graph's output (one step of it)."""
    from onnx import numpy_helper

    out = model.graph.output[0].name
    node = next(n for n in model.graph.node if out in n.output)
    init = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    return float(init[node.input[1]])


@pytest.fixture(scope="module")
def qdq():
    return quantized_cnn("QDQ", channels=(8, 16, 16), size=16)[1]


def test_fq2i_makes_the_convs_integer(qdq):
    mod, params = relay.frontend.from_onnx(qdq, {"x": (1, 3, 16, 16)})
    mod = relay.transform.BindParams(params)(mod) if params else mod
    mod = qnn_transform.FakeQuantizationToInteger()(mod)
    names = [c.op.name for c in _calls(mod["main"].body)]
    assert names.count("qnn.conv2d") == 3 and names.count("qnn.dense") == 1, names
    assert "nn.conv2d" not in names and "nn.dense" not in names
    assert names.count("qnn.dequantize") == 1  # the model's float output
    lowered = qnn_transform.CanonicalizeOps()(mod)
    convs = [c for c in _calls(lowered["main"].body) if c.op.name == "nn.conv2d"
             and c.args[1].checked_type.dtype == "int8"]
    assert len(convs) == 3
    for c in convs:
        assert c.args[0].checked_type.dtype == "uint8" and c.attrs.out_dtype == "int32"


@pytest.mark.parametrize("fmt", ["QDQ", "QOperator"])
def test_quantized_cnn_matches_onnxruntime(fmt, qdq):
    model = qdq if fmt == "QDQ" else quantized_cnn(fmt, channels=(8, 16, 16), size=16)[1]
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    mod, params = relay.frontend.from_onnx(model, {"x": (1, 3, 16, 16)})
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target="llvm", params=params)
    from tvmpy.contrib import graph_executor

    m = graph_executor.GraphModule(lib["default"](tvm.cpu()))
    step = _output_step(model)
    rng = np.random.default_rng(5)
    worst = 0.0
    for _ in range(4):
        x = rng.standard_normal((1, 3, 16, 16)).astype("float32")
        expect = sess.run(None, {"x": x})[0]
        m.set_input("x", x)
        m.run()
        got = m.get_output(0).numpy()
        worst = max(worst, float(np.abs(got - expect).max()) / step)
    assert worst == 0.0, f"{worst} quantization steps"  # bit-exact: same integer arithmetic


def test_full_range_weights_match_onnxruntime_unfused():
    """8-bit weights (no reduce_range): pair sums beyond int16, which onnxruntime's u8s8
    kernels (QLinearConv too) saturate on x86 without VNNI. tvmpy's integer kernels never
    saturate, so they equal the QDQ model run by onnxruntime without graph optimizations
    (DequantizeLinear -> float Conv -> QuantizeLinear, no integer kernel) on every host."""
    model = quantized_cnn("QDQ", channels=(8, 16, 16), size=16, reduce_range=False)[1]
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])
    mod, params = relay.frontend.from_onnx(model, {"x": (1, 3, 16, 16)})
    x = np.random.default_rng(5).standard_normal((1, 3, 16, 16)).astype("float32")
    (got,) = build_run(mod, {"x": x}, params)
    steps = np.abs(got - sess.run(None, {"x": x})[0]).max() / _output_step(model)
    assert steps == 0.0, f"{steps} quantization steps"


def test_fq2i_can_be_disabled_float_path_agrees(qdq):
    """disabled_pass=["FakeQuantizationToInteger"]: the QDQ pairs run in float (the old path)."""
    mod, params = relay.frontend.from_onnx(qdq, {"x": (1, 3, 16, 16)})
    x = np.random.default_rng(6).standard_normal((1, 3, 16, 16)).astype("float32")
    (a,) = build_run(mod, {"x": x}, params)
    with tvm.transform.PassContext(opt_level=3, disabled_pass=["FakeQuantizationToInteger"]):
        lib = relay.build(mod, target="llvm", params=params)
    from tvmpy.contrib import graph_executor

    m = graph_executor.GraphModule(lib["default"](tvm.cpu()))
    m.set_input("x", x)
    m.run()
    b = m.get_output(0).numpy()
    np.testing.assert_allclose(a, b, atol=0.05)


@pytest.mark.parametrize("activation,per_channel,symmetric", [
    ("QInt8", True, False), ("QUInt8", False, False), ("QInt8", False, True)])
def test_qdq_variants_match_onnxruntime(activation, per_channel, symmetric):
    """int8 activations (shifted to uint8 for the kernels), per-tensor weights, symmetric
    activations: still integer convolutions, still onnxruntime's integers."""
    model = quantized_cnn("QDQ", channels=(8, 16, 16), size=12, activation=activation,
                          per_channel=per_channel,
                          extra_options={"ActivationSymmetric": symmetric})[1]
    mod, params = relay.frontend.from_onnx(model, {"x": (1, 3, 12, 12)})
    fq = qnn_transform.FakeQuantizationToInteger()(relay.transform.BindParams(params)(mod))
    assert [c.op.name for c in _calls(fq["main"].body)].count("qnn.conv2d") == 3
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    x = np.random.default_rng(7).standard_normal((1, 3, 12, 12)).astype("float32")
    (got,) = build_run(mod, {"x": x}, params)
    steps = np.abs(got - sess.run(None, {"x": x})[0]).max() / _output_step(model)
    assert steps == 0.0, f"{steps} quantization steps"


def test_qdq_attention_matmuls_become_integer():
    """MatMul by a constant weight -> qnn.dense; activation x activation MatMuls ->
    qnn.batch_matmul; the softmax becomes qnn.softmax (onnxruntime's QLinearSoftmax, which its
    default optimizations use too) only as an optional rewrite (relay.build's default)."""
    model = quantized_cnn("QDQ", model=float_attention(), per_channel=False)[1]
    mod, params = relay.frontend.from_onnx(model, {"x": (1, 8, 16)})
    fq = qnn_transform.FakeQuantizationToInteger()(relay.transform.BindParams(params)(mod))
    names = [c.op.name for c in _calls(fq["main"].body)]
    assert names.count("qnn.dense") == 4 and names.count("qnn.batch_matmul") == 2, names
    assert "nn.dense" not in names and "nn.batch_matmul" not in names
    assert "nn.softmax" in names and "qnn.softmax" not in names
    fq = qnn_transform.FakeQuantizationToInteger(["nn.softmax"])(
        relay.transform.BindParams(params)(mod))
    assert "qnn.softmax" in [c.op.name for c in _calls(fq["main"].body)]
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    x = np.random.default_rng(8).standard_normal((1, 8, 16)).astype("float32")
    (got,) = build_run(mod, {"x": x}, params)  # relay.build: optional_qnn_ops=["nn.softmax"]
    steps = np.abs(got - sess.run(None, {"x": x})[0]).max() / _output_step(model)
    assert steps == 0, f"{steps} quantization steps"
    # without the optional rewrite: the float softmax, as onnxruntime's basic optimizations
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    basic = ort.InferenceSession(model.SerializeToString(), opts,
                                 providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    cfg = {"relay.FakeQuantizationToInteger.optional_qnn_ops": []}
    with tvm.transform.PassContext(opt_level=3, config=cfg):
        lib = relay.build(mod, target="llvm", params=params)
    from tvmpy.contrib import graph_executor

    m = graph_executor.GraphModule(lib["default"](tvm.cpu()))
    m.set_input("x", x)
    m.run()
    assert np.abs(m.get_output(0).numpy() - basic).max() / _output_step(model) <= 1


def test_quantize_dynamic_matches_onnxruntime(tmp_path):
    """quantize_dynamic: DynamicQuantizeLinear (a run-time scale and zero point) feeding
    MatMulInteger -> qnn.quantize / qnn.dense with expression zero points. The outputs are
    float (the int32 products times float scales; ORT's fused kernel multiplies the scales in
    another order: an ulp)."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    onnx.save(float_attention(), tmp_path / "f.onnx")
    quantize_dynamic(tmp_path / "f.onnx", tmp_path / "q.onnx", weight_type=QuantType.QInt8,
                     reduce_range=True)  # exact in onnxruntime without VNNI too
    model = onnx.load(tmp_path / "q.onnx")
    mod, params = relay.frontend.from_onnx(model, {"x": (1, 8, 16)})
    names = [c.op.name for c in _calls(mod["main"].body)]
    assert names.count("qnn.dense") == 4 and names.count("qnn.quantize") == 2, names
    x = np.random.default_rng(9).standard_normal((1, 8, 16)).astype("float32")
    expect = ort.InferenceSession(model.SerializeToString(),
                                  providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    (got,) = build_run(mod, {"x": x}, params)
    np.testing.assert_allclose(got, expect, rtol=1e-6, atol=1e-6)


def test_quantized_bert_layer_bit_exact_with_onnxruntime():
    """A BERT encoder layer quantized by quantize_static (QDQ, per-channel): onnxruntime fuses
    its QDQ pairs into QLinearMatMul / QLinearAdd / QLinearMul / QLinearSoftmax and keeps
    LayerNormalization in float between a DequantizeLinear and a QuantizeLinear; tvmpy's
    integer ops and its x86 layer_norm round as those kernels do, so every intermediate integer
    and the output are identical (one off-by-one rounding anywhere would grow through the
    following layers)."""
    from tvmpy.contrib import graph_executor
    from tvmpy.relay.testing import onnx_models
    from tvmpy.relay.testing import quantized_models as qm

    model = onnx_models.bert_encoder(layers=2, hidden=64, heads=2, seq=32, vocab=100)
    q = qm.quantize_static(model, reduce_range=True)  # exact in onnxruntime without VNNI too
    sess = ort.InferenceSession(q.SerializeToString(), providers=["CPUExecutionProvider"])
    mod, params = relay.frontend.from_onnx(q, freeze_params=False)
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target="llvm", params=params)
    m = graph_executor.GraphModule(lib["default"](tvm.cpu()))
    for seed in range(12):
        feeds = onnx_models.input_feeds(model, seed=seed)
        expect = sess.run(None, feeds)[0]
        for k, v in feeds.items():
            m.set_input(k, v)
        m.run()
        np.testing.assert_array_equal(m.get_output(0).numpy(), expect, err_msg=f"seed {seed}")
