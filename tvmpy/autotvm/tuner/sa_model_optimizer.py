"""Parallel simulated annealing over a cost model's predictions (TVM's SimulatedAnnealingOptimizer).

``parallel_size`` walkers start at random points (or where the last search left them, with
``persistent``); each step every walker moves to a random neighbour (one knob changed) and the
model scores all of them in one batched ``predict``. A move is accepted with probability
``exp(min((new - old) / temperature, 1))``; the temperature cools linearly from ``temp[0]`` to
``temp[1]``. A heap keeps the ``num`` best points seen that are not in ``exclusive``; the search
stops after ``n_iter`` steps, or ``early_stop`` steps without a change of the heap, or (with
``timeout``) after that many seconds: each step costs ``parallel_size`` predictions, and with
program features every new point costs a lowering (a few ms in this Python compiler).
"""

from __future__ import annotations

import heapq
import logging
import time
from typing import Any

import numpy as np

from .model_based_tuner import CostModel, ModelOptimizer, random_walk, space_dims

logger = logging.getLogger("autotvm")

__all__ = ["SimulatedAnnealingOptimizer"]


class SimulatedAnnealingOptimizer(ModelOptimizer):
    """Parameters: ``task`` (its config space is searched), ``n_iter``, ``temp`` (a float or a
    ``(start, end)`` pair), ``persistent`` (resume walkers from the previous search),
    ``parallel_size`` (walkers), ``early_stop``, ``log_interval``, ``seed``, ``timeout``
    (seconds per search, None for no limit)."""

    def __init__(self, task: Any, n_iter: int = 500, temp: Any = (1, 0), persistent: bool = True,
                 parallel_size: int = 128, early_stop: int = 50, log_interval: int = 50,
                 seed: int | None = None, timeout: float | None = None) -> None:
        super().__init__()
        if timeout is not None and not timeout > 0:
            raise ValueError(f"timeout must be a positive number of seconds or None, "
                             f"got {timeout!r}")
        self.timeout = timeout
        for name, v in (("n_iter", n_iter), ("parallel_size", parallel_size),
                        ("early_stop", early_stop)):
            if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 1:
                raise ValueError(f"SimulatedAnnealingOptimizer: {name} must be a positive int, "
                                 f"got {v!r}")
        if isinstance(temp, tuple | list | np.ndarray):
            if len(temp) != 2:
                raise ValueError(f"temp must be a number or a (start, end) pair, got {temp!r}")
            self.temp = (float(temp[0]), float(temp[1]))
        else:
            self.temp = (float(temp), float(temp))
        self.task = task
        self.dims = space_dims(task.config_space)
        self.space_len = len(task.config_space)
        self.n_iter = int(n_iter)
        self.parallel_size = int(min(parallel_size, self.space_len))
        self.persistent = persistent
        self.early_stop = int(early_stop)
        self.log_interval = log_interval
        self.rng = np.random.default_rng(seed)
        self.points: list[int] | None = None

    def _sample(self, n: int) -> list[int]:
        if n >= self.space_len:
            return list(range(self.space_len))
        if self.space_len < 1 << 62:
            chosen = self.rng.choice(self.space_len, size=n, replace=False)
            return [int(x) for x in chosen]
        out: set[int] = set()
        while len(out) < n:
            out.add(int(self.rng.integers(self.space_len)))
        return sorted(out)

    def find_maximums(self, model: CostModel, num: int, exclusive: set[int]) -> list[int]:
        tic = time.time()
        num = int(num)
        if num <= 0:
            return []
        points = list(self.points) if self.persistent and self.points is not None \
            else self._sample(self.parallel_size)
        scores = np.asarray(model.predict(points), dtype=np.float64)
        heap: list[tuple[float, int]] = [(-np.inf, -1 - i) for i in range(num)]
        in_heap = set(exclusive)
        in_heap.update(x[1] for x in heap)

        def offer(s: float, p: int) -> bool:
            if s > heap[0][0] and p not in in_heap:
                popped = heapq.heapreplace(heap, (s, p))
                in_heap.discard(popped[1])
                in_heap.add(p)
                return True
            return False

        for s, p in zip(scores, points):
            offer(float(s), p)
        t, t_end = self.temp
        cool = (t - t_end) / (self.n_iter + 1)
        k = k_last_modify = 0
        while k < self.n_iter and k < k_last_modify + self.early_stop:
            new_points = [random_walk(p, self.dims, self.rng) for p in points]
            new_scores = np.asarray(model.predict(new_points), dtype=np.float64)
            with np.errstate(over="ignore", invalid="ignore"):
                ac_prob = np.exp(np.minimum((new_scores - scores) / (t + 1e-5), 1))
            accept = self.rng.random(len(ac_prob)) < ac_prob
            for i in np.nonzero(accept)[0]:
                points[i] = new_points[i]
                scores[i] = new_scores[i]
            for s, p in zip(new_scores, new_points):
                if offer(float(s), p):
                    k_last_modify = k
            k += 1
            t -= cool
            if self.timeout is not None and time.time() - tic > self.timeout:
                logger.debug("SA: stopped by timeout after %d iterations", k)
                break
            if self.log_interval and k % self.log_interval == 0:
                logger.debug("SA iter %d: max %.4f, temp %.3f, elapsed %.2f s", k,
                             max(x[0] for x in heap), t, time.time() - tic)
        heap.sort(key=lambda x: -x[0])
        result = [p for _, p in heap if p >= 0]
        logger.debug("SA: %d iterations, %d points, %.2f s", k, len(result), time.time() - tic)
        if self.persistent:
            self.points = points
        return result
