"""Build-and-check helper for the nn operator tests: schedule, build for a target, run on seeded
random inputs (outputs pre-filled with NaN, or -77 for integers, so an unwritten element fails), compare with the
numpy reference."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import tvmpy as tvm
from tvmpy import te


def shape_of(t: te.Tensor) -> tuple[int, ...]:
    return tuple(int(s.value) if hasattr(s, "value") else int(s) for s in t.shape)


def check(inputs: Sequence[te.Tensor], out: te.Tensor, schedule: Callable[[Any], Any],
          ref: Callable[..., np.ndarray], target: str = "llvm", rtol: float = 1e-4,
          atol: float = 1e-4, low: float = -1.0, high: float = 1.0, seed: int = 0,
          arrays: Sequence[np.ndarray] | None = None) -> np.ndarray:
    """Schedule ``[out]`` with ``schedule``, build, run, assert close to ``ref(*arrays)``."""
    s = schedule([out])
    f = tvm.build(s, [*inputs, out], target)
    rng = np.random.default_rng(seed)
    if arrays is None:
        arrays = [rng.uniform(low, high, shape_of(t)).astype(t.dtype) for t in inputs]
    sentinel = np.nan if np.dtype(out.dtype).kind == "f" else -77
    res = tvm.nd.array(np.full(shape_of(out), sentinel, out.dtype))
    f(*[tvm.nd.array(np.ascontiguousarray(a)) for a in arrays], res)
    expected = ref(*arrays)
    np.testing.assert_allclose(res.numpy(), expected, rtol=rtol, atol=atol)
    return res.numpy()
