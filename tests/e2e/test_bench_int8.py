"""bench/int8.py's pipeline (issue 24, point 7): a model quantized after ``quant_pre_process``
runs in onnxruntime as integer kernels only (no float BatchNormalization between QLinearConvs,
as without the step), tvmpy's int8 build of it agrees with onnxruntime's int8 run, and the
agreement is counted in output quantization steps. No timing is asserted."""

from __future__ import annotations

import importlib
import os
import sys
from collections import Counter

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from tvmpy.relay.testing import compare  # noqa: E402
from tvmpy.relay.testing import quantized_models as qm  # noqa: E402

BENCH = os.path.join(os.path.dirname(__file__), "..", "..", "bench")


@pytest.fixture(scope="module")
def common(request):
    """bench/common.py imported without bench's BLAS re-exec (which would replace pytest)."""
    mp = pytest.MonkeyPatch()
    mp.setenv("BENCH_KEEP_BLAS_ENV", "1")
    mp.syspath_prepend(os.path.abspath(BENCH))
    request.addfinalizer(mp.undo)
    yield importlib.import_module("common")
    sys.modules.pop("common", None)


def _conv_bn_model(seed: int = 3):
    """x [1,5,13,13] -> (Conv 3x3 -> BatchNormalization -> Relu) x 2 -> GlobalAveragePool ->
    Flatten -> Gemm(7): awkward channel counts, non-trivial BatchNormalization statistics."""
    rng = np.random.default_rng(seed)
    inits, nodes, x = [], [], "x"

    def const(name, a):
        inits.append(numpy_helper.from_array(np.asarray(a, np.float32), name))
        return name

    for i, (cin, cout) in enumerate([(5, 11), (11, 6)]):
        w = const(f"w{i}", rng.standard_normal((cout, cin, 3, 3)) / np.sqrt(9 * cin))
        bn = [const(f"bn{i}.{k}", v) for k, v in (
            ("scale", rng.uniform(0.5, 1.5, cout)), ("bias", rng.uniform(-0.3, 0.3, cout)),
            ("mean", rng.uniform(-0.2, 0.2, cout)), ("var", rng.uniform(0.5, 2.0, cout)))]
        nodes += [helper.make_node("Conv", [x, w], [f"c{i}"], pads=[1] * 4),
                  helper.make_node("BatchNormalization", [f"c{i}", *bn], [f"b{i}"]),
                  helper.make_node("Relu", [f"b{i}"], [f"r{i}"])]
        x = f"r{i}"
    fw = const("fw", rng.standard_normal((7, 6)) / np.sqrt(6))
    fb = const("fb", rng.standard_normal(7) * 0.1)
    nodes += [helper.make_node("GlobalAveragePool", [x], ["g"]),
              helper.make_node("Flatten", ["g"], ["f"]),
              helper.make_node("Gemm", ["f", fw, fb], ["out"], transB=1)]
    g = helper.make_graph(nodes, "conv_bn",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 5, 13, 13])],
                          [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 7])],
                          initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 9
    return m


def _ort_ops(model, tmp_path) -> Counter:
    """The operators of the graph onnxruntime runs (ORT_ENABLE_ALL)."""
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    opts.log_severity_level = 3
    ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return Counter(n.op_type for n in onnx.load(opts.optimized_model_filepath).graph.node)


def test_pre_processed_model_runs_as_integer_kernels_in_onnxruntime(tmp_path):
    m = _conv_bn_model()
    calib = qm.calibration_feeds(m)
    raw = _ort_ops(qm.quantize_static(m, calib), tmp_path)
    assert raw["BatchNormalization"] == 2  # what issue 24 found: float BN between int8 convs
    pre = qm.pre_process(m)
    assert "BatchNormalization" not in {n.op_type for n in pre.graph.node}
    for fmt in ("QDQ", "QOperator"):
        ops = _ort_ops(qm.quantize_static(pre, calib, fmt=fmt), tmp_path)
        assert ops["BatchNormalization"] == 0 and ops["QLinearConv"] == 2, (fmt, ops)


def test_tvmpy_int8_of_a_pre_processed_model_agrees_with_onnxruntime(common):
    m = _conv_bn_model()
    calib = qm.calibration_feeds(m)
    pre = qm.pre_process(m)
    q = qm.quantize_static(pre, calib, reduce_range=True)  # exact in onnxruntime without VNNI
    step = common.output_step(q)
    assert step is not None and step > 0
    mod, params = compare.import_onnx(q)
    lib, _ = compare.build(mod, params, opt_level=3)
    tvm_run, ort_run = compare.tvm_runner(lib), compare.ort_runner(q)
    fp32 = compare.ort_runner(m)
    vs_ort, vs_fp32 = common.Agreement(step), common.Agreement(step)
    for seed in range(5):
        feeds = {"x": np.random.default_rng(seed).standard_normal((1, 5, 13, 13))
                 .astype(np.float32)}
        got = tvm_run(feeds)[0]
        vs_ort.add(got, ort_run(feeds)[0])
        vs_fp32.add(got, fp32(feeds)[0])
    assert vs_ort.max <= 1.0  # integer kernels rounded as onnxruntime's: at most one step
    assert 0 < vs_fp32.max < 10  # the quantization error itself: non-zero, a few steps


def test_agreement_counts_output_steps(common):
    a = common.Agreement(0.5)
    a.add(np.array([0.0, 1.0, 2.0]), np.array([0.0, 0.5, 0.0]))  # 0, 1 and 4 steps apart
    a.add(np.array([[1.25]]), np.array([[1.0]]))  # half a step
    assert a.max == 4.0 and a.n == 4 and a.within == 3
    assert a.sum / a.n == pytest.approx(5.5 / 4)
    assert str(a) == "max 4.00, mean 1.375 steps; 75.00% within 1 step"
