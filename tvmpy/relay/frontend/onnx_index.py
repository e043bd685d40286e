"""ONNX index/selection operators built from comparisons and reductions over static shapes.

relay here has no scatter, sort or scan operators; with static shapes these ONNX operators are
still dataflow: a comparison against an index range gives a one-hot mask, and a reduction over
the mask computes the result exactly (sums of one selected value and zeros).

- CumProd: product over the masked prefix (``j <= k``; exclusive/reverse move the bound).
- TopK: each element's rank (how many elements come before it: larger, or equal with a lower
  index), then the r-th output is the element of rank r.
- ScatterElements / Scatter / ScatterND: a one-hot mask of where each update goes; the masked
  updates are summed (or multiplied / maxed / mined) into place.
- Compress: a take of the selected positions (the condition must be known: it decides the
  output's shape).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..expr import RelayExpr, const
from ..op import nn, tensor, transform
from ..op import reduce as _red
from ..type_infer import infer_type
from .common import move_axis_back, move_axis_last, reshape_to

__all__ = ["CONVERTERS"]


def _shape(e: RelayExpr) -> list[int]:
    return [int(d) for d in infer_type(e).checked_type.shape]


def _dtype(e: RelayExpr) -> str:
    return str(infer_type(e).checked_type.dtype)


def _fill(v: Any, dt: str) -> RelayExpr:
    return const(np.asarray(v, dtype=dt))


def _limits(dt: str) -> tuple[Any, Any]:
    d = np.dtype(dt)
    if d.kind == "f":
        return -np.inf, np.inf
    if d == np.bool_:
        return False, True
    info = np.iinfo(d)
    return info.min, info.max



def _cumprod(c, i, a, n):
    x = i[0]
    s = _shape(x)
    r = len(s)
    axis = int(c.value(n[1], "axis").reshape(-1)[0]) % r
    L = s[axis]
    k = np.arange(L)[:, None]
    j = np.arange(L)[None, :]
    rev, exc = bool(a.get("reverse", 0)), bool(a.get("exclusive", 0))
    if rev:
        mask = j > k if exc else j >= k
    else:
        mask = j < k if exc else j <= k
    xt = transform.expand_dims(move_axis_last(x, axis, r), r - 1)  # (..., 1, L)
    y = _red.prod(tensor.where(const(mask), xt, _fill(1, _dtype(x))), axis=[r])
    return move_axis_back(y, axis, r)


def _topk(c, i, a, n):
    x = i[0]
    s = _shape(x)
    r = len(s)
    axis = int(a.get("axis", -1)) % r
    k = int(a["k"]) if "k" in a else int(c.value(n[1], "k").reshape(-1)[0])
    L = s[axis]
    if not 0 <= k <= L:
        raise c.fail(f"k={k} is out of range for axis {axis} of size {L}")
    xt = move_axis_last(x, axis, r)                      # (..., L)
    xi = transform.expand_dims(xt, r)                # (..., L, 1): element i
    xj = transform.expand_dims(xt, r - 1)            # (..., 1, L): element j
    bigger = tensor.greater if a.get("largest", 1) else tensor.less
    lower = const(np.arange(L)[None, :] < np.arange(L)[:, None])  # j < i
    before = tensor.logical_or(bigger(xj, xi), tensor.logical_and(tensor.equal(xj, xi), lower))
    rank = _red.sum(transform.cast(before, "int64"), axis=[r])      # (..., L)
    sel = tensor.equal(transform.expand_dims(rank, r - 1),          # (..., 1, L)
                       const(np.arange(k, dtype=np.int64)[:, None]))  # (k, 1) -> (..., k, L)
    vals = _red.sum(tensor.where(sel, xj, _fill(0, _dtype(x))), axis=[r])
    idx = _red.sum(tensor.where(sel, const(np.arange(L, dtype=np.int64)), _fill(0, "int64")),
                   axis=[r])
    return [move_axis_back(vals, axis, r), move_axis_back(idx, axis, r)]


def _wrap(idx: RelayExpr, dim: int) -> RelayExpr:
    dt = _dtype(idx)
    return tensor.where(tensor.less(idx, _fill(0, dt)), tensor.add(idx, _fill(dim, dt)), idx)


def _combine(c, data: RelayExpr, mask: RelayExpr, upd: RelayExpr, red_axis: int,
             reduction: str) -> RelayExpr:
    """Scatter the masked updates into data; the mask and updates broadcast to one shape whose
    axis ``red_axis`` enumerates the updates (reduced away)."""
    dt = _dtype(data)
    hit = _red.sum(transform.cast(mask, "int32"), axis=[red_axis])
    hit = tensor.greater(hit, _fill(0, "int32"))
    if reduction in ("none", "add"):
        contrib = _red.sum(tensor.where(mask, upd, _fill(0, dt)), axis=[red_axis])
        if reduction == "add":
            return tensor.add(data, contrib)
        return tensor.where(hit, contrib, data)
    if reduction == "mul":
        contrib = _red.prod(tensor.where(mask, upd, _fill(1, dt)), axis=[red_axis])
        return tensor.multiply(data, contrib)
    lo, hi = _limits(dt)
    if reduction == "max":
        contrib = _red.max(tensor.where(mask, upd, _fill(lo, dt)), axis=[red_axis])
        return tensor.where(hit, tensor.maximum(data, contrib), data)
    if reduction == "min":
        contrib = _red.min(tensor.where(mask, upd, _fill(hi, dt)), axis=[red_axis])
        return tensor.where(hit, tensor.minimum(data, contrib), data)
    raise c.fail(f"reduction={reduction!r} is not supported (none, add, mul, max, min)")


def _scatter_elements(c, i, a, n):
    data, idx, upd = i
    D, U = _shape(data), _shape(idx)
    r = len(D)
    axis = int(a.get("axis", 0)) % r
    if _shape(upd) != U or len(U) != r or any(u > d for k, (u, d) in enumerate(zip(U, D))
                                              if k != axis):
        raise c.fail(f"indices {U} / updates {_shape(upd)} do not fit data {D} on axis {axis}")
    Da = D[axis]
    it = transform.expand_dims(move_axis_last(_wrap(idx, Da), axis, r), r)   # (V..., Ua, 1)
    mask = tensor.equal(it, const(np.arange(Da, dtype=_dtype(idx))))      # (V..., Ua, Da)
    ut = transform.expand_dims(move_axis_last(upd, axis, r), r)              # (V..., Ua, 1)
    # data with the axis last, cut to the updates' extent on the other axes
    V = [u for k, u in enumerate(U) if k != axis]
    DV = [d for k, d in enumerate(D) if k != axis]
    dt = move_axis_last(data, axis, r)                                       # (DV..., Da)
    if V != DV:
        part = transform.strided_slice(dt, [0] * (r - 1), V, axes=list(range(r - 1)))
    else:
        part = dt
    out = _combine(c, part, mask, ut, r - 1, a.get("reduction", "none"))
    if V != DV:  # put the updated corner back into the full data
        pads = [[0, d - v] for v, d in zip(V, DV)] + [[0, 0]]
        inside = const(np.pad(np.ones(V + [Da], bool), pads, constant_values=False))
        out = tensor.where(inside, nn.pad(out, pads), dt)
    return move_axis_back(out, axis, r)


def _scatter_nd(c, i, a, n):
    data, idx, upd = i
    D, Q = _shape(data), _shape(idx)
    k = Q[-1]
    if k > len(D):
        raise c.fail(f"indices' last axis {k} exceeds the rank of data {D}")
    R = D[k:]
    P = int(np.prod(D[:k])) if k else 1
    nq = int(np.prod(Q[:-1])) if len(Q) > 1 else 1
    if _shape(upd) != Q[:-1] + R:
        raise c.fail(f"updates {_shape(upd)} must have shape {Q[:-1] + R}")
    strides = [int(np.prod(D[t + 1:k])) for t in range(k)]
    it = reshape_to(idx, [nq, k])
    lin = None
    for t in range(k):
        col = _wrap(reshape_to(transform.strided_slice(it, [t], [t + 1], axes=[1]),
                                      [nq]), D[t])
        term = tensor.multiply(col, _fill(strides[t], _dtype(idx)))
        lin = term if lin is None else tensor.add(lin, term)
    ones = [1] * len(R)
    lin = reshape_to(lin, [nq, 1] + ones)
    mask = tensor.equal(lin, const(np.arange(P, dtype=_dtype(idx)).reshape([1, P] + ones)))
    u = reshape_to(upd, [nq, 1] + R)
    d2 = reshape_to(data, [P] + R)
    out = _combine(c, d2, mask, u, 0, a.get("reduction", "none"))
    return reshape_to(out, D)


def _compress(c, i, a, n):
    x = i[0]
    cond = np.asarray(c.value(n[1], "condition")).astype(bool).reshape(-1)
    if "axis" not in a:
        x = reshape_to(x, [-1])
        axis = 0
    else:
        axis = int(a["axis"]) % len(_shape(x))
    size = _shape(x)[axis]
    if len(cond) > size:
        raise c.fail(f"condition of length {len(cond)} is longer than axis {axis} ({size})")
    keep = np.nonzero(cond)[0].astype(np.int64)
    return transform.take(x, const(keep), axis=axis)


CONVERTERS = {
    "CumProd": _cumprod, "TopK": _topk, "ScatterElements": _scatter_elements,
    "Scatter": _scatter_elements, "ScatterND": _scatter_nd, "Compress": _compress,
}
