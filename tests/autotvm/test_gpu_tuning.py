"""AutoTVM on a GPU target (OpenCL on PoCL here): the builder's verify_gpu_code check, the
runner measuring on the module's device, a short XGB tuning run whose best record reproduces
correct outputs, and the features of a GPU schedule."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import autotvm, te
from tvmpy.autotvm import feature
from tvmpy.autotvm.measure import MeasureErrorNo, MeasureInput
from tvmpy.autotvm.space import OtherOptionEntity, SplitEntity
from tvmpy.target import Target
from tvmpy.topi import cuda, testing

TARGET = "opencl"
DATA, WEIGHT = (1, 8, 9, 9), (16, 8, 3, 3)


def _conv_task():
    args = (("TENSOR", DATA, "float32"), ("TENSOR", WEIGHT, "float32"), 1, 1, 1)
    return autotvm.task.create("conv2d_nchw.cuda", args, target=TARGET)


@pytest.fixture(scope="module")
def measure():
    assert tvm.opencl(0).exist, "no OpenCL device (install pyopencl + pocl-opencl-icd)"
    opt = autotvm.measure_option(
        builder=autotvm.LocalBuilder(n_parallel=2, timeout=60),
        runner=autotvm.LocalRunner(number=2, repeat=1, timeout=60))
    yield opt
    opt["builder"].close()
    opt["runner"].close()


def _config(task, **sizes):
    cfg = task.config_space.get(0)
    for name, size in sizes.items():
        cfg._entity_map[name] = SplitEntity(size) if isinstance(size, list) else \
            OtherOptionEntity(size)
    return cfg


def test_builder_and_runner_on_the_device(measure):
    """A valid config runs on tvm.opencl(0) (costs in seconds); too many threads per block
    (16 x 9 x 9 > 256) is an INSTANTIATION_ERROR trial, not a crash; tuning goes on."""
    task = _conv_task()
    good = _config(task, tile_f=[-1, 1, 4, 2], tile_y=[-1, 1, 3, 1], tile_x=[-1, 1, 9, 1],
                   tile_rc=[-1, 4])
    bad = _config(task, tile_f=[-1, 1, 16, 1], tile_y=[-1, 1, 9, 1], tile_x=[-1, 1, 9, 1])
    batch = autotvm.measure.create_measure_batch(task, measure)
    res = batch([MeasureInput(task.target, task, c) for c in (good, bad, good)])
    assert res[0].error_no == MeasureErrorNo.NO_ERROR, res[0]
    assert all(isinstance(c, float) and c > 0 for c in res[0].costs)
    assert res[1].error_no == MeasureErrorNo.INSTANTIATION_ERROR
    assert "threads" in res[1].costs[0] and "verify_gpu_code" in res[1].costs[0]
    assert res[2].error_no == MeasureErrorNo.NO_ERROR


def test_runner_flags_a_wrong_gpu_kernel(measure, monkeypatch):
    """check_correctness compares GPU outputs (copied back from the device) with the
    reference config's."""
    task = _conv_task()
    ok = _config(task, tile_x=[-1, 1, 9, 1])
    batch = autotvm.measure.create_measure_batch(task, measure)
    assert batch([MeasureInput(task.target, task, ok)])[0].error_no == MeasureErrorNo.NO_ERROR
    # the runner's reference now exists: a corrupted reference makes the same kernel "wrong"
    runner = measure["runner"]
    ref = runner._ref
    runner._set_reference([r + 1.0 for r in ref])
    try:
        res = batch([MeasureInput(task.target, task, ok)])[0]
    finally:
        runner._set_reference(ref)
    assert res.error_no == MeasureErrorNo.WRONG_ANSWER, res


def test_xgb_tuning_conv2d_opencl(measure, tmp_path):
    """16 XGB trials write a log; apply_history_best builds the best config, which is correct."""
    task = _conv_task()
    log = tmp_path / "conv.log"
    tuner = autotvm.tuner.XGBTuner(task, feature_type="itervar")
    tuner.tune(n_trial=16, measure_option=measure,
               callbacks=[autotvm.callback.log_to_file(str(log))])
    records = list(autotvm.record.load_from_file(str(log)))
    assert len(records) == 16
    ok = [r for _, r in records if r.error_no == 0]
    assert ok, [r.costs[0] for _, r in records]
    assert tuner.best_flops > 0

    a = np.random.default_rng(3).uniform(-1, 1, DATA).astype("float32")
    w = np.random.default_rng(4).uniform(-1, 1, WEIGHT).astype("float32")
    data = te.placeholder(DATA, name="data")
    weight = te.placeholder(WEIGHT, name="weight")
    autotvm.task.dispatcher.clear_fallback_cache()
    with autotvm.apply_history_best(str(log)), Target(TARGET):
        out = cuda.conv2d_nchw(data, weight, 1, 1, 1)
        s = cuda.schedule_conv2d_nchw([out])
    # a fallback here would mean the record was not found
    assert not autotvm.task.dispatcher.FALLBACK.fallback_workloads
    f = tvm.build(s, [data, weight, out], target=TARGET)
    dev = tvm.opencl(0)
    o = tvm.nd.empty(tuple(int(d) for d in out.shape), "float32", dev)
    f(tvm.nd.array(a, dev), tvm.nd.array(w, dev), o)
    np.testing.assert_allclose(o.numpy(), testing.conv2d_nchw_python(a, w, 1, 1),
                               atol=1e-4, rtol=1e-4)


def test_features_of_a_gpu_schedule():
    """Thread-bound loops are loop levels with their extents and blockIdx/threadIdx/vthread
    flags; shared/local stages are flagged by scope; different configs differ."""
    task = _conv_task()
    cfg = _config(task, tile_f=[-1, 2, 4, 2], tile_y=[-1, 1, 3, 1], tile_x=[-1, 1, 9, 1],
                  tile_rc=[-1, 4])
    s, args = task.instantiate(cfg)
    levels = feature.get_itervar_feature(s, args)
    kinds = {k: [lv["extent"] for lv in levels if lv[k]] for k in
             ("blockIdx", "threadIdx", "vthread")}
    assert 9.0 in kinds["threadIdx"] and 4.0 in kinds["threadIdx"]  # tile_x, tile_f threads
    assert 2.0 in kinds["vthread"]
    gpu = feature.get_gpu_feature(s, args)  # the launch shape, whatever the loop depth
    assert gpu["threadIdx.x"] == 9 and gpu["threadIdx.y"] == 3 and gpu["threadIdx.z"] == 4
    assert gpu["blockIdx.y"] == 3 and gpu["blockIdx.z"] == 1 and gpu["vthread"] == 2
    assert gpu["shared_bytes"] > 0 and gpu["local_bytes"] > 0
    bufs = {b["name"]: (b["shared"], b["local"]) for lv in levels for b in lv["buffers"]}
    assert any(v == (1.0, 0.0) for k, v in bufs.items() if "shared" in k), bufs
    assert any(v == (0.0, 1.0) for k, v in bufs.items() if "local" in k), bufs
    v1 = feature.get_itervar_feature_flatten(s, args)
    s2, args2 = task.instantiate(_config(task, tile_x=[-1, 1, 3, 3]))
    v2 = feature.get_itervar_feature_flatten(s2, args2)
    assert v1.shape == v2.shape == (feature.itervar_feature_length(),)
    assert not np.array_equal(v1, v2)


def test_relay_extracts_and_applies_gpu_templates(tmp_path):
    """extract_from_program(target="opencl") lists the GPU templates of a small net (conv2d and
    its Winograd task, depthwise conv2d, dense); a record for the conv2d task is applied by
    relay.build under apply_history_best (no fallback for it; the unmeasured Winograd loses to
    it), and the model's output is right."""
    from tvmpy import relay
    from tvmpy.autotvm.measure import MeasureResult
    from tvmpy.contrib import graph_executor

    x = relay.var("x", shape=(1, 6, 9, 9))
    w1 = relay.var("w1", shape=(12, 6, 3, 3))
    w2 = relay.var("w2", shape=(12, 1, 3, 3))
    w3 = relay.var("w3", shape=(10, 12 * 5 * 5))
    y = relay.nn.relu(relay.nn.conv2d(x, w1, padding=(1, 1), kernel_size=(3, 3), channels=12))
    y = relay.nn.conv2d(y, w2, strides=(2, 2), padding=(1, 1), kernel_size=(3, 3), channels=12,
                        groups=12)
    y = relay.nn.dense(relay.nn.batch_flatten(y), w3)
    mod = tvm.IRModule.from_expr(relay.Function([x, w1, w2, w3], y))
    rng = np.random.default_rng(7)
    params = {n: rng.uniform(-1, 1, s).astype("float32") for n, s in
              (("w1", (12, 6, 3, 3)), ("w2", (12, 1, 3, 3)), ("w3", (10, 300)))}
    tasks = autotvm.task.extract_from_program(mod, params, TARGET)
    names = sorted(t.name for t in tasks)
    # the 3x3 stride-1 conv: both algorithms (direct and Winograd) are tasks
    assert names == ["conv2d_nchw.cuda", "conv2d_nchw_winograd.cuda", "dense.cuda",
                     "depthwise_conv2d_nchw.cuda"], names
    conv = next(t for t in tasks if t.name == "conv2d_nchw.cuda")
    cfg = _config(conv, tile_f=[-1, 2, 3, 2], tile_y=[-1, 1, 9, 1], tile_x=[-1, 1, 3, 3],
                  tile_rc=[-1, 3])
    log = tmp_path / "relay.log"
    log.write_text(autotvm.record.encode(MeasureInput(conv.target, conv, cfg),
                                         MeasureResult((1e-3,), 0, 1.0, 0.0)) + "\n")
    ctx = autotvm.apply_history_best(str(log))
    hits = []
    query = ctx._query_inside

    def spy(target, workload):
        cfg = query(target, workload)
        hits.append((str(target).split()[0], workload[0], cfg is not None))
        return cfg

    ctx._query_inside = spy
    with ctx, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with tvm.transform.PassContext(opt_level=3):
            lib = relay.build(mod, target=TARGET, params=params)
    assert ("opencl", "conv2d_nchw.cuda", True) in hits, hits  # the record applied
    assert ("opencl", "dense.cuda", False) in hits, hits  # the others fell back
    g = graph_executor.GraphModule(lib["default"](tvm.opencl(0)))
    a = rng.uniform(-1, 1, (1, 6, 9, 9)).astype("float32")
    g.set_input("x", a)
    g.run()
    h = np.maximum(testing.conv2d_nchw_python(a, params["w1"], 1, 1), 0)
    h = testing.depthwise_conv2d_nchw_python(h, params["w2"].reshape(12, 1, 3, 3), 2, 1)
    want = h.reshape(1, -1) @ params["w3"].T
    np.testing.assert_allclose(g.get_output(0).numpy(), want, atol=1e-4, rtol=1e-4)


def test_rpc_measure_runs_an_opencl_library_on_the_device(tmp_path):
    """The device server's runtime.measure (what RPCRunner calls) runs a GPU library on the
    server's OpenCL device: timings, and outputs equal numpy."""
    from tvmpy import rpc

    task = _conv_task()
    s, args = task.instantiate(_config(task, tile_x=[-1, 1, 9, 1], tile_rc=[-1, 2]))
    lib = tvm.build(s, args, target=TARGET)
    path = str(tmp_path / "conv.so")
    lib.export_library(path)
    specs = [[list(DATA), "float32"], [list(WEIGHT), "float32"], [[1, 16, 9, 9], "float32"]]
    with rpc.LocalSession() as sess:
        sess.upload(path)
        res = sess.get_function("runtime.measure")("conv.so", lib.entry_name, specs, 2, 2, 0,
                                                   0, "", 3, True)
    assert len(res["costs"]) == 2 and all(c > 0 for c in res["costs"])
    a, w, out = res["args"]
    np.testing.assert_allclose(out, testing.conv2d_nchw_python(a, w, 1, 1), atol=1e-4,
                               rtol=1e-4)
