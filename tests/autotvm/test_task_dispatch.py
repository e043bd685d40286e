"""Templates, tasks (space collection, FLOP counting, instantiate), workloads and dispatch
contexts (ApplyConfig, ApplyHistoryBest, the fallback warning)."""

from __future__ import annotations

import json
import logging
import pickle
import time
import warnings

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import autotvm, te
from tvmpy.autotvm.measure.measure import MeasureInput, MeasureResult
from tvmpy.autotvm.task import dispatcher
from tvmpy.autotvm.task.task import TemplateNotFoundError, compute_flop

RNG = np.random.default_rng(11)
SEEN: list = []  # configs the templates ran with


@autotvm.template("test/matmul")
def matmul(N, L, M, dtype):
    """The issue's example template."""
    A = te.placeholder((N, L), name="A", dtype=dtype)
    B = te.placeholder((L, M), name="B", dtype=dtype)
    k = te.reduce_axis((0, L), name="k")
    C = te.compute((N, M), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    y, x = s[C].op.axis
    cfg = autotvm.get_config()
    SEEN.append(cfg)
    cfg.define_split("tile_y", y, num_outputs=2)
    cfg.define_split("tile_x", x, num_outputs=2)
    yo, yi = cfg["tile_y"].apply(s, C, y)
    xo, xi = cfg["tile_x"].apply(s, C, x)
    s[C].reorder(yo, xo, k, yi, xi)
    return s, [A, B, C]


@autotvm.template("test/matmul_knobs")
def matmul_knobs(N, L, M):
    """Splits with tails, a reorder, an annotation and a knob."""
    A = te.placeholder((N, L), name="A")
    B = te.placeholder((L, M), name="B")
    k = te.reduce_axis((0, L), name="k")
    C = te.compute((N, M), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    y, x = s[C].op.axis
    cfg = autotvm.get_config()
    cfg.define_split("tile_y", y, num_outputs=3, policy="verbose")
    cfg.define_split("tile_x", x, num_outputs=2, policy="power2")
    cfg.define_split("tile_k", k, num_outputs=2)
    yo, ym, yi = cfg["tile_y"].apply(s, C, y)
    xo, xi = cfg["tile_x"].apply(s, C, x)
    ko, ki = cfg["tile_k"].apply(s, C, k)
    cfg.define_reorder("re", [ym, ko, ki], policy="all")
    cfg.define_annotate("ann", [yi, xi], policy="try_unroll_vec")
    cfg.define_knob("par", [0, 1])
    s[C].reorder(yo, xo, *[[ym, ko, ki][i] for i in cfg["re"].perm], yi, xi)
    cfg["ann"].apply(s, C, [yi, xi])
    if cfg["par"].val:
        s[C].parallel(yo)
    return s, [A, B, C]


@autotvm.template("test/tensor_arg")
def tensor_arg(data, scale):
    """A template taking a tensor: workloads serialize it as ("TENSOR", shape, dtype)."""
    out = te.compute(data.shape, lambda i, j: data[i, j] * scale + 1.0, name="out")
    s = te.create_schedule(out.op)
    cfg = autotvm.get_config()
    cfg.define_split("t", s[out].op.axis[1], num_outputs=2)
    cfg["t"].apply(s, out, s[out].op.axis[1])
    cfg.add_flop(123)
    return s, [data, out]


def _run(s, args, shapes):
    f = tvm.build(s, args, "llvm")
    ins = [RNG.standard_normal(sh).astype("float32") for sh in shapes[:-1]]
    out = tvm.nd.array(np.zeros(shapes[-1], "float32"))
    f(*[tvm.nd.array(a) for a in ins], out)
    return ins, out.numpy()


def test_issue_example_task_space_and_flop():
    task = autotvm.task.create("test/matmul", args=(1024, 1024, 1024, "float32"), target="llvm")
    assert len(task.config_space) == 11 * 11
    assert task.config_space.dims() == [11, 11]
    assert task.flop == 2 * 1024**3
    assert task.name == "test/matmul" and str(task.target.kind) == "llvm"
    assert task.workload == ("test/matmul", 1024, 1024, 1024, "float32")
    assert json.loads(json.dumps(task.workload)) == list(task.workload)
    assert hash(task.workload) == hash(autotvm.task.Task.from_workload(task.workload).workload)
    by_func = autotvm.task.create(matmul, args=(1024, 1024, 1024, "float32"), target="llvm")
    assert by_func.workload == task.workload and len(by_func.config_space) == 121


@pytest.mark.parametrize("seed", [0, 1])
def test_instantiate_random_configs_match_numpy(seed):
    n, l, m = 30, 21, 24
    task = autotvm.task.create("test/matmul_knobs", args=(n, l, m), target="llvm")
    space = task.config_space
    # tile_y: pairs (a, b) of {divisors of 30} | {pow2 <= 30} with a * b <= 30, counted by hand
    # per a: 11+9+8+6+6+5+3+3+2+1+1; tile_x: pow2 <= 24; tile_k: divisors of 21; re: 3!;
    # ann: 2 * 3; par: 2
    assert space.dims() == [55, 5, 4, 6, 6, 2]
    assert len(space) == int(np.prod(space.dims()))
    rng = np.random.default_rng(seed)
    for idx in rng.choice(len(space), size=3, replace=False):
        cfg = space.get(int(idx))
        s, args = task.instantiate(cfg)
        (a, b), c = _run(s, args, [(n, l), (l, m), (n, m)])
        np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_tensor_argument_workload_and_add_flop():
    data = te.placeholder((6, 20), name="data")
    task = autotvm.task.create("test/tensor_arg", args=(data, 2.5), target="llvm")
    assert task.args == (("TENSOR", (6, 20), "float32"), 2.5)
    assert task.flop == 123  # add_flop wins over counting
    assert len(task.config_space) == 6
    again = autotvm.task.Task.from_workload(json.loads(json.dumps(task.workload)))
    assert again.workload == task.workload
    cfg = again.config_space.get(3)
    s, args = again.instantiate(cfg)
    (x,), y = _run(s, args, [(6, 20), (6, 20)])
    np.testing.assert_allclose(y, x * 2.5 + 1.0, rtol=1e-5, atol=1e-6)  # fma


def test_compute_flop_counts_elementwise_and_reductions():
    A = te.placeholder((5, 7), name="A")
    B = te.compute((5, 7), lambda i, j: A[i, j] * 2.0 + A[i, j], name="B")            # 2 / elem
    C = te.compute((5, 7), lambda i, j: te.max(B[i, j], 0.0), name="C")               # 1 / elem
    k = te.reduce_axis((0, 7), name="k")
    D = te.compute((5,), lambda i: te.sum(C[i, k] * C[i, k], axis=k), name="D")       # 2 * 7
    E = te.compute((5,), lambda i: te.exp(D[i]).astype("float32"), name="E")          # 1
    s = te.create_schedule(E.op)
    assert compute_flop(s) == 35 * 2 + 35 + 5 * 14 + 5


def test_task_pickles_without_the_function():
    task = autotvm.task.create("test/matmul", args=(16, 8, 4, "float32"), target="llvm")
    back = pickle.loads(pickle.dumps(task))
    assert back.workload == task.workload and back.flop == task.flop
    assert len(back.config_space) == len(task.config_space)


def test_bad_inputs_raise():
    with pytest.raises(TypeError, match="args must be a tuple"):
        autotvm.task.create("test/matmul", args=4, target="llvm")
    with pytest.raises(TemplateNotFoundError, match="no autotvm template"):
        autotvm.task.create("test/missing", args=(1,), target="llvm")
    with pytest.raises(TypeError, match="serialize"):
        autotvm.task.create("test/matmul", args=(object(), 1, 1, "float32"), target="llvm")
    with pytest.raises(ValueError, match="unknown target"):
        autotvm.task.create("test/matmul", args=(4, 4, 4, "float32"), target="cuda9")
    with pytest.raises(TemplateNotFoundError):
        _ = autotvm.task.Task("test/never", (1,)).config_space

    @autotvm.template("test/bad_return")
    def bad():
        return 3

    with pytest.raises(TypeError, match="must return"):
        autotvm.task.create("test/bad_return", args=(), target="llvm")


# ---------------------------------------------------------------------------------------------
# dispatch
def _records(task, entries):
    """(MeasureInput, MeasureResult) pairs: entries are (config index, costs, error_no)."""
    out = []
    for idx, costs, err in entries:
        out.append((MeasureInput(task.target, task, task.config_space.get(idx)),
                    MeasureResult(tuple(costs), err, 0.5, time.time())))
    return out


def test_apply_history_best_picks_the_best_record(tmp_path):
    task = autotvm.task.create("test/matmul", args=(32, 16, 24, "float32"), target="llvm")
    other = autotvm.task.create("test/matmul", args=(8, 8, 8, "float32"), target="llvm")
    recs = _records(task, [(3, [2e-3, 2e-3], 0), (7, [1e-3, 1.2e-3], 0), (9, ["boom"], 4),
                           (11, [1.5e-3], 0), (12, [1e-4], 5)])  # error records never win
    recs += _records(other, [(1, [1e-9], 0)])
    ctask = autotvm.task.create("test/matmul", args=(32, 16, 24, "float32"), target="c")
    recs += _records(ctask, [(5, [1e-9], 0)])  # another target kind: not used for llvm

    for source in (recs, _save(tmp_path / "log.json", recs)):
        ctx = autotvm.apply_history_best(source)
        with ctx, tvm.target.Target("llvm"):
            SEEN.clear()
            s, args = matmul(32, 16, 24, "float32")
            assert SEEN[-1].index == 7
            (a, b), c = _run(s, args, [(32, 16), (16, 24), (32, 24)])
            np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
            matmul(8, 8, 8, "float32")
            assert SEEN[-1].index == 1
        with ctx, tvm.target.Target("c"):
            matmul(32, 16, 24, "float32")
            assert SEEN[-1].index == 5
    assert autotvm.DispatchContext.current is dispatcher.FALLBACK


def _save(path, recs):
    autotvm.record.save_to_file(recs, path, mode="w")
    return str(path)


def _notices(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "tvmpy.autotvm" and "no tuned config" in r.getMessage()]


def test_untuned_workload_falls_through_and_logs_one_line(caplog):
    caplog.set_level(logging.WARNING, logger="tvmpy.autotvm")
    dispatcher.clear_fallback_cache()
    task = autotvm.task.create("test/matmul", args=(32, 16, 24, "float32"), target="llvm")
    recs = _records(task, [(4, [1e-3], 0)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a log line, never a UserWarning
        with autotvm.apply_history_best(recs):
            SEEN.clear()
            matmul(32, 16, 24, "float32")
            assert SEEN[-1].index == 4 and not SEEN[-1].is_fallback
            for n in (40, 48, 56):
                s, args = matmul(n, 16, 24, "float32")
                assert SEEN[-1].is_fallback
                (a, b), c = _run(s, args, [(n, 16), (16, 24), (n, 24)])
                np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
            matmul(40, 16, 24, "float32")  # the same untuned workload again
            assert not _notices(caplog)  # reported together when the scope exits
    msgs = _notices(caplog)
    assert len(msgs) == 1 and "\n" not in msgs[0], msgs
    assert "3 workloads have no tuned config in this build" in msgs[0] and "llvm" in msgs[0]
    assert len(dispatcher.FALLBACK.fallback_workloads) == 3
    assert autotvm.task.fallback_summary().startswith("3 workload(s)")
    assert "test/matmul" in autotvm.task.fallback_summary()
    # fallback picks a vector-friendly innermost split, not [-1, 1]
    assert SEEN[-1]["tile_x"].size[-1] > 1
    # a second build of the same workloads gets its own line (they are counted once)
    caplog.clear()
    with autotvm.apply_history_best(recs):
        matmul(40, 16, 24, "float32")
    assert len(_notices(caplog)) == 1 and "no tuned config for workload" in _notices(caplog)[0]
    assert len(dispatcher.FALLBACK.fallback_workloads) == 3
    dispatcher.clear_fallback_cache()
    caplog.clear()
    autotvm.GLOBAL_SCOPE.silent = True
    try:
        matmul(41, 16, 24, "float32")
        with autotvm.apply_history_best([]):
            matmul(39, 16, 24, "float32")
    finally:
        autotvm.GLOBAL_SCOPE.silent = False
    assert not _notices(caplog)
    assert len(dispatcher.FALLBACK.fallback_workloads) == 2
    dispatcher.clear_fallback_cache()
    # outside any build scope the first fallback is logged at once, later ones counted
    matmul(42, 16, 24, "float32")
    assert len(_notices(caplog)) == 1 and "no tuned config for workload" in _notices(caplog)[0]
    matmul(43, 16, 24, "float32")
    assert len(_notices(caplog)) == 1
    assert len(dispatcher.FALLBACK.fallback_workloads) == 2
    dispatcher.clear_fallback_cache()


def test_relay_build_logs_one_summary_line(caplog):
    """An untuned model build: one line at its end naming the count, no UserWarning."""
    from tvmpy import relay

    caplog.set_level(logging.WARNING, logger="tvmpy.autotvm")
    dispatcher.clear_fallback_cache()
    x = relay.var("x", shape=(1, 8, 9, 9))
    w1 = relay.const(np.random.default_rng(0).standard_normal((16, 8, 3, 3)).astype("float32"))
    w2 = relay.const(np.random.default_rng(1).standard_normal((8, 16, 1, 1)).astype("float32"))
    y = relay.nn.relu(relay.nn.conv2d(x, w1, padding=(1, 1)))
    y = relay.nn.conv2d(y, w2)
    mod = tvm.IRModule.from_expr(relay.Function([x], relay.nn.dense(
        relay.reshape(y, (1, -1)), relay.const(np.ones((5, 8 * 81), "float32")))))
    for _ in range(2):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with tvm.transform.PassContext(opt_level=3):
                relay.build(mod, target="llvm")
    msgs = _notices(caplog)
    assert len(msgs) == 2, msgs  # one per build
    assert all("workloads have no tuned config in this build" in m for m in msgs)
    assert len(dispatcher.FALLBACK.fallback_workloads) >= 3
    caplog.clear()
    with tvm.transform.PassContext(opt_level=3):
        relay.vm.compile(mod, target="llvm")
    assert len(_notices(caplog)) == 1
    dispatcher.clear_fallback_cache()


def test_fallback_deferral_is_per_thread(caplog):
    """A thread inside a build scope neither holds nor swallows the fallback line of another
    thread building outside it; the shared cache counts both."""
    import threading

    caplog.set_level(logging.WARNING, logger="tvmpy.autotvm")
    dispatcher.clear_fallback_cache()
    inside, done = threading.Event(), threading.Event()

    def builder() -> None:
        with dispatcher.FALLBACK.build_scope():
            inside.set()
            done.wait(30)

    t = threading.Thread(target=builder)
    t.start()
    assert inside.wait(30)
    try:
        matmul(45, 16, 24, "float32")
        assert len(_notices(caplog)) == 1
    finally:
        done.set()
        t.join(30)
    assert dispatcher.FALLBACK._defer_depth == 0 and not dispatcher.FALLBACK._pending
    assert len(dispatcher.FALLBACK.fallback_workloads) == 1
    dispatcher.clear_fallback_cache()


def test_apply_config_and_get_config():
    task = autotvm.task.create("test/matmul", args=(12, 6, 10, "float32"), target="llvm")
    cfg = task.config_space.get(len(task.config_space) - 1)
    with autotvm.ApplyConfig(cfg):
        assert autotvm.get_config() is cfg
        SEEN.clear()
        matmul(12, 6, 10, "float32")
        assert SEEN[-1] is cfg
    with pytest.raises(TypeError, match="ApplyConfig"):
        autotvm.ApplyConfig("tile")
