"""Kernels of the dynamic operators (``relay.op.dyn``): output extents are symbolic (the given
``out_shape`` holds size variables, bound by the output buffer's shape when the kernel runs) and
the shape-like tensors are read inside the compute where the index map needs their values
(slice starts and steps, pad widths, split offsets, one-hot depth, arange start and step).

Each ``dyn_*`` returns the output ``te.Tensor`` (a list for split / topk); its shape function
(relay) has already checked the values, so the kernels do not.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import te
from ..tir import op as tir_op
from ..tir.expr import IntImm, PrimExpr, const
from .transform import _ravel, _unravel

__all__ = ["dyn_reshape", "dyn_broadcast_to", "dyn_full", "dyn_arange", "dyn_tile",
           "dyn_strided_slice", "dyn_pad", "dyn_split", "dyn_one_hot", "dyn_topk", "dyn_resize",
           "shape_of"]


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


def _per_axis(axes: te.Tensor, rank: int, d: int, value: Any, default: PrimExpr) -> PrimExpr:
    """``value(k)`` for the k with axes[k] == d (negative axes counted from the end), else
    ``default``: the K entries unrolled (K is the static length of ``axes``)."""
    out = default
    for k in range(int(axes.shape[0])):
        a = _i64(axes[k])
        a = tir_op.if_then_else(a < 0, a + rank, a)
        out = tir_op.if_then_else(a == d, value(k), out)
    return out


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


def _source_coord(coord: str, y: PrimExpr, n_in: PrimExpr, n_out: PrimExpr, scale: PrimExpr,
                  roi: tuple[PrimExpr, PrimExpr] | None) -> PrimExpr:
    """ONNX's coordinate transformation (float64), as ``frontend.onnx.resize``'s matrices."""
    width = scale * n_in  # the (possibly fractional) output length
    one = width == 1.0
    if coord == "align_corners":
        return tir_op.if_then_else(one, 0.0, y * (n_in - 1.0) / (width - 1.0))
    if coord == "asymmetric":
        return y / scale
    if coord == "tf_crop_and_resize":
        assert roi is not None
        lo, hi = roi
        x = tir_op.if_then_else(one, (hi - lo) * (n_in - 1.0) / 2.0,
                                y * (hi - lo) * (n_in - 1.0) / (width - 1.0))
        return x + lo * (n_in - 1.0)
    if coord == "pytorch_half_pixel":
        return tir_op.if_then_else(one, -0.5, (y + 0.5) / scale - 0.5)
    if coord == "half_pixel":
        return (y + 0.5) / scale - 0.5
    if coord == "half_pixel_symmetric":
        return n_in / 2.0 * (1.0 - n_out / width) + (y + 0.5) / scale - 0.5
    raise ValueError(f"coordinate_transformation_mode {coord!r}")


def dyn_resize(data: te.Tensor, roi: te.Tensor, target: te.Tensor, out_shape: Sequence[Any],
               axes: Sequence[int], use_sizes: bool, mode: str, coord: str, nearest_mode: str,
               extrapolation_value: float = 0.0, policy: str = "stretch",
               antialias: bool = False) -> te.Tensor:
    """ONNX Resize, nearest or linear (not antialiased), with the scales or sizes (and roi)
    read at run time; each resized axis maps the output index to a source coordinate, linear
    interpolation takes the product of the per-axis weights over the 2^k neighbours."""
    if mode not in ("nearest", "linear"):
        raise NotImplementedError(f"dyn_resize: mode {mode!r} has no kernel (nearest, linear)")
    if antialias:  # (a downscale widens the filter by 1/scale: a run-time tap count)
        raise NotImplementedError("dyn_resize: antialiased linear resize has no kernel")
    r = len(data.shape)
    axes = [a % r for a in axes] if axes else list(range(r))
    f64 = lambda v: v.astype("float64") if v.dtype != "float64" else v  # noqa: E731
    dims_in = [f64(_i64(data.shape[a])) for a in axes]
    if use_sizes:
        ratios = [f64(target[k]) / dims_in[k] for k in range(len(axes))]
        if policy != "stretch":
            pick = tir_op.min if policy == "not_larger" else tir_op.max
            sc = pick(*ratios) if len(ratios) > 1 else ratios[0]
            ratios = [sc] * len(axes)
    else:
        ratios = [f64(target[k]) for k in range(len(axes))]

    def f(*i: Any) -> PrimExpr:
        taps: list[list[tuple[PrimExpr, PrimExpr]]] = []  # per resized axis: (index, weight)
        outside = []
        for k, ax in enumerate(axes):
            n_in = dims_in[k]
            roi_k = None
            if coord == "tf_crop_and_resize":
                roi_k = (f64(roi[k]), f64(roi[len(axes) + k]))
            x = _source_coord(coord, f64(_i64(i[ax])), n_in, f64(_i64(out_shape[ax])),
                              ratios[k], roi_k)
            if coord == "tf_crop_and_resize":
                outside.append(tir_op.any(x < 0.0, x > n_in - 1.0))
            x0 = tir_op.floor(x)
            frac = x - x0
            last = _i64(data.shape[ax]) - 1

            def clamp(v: PrimExpr, last: PrimExpr = last) -> PrimExpr:
                return _i32(tir_op.max(tir_op.min(v.astype("int64"), last), 0))

            if mode == "nearest":
                up = {"round_prefer_floor": frac > 0.5, "round_prefer_ceil": frac >= 0.5,
                      "floor": frac < 0.0, "ceil": frac > 0.0}[nearest_mode]
                taps.append([(clamp(tir_op.if_then_else(up, x0 + 1.0, x0)), None)])
            else:
                taps.append([(clamp(x0), 1.0 - frac), (clamp(x0 + 1.0), frac)])
        total: PrimExpr | None = None

        def corners(k: int, idx: dict, w: Any) -> None:
            nonlocal total
            if k == len(axes):
                full = tuple(idx.get(d, i[d]) for d in range(r))
                v = data[full]
                term = v if w is None else f64(v) * w
                total = term if total is None else total + term
                return
            for index, weight in taps[k]:
                ww = weight if w is None else (w if weight is None else w * weight)
                corners(k + 1, {**idx, axes[k]: index}, ww)

        corners(0, {}, None)
        assert total is not None
        out = total.astype(data.dtype) if total.dtype != data.dtype else total
        if outside:
            return tir_op.if_then_else(tir_op.any(*outside),
                                       const(extrapolation_value, data.dtype), out)
        return out

    return te.compute(tuple(out_shape), f, name="T_dyn_resize", tag="injective")
