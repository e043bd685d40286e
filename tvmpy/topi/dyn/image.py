"""The kernel of ``relay.op.dyn.image.resize``: ONNX Resize whose scales or sizes (and roi) are
read at run time, the output extents symbolic (the shape function has checked the values)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ... import te
from ...tir import op as tir_op
from ...tir.expr import PrimExpr, const
from ._common import _i32, _i64

__all__ = ["dyn_resize"]


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
