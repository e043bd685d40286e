"""TVM-compatible autotvm entry points (issue 26): task extraction with ``ops=`` and without a
PassContext, ``LocalBuilder(build_func=...)`` and the per-trial DEBUG line of the ``autotvm``
logger. Written from TVM's documented usage of these APIs."""

from __future__ import annotations

import io
import json
import logging
import os
import re

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
    monkeypatch.setenv("TVM_NDK_CC", "no-such-ndk-clang++")
    with pytest.raises(ValueError, match="not an executable"):
        autotvm.LocalBuilder(build_func="ndk")
    monkeypatch.setenv("TVM_NDK_CC", "cc")  # any compiler on PATH stands in for the NDK's
    assert callable(autotvm.LocalBuilder(build_func="ndk").build_func)


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
        assert "error_no=0" in ln
        assert re.search(r"\[\('tile_x', \[-?\d+, \d+\]\)\],None,\d+$", ln), ln  # TVM's form


# ---- TVM 0.8 log lines ------------------------------------------------------------------------
@autotvm.template("test_tvm_compat/mm2")
def _mm2(n, m, k, dtype):
    A = te.placeholder((n, k), name="A", dtype=dtype)
    B = te.placeholder((k, m), name="B", dtype=dtype)
    r = te.reduce_axis((0, k), name="r")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    s = te.create_schedule(C.op)
    cfg = autotvm.get_config()
    y, x = s[C].op.axis
    cfg.define_split("tile_y", y, num_outputs=2)
    cfg.define_split("tile_x", x, num_outputs=2)
    yo, yi = cfg["tile_y"].apply(s, C, y)
    xo, xi = cfg["tile_x"].apply(s, C, x)
    s[C].reorder(yo, xo, yi, xi)
    return s, [A, B, C]


def _tvm08_line(args, entity, cost, index=7, error_no=0, name="test_tvm_compat/mm2",
                target="llvm -keys=cpu -link-params=0"):
    """A line as TVM 0.8's ``autotvm.record.encode`` writes it."""
    return json.dumps({
        "input": [target, name, args, {}],
        "config": {"index": index, "code_hash": None,
                   "entity": [[k, "sp", v] for k, v in entity]},
        "result": [[cost], error_no, 0.41, 1634000000.5],
        "version": 0.2, "tvm_version": "0.8.0"})


def test_tvm08_log_lines_load_apply_and_resume(tmp_path):
    args = [12, 10, 7, "float32"]
    good = _tvm08_line(args, [("tile_y", [-1, 4]), ("tile_x", [-1, 5])], 1e-6)
    worse = _tvm08_line(args, [("tile_y", [-1, 2]), ("tile_x", [-1, 1])], 5e-6)
    foreign = _tvm08_line(args, [("tile_y", [-1, 4]), ("tile_k", [-1, 2])], 1e-7)  # no tile_k here
    bad_value = _tvm08_line(args, [("tile_y", [-1, 5]), ("tile_x", [-1, 5])], 1e-7)  # 5 !| 12
    log = tmp_path / "tvm08.log"
    log.write_text("\n".join([good, worse, foreign, bad_value]) + "\n")
    with pytest.warns(UserWarning) as rec:
        records = autotvm.record.load_from_file(str(log))
    texts = [str(w.message) for w in rec]
    assert any("line 3" in t and "tile_k" in t for t in texts), texts
    assert any("line 4" in t and "tile_y" in t for t in texts), texts
    assert len(records) == 2
    inp, res = records[0]
    assert inp.task.name == "test_tvm_compat/mm2" and res.error_no == 0
    space = inp.task.config_space
    # the index is this space's index of those knob values
    assert space.get(inp.config.index)["tile_y"].size == [-1, 4]
    assert space.get(inp.config.index)["tile_x"].size == [-1, 5]

    # apply_history_best picks the best TVM record; the build computes the right product
    with pytest.warns(UserWarning):
        ctx = autotvm.apply_history_best(str(log))
    with ctx, tvm.target.Target("llvm"):
        s, bufs = _mm2(12, 10, 7, "float32")
    f = tvm.build(s, bufs, "llvm")
    rng = np.random.default_rng(1)
    a = rng.standard_normal((12, 7), dtype="float32")
    b = rng.standard_normal((7, 10), dtype="float32")
    c = tvm.nd.array(np.zeros((12, 10), "float32"))
    f(tvm.nd.array(a), tvm.nd.array(b), c)
    tvm.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-5, atol=1e-5)
    wkl = ("test_tvm_compat/mm2", 12, 10, 7, "float32")
    chosen = ctx.query(tvm.target.Target("llvm"), wkl)
    assert chosen["tile_x"].size == [-1, 5]

    # the tuner resumes from them: their configs are visited and seed the best
    task = autotvm.task.create("test_tvm_compat/mm2", args=tuple(args), target="llvm")
    tuner = autotvm.tuner.RandomTuner(task)
    tuner.load_history(records)
    assert tuner.num_history == 2 and tuner.best_config.index == inp.config.index


def test_tvm08_dense_nopack_maps_to_dense_x86(tmp_path):
    line = json.dumps({
        "input": ["llvm -keys=cpu -link-params=0", "dense_nopack.x86",
                  [["TENSOR", [3, 16], "float32"], ["TENSOR", [5, 16], "float32"], None,
                   "float32"], {}],
        "config": {"index": 0, "code_hash": None, "entity": [["no_such_knob", "ot", 1]]},
        "result": [[1e-6], 0, 0.1, 1.0], "version": 0.2, "tvm_version": "0.8.0"})
    log = tmp_path / "dense.log"
    log.write_text(line + "\n")
    with pytest.warns(UserWarning, match=r"line 1 .*dense\.x86.*knobs"):
        assert autotvm.record.load_from_file(str(log)) == []


def test_own_log_format_unchanged(tmp_path):
    task = autotvm.task.create("test_tvm_compat/mm2", args=(6, 4, 3, "float32"), target="llvm")
    cfg = task.config_space.get(3)
    inp = autotvm.MeasureInput(task.target, task, cfg)
    res = autotvm.MeasureResult((2e-6,), 0, 0.3, 5.0)
    line = autotvm.record.encode(inp, res)
    assert json.loads(line)["version"] == 1 and "config" not in json.loads(line)
    inp2, res2 = autotvm.record.decode(line)
    assert inp2.config == cfg and res2 == res


def _tvm08_conv_line(ic_bn, oc_bn, ow, unroll, cost):
    """A conv2d_NCHWc.x86 line as TVM 0.8 writes it: NCHW/OIHW workload, blocks as knobs."""
    return json.dumps({
        "input": ["llvm -keys=cpu -link-params=0", "conv2d_NCHWc.x86",
                  [["TENSOR", [1, 8, 10, 10], "float32"], ["TENSOR", [8, 8, 3, 3], "float32"],
                   [1, 1], [1, 1, 1, 1], [1, 1], "NCHW", "NCHW", "float32"], {}],
        "config": {"index": 123, "code_hash": None, "entity": [
            ["tile_ic", "sp", [-1, ic_bn]], ["tile_oc", "sp", [-1, oc_bn]],
            ["tile_ow", "sp", [-1, ow]], ["unroll_kw", "ot", unroll]]},
        "result": [[cost], 0, 1.0, 1634000000.0], "version": 0.2, "tvm_version": "0.8.0"})


def test_tvm08_conv2d_lines_map_blocks_and_knobs(tmp_path):
    from tvmpy.relay.build_module import optimize

    log = tmp_path / "conv.log"
    log.write_text("\n".join([_tvm08_conv_line(4, 2, 5, True, 1e-6),
                              _tvm08_conv_line(8, 8, 2, False, 9e-6),
                              _tvm08_conv_line(8, 8, 64, False, 1e-7)]) + "\n")
    with pytest.warns(UserWarning, match=r"line 3 .*tile_ow = 64"):
        recs = autotvm.record.load_from_file(str(log))
    assert len(recs) == 2
    inp, _ = recs[0]
    assert inp.task.name == "conv2d_NCHWc.x86"
    assert inp.task.args[1] == ("TENSOR", (4, 2, 3, 3, 4, 2), "float32")
    cfg = inp.task.config_space.get(inp.config.index)
    assert cfg["tile_ow"].val == 5 and cfg["unroll_kw"].val is True

    x = relay.var("data", shape=(1, 3, 10, 10))
    w1 = relay.var("w1", shape=(8, 3, 3, 3))
    w2 = relay.var("w2", shape=(8, 8, 3, 3))
    y = relay.nn.relu(relay.nn.conv2d(x, w1, padding=(1, 1), channels=8, kernel_size=(3, 3)))
    y = relay.nn.conv2d(y, w2, padding=(1, 1), channels=8, kernel_size=(3, 3))
    mod = tvm.IRModule.from_expr(relay.Function([x, w1, w2], y))
    rng = np.random.default_rng(2)
    params = {"w1": rng.standard_normal((8, 3, 3, 3), dtype="float32"),
              "w2": rng.standard_normal((8, 8, 3, 3), dtype="float32")}
    with pytest.warns(UserWarning):
        ctx = autotvm.apply_history_best(str(log))
    with ctx, tvm.transform.PassContext(opt_level=3):
        text = str(optimize(mod, params, "llvm")["main"])
        lib = relay.build(mod, target="llvm", params=params)
    assert 'out_layout="NCHW2c"' in text  # the fastest TVM record's tile_oc
    from tvmpy.contrib import graph_executor

    data = rng.standard_normal((1, 3, 10, 10), dtype="float32")
    m = graph_executor.GraphModule(lib["default"](tvm.cpu()))
    m.set_input("data", data)
    m.run()
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    ref = F.conv2d(F.relu(F.conv2d(torch.from_numpy(data), torch.from_numpy(params["w1"]),
                                   padding=1)), torch.from_numpy(params["w2"]), padding=1)
    tvm.testing.assert_allclose(m.get_output(0).numpy(), ref.numpy(), rtol=1e-4, atol=1e-4)
