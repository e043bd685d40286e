"""Synthetic configuration spaces for tuner and cost-model tests: a config is its knob indices
(also its feature vector), so tests need no template, builder or runner."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tvmpy.autotvm.tuner.model_based_tuner import point2knob


@dataclass
class FakeConfig:
    index: int
    knobs: list[int]

    def get_flatten_feature(self):
        return np.asarray(self.knobs, dtype=np.float32)


class FakeSpace:
    """A product space: ``dims()`` sizes, first knob fastest (as ``point2knob``)."""

    def __init__(self, dims):
        self._dims = list(dims)
        self.space_map = {f"k{i}": list(range(d)) for i, d in enumerate(dims)}

    def __len__(self):
        return int(np.prod(self._dims))

    def dims(self):
        return list(self._dims)

    def get(self, index):
        if not 0 <= index < len(self):
            raise IndexError(index)
        return FakeConfig(index, point2knob(index, self._dims))
