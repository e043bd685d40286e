"""Image operators (``relay.image``): resize2d (nearest, linear, cubic), as TVM's ``image.resize2d``."""

from __future__ import annotations

from typing import Any

from ..expr import RelayExpr
from ..ty import TensorType, Type
from ._rel import fail, shape_str, tensor_arg
from .registry import REQUIRED, OpPattern, make_call, register_op

__all__ = ["resize2d", "resize"]

_METHODS = ("nearest_neighbor", "linear", "cubic")
_COORD = ("half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel", "tf_half_pixel_for_nn")
_ROUND = ("", "round", "floor", "ceil", "round_prefer_floor", "round_prefer_ceil")


def _resize2d_rel(arg_types: list[Type], attrs: Any) -> Type:
    d = tensor_arg(arg_types[0], "the data")
    if len(d.shape) != 4 or attrs.layout not in ("NCHW", "NHWC"):
        fail(f"resize2d needs 4-D NCHW or NHWC data, got {shape_str(d.shape)} ({attrs.layout})")
    oh, ow = attrs.size
    if oh <= 0 or ow <= 0:
        fail(f"resize2d: output size {list(attrs.size)} must be positive")
    out = list(d.shape)
    if attrs.layout == "NCHW":
        out[2], out[3] = oh, ow
    else:
        out[1], out[2] = oh, ow
    return TensorType(out, attrs.out_dtype or d.dtype)


register_op("image.resize2d", _resize2d_rel, OpPattern.INJECTIVE, 1, {
    "size": REQUIRED, "roi": (0.0, 0.0, 0.0, 0.0), "layout": "NCHW", "method": "linear",
    "coordinate_transformation_mode": "half_pixel", "rounding_method": "",
    "cubic_alpha": -0.5, "cubic_exclude": 0, "extrapolation_value": 0.0, "out_dtype": "",
})  # fmt: skip


def resize2d(
    data: RelayExpr,
    size: Any,
    roi: Any = None,
    layout: str = "NCHW",
    method: str = "linear",
    coordinate_transformation_mode: str = "half_pixel",
    rounding_method: str = "",
    cubic_alpha: float = -0.5,
    cubic_exclude: int = 0,
    extrapolation_value: float = 0.0,
    out_dtype: str = "",
) -> RelayExpr:
    """Resize the spatial axes to ``size`` = (height, width)."""
    if method not in _METHODS:
        raise ValueError(f"resize2d: method must be one of {_METHODS}, got {method!r}")
    if coordinate_transformation_mode not in _COORD:
        raise ValueError(f"resize2d: coordinate_transformation_mode must be one of {_COORD}, "
                         f"got {coordinate_transformation_mode!r}")
    if rounding_method not in _ROUND:
        raise ValueError(f"resize2d: rounding_method must be one of {_ROUND}, got {rounding_method!r}")
    size = (int(size), int(size)) if isinstance(size, int) else tuple(int(s) for s in size)
    if len(size) != 2:
        raise ValueError(f"resize2d: size must be (height, width), got {size}")
    roi = (0.0, 0.0, 0.0, 0.0) if roi is None else tuple(float(r) for r in roi)
    return make_call("image.resize2d", [data], {
        "size": size, "roi": roi, "layout": layout, "method": method,
        "coordinate_transformation_mode": coordinate_transformation_mode,
        "rounding_method": rounding_method, "cubic_alpha": float(cubic_alpha),
        "cubic_exclude": int(cubic_exclude), "extrapolation_value": float(extrapolation_value),
        "out_dtype": out_dtype,
    })  # fmt: skip


#: TVM 0.7's method names -> resize2d's
_V07_METHODS = {"nearest_neighbor": "nearest_neighbor", "bilinear": "linear", "bicubic": "cubic"}


def resize(data: RelayExpr, size: Any, layout: str = "NCHW", method: str = "bilinear",
           coordinate_transformation_mode: str = "half_pixel", out_dtype: Any = None
           ) -> RelayExpr:
    """TVM 0.7's ``relay.image.resize`` (renamed ``resize2d`` in 0.8): the same resize, with
    0.7's method names ("nearest_neighbor", "bilinear", "bicubic")."""
    if method not in _V07_METHODS:
        raise ValueError(f"resize: method must be one of {tuple(_V07_METHODS)} (TVM 0.7's "
                         f"names; resize2d takes {_METHODS}), got {method!r}")
    return resize2d(data, size, layout=layout, method=_V07_METHODS[method],
                    coordinate_transformation_mode=coordinate_transformation_mode,
                    out_dtype=out_dtype or "")
