"""Measurement API: what a tuner hands to the measurer and what it gets back (TVM's names).

- ``MeasureInput(target, task, config)``: one candidate: a ``Task`` (autotvm/task/task.py) and one
  ``ConfigEntity`` of its space, for a ``Target``.
- ``MeasureResult(costs, error_no, all_cost, timestamp)``: ``costs`` are seconds per run of the
  kernel, one per repeat, when ``error_no == NO_ERROR``; otherwise ``costs`` is a 1-tuple holding
  the error message (a ``str``). ``all_cost`` is the wall time spent on this candidate (build +
  run, seconds), ``timestamp`` the ``time.time()`` when its measurement ended.
- ``measure_option(builder, runner)`` bundles a builder and a runner (``LocalBuilder``,
  ``LocalRunner``); ``create_measure_batch(task, option)`` returns ``measure_batch(inputs) ->
  results``: builds the candidates in parallel worker processes, then runs them one by one in a
  runner process; results come back in input order, one per input, never raising for a bad
  candidate.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

__all__ = ["MeasureInput", "MeasureResult", "MeasureErrorNo", "BuildResult", "Builder", "Runner",
           "measure_option", "create_measure_batch"]


class MeasureInput(NamedTuple):
    """One candidate to measure: ``target``, ``task`` and ``config`` (a ConfigEntity)."""

    target: Any
    task: Any
    config: Any


class MeasureResult(NamedTuple):
    """Outcome of one measurement (see the module docstring for the fields)."""

    costs: tuple
    error_no: int
    all_cost: float
    timestamp: float


class MeasureErrorNo(enum.IntEnum):
    """Kinds of measurement outcome (TVM's numbering)."""

    NO_ERROR = 0
    INSTANTIATION_ERROR = 1  # the template raised for this config
    COMPILE_HOST = 2  # lowering / host code generation failed
    COMPILE_DEVICE = 3  # device code generation failed
    RUNTIME_DEVICE = 4  # loading or running the kernel failed, or the process crashed
    WRONG_ANSWER = 5  # outputs differ from the reference
    BUILD_TIMEOUT = 6
    RUN_TIMEOUT = 7
    UNKNOWN_ERROR = 8


class BuildResult(NamedTuple):
    """What a builder returns per input: the exported library (``filename``) and the arguments'
    ``(shape, dtype)`` list, or ``error_no``/``error`` (a message); ``time_cost`` in seconds."""

    filename: str | None
    arg_info: tuple
    error_no: int
    error: str | None
    time_cost: float


class Builder:
    """Base class of builders: ``build(measure_inputs) -> list[BuildResult]`` (input order)."""

    n_parallel: int = 1
    timeout: float = 10.0

    def set_task(self, task: Any) -> None:
        """Prepare for measuring ``task`` (called once by ``create_measure_batch``)."""

    def build(self, measure_inputs: Sequence[MeasureInput]) -> list[BuildResult]:
        raise NotImplementedError

    def close(self) -> None:
        """Stop worker processes and remove temporary files."""


class Runner:
    """Base class of runners: ``run(measure_inputs, build_results) -> list[MeasureResult]``."""

    timeout: float = 10.0

    def set_task(self, task: Any, builder: Builder | None = None) -> None:
        """Prepare for measuring ``task`` (called once by ``create_measure_batch``)."""

    def run(self, measure_inputs: Sequence[MeasureInput],
            build_results: Sequence[BuildResult]) -> list[MeasureResult]:
        raise NotImplementedError

    def close(self) -> None:
        """Stop the runner process."""


def measure_option(builder: Any = None, runner: Any = None) -> dict:
    """Bundle a builder and a runner: ``{"builder": builder, "runner": runner}``.

    ``builder``/``runner`` default to ``LocalBuilder()`` / ``LocalRunner()``; the strings
    ``"local"`` are accepted as in TVM."""
    from .local_builder import LocalBuilder
    from .local_runner import LocalRunner

    if builder is None or builder == "local":
        builder = LocalBuilder()
    if runner is None or runner == "local":
        runner = LocalRunner()
    if not isinstance(builder, Builder):
        raise TypeError(f"measure_option: builder must be a Builder (e.g. LocalBuilder()), "
                        f"got {type(builder).__name__}")
    if not isinstance(runner, Runner):
        raise TypeError(f"measure_option: runner must be a Runner (e.g. LocalRunner()), "
                        f"got {type(runner).__name__}")
    return {"builder": builder, "runner": runner}


def create_measure_batch(task: Any, option: dict) -> Callable[[Sequence[MeasureInput]],
                                                               list[MeasureResult]]:
    """Return ``measure_batch(inputs) -> list[MeasureResult]`` for candidates of ``task``.

    The returned callable has attributes ``n_parallel`` (a good batch size: the builder's
    parallelism, or the runner's when larger, e.g. an RPCRunner's devices), ``builder``,
    ``runner`` and ``close()``."""
    if not isinstance(option, dict) or "builder" not in option or "runner" not in option:
        raise TypeError("create_measure_batch: option must be the dict of measure_option(...)")
    builder, runner = option["builder"], option["runner"]
    builder.set_task(task)
    runner.set_task(task, builder)

    def measure_batch(measure_inputs: Sequence[MeasureInput]) -> list[MeasureResult]:
        inputs = list(measure_inputs)
        for inp in inputs:
            if not isinstance(inp, MeasureInput):
                raise TypeError(f"measure_batch: expected MeasureInput, got {type(inp).__name__}")
        if not inputs:
            return []
        build_results = builder.build(inputs)
        return runner.run(inputs, build_results)

    # a batch keeps every worker busy: the builder's processes, or a runner's devices (RPCRunner)
    measure_batch.n_parallel = max(builder.n_parallel,  # type: ignore[attr-defined]
                                   int(getattr(runner, "n_parallel", 1) or 1))
    measure_batch.builder = builder  # type: ignore[attr-defined]
    measure_batch.runner = runner  # type: ignore[attr-defined]

    def close() -> None:
        builder.close()
        runner.close()

    measure_batch.close = close  # type: ignore[attr-defined]
    return measure_batch
