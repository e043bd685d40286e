"""Tuning records name the thread count they were measured at (TVM's hardware-parameter array,
``num_cores``): a record searched at 1 thread is not applied to a build for 2 (ApplyHistoryBest)
nor resumed from by a search at 2 (TaskScheduler) without a warning; the default-schedule lines
are per thread count too; ``num_threads=`` / ``-num-cores`` / ``include_compatible=True`` pick
or allow other counts; records of older logs (no count) apply at any count."""

from __future__ import annotations

import json
import random
import warnings

import pytest
from as_workloads import make_task, matmul, row_sum

from tvmpy import auto_scheduler
from tvmpy.auto_scheduler import MeasureInput, MeasureResult, generate_sketches
from tvmpy.auto_scheduler.measure_record import dump_default_record, record_threads
from tvmpy.auto_scheduler.sketch_policy import annotate
from tvmpy.runtime.parallel_pool import num_threads


def _log(tmp_path, task, threads, n=3, seed=0, cost=1e-4, name=None):
    """A log of ``n`` records of ``task`` measured at ``threads`` (TVM_NUM_THREADS while they
    are written: the count a runner child of this process runs at); costs cost*(1..n)."""
    rng = random.Random(seed)
    sk = generate_sketches(task)
    states = [annotate(sk[k % len(sk)], rng, task.hardware_params) for k in range(n)]
    log = str(tmp_path / (name or f"log_{threads}_{seed}.json"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TVM_NUM_THREADS", str(threads))
        auto_scheduler.save_records(log, [MeasureInput(task, s) for s in states],
                                    [MeasureResult((cost * (k + 1),), 0, "", 0.1, 1.0)
                                     for k in range(n)])
    return log, [[s.to_record() for s in st.transform_steps] for st in states]


def _default_line(log, task, threads, cost):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TVM_NUM_THREADS", str(threads))
        line = dump_default_record(task.workload_key, task.target, [cost])
    with open(log, "a") as f:
        f.write(line + "\n")


def test_num_threads_follows_the_pools_rule(monkeypatch):
    monkeypatch.setenv("TVM_NUM_THREADS", "3")
    monkeypatch.setenv("OMP_NUM_THREADS", "5")
    assert num_threads() == 3
    monkeypatch.setenv("TVM_NUM_THREADS", " +2")  # as the pool's strtol
    assert num_threads() == 2
    for bad in ("x", "2 ", "-2", "0", "4096"):  # not a count: the next rule
        monkeypatch.setenv("TVM_NUM_THREADS", bad)
        assert num_threads() == 5
    monkeypatch.delenv("TVM_NUM_THREADS")
    monkeypatch.setenv("OMP_NUM_THREADS", "0")
    import os

    assert num_threads() == len(os.sched_getaffinity(0))


def test_records_carry_the_measured_thread_count(tmp_path):
    task = make_task(matmul, (7, 5, 3))
    log, _ = _log(tmp_path, task, 3)
    rec = json.loads(open(log).readline())
    assert record_threads(rec["i"][0]) == 3
    inp, _ = next(auto_scheduler.load_records(log))
    assert inp.task.record_threads == 3


def test_records_of_another_thread_count_are_not_applied(tmp_path, monkeypatch):
    task, other = make_task(matmul, (7, 5, 3)), make_task(row_sum, (6, 11))
    log, steps = _log(tmp_path, task, 1)
    log2, _ = _log(tmp_path, other, 1, seed=1)
    monkeypatch.setenv("TVM_NUM_THREADS", "2")
    ctx = auto_scheduler.ApplyHistoryBest([log, log2])
    with pytest.warns(RuntimeWarning) as got:
        assert ctx.query("llvm", task.workload_key) is None
        assert ctx.query("llvm", other.workload_key) is None
    msgs = [str(w.message) for w in got if "ApplyHistoryBest" in str(w.message)]
    assert len(msgs) == 1 and "measured at 1 thread(s)" in msgs[0] and "for 2 thread" in msgs[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # a build for 1 thread applies them: num_threads=, or the target's -num-cores
        assert auto_scheduler.ApplyHistoryBest(log, num_threads=1).query(
            "llvm", task.workload_key) == steps[0]
        assert ctx.query("llvm -num-cores=1", task.workload_key) == steps[0]
        assert auto_scheduler.ApplyHistoryBest(log, include_compatible=True).query(
            "llvm", task.workload_key) == steps[0]
    # the task's own best-record lookup follows the same rule
    assert auto_scheduler.load_best_record(log, task.workload_key, "llvm") == (None, None)
    inp, _ = auto_scheduler.load_best_record(log, task.workload_key, "llvm -num-cores=1")
    assert inp is not None
    with pytest.raises(ValueError, match="num_threads"):
        auto_scheduler.ApplyHistoryBest(log, num_threads=0)


def test_each_thread_count_gets_its_own_best_and_default(tmp_path):
    task = make_task(matmul, (7, 5, 3))
    log1, steps1 = _log(tmp_path, task, 1, seed=0, cost=1e-5)   # the fastest at 1 thread
    log2, steps2 = _log(tmp_path, task, 2, seed=4, cost=3e-5)
    assert steps1[0] != steps2[0]
    both = [log1, log2]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert auto_scheduler.ApplyHistoryBest(both, num_threads=1).query(
            "llvm", task.workload_key) == steps1[0]
        assert auto_scheduler.ApplyHistoryBest(both, num_threads=2).query(
            "llvm", task.workload_key) == steps2[0]
        # include_compatible: the build's own count first, though another count's is faster
        assert auto_scheduler.ApplyHistoryBest(both, num_threads=2, include_compatible=True
                                               ).query("llvm", task.workload_key) == steps2[0]
    # default lines per count: at 2 threads the default (2.9e-5) beats the record (3e-5), at 1
    # thread the default (5e-5) is slower than the record (1e-5)
    _default_line(log1, task, 1, 5e-5)
    _default_line(log2, task, 2, 2.9e-5)
    at1 = auto_scheduler.ApplyHistoryBest(both, num_threads=1)
    at2 = auto_scheduler.ApplyHistoryBest(both, num_threads=2)
    assert at1.query("llvm", task.workload_key) == steps1[0]
    assert at2.query("llvm", task.workload_key) is None
    hit = at2.best_of("llvm", task.workload_key)
    assert hit is not None and hit[3] == 2
    assert at2.default_cost("llvm", task.workload_key, hit[2]) == pytest.approx(2.9e-5)


def test_records_without_a_thread_count_apply_at_any_count(tmp_path, monkeypatch):
    task = make_task(matmul, (7, 5, 3))
    log, steps = _log(tmp_path, task, 1)
    lines = [json.loads(x) for x in open(log)]
    for rec in lines:
        rec["i"][0] = rec["i"][0][:2]  # written by an older tvmpy
    with open(log, "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in lines)
    monkeypatch.setenv("TVM_NUM_THREADS", "2")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert auto_scheduler.ApplyHistoryBest(log).query("llvm", task.workload_key) == steps[0]
    inp, _ = auto_scheduler.load_best_record(log, task.workload_key, "llvm")
    assert inp is not None and inp.task.record_threads is None


def test_resume_ignores_records_of_another_thread_count(tmp_path, monkeypatch):
    tasks = [make_task(matmul, (8, 8, 8)), make_task(row_sum, (8, 12))]
    log, _ = _log(tmp_path, tasks[0], 1, n=3, name="resume.json")
    mine, _ = _log(tmp_path, tasks[1], 2, n=2, seed=3)
    with open(log, "a") as f:
        f.write(open(mine).read())
    monkeypatch.setenv("TVM_NUM_THREADS", "2")
    opts = auto_scheduler.TuningOptions(num_measure_trials=0, verbose=0)
    sched = auto_scheduler.TaskScheduler(tasks, load_log_file=log, callbacks=[])
    with pytest.warns(RuntimeWarning, match=r"another thread count \(1: 3\) than this search's \(2\)"):
        sched.tune(opts, search_policy="sketch.random", seed=0)
    assert sched.task_trials == [0, 2]
    assert sched.best_costs[0] >= 1e9 and sched.best_costs[1] == pytest.approx(1e-4)
