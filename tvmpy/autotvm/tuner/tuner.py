"""The tuner base class: the measure-and-learn loop every search strategy shares.

A :class:`Tuner` proposes configurations of a task's ``config_space`` (``next_batch``), has them
measured (``create_measure_batch`` from :mod:`tvmpy.autotvm.measure`), learns from the results
(``update``) and keeps the best one found (``best_config``, ``best_flops``,
``best_measure_pair``). Subclasses implement the strategy: ``next_batch``, ``has_next`` and,
when they learn, ``update``.

Bookkeeping shared by every tuner:

* ``visited`` holds the space indices already measured (or loaded from history). Tuners never
  propose a visited index, so no configuration is measured twice by one tuner.
* ``load_history(records)`` marks the configurations of records of the *same task* (same
  workload and target) visited and seeds the best from them. This is how a killed run resumes
  from its log without re-measuring::

      tuner = autotvm.tuner.RandomTuner(task)
      tuner.load_history(autotvm.record.load_from_file("mm.log"))
      tuner.tune(n_trial=200 - tuner.num_history, measure_option=...,
                 callbacks=[autotvm.callback.log_to_file("mm.log")])

  ``n_trial`` always counts the *new* measurements of this ``tune`` call; ``num_history`` is
  the number of distinct configurations taken from the history, so ``total - num_history``
  continues a run with a total budget. Model-based tuners override ``load_history`` to also
  learn from records of other tasks (transfer learning).

Measurement can be injected, for tests or custom harnesses: when ``measure_option`` (a dict)
holds a callable under ``"measure_batch"``, it is called with each batch of ``MeasureInput``
and must return one ``MeasureResult`` per input; ``"n_parallel"`` in the dict (or an
``n_parallel`` attribute of the callable) sets the batch size, 1 by default.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

logger = logging.getLogger("autotvm")

# Consecutive failed measurements after which the tune loop warns (tuning goes on).
ERROR_WARN_THRESHOLD = 150


def result_flops(task: Any, result: Any) -> float:
    """Throughput of one measurement: ``task.flop / mean(costs)``; 0.0 for a failed one.

    When the task counts no operations (``flop`` 0 or missing), ``1 / mean(costs)`` is used so
    that faster configurations still rank higher.
    """
    if result.error_no != 0 or not result.costs:
        return 0.0
    try:
        mean_cost = float(np.mean([float(c) for c in result.costs]))
    except (TypeError, ValueError):  # a malformed record: costs that are not numbers
        return 0.0
    if not math.isfinite(mean_cost) or mean_cost <= 0:
        return 0.0
    flop = float(getattr(task, "flop", 0) or 0)
    return (flop if flop > 0 else 1.0) / mean_cost


def same_task(task_a: Any, task_b: Any) -> bool:
    """Whether two tasks are the same workload on the same target (records are comparable)."""
    if task_a is task_b:
        return True
    wa = getattr(task_a, "workload", None)
    wb = getattr(task_b, "workload", None)
    if wa is None or wb is None or _canon(wa) != _canon(wb):
        return False
    ta, tb = getattr(task_a, "target", None), getattr(task_b, "target", None)
    if ta is None or tb is None:
        return True
    from ...target.target import same_target_as_built

    return same_target_as_built(ta, tb)  # "llvm" here == "llvm -mcpu=<this CPU>" of a log


def _canon(obj: Any) -> Any:
    """Workloads from a log come back with lists where the original had tuples."""
    if isinstance(obj, list | tuple):
        return tuple(_canon(x) for x in obj)
    return obj


class Tuner:
    """Base class of the tuners.

    Parameters
    ----------
    task : autotvm.task.Task
        The task to tune; its ``config_space`` is searched.
    """

    def __init__(self, task: Any, **kwargs: Any) -> None:
        if getattr(task, "config_space", None) is None:
            raise TypeError(f"Tuner needs a task with a config_space, got {type(task).__name__}")
        self.param = kwargs
        self.task = task
        self.space = task.config_space
        self.visited: set[int] = set()
        self.num_history = 0
        self.best_config: Any = None
        self.best_flops = 0.0
        self.best_measure_pair: tuple[Any, Any] | None = None
        self.best_iter = 0
        # number of trials left in the current tune() call (read by progress_bar)
        self.ttl: int | None = None
        self.n_trial = 0
        self.early_stopping: int | None = None

    # ---- strategy interface ---------------------------------------------------------------
    def has_next(self) -> bool:
        """Whether an unvisited configuration is left to propose."""
        return len(self.visited) < len(self.space)

    def next_batch(self, batch_size: int) -> list[Any]:
        """Up to ``batch_size`` unvisited configurations (``ConfigEntity``) to measure next."""
        raise NotImplementedError

    def update(self, inputs: Sequence[Any], results: Sequence[Any]) -> None:
        """Learn from measured ``inputs`` and their ``results`` (no-op in the base class)."""

    def load_history(self, records: Iterable[tuple[Any, Any]], min_seed_records: int = 500) -> None:
        """Take the records of this task from ``records`` (``(MeasureInput, MeasureResult)``).

        Their configurations, failed ones included, are marked visited (never measured again
        by this tuner) and the best successful one becomes ``best_config``. Records of another
        CPU are left out (one warning). Records of other tasks are ignored here;
        model-based tuners override this to learn from them (``min_seed_records`` is the
        least number of such records worth training on, unused by the base class).
        """
        del min_seed_records
        from ..record import split_by_cpu

        records = split_by_cpu(records, self.task.target, "Tuner.load_history",
                               "not resumed from")
        for inp, res in records:
            if not same_task(inp.task, self.task):
                continue
            index = int(inp.config.index)
            if not 0 <= index < len(self.space):
                continue
            if index not in self.visited:
                self.visited.add(index)
                self.num_history += 1
            flops = result_flops(self.task, res)
            if flops > self.best_flops:
                self.best_flops = flops
                self.best_config = inp.config
                self.best_measure_pair = (inp, res)

    # ---- the loop ---------------------------------------------------------------------------
    def tune(
        self,
        n_trial: int,
        measure_option: dict[str, Any],
        early_stopping: int | None = None,
        callbacks: Sequence[Callable[[Tuner, list[Any], list[Any]], None]] = (),
    ) -> None:
        """Measure up to ``n_trial`` new configurations, in batches.

        Parameters
        ----------
        n_trial : int
            Number of new measurements in this call (history loaded with ``load_history`` is
            not counted). Tuning stops earlier when the space is exhausted.
        measure_option : dict
            From ``autotvm.measure_option(builder, runner)``; or a dict with a custom
            ``"measure_batch"`` callable (see the module docstring).
        early_stopping : int, optional
            Stop when this many trials in a row brought no improvement of the best.
        callbacks : sequence of callable
            Each called as ``callback(tuner, inputs, results)`` after every batch, e.g.
            ``autotvm.callback.log_to_file(path)`` and ``autotvm.callback.progress_bar(n)``.
        """
        if isinstance(n_trial, bool) or not isinstance(n_trial, int | np.integer):
            raise TypeError(f"n_trial must be an int, got {n_trial!r}")
        if n_trial < 0:
            raise ValueError(f"n_trial must be >= 0, got {n_trial}")
        if early_stopping is not None and (
            isinstance(early_stopping, bool) or not isinstance(early_stopping, int | np.integer)
            or early_stopping < 1
        ):
            raise ValueError(f"early_stopping must be a positive int or None, got {early_stopping!r}")
        for cb in callbacks:
            if not callable(cb):
                raise TypeError(f"callback {cb!r} is not callable")
        measure_batch, n_parallel = _make_measure_batch(self.task, measure_option)
        try:
            self._tune_loop(int(n_trial), measure_batch, n_parallel, early_stopping, callbacks)
        finally:
            self.ttl = 0
            self._release()
            # close the builder/runner workers of a measure_batch made here (not an injected one)
            if measure_batch is not measure_option.get("measure_batch"):
                close = getattr(measure_batch, "close", None)
                if close is not None:
                    close()

    def _release(self) -> None:
        """Free what the tuner holds only while tuning (a cost model's worker processes)."""

    def _tune_loop(
        self,
        n_trial: int,
        measure_batch: Callable[[list[Any]], Sequence[Any]],
        n_parallel: int,
        early_stopping: int | None,
        callbacks: Sequence[Callable[[Tuner, list[Any], list[Any]], None]],
    ) -> None:
        from ..measure.measure import MeasureInput

        self.n_trial = n_trial
        self.early_stopping = early_stopping
        stop_after = early_stopping if early_stopping is not None else math.inf
        self.best_iter = 0
        i = error_ct = 0
        while i < n_trial and self.has_next():
            configs = self.next_batch(min(n_parallel, n_trial - i))
            if not configs:
                break
            inputs = [MeasureInput(self.task.target, self.task, cfg) for cfg in configs]
            results = list(measure_batch(inputs))
            if len(results) != len(inputs):
                raise RuntimeError(
                    f"measure_batch returned {len(results)} results for {len(inputs)} inputs"
                )
            for k, (inp, res) in enumerate(zip(inputs, results)):
                self.visited.add(int(inp.config.index))
                flops = result_flops(self.task, res)
                if res.error_no == 0:
                    error_ct = 0
                else:
                    error_ct += 1
                    logger.debug("autotvm: config %s failed: error %s", inp.config.index,
                                 res.error_no)
                if flops > self.best_flops:
                    self.best_flops = flops
                    self.best_config = inp.config
                    self.best_measure_pair = (inp, res)
                    self.best_iter = i + k
                # TVM's per-trial line: logging.getLogger("autotvm").setLevel(logging.DEBUG)
                logger.debug("No: %d\tGFLOPS: %.2f/%.2f\tresult: %s\t%s", i + k + 1,
                             flops / 1e9, self.best_flops / 1e9, res, inp.config)
            i += len(results)
            self.ttl = int(min(n_trial - i, self.best_iter + stop_after - i))
            if not self.has_next():
                self.ttl = 0
            self.update(inputs, results)
            for cb in callbacks:
                cb(self, inputs, results)
            if i >= self.best_iter + stop_after:
                logger.info("autotvm: early stopped after %d trials (best at %d)", i,
                            self.best_iter)
                break
            if error_ct == ERROR_WARN_THRESHOLD:
                logger.warning("autotvm: %d measurements in a row failed; last error: %s",
                               error_ct, results[-1].costs[:1])


def _make_measure_batch(task: Any, measure_option: Any) -> tuple[Callable, int]:
    """The measure function and the batch size for ``tune``."""
    if not isinstance(measure_option, dict):
        raise TypeError(
            "measure_option must be the dict from autotvm.measure_option(builder, runner), "
            f"got {type(measure_option).__name__}"
        )
    custom = measure_option.get("measure_batch")
    if custom is not None:
        if not callable(custom):
            raise TypeError("measure_option['measure_batch'] must be callable")
        measure_batch = custom
    else:
        from ..measure.measure import create_measure_batch

        measure_batch = create_measure_batch(task, measure_option)
    n_parallel = measure_option.get("n_parallel") or getattr(measure_batch, "n_parallel", None)
    if n_parallel is None:
        n_parallel = getattr(measure_option.get("builder"), "n_parallel", None)
    n_parallel = int(n_parallel or 1)
    if n_parallel < 1:
        raise ValueError(f"n_parallel must be >= 1, got {n_parallel}")
    return measure_batch, n_parallel
