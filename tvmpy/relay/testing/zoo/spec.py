"""What a zoo model is: an ``nn.Module`` with random weights and a description of its inputs.

Input shapes may name symbolic dimensions: ``"batch"`` (every model) and ``"seq"`` (models over
sequences). ``Spec.feeds`` draws random inputs at given sizes; the exporters in ``export``
mark those dimensions dynamic.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["Input", "Spec", "ZooModel", "SIZES"]

SIZES = ("small", "real")


@dataclass(frozen=True)
class Input:
    """One graph input: ``shape`` entries are ints or symbolic names (``"batch"``, ``"seq"``);
    integer inputs (token ids) are drawn uniformly from ``[0, high)``."""

    name: str
    shape: tuple[int | str, ...]
    dtype: str = "float32"
    high: int = 0

    def concrete(self, dims: Mapping[str, int]) -> tuple[int, ...]:
        try:
            return tuple(d if isinstance(d, int) else int(dims[d]) for d in self.shape)
        except KeyError as e:
            raise ValueError(f"input {self.name!r}: no size given for dimension {e.args[0]!r} "
                             f"of {self.shape}") from None


@dataclass
class Spec:
    """A built model: the module (in eval mode), its inputs, and the default sizes of its
    symbolic dimensions (``{"batch": 1, "seq": 16}``)."""

    module: Any
    inputs: list[Input]
    dims: dict[str, int] = field(default_factory=lambda: {"batch": 1})
    limits: dict[str, int] = field(default_factory=dict)  # largest size of a dim, if bounded

    @property
    def dynamic_dims(self) -> list[str]:
        return sorted({d for i in self.inputs for d in i.shape if isinstance(d, str)})

    def feeds(self, seed: int = 0, **dims: int) -> dict[str, np.ndarray]:
        """Random inputs at the default sizes, overridden by ``dims`` (``batch=3``)."""
        unknown = set(dims) - set(self.dims)
        if unknown:
            raise ValueError(f"unknown dimension(s) {sorted(unknown)}: this model has "
                             f"{sorted(self.dims)}")
        sizes = {**self.dims, **dims}
        rng = np.random.default_rng(seed)
        out = {}
        for i in self.inputs:
            shape = i.concrete(sizes)
            if i.dtype.startswith("int"):
                out[i.name] = rng.integers(0, i.high, size=shape).astype(i.dtype)
            else:
                out[i.name] = rng.standard_normal(shape).astype(i.dtype)
        return out


@dataclass(frozen=True)
class ZooModel:
    """A registry entry: ``build(size)`` returns a fresh ``Spec`` (``size`` in ``SIZES``);
    ``source`` says where the definition comes from; ``vm`` marks models whose outputs have
    data-dependent shapes (they run on the Relay VM, not the graph executor)."""

    name: str
    kind: str
    source: str
    build: Callable[[str], Spec]
    vm: bool = False

    def __call__(self, size: str = "small") -> Spec:
        if size not in SIZES:
            raise ValueError(f"size must be one of {SIZES}, got {size!r}")
        return self.build(size)
