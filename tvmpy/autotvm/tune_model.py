"""Whole-model tuning: extract a relay program's tunable tasks and tune them with one budget.

TVM's ``tune_tasks`` tutorial helper made a function::

    from tvmpy import autotvm
    tasks = autotvm.tune_model(mod, params, "llvm", log_file="tune.json",
                               n_trial_total=2000, tuner="xgb")
    with autotvm.apply_history_best("tune.json"):
        lib = relay.build(mod, target="llvm", params=params)

Tasks are tuned largest first (by flop). A total budget (``n_trial_total``) is split between
them in proportion to their flop (at least ``MIN_TRIALS_PER_TASK`` each while the budget lasts,
never more than a task's space size); ``n_trial_per_task`` gives every task the same budget
instead. Every measurement is appended to ``log_file`` at once; a second call with the same
log resumes: the configurations of a task already in the log count against its budget and are
never measured again. The XGB tuner also learns from the records of the tasks tuned before it
(transfer learning), so later tasks start warm.

The builder and runner of the default ``measure_option`` run in fresh interpreters that do not
import the user's ``__main__``: a script calling :func:`tune_model` at its top level works.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Sequence
from typing import Any, TextIO

__all__ = ["tune_model", "tune_tasks", "split_budget", "make_tuner", "best_per_task", "TUNERS"]

TUNERS = ("xgb", "ga", "random", "grid")
# the least number of trials a task gets from a total budget (while the budget lasts)
MIN_TRIALS_PER_TASK = 1


def _space_size(task: Any) -> int:
    return len(task.config_space)


def _check_count(name: str, value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            import numpy as np

            ok = isinstance(value, np.integer)
        except ImportError:  # pragma: no cover
            ok = False
        if not ok:
            raise TypeError(f"{name} must be an int, got {value!r}")
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value}")
    return int(value)


def split_budget(tasks: Sequence[Any], n_trial_total: int,
                 min_per_task: int = MIN_TRIALS_PER_TASK) -> list[int]:
    """Trials per task (same order as ``tasks``): ``n_trial_total`` split in proportion to each
    task's flop, each task first getting ``min(min_per_task, space size)`` while the budget
    lasts (larger tasks first), no task more than its space size. The shares sum to
    ``min(n_trial_total, total space size)``."""
    n_trial_total = _check_count("n_trial_total", n_trial_total) or 0
    caps = [_space_size(t) for t in tasks]
    alloc = [0] * len(tasks)
    left = n_trial_total
    order = sorted(range(len(tasks)), key=lambda i: -float(tasks[i].flop or 0))
    for i in order:  # the minimum, largest tasks first
        give = min(caps[i], min_per_task, left)
        alloc[i] += give
        left -= give
    # water filling: proportional to flop among tasks with room left, capped by space size
    while left > 0:
        open_ = [i for i in order if alloc[i] < caps[i]]
        if not open_:
            break
        weights = [max(float(tasks[i].flop or 0), 1.0) for i in open_]
        wsum = sum(weights)
        exact = [left * w / wsum for w in weights]
        shares = [min(math.floor(e), caps[i] - alloc[i]) for e, i in zip(exact, open_)]
        if sum(shares) == 0:
            # fewer trials left than open tasks get whole ones: largest remainders first
            for _, i in sorted(zip(exact, open_), key=lambda p: -p[0])[:left]:
                alloc[i] += 1
            break
        for s, i in zip(shares, open_):
            alloc[i] += s
        left -= sum(shares)
    return alloc


def make_tuner(task: Any, tuner: str = "xgb") -> Any:
    """A tuner of ``task`` by name: "xgb", "ga", "random" or "grid"."""
    from .tuner import GATuner, GridSearchTuner, RandomTuner, XGBTuner

    if tuner == "xgb":
        return XGBTuner(task, loss_type="rank")
    if tuner == "ga":
        return GATuner(task, pop_size=min(100, max(1, _space_size(task))))
    if tuner == "random":
        return RandomTuner(task)
    if tuner == "grid":
        return GridSearchTuner(task)
    raise ValueError(f"unknown tuner {tuner!r}; one of {', '.join(TUNERS)}")


def _workload_key(task: Any) -> tuple[Any, str]:
    """A task's key in the log: its workload and target as built (the CPU named: records of
    another CPU are other keys, neither resumed from nor used for transfer learning)."""
    from ..target.target import target_as_built
    from .tuner.tuner import _canon

    return _canon(task.workload), target_as_built(task.target)


def _load_log(log_file: str) -> list[tuple[Any, Any]]:
    from . import record

    if not os.path.exists(log_file) or os.path.getsize(log_file) == 0:
        return []
    return list(record.load_from_file(log_file))


def best_per_task(tasks: Sequence[Any], log_file: str) -> list[tuple[Any, int, float]]:
    """``(task, records in the log, best FLOP/s)`` for each task (0.0 when none succeeded)."""
    from .tuner.tuner import result_flops

    count: dict[Any, int] = {}
    best: dict[Any, float] = {}
    keys = [_workload_key(t) for t in tasks]
    wanted = set(keys)
    for inp, res in _load_log(log_file):
        key = _workload_key(inp.task)
        if key not in wanted:
            continue
        count[key] = count.get(key, 0) + 1
        task = tasks[keys.index(key)]
        best[key] = max(best.get(key, 0.0), result_flops(task, res))
    return [(t, count.get(k, 0), best.get(k, 0.0)) for t, k in zip(tasks, keys)]


def tune_tasks(tasks: Sequence[Any], *, log_file: str | os.PathLike,
               n_trial_total: int | None = None, n_trial_per_task: int | None = None,
               tuner: str = "xgb", measure_option: dict | None = None,
               early_stopping: int | None = None, progress: bool = True, resume: bool = True,
               stream: TextIO | None = None) -> list[Any]:
    """Tune ``tasks`` (largest flop first) into ``log_file``; see the module docstring.

    Returns the tasks in the order they were tuned. ``stream`` (default ``sys.stderr``) gets
    the per-task progress bars and the overall status lines when ``progress`` is true.
    """
    from .tuner import callback
    from .tuner.tuner import Tuner

    if tuner not in TUNERS:
        raise ValueError(f"unknown tuner {tuner!r}; one of {', '.join(TUNERS)}")
    n_trial_total = _check_count("n_trial_total", n_trial_total)
    n_trial_per_task = _check_count("n_trial_per_task", n_trial_per_task)
    if (n_trial_total is None) == (n_trial_per_task is None):
        raise ValueError("give exactly one of n_trial_total (split between the tasks by flop) "
                         "and n_trial_per_task")
    if early_stopping is not None:
        _check_count("early_stopping", early_stopping)
        if early_stopping < 1:
            raise ValueError(f"early_stopping must be >= 1, got {early_stopping}")
    log_file = os.fspath(log_file)
    if not log_file:
        raise ValueError("log_file must be a non-empty path")
    parent = os.path.dirname(os.path.abspath(log_file))
    if not os.path.isdir(parent):
        raise FileNotFoundError(f"tune: directory {parent!r} of log_file does not exist")
    if measure_option is None:
        from .measure import measure_option as make_option

        measure_option = make_option()
    out = stream if stream is not None else sys.stderr

    tasks = sorted(tasks, key=lambda t: -float(t.flop or 0))
    if n_trial_total is not None:
        budgets = split_budget(tasks, n_trial_total)
    else:
        budgets = [min(int(n_trial_per_task), _space_size(t)) for t in tasks]
    total = sum(budgets)
    start = time.time()
    done = 0
    tuned_keys: set[Any] = set()
    # the log read once, then kept up to date with this run's measurements
    records = _load_log(log_file) if resume else []
    if records and tasks:  # one warning when records of another CPU are left out
        from .record import split_by_cpu

        records = split_by_cpu(records, tasks[0].target, "autotvm.tune_tasks",
                               "not resumed from nor learned from")
    by_key: dict[Any, list[tuple[Any, Any]]] = {}
    for rec in records:
        by_key.setdefault(_workload_key(rec[0].task), []).append(rec)
    for i, (task, budget) in enumerate(zip(tasks, budgets), 1):
        key = _workload_key(task)
        tuned_keys.add(key)
        tuner_obj = make_tuner(task, tuner)
        # this task's records (resume, counted against its budget; none when not resuming)
        # and, for transfer learning, those of the tasks tuned before it
        own = by_key.get(key, [])
        if len({int(r[0].config.index) for r in own}) >= budget:
            # nothing left to measure: take the task's own records (its best) without training
            # a transfer model and planning a batch that would never be measured
            Tuner.load_history(tuner_obj, own)
        else:
            history = [r for k in tuned_keys for r in by_key.get(k, [])]
            if history:
                tuner_obj.load_history(history)
        n_new = max(0, budget - tuner_obj.num_history)
        prefix = f"[Task {i:2d}/{len(tasks):2d}]"
        if progress:
            out.write(f"{prefix} {task.name} {_short_args(task)}: {task.flop / 1e6:.2f} MFLOP, "
                      f"space {_space_size(task)}, budget {budget}"
                      + (f" ({tuner_obj.num_history} from the log)" if tuner_obj.num_history
                         else "") + "\n")
            out.flush()
        callbacks = [callback.log_to_file(log_file)]
        if progress and n_new > 0:
            callbacks.append(callback.progress_bar(n_new, prefix=prefix, stream=out))
        measured = [0, 0]  # trials measured in this run, of which failed

        def _count(_tuner: Any, inputs: Sequence[Any], results: Sequence[Any],
                   measured: list[int] = measured, key: Any = key) -> None:
            measured[0] += len(inputs)
            measured[1] += sum(1 for r in results if r.error_no != 0)
            by_key.setdefault(key, []).extend(zip(inputs, results))

        callbacks.append(_count)
        if n_new > 0:
            tuner_obj.tune(n_trial=n_new, measure_option=measure_option,
                           early_stopping=early_stopping, callbacks=callbacks)
        task.tuned_trials = min(budget, tuner_obj.num_history) + measured[0]
        task.new_trials = measured[0]
        task.failed_trials = measured[1]
        done += min(budget, tuner_obj.num_history) + measured[0]
        if progress:
            out.write(f"tune: task {i}/{len(tasks)} done | trials {done}/{total} "
                      f"({measured[0]} new) | best {tuner_obj.best_flops / 1e9:.2f} GFLOP/s | "
                      f"elapsed {time.time() - start:.1f} s\n")
            out.flush()
    return list(tasks)


def _short_args(task: Any) -> str:
    parts = []
    for a in task.args:
        if isinstance(a, (tuple, list)) and len(a) == 3 and a[0] == "TENSOR":
            parts.append("x".join(str(d) for d in a[1]))
        else:
            parts.append(str(a))
    text = "(" + ", ".join(parts) + ")"
    return text if len(text) <= 60 else text[:57] + "..."


def tune_model(mod: Any, params: Any = None, target: Any = "llvm", *,
               log_file: str | os.PathLike, n_trial_total: int | None = None,
               n_trial_per_task: int | None = None, tuner: str = "xgb",
               measure_option: dict | None = None, early_stopping: int | None = None,
               progress: bool = True, resume: bool = True, ops: Sequence[str] | None = None,
               stream: TextIO | None = None) -> list[Any]:
    """Extract the tunable tasks of ``mod`` (a relay IRModule or function, as lowered by
    ``relay.build`` at opt_level 3) and tune them into ``log_file``; see the module docstring.

    Parameters
    ----------
    mod, params, target
        The program, its bound parameters (name -> array) and the target, as for relay.build.
    log_file : str or os.PathLike
        JSON-lines log, appended to; read first to resume when ``resume`` is true.
    n_trial_total, n_trial_per_task : int
        Exactly one: a budget split between the tasks by flop, or one budget per task (both
        capped by each task's space size; trials already in the log count).
    tuner : "xgb", "ga", "random" or "grid"
    measure_option : dict, optional
        ``autotvm.measure_option(builder, runner)``; LocalBuilder/LocalRunner by default.
    early_stopping : int, optional
        Stop a task after this many trials without improvement.
    progress : bool
        Per-task progress bars and overall status lines on ``stream`` (default stderr).
    resume : bool
        Take this task's records in the log as measured (never re-measured).
    ops : sequence of str, optional
        Only these task names (e.g. ``["dense.x86"]``).

    Returns the tuned tasks, largest flop first (each with ``tuned_trials``, ``new_trials``
    and ``failed_trials``: those of the new ones that failed), or ``[]`` (saying so on
    ``stream``) when the program has no tunable ops.
    """
    from ..transform import PassContext
    from .task import extract_from_program

    if tuner not in TUNERS:
        raise ValueError(f"unknown tuner {tuner!r}; one of {', '.join(TUNERS)}")
    _check_count("n_trial_total", n_trial_total)
    _check_count("n_trial_per_task", n_trial_per_task)
    if (n_trial_total is None) == (n_trial_per_task is None):
        raise ValueError("give exactly one of n_trial_total (split between the tasks by flop) "
                         "and n_trial_per_task")
    with PassContext(opt_level=3):
        tasks = extract_from_program(mod, params=params, target=target, ops=ops)
    if not tasks:
        out = stream if stream is not None else sys.stderr
        out.write("tune: no tunable operators in this model (no autotvm template matches its "
                  "ops on this target); nothing to tune\n")
        out.flush()
        return []
    return tune_tasks(tasks, log_file=log_file, n_trial_total=n_trial_total,
                      n_trial_per_task=n_trial_per_task, tuner=tuner,
                      measure_option=measure_option, early_stopping=early_stopping,
                      progress=progress, resume=resume, stream=stream)

