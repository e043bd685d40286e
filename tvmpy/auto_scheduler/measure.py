"""Measuring states: autotvm's builder and runner, driven with auto_scheduler's inputs.

A candidate travels to autotvm's ``LocalBuilder`` as an autotvm ``MeasureInput`` whose task is
a :class:`_MeasureTask` (picklable: the workload key and its registered function) and whose
config is the state's list of step records; the build worker replays the steps on the DAG
(``instantiate``). autotvm's ``LocalRunner`` checks every candidate against the reference
outputs of the task's untransformed schedule (``config_space.get(0)``, None, is the reference),
so a wrong schedule is ``WRONG_ANSWER``, never a fast record. A workload deployed inside a
larger program (``workload_registry.deployed_program``, e.g. the rnn cell) is built, checked
and timed as that program, its reference being its default schedule in the same form (the hook
at the end of this module).

``auto_scheduler.LocalBuilder`` is autotvm's builder, whose workers serve every task (a task
is pickled once and sent to a worker with its first build there), so switching between a
model's tasks restarts no worker; the TaskScheduler shares one builder across its tasks. A
batch is built in parallel (the builder's ``n_parallel`` worker processes, default one per
CPU), then measured one candidate at a time in the runner's process (never two measurements at
once). :attr:`ProgramMeasurer.batches` keeps each batch's wall times (bench/
auto_scheduler_build_time.py reports latency and candidates per second from them). The build
a candidate is measured with is the build ``relay.build`` gives its schedule under
``ApplyHistoryBest``: the same replayed steps, ``lower_primfunc`` pipeline and LLVM O3 (cheaper
pipelines were measured and rejected: see bench/RESULTS.md, issue 28 point 5).
"""

from __future__ import annotations

import pickle
import time
from collections.abc import Sequence
from typing import Any, NamedTuple

from ..autotvm.measure import measure as atm
from ..autotvm.measure.local_builder import LocalBuilder as _AutotvmLocalBuilder

__all__ = ["MeasureInput", "MeasureResult", "MeasureErrorNo", "ProgramMeasurer", "BatchStats",
           "LocalBuilder", "LocalRunner"]

MeasureErrorNo = atm.MeasureErrorNo


class MeasureInput(NamedTuple):
    """A state of a task to measure."""

    task: Any
    state: Any


class MeasureResult(NamedTuple):
    """``costs`` in seconds (one per repeat) when ``error_no == 0``."""

    costs: tuple
    error_no: int
    error_msg: str
    all_cost: float
    timestamp: float


def LocalBuilder(timeout: float = 15, n_parallel: int | None = None, **kw: Any) -> Any:  # noqa: N802
    """TVM's ``auto_scheduler.LocalBuilder``: autotvm's builder (its workers serve every task:
    each task is sent once per worker, see autotvm's ``local_builder``)."""
    return _AutotvmLocalBuilder(timeout=timeout, n_parallel=n_parallel, **kw)


def LocalRunner(timeout: float = 10, number: int = 3, repeat: int = 1, min_repeat_ms: float = 0,  # noqa: N802
                enable_cpu_cache_flush: bool = False, **kw: Any) -> Any:
    """TVM's ``auto_scheduler.LocalRunner``: autotvm's runner, correctness checked."""
    from ..autotvm.measure.local_runner import LocalRunner as R

    return R(number=number, repeat=repeat, min_repeat_ms=min_repeat_ms, timeout=timeout,
             enable_cpu_cache_flush=enable_cpu_cache_flush, **kw)


class _Space:
    """``config_space`` of the adapter: entry 0 (None) is the reference (see ``instantiate``)."""

    def __len__(self) -> int:
        return 1

    def get(self, index: int) -> None:
        return None


def _dumps_func(func: Any) -> bytes:
    """The workload function by value (with cloudpickle) unless it belongs to tvmpy: a build
    worker is a fresh interpreter that may not be able to import the user's module (a test
    folder, a notebook, a script's ``__main__``)."""
    import sys

    import cloudpickle  # type: ignore[import-untyped]

    mod = sys.modules.get(getattr(func, "__module__", "") or "")
    by_value = mod is not None and not mod.__name__.startswith("tvmpy") \
        and mod.__name__ not in ("__main__", "__mp_main__")
    if by_value:
        cloudpickle.register_pickle_by_value(mod)
    try:
        return cloudpickle.dumps(func)
    finally:
        if by_value:
            cloudpickle.unregister_pickle_by_value(mod)


class _MeasureTask:
    """What autotvm's builder and runner need of a task: ``name``, ``instantiate(config)``,
    ``config_space``; pickled as the workload key and the registered function."""

    def __init__(self, task: Any):
        from .workload_registry import decode_workload_key, lookup_workload

        self.workload_key = task.workload_key
        self.target = task.target
        name, _ = decode_workload_key(self.workload_key)
        self._func_name = name
        self._func = lookup_workload(name)
        self._dag = task.compute_dag
        self.name = f"auto_scheduler:{name}"
        self.config_space = _Space()
        # read by the runner's cold_weights (in this process: not pickled)
        self.weight_inputs = tuple(getattr(task, "weight_inputs", ()))
        self.model_weight_bytes = int(getattr(task, "model_weight_bytes", 0))

    def instantiate(self, config: Sequence[Any] | None) -> tuple[Any, list[Any]]:
        """The program a state (its step records) is measured as; ``None``: the reference."""
        from .loop_state import State
        from .transform_step import step_from_record

        if config is None:
            return _reference_program(self._dag, self.workload_key)
        state = State(self._dag, [step_from_record(r) for r in config])
        return _deployed(self.workload_key, *self._dag.apply_steps_from_state(state))

    def __getstate__(self) -> dict:
        if self._func is None:
            raise TypeError(f"workload {self._func_name!r} is not registered: its task cannot "
                            "be sent to the build workers")
        return {"key": self.workload_key, "target": str(self.target),
                "name": self._func_name, "func": _dumps_func(self._func)}

    def __setstate__(self, st: dict) -> None:
        from ..target import as_target
        from .compute_dag import ComputeDAG
        from .workload_registry import WORKLOAD_FUNC_REGISTRY

        func = pickle.loads(st["func"])
        WORKLOAD_FUNC_REGISTRY.setdefault(st["name"], func)
        self.workload_key, self.target = st["key"], as_target(st["target"])
        self._func_name, self._func = st["name"], func
        self._dag = ComputeDAG(self.workload_key)
        self.name = f"auto_scheduler:{st['name']}"
        self.config_space = _Space()


class BatchStats(NamedTuple):
    """One measured batch: its size, the successful builds, the wall seconds of the (parallel)
    build and of the (sequential) runs."""

    n: int
    built: int
    build_wall: float
    run_wall: float


class ProgramMeasurer:
    """Build and run states in batches; call the measure callbacks with each batch."""

    def __init__(self, task: Any, builder: Any = "local", runner: Any = "local",
                 callbacks: Sequence[Any] | None = None, verbose: int = 0,
                 close_builder: bool = True):
        self._close_builder = close_builder  # False: the builder is shared (TaskScheduler)
        if builder == "local":
            builder = LocalBuilder()
        if runner == "local":
            runner = LocalRunner()
        self.task = task
        self.callbacks = list(callbacks or [])
        self.verbose = verbose
        self._mtask = _MeasureTask(task)
        self._batch = atm.create_measure_batch(self._mtask, atm.measure_option(builder, runner))
        self.build_times: list[float] = []
        self.batches: list[BatchStats] = []
        self.best_cost = float("inf")
        self.best_state: Any = None
        self.ct = 0

    def measure(self, policy: Any, states: Sequence[Any]) -> list[MeasureResult]:
        inputs = [MeasureInput(self.task, s) for s in states]
        ainputs = [atm.MeasureInput(str(self.task.target), self._mtask,
                                    [st.to_record() for st in s.transform_steps]) for s in states]
        builder = self._batch.builder  # type: ignore[attr-defined]
        runner = self._batch.runner  # type: ignore[attr-defined]
        t0 = time.perf_counter()
        bres = builder.build(ainputs)
        t1 = time.perf_counter()
        self.build_times += [b.time_cost for b in bres if b.error_no == 0]
        ares = runner.run(ainputs, bres)
        self.batches.append(BatchStats(len(states), sum(b.error_no == 0 for b in bres), t1 - t0,
                                       time.perf_counter() - t1))
        results = []
        runs = _runs(self.task.workload_key)
        for s, r in zip(states, ares):
            msg = "" if r.error_no == 0 else str(r.costs[0])
            res = MeasureResult(tuple(c / runs for c in r.costs) if r.error_no == 0 else (),
                                int(r.error_no), msg,
                                float(r.all_cost), float(r.timestamp or time.time()))
            results.append(res)
            self.ct += 1
            if res.error_no == 0:
                c = sum(res.costs) / len(res.costs)
                if c < self.best_cost:
                    self.best_cost, self.best_state = c, s
            if self.verbose:
                what = (f"{1e3 * sum(res.costs) / len(res.costs):.4g} ms" if res.error_no == 0
                        else f"error {res.error_no}: {msg[:120]}")
                print(f"#{self.ct}: {what}")
        for cb in self.callbacks:
            cb(policy, inputs, results)
        return results

    def close(self) -> None:
        if self._close_builder:
            self._batch.close()  # type: ignore[attr-defined]
        else:
            self._batch.runner.close()  # type: ignore[attr-defined]


# ---- the deployed-form hook (workload_registry.deployed_program) --------------------------------
# A workload whose schedule is deployed inside a larger program (the rnn cell: the recurrence
# kernel around one step) is built and checked as that program; the reference is the workload's
# ``default_schedule`` in the same form (else the deployed empty history), and a cost is divided
# by the runs of the task that program holds (``deployed_runs``).


def _deployed(key: str, sch: Any, args: list[Any]) -> tuple[Any, list[Any]]:
    from .workload_registry import deployed_program

    return deployed_program(key, sch, args)


def _runs(key: str) -> int:
    from .workload_registry import deployed_runs

    return deployed_runs(key)


def _reference_program(dag: Any, key: str) -> tuple[Any, list[Any]]:
    from .loop_state import State
    from .workload_registry import decode_workload_key, lookup_workload

    name, args = decode_workload_key(key)
    func = lookup_workload(name)
    if getattr(func, "deployed_program", None) is not None \
            and getattr(func, "default_schedule", None) is not None:
        return func.default_schedule(*args)  # type: ignore[union-attr]
    return _deployed(key, *dag.apply_steps_from_state(State(dag, [])))
