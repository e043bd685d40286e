"""What the kernels of ``topi.dyn`` share: integer casts, the value of a one-element tensor, and
the per-axis selection from a run-time axes tensor."""

from __future__ import annotations

from typing import Any

from ... import te
from ...tir import op as tir_op
from ...tir.expr import IntImm, PrimExpr, const


def _i64(x: Any) -> PrimExpr:
    x = x if isinstance(x, PrimExpr) else const(int(x), "int64")
    return x if x.dtype == "int64" else x.astype("int64")


def _i32(x: PrimExpr) -> PrimExpr:
    return x if x.dtype == "int32" else x.astype("int32")


def _is_one(d: Any) -> bool:
    return (isinstance(d, int) and d == 1) or (isinstance(d, IntImm) and d.value == 1)


def _read1(t: te.Tensor) -> PrimExpr:
    """The value of a scalar or one-element tensor."""
    return t[()] if len(t.shape) == 0 else t[0]


def _per_axis(axes: te.Tensor, rank: int, d: int, value: Any, default: PrimExpr) -> PrimExpr:
    """``value(k)`` for the k with axes[k] == d (negative axes counted from the end), else
    ``default``: the K entries unrolled (K is the static length of ``axes``)."""
    out = default
    for k in range(int(axes.shape[0])):
        a = _i64(axes[k])
        a = tir_op.if_then_else(a < 0, a + rank, a)
        out = tir_op.if_then_else(a == d, value(k), out)
    return out
