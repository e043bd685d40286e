"""``TaskScheduler``: spread the measurement trials over the tasks of a model (Ansor's task
scheduler, TVM's ``auto_scheduler.task_scheduler``).

The objective is the weighted sum of the tasks' best latencies (``task_weights``: how many
times each subgraph runs, so the sum is the model's end-to-end latency). After a round-robin
warm-up (one round per task), each round goes to the task with the most negative gradient of
the objective (``strategy="gradient"``): ``d(objective)/d(best_i) * (alpha * backward + (1 -
alpha) * forward)`` (the chain factor taken numerically from ``objective_func``: the weight for
the default weighted sum),
where ``backward`` is the best latency's slope over the last ``backward_window_size`` rounds
and ``forward`` the optimistic next gain (``best/rounds``, or what a similar task's throughput
would give, ``beta`` bounding it). A task that has not improved for ``early_stopping`` trials
(TuningOptions) is done. ``load_log_file``: tasks already measured there start from their best
and their measured states (resuming a run; the cost model is trained on them).
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..target.target import cpu_of, record_cpu
from .cost_model import CostModel, RandomModel, XGBModel
from .measure import LocalBuilder, MeasureInput, MeasureResult, ProgramMeasurer
from .measure_record import (
    cpu_matches,
    load_record_from_string,
    measured_threads,
    record_threads,
    threads_apply,
)
from .search_policy import SearchPolicy, SketchPolicy
from .search_task import TuningOptions

__all__ = ["TaskScheduler", "PrintTableInfo", "LogEstimatedLatency", "TaskSchedulerCallback",
           "format_table"]


class TaskScheduler:
    def __init__(self, tasks: Sequence[Any], task_weights: Sequence[float] | None = None,
                 objective_func: Any = None, strategy: str = "gradient",
                 load_model_file: str | None = None, load_log_file: str | None = None,
                 alpha: float = 0.2, beta: float = 2, gamma: float = 0.5,
                 backward_window_size: int = 3, callbacks: Sequence[Any] | None = None):
        del load_model_file, gamma
        if not tasks:
            raise ValueError("TaskScheduler: no tasks")
        if strategy not in ("gradient", "round-robin"):
            raise ValueError(f"TaskScheduler: strategy must be 'gradient' or 'round-robin', got {strategy!r}")
        self.tasks = list(tasks)
        weights = [1.0] * len(self.tasks) if task_weights is None else [float(w) for w in task_weights]
        if len(weights) != len(self.tasks):
            raise ValueError(f"TaskScheduler: {len(weights)} weights for {len(self.tasks)} tasks")
        self.task_weights = weights
        self.objective_func = objective_func or (
            lambda costs: sum(c * w for c, w in zip(costs, self.task_weights)))
        self.strategy = strategy
        self.alpha, self.beta = alpha, beta
        self.backward_window_size = backward_window_size
        self.callbacks = list(callbacks) if callbacks is not None else [PrintTableInfo(),
                                                                          LogEstimatedLatency()]
        n = len(self.tasks)
        self.best_costs = np.full(n, 1e10)
        self.best_costs_history: list[list[float]] = [[] for _ in range(n)]
        self.task_cts = [0] * n  # rounds per task
        self.task_trials = [0] * n
        self.dead_tasks: set[int] = set()
        self.flop_cts = [max(1, t.compute_dag.flop_ct()) for t in self.tasks]
        self.groups: dict[str, list[int]] = {}
        for i, t in enumerate(self.tasks):
            self.groups.setdefault(_tag(t), []).append(i)
        self.ct = 0
        self.tic = time.time()
        self.load_log_file = load_log_file
        self.search_policies: list[SearchPolicy] = []
        self.measurers: list[_LazyMeasurer | None] = []
        self.trial_history: list[tuple[int, float]] = []  # (total trials, objective)
        #: {task index: seconds} of the default schedules timed into the log (relay tasks)
        self.default_costs: dict[int, float] = {}

    # ---- setup ----------------------------------------------------------------------------
    def _make_policies(self, search_policy: Any, params: dict | None, seed: int | None) -> None:
        if isinstance(search_policy, (list, tuple)):
            self.search_policies = list(search_policy)
            return
        if isinstance(search_policy, SearchPolicy):
            self.search_policies = [search_policy]
            return
        name = search_policy or "default"
        model: CostModel
        if name in ("default", "sketch.xgb"):
            model = XGBModel(seed=seed)
        elif name == "sketch.random":
            model = RandomModel(seed)
        else:
            raise ValueError(f"TaskScheduler: search_policy must be 'default', 'sketch.xgb', "
                             f"'sketch.random' or SearchPolicy objects, got {search_policy!r}")
        self.search_policies = [SketchPolicy(t, model, params, seed=seed, verbose=0)
                                for t in self.tasks]

    def _restore(self) -> None:
        """Resume from ``load_log_file``: best costs, measured states, trained model."""
        if not self.load_log_file:
            return
        import os

        if not os.path.exists(self.load_log_file):
            return
        index = {(t.workload_key, str(t.target).split()[0]): i for i, t in enumerate(self.tasks)}
        per: dict[int, tuple[list[MeasureInput], list[MeasureResult]]] = {}
        other_cpu: dict[str, int] = {}  # records of these tasks measured on another CPU
        other_threads: dict[int | None, int] = {}  # ... measured at another thread count
        with open(self.load_log_file) as f:
            for line in f:
                if not line.strip() or line.lstrip().startswith("#"):
                    continue
                try:
                    import json

                    rec = json.loads(line)
                    key, target = rec["i"][0][0], str(rec["i"][0][1]).split()[0]
                    i = index.get((key, target))
                    if i is None:
                        continue
                    task = self.tasks[i]
                    if not cpu_matches(str(rec["i"][0][1]), task.target):
                        cpu = str(record_cpu(str(rec["i"][0][1])))
                        other_cpu[cpu] = other_cpu.get(cpu, 0) + 1
                        continue
                    threads = record_threads(rec["i"][0])
                    if not threads_apply(threads, measured_threads(task.target)):
                        other_threads[threads] = other_threads.get(threads, 0) + 1
                        continue  # measured at another thread count: not this search's costs
                    inp, res = load_record_from_string(
                        line, {(key, rec["i"][0][1], threads): task})
                except (ValueError, KeyError, TypeError, IndexError):
                    continue
                ins, outs = per.setdefault(i, ([], []))
                ins.append(MeasureInput(task, inp.state))
                outs.append(res)
        if other_cpu:
            warnings.warn(
                f"TaskScheduler: {sum(other_cpu.values())} records of these tasks in "
                f"{self.load_log_file} were measured on another CPU ("
                + ", ".join(f"{c!r}: {n}" for c, n in sorted(other_cpu.items()))
                + f") than this one ({cpu_of(self.tasks[0].target)!r}); not resumed from: "
                "their tasks are tuned afresh here", RuntimeWarning, stacklevel=3)
        if other_threads:
            warnings.warn(
                f"TaskScheduler: {sum(other_threads.values())} records of these tasks in "
                f"{self.load_log_file} were measured at another thread count ("
                + ", ".join(f"{c}: {n}" for c, n in sorted(other_threads.items(),
                                                           key=lambda kv: kv[0] or 0))
                + f") than this search's ({measured_threads(self.tasks[0].target)}); not resumed "
                "from: their tasks are tuned afresh at this count", RuntimeWarning, stacklevel=3)
        for i, (ins, outs) in per.items():
            pol = self.search_policies[i]
            pol.record(ins, outs)
            pol.on_measured(ins, outs)
            self.task_trials[i] = len(ins)
            self.task_cts[i] = max(1, len(ins) // max(1, self._per_round))
            if math.isfinite(pol.best_cost):
                self.best_costs[i] = pol.best_cost
            self.best_costs_history[i].append(float(self.best_costs[i]))
            self.ct += len(ins)
        if per:
            print(f"TaskScheduler: resumed {sum(len(v[0]) for v in per.values())} records of "
                  f"{len(per)}/{len(self.tasks)} tasks from {self.load_log_file}")

    def _measure_defaults(self, o: TuningOptions) -> None:
        """Time each relay task's default schedule once into the log (the first
        ``RecordToFile``), so that ``ApplyHistoryBest`` keeps a default that the search has
        not beaten (``relay_integration.measure_default_schedules``)."""
        from .measure_record import RecordToFile
        from .relay_integration import measure_default_schedules

        logs = [cb.filename for cb in o.measure_callbacks or () if isinstance(cb, RecordToFile)]
        if not logs or o.num_measure_trials <= 0:
            return
        r = o.runner if not isinstance(o.runner, str) else None
        self.default_costs = measure_default_schedules(
            self.tasks, logs[0], number=int(getattr(r, "number", 5)),
            repeat=int(getattr(r, "repeat", 3)), min_repeat_ms=float(getattr(r, "min_repeat_ms", 20)),
            cold_weights=bool(getattr(r, "cold_weights", False)),
            cpu_time=bool(getattr(r, "cpu_time", False)))

    def _recheck_defaults(self, o: TuningOptions) -> None:
        """After the search: each default against its task's best record again, interleaved
        (``relay_integration.recheck_default_schedules``)."""
        from .measure_record import RecordToFile
        from .relay_integration import recheck_default_schedules

        logs = [cb.filename for cb in o.measure_callbacks or () if isinstance(cb, RecordToFile)]
        if logs and self.default_costs:
            r = o.runner if not isinstance(o.runner, str) else None
            recheck_default_schedules(self.tasks, logs[0], number=int(getattr(r, "number", 5)),
                                      min_repeat_ms=float(getattr(r, "min_repeat_ms", 20)),
                                      cold_weights=bool(getattr(r, "cold_weights", False)),
            cpu_time=bool(getattr(r, "cpu_time", False)))

    # ---- the loop -------------------------------------------------------------------------
    def tune(self, tune_option: TuningOptions, search_policy: Any = "default",
             search_policy_params: dict | None = None, adaptive_training: bool = False,
             per_task_early_stopping: int | None = None, seed: int | None = None) -> None:
        del adaptive_training
        self._per_round = max(1, tune_option.num_measures_per_round)
        self._make_policies(search_policy, search_policy_params, seed)
        if len(self.search_policies) != len(self.tasks):
            raise ValueError("TaskScheduler.tune: give one search policy per task")
        self.measurers = [None] * len(self.tasks)
        self.tune_option = tune_option
        self._builder: Any = None  # one builder for every task, started on first use
        early = per_task_early_stopping if per_task_early_stopping is not None \
            else tune_option.early_stopping
        self.early_stopping_task = early if early is not None and early >= 0 else 1 << 30
        self._restore()
        self._measure_defaults(tune_option)
        budget = tune_option.num_measure_trials
        try:
            # round-robin warm-up over the tasks the log did not cover
            for i in range(len(self.tasks)):
                if self.ct >= budget:
                    break
                if self.task_cts[i] == 0:
                    self._tune_task(i)
            while self.ct < budget and len(self.dead_tasks) < len(self.tasks):
                pick = self._pick()
                if pick is None:
                    break
                self._tune_task(pick)
        finally:
            for m in self.measurers:
                if m is not None:
                    m.close()
            self.measurers = []
            if self._builder is not None:
                self._builder.close()
                self._builder = None
            self._recheck_defaults(tune_option)
        for cb in self.callbacks:
            getattr(cb, "post_tune", lambda s: None)(self)

    MAX_LIVE_MEASURERS = 3
    """Tasks whose build/run workers stay up between their rounds (the most recently tuned);
    the others' workers are shut down (a model has tens of subgraphs, each worker a process)."""

    def _measurer(self, i: int) -> Any:
        m = self.measurers[i]
        if m is None:
            m = self.measurers[i] = _LazyMeasurer(self.tasks[i], self.tune_option,
                                                  self._shared_builder())
        self._live = [j for j in getattr(self, "_live", []) if j != i] + [i]
        while len(self._live) > self.MAX_LIVE_MEASURERS:
            old = self.measurers[self._live.pop(0)]
            if old is not None:
                old.close()
        return m

    def _shared_builder(self) -> Any:
        """The builder of every task's measurer: ``"local"`` is one measure.LocalBuilder whose
        workers serve every task (not restarted when the task changes); a given builder is
        shared as it is. Closed when tuning ends."""
        if self._builder is None:
            b = self.tune_option.builder
            self._builder = LocalBuilder() if b == "local" else b
        return self._builder

    def _tune_task(self, i: int) -> None:
        for cb in self.callbacks:
            getattr(cb, "pre_tune", lambda s, i: None)(self, i)
        pol = self.search_policies[i]
        n = min(self._per_round, self.tune_option.num_measure_trials - self.ct)
        inputs, _ = pol.continue_search_one_round(n, self._measurer(i))
        self.task_cts[i] += 1
        self.task_trials[i] += len(inputs)
        self.ct += len(inputs)
        if not inputs or pol.trials - pol.best_ct >= self.early_stopping_task:
            self.dead_tasks.add(i)
        if math.isfinite(pol.best_cost):
            self.best_costs[i] = pol.best_cost
        self.best_costs_history[i].append(float(self.best_costs[i]))
        self.trial_history.append((self.ct, float(self.objective_func(self.best_costs))))
        for cb in self.callbacks:
            getattr(cb, "post_round", lambda s, i: None)(self, i)

    def gradients(self) -> list[float]:
        """Each alive task's gradient of the objective (most negative: tuned next)."""
        out = []
        w = self.backward_window_size
        for i in range(len(self.tasks)):
            if i in self.dead_tasks or self.task_cts[i] == 0:
                out.append(0.0)
                continue
            chain = self._chain_grad(i)
            hist = self.best_costs_history[i]
            if len(hist) > w:
                backward = (hist[-1] - hist[-1 - w]) / w
            else:
                backward = 0.0
            g_next_1 = self.best_costs[i] - self.best_costs[i] / self.task_cts[i]
            g_next_2 = self.beta * 1e30
            group = self.groups.get(_tag(self.tasks[i]), [])
            if len(group) > 1:
                best_flops = max(self.flop_cts[j] / self.best_costs[j] for j in group)
                g_next_2 = self.beta * self.flop_cts[i] / best_flops
            forward = min(g_next_1, g_next_2) - self.best_costs[i]
            out.append(chain * (self.alpha * backward + (1 - self.alpha) * forward))
        return out

    def _chain_grad(self, i: int) -> float:
        """d(objective)/d(best_cost_i), numerically as Ansor does, so that a custom
        ``objective_func`` (several models, a max, a latency target) steers the allocation;
        for the default weighted sum it is the task's weight."""
        costs = np.asarray(self.best_costs, dtype=np.float64)
        delta = max(abs(float(costs[i])) * 1e-4, 1e-12)
        lowered = costs.copy()
        lowered[i] -= delta
        return float(self.objective_func(costs) - self.objective_func(lowered)) / delta

    def _pick(self) -> int | None:
        alive = [i for i in range(len(self.tasks)) if i not in self.dead_tasks]
        if not alive:
            return None
        if self.strategy == "round-robin":
            return min(alive, key=lambda i: (self.task_cts[i], i))
        grads = self.gradients()
        best = min(alive, key=lambda i: (grads[i], i))
        if grads[best] >= 0:  # nothing promises a gain: the least tuned
            return min(alive, key=lambda i: (self.task_cts[i], i))
        return best


class _LazyMeasurer:
    """A task's ProgramMeasurer, started on its first measurement (a task whose policy
    measures nothing starts no build workers). ``builder``: the builder every task shares
    (its workers serve every task: measure.LocalBuilder), closed by the TaskScheduler."""

    def __init__(self, task: Any, o: TuningOptions, builder: Any = None):
        self.task, self.o, self.builder = task, o, builder
        self.m: ProgramMeasurer | None = None

    def measure(self, policy: Any, states: Sequence[Any]) -> list[MeasureResult]:
        if self.m is None:
            o = self.o
            self.m = ProgramMeasurer(self.task, self.builder or o.builder, o.runner,
                                     o.measure_callbacks, verbose=int(o.verbose >= 2),
                                     close_builder=self.builder is None)
        return self.m.measure(policy, states)

    def close(self) -> None:
        if self.m is not None:
            self.m.close()
            self.m = None  # started again on the next measurement


def _tag(task: Any) -> str:
    """Tasks of the same kind compare throughputs: the fused function's name (shapes aside)
    and the tags of its reduction stages. The name alone is not the kind: relay names a
    depthwise and a dense NCHWc convolution alike (``fused_nn_contrib_conv2d_NCHWc_...``), and
    a depthwise task grouped with 1x1s (2026-12-02, mobilenet_v2, Xeon: 86 against ~190
    GFLOP/s) kept a forward gain it can never reach and took 3,344 of 4,400 trials."""
    try:
        import json

        name = json.loads(task.workload_key)[0]
    except (ValueError, TypeError, IndexError):
        name = task.workload_key
    name = str(name).rsplit("_", 1)[0] if str(name).startswith("relay") else str(name)
    dag = getattr(task, "compute_dag", None)
    kinds = sorted({str(getattr(op, "tag", "") or op.name) for op in getattr(dag, "ops", ())
                    if getattr(op, "reduce_axis", None)})
    return f"{name}|{','.join(kinds)}" if kinds else name


class TaskSchedulerCallback:
    def pre_tune(self, scheduler: TaskScheduler, task_id: int) -> None:
        pass

    def post_round(self, scheduler: TaskScheduler, task_id: int) -> None:
        pass


class PrintTableInfo(TaskSchedulerCallback):
    """Print each task's latency, speed and trials, and the total, after every round."""

    def __init__(self, verbose: int = 1):
        self.verbose = verbose

    def post_round(self, s: TaskScheduler, task_id: int) -> None:
        if not s.tune_option.verbose:
            return
        print(format_table(s))
        total = s.objective_func(s.best_costs)
        done = all(c < 1e9 for c in s.best_costs)
        est = f"{total * 1e3:.4g} ms" if done else "- (some tasks have no valid record yet)"
        print(f"Estimated total latency: {est}\tTrials: {s.ct}\t"
              f"Used time: {time.time() - s.tic:.0f} s\tLast tuned ID: {task_id}")


def format_table(s: TaskScheduler) -> str:
    """TVM's task table: per task its best latency, speed, trials and weight (occurrences),
    '-' where no valid record exists yet, and the default schedule's time when measured (the
    safety net of ``relay_integration.measure_default_schedules``)."""
    lines = ["|  ID  | Task                                               | Latency (ms) "
             "| Speed (GFLOPS) | Trials | Weight | Default (ms) |",
             "|------|----------------------------------------------------|-------------:"
             "|---------------:|-------:|-------:|-------------:|"]
    for i, t in enumerate(s.tasks):
        ok = s.best_costs[i] < 1e9
        lat = f"{s.best_costs[i] * 1e3:.4g}" if ok else "-"
        speed = f"{s.flop_cts[i] / s.best_costs[i] / 1e9:.2f}" if ok else "-"
        w = s.task_weights[i]
        d = s.default_costs.get(i)
        dflt = f"{d * 1e3:.4g}" if d is not None else "-"
        lines.append(f"| {i:4d} | {str(t.desc or t.workload_key)[:50]:50s} | {lat:>12s} | "
                     f"{speed:>14s} | {s.task_trials[i]:6d} | {w:6g} | {dflt:>12s} |")
    return "\n".join(lines)


class LogEstimatedLatency(TaskSchedulerCallback):
    """Append ``(elapsed, trials, estimated total latency)`` per round to ``log_file`` (or
    keep them in ``self.rows``)."""

    def __init__(self, log_file: str | None = None):
        self.log_file = log_file
        self.rows: list[tuple[float, int, float]] = []

    def post_round(self, s: TaskScheduler, task_id: int) -> None:
        row = (time.time() - s.tic, s.ct, float(s.objective_func(s.best_costs)))
        self.rows.append(row)
        if self.log_file:
            with open(self.log_file, "a") as f:
                f.write(f"ElapsedTime(s)\t{row[0]:.0f}\tTrials\t{row[1]}\tEstimatedLatency(ms)\t"
                        f"{row[2] * 1e3:.4g}\n")
