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

Likewise a record measured at another thread count (the ``num_cores`` of its hardware
parameters, measure_record.py) is not applied: a schedule searched at 1 thread is not the best
at 2 (the issue-28 EfficientNet stack's squeeze-and-excitation kernels, searched at 1 thread,
were slower than the defaults at 2), and its logged time, like the default schedule's, says
nothing about the time at another count. The build's count is ``num_threads`` when given, else
the target's ``-num-cores`` when given, else the parallel runtime's count in the building
process (``TVM_NUM_THREADS``, ...): build a library for 2 threads with
``ApplyHistoryBest(log, num_threads=2)`` from records searched at 2. ``include_compatible=True``
applies records of other counts too (those of the build's count first).
"""

from __future__ import annotations

import logging
import math
import os
import threading
import warnings
from typing import Any

from ..target.target import cpu_applies, cpu_of, other_cpu_message, record_cpu
from .measure_record import _parse_full, build_threads, parse_default_record, threads_apply

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
    issue 28). ``min_speedup=1`` applies every record that is faster at all.

    ``num_threads``: the thread count the built library will run at (see the module doc);
    records measured at another count are not applied."""

    def __init__(self, records: Any, n_lines: int | None = None, include_compatible: bool = False,
                 min_speedup: float = 1.05, num_threads: int | None = None):
        if not min_speedup >= 1.0:
            raise ValueError(f"ApplyHistoryBest: min_speedup must be >= 1, got {min_speedup!r}")
        if num_threads is not None and (not isinstance(num_threads, int) or num_threads < 1):
            raise ValueError(f"ApplyHistoryBest: num_threads must be a positive int, got "
                             f"{num_threads!r}")
        self.include_compatible = include_compatible
        self.min_speedup = float(min_speedup)
        self.num_threads = num_threads
        # (workload key, target kind, record CPU or None, measured threads or None)
        #   -> (mean cost, step records)
        self.best: dict[tuple[str, str, str | None, int | None], tuple[float, list]] = {}
        self._by_workload: dict[tuple[str, str], set[tuple[str | None, int | None]]] = {}
        #: the measured time of each task's default schedule (the log's "default" lines), keyed
        #: as ``best``
        self.default_costs: dict[tuple[str, str, str | None, int | None], float] = {}
        self._warned = False
        self._warned_threads = False
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
                          getattr(inp.task, "record_threads", None),
                          [s.to_record() for s in inp.state.transform_steps], res)

    def _load_file(self, path: str, n_lines: int | None) -> None:
        with open(path) as f:
            for n, line in enumerate(f, 1):
                if n_lines is not None and n > n_lines:
                    break
                if not line.strip() or line.lstrip().startswith("#"):
                    continue
                d = parse_default_record(line, with_threads=True)
                if d is not None:
                    key, target, cost, *th = d
                    threads = th[0] if th else None
                    self.default_costs[(key, _kind(target), record_cpu(target), threads)] = cost
                    continue  # (last wins)
                try:
                    key, target, threads, steps, res = _parse_full(line)
                except (ValueError, KeyError, TypeError, IndexError) as e:
                    logger.warning("%s:%d: skipped a bad record (%s)", path, n, e)
                    continue
                self._add(key, target, threads, steps, res)

    def _add(self, key: str, target: str, threads: int | None, steps: list, res: Any) -> None:
        if res.error_no != 0 or not res.costs:
            return
        c = sum(res.costs) / len(res.costs)
        cpu = record_cpu(target)
        k = (key, _kind(target), cpu, threads)
        self._by_workload.setdefault(k[:2], set()).add((cpu, threads))
        if c < self.best.get(k, (math.inf, []))[0]:
            self.best[k] = (c, list(steps))

    def build_threads(self, target: Any) -> int | None:
        """The thread count of a build for ``target`` (``num_threads``, else the target's
        ``-num-cores``, else this process's parallel runtime count; None: any)."""
        return build_threads(target, self.num_threads)

    def best_of(self, target: Any, workload_key: str
                ) -> tuple[float, list, str | None, int | None] | None:
        """``(mean cost, step records, record CPU, record thread count)`` of the fastest record
        that applies to a build for ``target`` (its kind; for CPU kinds its CPU and thread
        count, unless ``include_compatible``); None when there is none (warned once when only
        other CPUs' or thread counts' records exist)."""
        kind = _kind(target)
        tags = self._by_workload.get((workload_key, kind))
        if not tags:
            return None
        mine = cpu_of(target) if kind in ("llvm", "c") else None
        threads = self.build_threads(target) if kind in ("llvm", "c") else None
        cpu_ok = [t for t in tags if cpu_applies(t[0], mine)]
        ok = [t for t in cpu_ok if threads_apply(t[1], threads)]
        if not ok:
            if not self.include_compatible:
                if cpu_ok:
                    self._warn_other_threads(target, threads, {t[1] for t in cpu_ok})
                else:
                    self._warn_other_cpu(target, mine)
                return None
            ok = cpu_ok or list(tags)
        return min((self.best[(workload_key, kind) + t] + t for t in ok), key=lambda h: h[0])

    def default_cost(self, target: Any, workload_key: str, cpu: str | None,
                     threads: int | None = None) -> float:
        """The logged time of the default schedule for records of ``cpu`` measured at
        ``threads`` (default: the build's count; a default line without a count when there is
        none of it); inf if none."""
        kind = _kind(target)
        if threads is None and kind in ("llvm", "c"):
            threads = self.build_threads(target)
        for t in (threads, None):
            c = self.default_costs.get((workload_key, kind, cpu, t))
            if c is not None:
                return c
        return math.inf

    def query(self, target: Any, workload_key: str) -> list | None:
        """The best record's steps; None (the default schedule) when there is none, when the
        records are of another CPU or thread count, or when the default schedule measured in
        the same tuning was not more than ``min_speedup`` times slower."""
        hit = self.best_of(target, workload_key)
        if hit is None or (self.default_cost(target, workload_key, hit[2], hit[3])
                           <= hit[0] * self.min_speedup):
            return None
        return hit[1]

    def _warn_other_threads(self, target: Any, threads: int | None, others: set) -> None:
        if self._warned_threads:
            return
        self._warned_threads = True
        counts = ", ".join(str(t) for t in sorted(t for t in others if t is not None))
        warnings.warn(f"auto_scheduler.ApplyHistoryBest: records measured at {counts} thread(s) "
                      f"are not applied to this build for {threads} thread(s) (target {target}): "
                      "those subgraphs keep their default schedules. Tune at the thread count "
                      "the library runs at (TVM_NUM_THREADS), pass num_threads= for a build "
                      "for another count, or include_compatible=True to apply them anyway.",
                      RuntimeWarning, stacklevel=4)

    def _warn_other_cpu(self, target: Any, mine: str | None) -> None:
        if self._warned:
            return
        self._warned = True
        every = sorted({c for (_, k, c, _t) in self.best if c is not None and c != mine
                        and k == _kind(target)})
        warnings.warn(other_cpu_message("auto_scheduler.ApplyHistoryBest", every, mine, target,
                                        "those subgraphs keep their default schedules"),
                      RuntimeWarning, stacklevel=4)


class ApplyHistoryBestOrSample(ApplyHistoryBest):
    """TVM's name; here: as ApplyHistoryBest (a workload without a record keeps its default
    schedule)."""
