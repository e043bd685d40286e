"""Relay integration (TVM's ``auto_scheduler.relay_integration``): ``extract_tasks`` gives one
:class:`SearchTask` per distinct fused subgraph of a model (the te compute of each primitive
function, every kind: convolutions, depthwise, dense, softmax, layer norms, ...), weighted by
its occurrences; ``schedule_fused`` is what ``relay.build`` asks, under
``PassContext(config={"relay.backend.use_auto_scheduler": True})``, for a fused function's
schedule: the best record of the current :class:`ApplyHistoryBest`, or None (the default
schedule).

Subgraphs that are not tasks are listed, with the reason, by :func:`not_tuned` (and logged at
INFO by ``extract_tasks``): those without a reduction (unless ``include_simple_tasks``), those
whose compute holds an operation that is not a ``te.compute`` (``te.extern`` /
hybrid kernels such as the LSTM/GRU recurrence ``fused_nn_rnn_scan``: their loops are written
in the kernel, there is no loop nest for the sketch rules to transform) and those with symbolic
shapes. They keep their default schedules.

Relay sits above this layer: it registers the program walk with
:func:`register_fused_function_extractor` when it is imported.
"""

from __future__ import annotations

import logging
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
from .workload_registry import register_workload

__all__ = ["extract_tasks", "register_fused_function_extractor", "schedule_fused",
           "is_auto_scheduler_enabled", "NotTuned", "not_tuned", "format_not_tuned"]

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
    for key, name, workload, uses, desc in _EXTRACTOR[0](mod, params, target, opt_level):
        if key is None:
            skipped.append(NotTuned(desc, int(uses), "symbolic", name))
            continue
        register_workload(name, workload, override=True)
        task = SearchTask(workload_key=key, target=target, hardware_params=hardware_params,
                          desc=desc)
        why = _untunable(task)
        if why is not None:
            skipped.append(NotTuned(desc, int(uses), "extern", why))
            continue
        if not include_simple_tasks and not any(
                not i.is_placeholder and i.has_reduction for i in task.compute_dag.op_info):
            skipped.append(NotTuned(desc, int(uses), "simple", "no reduction"))
            continue
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
