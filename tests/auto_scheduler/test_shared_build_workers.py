"""One auto-scheduler builder serves every task (issue 28 point 5): its workers are not restarted
when the task changes (autotvm's LocalBuilder restarts them for each new task object), and each
candidate is still built from its own task's workload: the libraries of interleaved tasks, two of
them the same function at other sizes, give numpy's results."""

from __future__ import annotations

import as_workloads as W
import numpy as np

import tvmpy as tvm
from tvmpy import auto_scheduler
from tvmpy.auto_scheduler.measure import ProgramMeasurer, _MeasureTask
from tvmpy.autotvm.measure import measure as atm
from tvmpy.runtime.module import load_module


def _pids(builder):
    return sorted(w.process.pid for w in builder._workers)


def _check_library(task, path, rng):
    args = task.compute_dag.apply_steps_from_state(task.compute_dag.init_state())[1]
    ins = [rng.uniform(-1, 1, [int(d) for d in t.shape]).astype("float32") for t in args[:-1]]
    out = tvm.nd.array(np.zeros([int(d) for d in args[-1].shape], "float32"))
    mod = load_module(path)
    mod[mod.entry_name](*[tvm.nd.array(x) for x in ins], out)
    ref = W.reference(task, [x.astype("float64") for x in ins])
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-4, atol=1e-4)


def test_one_builder_serves_interleaved_tasks_without_restarts():
    # the same workload function at two sizes (two keys, one name) and another compute
    tasks = [W.make_task(W.matmul, (17, 9, 23)), W.make_task(W.softmax, (7, 33)),
             W.make_task(W.matmul, (8, 5, 3))]
    mtasks = [_MeasureTask(t) for t in tasks]
    states = [auto_scheduler.sample_initial_population(t, 2, seed=k) for k, t in enumerate(tasks)]
    builder = auto_scheduler.LocalBuilder(timeout=300, n_parallel=2)
    rng = np.random.default_rng(0)
    pids = None
    try:
        for _rnd in range(2):
            for t, mt, sts in zip(tasks, mtasks, states):
                inputs = [atm.MeasureInput("llvm", mt, [s.to_record() for s in st.transform_steps])
                          for st in sts]
                res = builder.build(inputs)
                assert [r.error_no for r in res] == [0, 0], [r.error for r in res]
                for r in res:
                    _check_library(t, r.filename, rng)
                pids = pids or _pids(builder)
                assert _pids(builder) == pids, "a task switch restarted the build workers"
    finally:
        builder.close()
    assert len(pids) == 2


def test_measurers_sharing_a_builder_measure_each_task_right():
    tasks = [W.make_task(W.matmul, (17, 9, 23)), W.make_task(W.elementwise, (13, 7))]
    builder = auto_scheduler.LocalBuilder(timeout=300, n_parallel=2)
    ms = [ProgramMeasurer(t, builder, auto_scheduler.LocalRunner(timeout=60),
                          close_builder=False) for t in tasks]
    try:
        pids = None
        for rnd in range(2):
            for t, m in zip(tasks, ms):
                states = auto_scheduler.sample_initial_population(t, 2, seed=rnd)
                res = m.measure(None, states)
                assert [r.error_no for r in res] == [0, 0], [r.error_msg for r in res]
                pids = pids or _pids(builder)
                assert _pids(builder) == pids
        for m in ms:
            m.close()  # its runner only: the builder is shared
        assert _pids(builder) == pids
    finally:
        builder.close()
    assert builder._workers == []


def test_a_name_registered_again_builds_its_new_function():
    """Two tasks with one workload key (the name registered again with override=True, as relay
    tasks are) on one builder: each candidate is built from its own task's function."""
    from tvmpy import te

    def plus_one(n):
        a = te.placeholder((n,), name="A")
        return [a, te.compute((n,), lambda i: a[i] + 1.0, name="C")]

    def times_two(n):
        a = te.placeholder((n,), name="A")
        return [a, te.compute((n,), lambda i: a[i] * 2.0, name="C")]

    auto_scheduler.register_workload("as_build_reregistered", plus_one, override=True)
    t1 = auto_scheduler.SearchTask(func="as_build_reregistered", args=(37,), target="llvm")
    m1 = _MeasureTask(t1)
    auto_scheduler.register_workload("as_build_reregistered", times_two, override=True)
    t2 = auto_scheduler.SearchTask(func="as_build_reregistered", args=(37,), target="llvm")
    m2 = _MeasureTask(t2)
    assert t1.workload_key == t2.workload_key
    builder = auto_scheduler.LocalBuilder(timeout=300, n_parallel=1)
    x = np.random.default_rng(0).uniform(-1, 1, 37).astype("float32")
    try:
        for mt, want in ((m1, x + 1), (m2, x * 2), (m1, x + 1)):
            (r,) = builder.build([atm.MeasureInput("llvm", mt, [])])
            assert r.error_no == 0, r.error
            out = tvm.nd.array(np.zeros(37, "float32"))
            mod = load_module(r.filename)
            mod[mod.entry_name](tvm.nd.array(x), out)
            np.testing.assert_allclose(out.numpy(), want, rtol=1e-6)
    finally:
        builder.close()
