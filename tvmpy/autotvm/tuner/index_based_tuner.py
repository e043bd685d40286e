"""Tuners that walk the flat index range of a config space: random order or grid order.

Both take ``range_idx=(begin, end)`` (inclusive, as in TVM) to search only a slice of the
space, e.g. to split one space among several machines. Neither ever proposes a configuration
twice nor one in ``visited`` (measured, or loaded with ``load_history``), and both stop when
their range is exhausted.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .tuner import Tuner


class IndexBaseTuner(Tuner):
    """Base of the tuners that pick configuration indices in ``range_idx``.

    Parameters
    ----------
    task : autotvm.task.Task
        The task to tune.
    range_idx : (int, int), optional
        Inclusive index range to search; the whole space by default.
    """

    def __init__(self, task: Any, range_idx: tuple[int, int] | None = None, **kwargs: Any):
        super().__init__(task, **kwargs)
        size = len(self.space)
        if size < 1:
            raise ValueError("cannot tune an empty config space")
        if range_idx is None:
            range_idx = (0, size - 1)
        if (
            not isinstance(range_idx, tuple | list)
            or len(range_idx) != 2
            or not all(isinstance(x, int | np.integer) for x in range_idx)
        ):
            raise TypeError(f"range_idx must be a pair of ints, got {range_idx!r}")
        begin, end = int(range_idx[0]), int(range_idx[1])
        if not 0 <= begin <= end < size:
            raise ValueError(
                f"range_idx {range_idx!r} is not an inclusive range within [0, {size - 1}]"
            )
        self.range_idx = (begin, end)
        self.range_length = end - begin + 1

    def _in_range(self, index: int) -> bool:
        return self.range_idx[0] <= index <= self.range_idx[1]

    def _num_visited_in_range(self) -> int:
        if self.range_length == len(self.space):
            return len(self.visited)
        return sum(1 for v in self.visited if self._in_range(v))

    def has_next(self) -> bool:
        return self._num_visited_in_range() < self.range_length


class GridSearchTuner(IndexBaseTuner):
    """Enumerates the configurations of ``range_idx`` in index order, skipping visited ones."""

    def __init__(self, task: Any, range_idx: tuple[int, int] | None = None, **kwargs: Any):
        super().__init__(task, range_idx, **kwargs)
        self.counter = self.range_idx[0]

    def next_batch(self, batch_size: int) -> list[Any]:
        ret = []
        end = self.range_idx[1]
        while len(ret) < batch_size and self.counter <= end:
            if self.counter not in self.visited:
                ret.append(self.space.get(self.counter))
            self.counter += 1
        return ret

    def has_next(self) -> bool:
        end = self.range_idx[1]
        while self.counter <= end and self.counter in self.visited:
            self.counter += 1
        return self.counter <= end


class RandomTuner(IndexBaseTuner):
    """Samples configurations of ``range_idx`` uniformly at random, without replacement.

    Parameters
    ----------
    task : autotvm.task.Task
        The task to tune.
    range_idx : (int, int), optional
        Inclusive index range to sample from; the whole space by default.
    seed : int, optional
        Seed of the tuner's own random generator (reproducible runs).
    """

    def __init__(
        self,
        task: Any,
        range_idx: tuple[int, int] | None = None,
        seed: int | None = None,
        **kwargs: Any,
    ):
        super().__init__(task, range_idx, **kwargs)
        self.rng = np.random.default_rng(seed)

    def next_batch(self, batch_size: int) -> list[Any]:
        begin, end = self.range_idx
        left = self.range_length - self._num_visited_in_range()
        n = min(batch_size, left)
        if n <= 0:
            return []
        chosen: list[int] = []
        taken: set[int] = set()
        if left * 2 >= self.range_length:
            # mostly unvisited: rejection sampling needs ~2 draws per pick at worst
            while len(chosen) < n:
                idx = int(self.rng.integers(begin, end + 1))
                if idx in self.visited or idx in taken:
                    continue
                taken.add(idx)
                chosen.append(idx)
        else:
            # mostly visited: the range is at most twice the visited set, list what is left
            remaining = [i for i in range(begin, end + 1) if i not in self.visited]
            picks = self.rng.choice(len(remaining), size=n, replace=False)
            chosen = [remaining[int(p)] for p in picks]
        return [self.space.get(i) for i in chosen]
