"""``tvmpy tune`` and ``tvmpy compile/bench --tuning-log``, run as a user runs them
(``python -m tvmpy ...`` in subprocesses) on a tiny conv + dense ONNX model."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import tvmpy as tvm  # noqa: E402
from tvmpy import autotvm  # noqa: E402
from tvmpy.autotvm import record  # noqa: E402

RNG = np.random.default_rng(11)


def _model():
    """x [1,3,10,10] -> Conv(8, 3x3) -> Relu -> Flatten -> Gemm(6) -> out [1,6]."""
    w = numpy_helper.from_array(RNG.standard_normal((8, 3, 3, 3)).astype(np.float32), "w")
    fw = numpy_helper.from_array(RNG.standard_normal((6, 8 * 8 * 8)).astype(np.float32), "fw")
    fb = numpy_helper.from_array(RNG.standard_normal(6).astype(np.float32), "fb")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[3, 3]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Flatten", ["r"], ["f"]),
             helper.make_node("Gemm", ["f", "fw", "fb"], ["out"], transB=1)]
    g = helper.make_graph(
        nodes, "tiny_tune", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 10, 10])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 6])], initializer=[w, fw, fb])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 9
    return m


def _tvmpy(*args, cwd=None, timeout=120):
    return subprocess.run([sys.executable, "-m", "tvmpy", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, timeout=timeout)


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    d = tmp_path_factory.mktemp("tune")
    onnx.save(_model(), d / "tiny.onnx")
    return d / "tiny.onnx"


def _check_library(so_path, model):
    from tvmpy import runtime
    from tvmpy.contrib import graph_executor

    ort = pytest.importorskip("onnxruntime")
    x = RNG.standard_normal((1, 3, 10, 10)).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    m = graph_executor.GraphModule(runtime.load_module(str(so_path))["default"](tvm.cpu(0)))
    m.set_input("x", x)
    m.run()
    np.testing.assert_allclose(m.get_output(0).numpy(), want, rtol=1e-4, atol=1e-4)


def test_tune_then_compile_with_the_log(model_path, tmp_path):
    log = tmp_path / "tune.json"
    r = _tvmpy("tune", model_path, "--trials", 6, "--tuner", "random", "--log", log)
    assert r.returncode == 0, r.stderr
    if "no tunable operators" in r.stdout:
        assert "no tunable operators" in r.stderr and not log.exists()
        pytest.skip("no x86 conv2d/dense autotvm templates registered yet: nothing to tune")
    assert "tuned" in r.stdout and "GFLOP/s" in r.stdout, r.stdout
    assert "[Task  1/" in r.stderr and "trials" in r.stderr
    n = len(list(record.load_from_file(log)))
    assert 0 < n <= 6
    # resume: the budget is met, nothing new is measured
    r2 = _tvmpy("tune", model_path, "--trials", 6, "--tuner", "random", "--log", log)
    assert r2.returncode == 0, r2.stderr
    assert len(list(record.load_from_file(log))) == n

    so = tmp_path / "tuned.so"
    r3 = _tvmpy("compile", model_path, "--tuning-log", log, "-o", so)
    assert r3.returncode == 0, r3.stderr
    assert "applied tuned configs to" in r3.stdout
    applied = int(r3.stdout.split("applied tuned configs to ")[1].split()[0])
    assert applied >= 1, r3.stdout
    _check_library(so, _model_loaded(model_path))


def _model_loaded(path):
    return onnx.load(str(path))


def test_compile_with_an_empty_log_falls_back(model_path, tmp_path):
    log = tmp_path / "empty.json"
    log.write_text("")
    so = tmp_path / "plain.so"
    r = _tvmpy("compile", model_path, "--tuning-log", log, "-o", so)
    assert r.returncode == 0, r.stderr
    assert "0 records" in r.stdout and "applied tuned configs to 0 workload(s)" in r.stdout
    _check_library(so, _model_loaded(model_path))


def test_tune_errors(model_path, tmp_path):
    r = _tvmpy("compile", model_path, "--tuning-log", tmp_path / "missing.json")
    assert r.returncode == 2 and "--tuning-log: no such file" in r.stderr
    r = _tvmpy("tune", model_path, "--trials", -2, "--log", tmp_path / "t.json")
    assert r.returncode == 2 and "--trials must be >= 0" in r.stderr
    r = _tvmpy("tune", model_path, "--trials", 4, "--log", tmp_path / "t.json", "--tuner", "bo")
    assert r.returncode == 2 and "invalid choice" in r.stderr
    r = _tvmpy("tune", model_path, "--trials", 4, "--log", tmp_path / "no" / "t.json")
    assert r.returncode == 2 and "does not exist" in r.stderr
    r = _tvmpy("tune", tmp_path / "nope.onnx", "--trials", 4, "--log", tmp_path / "t.json")
    assert r.returncode == 2 and "no such file" in r.stderr


def test_tune_model_api_matches_the_cli_extraction(model_path):
    """The CLI tunes exactly what autotvm.extract_from_program finds at opt_level 3."""
    from tvmpy.relay.testing import compare
    from tvmpy.transform import PassContext

    mod, params = compare.import_onnx(onnx.load(str(model_path)), {"x": (1, 3, 10, 10)})
    with PassContext(opt_level=3):
        tasks = autotvm.task.extract_from_program(mod, params=params, target="llvm")
    assert all(len(t.config_space) >= 1 and t.flop > 0 for t in tasks)


def test_tune_with_the_auto_scheduler_then_compile(model_path, tmp_path):
    """``--scheduler auto``: every fused subgraph tuned by the auto-scheduler into an
    auto_scheduler log (resumed when run again); ``compile --tuning-log`` applies it."""
    import json

    log = tmp_path / "auto.json"
    r = _tvmpy("tune", model_path, "--scheduler", "auto", "--trials", 6, "--tuner", "random",
               "--log", log, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "Estimated total latency" in r.stdout and "auto-scheduler" in r.stdout, r.stdout
    def records() -> tuple[list[dict], list[dict]]:
        lines = [json.loads(x) for x in log.read_text().splitlines()]
        return [x for x in lines if "i" in x], [x for x in lines if "default" in x]

    recs, defaults = records()
    assert len(recs) == 6 and all("r" in x for x in recs)
    assert any(x["r"][1] == 0 for x in recs)
    # the safety net: each task's default schedule timed into the log, on this CPU
    assert defaults and all("-mcpu=" in x["default"][0][1] for x in defaults)
    r2 = _tvmpy("tune", model_path, "--scheduler", "auto", "--trials", 2, "--tuner", "random",
                "--log", log, timeout=900)  # resumed: 2 more
    assert r2.returncode == 0, r2.stderr[-3000:]
    assert len(records()[0]) == 8
    so = tmp_path / "auto.so"
    r3 = _tvmpy("compile", model_path, "--tuning-log", log, "-o", so, timeout=600)
    assert r3.returncode == 0, r3.stderr[-3000:]
    assert "auto_scheduler log" in r3.stdout, r3.stdout
    _check_library(so, _model_loaded(model_path))
    r4 = _tvmpy("tune", model_path, "--scheduler", "auto", "--trials", 2, "--tuner", "ga",
                "--log", log)
    assert r4.returncode == 2 and "--tuner xgb or random" in r4.stderr
