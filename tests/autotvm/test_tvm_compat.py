"""TVM-compatible autotvm entry points (issue 26): task extraction with ``ops=`` and without a
PassContext, ``LocalBuilder(build_func=...)`` and the per-trial DEBUG line of the ``autotvm``
logger. Written from TVM's documented usage of these APIs."""

from __future__ import annotations

import io
import logging
import os

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import autotvm, relay, te
from tvmpy.contrib import cc


def _net():
    """conv2d -> relu -> depthwise conv2d -> flatten -> dense (prime-ish sizes)."""
    x = relay.var("data", shape=(1, 3, 11, 11))
    w = relay.var("w", shape=(8, 3, 3, 3))
    y = relay.nn.relu(relay.nn.conv2d(x, w, padding=(1, 1), channels=8, kernel_size=(3, 3)))
    w2 = relay.var("w2", shape=(8, 1, 3, 3))
    y = relay.nn.conv2d(y, w2, padding=(1, 1), channels=8, kernel_size=(3, 3), groups=8)
    y = relay.nn.batch_flatten(y)
    wd = relay.var("wd", shape=(7, 8 * 11 * 11))
    y = relay.nn.dense(y, wd)
    mod = tvm.IRModule.from_expr(relay.Function(relay.analysis.free_vars(y), y))
    rng = np.random.default_rng(0)
    params = {"w": rng.standard_normal((8, 3, 3, 3), dtype="float32"),
              "w2": rng.standard_normal((8, 1, 3, 3), dtype="float32"),
              "wd": rng.standard_normal((7, 968), dtype="float32")}
    return mod, params


def _kinds(tasks):
    return {t.name.split(".")[0] for t in tasks}


def test_extract_without_passcontext_finds_every_tunable_op():
    mod, params = _net()
    tasks = autotvm.task.extract_from_program(mod["main"], target="llvm", params=params)
    names = _kinds(tasks)
    assert "conv2d_NCHWc" in names and "depthwise_conv2d_NCHWc" in names
    assert any("dense" in n for n in names)
    # the caller's PassContext (opt_level 2 by default) does not change the result
    with tvm.transform.PassContext(opt_level=3):
        again = autotvm.task.extract_from_program(mod, target="llvm", params=params)
    assert [t.workload for t in again] == [t.workload for t in tasks]


def test_extract_ops_filter_by_op_object_and_name():
    mod, params = _net()
    conv = autotvm.task.extract_from_program(mod["main"], target="llvm", params=params,
                                             ops=(relay.op.get("nn.conv2d"),))
    assert conv and all("conv2d" in t.name for t in conv)
    assert "depthwise_conv2d_NCHWc" in _kinds(conv)
    dense = autotvm.task.extract_from_program(mod["main"], target="llvm", params=params,
                                              ops=["nn.dense"])
    assert dense and all("dense" in t.name for t in dense)
    both = autotvm.task.extract_from_program(
        mod["main"], target="llvm", params=params,
        ops=(relay.op.get("nn.conv2d"), relay.op.get("nn.dense")))
    assert {t.workload for t in both} == {t.workload for t in conv} | {t.workload for t in dense}


def test_extract_ops_not_in_model_warns(caplog):
    mod, params = _net()
    with caplog.at_level(logging.WARNING, logger="autotvm"):
        tasks = autotvm.task.extract_from_program(mod, target="llvm", params=params,
                                                  ops=(relay.op.get("nn.batch_matmul"),))
    assert tasks == []
    msg = " ".join(r.getMessage() for r in caplog.records)
    assert "nn.batch_matmul" in msg and "nn.conv2d" in msg


def test_extract_ops_unknown_name_raises():
    mod, params = _net()
    with pytest.raises(ValueError, match="nn.no_such_op"):
        autotvm.task.extract_from_program(mod, target="llvm", params=params,
                                          ops=["nn.no_such_op"])


def test_relay_op_get():
    assert relay.op.get("nn.conv2d").name == "nn.conv2d"


# ---- a tiny tunable template ----------------------------------------------------------------
@autotvm.template("test_tvm_compat/matmul")
def _matmul(n, m, k):
    A = te.placeholder((n, k), name="A")
    B = te.placeholder((k, m), name="B")
    r = te.reduce_axis((0, k), name="r")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    s = te.create_schedule(C.op)
    cfg = autotvm.get_config()
    y, x = s[C].op.axis
    cfg.define_split("tile_x", x, num_outputs=2)
    cfg["tile_x"].apply(s, C, x)
    return s, [A, B, C]


_LINKED: list[str] = []


def _my_build_func(output, objects, options=None):
    """A TVM-style build_func: link with create_shared and leave a marker next to it."""
    cc.create_shared(output, objects, options)
    with open(output + ".linked", "w") as f:
        f.write("yes")


def test_local_builder_build_func_callable_is_used(tmp_path):
    task = autotvm.task.create("test_tvm_compat/matmul", args=(5, 12, 7), target="llvm")
    builder = autotvm.LocalBuilder(build_func=_my_build_func, timeout=60, n_parallel=1)
    option = autotvm.measure_option(builder=builder, runner=autotvm.LocalRunner(number=2))
    tuner = autotvm.tuner.GridSearchTuner(task)
    results = []
    tuner.tune(n_trial=2, measure_option=option,
               callbacks=[lambda t, i, r: results.extend(r)])
    assert len(results) == 2 and all(r.error_no == 0 for r in results), results
    marks = [f for f in os.listdir(builder.tmp_dir) if f.endswith(".linked")]
    assert marks, "the build_func was not called"


def test_local_builder_build_func_errors(monkeypatch):
    monkeypatch.delenv("TVM_NDK_CC", raising=False)
    with pytest.raises(ValueError, match="TVM_NDK_CC"):
        autotvm.LocalBuilder(build_func="ndk")
    with pytest.raises(ValueError, match="build_func"):
        autotvm.LocalBuilder(build_func="tar-please")


def test_per_trial_debug_line_on_autotvm_logger():
    task = autotvm.task.create("test_tvm_compat/matmul", args=(5, 12, 7), target="llvm")
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    log = logging.getLogger("autotvm")
    old = log.level
    log.setLevel(logging.DEBUG)
    log.addHandler(handler)
    try:
        option = autotvm.measure_option(builder=autotvm.LocalBuilder(n_parallel=1),
                                        runner=autotvm.LocalRunner(number=2))
        autotvm.tuner.RandomTuner(task).tune(n_trial=3, measure_option=option)
    finally:
        log.removeHandler(handler)
        log.setLevel(old)
    lines = [ln for ln in stream.getvalue().splitlines() if ln.startswith("No: ")]
    assert [ln.split()[1] for ln in lines] == ["1", "2", "3"]
    for ln in lines:
        assert "GFLOPS: " in ln and "result: MeasureResult(costs=(" in ln
        assert "error_no=0" in ln and "tile_x" not in ln  # the config prints as TVM's: sp[...]
        assert "sp[" in ln
