"""Relay integration (TVM's ``auto_scheduler.relay_integration``): ``extract_tasks`` gives one
:class:`SearchTask` per distinct fused subgraph of a model (the te compute of each primitive
function, every kind: convolutions, depthwise, dense, softmax, layer norms, ...), weighted by
its occurrences; ``schedule_fused`` is what ``relay.build`` asks, under
``PassContext(config={"relay.backend.use_auto_scheduler": True})``, for a fused function's
schedule: the best record of the current :class:`ApplyHistoryBest`, or None (the default
schedule).

Relay sits above this layer: it registers the program walk with
:func:`register_fused_function_extractor` when it is imported.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from .compute_dag import ComputeDAG
from .dispatcher import DispatchContext
from .loop_state import State
from .search_task import HardwareParams, SearchTask
from .transform_step import step_from_record
from .workload_registry import register_workload

__all__ = ["extract_tasks", "register_fused_function_extractor", "schedule_fused",
           "is_auto_scheduler_enabled"]

USE_KEY = "relay.backend.use_auto_scheduler"
_EXTRACTOR: list[Callable[..., Any]] = []


def register_fused_function_extractor(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn(mod, params, target, opt_level) -> [(workload_key, name, workload, uses, desc)]``:
    the distinct fused functions of a program, ``workload(*args)`` giving its tensors."""
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
    injective chains), which TVM leaves out by default."""
    del target_host, dump_workload_to_dag_log, other_targets
    if not _EXTRACTOR:
        raise RuntimeError("extract_tasks: no relay program walk is registered (import tvmpy.relay)")
    tasks: list[SearchTask] = []
    weights: list[int] = []
    for key, name, workload, uses, desc in _EXTRACTOR[0](mod, params, target, opt_level):
        register_workload(name, workload, override=True)
        task = SearchTask(workload_key=key, target=target, hardware_params=hardware_params,
                          desc=desc)
        if not include_simple_tasks and not any(
                not i.is_placeholder and i.has_reduction for i in task.compute_dag.op_info):
            continue
        tasks.append(task)
        weights.append(int(uses))
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
