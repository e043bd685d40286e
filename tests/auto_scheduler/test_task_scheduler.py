"""The task scheduler: round-robin warm-up, then rounds to the task whose improvement lowers
the weighted latency sum most (Ansor's gradient); resuming from a log restores each task's best
and measured states (no state measured twice)."""

from __future__ import annotations

import json

import pytest
from as_workloads import elementwise, make_task, matmul, row_sum

from tvmpy import auto_scheduler
from tvmpy.auto_scheduler.measure import MeasureInput, MeasureResult
from tvmpy.auto_scheduler.search_policy import SearchPolicy


class _Scripted(SearchPolicy):
    """Measures nothing: each round's cost comes from ``curve(round)``."""

    def __init__(self, task, curve):
        super().__init__(task, seed=0, verbose=0)
        self.curve = curve
        self.rounds = 0

    def continue_search_one_round(self, n, measurer):
        cost = self.curve(self.rounds)
        self.rounds += 1
        states = auto_scheduler.sample_initial_population(self.task, 1, seed=self.rounds)
        ins = [MeasureInput(self.task, states[0])] * n
        res = [MeasureResult((cost,), 0, "", 0.0, 0.0)] * n
        self.record(ins, res)
        return ins, res


def _opts(n, per_round=4, verbose=0, **kw):
    return auto_scheduler.TuningOptions(num_measure_trials=n, num_measures_per_round=per_round,
                                        verbose=verbose, **kw)


def test_gradient_allocation_favours_the_heavy_improving_task():
    tasks = [make_task(matmul, (8, 8, 8)), make_task(row_sum, (8, 8)),
             make_task(elementwise, (8, 8))]
    flat = lambda r: 1e-4  # noqa: E731 - a light task tuning does not help
    improving = lambda r: 1e-3 / (1 + r)  # noqa: E731
    pols = [_Scripted(tasks[0], flat), _Scripted(tasks[1], improving), _Scripted(tasks[2], improving)]
    sched = auto_scheduler.TaskScheduler(tasks, [1, 10, 1], callbacks=[])
    sched.tune(_opts(4 * 20), search_policy=pols)
    assert min(sched.task_cts) >= 1  # the warm-up measured every task
    assert sched.task_cts[1] > sched.task_cts[2] > 0
    assert sched.task_cts[1] > sched.task_cts[0]
    # the objective is the weighted sum of the best latencies
    assert sched.trial_history[-1][1] == pytest.approx(
        sum(w * c for w, c in zip([1, 10, 1], sched.best_costs)))
    assert sum(sched.task_trials) == 80


def test_round_robin_and_bad_arguments():
    tasks = [make_task(matmul, (8, 8, 8)), make_task(row_sum, (8, 8))]
    pols = [_Scripted(t, lambda r: 1e-3) for t in tasks]
    sched = auto_scheduler.TaskScheduler(tasks, strategy="round-robin", callbacks=[])
    sched.tune(_opts(4 * 6), search_policy=pols)
    assert sched.task_cts == [3, 3]
    with pytest.raises(ValueError, match="weights"):
        auto_scheduler.TaskScheduler(tasks, [1])
    with pytest.raises(ValueError, match="strategy"):
        auto_scheduler.TaskScheduler(tasks, strategy="fifo")
    with pytest.raises(ValueError, match="search_policy"):
        auto_scheduler.TaskScheduler(tasks).tune(_opts(4), search_policy="annealing")


def test_resume_from_log(tmp_path, capsys):
    log = str(tmp_path / "log.json")
    tasks = [make_task(matmul, (16, 16, 16)), make_task(row_sum, (16, 12))]
    builder = auto_scheduler.LocalBuilder(timeout=120, n_parallel=2)
    opts = dict(builder=builder, runner=auto_scheduler.LocalRunner(number=2, repeat=1),
                measure_callbacks=[auto_scheduler.RecordToFile(log)])
    first = auto_scheduler.TaskScheduler(tasks, [1, 2])
    first.tune(_opts(8, verbose=1, **opts), search_policy="sketch.random", seed=0)
    out = capsys.readouterr().out
    assert "Estimated total latency" in out and "Trials: 8" in out
    n_first = len(open(log).read().splitlines())
    assert n_first == 8

    again = auto_scheduler.TaskScheduler(tasks, [1, 2], load_log_file=log)
    again.tune(_opts(8, **opts), search_policy="sketch.random", seed=0)  # nothing left to do
    assert len(open(log).read().splitlines()) == n_first
    assert list(again.best_costs) == pytest.approx(list(first.best_costs))
    assert again.task_trials == [4, 4]

    more = auto_scheduler.TaskScheduler(tasks, [1, 2], load_log_file=log)
    more.tune(_opts(16, **opts), search_policy="sketch.random", seed=0)
    lines = [json.loads(x) for x in open(log).read().splitlines()]
    assert len(lines) == 16
    keys = [json.dumps(rec["i"]) for rec in lines]
    assert len(set(keys)) == len(keys), "a state was measured twice after resuming"
    assert all(b <= a for a, b in zip(first.best_costs, more.best_costs))


def test_gradient_matches_ansor_formula_and_custom_objective():
    """Each alive task's gradient is d(objective)/d(best_i) * (alpha * backward + (1 - alpha)
    * forward), computed by hand here; a custom objective (a max over two 'models') steers the
    allocation to the task that decides it, whatever the weights say."""
    tasks = [make_task(matmul, (8, 8, 8)), make_task(row_sum, (8, 8)),
             make_task(elementwise, (8, 8))]
    s = auto_scheduler.TaskScheduler(tasks, [2, 3, 1], callbacks=[])
    s.best_costs[:] = [4e-3, 1e-3, 2e-3]
    s.task_cts = [5, 2, 1]
    s.best_costs_history = [[6e-3, 5e-3, 5e-3, 4.5e-3, 4e-3], [1e-3, 1e-3], [2e-3]]
    g = s.gradients()
    a, w = s.alpha, s.backward_window_size
    back0 = (4e-3 - 5e-3) / w
    fwd0 = (4e-3 - 4e-3 / 5) - 4e-3
    assert g[0] == pytest.approx(2 * (a * back0 + (1 - a) * fwd0), rel=1e-3)
    assert g[1] == pytest.approx(3 * (1 - a) * ((1e-3 - 1e-3 / 2) - 1e-3), rel=1e-3)
    assert g[2] == pytest.approx(1 * (1 - a) * ((2e-3 - 2e-3 / 1) - 2e-3), rel=1e-3)
    assert all(x < 0 for x in g)

    # two models: A = tasks 0 + 1, B = task 2; the objective is the slower model
    obj = lambda c: max(c[0] + c[1], 10 * c[2])  # noqa: E731
    m = auto_scheduler.TaskScheduler(tasks, [1, 1, 1], objective_func=obj, callbacks=[])
    m.best_costs[:] = [1e-3, 1e-3, 1e-3]  # model B (10 ms) decides the objective
    m.task_cts = [1, 1, 1]
    m.best_costs_history = [[1e-3], [1e-3], [1e-3]]
    g = m.gradients()
    assert g[0] == 0 and g[1] == 0 and g[2] < 0
    assert m._pick() == 2


def test_killed_run_resumes_from_its_log_without_remeasuring(tmp_path):
    """A run stopped mid-way (an exception from a callback, as a time budget or Ctrl-C stops
    it) leaves a log that a new scheduler resumes: the measured states are not measured again,
    each task's best comes back, and the trial count continues from the log."""
    log = str(tmp_path / "log.json")
    tasks = [make_task(matmul, (16, 16, 16)), make_task(row_sum, (16, 12))]

    class Kill(auto_scheduler.task_scheduler.TaskSchedulerCallback):
        def __init__(self, after):
            self.after, self.rounds = after, 0

        def post_round(self, s, i):
            self.rounds += 1
            if self.rounds >= self.after:
                raise KeyboardInterrupt

    opts = dict(builder=auto_scheduler.LocalBuilder(timeout=120, n_parallel=2),
                runner=auto_scheduler.LocalRunner(number=2, repeat=1),
                measure_callbacks=[auto_scheduler.RecordToFile(log)])
    first = auto_scheduler.TaskScheduler(tasks, [1, 2], callbacks=[Kill(3)])
    with pytest.raises(KeyboardInterrupt):
        first.tune(_opts(40, per_round=3, **opts), search_policy="sketch.random", seed=0)
    n_first = len(open(log).read().splitlines())
    assert n_first == 9 and first.measurers == []  # three rounds logged, workers shut down

    again = auto_scheduler.TaskScheduler(tasks, [1, 2], load_log_file=log, callbacks=[])
    again.tune(_opts(15, per_round=3, **opts), search_policy="sketch.random", seed=1)
    lines = [json.loads(x) for x in open(log).read().splitlines()]
    assert len(lines) == 15  # the budget counts the resumed trials: 6 new
    keys = [json.dumps(rec["i"]) for rec in lines]
    assert len(set(keys)) == len(keys), "a state was measured twice after resuming"
    assert sum(again.task_trials) == 15
    assert all(b <= a for a, b in zip(first.best_costs, again.best_costs))


def test_progress_table_lists_every_task(capsys):
    tasks = [make_task(matmul, (8, 8, 8)), make_task(row_sum, (8, 8))]
    pols = [_Scripted(tasks[0], lambda r: 2e-3), _Scripted(tasks[1], lambda r: 1e-3)]
    s = auto_scheduler.TaskScheduler(tasks, [1, 3], callbacks=[auto_scheduler.PrintTableInfo()])
    s.tune(_opts(8, per_round=4, verbose=1), search_policy=pols)
    out = capsys.readouterr().out
    for col in ("ID", "Task", "Latency (ms)", "Speed (GFLOPS)", "Trials", "Weight"):
        assert col in out
    last = out[out.rindex("|  ID  |"):]
    rows = [ln for ln in last.splitlines() if ln.startswith("|") and ln[2:6].strip().isdigit()]
    assert len(rows) == 2
    assert rows[0].split("|")[3].strip() == "2" and rows[1].split("|")[3].strip() == "1"
    assert rows[1].split("|")[6].strip() == "3"  # the weight: occurrences
    # the estimate is the weighted sum: 1 * 2 ms + 3 * 1 ms
    assert "Estimated total latency: 5 ms" in last and "Trials: 8" in last


def test_similar_task_groups_split_depthwise_from_dense_convolutions():
    """Relay names a depthwise and a dense NCHWc convolution with the same epilogue alike
    (``fused_nn_contrib_conv2d_NCHWc_clip``); the scheduler's groups of similar tasks (whose
    best throughput bounds a task's forward gain) tell them apart by their reduction stages'
    tags, and keep same-kind tasks of other shapes together."""
    import numpy as np

    import tvmpy as tvm
    from tvmpy import relay

    rng = np.random.default_rng(3)
    x = relay.var("x", shape=(1, 32, 28, 28))
    y = x
    for cin, cout, groups, k in ((32, 32, 32, 3), (32, 48, 1, 1), (48, 48, 48, 3), (48, 80, 1, 1)):
        w = relay.const(rng.uniform(-1, 1, (cout, cin // groups, k, k)).astype("float32"))
        y = relay.clip(relay.nn.conv2d(y, w, padding=(k // 2, k // 2), groups=groups,
                                       channels=cout, kernel_size=(k, k)), 0.0, 6.0)
    mod = tvm.IRModule.from_expr(relay.Function([x], y))
    tasks, weights = auto_scheduler.extract_tasks(mod["main"], {}, "llvm")
    assert len(tasks) == 4
    s = auto_scheduler.TaskScheduler(tasks, weights, callbacks=[])
    kinds = {}
    for i, t in enumerate(tasks):
        depthwise = any("depthwise" in str(op.tag) for op in t.compute_dag.ops)
        kinds.setdefault(depthwise, []).append(i)
    assert sorted(sorted(g) for g in s.groups.values()) == sorted(sorted(g) for g in kinds.values())
