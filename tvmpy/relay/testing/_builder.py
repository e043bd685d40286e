"""A small helper that creates named weight Vars and their random values while a model is built."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..expr import Function, RelayExpr, Var, var
from ..module import IRModule
from ..transform import InferType


class Weights:
    """Collects (Var, value) pairs; values are random but well scaled (He init, positive variances)."""

    def __init__(self, seed: int = 0, dtype: str = "float32"):
        self.rng = np.random.default_rng(seed)
        self.dtype = dtype
        self.vars: list[Var] = []
        self.params: dict[str, np.ndarray] = {}

    def _add(self, name: str, value: np.ndarray) -> Var:
        if name in self.params:
            raise ValueError(f"weight {name!r} defined twice")
        v = var(name, shape=value.shape, dtype=self.dtype)
        self.vars.append(v)
        self.params[name] = value.astype(self.dtype)
        return v

    def normal(self, name: str, shape: tuple[int, ...], fan_in: int | None = None) -> Var:
        fan = fan_in if fan_in is not None else int(np.prod(shape[1:])) or 1
        return self._add(name, self.rng.standard_normal(shape) * np.sqrt(2.0 / fan))

    def uniform(self, name: str, shape: tuple[int, ...], lo: float, hi: float) -> Var:
        return self._add(name, self.rng.uniform(lo, hi, size=shape))

    def batch_norm_params(self, name: str, c: int) -> tuple[Var, Var, Var, Var]:
        return (self.uniform(f"{name}_gamma", (c,), 0.5, 1.5),
                self.uniform(f"{name}_beta", (c,), -0.2, 0.2),
                self.uniform(f"{name}_moving_mean", (c,), -0.2, 0.2),
                self.uniform(f"{name}_moving_var", (c,), 0.5, 1.5))  # fmt: skip

    def module(self, inputs: list[Var], body: RelayExpr) -> tuple[IRModule, dict[str, Any]]:
        mod = IRModule.from_expr(Function([*inputs, *self.vars], body))
        return InferType()(mod), self.params
