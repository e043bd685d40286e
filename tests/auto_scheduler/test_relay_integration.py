"""Relay integration: ``extract_tasks`` gives one task per distinct fused subgraph (every kind:
convolution + batch norm + relu, depthwise, pooling, dense, softmax, layer norm, batch matmul),
weighted by its occurrences; a model built under ``ApplyHistoryBest(log)`` with
``relay.backend.use_auto_scheduler`` uses the logged schedules and computes what the untuned
build computes."""

from __future__ import annotations

import json

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import auto_scheduler, relay
from tvmpy.auto_scheduler import relay_integration
from tvmpy.contrib import graph_executor


def _params(f, rng):
    out = {}
    for p in f.params[1:]:
        shp = [int(d) for d in p.type_annotation.shape]
        out[p.name_hint] = tvm.nd.array(rng.uniform(0.5, 1.0, shp).astype("float32"))
    return out


def small_cnn():
    x = relay.var("x", shape=(1, 3, 12, 12))
    y = relay.nn.conv2d(x, relay.var("w1", shape=(8, 3, 3, 3)), padding=(1, 1))
    bn = [relay.var(n, shape=(8,)) for n in ("g", "b", "m", "v")]
    y = relay.nn.relu(relay.nn.batch_norm(y, *bn)[0])
    y = relay.nn.relu(relay.nn.conv2d(y, relay.var("wd", shape=(8, 1, 3, 3)), padding=(1, 1),
                                      groups=8))
    y = relay.reshape(relay.nn.global_avg_pool2d(y), (1, 8))
    y = relay.nn.softmax(relay.nn.dense(y, relay.var("wf", shape=(10, 8))))
    f = relay.Function(relay.analysis.free_vars(y), y)
    return tvm.IRModule.from_expr(f), _params(f, np.random.default_rng(0))


def small_transformer(seq=8, d=16):
    x = relay.var("x", shape=(seq, d))

    def dense(h, name, n_out):
        return relay.nn.dense(h, relay.var(name, shape=(n_out, d if name != "w2" else 2 * d)))

    def ln(h, k):
        return relay.nn.layer_norm(h, relay.var(f"ln{k}_g", shape=(d,)),
                                   relay.var(f"ln{k}_b", shape=(d,)))
    q, k, v = (dense(x, n, d) for n in ("wq", "wk", "wv"))
    s = relay.nn.softmax(relay.nn.batch_matmul(relay.reshape(q, (1, seq, d)),
                                               relay.reshape(k, (1, seq, d))))
    a = relay.nn.batch_matmul(s, relay.transpose(relay.reshape(v, (1, seq, d)), (0, 2, 1)))
    h = ln(x + relay.reshape(a, (seq, d)), 1)
    f1 = relay.nn.relu(dense(h, "w1", 2 * d))
    y = ln(h + dense(f1, "w2", d), 2)
    f = relay.Function(relay.analysis.free_vars(y), y)
    return tvm.IRModule.from_expr(f), _params(f, np.random.default_rng(1))


def _ops(task):
    return [op.name for op in task.compute_dag.ops]


def test_extract_tasks_small_cnn():
    mod, params = small_cnn()
    tasks, weights = auto_scheduler.extract_tasks(mod["main"], params, "llvm")
    descs = [t.desc for t in tasks]
    assert len(set(t.workload_key for t in tasks)) == len(tasks)
    assert weights == [1] * len(tasks)
    joined = " ".join(descs + [" ".join(_ops(t)) for t in tasks])
    for kind in ("conv2d", "depthwise", "global_avg_pool2d", "dense", "softmax"):
        assert kind in joined, (kind, descs)
    conv = next(t for t in tasks if "conv2d" in t.desc and "depthwise" not in " ".join(_ops(t)))
    assert "relu" in conv.desc  # batch norm folded into the conv's epilogue, relu fused
    # the simple (reduction-free) subgraphs only on request
    all_tasks, _ = auto_scheduler.extract_tasks(mod["main"], params, "llvm", include_simple_tasks=True)
    assert len(all_tasks) > len(tasks)
    for t in all_tasks:
        json.loads(t.workload_key)  # a record's key


def test_extract_tasks_transformer_block_weights():
    mod, params = small_transformer()
    tasks, weights = auto_scheduler.extract_tasks(mod["main"], params, "llvm")
    ops = [" ".join(_ops(t)) for t in tasks]
    joined = " ".join(ops)
    for kind in ("dense", "batch_matmul", "softmax"):
        assert kind in joined, ops
    assert any("mean" in o or "var" in o or "layer_norm" in o or "sum" in o for o in ops), ops
    # q, k and v are the same dense subgraph: one task, weight >= 3
    by_desc = dict(zip([t.desc for t in tasks], weights))
    assert max(by_desc.values()) >= 3, by_desc
    assert sum(weights) >= len(tasks)


def test_extract_tasks_weights_count_occurrences():
    """The same subgraph (shape and fusion) with different weights is one task whose weight is
    its number of occurrences: dense+relu 16->16 three times, 24->24 twice, 16->24 once, and
    the head (a dense without relu) once."""
    x = relay.var("x", shape=(2, 16))
    h = x
    for i, (n_in, n_out) in enumerate([(16, 16)] * 3 + [(16, 24)] + [(24, 24)] * 2):
        h = relay.nn.relu(relay.nn.dense(h, relay.var(f"w{i}", shape=(n_out, n_in))))
    y = relay.nn.dense(h, relay.var("head", shape=(3, 24)))
    f = relay.Function(relay.analysis.free_vars(y), y)
    mod, params = tvm.IRModule.from_expr(f), _params(f, np.random.default_rng(2))
    tasks, weights = auto_scheduler.extract_tasks(mod["main"], params, "llvm")
    assert sorted(weights) == [1, 1, 2, 3], [(t.desc, w) for t, w in zip(tasks, weights)]
    assert len({t.workload_key for t in tasks}) == 4


def _run(lib, x):
    m = graph_executor.GraphModule(lib["default"](tvm.cpu()))
    m.set_input("x", x)
    m.run()
    return m.get_output(0).numpy()


@pytest.mark.parametrize("model", [small_cnn, small_transformer])
def test_apply_history_best_build_equals_untuned(model, tmp_path, monkeypatch):
    mod, params = model()
    tasks, weights = auto_scheduler.extract_tasks(mod["main"], params, "llvm")
    log = str(tmp_path / "log.json")
    opts = auto_scheduler.TuningOptions(
        num_measure_trials=2 * len(tasks), num_measures_per_round=2, verbose=0,
        builder=auto_scheduler.LocalBuilder(timeout=120, n_parallel=2),
        runner=auto_scheduler.LocalRunner(number=1, repeat=1),
        measure_callbacks=[auto_scheduler.RecordToFile(log)])
    auto_scheduler.TaskScheduler(tasks, weights, callbacks=[]).tune(
        opts, search_policy="sketch.random", seed=0)
    lines = open(log).read().splitlines()
    recs = [json.loads(x) for x in lines]
    assert {r["i"][0][0] for r in recs if "i" in r and r["r"][1] == 0} == {t.workload_key for t in tasks}
    # the task scheduler timed each relay task's default schedule into the log: once before
    # the search, once more against the best record after it
    defaults = [r["default"] for r in recs if "default" in r]
    assert sorted(d[0][0] for d in defaults) == sorted(2 * [t.workload_key for t in tasks])
    assert all(d[1] and min(d[1]) > 0 for d in defaults)
    # the records apply (a log without the default lines: each task takes its best record)
    log_records = str(tmp_path / "records.json")
    with open(log_records, "w") as f:
        f.writelines(x + "\n" for x in lines if '"default"' not in x)

    shape = [int(d) for d in mod["main"].params[0].type_annotation.shape]
    x = np.random.default_rng(2).uniform(-1, 1, shape).astype("float32")
    with tvm.transform.PassContext(opt_level=3):
        ref = _run(relay.build(mod, "llvm", params=params), x)

    applied = []
    real = relay_integration.schedule_fused

    def spy(tensors, key, target):
        sch = real(tensors, key, target)
        applied.append((key, sch is not None))
        return sch
    monkeypatch.setattr(relay_integration, "schedule_fused", spy)
    with auto_scheduler.ApplyHistoryBest(log_records):
        with tvm.transform.PassContext(opt_level=3,
                                       config={"relay.backend.use_auto_scheduler": True}):
            lib = relay.build(mod, "llvm", params=params)
    got = _run(lib, x)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)
    hit = {k for k, ok in applied if ok}
    assert hit == {t.workload_key for t in tasks}, (hit, applied)
    # without a record: the default schedule (no error)
    applied.clear()
    with auto_scheduler.ApplyHistoryBest([]):
        with tvm.transform.PassContext(opt_level=3,
                                       config={"relay.backend.use_auto_scheduler": True}):
            lib = relay.build(mod, "llvm", params=params)
    np.testing.assert_allclose(_run(lib, x), ref, rtol=1e-4, atol=1e-5)
    assert applied and not any(ok for _, ok in applied)


def test_default_schedule_stays_when_the_search_did_not_beat_it(tmp_path):
    """The log's "default" line (the TOPI schedule timed in the same tuning run): a task whose
    best record is slower keeps its default schedule, a faster record applies; the record
    readers skip the line."""
    from tvmpy.auto_scheduler.measure_record import dump_default_record
    from tvmpy.target.target import cpu_of

    mod, params = small_cnn()
    tasks, _ = auto_scheduler.extract_tasks(mod["main"], params, "llvm")
    task = tasks[0]
    state = auto_scheduler.sample_initial_population(task, 1, seed=0)[0]
    inp = auto_scheduler.MeasureInput(task, state)
    res = auto_scheduler.MeasureResult((2e-3,), 0, "", 0.0, 0.0)
    # the record (2 ms) applies only where the default is >= min_speedup (1.05) times slower
    for default, applied, min_speedup in ((1e-3, False, 1.05), (3e-3, True, 1.05),
                                          (2.06e-3, False, 1.05), (2.12e-3, True, 1.05),
                                          (2.06e-3, True, 1.0), (2e-3, False, 1.0)):
        log = tmp_path / f"log_{default}.json"
        auto_scheduler.save_records(str(log), [inp], [res])
        with open(log, "a") as f:
            f.write(dump_default_record(task.workload_key, task.target, [default, default]) + "\n")
        ctx = auto_scheduler.ApplyHistoryBest(str(log), min_speedup=min_speedup)
        assert ctx.default_cost("llvm", task.workload_key, cpu_of("llvm")) == default
        assert (ctx.query("llvm", task.workload_key) is not None) is applied, (default, min_speedup)
    with pytest.raises(ValueError, match="min_speedup"):
        auto_scheduler.ApplyHistoryBest(str(log), min_speedup=0.9)
        assert len(list(auto_scheduler.load_records(str(log)))) == 1
    # measure_default_schedules: once per task, then read back from the log
    log = str(tmp_path / "defaults.json")
    got = relay_integration.measure_default_schedules(tasks, log, number=1, repeat=1,
                                                      min_repeat_ms=0)
    assert sorted(got) == list(range(len(tasks))) and all(c > 0 for c in got.values())
    n = len(open(log).read().splitlines())
    assert relay_integration.measure_default_schedules(tasks, log) == got
    assert len(open(log).read().splitlines()) == n == len(tasks)
    # re-timed against the best record after the search: a second line, on the scale of the
    # logged best, and the last line is the one that counts
    auto_scheduler.save_records(log, [inp], [res])
    ratios = relay_integration.recheck_default_schedules(tasks, log, rounds=1, number=1,
                                                         min_repeat_ms=0)
    assert list(ratios) == [0] and ratios[0] > 0
    last = open(log).read().splitlines()[-1]
    assert json.loads(last)["default"][1] == pytest.approx([2e-3 * ratios[0]])
    ctx = auto_scheduler.ApplyHistoryBest(log)
    assert ctx.default_cost("llvm", task.workload_key, cpu_of("llvm")) == pytest.approx(
        2e-3 * ratios[0])
    # a user's workload has no default schedule: nothing measured
    from as_workloads import make_task, matmul

    assert relay_integration.measure_default_schedules([make_task(matmul, (4, 4, 4))], log) == {}


def test_apply_history_best_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no log file"):
        auto_scheduler.ApplyHistoryBest(str(tmp_path / "missing.json"))
    bad = tmp_path / "bad.json"
    bad.write_text("not json\n")
    assert auto_scheduler.ApplyHistoryBest(str(bad)).best == {}


def _run_schedule(task, state, inputs):
    sch, args = task.compute_dag.apply_steps_from_state(state)
    f = tvm.build(sch, args, "llvm")
    out = tvm.nd.array(np.zeros([int(d) for d in args[-1].shape], "float32"))
    f(*[tvm.nd.array(x) for x in inputs], out)
    return out.numpy()


def test_batch_one_epilogue_fuses_into_the_conv_tile():
    """relay's epilogue reads a batch-1 conv as ``conv[0, c, y, x, cb]``: still elementwise,
    so the conv is tiled with its consumer (Ansor's multi-level tiling with fusion, no extra
    cache stage); the fused schedules compute what the default schedule computes."""
    from tvmpy.auto_scheduler import transform_step as ts

    mod, params = small_cnn()
    tasks, _ = auto_scheduler.extract_tasks(mod["main"], params, "llvm")
    conv = tasks[0]
    assert "conv2d" in conv.desc and "add" in conv.desc
    sketches = auto_scheduler.generate_sketches(conv)
    fused = [s for s in sketches if any(isinstance(x, ts.FollowSplitStep) for x in s.transform_steps)]
    assert fused and not any(isinstance(x, ts.CacheWriteStep) for s in fused for x in s.transform_steps)
    rng = np.random.default_rng(0)
    args = conv.compute_dag.tensors
    inputs = [rng.uniform(-1, 1, [int(d) for d in t.shape]).astype("float32") for t in args[:-1]]
    want = _run_schedule(conv, conv.compute_dag.init_state(), inputs)
    for s in auto_scheduler.sample_initial_population(conv, 3, seed=4, sketches=fused):
        np.testing.assert_allclose(_run_schedule(conv, s, inputs), want, rtol=1e-4, atol=1e-4)
