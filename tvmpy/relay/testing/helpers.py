"""TVM's ``relay.testing`` helpers used throughout its test files and docs:
``run_infer_type(expr)``, ``run_opt_pass(expr, passes)`` and ``create_workload(net)``."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...ir.module import IRModule
from ...transform import Sequential
from ..expr import Function, RelayExpr
from ..transform import InferType

__all__ = ["run_infer_type", "run_opt_pass", "create_workload"]


def run_opt_pass(expr: RelayExpr, opt_pass: Any) -> RelayExpr:
    """``expr`` (a Function or any expression) through ``opt_pass`` (a pass or a list of them),
    typed; returns the same kind of thing: a Function for a Function, else main's body."""
    if not isinstance(expr, RelayExpr):
        raise TypeError(f"run_opt_pass takes a relay expression, got {type(expr).__name__}")
    passes = list(opt_pass) if isinstance(opt_pass, (list, tuple)) else [opt_pass]
    mod = IRModule.from_expr(expr)
    mod = Sequential([*passes, InferType()])(mod)
    main = mod["main"]
    return main if isinstance(expr, Function) else main.body


def run_infer_type(expr: RelayExpr) -> RelayExpr:
    """``expr`` with its types inferred (``checked_type`` set on every node)."""
    return run_opt_pass(expr, InferType())


def _init_value(name: str, shape: tuple[int, ...], dtype: str, rng: np.random.Generator
                ) -> np.ndarray:
    """TVM's default initializer's rules: biases, betas and means 0; gammas and variances 1;
    weights Xavier-uniform over (fan_in + fan_out) / 2."""
    if name.endswith(("bias", "beta", "moving_mean", "mean")):
        return np.zeros(shape, dtype)
    if name.endswith(("gamma", "moving_var", "var")):
        return np.ones(shape, dtype)
    if len(shape) < 2:
        return rng.uniform(-0.1, 0.1, shape).astype(dtype)
    recept = int(np.prod(shape[2:])) if len(shape) > 2 else 1
    fan_in, fan_out = shape[1] * recept, shape[0] * recept
    scale = np.sqrt(3.0 / max(1.0, (fan_in + fan_out) / 2.0))
    return rng.uniform(-scale, scale, shape).astype(dtype)


def create_workload(net: Any, initializer: Any = None, seed: int = 0
                    ) -> tuple[IRModule, dict[str, Any]]:
    """TVM's ``create_workload(net)``: ``(mod, params)`` for a relay Function (or IRModule)
    whose parameters other than ``data`` are weights, given random values (``initializer``:
    ``fn(name, numpy array)`` filling the array in place, as TVM's initializers do)."""
    from ...runtime import ndarray as nd

    mod = net if isinstance(net, IRModule) else IRModule.from_expr(net)
    mod = InferType()(mod)
    rng = np.random.default_rng(seed)
    params: dict[str, Any] = {}
    for p in mod["main"].params:
        if p.name_hint == "data":
            continue
        t = p.checked_type
        shape = tuple(int(d) for d in t.shape)
        arr = _init_value(p.name_hint, shape, str(t.dtype), rng)
        if initializer is not None:
            initializer(p.name_hint, arr)
        params[p.name_hint] = nd.array(arr)
    return mod, params
