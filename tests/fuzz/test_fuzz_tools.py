"""The fuzzer's own machinery: the comparison's tolerances, stage attribution, the reducer and
the regression tests it writes."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from tvmpy.testing.fuzz import oracles  # noqa: E402
from tvmpy.testing.fuzz import reduce as R  # noqa: E402


def test_compare_float_tolerance_is_relative_to_the_output_scale():
    w = np.array([100.0, 1.0, -3.0], "float32")
    assert oracles.compare([w + np.float32(5e-4)], [w]) is None  # 5e-4 <= 1e-5 * 100 + ...
    msg = oracles.compare([w + np.array([0, 0, 0.01], "float32")], [w])
    assert msg is not None and "output 0" in msg and "(2,)" in msg
    # accumulating models get a looser atol
    assert oracles.compare([w + np.float32(5e-3)], [w], ["Conv"]) is None


def test_compare_exact_for_ints_and_bools_and_checks_shape_dtype_nan():
    i = np.array([1, 2, 3], "int64")
    assert oracles.compare([i], [i]) is None
    assert "differ" in oracles.compare([i + (i == 2)], [i])
    assert "dtype" in oracles.compare([i.astype("int32")], [i])
    assert "shape" in oracles.compare([i[:2]], [i])
    f = np.array([np.nan, 1.0, np.inf], "float32")
    assert oracles.compare([f.copy()], [f]) is None
    assert "NaN" in oracles.compare([np.array([0.0, 1.0, np.inf], "float32")], [f])
    assert "infinities" in oracles.compare([np.array([np.nan, 1.0, -np.inf], "float32")], [f])


def test_stage_of_names_the_package_that_raised():
    from tvmpy.tir.transform import vectorize_loop_func

    with pytest.raises(Exception) as info:
        vectorize_loop_func(None)
    assert oracles.stage_of(info.value) == "tir"


def _chain_model():
    rng = np.random.default_rng(0)
    c1 = numpy_helper.from_array(rng.standard_normal((1, 8, 1, 1)).astype("float32"), "c1")
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="n0"),
             helper.make_node("Sigmoid", ["r"], ["s"], name="n1"),
             helper.make_node("Max", ["s", "c1"], ["m"], name="n2"),
             helper.make_node("Transpose", ["m"], ["t"], perm=[3, 2, 0, 1], name="n3"),
             helper.make_node("Abs", ["t"], ["y"], name="n4"),
             helper.make_node("Neg", ["s"], ["z"], name="n5")]
    g = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 5, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 5, 1, 8]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 8, 5, 3])], [c1])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    return m, {"x": rng.standard_normal((1, 8, 5, 3)).astype("float32")}


def test_reducer_keeps_the_failure_and_shrinks_to_it():
    model, feeds = _chain_model()

    def fails(m, f):  # "the bug": a Transpose whose input is at least 0.5 somewhere
        try:
            onnx.checker.check_model(m, full_check=True)
            oracles.run_reference(m, f)
        except Exception:
            return False
        return any(n.op_type == "Transpose" for n in m.graph.node)

    small, small_feeds = R.reduce_model(model, feeds, fails)
    assert [n.op_type for n in small.graph.node] == ["Transpose"]
    assert fails(small, small_feeds)
    # the cut input carries onnxruntime's intermediate value: max(sigmoid(relu(x)), c1)
    (name,) = small_feeds
    ref = np.maximum(1 / (1 + np.exp(-np.maximum(feeds["x"], 0))),
                     numpy_helper.to_array(model.graph.initializer[0]))
    np.testing.assert_allclose(small_feeds[name], ref, rtol=1e-6)


def test_written_regression_test_rebuilds_the_model_and_runs():
    model, feeds = _chain_model()
    src = R.to_pytest(model, feeds, "test_generated", ("llvm-O3", "relay-interp"), note="demo")
    scope: dict = {}
    exec(compile(src, "<generated>", "exec"), scope)
    scope["test_generated"]()  # builds the same graph; tvmpy agrees with onnxruntime on it
    assert "helper.make_node('Transpose'" in src and "perm=[3, 2, 0, 1]" in src


def test_campaign_survives_crashes_and_hangs_and_records_everything(tmp_path, monkeypatch):
    # worker processes: a segfault and a hang cost one model each, the campaign goes on, and
    # every finding is on disk (appended per model) with the model that caused it
    import json

    from tvmpy.testing.fuzz import campaign

    monkeypatch.setenv(campaign.FAULTS_ENV, "41=crash,42=hang")
    summary = campaign.run_campaign(models=4, seed=40, jobs=1, max_nodes=2,
                                    out_dir=str(tmp_path), configs=("relay-interp",),
                                    timeout=20)
    assert summary.models == 4
    assert summary.findings["crash"] == 1 and summary.findings["timeout"] == 1
    lines = [json.loads(x) for x in (tmp_path / "findings.jsonl").read_text().splitlines()]
    kinds = {r["seed"]: r["findings"][0]["kind"] for r in lines}
    assert kinds[41] == "crash" and kinds[42] == "timeout"
    assert "signal 11" in [r for r in lines if r["seed"] == 41][0]["findings"][0]["message"]
    assert (tmp_path / "models" / "seed_41.onnx").exists()  # saved before it was checked
    done = json.loads((tmp_path / "summary.json").read_text())
    assert done["models"] == 4 and done["op_types"] >= 1
    assert "crash 1" in summary.report() and "timeout 1" in summary.report()
