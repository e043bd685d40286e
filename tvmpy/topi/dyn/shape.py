"""The kernel of ``shape_of`` (``relay.op.dyn.shape``): a shape with run-time dimensions as a
1-D tensor."""

from __future__ import annotations

from typing import Any

from ... import te
from ...tir import op as tir_op
from ...tir.expr import IntImm, PrimExpr, const

__all__ = ["shape_of"]


def shape_of(data: te.Tensor, dtype: str = "int64") -> te.Tensor:
    """``data``'s shape (its symbolic dimensions: the input buffer's) as a 1-D tensor."""
    r = len(data.shape)

    def f(i: Any) -> PrimExpr:
        out: PrimExpr = const(0, dtype)
        for k in range(r - 1, -1, -1):
            d = data.shape[k]
            d = const(int(d), dtype) if isinstance(d, (int, IntImm)) else d.astype(dtype)
            out = tir_op.if_then_else(i == k, d, out)
        return out

    return te.compute((r,), f, name="T_shape_of", tag="injective")
