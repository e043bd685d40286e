"""Subgraphs the auto-scheduler cannot schedule are named by ``extract_tasks``'s summary, with
the reason (a ``te.extern`` kernel: its loops written out in TIR, no loop nest for the sketch
rules; symbolic shapes). The LSTM/GRU recurrence (``fused_nn_rnn_scan``, a ``te.extern``) is no
longer one of them: its kernel names its time step (``topi.rnn_cell``) as its task, weighted by
the number of steps; a model whose subgraphs, the cell included, are tuned by the task
scheduler still computes onnxruntime's result."""

from __future__ import annotations

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import auto_scheduler, relay
from tvmpy.auto_scheduler.relay_integration import format_not_tuned, not_tuned
from tvmpy.contrib import graph_executor

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def _rnn_model(kind, T, N, I, H, rng):
    G = {"GRU": 3, "LSTM": 4}[kind]
    inits = [numpy_helper.from_array((rng.standard_normal((1, G * H, I)) * .5).astype("float32"), "W"),
             numpy_helper.from_array((rng.standard_normal((1, G * H, H)) * .5).astype("float32"), "R"),
             numpy_helper.from_array((rng.standard_normal((1, 2 * G * H)) * .5).astype("float32"), "B")]
    node = helper.make_node(kind, ["X", "W", "R", "B"], ["Y", "Y_h"], hidden_size=H)
    g = helper.make_graph([node], "rnn",
                          [helper.make_tensor_value_info("X", TensorProto.FLOAT, [T, N, I])],
                          [helper.make_tensor_value_info(o, TensorProto.FLOAT, None)
                           for o in ("Y", "Y_h")], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_rnn_scan_is_its_cell_task(kind):
    model = _rnn_model(kind, 5, 3, 7, 11, np.random.default_rng(0))
    mod, params = relay.frontend.from_onnx(model, {"X": (5, 3, 7)}, freeze_params=False)
    for simple in (False, True):
        tasks, weights = auto_scheduler.extract_tasks(mod["main"], params, "llvm",
                                                      include_simple_tasks=simple)
        cells = [(t, w) for t, w in zip(tasks, weights) if "topi.rnn_cell" in t.workload_key]
        assert len(cells) == 1 and cells[0][1] == 5  # one call of 5 steps
        assert "fused_nn_rnn_scan" in cells[0][0].desc
        assert not any(i.kind == "extern" for i in not_tuned())
        assert any(i.kind == "simple" for i in not_tuned()) is not simple
    assert "rnn_scan" not in format_not_tuned()


def test_tuned_lstm_model_matches_onnxruntime(tmp_path):
    rng = np.random.default_rng(3)
    T, N, I, H = 4, 2, 5, 13
    model = _rnn_model("LSTM", T, N, I, H, rng)
    x = rng.uniform(-1, 1, (T, N, I)).astype("float32")
    mod, params = relay.frontend.from_onnx(model, {"X": x.shape}, freeze_params=False)
    tasks, weights = auto_scheduler.extract_tasks(mod["main"], params, "llvm")
    assert any("topi.rnn_cell" in t.workload_key for t in tasks)  # the recurrence is tuned too
    log = str(tmp_path / "log.json")
    opts = auto_scheduler.TuningOptions(
        num_measure_trials=2 * len(tasks), num_measures_per_round=2, verbose=0,
        builder=auto_scheduler.LocalBuilder(timeout=120, n_parallel=2),
        runner=auto_scheduler.LocalRunner(number=1, repeat=1),
        measure_callbacks=[auto_scheduler.RecordToFile(log)])
    auto_scheduler.TaskScheduler(tasks, weights, callbacks=[]).tune(
        opts, search_policy="sketch.random", seed=0)
    with auto_scheduler.ApplyHistoryBest(log):
        with tvm.transform.PassContext(opt_level=3,
                                       config={"relay.backend.use_auto_scheduler": True}):
            lib = relay.build(mod, "llvm", params=params)
    m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    m.set_input("X", x)
    m.run()
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for i, want in enumerate(sess.run(None, {"X": x})):
        np.testing.assert_allclose(m.get_output(i).numpy(), want, rtol=1e-4, atol=2e-5)
