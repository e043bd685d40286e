"""Dispatch contexts (TVM's ``auto_scheduler.dispatcher``): which measured state schedules a
workload when ``relay.build`` runs with ``PassContext(config={"relay.backend.use_auto_scheduler":
True})``.

``ApplyHistoryBest(records)`` keeps, per (workload key, target kind), the step history of the
fastest valid record of a log (or of ``(MeasureInput, MeasureResult)`` pairs), unless the log
also holds a faster measurement of the task's default schedule (a ``"default"`` line, written
by the task scheduler for relay's fused subgraphs): then the default schedule stays. Records are read
as step lists, without building their computes: a log of relay tasks applies in a process that
never extracted them.
"""

from __future__ import annotations

import logging
import math
import os
import threading
from typing import Any

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
    ``(MeasureInput, MeasureResult)`` pairs. ``n_lines``: read only the first lines."""

    def __init__(self, records: Any, n_lines: int | None = None, include_compatible: bool = False):
        del include_compatible
        self.best: dict[tuple[str, str], tuple[float, list]] = {}
        #: the measured time of each task's default schedule (the log's "default" lines)
        self.default_costs: dict[tuple[str, str], float] = {}
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
                    k = (d[0], _kind(d[1]))
                    self.default_costs[k] = d[2]  # the last (re-timed) line wins
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
        k = (key, _kind(target))
        if c < self.best.get(k, (math.inf, []))[0]:
            self.best[k] = (c, list(steps))

    def query(self, target: Any, workload_key: str) -> list | None:
        """The best record's steps; None (the default schedule) when there is none, or when
        the default schedule measured in the same tuning was at least as fast."""
        k = (workload_key, _kind(target))
        hit = self.best.get(k)
        if hit is None or self.default_costs.get(k, math.inf) <= hit[0]:
            return None
        return hit[1]


class ApplyHistoryBestOrSample(ApplyHistoryBest):
    """TVM's name; here: as ApplyHistoryBest (a workload without a record keeps its default
    schedule)."""
