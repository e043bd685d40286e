"""GATuner: a genetic algorithm over the knobs of the config space.

A gene is the list of per-knob indices of a configuration (one entry per subspace, sizes from
``space.dims()``; ``knob2point``/``point2knob`` convert to and from the flat index). Each
generation of ``pop_size`` genes is measured; the next one is bred from the measured genes and
the ``elite_num`` best ever kept: parents drawn with probability proportional to their
throughput, one-point crossover, then each knob mutated with ``mutation_prob``. Genes already
measured (or loaded with ``load_history``) are mutated further until new, so no configuration is
measured twice; when breeding cannot find a new gene, a random unvisited one is taken.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from .tuner import Tuner, result_flops, same_task

# Tries of mutating a duplicate child before a random unvisited gene is taken instead.
_MAX_MUTATE_TRIES = 20


def point2knob(point: int, dims: Sequence[int]) -> list[int]:
    """Per-knob indices of flat index ``point`` (the first knob varies fastest)."""
    knob = []
    for dim in dims:
        knob.append(point % dim)
        point //= dim
    return knob


def knob2point(knob: Sequence[int], dims: Sequence[int]) -> int:
    """Flat index of the per-knob indices ``knob``; inverse of :func:`point2knob`."""
    point, mult = 0, 1
    for k, dim in zip(knob, dims):
        point += int(k) * mult
        mult *= int(dim)
    return point


class GATuner(Tuner):
    """Genetic-algorithm tuner.

    Parameters
    ----------
    task : autotvm.task.Task
        The task to tune.
    pop_size : int
        Genes per generation (capped at the size of the space).
    elite_num : int
        Best genes carried over as parents into every next generation.
    mutation_prob : float
        Probability that one knob of a child is replaced by a random value.
    seed : int, optional
        Seed of the tuner's random generator.
    """

    def __init__(
        self,
        task: Any,
        pop_size: int = 100,
        elite_num: int = 3,
        mutation_prob: float = 0.1,
        seed: int | None = None,
    ):
        super().__init__(task)
        if not isinstance(pop_size, int | np.integer) or pop_size < 1:
            raise ValueError(f"pop_size must be a positive int, got {pop_size!r}")
        if not isinstance(elite_num, int | np.integer) or elite_num < 0:
            raise ValueError(f"elite_num must be a non-negative int, got {elite_num!r}")
        if not 0.0 <= float(mutation_prob) <= 1.0:
            raise ValueError(f"mutation_prob must be in [0, 1], got {mutation_prob!r}")
        # a template without knobs has one configuration: one gene of one value
        self.dims = [int(d) for d in self.space.dims()] or [1]
        if min(self.dims) < 1:
            raise ValueError(f"cannot tune a config space with knob sizes {self.dims}")
        size = len(self.space)
        if int(np.prod(self.dims, dtype=object)) != size:
            raise ValueError(f"space.dims() {self.dims} does not multiply to len(space) {size}")
        self.pop_size = int(min(pop_size, size))
        self.elite_num = int(min(elite_num, self.pop_size))
        self.mutation_prob = float(mutation_prob)
        self.rng = np.random.default_rng(seed)
        self.generation = 0
        # genes proposed but not yet handed out / measured in this generation
        self.pending: list[list[int]] = []
        self.proposed: set[int] = set()
        # measured genes of the current generation, with their scores
        self.genes: list[list[int]] = []
        self.scores: list[float] = []
        self.elites: list[list[int]] = []
        self.elite_scores: list[float] = []

    # ---- proposal ---------------------------------------------------------------------------
    def has_next(self) -> bool:
        return len(self.visited | self.proposed) < len(self.space) or bool(self.pending)

    def next_batch(self, batch_size: int) -> list[Any]:
        ret = []
        while len(ret) < batch_size:
            if not self.pending:
                self._new_generation()
                if not self.pending:
                    break
            gene = self.pending.pop(0)
            point = knob2point(gene, self.dims)
            if point in self.visited:  # loaded from history after it was bred
                self.proposed.discard(point)
                continue
            ret.append(self.space.get(point))
        return ret

    def _taken(self, point: int) -> bool:
        return point in self.visited or point in self.proposed

    def _random_unvisited(self) -> list[int] | None:
        size = len(self.space)
        if len(self.visited | self.proposed) >= size:
            return None
        for _ in range(64):
            point = int(self.rng.integers(0, size))
            if not self._taken(point):
                return point2knob(point, self.dims)
        for point in range(size):  # nearly full space: scan
            if not self._taken(point):
                return point2knob(point, self.dims)
        return None

    def _add(self, gene: list[int]) -> None:
        self.pending.append(gene)
        self.proposed.add(knob2point(gene, self.dims))

    def _new_generation(self) -> None:
        """Fill ``pending`` with the next ``pop_size`` new genes."""
        parents = self.genes + self.elites
        scores = np.array(self.scores + self.elite_scores, dtype=np.float64)
        if len(parents) >= 2 and float(scores.max(initial=0.0)) > 0:
            self._keep_elites(parents, scores)
            self.generation += 1
        else:
            parents = []
        self.genes, self.scores = [], []
        for _ in range(self.pop_size):
            gene = self._breed(parents, scores) if parents else None
            if gene is None:
                gene = self._random_unvisited()
                if gene is None:
                    return
            self._add(gene)

    def _keep_elites(self, parents: list[list[int]], scores: np.ndarray) -> None:
        if self.elite_num == 0:
            self.elites, self.elite_scores = [], []
            return
        order = np.argsort(-scores, kind="stable")[: self.elite_num]
        self.elites = [list(parents[i]) for i in order]
        self.elite_scores = [float(scores[i]) for i in order]

    def _breed(self, parents: list[list[int]], scores: np.ndarray) -> list[int] | None:
        probs = scores + 1e-8 * max(float(scores.max()), 1e-30)
        probs = probs / probs.sum()
        i1, i2 = self.rng.choice(len(parents), size=2, replace=False, p=probs)
        p1, p2 = parents[int(i1)], parents[int(i2)]
        cut = int(self.rng.integers(0, len(self.dims)))
        child = list(p1[:cut]) + list(p2[cut:])
        for j, dim in enumerate(self.dims):
            if self.rng.random() < self.mutation_prob:
                child[j] = int(self.rng.integers(0, dim))
        tries = 0
        while self._taken(knob2point(child, self.dims)):
            tries += 1
            if tries > _MAX_MUTATE_TRIES:
                return None
            j = int(self.rng.integers(0, len(self.dims)))
            child[j] = int(self.rng.integers(0, self.dims[j]))
        return child

    # ---- learning ---------------------------------------------------------------------------
    def load_history(self, records: Iterable[tuple[Any, Any]], min_seed_records: int = 500) -> None:
        """As :meth:`Tuner.load_history`; the best ``pop_size`` records of this task also become
        the parents of the next generation, so a resumed run goes on evolving from them."""
        records = list(records)
        super().load_history(records, min_seed_records)
        seen: dict[int, float] = {}
        for inp, res in records:
            if same_task(inp.task, self.task) and 0 <= int(inp.config.index) < len(self.space):
                point = int(inp.config.index)
                seen[point] = max(seen.get(point, 0.0), result_flops(self.task, res))
        best = sorted(seen.items(), key=lambda kv: -kv[1])[: self.pop_size]
        if len(best) >= 2 and best[0][1] > 0:
            self.genes = [point2knob(p, self.dims) for p, _ in best]
            self.scores = [score for _, score in best]
            self.elites, self.elite_scores = [], []
            # breed at the next proposal instead of handing out the random first generation
            for gene in self.pending:
                self.proposed.discard(knob2point(gene, self.dims))
            self.pending = []

    def update(self, inputs: Sequence[Any], results: Sequence[Any]) -> None:
        for inp, res in zip(inputs, results):
            point = int(inp.config.index)
            self.proposed.discard(point)
            self.genes.append(point2knob(point, self.dims))
            self.scores.append(result_flops(self.task, res))
