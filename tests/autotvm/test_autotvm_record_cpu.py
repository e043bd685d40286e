"""AutoTVM records name the CPU they were tuned on (``llvm -mcpu=<host>``, as the
auto-scheduler's, same rule ``target.record_applies``): a log tuned on another CPU is not applied
(``apply_history_best``: one warning naming the CPUs, the workloads fall back), not resumed from
and not learned from (``Tuner.load_history``, transfer learning, ``tune_tasks``);
``include_compatible=True`` applies it; a build for that CPU applies it; older logs (plain
``llvm``) apply, resume and teach as before."""

from __future__ import annotations

import json
import time
import warnings

import pytest

from tvmpy import autotvm, te
from tvmpy.autotvm import record
from tvmpy.autotvm.measure.measure import MeasureErrorNo, MeasureInput, MeasureResult
from tvmpy.autotvm.task import get_config, template
from tvmpy.autotvm.tuner import RandomTuner, XGBTuner
from tvmpy.target import Target
from tvmpy.target.target import host_cpu_name, record_applies, same_target_as_built

HOST = host_cpu_name()
OTHER = "sapphirerapids" if HOST != "sapphirerapids" else "znver4"
NAME = "test_record_cpu/rowsum"


@template(NAME)
def rowsum(n, m):
    a = te.placeholder((n, m), name="A")
    k = te.reduce_axis((0, m), name="k")
    b = te.compute((n,), lambda i: te.sum(a[i, k], axis=k), name="B")
    s = te.create_schedule(b.op)
    cfg = get_config()
    cfg.define_split("tile_i", s[b].op.axis[0], num_outputs=2)
    cfg.define_knob("unroll", [0, 1])
    cfg["tile_i"].apply(s, b, s[b].op.axis[0])
    return s, [a, b]


def _task(n=12, m=7, target="llvm"):
    return autotvm.task.create(NAME, (n, m), target)


def _log(path, task, indices, cost=1e-3, target=None):
    """A log of ``task``'s configs ``indices`` (cost grows with the position), its target text
    rewritten to ``target`` (as written on another machine or by an older tvmpy)."""
    recs = [(MeasureInput(task.target, task, task.config_space.get(i)),
             MeasureResult((cost * (k + 1),), MeasureErrorNo.NO_ERROR, 0.1, time.time()))
            for k, i in enumerate(indices)]
    lines = [json.loads(record.encode(*r)) for r in recs]
    if target is not None:
        for row in lines:
            row["input"][0] = target
    with open(path, "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in lines)
    return str(path)


def _query(ctx, target, task):
    with ctx, Target(target) as tgt:
        return ctx.query(tgt, task.workload)


def test_records_carry_the_cpu_and_the_rule_is_shared(tmp_path):
    task = _task()
    log = _log(tmp_path / "a.log", task, [3])
    assert json.loads(open(log).readline())["input"][0] == f"llvm -mcpu={HOST}"
    inp, _ = record.load_from_file(log)[0]
    assert inp.target.cpu == HOST and same_target_as_built(inp.target, "llvm")
    assert not same_target_as_built(f"llvm -mcpu={OTHER}", "llvm")
    assert record_applies("llvm", "llvm") and record_applies(f"llvm -mcpu={HOST}", "llvm")
    assert not record_applies(f"llvm -mcpu={OTHER}", "llvm")
    assert record_applies(f"llvm -mcpu={OTHER}", f"llvm -mcpu={OTHER} -mattr=+avx2")
    # the auto-scheduler's name for the rule is the same function (one home)
    from tvmpy.auto_scheduler import measure_record

    assert measure_record.cpu_matches is record_applies


def test_other_cpu_records_are_not_applied_and_warn_once(tmp_path):
    t1, t2 = _task(12, 7), _task(30, 5)
    log = _log(tmp_path / "other.log", t1, [5, 2], target=f"llvm -mcpu={OTHER}")
    with open(log, "a") as f:
        f.write(open(_log(tmp_path / "o2.log", t2, [4], target=f"llvm -mcpu={OTHER}")).read())
    ctx = autotvm.apply_history_best(log)
    with pytest.warns(RuntimeWarning) as got:
        assert _query(ctx, "llvm", t1).is_fallback
        assert _query(ctx, "llvm", t2).is_fallback
        assert ctx.best_cost(Target("llvm"), t1.workload) is None
    msgs = [str(w.message) for w in got if "autotvm.ApplyHistoryBest" in str(w.message)]
    assert len(msgs) == 1, msgs
    assert repr(OTHER) in msgs[0] and repr(HOST) in msgs[0] and "include_compatible" in msgs[0]
    # a build for that CPU uses them; so does include_compatible=True (without a warning)
    assert _query(ctx, f"llvm -mcpu={OTHER}", t1).index == 5
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compat = autotvm.apply_history_best(log, include_compatible=True)
        assert _query(compat, "llvm", t1).index == 5
        assert _query(compat, "llvm", t2).index == 4


def test_old_logs_apply_as_before_and_this_cpu_wins(tmp_path):
    task = _task()
    old = _log(tmp_path / "old.log", task, [6], cost=1e-2, target="llvm")  # older tvmpy
    mine = _log(tmp_path / "mine.log", task, [9], cost=1e-3)
    other = _log(tmp_path / "oth.log", task, [1], cost=1e-5, target=f"llvm -mcpu={OTHER}")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _query(autotvm.apply_history_best(old), "llvm", task).index == 6
        assert _query(autotvm.apply_history_best(old), f"llvm -mcpu={OTHER}", task).index == 6
        # this CPU's faster record beats the CPU-less one; the other CPU's (fastest) is unused
        both = autotvm.apply_history_best([old, mine, other])
        assert _query(both, "llvm", task).index == 9
        assert both.best_cost(Target("llvm"), task.workload) == pytest.approx(1e-3)
    # pick_best keeps one best record per CPU
    assert record.pick_best(record.load_from_file(old) + record.load_from_file(other),
                            str(tmp_path / "best.log")) == 2


def test_resume_skips_other_cpu_records(tmp_path):
    task = _task()
    recs = (record.load_from_file(_log(tmp_path / "o.log", task, [1, 2, 3],
                                       target=f"llvm -mcpu={OTHER}"))
            + record.load_from_file(_log(tmp_path / "l.log", task, [4, 5], target="llvm"))
            + record.load_from_file(_log(tmp_path / "m.log", task, [6])))
    tuner = RandomTuner(task)
    with pytest.warns(RuntimeWarning, match=f"'{OTHER}'.*not resumed from .*'{OTHER}': 3"):
        tuner.load_history(recs)
    assert tuner.visited == {4, 5, 6} and tuner.num_history == 3
    assert tuner.best_config.index == 4  # the fastest of the records that apply


def test_transfer_learning_leaves_other_cpu_records_out(tmp_path, monkeypatch):
    task, other_task, third = _task(12, 7), _task(30, 5), _task(20, 3)
    recs = (record.load_from_file(_log(tmp_path / "o.log", other_task, range(8),
                                       target=f"llvm -mcpu={OTHER}"))
            + record.load_from_file(_log(tmp_path / "t.log", third, range(6), target="llvm"))
            + record.load_from_file(_log(tmp_path / "m.log", task, [2])))
    tuner = XGBTuner(task, feature_type="itervar")
    fitted: list = []
    base = type(tuner.cost_model.spawn_base_model())
    monkeypatch.setattr(base, "fit_log", lambda self, records, *a, **k: fitted.extend(records)
                        or False)
    with pytest.warns(RuntimeWarning, match="not resumed from nor learned from"):
        tuner.load_history(recs)
    assert {i.task.args for i, _ in fitted} == {third.args, task.args} and len(fitted) == 7
    assert tuner.visited == {2} and tuner.xs == [2]


def test_tune_tasks_resumes_only_this_cpu(tmp_path):
    task = _task()
    log = tmp_path / "tune.log"
    _log(log, task, [0, 1, 2], target=f"llvm -mcpu={OTHER}")
    with open(log, "a") as f:
        f.write(open(_log(tmp_path / "old.log", task, [3], target="llvm")).read())
    measured: list[int] = []

    def measure(inputs):
        measured.extend(int(i.config.index) for i in inputs)
        return [MeasureResult((1e-3,), 0, 0.01, time.time()) for _ in inputs]

    with pytest.warns(RuntimeWarning, match=f"tune_tasks.*'{OTHER}': 3"):
        autotvm.tune_tasks([task], log_file=log, n_trial_per_task=4, tuner="random",
                           measure_option={"measure_batch": measure}, progress=False)
    # the old record counts as done and is not measured again; the other CPU's are tuned afresh
    assert len(measured) == 3 and 3 not in measured
    assert task.tuned_trials == 4
