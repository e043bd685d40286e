"""Tutorial check: TVM's "Compiling and Optimizing a Model with the Python Interface (AutoTVM)"
(gallery/tutorial/autotvm_relay_x86.py), in our own words, offline: a small ONNX classifier
with random weights instead of the downloaded ResNet-50 and image, a few trials per task.

Steps: import the ONNX model (relay.frontend.from_onnx), build at opt_level 3, run it with
the graph executor and time it; softmax + top classes; extract the tuning tasks (without a
PassContext, as the tutorial does), tune each with XGBTuner into a records file
(LocalBuilder(build_func="default"), LocalRunner with cache flushing); rebuild with
apply_history_best, run again and compare outputs (with each other and with onnxruntime) and
timings."""

from __future__ import annotations

import timeit

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import autotvm, relay
from tvmpy.autotvm.tuner import XGBTuner
from tvmpy.contrib import graph_executor
from tvmpy.topi.testing import softmax_python

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

INPUT = "data"
SHAPE = (1, 3, 15, 15)
CLASSES = 10


def make_model() -> onnx.ModelProto:
    """conv 3x3 (3->8) relu, conv 3x3 stride 2 (8->12) relu, global average pool, flatten,
    gemm -> 10 classes."""
    rng = np.random.default_rng(0)
    inits = {
        "w1": (rng.standard_normal((8, 3, 3, 3)) * 0.3).astype("float32"),
        "b1": (rng.standard_normal(8) * 0.1).astype("float32"),
        "w2": (rng.standard_normal((12, 8, 3, 3)) * 0.2).astype("float32"),
        "wf": (rng.standard_normal((CLASSES, 12)) * 0.5).astype("float32"),
        "bf": (rng.standard_normal(CLASSES) * 0.1).astype("float32"),
    }
    nodes = [
        helper.make_node("Conv", [INPUT, "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("GlobalAveragePool", ["r2"], ["p"]),
        helper.make_node("Flatten", ["p"], ["f"]),
        helper.make_node("Gemm", ["f", "wf", "bf"], ["logits"], transB=1),
    ]
    graph = helper.make_graph(
        nodes, "small_classifier",
        [helper.make_tensor_value_info(INPUT, TensorProto.FLOAT, list(SHAPE))],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, CLASSES])],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    return model


def build_and_run(mod, params, target, data, records=None):
    if records is None:
        with tvm.transform.PassContext(opt_level=3):
            lib = relay.build(mod, target=target, params=params)
    else:
        with autotvm.apply_history_best(records):
            with tvm.transform.PassContext(opt_level=3, config={}):
                lib = relay.build(mod, target=target, params=params)
    dev = tvm.device(str(target), 0)
    module = graph_executor.GraphModule(lib["default"](dev))
    module.set_input(INPUT, data)
    module.run()
    out = module.get_output(0).numpy()
    times = timeit.Timer(lambda: module.run()).repeat(repeat=3, number=5)
    return out, min(times) / 5


def test_autotvm_relay_x86(tmp_path):
    model = make_model()
    data = np.random.default_rng(1).uniform(0, 1, SHAPE).astype("float32")
    expect = ort.InferenceSession(model.SerializeToString(),
                                  providers=["CPUExecutionProvider"]).run(None, {INPUT: data})[0]

    target = "llvm"
    mod, params = relay.frontend.from_onnx(model, {INPUT: SHAPE})
    untuned, untuned_s = build_and_run(mod, params, target, data)
    tvm.testing.assert_allclose(untuned, expect, rtol=1e-4, atol=1e-5)
    ranks = np.argsort(softmax_python(untuned)[0])[::-1]
    assert list(ranks[:5]) == list(np.argsort(softmax_python(expect)[0])[::-1][:5])

    records = str(tmp_path / "small-autotuning.json")
    trials = 3
    option = autotvm.measure_option(
        builder=autotvm.LocalBuilder(build_func="default"),
        runner=autotvm.LocalRunner(number=2, repeat=1, timeout=10, min_repeat_ms=0,
                                   enable_cpu_cache_flush=True))
    tasks = autotvm.task.extract_from_program(mod["main"], target=target, params=params)
    assert any(t.name.startswith("conv2d") for t in tasks), [t.name for t in tasks]
    for i, task in enumerate(tasks):
        prefix = f"[Task {i + 1:2d}/{len(tasks):2d}] "
        tuner = XGBTuner(task, loss_type="rank")
        n = min(trials, len(task.config_space))
        tuner.tune(n_trial=n, early_stopping=10, measure_option=option,
                   callbacks=[autotvm.callback.progress_bar(n, prefix=prefix),
                              autotvm.callback.log_to_file(records)])
    logged = autotvm.record.load_from_file(records)
    assert {r[0].task.name for r in logged} == {t.name for t in tasks}

    tuned, tuned_s = build_and_run(mod, params, target, data, records)
    tvm.testing.assert_allclose(tuned, untuned, rtol=1e-4, atol=1e-5)
    tvm.testing.assert_allclose(tuned, expect, rtol=1e-4, atol=1e-5)
    assert untuned_s > 0 and tuned_s > 0  # the tutorial prints both; no speed claim here
