"""autotvm.tune_model / tune_tasks: budget split by flop, log + resume without re-measuring,
transfer-learning history, progress output, argument errors, models without tunable ops.

Most tests inject the measurement (``measure_option["measure_batch"]``) so they are fast and
deterministic; one measures for real with LocalBuilder/LocalRunner."""

from __future__ import annotations

import importlib
import io
import time

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import autotvm, relay, te
from tvmpy.autotvm import record
from tvmpy.autotvm.measure.measure import MeasureErrorNo, MeasureResult
from tvmpy.autotvm.task import get_config, template
from tvmpy.autotvm.tuner import RandomTuner

# the module (``autotvm.tune_model`` is the function it defines)
tm = importlib.import_module("tvmpy.autotvm.tune_model")
TEMPLATE = "test_tune_model/scale"


@template(TEMPLATE)
def scale(n, m):
    a = te.placeholder((n, m), name="A")
    k = te.reduce_axis((0, m), name="k")
    b = te.compute((n,), lambda i: te.sum(a[i, k] * 2.0, axis=k), name="B")
    s = te.create_schedule(b.op)
    (i,) = s[b].op.axis
    cfg = get_config()
    cfg.define_split("tile_i", i, num_outputs=2)
    cfg.define_knob("unroll", [0, 1])
    io_, ii = cfg["tile_i"].apply(s, b, i)
    if cfg["unroll"].val:
        s[b].unroll(ii)
    return s, [a, b]


def _task(n, m):
    return autotvm.task.create(TEMPLATE, (n, m), "llvm")


class FakeMeasure:
    """Deterministic costs (from the config index); records every measured (task, index)."""

    def __init__(self):
        self.measured: list[tuple[tuple, int]] = []
        self.n_parallel = 2

    def __call__(self, inputs):
        out = []
        for inp in inputs:
            self.measured.append((inp.task.args, inp.config.index))
            c = 1e-4 * (1 + (inp.config.index * 7919) % 13)
            out.append(MeasureResult((c,), MeasureErrorNo.NO_ERROR, 0.01, time.time()))
        return out

    def option(self):
        return {"measure_batch": self, "n_parallel": self.n_parallel}


@pytest.fixture(scope="module")
def tasks():
    # spaces: divisors(n) x 2 ; flop grows with n*m
    return [_task(12, 5), _task(64, 64), _task(30, 17)]


def test_split_budget_proportional_capped_and_complete(tasks):
    sizes = [len(t.config_space) for t in tasks]
    assert sizes == [12, 14, 16]
    flops = [t.flop for t in tasks]
    assert flops[1] > flops[2] > flops[0]
    for total in (0, 1, 2, 3, 8, 20, 41, 42, 100):
        alloc = tm.split_budget(tasks, total)
        assert sum(alloc) == min(total, sum(sizes)), (total, alloc)
        assert all(0 <= a <= s for a, s in zip(alloc, sizes))
        if total >= 3:
            assert min(alloc) >= 1  # every task gets the minimum while the budget lasts
    assert tm.split_budget(tasks, 1) == [0, 1, 0]  # the largest task first
    a = tm.split_budget(tasks, 20)
    assert a[1] >= a[2] >= a[0]
    # a huge task saturates at its space size and the rest goes to the others
    assert tm.split_budget(tasks, 30)[1] == 14


def test_tune_tasks_logs_resumes_and_extends(tmp_path, tasks):
    log = tmp_path / "tune.json"
    meas = FakeMeasure()
    err = io.StringIO()
    out = autotvm.tune_tasks(tasks, log_file=log, n_trial_total=8, tuner="random",
                             measure_option=meas.option(), stream=err)
    assert [t.flop for t in out] == sorted((t.flop for t in tasks), reverse=True)
    budgets = tm.split_budget(out, 8)
    assert len(meas.measured) == 8 and len(set(meas.measured)) == 8
    recs = list(record.load_from_file(log))
    assert len(recs) == 8
    for t, b in zip(out, budgets):
        assert sum(1 for args, _ in meas.measured if args == t.args) == b
        assert t.tuned_trials == t.new_trials == b
    text = err.getvalue()
    assert "[Task  1/ 3]" in text and "task 3/3 done | trials 8/8" in text
    assert "elapsed" in text

    # same budget again: everything is in the log, nothing is measured
    meas2 = FakeMeasure()
    out2 = autotvm.tune_tasks(tasks, log_file=log, n_trial_total=8, tuner="random",
                              measure_option=meas2.option(), progress=False)
    assert meas2.measured == []
    assert [t.new_trials for t in out2] == [0, 0, 0]
    assert len(list(record.load_from_file(log))) == 8

    # a larger budget measures only the difference, never a logged config again
    meas3 = FakeMeasure()
    autotvm.tune_tasks(tasks, log_file=log, n_trial_total=20, tuner="grid",
                       measure_option=meas3.option(), progress=False)
    assert len(meas3.measured) == 12
    old = {(tuple(map(_freeze, i.task.args)), i.config.index) for i, _ in recs}
    assert not old & {(tuple(map(_freeze, a)), k) for a, k in meas3.measured}
    final = list(record.load_from_file(log))
    assert len(final) == 20
    summary = tm.best_per_task(out2, str(log))
    assert [n for _, n, _ in summary] == tm.split_budget(out2, 20)
    assert all(best > 0 for _, _, best in summary)

    # resume=False measures the budget again from scratch (appending to the log)
    meas4 = FakeMeasure()
    autotvm.tune_tasks(tasks[:1], log_file=log, n_trial_per_task=3, tuner="random",
                       measure_option=meas4.option(), progress=False, resume=False)
    assert len(meas4.measured) == 3


def _freeze(x):
    return tuple(_freeze(v) for v in x) if isinstance(x, list | tuple) else x


def test_per_task_budget_capped_by_space(tmp_path, tasks):
    meas = FakeMeasure()
    out = autotvm.tune_tasks(tasks, log_file=tmp_path / "t.json", n_trial_per_task=13,
                             tuner="grid", measure_option=meas.option(), progress=False)
    assert [t.new_trials for t in out] == [13, 13, 12]  # the 12-config task is exhausted


def test_later_tasks_get_previous_records_as_history(tmp_path, tasks, monkeypatch):
    seen: list[set] = []

    class Recording(RandomTuner):
        def load_history(self, records, min_seed_records=500):
            records = list(records)
            seen.append({_freeze(inp.task.args) for inp, _ in records})
            super().load_history(records, min_seed_records)

    monkeypatch.setattr(tm, "make_tuner", lambda task, tuner: Recording(task))
    meas = FakeMeasure()
    out = autotvm.tune_tasks(tasks, log_file=tmp_path / "h.json", n_trial_per_task=2,
                             tuner="xgb", measure_option=meas.option(), progress=False)
    # task 1 has no history; task 2 sees task 1's records; task 3 those of tasks 1 and 2
    assert seen == [{_freeze(out[0].args)}, {_freeze(out[0].args), _freeze(out[1].args)}]


def test_xgb_and_ga_tuners_run(tmp_path, tasks):
    for name in ("ga", "xgb"):
        meas = FakeMeasure()
        out = autotvm.tune_tasks(tasks[:2], log_file=tmp_path / f"{name}.json",
                                 n_trial_total=6, tuner=name, measure_option=meas.option(),
                                 progress=False)
        assert len(meas.measured) == 6 == sum(t.new_trials for t in out)


def test_bad_arguments(tmp_path, tasks):
    log = tmp_path / "x.json"
    with pytest.raises(ValueError, match="unknown tuner"):
        autotvm.tune_tasks(tasks, log_file=log, n_trial_total=4, tuner="bayes")
    with pytest.raises(ValueError, match=">= 0"):
        autotvm.tune_tasks(tasks, log_file=log, n_trial_total=-1)
    with pytest.raises(ValueError, match=">= 0"):
        autotvm.tune_tasks(tasks, log_file=log, n_trial_per_task=-5)
    with pytest.raises(TypeError, match="int"):
        autotvm.tune_tasks(tasks, log_file=log, n_trial_total=2.5)
    with pytest.raises(ValueError, match="exactly one"):
        autotvm.tune_tasks(tasks, log_file=log)
    with pytest.raises(ValueError, match="exactly one"):
        autotvm.tune_tasks(tasks, log_file=log, n_trial_total=4, n_trial_per_task=2)
    with pytest.raises(ValueError, match="early_stopping"):
        autotvm.tune_tasks(tasks, log_file=log, n_trial_total=4, early_stopping=0)
    with pytest.raises(FileNotFoundError, match="directory"):
        autotvm.tune_tasks(tasks, log_file=tmp_path / "nope" / "x.json", n_trial_total=4)
    x = relay.var("x", shape=(2, 8), dtype="float32")
    mod = tvm.IRModule.from_expr(relay.Function([x], relay.nn.relu(x)))
    with pytest.raises(ValueError, match="unknown tuner"):
        autotvm.tune_model(mod, {}, log_file=log, n_trial_total=4, tuner="nope")
    with pytest.raises(ValueError, match=">= 0"):
        autotvm.tune_model(mod, {}, log_file=log, n_trial_total=-3)
    assert not log.exists()


def test_model_without_tunable_ops_returns_empty(tmp_path):
    x = relay.var("x", shape=(3, 7), dtype="float32")
    mod = tvm.IRModule.from_expr(relay.Function([x], relay.nn.relu(x) + relay.const(1.0)))
    err = io.StringIO()
    assert autotvm.tune_model(mod, {}, "llvm", log_file=tmp_path / "n.json", n_trial_total=8,
                              stream=err) == []
    assert "no tunable operators" in err.getvalue()
    assert err.getvalue().count("\n") == 1
    assert not (tmp_path / "n.json").exists()


def test_real_measurement_and_apply_history_best(tmp_path):
    task = _task(16, 24)
    log = tmp_path / "real.json"
    option = autotvm.measure_option(builder=autotvm.LocalBuilder(n_parallel=2),
                                    runner=autotvm.LocalRunner(number=2, repeat=1))
    out = autotvm.tune_tasks([task], log_file=log, n_trial_total=4, tuner="random",
                             measure_option=option, progress=False)
    assert out[0].new_trials == 4
    recs = list(record.load_from_file(log))
    assert len(recs) == 4 and all(r.error_no == 0 for _, r in recs)
    best = min(recs, key=lambda p: np.mean(p[1].costs))[0].config
    with autotvm.apply_history_best(str(log)):
        s, args = scale(16, 24)
    f = tvm.build(s, args, "llvm")
    a = np.random.default_rng(0).standard_normal((16, 24)).astype("float32")
    b = tvm.nd.array(np.zeros(16, "float32"))
    f(tvm.nd.array(a), b)
    np.testing.assert_allclose(b.numpy(), (a * 2.0).sum(1), rtol=1e-5, atol=1e-5)
    assert best.index in {i.config.index for i, _ in recs}


def _dense_model():
    rng = np.random.default_rng(5)
    x = relay.var("x", shape=(4, 32), dtype="float32")
    w = relay.var("w", shape=(24, 32), dtype="float32")
    y = relay.nn.relu(relay.nn.dense(x, w))
    mod = tvm.IRModule.from_expr(relay.Function([x, w], y))
    return mod, {"w": rng.standard_normal((24, 32)).astype("float32")}


def test_tune_model_on_a_dense_net(tmp_path):
    mod, params = _dense_model()
    if not autotvm.task.extract_from_program(mod, params=params, target="llvm"):
        pytest.skip("no x86 dense autotvm template registered yet: extraction finds no task")
    meas = FakeMeasure()
    log = tmp_path / "d.json"
    out = autotvm.tune_model(mod, params, "llvm", log_file=log, n_trial_total=5,
                             tuner="random", measure_option=meas.option(), progress=False)
    assert out and sum(t.new_trials for t in out) == len(meas.measured) <= 5
    assert len(list(record.load_from_file(log))) == len(meas.measured)
