"""Measurement records: one JSON line per measured state, in TVM's auto_scheduler log format::

    {"i": [[workload_key, target], [[], [step records...]]],
     "r": [[costs...], error_no, all_cost, timestamp], "v": "v0.6"}

``target`` is the target as built (``target.target_as_built``: a CPU target names the CPU it
was measured on, ``llvm -mcpu=znver4``), so a log tuned on another CPU is recognised; records
without ``-mcpu`` (older logs) match any CPU.

``RecordToFile`` appends them as a measure callback; ``load_records`` reads them back (bad
lines are skipped with a warning, as TVM's reader); ``load_best_record`` finds the fastest
valid record of a workload. A record of a workload that a higher layer registers on import
(the rnn cell) registers it (``workload_registry.lookup_workload``); a record of a workload not
registered in this process (a relay task before ``extract_tasks``) loads with its DAG left to
be built on first use.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterator, Sequence
from typing import Any

from ..target.target import record_applies, target_as_built
from .measure import MeasureInput, MeasureResult
from .workload_registry import decode_workload_key, lookup_workload

__all__ = ["RecordToFile", "RecordReader", "load_records", "save_records", "load_best_record",
           "dump_record_to_string", "load_record_from_string", "dump_default_record",
           "parse_default_record"]

LOG_VERSION = "v0.6"
logger = logging.getLogger("auto_scheduler")


def dump_record_to_string(inp: MeasureInput, res: MeasureResult) -> str:
    steps = [s.to_record() for s in inp.state.transform_steps]
    costs = list(res.costs) if res.error_no == 0 else []
    return json.dumps({"i": [[inp.task.workload_key, target_as_built(inp.task.target)], [[], steps]],
                       "r": [costs, int(res.error_no), float(res.all_cost), float(res.timestamp)],
                       "v": LOG_VERSION})


def dump_default_record(workload_key: str, target: Any, costs: Sequence[float]) -> str:
    """A log line holding the measured time of a task's default schedule (relay's TOPI
    schedule of a fused subgraph), written once per task by the task scheduler:
    ``{"default": [[workload_key, target], [costs...]], "v": ...}``. Record readers skip it;
    ``ApplyHistoryBest`` keeps the default schedule of a task whose best record is slower."""
    return json.dumps({"default": [[workload_key, target_as_built(target)],
                                   [float(c) for c in costs]],
                       "v": LOG_VERSION})


def parse_default_record(line: str) -> tuple[str, str, float] | None:
    """``(workload_key, target, mean cost)`` of a default-schedule line, else None."""
    if '"default"' not in line:
        return None
    try:
        rec = json.loads(line)
        (key, target), costs = rec["default"]
        return str(key), str(target), _mean([float(c) for c in costs])
    except (ValueError, KeyError, TypeError):
        return None


def _parse(line: str) -> tuple[str, str, list[Any], MeasureResult]:
    rec = json.loads(line)
    (key, target, *_), state = rec["i"]
    steps = state[1] if isinstance(state, list) and len(state) == 2 else state
    costs, error_no, all_cost, ts = rec["r"][:4]
    res = MeasureResult(tuple(float(c) for c in costs), int(error_no), "", float(all_cost), float(ts))
    return key, target, steps, res


def load_record_from_string(line: str, task_cache: dict | None = None) -> tuple[MeasureInput, MeasureResult]:
    """The ``(MeasureInput, MeasureResult)`` of one log line (its workload must be registered)."""
    from .loop_state import State
    from .search_task import SearchTask
    from .transform_step import step_from_record

    key, target, steps, res = _parse(line)
    cache = task_cache if task_cache is not None else {}
    task = cache.get((key, target))
    if task is None:
        dag: Any = None if lookup_workload(decode_workload_key(key)[0]) is not None \
            else _UnregisteredDAG(key)
        task = cache[(key, target)] = SearchTask(workload_key=key, target=target, compute_dag=dag)
    state = State(task.compute_dag, [step_from_record(s) for s in steps])
    return MeasureInput(task, state), res


class _UnregisteredDAG:
    """The compute DAG of a record whose workload is not registered in this process (a relay
    fused function: ``extract_tasks`` registers it): the record still loads, as in TVM (its
    key, target, steps and result need no DAG); the DAG is built on first use, which raises
    ``ValueError`` naming the workload unless it has been registered by then."""

    def __init__(self, workload_key: str):
        self.workload_key = workload_key
        self._dag: Any = None

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "_dag":
            raise AttributeError(name)
        if self._dag is None:
            from .compute_dag import ComputeDAG

            self._dag = ComputeDAG(self.workload_key)
        return getattr(self._dag, name)


class RecordReader:
    """Iterate over the ``(MeasureInput, MeasureResult)`` records of a log file."""

    def __init__(self, filename: str):
        self.filename = filename

    def __iter__(self) -> Iterator[tuple[MeasureInput, MeasureResult]]:
        cache: dict = {}
        with open(self.filename) as f:
            for n, line in enumerate(f, 1):
                if not line.strip() or line.lstrip().startswith("#") \
                        or parse_default_record(line) is not None:
                    continue
                try:
                    yield load_record_from_string(line, cache)
                except (ValueError, KeyError, TypeError, IndexError, RecursionError) as e:
                    logger.warning("%s:%d: skipped a bad record (%s)", self.filename, n, e)

    def read_lines(self, max_lines: int | None = None) -> tuple[list[MeasureInput], list[MeasureResult]]:
        ins, outs = [], []
        for k, (i, r) in enumerate(self):
            if max_lines is not None and k >= max_lines:
                break
            ins.append(i)
            outs.append(r)
        return ins, outs


def load_records(filename: str) -> Iterator[tuple[MeasureInput, MeasureResult]]:
    return iter(RecordReader(filename))


def save_records(filename: str, inputs: Sequence[MeasureInput], results: Sequence[MeasureResult]) -> None:
    """Append records to ``filename``."""
    with open(filename, "a") as f:
        for i, r in zip(inputs, results):
            f.write(dump_record_to_string(i, r) + "\n")


class RecordToFile:
    """Measure callback: append every measured record to ``filename``."""

    def __init__(self, filename: str):
        self.filename = filename

    def __call__(self, policy: Any, inputs: Sequence[MeasureInput],
                 results: Sequence[MeasureResult]) -> None:
        save_records(self.filename, inputs, results)


def _mean(costs: Sequence[float]) -> float:
    return sum(costs) / len(costs) if costs else math.inf


cpu_matches = record_applies
"""Whether a record of ``record_target`` applies to a build for ``target`` (the shared rule:
``target.target.record_applies``)."""


def load_best_record(filename: str, workload_key: str | None = None, target: Any = None
                     ) -> tuple[MeasureInput | None, MeasureResult | None]:
    """The valid record with the smallest mean cost (of ``workload_key`` / ``target`` when
    given: the target's kind and CPU, see :func:`cpu_matches`); ``(None, None)`` if there is
    none."""
    best: tuple[float, MeasureInput | None, MeasureResult | None] = (math.inf, None, None)
    for inp, res in load_records(filename):
        if res.error_no != 0 or not res.costs:
            continue
        if workload_key is not None and inp.task.workload_key != workload_key:
            continue
        if target is not None and not cpu_matches(str(inp.task.target), target):
            continue
        c = _mean(res.costs)
        if c < best[0]:
            best = (c, inp, res)
    return best[1], best[2]
