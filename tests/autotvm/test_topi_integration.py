"""Tunable topi operators: register_topi_compute/schedule, workloads in op attrs, dispatch of
both halves, tasks of an operator, task extraction."""

from __future__ import annotations

import time

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import autotvm, relay, te
from tvmpy.autotvm.measure.measure import MeasureInput, MeasureResult
from tvmpy.autotvm.task import TaskExtractEnv, dispatcher, get_workload

RNG = np.random.default_rng(3)
SEEN: list = []


@autotvm.register_topi_compute("test/dense.x86")
def dense(cfg, data, weight):
    n, k = data.shape
    m = weight.shape[0]
    cfg.define_split("tile_y", n, num_outputs=2)
    cfg.define_split("tile_x", m, num_outputs=3)
    cfg.define_knob("unroll_k", [0, 1])
    r = te.reduce_axis((0, k), name="r")
    return te.compute((n, m), lambda i, j: te.sum(data[i, r] * weight[j, r], axis=r),
                      name="dense", tag="dense")


@autotvm.register_topi_schedule("test/dense.x86")
def schedule_dense(cfg, outs):
    SEEN.append(cfg)
    out = outs[0]
    s = te.create_schedule(out.op)
    y, x = s[out].op.axis
    (r,) = s[out].op.reduce_axis
    yo, yi = cfg["tile_y"].apply(s, out, y)
    xo, xm, xi = cfg["tile_x"].apply(s, out, x)
    s[out].reorder(yo, xo, xm, yi, r, xi)
    if cfg["unroll_k"].val:
        s[out].unroll(yi)
    return s


def _check(s, data, weight, out):
    n, k = (int(d) for d in data.shape)
    m = int(weight.shape[0])
    f = tvm.build(s, [data, weight, out], "llvm")
    a = RNG.standard_normal((n, k)).astype("float32")
    w = RNG.standard_normal((m, k)).astype("float32")
    c = tvm.nd.array(np.zeros((n, m), "float32"))
    f(tvm.nd.array(a), tvm.nd.array(w), c)
    np.testing.assert_allclose(c.numpy(), a @ w.T, rtol=1e-4, atol=1e-4)


def test_compute_records_workload_and_schedule_dispatches(caplog):
    data = te.placeholder((10, 6), name="data")
    weight = te.placeholder((12, 6), name="weight")
    dispatcher.clear_fallback_cache()
    with tvm.target.Target("llvm"):
        out = dense(data, weight)
        wkl = ("test/dense.x86", ("TENSOR", (10, 6), "float32"), ("TENSOR", (12, 6), "float32"))
        assert out.op.attrs["workload"] == wkl == get_workload([out])
        SEEN.clear()
        s = schedule_dense([out])
    assert SEEN[-1].is_fallback and SEEN[-1]["tile_x"].size[-1] > 1
    assert [k[1][0] for k in dispatcher.FALLBACK.fallback_workloads] == ["test/dense.x86"]
    _check(s, data, weight, out)
    dispatcher.clear_fallback_cache()
    with pytest.raises(RuntimeError, match="no workload"):
        schedule_dense([te.compute((3,), lambda i: data[i, 0] + 1.0)])


def test_operator_task_tunes_and_history_applies_to_both_halves():
    data = te.placeholder((16, 8), name="data")
    weight = te.placeholder((20, 8), name="weight")
    task = autotvm.task.create("test/dense.x86", args=(data, weight), target="llvm")
    assert task.config_space.dims() == [5, 18, 2]  # divisors of 16; ordered pairs into 20; knob
    assert task.flop == 2 * 16 * 20 * 8
    for idx in (0, 77, len(task.config_space) - 1):
        s, args = task.instantiate(task.config_space.get(idx))
        assert [tuple(int(d) for d in a.shape) for a in args] == [(16, 8), (20, 8), (16, 20)]
        _check(s, *args)
    best = task.config_space.get(123)
    recs = [(MeasureInput(task.target, task, task.config_space.get(i)),
             MeasureResult((c,), 0, 0.1, time.time())) for i, c in ((5, 2e-3), (123, 1e-3))]
    with autotvm.apply_history_best(recs), tvm.target.Target("llvm"):
        SEEN.clear()
        out = dense(data, weight)
        s = schedule_dense([out])
    assert SEEN[-1] == best
    _check(s, data, weight, out)


def test_task_extract_env_collects_unique_tasks():
    a = te.placeholder((4, 3), name="a")
    w1 = te.placeholder((5, 3), name="w1")
    w2 = te.placeholder((7, 3), name="w2")
    autotvm.GLOBAL_SCOPE.silent = True
    try:
        with TaskExtractEnv() as env:
            dense(a, w1)
            dense(a, w2)
            dense(a, w1)
        with TaskExtractEnv(["other"]) as none:
            dense(a, w1)
    finally:
        autotvm.GLOBAL_SCOPE.silent = False
    assert [t[1][1][1] for t in env.get_tasks()] == [(5, 3), (7, 3)]
    assert none.get_tasks() == []
    assert TaskExtractEnv.current is None


def test_extract_from_program_without_templates_is_empty():
    x = relay.var("x", shape=(2, 8), dtype="float32")
    y = relay.nn.relu(x)
    mod = tvm.IRModule.from_expr(relay.Function([x], y))
    assert autotvm.task.extract_from_program(mod, params={}, target="llvm") == []
    assert autotvm.task.extract_from_program(mod["main"], target="llvm", params=None) == []
