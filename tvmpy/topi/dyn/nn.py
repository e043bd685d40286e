"""The kernel of ``relay.op.dyn.nn.pad``: widths (and axes, and value) read at run time, the
output extents symbolic (the shape function has checked the values)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ... import te
from ...tir import op as tir_op
from ...tir.expr import PrimExpr, const
from ._common import _i32, _i64, _per_axis, _read1

__all__ = ["dyn_pad"]


def _pad_index(j: PrimExpr, n: PrimExpr, mode: str) -> PrimExpr:
    """The data position an output reads, ``j`` the unpadded coordinate (may be outside)."""
    if mode == "edge":
        return tir_op.max(tir_op.min(j, n - 1), 0)
    if mode == "wrap":
        return tir_op.floormod(j, n)
    # reflect: a triangle wave of period 2(n - 1) (n == 1: the one element)
    period = tir_op.max(2 * n - 2, 1)
    m = tir_op.floormod(j, period)
    return tir_op.if_then_else(m >= n, period - m, m)


def dyn_pad(data: te.Tensor, pads: te.Tensor, pad_value: te.Tensor, axes: te.Tensor,
            out_shape: Sequence[Any], mode: str = "constant") -> te.Tensor:
    """ONNX Pad with widths [begins..., ends...] on ``axes`` read at run time (negative: crop)."""
    r = len(data.shape)

    def f(*i: Any) -> PrimExpr:
        idx, inside = [], []
        for d in range(r):
            before = _per_axis(axes, r, d, lambda k: _i64(pads[k]), const(0, "int64"))
            j = _i64(i[d]) - before
            n = _i64(data.shape[d])
            if mode == "constant":
                inside.append(tir_op.all(j >= 0, j < n))
                idx.append(_i32(tir_op.max(tir_op.min(j, n - 1), 0)))
            else:
                idx.append(_i32(_pad_index(j, n, mode)))
        v = data[tuple(idx)]
        if mode == "constant" and inside:
            return tir_op.if_then_else(tir_op.all(*inside), v, _read1(pad_value).astype(v.dtype))
        return v

    return te.compute(tuple(out_shape), f, name="T_dyn_pad", tag="injective")
