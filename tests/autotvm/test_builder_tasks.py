"""LocalBuilder keeps its worker processes across tasks: a batch that interleaves many tasks
builds each candidate with its own task (checked against numpy), with no worker restarted; a
worker that dies is recorded for its candidate and replaced, and the replacement learns the
tasks again; a template re-registered under a known name gets a fresh worker."""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest

from tvmpy import autotvm, runtime, te
from tvmpy.autotvm.measure import LocalBuilder, MeasureErrorNo, MeasureInput
from tvmpy.autotvm.space import ConfigEntity
from tvmpy.autotvm.task import create, get_config, template

NAME = "test_builder_tasks/affine"


@template(NAME)
def affine(n: int, k: int, m: int, scale: float):
    """C = A @ B * scale + 1; knob ``mode`` "kill" kills the build worker."""
    a = te.placeholder((n, k), name="A")
    b = te.placeholder((k, m), name="B")
    r = te.reduce_axis((0, k), name="r")
    s_ = te.compute((n, m), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="S")
    c = te.compute((n, m), lambda i, j: s_[i, j] * scale + 1.0, name="C")
    s = te.create_schedule(c.op)
    cfg = get_config()
    cfg.define_knob("mode", ["normal", "kill"])
    if cfg["mode"].val == "kill" and isinstance(cfg, ConfigEntity):
        os.kill(os.getpid(), signal.SIGKILL)
    cfg.define_split("tile_j", s[s_].op.axis[1], num_outputs=2)
    cfg["tile_j"].apply(s, s_, s[s_].op.axis[1])
    return s, [a, b, c]


SHAPES = [(1, 3, 5, 2.0), (7, 11, 13, 0.5), (4, 1, 9, -1.0), (13, 6, 2, 3.0), (5, 17, 1, 1.5)]


@pytest.fixture(scope="module")
def tasks():
    return [create(NAME, s, "llvm") for s in SHAPES]


def _cfg(task, mode, nth=0):
    found = [task.config_space.get(i) for i in range(len(task.config_space))]
    found = [c for c in found if c["mode"].val == mode]
    return found[nth % len(found)]


def _check(res, shape, seed):
    """Run the built library on random inputs against numpy."""
    n, k, m, scale = shape
    assert res.error_no == 0, res
    assert [tuple(s) for s, _ in res.arg_info] == [(n, k), (k, m), (n, m)]
    rng = np.random.default_rng(seed)
    a = rng.uniform(-1, 1, (n, k)).astype("float32")
    b = rng.uniform(-1, 1, (k, m)).astype("float32")
    out = runtime.ndarray.array(np.zeros((n, m), "float32"))
    runtime.load_module(res.filename)(runtime.ndarray.array(a), runtime.ndarray.array(b), out)
    np.testing.assert_allclose(out.numpy(), a @ b * np.float32(scale) + 1, rtol=1e-5,
                               atol=1e-5)


def _pids(builder):
    return sorted(w.process.pid for w in builder._workers)


def test_interleaved_tasks_build_right_without_restarts(tasks):
    builder = LocalBuilder(timeout=60, n_parallel=2)
    try:
        order = [(t, j) for j in range(3) for t in range(len(tasks))]  # t0 t1 .. t4 t0 t1 ..
        inputs = [MeasureInput(tasks[t].target, tasks[t], _cfg(tasks[t], "normal", j))
                  for t, j in order]
        res = builder.build(inputs)
        pids = _pids(builder)
        assert len(pids) == 2
        for (t, _), r, seed in zip(order, res, range(len(res))):
            _check(r, SHAPES[t], seed)
        # one task at a time, as a tuner switching tasks does: the same workers serve them all
        for t in (3, 0, 4, 1):
            builder.set_task(tasks[t])
            (r,) = builder.build([MeasureInput(tasks[t].target, tasks[t],
                                               _cfg(tasks[t], "normal", 5))])
            _check(r, SHAPES[t], t)
        assert _pids(builder) == pids
    finally:
        builder.close()


def test_a_worker_crash_is_recorded_and_the_replacement_relearns_the_tasks(tasks):
    builder = LocalBuilder(timeout=60, n_parallel=1)
    try:
        plan = [(0, "normal"), (1, "normal"), (2, "kill"), (1, "normal"), (3, "normal"),
                (0, "normal")]
        inputs = [MeasureInput(tasks[t].target, tasks[t], _cfg(tasks[t], mode, i))
                  for i, (t, mode) in enumerate(plan)]
        res = builder.build(inputs)
        assert res[2].error_no == int(MeasureErrorNo.COMPILE_HOST)
        assert "crashed (signal 9" in res[2].error
        for i, (t, mode) in enumerate(plan):
            if mode == "normal":
                _check(res[i], SHAPES[t], i)
    finally:
        builder.close()


def test_a_redefined_template_gets_a_fresh_worker():
    name = "test_builder_tasks/redefined"

    def first(n):
        a = te.placeholder((n,), name="A")
        c = te.compute((n,), lambda i: a[i] + 1.0, name="C")
        get_config().define_knob("k", [0])
        return te.create_schedule(c.op), [a, c]

    def second(n):
        a = te.placeholder((n,), name="A")
        c = te.compute((n,), lambda i: a[i] * 3.0, name="C")
        get_config().define_knob("k", [0])
        return te.create_schedule(c.op), [a, c]

    builder = LocalBuilder(timeout=60, n_parallel=1)
    x = np.arange(7, dtype="float32")
    try:
        outs = []
        for fn in (first, second):
            autotvm.template(name, fn)
            task = create(name, (7,), "llvm")
            (r,) = builder.build([MeasureInput(task.target, task, task.config_space.get(0))])
            assert r.error_no == 0, r
            out = runtime.ndarray.array(np.zeros(7, "float32"))
            runtime.load_module(r.filename)(runtime.ndarray.array(x), out)
            outs.append(out.numpy())
        np.testing.assert_allclose(outs[0], x + 1)
        np.testing.assert_allclose(outs[1], x * 3)
    finally:
        builder.close()


def test_an_overridden_auto_scheduler_workload_gets_a_fresh_worker():
    """The auto-scheduler's tasks travel through this builder too; a worker that loaded one
    definition of a workload name must not build another definition's task with it."""
    from tvmpy import auto_scheduler
    from tvmpy.auto_scheduler.measure import _MeasureTask

    name = "test_builder_tasks_scaled"

    def first(n):
        a = te.placeholder((n,), name="A")
        return [a, te.compute((n,), lambda i: a[i] + 1.0, name="C")]

    def second(n):
        a = te.placeholder((n,), name="A")
        return [a, te.compute((n,), lambda i: a[i] * 3.0, name="C")]

    builder = LocalBuilder(timeout=60, n_parallel=1)
    x = np.arange(7, dtype="float32")
    try:
        outs = []
        for fn in (first, second, first):
            auto_scheduler.register_workload(name, fn, override=True)
            task = _MeasureTask(auto_scheduler.SearchTask(func=name, args=(7,), target="llvm"))
            (r,) = builder.build([MeasureInput("llvm", task, [])])
            assert r.error_no == 0, r
            out = runtime.ndarray.array(np.zeros(7, "float32"))
            runtime.load_module(r.filename)(runtime.ndarray.array(x), out)
            outs.append(out.numpy())
        np.testing.assert_allclose(outs[0], x + 1)
        np.testing.assert_allclose(outs[1], x * 3)
        np.testing.assert_allclose(outs[2], x + 1)
    finally:
        builder.close()
