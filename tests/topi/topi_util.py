"""Build-and-run helpers for the operator tests: schedule with topi.x86 (or generic), build for
a target, run on numpy inputs, return numpy outputs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

import tvmpy as tvm
from tvmpy import te, topi


def const_shape(t: te.Tensor) -> tuple:
    return tuple(int(s.value) for s in t.shape)


def run(inputs: Sequence[te.Tensor], outs: Any, arrays: Sequence[np.ndarray], target: str = "llvm",
        schedule: str = "injective") -> list[np.ndarray]:
    """Schedule ``outs`` with the x86 schedule (``schedule``: "injective" or "reduce", or
    "generic"), build for ``target`` and run on ``arrays``; returns the outputs."""
    outs = [outs] if isinstance(outs, te.Tensor) else list(outs)
    if schedule == "reduce":
        s = topi.x86.schedule_reduce(outs)
    elif schedule == "generic":
        s = topi.generic.schedule_injective(outs)
    else:
        s = topi.x86.schedule_injective(outs)
    with tvm.target.Target(target):
        f = tvm.build(s, [*inputs, *outs], target)
    dev = tvm.cpu(0)
    args = [tvm.nd.array(np.array(a, order="C"), dev) for a in arrays]
    res = [tvm.nd.empty(const_shape(o), o.dtype, dev) for o in outs]
    f(*args, *res)
    return [r.numpy() for r in res]


def rand(shape: Sequence[int], dtype: str = "float32", rng: np.random.Generator | None = None,
         low: float = -3, high: float = 3) -> np.ndarray:
    rng = rng or np.random.default_rng(0)
    if dtype == "bool":
        return np.asarray(rng.random(shape) < 0.5)
    if dtype.startswith(("int", "uint")):
        info = np.iinfo(dtype)
        lo, hi = max(int(low * 10), int(info.min)), min(int(high * 10), int(info.max))
        return np.asarray(rng.integers(lo, hi + 1, size=shape)).astype(dtype)
    return rng.uniform(low, high, size=shape).astype(dtype)
