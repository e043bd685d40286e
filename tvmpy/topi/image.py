"""Image resizing (TVM's ``topi.image.resize2d``) with ONNX Resize's coordinate modes.

For output pixel ``y`` the source coordinate is, with ``scale = in / out``:
``half_pixel``: ``(y + 0.5) * scale - 0.5``; ``pytorch_half_pixel``: the same, 0 when out is 1;
``align_corners``: ``y * (in - 1) / (out - 1)``; ``asymmetric``: ``y * scale``;
``tf_half_pixel_for_nn``: ``(y + 0.5) * scale``. ``nearest_neighbor`` rounds it
(``rounding_method``: round, floor, ceil, round_prefer_floor, round_prefer_ceil; by default, as
TVM, "round" under align_corners and "floor" otherwise) exactly: the coordinate is the fraction
``p / q`` of integers (``in`` and ``out`` are integers) and is rounded by integer division, so
ties (``(3 + 0.5) * 2/7 - 0.5 == 0.5``) are decided as the mode says, not by a float rounding
error (a fused multiply-add in the generated code turns 0.5 into 0.50000004); ``linear``
interpolates the two (four)
neighbours, with neighbour indices clamped to the image, which is ONNX's clamping of the
coordinate at the borders.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import te
from ..ir import dtype as dt
from ..tir import op as tir_op
from ..tir.expr import PrimExpr, Select, cast, const
from . import tag
from .utils import get_const_int

__all__ = ["resize2d"]

_COORD_MODES = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                "tf_half_pixel_for_nn")
_ROUNDING = ("round", "floor", "ceil", "round_prefer_floor", "round_prefer_ceil")


def _src_coord(x: PrimExpr, in_size: Any, out_size: int, mode: str) -> PrimExpr:
    f = "float32"
    xf = cast(x, f)
    in_f = cast(in_size, f)
    out_f = const(float(out_size), f)
    if mode == "align_corners":
        if out_size == 1:
            return const(0.0, f)
        return xf * (in_f - const(1.0, f)) / const(float(out_size - 1), f)
    scale = in_f / out_f
    if mode == "asymmetric":
        return xf * scale
    if mode == "tf_half_pixel_for_nn":
        return (xf + const(0.5, f)) * scale
    if mode == "pytorch_half_pixel" and out_size == 1:
        return const(0.0, f)
    return (xf + const(0.5, f)) * scale - const(0.5, f)


def _nearest_index(x: PrimExpr, in_size: Any, out_size: int, mode: str, how: str) -> PrimExpr:
    """The rounded source coordinate of output index ``x`` in exact int64 arithmetic: the
    coordinate is ``p / q`` with ``q > 0`` a constant (it depends on ``out_size`` only)."""
    i64 = "int64"
    xi, n = cast(x, i64), cast(in_size, i64)
    one, two = const(1, i64), const(2, i64)
    if out_size == 1 and mode in ("align_corners", "pytorch_half_pixel"):
        return const(0, "int32")
    if mode == "align_corners":
        p, q = xi * (n - one), out_size - 1
    elif mode == "asymmetric":
        p, q = xi * n, out_size
    elif mode == "tf_half_pixel_for_nn":
        p, q = (two * xi + one) * n, 2 * out_size
    else:  # half_pixel, pytorch_half_pixel: (2x + 1) in / (2 out) - 1/2
        p, q = (two * xi + one) * n - const(out_size, i64), 2 * out_size
    qc, q2 = const(q, i64), const(2 * q, i64)
    if how == "floor":
        r = tir_op.floordiv(p, qc)
    elif how == "ceil":
        r = tir_op.floordiv(p + const(q - 1, i64), qc)
    elif how == "round_prefer_ceil":  # floor(p/q + 1/2)
        r = tir_op.floordiv(two * p + qc, q2)
    elif how == "round_prefer_floor":  # ceil(p/q - 1/2)
        r = tir_op.floordiv(two * p + const(q - 1, i64), q2)
    else:  # "round": half away from zero
        r = Select(p >= const(0, i64), tir_op.floordiv(two * p + qc, q2),
                   const(0, i64) - tir_op.floordiv(qc - two * p, q2))
    return cast(r, "int32")


def _round(v: PrimExpr, how: str) -> PrimExpr:
    f = v.dtype
    half = const(0.5, f)
    if how == "floor":
        return tir_op.floor(v)
    if how == "ceil":
        return tir_op.ceil(v)
    if how == "round_prefer_ceil":
        return tir_op.floor(v + half)
    if how == "round_prefer_floor":
        return tir_op.ceil(v - half)
    # "round": half away from zero
    return Select(v >= const(0.0, f), tir_op.floor(v + half), tir_op.ceil(v - half))


def _clamp(i: PrimExpr, n: Any) -> PrimExpr:
    return tir_op.min(tir_op.max(i, const(0, "int32")), cast(n, "int32") - 1)


def resize2d(data: te.Tensor, roi: Any = None, size: Sequence[int] | None = None,
             layout: str = "NCHW", method: str = "linear",
             coordinate_transformation_mode: str = "half_pixel", rounding_method: str = "",
             out_dtype: str | None = None, separable: bool = False) -> te.Tensor:
    """Resize the spatial axes of a 4-D ``data`` (``layout`` NCHW or NHWC) to ``size`` =
    (out_h, out_w). ``method``: "nearest_neighbor" (or "nearest") or "linear" (or "bilinear").
    ``roi`` (4 numbers, TVM's signature) is read by TVM only in the tf_crop_and_resize mode,
    which is not supported here, so it is ignored. ``separable`` (linear only): interpolate along the width first, into a stage
    ``resize2d_rows`` of the input's rows at the output width (tag "resize2d_rows", scheduled
    by the target), then along the height between two of those rows: the same operations
    in the same order (equal up to FMA contraction), but an upsampling's output reads two contiguous rows
    instead of gathering four pixels per element (x86: 16x16 -> 256x256, 4.8 ns per element
    before)."""
    if not isinstance(data, te.Tensor):
        raise TypeError(f"topi.image.resize2d: expected a te.Tensor, got {type(data).__name__}")
    if data.ndim != 4:
        raise ValueError(f"topi.image.resize2d: needs a 4-D tensor, got shape {tuple(data.shape)}")
    if layout not in ("NCHW", "NHWC"):
        raise ValueError(f"topi.image.resize2d: layout must be 'NCHW' or 'NHWC', got {layout!r}")
    if roi is not None and (not isinstance(roi, (list, tuple)) or len(roi) != 4):
        raise ValueError(f"topi.image.resize2d: roi must be 4 numbers (TVM passes [0.0] * 4), "
                         f"got {roi!r}")
    meth = {"nearest": "nearest_neighbor", "bilinear": "linear"}.get(method, method)
    if meth not in ("nearest_neighbor", "linear"):
        raise ValueError(f"topi.image.resize2d: method must be 'nearest_neighbor' or 'linear', "
                         f"got {method!r}")
    mode = coordinate_transformation_mode
    if mode not in _COORD_MODES:
        raise ValueError(f"topi.image.resize2d: coordinate_transformation_mode {mode!r} is not "
                         f"one of {', '.join(_COORD_MODES)}")
    if not rounding_method:
        rounding_method = "round" if mode == "align_corners" else "floor"
    if rounding_method not in _ROUNDING:
        raise ValueError(f"topi.image.resize2d: rounding_method {rounding_method!r} is not one of "
                         f"{', '.join(_ROUNDING)}")
    if size is None or len(size) != 2:
        raise ValueError(f"topi.image.resize2d: size must be (out_h, out_w), got {size!r}")
    oh, ow = (get_const_int(s, "resize2d output size") for s in size)
    if oh <= 0 or ow <= 0:
        raise ValueError(f"topi.image.resize2d: output size must be positive, got {size!r}")
    hax, wax = (2, 3) if layout == "NCHW" else (1, 2)
    ih, iw = data.shape[hax], data.shape[wax]
    out_dtype = out_dtype or data.dtype
    shape = list(data.shape)
    shape[hax], shape[wax] = const(oh), const(ow)

    def read(i: Sequence[Any], y: PrimExpr, x: PrimExpr) -> PrimExpr:
        idx = list(i)
        idx[hax], idx[wax] = y, x
        return data(*idx)

    def finish(v: PrimExpr) -> PrimExpr:
        if dt.is_float(out_dtype):
            return cast(v, out_dtype)
        return cast(_round(v, "round"), out_dtype)  # integer images: round to nearest

    def body(*i: Any) -> PrimExpr:
        if meth == "nearest_neighbor":
            y = _clamp(_nearest_index(i[hax], ih, oh, mode, rounding_method), ih)
            x = _clamp(_nearest_index(i[wax], iw, ow, mode, rounding_method), iw)
            return cast(read(i, y, x), out_dtype)
        cy = _src_coord(i[hax], ih, oh, mode)
        cx = _src_coord(i[wax], iw, ow, mode)
        fy, fx = tir_op.floor(cy), tir_op.floor(cx)
        y0, x0 = cast(fy, "int32"), cast(fx, "int32")
        ly, lx = cy - fy, cx - fx
        one = const(1, "int32")
        y0c, y1c = _clamp(y0, ih), _clamp(y0 + one, ih)
        x0c, x1c = _clamp(x0, iw), _clamp(x0 + one, iw)

        def px(y: PrimExpr, x: PrimExpr) -> PrimExpr:
            return cast(read(i, y, x), "float32")

        f1 = const(1.0, "float32")
        top = px(y0c, x0c) * (f1 - lx) + px(y0c, x1c) * lx
        bot = px(y1c, x0c) * (f1 - lx) + px(y1c, x1c) * lx
        return finish(top * (f1 - ly) + bot * ly)

    if separable and meth == "linear":
        return _separable_linear(data, shape, hax, wax, ih, iw, oh, ow, mode, finish)
    return te.compute(shape, body, name="resize2d", tag=tag.INJECTIVE)


def _separable_linear(data: te.Tensor, shape: list, hax: int, wax: int, ih: Any, iw: Any,
                      oh: int, ow: int, mode: str, finish: Any) -> te.Tensor:
    """Linear resize as a width pass (stage ``resize2d_rows``) then a height pass; see
    :func:`resize2d`'s ``separable``."""
    f1, one = const(1.0, "float32"), const(1, "int32")
    rows_shape = list(data.shape)
    rows_shape[wax] = const(ow)

    def rows_body(*i: Any) -> PrimExpr:
        cx = _src_coord(i[wax], iw, ow, mode)
        fx = tir_op.floor(cx)
        x0 = cast(fx, "int32")
        lx = cx - fx

        def px(x: PrimExpr) -> PrimExpr:
            idx = list(i)
            idx[wax] = x
            return cast(data(*idx), "float32")

        return px(_clamp(x0, iw)) * (f1 - lx) + px(_clamp(x0 + one, iw)) * lx

    rows = te.compute(rows_shape, rows_body, name="resize2d_rows", tag="resize2d_rows")

    def body(*i: Any) -> PrimExpr:
        cy = _src_coord(i[hax], ih, oh, mode)
        fy = tir_op.floor(cy)
        y0 = cast(fy, "int32")
        ly = cy - fy

        def row(y: PrimExpr) -> PrimExpr:
            idx = list(i)
            idx[hax] = y
            return rows(*idx)

        return finish(row(_clamp(y0, ih)) * (f1 - ly) + row(_clamp(y0 + one, ih)) * ly)

    return te.compute(shape, body, name="resize2d", tag=tag.INJECTIVE)
