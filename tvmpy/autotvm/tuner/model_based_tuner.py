"""Model-based tuning (TVM's autotvm.tuner.model_based_tuner): a cost model learned from the
measurements, and an optimizer that searches the space for the model's best predictions.

:class:`ModelBasedTuner` proposes configurations from ``trials``, the plan computed by the
optimizer from the current model. Every ``plan_size`` new measurements the model is refit and a
new plan is computed. The last 5% of each plan (and everything before the first plan) is an
epsilon-greedy share of random unvisited configurations. With ``diversity_filter_ratio`` the
optimizer returns ``ratio * plan_size`` candidates and a submodular pick keeps ``plan_size`` of
them that differ in many knobs.

A configuration index is a mixed-radix number over the knobs (``space.space_map`` order, the
first knob varies fastest); :func:`point2knob` / :func:`knob2point` convert.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from .tuner import Tuner, result_flops

logger = logging.getLogger("autotvm")

__all__ = ["CostModel", "ModelOptimizer", "ModelBasedTuner", "point2knob", "knob2point",
           "random_walk", "submodular_pick", "space_dims"]


class CostModel:
    """A model that predicts the relative speed of configurations (higher = faster)."""

    def fit(self, xs: Sequence[int], ys: Sequence[float], plan_size: int) -> None:
        """Fit on configuration indices ``xs`` and their measured throughput ``ys``."""
        raise NotImplementedError

    def fit_log(self, records: Iterable[tuple[Any, Any]], plan_size: int,
                min_seed_records: int = 500) -> bool:
        """Fit on measurement records (possibly of other tasks); False if too few usable."""
        raise NotImplementedError

    def predict(self, xs: Sequence[int], output_margin: bool = False) -> np.ndarray:
        """Scores of configuration indices ``xs`` (only their order is meaningful)."""
        raise NotImplementedError

    def load_basemodel(self, base_model: CostModel) -> None:
        """Use ``base_model`` (trained on history) as the prior of this model."""
        raise NotImplementedError

    def spawn_base_model(self) -> CostModel:
        """A fresh model of the same kind, to be trained on history."""
        raise NotImplementedError

    def close(self) -> None:
        """Free resources held between calls (worker processes); the model stays usable."""


class ModelOptimizer:
    """Searches a config space for the configurations a cost model scores highest."""

    def find_maximums(self, model: CostModel, num: int, exclusive: set[int]) -> list[int]:
        """Up to ``num`` distinct indices, not in ``exclusive``, best predicted first."""
        raise NotImplementedError


def space_dims(space: Any) -> list[int]:
    """Sizes of the knobs of ``space`` in ``space_map`` order."""
    dims = getattr(space, "dims", None)
    if callable(dims):
        return [int(d) for d in dims()]
    return [len(v) for v in space.space_map.values()]


def point2knob(point: int, dims: Sequence[int]) -> list[int]:
    """Index -> per-knob indices (the first knob varies fastest)."""
    knob = []
    for d in dims:
        knob.append(point % d)
        point //= d
    return knob


def knob2point(knob: Sequence[int], dims: Sequence[int]) -> int:
    """Per-knob indices -> index (inverse of :func:`point2knob`)."""
    point = 0
    for k, d in zip(reversed(knob), reversed(dims)):
        point = point * d + int(k)
    return point


def random_walk(point: int, dims: Sequence[int], rng: np.random.Generator) -> int:
    """A neighbour of ``point``: one knob (of more than one value) changed to another value."""
    movable = [i for i, d in enumerate(dims) if d > 1]
    if not movable:
        return point
    knob = point2knob(point, dims)
    i = movable[int(rng.integers(len(movable)))]
    new = int(rng.integers(dims[i] - 1))
    knob[i] = new if new < knob[i] else new + 1
    return knob2point(knob, dims)


def submodular_pick(scores: np.ndarray, knobs: Sequence[Sequence[int]], n_pick: int,
                    knob_weight: float = 1.0) -> list[int]:
    """Greedily pick ``n_pick`` positions maximising score plus ``knob_weight`` per knob value
    not yet covered by the picked ones (TVM's diversity filter)."""
    n = len(scores)
    if n != len(knobs):
        raise ValueError(f"submodular_pick: {n} scores but {len(knobs)} knobs")
    n_knobs = len(knobs[0]) if n else 0
    covered: list[set[int]] = [set() for _ in range(n_knobs)]
    remain = list(range(n))
    picked: list[int] = []
    for _ in range(min(n_pick, n)):
        best_j, best_gain = -1, -np.inf
        for j in remain:
            gain = float(scores[j]) + knob_weight * sum(
                1 for k in range(n_knobs) if knobs[j][k] not in covered[k])
            if gain > best_gain:
                best_j, best_gain = j, gain
        picked.append(best_j)
        remain.remove(best_j)
        for k in range(n_knobs):
            covered[k].add(knobs[best_j][k])
    return picked


class ModelBasedTuner(Tuner):
    """Tuner driven by a cost model and a model optimizer.

    Parameters
    ----------
    task : autotvm.task.Task
    cost_model : CostModel
    model_optimizer : ModelOptimizer
    plan_size : int
        Refit the model and re-plan after every ``plan_size`` new measurements.
    diversity_filter_ratio : float or None
        If set, the optimizer proposes ``ratio * plan_size`` candidates and the most diverse
        ``plan_size`` are kept.
    seed : int or None
        Seed of the random choices (epsilon-greedy share).
    """

    def __init__(self, task: Any, cost_model: CostModel, model_optimizer: ModelOptimizer,
                 plan_size: int, diversity_filter_ratio: float | None = None,
                 seed: int | None = None) -> None:
        super().__init__(task)
        if isinstance(plan_size, bool) or not isinstance(plan_size, int | np.integer) \
                or plan_size < 1:
            raise ValueError(f"plan_size must be a positive int, got {plan_size!r}")
        if diversity_filter_ratio is not None and not diversity_filter_ratio >= 1:
            raise ValueError(f"diversity_filter_ratio must be >= 1 or None, got "
                             f"{diversity_filter_ratio!r}")
        self.cost_model = cost_model
        self.model_optimizer = model_optimizer
        self.plan_size = int(plan_size)
        self.diversity_filter_ratio = diversity_filter_ratio
        self.dims = space_dims(self.space)
        self.space_len = len(self.space)
        self.rng = np.random.default_rng(seed)
        self.trials: list[int] = []
        self.trial_pt = 0
        self.xs: list[int] = []
        self.ys: list[float] = []
        self.flops_max = 0.0
        self.train_ct = 0

    def _random_unvisited(self) -> int:
        for _ in range(64):
            index = int(self.rng.integers(self.space_len))
            if index not in self.visited:
                return index
        free = [i for i in range(self.space_len) if i not in self.visited] \
            if self.space_len <= 1 << 20 else []
        if free:
            return free[int(self.rng.integers(len(free)))]
        while True:  # huge, nearly exhausted space: keep drawing
            index = int(self.rng.integers(self.space_len))
            if index not in self.visited:
                return index

    def next_batch(self, batch_size: int) -> list[Any]:
        ret: list[Any] = []
        while len(ret) < batch_size and len(self.visited) < self.space_len:
            while self.trial_pt < len(self.trials) and self.trials[self.trial_pt] in self.visited:
                self.trial_pt += 1
            if self.trial_pt >= len(self.trials) - int(0.05 * self.plan_size):
                index = self._random_unvisited()  # no plan, or the epsilon-greedy tail
            else:
                index = int(self.trials[self.trial_pt])
                self.trial_pt += 1
            ret.append(self.space.get(index))
            self.visited.add(index)
        return ret

    def update(self, inputs: Sequence[Any], results: Sequence[Any]) -> None:
        for inp, res in zip(inputs, results):
            index = int(inp.config.index)
            flops = result_flops(self.task, res)
            self.xs.append(index)
            self.ys.append(flops)
            self.flops_max = max(self.flops_max, flops)
            self.visited.add(index)
        if len(self.xs) >= self.plan_size * (self.train_ct + 1) and self.flops_max > 1e-6:
            self.cost_model.fit(self.xs, self.ys, self.plan_size)
            self._plan(self.cost_model)
            self.train_ct += 1

    def _release(self) -> None:
        self.cost_model.close()

    def _plan(self, model: CostModel) -> None:
        if self.diversity_filter_ratio:
            n_cand = int(self.plan_size * self.diversity_filter_ratio)
            candidate = self.model_optimizer.find_maximums(model, n_cand, self.visited)
            scores = model.predict(candidate) if candidate else np.zeros(0)
            knobs = [point2knob(x, self.dims) for x in candidate]
            pick = submodular_pick(0 * scores, knobs, self.plan_size, knob_weight=1)
            maximums = [candidate[i] for i in pick]
        else:
            maximums = self.model_optimizer.find_maximums(model, self.plan_size, self.visited)
        self.trials = [int(x) for x in maximums]
        self.trial_pt = 0

    def load_history(self, records: Iterable[tuple[Any, Any]], min_seed_records: int = 500) -> None:
        """Resume from this task's records (as :class:`Tuner`) and learn from all of them:
        same-task records become training data of the model; records of every task train a
        base model (transfer learning) that seeds the first plan and becomes the model's prior.
        """
        from ..record import split_by_cpu

        # records of another CPU neither resume this task nor teach the transfer model
        records = split_by_cpu(records, self.task.target, f"{type(self).__name__}.load_history",
                               "not resumed from nor learned from")
        n_before = len(self.visited)
        super().load_history(records, min_seed_records)
        if len(self.visited) > n_before:
            from .tuner import same_task

            for inp, res in records:
                if same_task(inp.task, self.task) and 0 <= int(inp.config.index) < self.space_len:
                    flops = result_flops(self.task, res)
                    self.xs.append(int(inp.config.index))
                    self.ys.append(flops)
                    self.flops_max = max(self.flops_max, flops)
        base_model = self.cost_model.spawn_base_model()
        if not base_model.fit_log(records, self.plan_size, min_seed_records):
            logger.info("autotvm: too few usable history records for transfer learning")
            return
        if not self.trials or self.trial_pt >= len(self.trials):
            self._plan(base_model)
        self.cost_model.load_basemodel(base_model)
