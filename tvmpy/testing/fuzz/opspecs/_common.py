"""What the operator specs share: the registry (``spec``), dtype groups, and the checks that
a result is well posed (away from discontinuities, ties and poles)."""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from ..generator import MAX_ELEMENTS, Builder, Plan, margin

__all__ = ["SPECS", "spec", "MAX_ELEMENTS", "Builder", "Plan", "margin"]

SPECS: dict[str, Callable[[Builder], Plan | None]] = {}

F32 = ("float32",)
FLOAT = ("float32", "float32", "float32", "float16")  # float16 less often
INT = ("int32", "int64")
NUM = ("float32", "float16", "int32", "int64")
ANY = ("float32", "float16", "int32", "int64", "bool")


def spec(*names: str):
    """Register ``fn(builder, op_type)`` as the spec of each of ``names``."""
    def deco(fn):
        for n in names:
            SPECS[n] = functools.partial(fn, op=n)
        return fn
    return deco


def _i64(x) -> np.ndarray:
    return np.asarray(x, dtype=np.int64)


def _scale(v: np.ndarray) -> float:
    v = np.asarray(v, dtype=np.float64)
    return float(max(1.0, np.abs(v).max())) if v.size else 1.0


def _away(x: np.ndarray, points: Callable[[np.ndarray], np.ndarray]) -> bool:
    """Every element of ``x`` is far (relative ``margin``) from its nearest point."""
    x = np.asarray(x)
    if x.dtype.kind != "f" or x.size == 0:
        return True
    m = margin(x.dtype)
    x64 = x.astype(np.float64)
    return bool((np.abs(x64 - points(x64)) > m * np.maximum(1.0, np.abs(x64))).all())


def _not_near_int(x):
    return _away(x, np.round)


def _not_near_half(x):
    return _away(x, lambda v: np.floor(v) + 0.5)


def _apart(a, b) -> bool:
    """a and b (broadcast) are equal exactly or far apart (comparisons are well posed)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind != "f":
        return True
    m = margin(a.dtype)
    a64, b64 = np.broadcast_arrays(a.astype(np.float64), b.astype(np.float64))
    d = np.abs(a64 - b64)
    return bool(((d == 0) | (d > m * np.maximum(1.0, np.maximum(np.abs(a64), np.abs(b64))))).all())


def _gaps(x: np.ndarray, axis: int, k: int | None = None, ties_ok: bool = False) -> bool:
    """Along ``axis`` the top ``k`` values (all when None) are separated by a margin, so their
    order does not depend on rounding."""
    x = np.asarray(x)
    if x.dtype.kind != "f" or x.shape[axis] < 2:
        return True
    s = -np.sort(-x.astype(np.float64), axis=axis)
    s = np.moveaxis(s, axis, -1)
    n = s.shape[-1] if k is None else min(k + 1, s.shape[-1])
    d = -np.diff(s[..., :n], axis=-1)
    ok = d > margin(x.dtype) * _scale(x)
    if ties_ok:
        ok |= d == 0
    return bool(ok.all())


def _positive(v):
    return v.dtype.kind == "f" and v.size > 0 and float(v.min()) > 0.05 * _scale(v) \
        and float(v.min()) > 0.05


def _nonzero(v):
    return v.dtype.kind == "f" and v.size > 0 and float(np.abs(v).min()) > 0.05


def _domain_operand(b: Builder, dtypes, pred, low: float, high: float) -> str | None:
    """A tensor in an operator's domain: from the pool, through an Abs -> Add(c) adapter, or
    a new leaf."""
    t = b.pick(dtypes, pred=pred)
    if t is not None and b.chance(0.7):
        return t
    src = b.pick(dtypes)
    if src is not None and b.chance(0.5) and low >= 0:
        a = Plan("Abs", [src])
        if b.try_insert(a):
            absname = b.nodes[-1].output[0]
            c = b.const(np.asarray(low + 0.2, dtype=b.dtype(src)))
            if b.try_insert(Plan("Add", [absname, c])):
                cand = b.nodes[-1].output[0]
                if pred(b.val(cand)):
                    return cand
    dt = b.choose(dtypes)
    shape = b.shape(src) if src is not None else (int(b.choose((1, 3, 4, 8))),)
    return b.leaf(shape, dt, low, high)


def _axis(b: Builder, rank: int) -> int:
    a = int(b.rng.integers(rank))
    return a - rank if b.chance(0.3) else a


def _axes(b: Builder, rank: int, min_n: int = 1) -> list[int]:
    n = int(b.rng.integers(min_n, rank + 1))
    axes = sorted(b.rng.choice(rank, size=n, replace=False).tolist())
    return [a - rank if b.chance(0.25) else a for a in axes]


