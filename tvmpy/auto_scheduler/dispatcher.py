"""Dispatch contexts (TVM's ``auto_scheduler.dispatcher``): which measured state schedules a
workload when ``relay.build`` runs with ``PassContext(config={"relay.backend.use_auto_scheduler":
True})``.

``ApplyHistoryBest(records)`` keeps, per (workload key, target kind, CPU), the step history of
the fastest valid record of a log (or of ``(MeasureInput, MeasureResult)`` pairs), unless the log
also holds a faster measurement of the task's default schedule on the same CPU (a ``"default"``
line, written by the task scheduler for relay's fused subgraphs): then the default schedule
stays. Records are read as step lists, without building their computes: a log of relay tasks applies in a process
that never extracted them.

A record measured on another CPU (its target's ``-mcpu``, and ``-mattr`` where that changes the
instruction-set features: ``target.cpu_applies``) is not applied
to a build for this one (its schedule was chosen for other caches and vector units): such
workloads keep their default schedule, and the context warns once, naming both CPUs.
``include_compatible=True`` applies them anyway (TVM's name for records of a compatible target).
Records without ``-mcpu`` (older logs) apply to any CPU.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import warnings
from typing import Any

from ..target.target import cpu_applies, cpu_of, other_cpu_message, record_cpu
from .measure_record import _parse, parse_default_record

__all__ = ["DispatchContext", "ApplyHistoryBest", "ApplyHistoryBestOrSample"]

logger = logging.getLogger("auto_scheduler")


class _Stack(threading.local):
    def __init__(self) -> None:
        self.contexts: list[DispatchContext] = []


_STACK = _Stack()


def _kind(target: Any) -> str:
    return str(target).split()[0]


class DispatchContext:
    """Base: ``query(target, workload_key)`` gives a step-record list or None."""

    def query(self, target: Any, workload_key: str) -> list | None:
        raise NotImplementedError

    def __enter__(self) -> DispatchContext:
        _STACK.contexts.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        _STACK.contexts.remove(self)

    @staticmethod
    def current() -> DispatchContext | None:
        return _STACK.contexts[-1] if _STACK.contexts else None


class ApplyHistoryBest(DispatchContext):
    """The best record of each workload in ``records``: a log file name, a list of them, or
    ``(MeasureInput, MeasureResult)`` pairs. ``n_lines``: read only the first lines.

    ``min_speedup``: where the log times the task's default schedule (the task scheduler's
    "default" lines), a record replaces the default only when it is more than this much faster
    (default 1.05). A record within a few percent of the default buys nothing measurable and
    can lose in the model (isolated timings are cache-hot: the BERT encoder's dense records,
    0.5-2.4% faster alone, were 6-14% slower at 2 threads in the model; bench/RESULTS.md,
    issue 28). ``min_speedup=1`` applies every record that is faster at all."""

    def __init__(self, records: Any, n_lines: int | None = None, include_compatible: bool = False,
                 min_speedup: float = 1.05):
        if not min_speedup >= 1.0:
            raise ValueError(f"ApplyHistoryBest: min_speedup must be >= 1, got {min_speedup!r}")
        self.include_compatible = include_compatible
        self.min_speedup = float(min_speedup)
        # (workload key, target kind, record CPU or None) -> (mean cost, step records)
        self.best: dict[tuple[str, str, str | None], tuple[float, list]] = {}
        self._by_workload: dict[tuple[str, str], set[str | None]] = {}
        #: the measured time of each task's default schedule (the log's "default" lines), keyed
        #: as ``best``
        self.default_costs: dict[tuple[str, str, str | None], float] = {}
        self._warned = False
        self.load(records, n_lines)

    def load(self, records: Any, n_lines: int | None = None) -> None:
        if isinstance(records, (str, os.PathLike)):
            records = [records]
        for rec in records:
            if isinstance(rec, (str, os.PathLike)):
                if not os.path.exists(rec):
                    raise FileNotFoundError(f"ApplyHistoryBest: no log file {rec}")
                self._load_file(str(rec), n_lines)
            else:
                inp, res = rec
                self._add(inp.task.workload_key, str(inp.task.target),
                          [s.to_record() for s in inp.state.transform_steps], res)

    def _load_file(self, path: str, n_lines: int | None) -> None:
        with open(path) as f:
            for n, line in enumerate(f, 1):
                if n_lines is not None and n > n_lines:
                    break
                if not line.strip() or line.lstrip().startswith("#"):
                    continue
                d = parse_default_record(line)
                if d is not None:
                    self.default_costs[(d[0], _kind(d[1]), record_cpu(d[1]))] = d[2]  # last wins
                    continue
                try:
                    key, target, steps, res = _parse(line)
                except (ValueError, KeyError, TypeError, IndexError) as e:
                    logger.warning("%s:%d: skipped a bad record (%s)", path, n, e)
                    continue
                self._add(key, target, steps, res)

    def _add(self, key: str, target: str, steps: list, res: Any) -> None:
        if res.error_no != 0 or not res.costs:
            return
        c = sum(res.costs) / len(res.costs)
        cpu = record_cpu(target)
        k = (key, _kind(target), cpu)
        self._by_workload.setdefault(k[:2], set()).add(cpu)
        if c < self.best.get(k, (math.inf, []))[0]:
            self.best[k] = (c, list(steps))

    def best_of(self, target: Any, workload_key: str) -> tuple[float, list, str | None] | None:
        """``(mean cost, step records, record CPU)`` of the fastest record that applies to a
        build for ``target`` (its kind; for CPU kinds its CPU, unless ``include_compatible``);
        None when there is none (warned once when only other CPUs' records exist)."""
        kind = _kind(target)
        cpus = self._by_workload.get((workload_key, kind))
        if not cpus:
            return None
        mine = cpu_of(target) if kind in ("llvm", "c") else None
        ok = [c for c in cpus if cpu_applies(c, mine)]
        if not ok:
            if not self.include_compatible:
                self._warn_other_cpu(target, mine)
                return None
            ok = list(cpus)
        return min((self.best[(workload_key, kind, c)] + (c,) for c in ok), key=lambda h: h[0])

    def default_cost(self, target: Any, workload_key: str, cpu: str | None) -> float:
        """The logged time of the default schedule for records of ``cpu`` (inf if none)."""
        return self.default_costs.get((workload_key, _kind(target), cpu), math.inf)

    def query(self, target: Any, workload_key: str) -> list | None:
        """The best record's steps; None (the default schedule) when there is none, when the
        records are of another CPU, or when the default schedule measured in the same tuning
        was not more than ``min_speedup`` times slower."""
        hit = self.best_of(target, workload_key)
        if hit is None or (self.default_cost(target, workload_key, hit[2])
                           <= hit[0] * self.min_speedup):
            return None
        return hit[1]

    def _warn_other_cpu(self, target: Any, mine: str | None) -> None:
        if self._warned:
            return
        self._warned = True
        every = sorted({c for (_, k, c) in self.best if c is not None and c != mine
                        and k == _kind(target)})
        warnings.warn(other_cpu_message("auto_scheduler.ApplyHistoryBest", every, mine, target,
                                        "those subgraphs keep their default schedules"),
                      RuntimeWarning, stacklevel=4)


class ApplyHistoryBestOrSample(ApplyHistoryBest):
    """TVM's name; here: as ApplyHistoryBest (a workload without a record keeps its default
    schedule)."""
