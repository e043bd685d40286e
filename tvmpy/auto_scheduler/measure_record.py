"""Measurement records: one JSON line per measured state, in TVM's auto_scheduler log format::

    {"i": [[workload_key, target], [[], [step records...]]],
     "r": [[costs...], error_no, all_cost, timestamp], "v": "v0.6"}

``target`` is the target as built (``target.target_as_built``: a CPU target names the CPU it
was measured on, ``llvm -mcpu=znver4``), so a log tuned on another CPU is recognised; records
without ``-mcpu`` (older logs) match any CPU. A record measured on this host's CPU also carries
TVM's hardware-parameter array after the target, ``[num_cores, vector_unit_bytes,
cache_line_bytes, 0, 0, 0, 0, 0]``, whose ``num_cores`` is the thread count the candidate ran at
(the parallel runtime's team: ``TVM_NUM_THREADS``, else ``OMP_NUM_THREADS``, else the CPUs of
the affinity mask; :func:`measured_threads`). A schedule's speed depends on it (a kernel
searched at 1 thread is not the best at 2, and its cost says nothing about its time there), so
a record applies to a build for the same thread count only (:func:`threads_apply`; the build's
count: :func:`build_threads`); records without it (older logs, foreign and GPU targets) apply
at any count.

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
           "parse_default_record", "measured_threads", "build_threads", "threads_apply",
           "record_threads"]

LOG_VERSION = "v0.6"
logger = logging.getLogger("auto_scheduler")


def _host_cpu_target(target: Any) -> bool:
    from ..target import as_target

    try:
        t = as_target(target)
    except (ValueError, TypeError):
        return False
    return t.kind in ("llvm", "c") and not t.is_foreign


def measured_threads(target: Any) -> int | None:
    """The thread count a candidate for ``target`` is measured at by a runner on this host
    (a child process of this one: the parallel runtime's count here, read now); None for a
    foreign or GPU target (measured elsewhere)."""
    from ..runtime.parallel_pool import num_threads

    return num_threads() if _host_cpu_target(target) else None


def build_threads(target: Any, num_threads: int | None = None) -> int | None:
    """The thread count a build for ``target`` will run at: ``num_threads`` when given, else
    the target's ``-num-cores`` when given, else (a CPU target of this host) the parallel
    runtime's count in this process; None (any) for other targets."""
    if num_threads is not None:
        return int(num_threads)
    from ..target import as_target

    try:
        t = as_target(target)
    except (ValueError, TypeError):
        return None
    if getattr(t, "_cores_given", False):
        return int(t.num_cores)
    return measured_threads(t)


def threads_apply(rec_threads: int | None, build: int | None) -> bool:
    """Whether a record measured at ``rec_threads`` applies to a build for ``build`` threads:
    the same count, or either unknown."""
    return rec_threads is None or build is None or int(rec_threads) == int(build)


def record_threads(i0: Any) -> int | None:
    """The measured thread count of a record's task entry (``rec["i"][0]`` or a default line's
    ``rec["default"][0]``): its hardware-parameter array's ``num_cores``; None when absent."""
    try:
        hw = i0[2]
        n = int(hw[0]) if isinstance(hw, (list, tuple)) and hw else None
    except (IndexError, TypeError, ValueError):
        return None
    return n if n is not None and n > 0 else None


def _task_entry(workload_key: str, target: Any, hw: Any = None) -> list[Any]:
    """``[workload_key, target as built]``, plus TVM's hardware-parameter array naming the
    measured thread count for a host CPU target."""
    entry: list[Any] = [workload_key, target_as_built(target)]
    n = measured_threads(target)
    if n is not None:
        entry.append([n, int(getattr(hw, "vector_unit_bytes", 0) or 0),
                      int(getattr(hw, "cache_line_bytes", 0) or 0), 0, 0, 0, 0, 0])
    return entry


def dump_record_to_string(inp: MeasureInput, res: MeasureResult) -> str:
    steps = [s.to_record() for s in inp.state.transform_steps]
    costs = list(res.costs) if res.error_no == 0 else []
    task = inp.task
    return json.dumps({"i": [_task_entry(task.workload_key, task.target,
                                         getattr(task, "hardware_params", None)), [[], steps]],
                       "r": [costs, int(res.error_no), float(res.all_cost), float(res.timestamp)],
                       "v": LOG_VERSION})


def dump_default_record(workload_key: str, target: Any, costs: Sequence[float]) -> str:
    """A log line holding the measured time of a task's default schedule (relay's TOPI
    schedule of a fused subgraph), written once per task by the task scheduler:
    ``{"default": [[workload_key, target(, hardware params)], [costs...]], "v": ...}``. Record
    readers skip it; ``ApplyHistoryBest`` keeps the default schedule of a task whose best record
    (of the same CPU and thread count) is slower."""
    return json.dumps({"default": [_task_entry(workload_key, target),
                                   [float(c) for c in costs]],
                       "v": LOG_VERSION})


def parse_default_record(line: str, with_threads: bool = False
                         ) -> tuple[str, str, float] | tuple[str, str, float, int | None] | None:
    """``(workload_key, target, mean cost)`` of a default-schedule line, else None;
    ``with_threads``: ``(..., measured thread count or None)``."""
    if '"default"' not in line:
        return None
    try:
        rec = json.loads(line)
        i0, costs = rec["default"]
        key, target = i0[0], i0[1]
        mean = _mean([float(c) for c in costs])
    except (ValueError, KeyError, TypeError, IndexError):
        return None
    if with_threads:
        return str(key), str(target), mean, record_threads(i0)
    return str(key), str(target), mean


def _parse_full(line: str) -> tuple[str, str, int | None, list[Any], MeasureResult]:
    """``(workload_key, target, measured threads or None, steps, result)`` of a record line."""
    rec = json.loads(line)
    i0, state = rec["i"]
    key, target = i0[0], i0[1]
    steps = state[1] if isinstance(state, list) and len(state) == 2 else state
    costs, error_no, all_cost, ts = rec["r"][:4]
    res = MeasureResult(tuple(float(c) for c in costs), int(error_no), "", float(all_cost), float(ts))
    return key, target, record_threads(i0), steps, res


def _parse(line: str) -> tuple[str, str, list[Any], MeasureResult]:
    key, target, _, steps, res = _parse_full(line)
    return key, target, steps, res


def load_record_from_string(line: str, task_cache: dict | None = None) -> tuple[MeasureInput, MeasureResult]:
    """The ``(MeasureInput, MeasureResult)`` of one log line (its workload must be registered).
    ``task_cache``: tasks by ``(workload key, target text, measured threads)``, reused."""
    from .loop_state import State
    from .search_task import SearchTask
    from .transform_step import step_from_record

    key, target, threads, steps, res = _parse_full(line)
    cache = task_cache if task_cache is not None else {}
    task = cache.get((key, target, threads))
    if task is None:
        dag: Any = None if lookup_workload(decode_workload_key(key)[0]) is not None \
            else _UnregisteredDAG(key)
        task = cache[(key, target, threads)] = SearchTask(workload_key=key, target=target,
                                                          compute_dag=dag)
        #: the thread count the record was measured at (None: not logged)
        task.record_threads = threads
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
    given: the target's kind and CPU, see :func:`cpu_matches`, and the thread count of a build
    for it, :func:`build_threads`); ``(None, None)`` if there is none."""
    best: tuple[float, MeasureInput | None, MeasureResult | None] = (math.inf, None, None)
    want = build_threads(target) if target is not None else None
    cache: dict = {}
    with open(filename) as f:
        for n, line in enumerate(f, 1):
            if not line.strip() or line.lstrip().startswith("#") \
                    or parse_default_record(line) is not None:
                continue
            try:
                key, tgt, threads, _, res = _parse_full(line)
                if res.error_no != 0 or not res.costs:
                    continue
                if workload_key is not None and key != workload_key:
                    continue
                if target is not None and not (cpu_matches(str(tgt), target)
                                               and threads_apply(threads, want)):
                    continue
                c = _mean(res.costs)
                if c < best[0]:
                    inp, res = load_record_from_string(line, cache)
                    best = (c, inp, res)
            except (ValueError, KeyError, TypeError, IndexError, RecursionError) as e:
                logger.warning("%s:%d: skipped a bad record (%s)", filename, n, e)
    return best[1], best[2]
