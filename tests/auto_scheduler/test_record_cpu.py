"""Tuning records name the CPU they were measured on (``llvm -mcpu=<host>``): a log tuned on
another CPU is not applied (ApplyHistoryBest) nor resumed from (TaskScheduler) without one
warning naming the CPUs; ``include_compatible=True`` applies it; records of older logs (plain
``llvm``) still load and apply."""

from __future__ import annotations

import json
import random
import warnings

import pytest
from as_workloads import make_task, matmul, row_sum

from tvmpy import auto_scheduler
from tvmpy.auto_scheduler import MeasureInput, MeasureResult, generate_sketches
from tvmpy.auto_scheduler.sketch_policy import annotate
from tvmpy.target import Target
from tvmpy.target.target import cpu_of, host_cpu_name, record_applies, record_cpu, target_as_built

HOST = host_cpu_name()
OTHER = "sapphirerapids" if HOST != "sapphirerapids" else "znver4"


def _log(tmp_path, task, n=3, seed=0, cost=1e-4):
    rng = random.Random(seed)
    sk = generate_sketches(task)
    states = [annotate(sk[k % len(sk)], rng, task.hardware_params) for k in range(n)]
    log = str(tmp_path / f"log{seed}.json")
    auto_scheduler.save_records(log, [MeasureInput(task, s) for s in states],
                                [MeasureResult((cost * (k + 1),), 0, "", 0.1, 1.0)
                                 for k in range(n)])
    return log, states


def _retarget(log, target):
    """The log's lines with their target text replaced (as written on another machine)."""
    lines = [json.loads(x) for x in open(log)]
    for rec in lines:
        rec["i"][0][1] = target
    with open(log, "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in lines)


def test_target_as_built_names_the_cpu():
    assert target_as_built("llvm") == f"llvm -mcpu={HOST}"
    assert target_as_built("llvm -mcpu=cortex-a72 -mtriple=aarch64-linux-gnu") == \
        "llvm -mcpu=cortex-a72 -mtriple=aarch64-linux-gnu"
    assert target_as_built("llvm -mtriple=aarch64-linux-gnu") == \
        "llvm -mcpu=generic -mtriple=aarch64-linux-gnu"
    assert target_as_built("cuda") == "cuda"
    assert record_cpu(f"llvm -mcpu={OTHER}") == OTHER
    assert record_cpu(f"llvm -mcpu={OTHER} -mattr=+fma,-avx2,avx2") == f"{OTHER} -mattr=+avx2,+fma"
    assert record_cpu("llvm") is None and record_cpu("cuda") is None
    assert cpu_of("llvm") == HOST and cpu_of("cuda") is None


def test_records_carry_the_host_cpu(tmp_path):
    task = make_task(matmul, (7, 5, 3))
    log, _ = _log(tmp_path, task, n=1)
    rec = json.loads(open(log).readline())
    assert rec["i"][0][1] == f"llvm -mcpu={HOST}"
    inp, _ = next(auto_scheduler.load_records(log))
    assert inp.task.target.cpu == HOST


def test_apply_history_best_skips_other_cpu_once_with_a_warning(tmp_path):
    task, other = make_task(matmul, (7, 5, 3)), make_task(row_sum, (6, 11))
    log, states = _log(tmp_path, task)
    log2, _ = _log(tmp_path, other, seed=1)
    _retarget(log, f"llvm -mcpu={OTHER}")
    _retarget(log2, f"llvm -mcpu={OTHER}")
    ctx = auto_scheduler.ApplyHistoryBest([log, log2])
    with pytest.warns(RuntimeWarning) as got:
        assert ctx.query("llvm", task.workload_key) is None
        assert ctx.query("llvm", other.workload_key) is None
    msgs = [str(w.message) for w in got if "ApplyHistoryBest" in str(w.message)]
    assert len(msgs) == 1, msgs
    assert repr(OTHER) in msgs[0] and repr(HOST) in msgs[0] and "include_compatible" in msgs[0]
    # a build for the other CPU applies them; so does include_compatible=True
    best = [s.to_record() for s in states[0].transform_steps]
    assert ctx.query(f"llvm -mcpu={OTHER}", task.workload_key) == best
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compat = auto_scheduler.ApplyHistoryBest(log, include_compatible=True)
        assert compat.query("llvm", task.workload_key) == best
    # the task's own best-record lookup follows the same rule
    assert auto_scheduler.load_best_record(log, task.workload_key, "llvm") == (None, None)
    with pytest.raises(RuntimeError, match="no valid record"):
        task.apply_best(log)


def test_records_without_cpu_still_apply_and_this_cpu_wins(tmp_path):
    task = make_task(matmul, (7, 5, 3))
    old, old_states = _log(tmp_path, task, seed=0, cost=1e-3)
    _retarget(old, "llvm")  # written by an older tvmpy
    mine, my_states = _log(tmp_path, task, seed=2, cost=1e-4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert auto_scheduler.ApplyHistoryBest(old).query("llvm", task.workload_key) == \
            [s.to_record() for s in old_states[0].transform_steps]
        both = auto_scheduler.ApplyHistoryBest([old, mine])
        assert both.query("llvm", task.workload_key) == \
            [s.to_record() for s in my_states[0].transform_steps]
    inp, _ = auto_scheduler.load_best_record(old, task.workload_key, "llvm")
    assert inp is not None


def test_resume_ignores_records_of_another_cpu(tmp_path):
    tasks = [make_task(matmul, (8, 8, 8)), make_task(row_sum, (8, 12))]
    log, _ = _log(tmp_path, tasks[0], n=3)
    _retarget(log, f"llvm -mcpu={OTHER}")
    legacy, _ = _log(tmp_path, tasks[1], n=2, seed=3)
    _retarget(legacy, "llvm")
    with open(log, "a") as f:
        f.write(open(legacy).read())
    opts = auto_scheduler.TuningOptions(num_measure_trials=0, verbose=0)
    sched = auto_scheduler.TaskScheduler(tasks, load_log_file=log, callbacks=[])
    with pytest.warns(RuntimeWarning, match=f"another CPU .*'{OTHER}': 3.*'{HOST}'"):
        sched.tune(opts, search_policy="sketch.random", seed=0)
    assert sched.task_trials == [0, 2]
    assert sched.best_costs[0] >= 1e9 and sched.best_costs[1] == pytest.approx(1e-4)


def test_records_apply_only_to_the_features_they_were_tuned_with(tmp_path):
    """-mattr is part of the CPU: a log tuned with AVX2 (and so AVX-512) off is not applied to
    a build for the whole CPU, nor a log of the whole CPU to a build without AVX2; a -mattr
    that changes no feature (LLVM's implications included) is the same CPU."""
    if not Target("llvm").has_feature("avx2"):
        pytest.skip("the host has no AVX2 to turn off")
    task = make_task(matmul, (7, 5, 3))
    log, states = _log(tmp_path, task)
    best = [s.to_record() for s in states[0].transform_steps]
    _retarget(log, f"llvm -mcpu={HOST} -mattr=-avx2")
    ctx = auto_scheduler.ApplyHistoryBest(log)
    with pytest.warns(RuntimeWarning, match="-mattr=-avx2"):
        assert ctx.query("llvm", task.workload_key) is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ctx.query("llvm -mattr=-avx2", task.workload_key) == best
        # -avx2 turns AVX-512 off too: the same features
        assert ctx.query("llvm -mattr=-avx512f,-avx2", task.workload_key) == best
    assert auto_scheduler.load_best_record(log, task.workload_key, "llvm") == (None, None)
    assert not record_applies(f"llvm -mcpu={HOST}", "llvm -mattr=-avx2")
    assert record_applies(f"llvm -mcpu={HOST} -mattr=+avx2", "llvm")  # changes nothing
