"""Relay integration (TVM's ``auto_scheduler.relay_integration``): ``extract_tasks`` gives one
:class:`SearchTask` per distinct fused subgraph of a model (the te compute of each primitive
function, every kind: convolutions, depthwise, dense, softmax, layer norms, ...), weighted by
its occurrences; ``schedule_fused`` is what ``relay.build`` asks, under
``PassContext(config={"relay.backend.use_auto_scheduler": True})``, for a fused function's
schedule: the best record of the current :class:`ApplyHistoryBest`, or None (the default
schedule). ``measure_default_schedules`` (called by the task scheduler) times each task's
default schedule once and logs it, so that ``ApplyHistoryBest`` keeps the default schedule of a
subgraph whose search has not yet found anything faster (a safety net, not part of TVM).

Subgraphs that are not tasks are listed, with the reason, by :func:`not_tuned` (and logged at
INFO by ``extract_tasks``): those without a reduction (unless ``include_simple_tasks``), those
whose compute holds an operation that is not a ``te.compute`` (``te.extern`` /
hybrid kernels such as the LSTM/GRU recurrence ``fused_nn_rnn_scan``: their loops are written
in the kernel, there is no loop nest for the sketch rules to transform) and those with symbolic
shapes. They keep their default schedules.

A hand-written kernel may still hold a tunable part: a ``te.extern`` whose ``attrs`` carry
``auto_scheduler_task`` (a workload key) and ``auto_scheduler_task_runs`` (how many times one
call runs it) stands for that task (:func:`subtasks_of`), weighted by its occurrences times its
runs, e.g. the LSTM/GRU recurrence ``nn.rnn_scan``, whose task is one time step (the cell,
``topi.rnn.rnn_cell``) and whose kernel, given a record of the cell, is built around that
step's schedule (``relay/op/strategy/rnn.py``). A run count known only at run time (a dynamic
sequence length) counts once.

Relay sits above this layer: it registers the program walk with
:func:`register_fused_function_extractor` when it is imported.
"""

from __future__ import annotations

import logging
import math
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .compute_dag import ComputeDAG
from .dispatcher import DispatchContext
from .loop_state import State
from .search_task import HardwareParams, SearchTask
from .transform_step import step_from_record
from .workload_registry import deployed_program, deployed_runs, register_workload

__all__ = ["extract_tasks", "register_fused_function_extractor", "schedule_fused",
           "is_auto_scheduler_enabled", "NotTuned", "not_tuned", "format_not_tuned",
           "measure_default_schedules", "recheck_default_schedules", "subtasks_of"]

logger = logging.getLogger("auto_scheduler")

USE_KEY = "relay.backend.use_auto_scheduler"
_EXTRACTOR: list[Callable[..., Any]] = []


@dataclass(frozen=True)
class NotTuned:
    """A fused subgraph ``extract_tasks`` made no task of: its name (``desc``), how many times
    it runs, and why (``kind``: "simple", "extern" or "symbolic"; ``reason``: in words)."""

    desc: str
    uses: int
    kind: str
    reason: str


class _Last(threading.local):
    def __init__(self) -> None:
        self.items: list[NotTuned] = []


_LAST = _Last()


def not_tuned() -> list[NotTuned]:
    """The subgraphs the last ``extract_tasks`` of this thread left out, and why."""
    return list(_LAST.items)


def format_not_tuned(items: list[NotTuned] | None = None) -> str:
    """One line per subgraph that cannot be tuned (extern kernels, symbolic shapes) and one
    line counting those left out as simple; "" when every subgraph is a task."""
    items = not_tuned() if items is None else items
    lines = [f"not tunable: {i.desc} (x{i.uses}): {i.reason}; its default schedule is kept"
             for i in items if i.kind != "simple"]
    simple = [i for i in items if i.kind == "simple"]
    if simple:
        lines.append(f"not extracted: {len(simple)} subgraph(s) without a reduction (elementwise/"
                     "injective: their default schedules inline them; include_simple_tasks=True "
                     "makes them tasks)")
    return "\n".join(lines)


def _untunable(task: SearchTask) -> str | None:
    """Why the auto-scheduler cannot schedule ``task``'s compute, or None."""
    from ..te.tensor import ComputeOp, PlaceholderOp

    other = [op for op in task.compute_dag.ops if not isinstance(op, (ComputeOp, PlaceholderOp))]
    if not other:
        return None
    names = ", ".join(f"{op.name} ({type(op).__name__})" for op in other)
    return (f"{names} is not a te.compute but a kernel whose loops are written out (te.extern/"
            "hybrid): there is no loop nest for the sketch rules to tile")


def subtasks_of(tensors: list[Any]) -> list[tuple[str, int]] | None:
    """``[(workload key, runs per call)]`` of the kernels of ``tensors``' compute that stand
    for a task (``te.extern`` attrs ``auto_scheduler_task`` / ``auto_scheduler_task_runs``; a
    run count that is not a constant counts 1); None when some other operation is not a
    placeholder (the compute is then its own task, or not tunable)."""
    from ..te.tensor import ExternOp, PlaceholderOp

    out: list[tuple[str, int]] = []
    for op in _ops_of(tensors):
        if isinstance(op, PlaceholderOp):
            continue
        key = op.attrs.get("auto_scheduler_task") if isinstance(op, ExternOp) else None
        if not key:
            return None
        runs = op.attrs.get("auto_scheduler_task_runs", 1)
        runs = getattr(runs, "value", runs)
        out.append((str(key), runs if isinstance(runs, int) and runs > 0 else 1))
    return out or None


def _ops_of(tensors: list[Any]) -> list[Any]:
    """Every operation ``tensors`` are computed from (each once)."""
    seen: dict[int, Any] = {}
    stack = [t.op for t in tensors]
    while stack:
        op = stack.pop()
        if id(op) in seen:
            continue
        seen[id(op)] = op
        stack.extend(t.op for t in getattr(op, "input_tensors", ()))
    return list(seen.values())


def register_fused_function_extractor(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn(mod, params, target, opt_level) -> [(workload_key, name, workload, uses, desc)]``:
    the distinct fused functions of a program, ``workload(*args)`` giving its tensors. A
    function that is no static task comes as ``(None, reason, None, uses, desc)``."""
    _EXTRACTOR[:] = [fn]
    return fn


def is_auto_scheduler_enabled() -> bool:
    from ..transform import PassContext

    return bool(PassContext.current().config.get(USE_KEY))


def extract_tasks(mod: Any, params: Any, target: Any, target_host: Any = None,
                  hardware_params: HardwareParams | None = None,
                  include_simple_tasks: bool = False, dump_workload_to_dag_log: Any = None,
                  opt_level: int = 3, other_targets: Any = None) -> tuple[list[SearchTask], list[int]]:
    """``(tasks, weights)``: the distinct fused subgraphs of ``mod`` (an IRModule or its
    ``mod["main"]``) as lowered by ``relay.build`` at ``opt_level``, and how many times each
    runs. ``include_simple_tasks``: also the subgraphs without a reduction (elementwise and
    injective chains), which TVM leaves out by default. The subgraphs left out, and why:
    :func:`not_tuned` / :func:`format_not_tuned`."""
    del target_host, dump_workload_to_dag_log, other_targets
    if not _EXTRACTOR:
        raise RuntimeError("extract_tasks: no relay program walk is registered (import tvmpy.relay)")
    tasks: list[SearchTask] = []
    weights: list[int] = []
    skipped: list[NotTuned] = []
    seen: dict[str, int] = {}
    for key, name, workload, uses, desc in _EXTRACTOR[0](mod, params, target, opt_level):
        if key is None:
            skipped.append(NotTuned(desc, int(uses), "symbolic", name))
            continue
        if key in seen:  # the same task from another subgraph (an rnn cell of two layers)
            weights[seen[key]] += int(uses)
            continue
        register_workload(name, workload, override=True)
        task = SearchTask(workload_key=key, target=target, hardware_params=hardware_params,
                          desc=desc)
        task.weight_inputs = tuple(getattr(workload, "weight_inputs", ()))
        task.model_weight_bytes = int(getattr(workload, "model_weight_bytes", 0))
        why = _untunable(task)
        if why is not None:
            skipped.append(NotTuned(desc, int(uses), "extern", why))
            continue
        if not include_simple_tasks and not any(
                not i.is_placeholder and i.has_reduction for i in task.compute_dag.op_info):
            skipped.append(NotTuned(desc, int(uses), "simple", "no reduction"))
            continue
        seen[key] = len(tasks)
        tasks.append(task)
        weights.append(int(uses))
    _LAST.items = skipped
    if skipped:
        logger.info("extract_tasks: %d task(s); %s", len(tasks), format_not_tuned(skipped))
    return tasks, weights


def schedule_fused(tensors: list[Any], workload_key: str, target: Any) -> Any:
    """The te schedule of the best record of ``workload_key`` in the current dispatch
    context, or None (no context, no record, or a record that does not replay: warned)."""
    ctx = DispatchContext.current()
    if ctx is None:
        return None
    steps = ctx.query(target, workload_key)
    if steps is None:
        return None
    try:
        dag = ComputeDAG(tensors)
        dag.workload_key = workload_key
        state = State(dag, [step_from_record(r) for r in steps])
        sch, _ = dag.apply_steps_from_state(state)
    except Exception as e:  # noqa: BLE001 - a stale record: the default schedule, loudly
        warnings.warn(f"auto_scheduler: the record of {workload_key} does not apply to its "
                      f"compute ({type(e).__name__}: {e}); using the default schedule",
                      RuntimeWarning, stacklevel=2)
        return None
    return sch


def default_schedule_of(task: SearchTask) -> tuple[Any, list[Any]] | None:
    """``(schedule, tensors)`` of the default (TOPI) schedule of a relay task (the workload
    function's ``default_schedule(*key args)``), or None for a task that has none (a user's
    registered workload). The tensors need not be the task's: a workload with a deployed form
    (``workload_registry.deployed_program``) gives its default in that form, e.g. the default
    of an rnn cell is the untuned recurrence kernel over ``deployed_runs`` steps."""
    from .workload_registry import WORKLOAD_FUNC_REGISTRY, decode_workload_key

    try:
        name, args = decode_workload_key(task.workload_key)
    except (ValueError, TypeError):
        return None
    fn = getattr(WORKLOAD_FUNC_REGISTRY.get(name), "default_schedule", None)
    return fn(*args) if fn is not None else None


def _cold_of(task: SearchTask, cold_weights: bool) -> tuple[tuple[int, ...], int] | None:
    return (task.weight_inputs, task.model_weight_bytes) \
        if cold_weights and task.weight_inputs else None


def _time(mod: Any, data: list[Any], number: int, repeat: int, min_repeat_ms: float,
          cold: tuple[tuple[int, ...], int] | None, cpu_time: bool = False) -> list[float]:
    """Seconds per call per repeat, as the runner times (``cold``: its ``cold_weights``,
    ``cpu_time``: its ``cpu_time``)."""
    from ..autotvm.measure.local_runner import _time_cold
    from ..runtime import cpu

    got = _time_cold(mod, data, cold[0] if cold else (), cold[1] if cold else 0, number,
                     repeat, min_repeat_ms, cpu_time) if cold or cpu_time else None
    if got is None:
        got = list(mod.time_evaluator(mod.entry_name, cpu(0), number=number, repeat=repeat,
                                      min_repeat_ms=min_repeat_ms)(*data).results)
    return got


def measure_default_schedules(tasks: list[SearchTask], log_file: str, number: int = 5,
                              repeat: int = 3, min_repeat_ms: float = 20,
                              cold_weights: bool = False, cpu_time: bool = False
                              ) -> dict[int, float]:
    """Time the default schedule of each relay task not yet in ``log_file`` (in this process,
    as the runner times, ``cold_weights`` included, divided by the task's ``deployed_runs``) and
    append a ``"default"`` line per task; gives ``{task index: mean seconds}`` of the tasks
    measured or found in the log. A default that
    does not build is skipped (warned): the search's records then apply as they are."""
    import os

    from ..driver import build
    from ..runtime import ndarray
    from .measure_record import (
        cpu_matches,
        dump_default_record,
        measured_threads,
        parse_default_record,
        threads_apply,
    )

    known: list[tuple[str, str, float, int | None]] = []
    if os.path.exists(log_file):
        with open(log_file) as f:
            for line in f:
                d = parse_default_record(line, with_threads=True)
                if d is not None:
                    known.append(d)  # type: ignore[arg-type]
    out: dict[int, float] = {}
    for i, task in enumerate(tasks):
        mine = [c for key, tgt, c, th in known if key == task.workload_key
                and cpu_matches(tgt, task.target)
                and threads_apply(th, measured_threads(task.target))]
        if mine:
            out[i] = mine[-1]
            continue
        if str(task.target).split()[0] not in ("llvm", "c"):
            continue  # timed here on the CPU only
        try:
            got = default_schedule_of(task)
            if got is None:
                continue
            sch, args = got
            mod = build(sch, args, task.target)
            rng = __import__("numpy").random.default_rng(0)
            data = [ndarray.array(rng.uniform(-1, 1, [int(d) for d in t.shape]).astype(t.dtype))
                    for t in args]
            res = _time(mod, data, number, repeat, min_repeat_ms, _cold_of(task, cold_weights),
                        cpu_time)
        except Exception as e:  # noqa: BLE001 - the net is optional: the search goes on
            warnings.warn(f"auto_scheduler: the default schedule of {task.desc or task.workload_key} "
                          f"could not be timed ({type(e).__name__}: {e})", RuntimeWarning,
                          stacklevel=2)
            continue
        costs = [c / deployed_runs(task.workload_key) for c in res]  # a run's cost
        with open(log_file, "a") as f:
            f.write(dump_default_record(task.workload_key, task.target, costs) + "\n")
        out[i] = sum(costs) / len(costs)
    return out


def _timer(sch: Any, args: list[Any], target: Any, number: int, min_repeat_ms: float,
           cold: tuple[tuple[int, ...], int] | None = None, cpu_time: bool = False) -> Any:
    from ..driver import build
    from ..runtime import ndarray

    mod = build(sch, args, target)
    rng = __import__("numpy").random.default_rng(0)
    data = [ndarray.array(rng.uniform(-1, 1, [int(d) for d in t.shape]).astype(t.dtype))
            for t in args]
    return lambda: _time(mod, data, number, 1, min_repeat_ms, cold, cpu_time)[0]


def recheck_default_schedules(tasks: list[SearchTask], log_file: str, rounds: int = 5,
                              number: int = 5, min_repeat_ms: float = 20,
                              cold_weights: bool = False, cpu_time: bool = False
                              ) -> dict[int, float]:
    """Time each relay task's default schedule against its best record again, interleaved
    (``rounds`` rounds, the best of each), and append a ``"default"`` line holding the
    default's time on the scale of the logged best (logged best x default / best now): the
    first default line was timed once, before the search, and the load of a shared machine
    drifts over a tuning run. ``ApplyHistoryBest`` reads the last default line of a task.
    The best record is timed in its deployed form (``workload_registry.deployed_program``),
    as the search measured it. Gives ``{task index: the ratio default / best}``."""
    from .dispatcher import ApplyHistoryBest
    from .measure_record import dump_default_record

    ctx = ApplyHistoryBest(log_file)
    out: dict[int, float] = {}
    for i, task in enumerate(tasks):
        if str(task.target).split()[0] not in ("llvm", "c"):
            continue
        hit = ctx.best_of(task.target, task.workload_key)
        if hit is None or ctx.default_cost(task.target, task.workload_key, hit[2]) == math.inf:
            continue
        try:
            got = default_schedule_of(task)
            if got is None:
                continue
            dag = task.compute_dag
            state = State(dag, [step_from_record(r) for r in hit[1]])
            best_prog = deployed_program(task.workload_key, *dag.apply_steps_from_state(state))
            cold = _cold_of(task, cold_weights)
            t_best = _timer(*best_prog, task.target, number, min_repeat_ms, cold, cpu_time)
            t_def = _timer(*got, task.target, number, min_repeat_ms, cold, cpu_time)
            best = dflt = float("inf")
            for _ in range(rounds):
                best, dflt = min(best, t_best()), min(dflt, t_def())
        except Exception as e:  # noqa: BLE001 - the first default line stays
            warnings.warn(f"auto_scheduler: could not re-time {task.desc or task.workload_key} "
                          f"({type(e).__name__}: {e})", RuntimeWarning, stacklevel=2)
            continue
        out[i] = dflt / best
        with open(log_file, "a") as f:
            f.write(dump_default_record(task.workload_key, task.target, [hit[0] * dflt / best])
                    + "\n")
    return out
