"""Kernels whose scalar parameters are run-time tensors read inside the compute (the output shape
does not depend on them): ``dyn_trilu`` (the diagonal offset ``k``) and ``dyn_scan`` (a
cumulative sum / product along an axis given as a tensor).

``dyn_scan`` cannot give its reduce axis the scanned dimension's extent (the axis is a value), so
it reduces over the largest dimension and masks the positions past the scanned one; loads are
guarded (``if_then_else``) so no index leaves the data. Quadratic along the axis, like the
static cumsum compute."""

from __future__ import annotations

from typing import Any

from ... import te
from ...tir import op as tir_op
from ...tir.expr import Select, cast, const
from .. import tag

__all__ = ["dyn_trilu", "dyn_scan"]

_prod = te.comm_reducer(lambda x, y: x * y, lambda d: const(1, d), name="prod")


def _scalar(t: te.Tensor, dtype: str = "int64") -> Any:
    """The single value of a 0-d or 1-element tensor."""
    return cast(t[tuple(0 for _ in t.shape)], dtype)


def dyn_trilu(data: te.Tensor, k: te.Tensor, upper: bool) -> te.Tensor:
    """Upper (``j - i >= k``) or lower (``j - i <= k``) triangle of the last two axes, the rest
    zero; ``k`` a one-element integer tensor."""
    kv = _scalar(k)
    zero = const(0, data.dtype)

    def f(*i: Any) -> Any:
        diff = cast(i[-1], "int64") - cast(i[-2], "int64")
        keep = diff >= kv if upper else diff <= kv
        return Select(keep, data[i], zero)

    return te.compute(data.shape, f, name="dyn_trilu", tag=tag.INJECTIVE)


def dyn_scan(data: te.Tensor, axis: te.Tensor, kind: str, exclusive: bool,
             reverse: bool) -> te.Tensor:
    """Cumulative ``kind`` ("sum" or "prod") of ``data`` along the axis in the one-element tensor
    ``axis`` (negative counts from the end); ``exclusive`` leaves out the element itself,
    ``reverse`` runs from the end."""
    if kind not in ("sum", "prod"):
        raise ValueError(f"dyn_scan: kind must be sum or prod, got {kind!r}")
    r = len(data.shape)
    if r == 0:
        raise ValueError("dyn_scan: the data needs at least one axis")
    a = _scalar(axis, "int32")
    a = Select(a < 0, a + r, a)
    longest: Any = data.shape[0]
    for d in data.shape[1:]:
        longest = tir_op.max(longest, d)
    t = te.reduce_axis((0, longest), name="t")
    dtype = data.dtype
    ident = const(0 if kind == "sum" else 1, dtype)
    reducer = te.sum if kind == "sum" else _prod

    def f(*i: Any) -> Any:
        pos: Any = i[0]
        size: Any = data.shape[0]
        for k in range(1, r):
            pos = Select(a == k, i[k], pos)
            size = Select(a == k, data.shape[k], size)
        if reverse:
            keep = tir_op.all(t > pos, t < size) if exclusive else tir_op.all(t >= pos,
                                                                              t < size)
        else:
            keep = t < pos if exclusive else t <= pos
        idx = tuple(Select(a == k, t, i[k]) for k in range(r))
        return reducer(tir_op.if_then_else(keep, data[idx], ident), axis=t)

    return te.compute(data.shape, f, name=f"dyn_cum{kind}", tag=tag.COMM_REDUCE)
