"""``dyn.image.resize``: ONNX Resize (any rank, every mode) whose scales or sizes (and roi) are
tensors known only at run time. Its meaning is the ONNX definition, computed per axis as the
static converter's interpolation matrices (``relay.frontend.onnx.resize.axis_weights``)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...expr import RelayExpr, const
from ...ty import TensorType, Type
from .._rel import fail, normalize_axes, tensor_arg
from ..registry import make_call
from ._common import any_dims, register_dyn_op, shape_tensor_len

__all__ = ["resize", "resize2d"]


def _spec(a: Any) -> Any:
    from ...frontend.onnx.resize import ResizeSpec

    return ResizeSpec(a.mode, a.coordinate_transformation_mode, a.nearest_mode, a.cubic_coeff_a,
                      a.exclude_outside, a.antialias, a.extrapolation_value)


def _plan(a: Any, x: np.ndarray, roi: np.ndarray, target: np.ndarray) -> tuple:
    from ...frontend.onnx.resize import output_size_and_scales

    r = x.ndim
    axes = list(a.axes) if a.axes else list(range(r))
    vals = np.asarray(target).reshape(-1)
    if len(vals) != len(axes):
        raise ValueError(f"{'sizes' if a.use_sizes else 'scales'} {vals.tolist()} do not match "
                         f"the axes {axes}")
    if a.use_sizes:
        out, sc = output_size_and_scales(x.shape, axes, None, [int(v) for v in vals],
                                         a.keep_aspect_ratio_policy)
    else:
        if any(not v > 0 for v in vals):
            raise ValueError(f"scales {vals.tolist()} must be positive")
        out, sc = output_size_and_scales(x.shape, axes, [float(v) for v in vals], None)
    if any(o < 1 for o in out) and x.size:
        raise ValueError(f"the output shape {out} has an empty axis")
    full_roi = None
    if a.coordinate_transformation_mode == "tf_crop_and_resize":
        rv = [float(v) for v in np.asarray(roi).reshape(-1)]
        if len(rv) != 2 * len(axes):
            raise ValueError(f"roi {rv} does not match the axes {axes}")
        full_roi = [0.0] * r + [1.0] * r
        for k, ax in enumerate(axes):
            full_roi[ax], full_roi[r + ax] = rv[k], rv[len(axes) + k]
    return out, sc, full_roi


def _resize_np(a: Any, ins: list) -> np.ndarray:
    from ...frontend.onnx.resize import axis_weights

    x, roi, target = ins
    out, sc, full_roi = _plan(a, x, roi, target)
    spec = _spec(a)
    r = x.ndim
    y = x.astype(np.float64)
    for ax in range(r):
        ax_roi = None if full_roi is None else (full_roi[ax], full_roi[ax + r])
        same = (out[ax] == y.shape[ax] and math.isclose(sc[ax], 1.0)
                and (ax_roi is None or (math.isclose(ax_roi[0], 0.0)
                                        and math.isclose(ax_roi[1], 1.0))))
        if same:
            continue
        w, outside = axis_weights(spec, y.shape[ax], out[ax], sc[ax], ax_roi)
        y = np.moveaxis(np.tensordot(y, w, axes=([ax], [1])), -1, ax)
        if outside.any():
            idx = [slice(None)] * r
            idx[ax] = outside
            y[tuple(idx)] = spec.extrapolation_value
    if np.dtype(x.dtype).kind in "iub":
        y = np.rint(y)
    return y.astype(x.dtype)


def _resize_rel(arg_types: list[Type], attrs: Any) -> Type:
    d = tensor_arg(arg_types[0], "the data")
    tensor_arg(arg_types[1], "the roi")
    if attrs.use_sizes:
        n = shape_tensor_len(arg_types[2], "the sizes")
    else:
        t = tensor_arg(arg_types[2], "the scales")
        if len(t.shape) != 1 or not isinstance(t.shape[0], int) or not t.dtype.startswith("float"):
            fail(f"resize: scales must be a 1-D float tensor of static length, got {t}")
        n = int(t.shape[0])
    r = len(d.shape)
    axes = normalize_axes(attrs.axes, r) if attrs.axes else list(range(r))
    if n != len(axes):
        fail(f"resize: {n} {'sizes' if attrs.use_sizes else 'scales'} for axes {axes}")
    dims = list(d.shape)
    for ax in axes:
        dims[ax] = any_dims(1)[0]
    return TensorType(dims, d.dtype)


register_dyn_op("dyn.image.resize", _resize_rel, 3, {
    "mode": "nearest", "coordinate_transformation_mode": "half_pixel",
    "nearest_mode": "round_prefer_floor", "cubic_coeff_a": -0.75, "exclude_outside": False,
    "antialias": False, "extrapolation_value": 0.0, "axes": (), "use_sizes": False,
    "keep_aspect_ratio_policy": "stretch",
}, _resize_np, lambda a, ins: [tuple(_plan(a, *ins)[0])],
    "ONNX Resize with run-time scales or sizes (and roi)")


def resize(data: RelayExpr, scales_or_sizes: RelayExpr, roi: RelayExpr | None = None,
           use_sizes: bool = False, axes: Any = (), mode: str = "nearest",
           coordinate_transformation_mode: str = "half_pixel",
           nearest_mode: str = "round_prefer_floor", cubic_coeff_a: float = -0.75,
           exclude_outside: bool = False, antialias: bool = False,
           extrapolation_value: float = 0.0, keep_aspect_ratio_policy: str = "stretch"
           ) -> RelayExpr:
    """Resize ``data`` on ``axes`` (default: all) to ``sizes`` (``use_sizes``) or by
    ``scales``, the ONNX way."""
    if mode not in ("nearest", "linear", "cubic"):
        raise ValueError(f"resize: mode must be nearest, linear or cubic, got {mode!r}")
    roi = roi if roi is not None else const(np.zeros(0, np.float32))
    return make_call("dyn.image.resize", [data, roi, scales_or_sizes], {
        "mode": mode, "coordinate_transformation_mode": coordinate_transformation_mode,
        "nearest_mode": nearest_mode, "cubic_coeff_a": float(cubic_coeff_a),
        "exclude_outside": bool(exclude_outside), "antialias": bool(antialias),
        "extrapolation_value": float(extrapolation_value),
        "axes": tuple(int(v) for v in axes), "use_sizes": bool(use_sizes),
        "keep_aspect_ratio_policy": keep_aspect_ratio_policy,
    })  # fmt: skip


_ROUNDING = {"": None, "round": "round_prefer_ceil", "floor": "floor", "ceil": "ceil",
             "round_prefer_floor": "round_prefer_floor", "round_prefer_ceil": "round_prefer_ceil"}


def resize2d(data: RelayExpr, size: Any, roi: RelayExpr | None = None, layout: str = "NCHW",
             method: str = "linear", coordinate_transformation_mode: str = "half_pixel",
             rounding_method: str = "", cubic_alpha: float = -0.75, cubic_exclude: int = 0,
             extrapolation_value: float = 0.0) -> RelayExpr:
    """TVM's ``dyn.image.resize2d``: the spatial axes of NCHW / NHWC ``data`` resized to
    ``size`` = (height, width), a 1-D integer tensor; N and C keep their static sizes. (A form
    of ``dyn.image.resize``; rounding "" is TVM's default: "round" under align_corners, else
    "floor".)"""
    if layout not in ("NCHW", "NHWC"):
        raise ValueError(f"resize2d: layout must be NCHW or NHWC, got {layout!r}")
    modes = {"nearest_neighbor": "nearest", "linear": "linear", "cubic": "cubic"}
    if method not in modes or rounding_method not in _ROUNDING:
        raise ValueError(f"resize2d: method {method!r} / rounding_method {rounding_method!r}")
    rounding = _ROUNDING[rounding_method] or (
        "round_prefer_ceil" if coordinate_transformation_mode == "align_corners" else "floor")
    size = size if isinstance(size, RelayExpr) else const(np.asarray(size, np.int64))
    return resize(data, size, roi, use_sizes=True, axes=(2, 3) if layout == "NCHW" else (1, 2),
                  mode=modes[method], coordinate_transformation_mode=coordinate_transformation_mode,
                  nearest_mode=rounding, cubic_coeff_a=cubic_alpha,
                  exclude_outside=bool(cubic_exclude), extrapolation_value=extrapolation_value)
