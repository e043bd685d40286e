"""Kernels of the dynamic transform operators (``relay.op.dyn.transform``): output extents are
symbolic (the given ``out_shape`` holds size variables, bound by the output buffer's shape when
the kernel runs) and the shape-like tensors are read inside the compute where the index map
needs their values (slice starts and steps, split offsets, one-hot depth, arange start and step).

Each ``dyn_*`` returns the output ``te.Tensor`` (a list for split / topk); its shape function
(relay) has already checked the values, so the kernels do not.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ... import te
from ...tir import op as tir_op
from ...tir.expr import IntImm, PrimExpr, const
from ..transform import _ravel, _unravel
from ._common import _i32, _i64, _is_one, _per_axis, _read1

__all__ = ["dyn_reshape", "dyn_broadcast_to", "dyn_tile", "dyn_full", "dyn_arange",
           "dyn_strided_slice", "dyn_split", "dyn_one_hot", "dyn_topk"]


def dyn_reshape(data: te.Tensor, out_shape: Sequence[Any], name: str = "T_dyn_reshape"
                ) -> te.Tensor:
    """A copy of ``data`` into ``out_shape`` (same element count, row-major): reshape, squeeze
    and expand_dims, whose shape tensors only the shape function reads."""
    def f(*i: Any) -> PrimExpr:
        return data[tuple(_unravel(_ravel(i, out_shape), data.shape))]

    return te.compute(tuple(out_shape), f, name=name, tag="injective")


def _right_aligned(data: te.Tensor, out_shape: Sequence[Any], index: Any) -> Any:
    r, n = len(out_shape), len(data.shape)

    def f(*i: Any) -> PrimExpr:
        return data[tuple(index(i[r - n + k], d) for k, d in enumerate(data.shape))]

    return f


def dyn_broadcast_to(data: te.Tensor, out_shape: Sequence[Any]) -> te.Tensor:
    """numpy broadcasting of ``data`` to ``out_shape`` (a data dimension is 1 or the output's)."""
    def index(i: Any, d: Any) -> Any:
        if _is_one(d):
            return const(0, i.dtype)
        return i if isinstance(d, (int, IntImm)) else tir_op.if_then_else(d == 1, 0, i)

    return te.compute(tuple(out_shape), _right_aligned(data, out_shape, index),
                      name="T_dyn_broadcast_to", tag="broadcast")


def dyn_tile(data: te.Tensor, out_shape: Sequence[Any]) -> te.Tensor:
    """``data`` repeated: each output index reads its remainder by the data's dimension."""
    def index(i: Any, d: Any) -> Any:
        return const(0, i.dtype) if _is_one(d) else tir_op.floormod(i, d)

    return te.compute(tuple(out_shape), _right_aligned(data, out_shape, index), name="T_dyn_tile",
                      tag="broadcast")


def dyn_full(fill_value: te.Tensor, out_shape: Sequence[Any], dtype: str) -> te.Tensor:
    return te.compute(tuple(out_shape), lambda *i: _read1(fill_value).astype(dtype),
                      name="T_dyn_full", tag="broadcast")


def dyn_arange(start: te.Tensor, step: te.Tensor, out_shape: Sequence[Any], dtype: str
               ) -> te.Tensor:
    """start + i * step, in ``dtype`` (the length comes from the shape function)."""
    def f(i: Any) -> PrimExpr:
        return (_read1(start).astype(dtype) + i.astype(dtype) * _read1(step).astype(dtype))

    return te.compute(tuple(out_shape), f, name="T_dyn_arange", tag="injective")


def dyn_strided_slice(data: te.Tensor, begin: te.Tensor, end: te.Tensor, strides: te.Tensor,
                      axes: te.Tensor, out_shape: Sequence[Any]) -> te.Tensor:
    """ONNX Slice (Python's clamping): out[i] = data[start + i * step] on the sliced axes;
    start and step are read from the tensors (``end`` only decides the output extent)."""
    r = len(data.shape)

    def start_of(k: int, d: int) -> PrimExpr:
        dim = _i64(data.shape[d])
        b, s = _i64(begin[k]), _i64(strides[k])
        pos = tir_op.if_then_else(b < 0, tir_op.max(b + dim, 0), tir_op.min(b, dim))
        neg = tir_op.if_then_else(b < 0, tir_op.max(b + dim, -1), tir_op.min(b, dim - 1))
        return tir_op.if_then_else(s > 0, pos, neg)

    def f(*i: Any) -> PrimExpr:
        idx = []
        for d in range(r):
            st = _per_axis(axes, r, d, lambda k, d=d: start_of(k, d), const(0, "int64"))
            sp = _per_axis(axes, r, d, lambda k: _i64(strides[k]), const(1, "int64"))
            idx.append(_i32(st + _i64(i[d]) * sp))
        return data[tuple(idx)]

    return te.compute(tuple(out_shape), f, name="T_dyn_strided_slice", tag="injective")


def dyn_split(data: te.Tensor, sizes: te.Tensor, axis: int,
              out_shapes: Sequence[Sequence[Any]]) -> list[te.Tensor]:
    """Output k reads data at its index plus the sum of the first k sizes on ``axis``."""
    ax = axis % len(data.shape)
    outs = []
    offset: PrimExpr = const(0, "int64")
    for k, shp in enumerate(out_shapes):
        def f(*i: Any, off: PrimExpr = offset) -> PrimExpr:
            idx = list(i)
            idx[ax] = _i32(_i64(i[ax]) + off)
            return data[tuple(idx)]

        outs.append(te.compute(tuple(shp), f, name=f"T_dyn_split{k}", tag="injective"))
        offset = offset + _i64(sizes[k])
    return outs


def dyn_one_hot(indices: te.Tensor, depth: te.Tensor, on_value: te.Tensor,
                off_value: te.Tensor, axis: int, out_shape: Sequence[Any], dtype: str
                ) -> te.Tensor:
    """1 (on_value) where the index (negative: + depth) equals the position on ``axis``."""
    ax = axis % (len(indices.shape) + 1)

    def f(*i: Any) -> PrimExpr:
        j = indices[(*i[:ax], *i[ax + 1:])]
        j = j.astype("int64") if j.dtype != "int64" else j
        dep = _read1(depth).astype("int64")
        j = tir_op.if_then_else(j < 0, j + dep, j)
        return tir_op.if_then_else(j == _i64(i[ax]), _read1(on_value).astype(dtype),
                                   _read1(off_value).astype(dtype))

    return te.compute(tuple(out_shape), f, name="T_dyn_one_hot", tag="injective")


def dyn_topk(data: te.Tensor, axis: int, is_ascend: bool, out_shape: Sequence[Any],
             dtype: str = "int64") -> list[te.Tensor]:
    """(values, indices) of the top k on ``axis`` (k: the output's extent there), sorted, ties
    by the lower index: each element's rank counts the elements before it; output r is the
    (one) element of rank r, selected by a sum."""
    r = len(data.shape)
    ax = axis % r
    n = data.shape[ax]

    def at(i: Sequence[Any], m: Any) -> tuple:
        return (*i[:ax], m, *i[ax + 1:])

    def before(a: PrimExpr, b: PrimExpr, ma: Any, mb: Any) -> PrimExpr:
        better = a < b if is_ascend else a > b
        return tir_op.any(better, tir_op.all(a == b, ma < mb))

    m1 = te.reduce_axis((0, n), name="m")

    def rank_of(*i: Any) -> PrimExpr:
        x = data[i]
        return te.sum(tir_op.if_then_else(before(data[at(i, m1)], x, m1, i[ax]), 1, 0), axis=m1)

    rank = te.compute(tuple(data.shape), rank_of, name="T_dyn_topk_rank")
    m2 = te.reduce_axis((0, n), name="m")
    m3 = te.reduce_axis((0, n), name="m")

    def values(*i: Any) -> PrimExpr:
        hit = rank[at(i, m2)] == i[ax]
        return te.sum(tir_op.if_then_else(hit, data[at(i, m2)], const(0, data.dtype)), axis=m2)

    def index(*i: Any) -> PrimExpr:
        hit = rank[at(i, m3)] == i[ax]
        return te.sum(tir_op.if_then_else(hit, m3.var.astype(dtype), const(0, dtype)), axis=m3)

    return [te.compute(tuple(out_shape), values, name="T_dyn_topk_values"),
            te.compute(tuple(out_shape), index, name="T_dyn_topk_indices")]
