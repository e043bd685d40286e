"""Numpy references of the elementwise, broadcast, reduction and transform operators (what
``topi.add`` etc. must compute), written with numpy alone."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = [
    "add", "subtract", "multiply", "divide", "power", "maximum", "minimum", "floor_divide",
    "floor_mod", "equal", "not_equal", "less", "less_equal", "greater", "greater_equal",
    "bitwise_and", "bitwise_xor", "relu", "leaky_relu", "prelu", "clip", "sigmoid", "gelu", "erf",
    "hard_swish", "rsqrt", "sign", "reshape_ref", "strided_slice_ref", "take_ref",
    "resize2d_ref",
]

add, subtract, multiply, maximum, minimum = np.add, np.subtract, np.multiply, np.maximum, np.minimum
equal, not_equal, less, less_equal = np.equal, np.not_equal, np.less, np.less_equal
greater, greater_equal, bitwise_and, bitwise_xor = np.greater, np.greater_equal, np.bitwise_and, np.bitwise_xor
power = np.power


def divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """TVM's divide: true division on floats, truncation toward zero on integers."""
    if np.issubdtype(np.result_type(a, b), np.integer):
        q = np.abs(a.astype(np.int64)) // np.abs(b.astype(np.int64))
        return (np.sign(a) * np.sign(b) * q).astype(np.result_type(a, b))
    return a / b


def floor_divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if np.issubdtype(np.result_type(a, b), np.integer):
        return np.floor_divide(a, b)
    return np.floor(a / b)


def floor_mod(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if np.issubdtype(np.result_type(a, b), np.integer):
        return np.mod(a, b)
    return a - np.floor(a / b) * b


def relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0).astype(x.dtype)


def leaky_relu(x: np.ndarray, alpha: float) -> np.ndarray:
    return np.where(x > 0, x, x * alpha).astype(x.dtype)


def prelu(x: np.ndarray, slope: np.ndarray, axis: int = 1) -> np.ndarray:
    shape = [1] * x.ndim
    shape[axis] = -1
    return np.where(x > 0, x, x * slope.reshape(shape)).astype(x.dtype)


def clip(x: np.ndarray, lo: Any, hi: Any) -> np.ndarray:
    return np.clip(x, lo, hi).astype(x.dtype)


def sigmoid(x: np.ndarray) -> np.ndarray:
    return (1 / (1 + np.exp(-x.astype(np.float64)))).astype(x.dtype)


def erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf, otypes=[np.float64])(x.astype(np.float64)).astype(x.dtype)


def gelu(x: np.ndarray) -> np.ndarray:
    x64 = x.astype(np.float64)
    return (0.5 * x64 * (1 + np.vectorize(math.erf, otypes=[np.float64])(x64 / math.sqrt(2)))).astype(x.dtype)


def hard_swish(x: np.ndarray) -> np.ndarray:
    return (x * np.clip(x + 3, 0, 6) / 6).astype(x.dtype)


def rsqrt(x: np.ndarray) -> np.ndarray:
    return (1 / np.sqrt(x)).astype(x.dtype)


def sign(x: np.ndarray) -> np.ndarray:
    return np.sign(x).astype(x.dtype)


def reshape_ref(a: np.ndarray, newshape: Any) -> np.ndarray:
    """numpy reshape with ONNX's 0 (copy the input's dimension) on top of -1."""
    shape = [a.shape[k] if s == 0 else s for k, s in enumerate(newshape)]
    return a.reshape(shape)


def strided_slice_ref(a: np.ndarray, begin: Any, end: Any, strides: Any = None,
                      axes: Any = None) -> np.ndarray:
    strides = strides if strides is not None else [1] * len(begin)
    axes = axes if axes is not None else list(range(len(begin)))
    sl = [slice(None)] * a.ndim
    for b, e, s, ax in zip(begin, end, strides, axes):
        sl[ax] = slice(b, e, s)
    return a[tuple(sl)]


def take_ref(a: np.ndarray, indices: Any, axis: Any = None, mode: str = "clip") -> np.ndarray:
    if mode == "fast":
        mode = "raise"
    return np.take(a, indices, axis=axis, mode=mode)


def _src_coord(x_out: np.ndarray, in_size: int, out_size: int, mode: str) -> np.ndarray:
    scale = in_size / out_size
    if mode == "half_pixel":
        return (x_out + 0.5) * scale - 0.5
    if mode == "pytorch_half_pixel":
        return (x_out + 0.5) * scale - 0.5 if out_size > 1 else np.zeros_like(x_out)
    if mode == "align_corners":
        return x_out * ((in_size - 1) / (out_size - 1)) if out_size > 1 else np.zeros_like(x_out)
    if mode == "asymmetric":
        return x_out * scale
    raise ValueError(mode)


def _nearest_index(out_size: int, in_size: int, mode: str, how: str) -> np.ndarray:
    """The rounded source index of every output index, in exact rational arithmetic (ties are
    exact ties, as ONNX's definition has them)."""
    from fractions import Fraction
    from math import ceil, floor

    def coord(x: int) -> Fraction:
        s = Fraction(in_size, out_size)
        if mode in ("align_corners", "pytorch_half_pixel") and out_size == 1:
            return Fraction(0)
        if mode == "align_corners":
            return x * Fraction(in_size - 1, out_size - 1)
        if mode == "asymmetric":
            return x * s
        if mode == "tf_half_pixel_for_nn":
            return (x + Fraction(1, 2)) * s
        return (x + Fraction(1, 2)) * s - Fraction(1, 2)

    half = Fraction(1, 2)
    rounders = {"floor": floor, "ceil": ceil,
                "round_prefer_floor": lambda v: ceil(v - half),
                "round_prefer_ceil": lambda v: floor(v + half),
                "round": lambda v: floor(v + half) if v >= 0 else ceil(v - half)}
    return np.array([rounders[how](coord(x)) for x in range(out_size)], dtype=np.int64)


def _round(x: np.ndarray, how: str) -> np.ndarray:
    if how == "floor":
        return np.floor(x)
    if how == "ceil":
        return np.ceil(x)
    if how == "round_prefer_floor":
        return np.where(x - np.floor(x) == 0.5, np.floor(x), np.floor(x + 0.5))
    if how == "round_prefer_ceil":
        return np.floor(x + 0.5)
    if how == "round":
        return np.where(x >= 0, np.floor(x + 0.5), np.ceil(x - 0.5))
    raise ValueError(how)


def resize2d_ref(data: np.ndarray, size: Any, layout: str = "NCHW", method: str = "linear",
                 coordinate_transformation_mode: str = "half_pixel",
                 rounding_method: str = "round_prefer_floor") -> np.ndarray:
    """Resize the H and W axes of NCHW/NHWC ``data`` to ``size`` (ONNX Resize semantics)."""
    hax, wax = (2, 3) if layout == "NCHW" else (1, 2)
    ih, iw = data.shape[hax], data.shape[wax]
    oh, ow = size
    d = np.moveaxis(data.astype(np.float64), (hax, wax), (-2, -1))
    if method in ("nearest", "nearest_neighbor"):
        mode, how = coordinate_transformation_mode, rounding_method
        yi = np.clip(_nearest_index(oh, ih, mode, how), 0, ih - 1)
        xi = np.clip(_nearest_index(ow, iw, mode, how), 0, iw - 1)
        out = d[..., yi[:, None], xi[None, :]]
    else:
        ys = _src_coord(np.arange(oh, dtype=np.float64), ih, oh, coordinate_transformation_mode)
        xs = _src_coord(np.arange(ow, dtype=np.float64), iw, ow, coordinate_transformation_mode)
        y0 = np.floor(ys)
        x0 = np.floor(xs)
        fy = (ys - y0)[:, None]
        fx = (xs - x0)[None, :]
        y0i = np.clip(y0, 0, ih - 1).astype(int)
        y1i = np.clip(y0 + 1, 0, ih - 1).astype(int)
        x0i = np.clip(x0, 0, iw - 1).astype(int)
        x1i = np.clip(x0 + 1, 0, iw - 1).astype(int)
        a = d[..., y0i[:, None], x0i[None, :]]
        b = d[..., y0i[:, None], x1i[None, :]]
        c = d[..., y1i[:, None], x0i[None, :]]
        e = d[..., y1i[:, None], x1i[None, :]]
        out = a * (1 - fy) * (1 - fx) + b * (1 - fy) * fx + c * fy * (1 - fx) + e * fy * fx
    return np.moveaxis(out, (-2, -1), (hax, wax)).astype(data.dtype)
