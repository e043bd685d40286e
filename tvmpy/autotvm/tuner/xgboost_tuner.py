"""XGBTuner (TVM's autotvm.tuner.XGBTuner): model-based tuning with an XGBoost cost model and
parallel simulated annealing over its predictions."""

from __future__ import annotations

from typing import Any

from .model_based_tuner import ModelBasedTuner, ModelOptimizer
from .sa_model_optimizer import SimulatedAnnealingOptimizer
from .xgboost_cost_model import XGBoostCostModel

__all__ = ["XGBTuner"]

_SA_DEFAULTS = {
    "knob": {"n_iter": 500, "parallel_size": 128, "early_stop": 50},
    "program": {"n_iter": 100, "parallel_size": 64, "early_stop": 25, "timeout": 30.0},
}


class XGBTuner(ModelBasedTuner):
    """Tuner that learns an XGBoost model of the measurements and plans with it.

    Parameters
    ----------
    task : autotvm.task.Task
    plan_size : int
        Refit and re-plan every ``plan_size`` measurements.
    feature_type : "itervar" | "knob" | "curve"
        ``"itervar"``: features of the lowered loop program (most accurate, ~2-3 ms per config);
        ``"knob"``: the config's knob values (fastest, task-specific); ``"curve"``: sampled
        reuse curves (task-independent, for transfer learning).
    loss_type : "rank" | "reg"
    num_threads : int or None
        XGBoost threads and feature-extraction worker processes (None: 1, in-process).
    optimizer : "sa" or a ModelOptimizer
    diversity_filter_ratio : float or None
        See :class:`ModelBasedTuner`.
    log_interval : int
    seed : int or None
        Seed of the tuner's and the optimizer's random choices.
    sa_params : dict or None
        Keyword arguments of :class:`SimulatedAnnealingOptimizer` (``n_iter``,
        ``parallel_size``, ``early_stop``, ``temp``, ``persistent``, ``timeout``). Defaults:
        TVM's (500 iterations, 128 walkers, early stop 50) for ``"knob"`` features; for program
        features, whose extraction costs a lowering per new point (~2.5 ms for a 2-level tiled
        GEMM, ~15 ms for an x86 conv2d here), at most 100 iterations of 64 walkers, early stop
        25 (a plan explores at most 6400 points), and a 30 s timeout per plan.
    """

    def __init__(self, task: Any, plan_size: int = 64, feature_type: str = "itervar",
                 loss_type: str = "rank", num_threads: int | None = None,
                 optimizer: Any = "sa", diversity_filter_ratio: float | None = None,
                 log_interval: int = 50, seed: int | None = None,
                 sa_params: dict | None = None) -> None:
        cost_model = XGBoostCostModel(task, feature_type=feature_type, loss_type=loss_type,
                                      num_threads=num_threads, log_interval=log_interval,
                                      seed=0 if seed is None else int(seed))
        if isinstance(optimizer, str) and optimizer == "sa":
            params = dict(_SA_DEFAULTS["knob" if feature_type == "knob" else "program"])
            params.update(sa_params or {})
            optimizer = SimulatedAnnealingOptimizer(task, log_interval=log_interval, seed=seed,
                                                    **params)
        elif not isinstance(optimizer, ModelOptimizer):
            raise ValueError(f"optimizer must be 'sa' or a ModelOptimizer, got {optimizer!r}")
        super().__init__(task, cost_model, optimizer, plan_size, diversity_filter_ratio, seed)
