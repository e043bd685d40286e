"""``SearchTask``, ``TuningOptions``, ``HardwareParams`` (TVM's auto_scheduler names)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..target import as_target
from .compute_dag import ComputeDAG
from .workload_registry import WORKLOAD_FUNC_REGISTRY, make_workload_key, register_workload

__all__ = ["SearchTask", "TuningOptions", "HardwareParams"]


@dataclass
class HardwareParams:
    """What the sketch rules and annotation ask of the machine."""

    num_cores: int = field(default_factory=lambda: os.cpu_count() or 1)
    vector_unit_bytes: int = 64
    cache_line_bytes: int = 64
    max_innermost_split_factor: int = 64
    #: architectural vector registers (the register tile's budget): 32 with AVX-512 or on
    #: AArch64, 16 with AVX2/SSE on x86-64
    num_vector_registers: int = 16
    l1d_bytes: int = 32 * 1024

    @staticmethod
    def for_target(target: Any) -> HardwareParams:
        regs, l1 = 16, 32 * 1024
        try:
            tgt = as_target(target)
            bits = int(tgt.vector_width_bits)
            regs = 32 if bits >= 512 or tgt.arch in ("aarch64", "arm64") else 16
            l1 = int(tgt.cache_sizes.l1d)
        except Exception:  # noqa: BLE001 - a target without CPU features: a safe default
            bits = 256
        return HardwareParams(vector_unit_bytes=max(16, bits // 8), num_vector_registers=regs,
                              l1d_bytes=l1)


@dataclass
class TuningOptions:
    """``num_measure_trials`` candidates measured in batches of ``num_measures_per_round``,
    logged by ``measure_callbacks``; ``builder``/``runner`` as autotvm's (``"local"``)."""

    num_measure_trials: int = 0
    early_stopping: int | None = None
    num_measures_per_round: int = 64
    verbose: int = 1
    builder: Any = "local"
    runner: Any = "local"
    measure_callbacks: Sequence[Any] | None = None


class SearchTask:
    """A compute to tune for a target: ``SearchTask(func=f, args=(...), target="llvm")`` with
    ``f`` registered by ``@register_workload``, or ``SearchTask(workload_key=..., target=...)``,
    or ``SearchTask(compute_dag=dag, workload_key=..., target=...)``."""

    def __init__(self, func: Any = None, args: Sequence[Any] | None = None,
                 compute_dag: ComputeDAG | None = None, workload_key: str | None = None,
                 target: Any = None, target_host: Any = None,
                 hardware_params: HardwareParams | None = None, layout_rewrite_option: Any = None,
                 task_inputs: Any = None, desc: str = ""):
        del target_host, layout_rewrite_option, task_inputs
        if func is not None:
            if isinstance(func, str):
                name = func
            else:
                name = func.__name__
                if name not in WORKLOAD_FUNC_REGISTRY:  # TVM registers it on first use too
                    register_workload(func)
            workload_key = make_workload_key(name, list(args or ()))
        if workload_key is None:
            raise ValueError("SearchTask: give func= and args=, or workload_key=")
        if target is None:
            raise ValueError("SearchTask: target= is required (e.g. target=\"llvm\")")
        self.workload_key = workload_key
        self.compute_dag = compute_dag if compute_dag is not None else ComputeDAG(workload_key)
        if self.compute_dag.workload_key is None:
            self.compute_dag.workload_key = workload_key
        self.target = as_target(target)
        self.hardware_params = hardware_params or HardwareParams.for_target(self.target)
        self.desc = desc
        #: argument positions that are a model's weights (relay tasks: constants at every call)
        #: and the bytes of weights the model reads per run; ``LocalRunner(cold_weights=True)``
        #: times the task with those inputs as the model reads them (not in TVM)
        self.weight_inputs: tuple[int, ...] = ()
        self.model_weight_bytes = 0
        #: a task read from a log record: the thread count the record was measured at (None:
        #: not logged, or not read from a record)
        self.record_threads: int | None = None

    def __repr__(self) -> str:
        return f"SearchTask({self.workload_key}, target={self.target})"

    def tune(self, tuning_options: TuningOptions, search_policy: Any = None) -> None:
        """Search ``tuning_options.num_measure_trials`` candidates (``SketchPolicy`` with the
        XGB cost model unless ``search_policy`` is given)."""
        from .search_policy import SketchPolicy

        policy = search_policy or SketchPolicy(self, verbose=tuning_options.verbose)
        policy.search(tuning_options)

    def apply_best(self, log_file: str, include_compatible: bool = False,
                   layout_rewrite_option: Any = None) -> tuple[Any, list[Any]]:
        """The schedule of the best record of this task in ``log_file``: ``(sch, args)``."""
        from .measure_record import load_best_record

        del include_compatible, layout_rewrite_option
        inp, _ = load_best_record(log_file, self.workload_key, str(self.target))
        if inp is None:
            raise RuntimeError(f"apply_best: {log_file} holds no valid record of {self}")
        return self.compute_dag.apply_steps_from_state(inp.state)

    def print_best(self, log_file: str) -> str:
        from .measure_record import load_best_record

        inp, _ = load_best_record(log_file, self.workload_key, str(self.target))
        if inp is None:
            raise RuntimeError(f"print_best: {log_file} holds no valid record of {self}")
        return self.compute_dag.print_python_code_from_state(inp.state)
