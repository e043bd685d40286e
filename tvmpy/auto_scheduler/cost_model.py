"""Cost models of the search (TVM's ``auto_scheduler.cost_model``): ``RandomModel`` and
``XGBModel``.

A model is trained on measured states (``update(inputs, results)``) and scores candidates
(``predict(task, states)``: higher is better). ``XGBModel`` regresses, per task, the log of
the normalised throughput ``min_cost / cost`` (0 for the task's best measured state), so the
tasks of a task scheduler share one model; failed measurements count as throughput 1e-3.
The log target ranked held-out records best of the targets in :data:`OBJECTIVES`
(bench/auto_scheduler_model_rank.py; TVM's throughput-weighted regression ranked worst).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .feature import get_per_state_features

__all__ = ["CostModel", "RandomModel", "XGBModel"]

logger = logging.getLogger("auto_scheduler")


class CostModel:
    """Interface: ``update`` with measurements, ``predict`` scores (higher = faster)."""

    def update(self, inputs: Sequence[Any], results: Sequence[Any]) -> None:
        raise NotImplementedError

    def predict(self, task: Any, states: Sequence[Any]) -> np.ndarray:
        raise NotImplementedError


class RandomModel(CostModel):
    """Uniform random scores (for tests and as a baseline)."""

    def __init__(self, seed: int | None = None):
        self.rng = np.random.default_rng(seed)

    def update(self, inputs: Sequence[Any], results: Sequence[Any]) -> None:
        pass

    def predict(self, task: Any, states: Sequence[Any]) -> np.ndarray:
        return self.rng.uniform(0, 1, len(states))


def _mean_cost(res: Any) -> float:
    if res.error_no != 0 or not res.costs:
        return math.inf
    return float(sum(res.costs) / len(res.costs))


OBJECTIVES = ("throughput", "weighted", "rank", "log")
"""Training targets of :class:`XGBModel` (all: higher score = faster):

- ``throughput``: squared error on the task-normalised throughput ``best_cost / cost``;
- ``weighted``: the same, each sample weighted by its target (TVM's choice: errors on the
  fast candidates, the ones the search keeps, count most);
- ``rank``: xgboost's pairwise ranking within each task (only the order matters);
- ``log``: squared error on ``log2(best_cost / cost)`` (slow states spread out).
"""


def normalised_throughput(costs: Sequence[float], keys: Sequence[str]) -> np.ndarray:
    """``best / cost`` per task (``keys``); 0 for a failed (infinite) cost."""
    best: dict[str, float] = {}
    for k, c in zip(keys, costs):
        best[k] = min(best.get(k, math.inf), c)
    return np.array([0.0 if not math.isfinite(c) or not math.isfinite(best[k]) else best[k] / c
                     for k, c in zip(keys, costs)])


def train_booster(xs: np.ndarray, costs: Sequence[float], keys: Sequence[str],
                  objective: str = "log", seed: int = 0, num_boost_round: int = 80,
                  params: dict | None = None) -> Any:
    """An xgboost booster fitted to measured ``costs`` of feature rows ``xs`` (tasks by
    ``keys``); None when no measurement succeeded. ``params`` override xgboost's."""
    import xgboost as xgb

    if objective not in OBJECTIVES:
        raise ValueError(f"XGBModel: unknown objective {objective!r} (one of {OBJECTIVES})")
    y = normalised_throughput(costs, keys)
    if not (y > 0).any():
        return None
    # shallow trees on half the columns each: a few hundred records, ~300 features
    params = {"max_depth": 4, "gamma": 0.003, "min_child_weight": 1, "eta": 0.1,
              "colsample_bytree": 0.5, "objective": "reg:squarederror", "nthread": 1,
              "verbosity": 0, "seed": seed, **(params or {})}
    if objective == "rank":
        karr = np.array(keys)
        order = np.argsort(karr, kind="stable")  # rows grouped by task, tasks in sorted order
        d = xgb.DMatrix(xs[order], label=np.round(y[order] * 16))  # relevance grades 0..16
        d.set_group(np.unique(karr, return_counts=True)[1])
        params["objective"] = "rank:pairwise"
    elif objective == "log":
        d = xgb.DMatrix(xs, label=np.log2(np.maximum(y, 1e-3)))
    else:
        d = xgb.DMatrix(xs, label=y)
        if objective == "weighted":
            d.set_weight(np.maximum(y, 0.05))
    return xgb.train(params, d, num_boost_round=num_boost_round)


class XGBModel(CostModel):
    """Gradient-boosted trees (xgboost) over :mod:`.feature`'s state features, retrained on
    every measurement seen so far (``num_warmup_sample``: below that many samples the model
    scores at random, as TVM's). ``objective``: see :data:`OBJECTIVES`."""

    def __init__(self, num_warmup_sample: int = 16, seed: int | None = None,
                 model_file: str | None = None, adaptive_training: bool = False,
                 num_boost_round: int = 80, objective: str = "log"):
        del model_file, adaptive_training
        import xgboost  # noqa: F401 - fail here, not mid-search, when it is missing

        if objective not in OBJECTIVES:
            raise ValueError(f"XGBModel: unknown objective {objective!r} (one of {OBJECTIVES})")
        self.num_warmup_sample = num_warmup_sample
        self.num_boost_round = num_boost_round
        self.objective = objective
        self.seed = 0 if seed is None else seed
        self.rng = np.random.default_rng(seed)
        self.xs: list[np.ndarray] = []
        self.costs: list[float] = []
        self.keys: list[str] = []
        self.booster: Any = None

    def update(self, inputs: Sequence[Any], results: Sequence[Any]) -> None:
        if not inputs:
            return
        feats = get_per_state_features([i.state for i in inputs])
        for inp, res, f in zip(inputs, results, feats):
            if np.isnan(f).any():
                continue
            self.xs.append(f)
            self.costs.append(_mean_cost(res))
            self.keys.append(inp.task.workload_key)
        self._train()

    def _train(self) -> None:
        if len(self.xs) < self.num_warmup_sample:
            return
        booster = train_booster(np.stack(self.xs), self.costs, self.keys, self.objective,
                                self.seed, self.num_boost_round)
        if booster is not None:
            self.booster = booster

    def predict(self, task: Any, states: Sequence[Any]) -> np.ndarray:
        import xgboost as xgb

        if self.booster is None:
            return self.rng.uniform(0, 1, len(states))
        feats = get_per_state_features(states)
        bad = np.isnan(feats).any(axis=1)
        out = np.full(len(states), -math.inf)
        if (~bad).any():
            out[~bad] = self.booster.predict(xgb.DMatrix(feats[~bad]))
        return out

    def save(self, file_name: str) -> None:
        if self.booster is not None:
            self.booster.save_model(file_name)

    def load(self, file_name: str) -> None:
        import xgboost as xgb

        self.booster = xgb.Booster()
        self.booster.load_model(file_name)
