"""ONNX quantization operators as float arithmetic on relay ops.

QuantizeLinear / DequantizeLinear (per tensor, per axis, blocked), QLinearMatMul, QLinearConv,
MatMulInteger and ConvInteger. Integer products are computed on the zero-point-shifted values in
float32 (exact while the sums stay below 2**24, true for the 8-bit operators' sizes here) or
int32; requantization rounds half to even and saturates, as the ONNX definitions.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..expr import RelayExpr, const
from ..op import tensor, transform
from ..type_infer import infer_type
from .common import reshape_to

__all__ = ["CONVERTERS", "round_half_even"]


def _shape(e: RelayExpr) -> list[int]:
    return [int(d) for d in infer_type(e).checked_type.shape]


def _dtype(e: RelayExpr) -> str:
    return str(infer_type(e).checked_type.dtype)


def _np_dtype(onnx_type: int) -> str:
    from onnx import helper

    return str(np.dtype(helper.tensor_dtype_to_np_dtype(onnx_type)))


def round_half_even(x: RelayExpr) -> RelayExpr:
    """Round to nearest, ties to even (ONNX's rounding; relay's round goes away from zero)."""
    dt = _dtype(x)
    f = tensor.floor(x)
    d = tensor.subtract(x, f)
    half = const(np.asarray(0.5, dt))
    even = tensor.add(f, tensor.floor_mod(f, const(np.asarray(2, dt))))
    up = tensor.add(f, const(np.asarray(1, dt)))
    return tensor.where(tensor.greater(d, half), up, tensor.where(tensor.less(d, half), f, even))


def _param(c: Any, p: RelayExpr, x_shape: list[int], a: dict) -> RelayExpr:
    """A scale or zero point shaped to broadcast against x (per tensor, per axis, or blocked)."""
    ps = _shape(p)
    r = len(x_shape)
    if len(ps) == 0 or int(np.prod(ps)) == 1 and len(ps) <= 1:
        return reshape_to(p, []) if ps else p
    axis = int(a.get("axis", 1)) % r
    block = int(a.get("block_size", 0))
    if block:
        if len(ps) != r:
            raise c.fail(f"blocked quantization: parameter shape {ps} must have rank {r}")
        return transform.repeat(p, block, axis) if ps[axis] * block == x_shape[axis] else \
            transform.strided_slice(transform.repeat(p, block, axis), [0], [x_shape[axis]],
                                    axes=[axis])
    if len(ps) != 1 or ps[0] != x_shape[axis]:
        raise c.fail(f"per-axis parameter of shape {ps} does not match axis {axis} of {x_shape}")
    shape = [1] * r
    shape[axis] = ps[0]
    return reshape_to(p, shape)


def _saturate(c: Any, y: RelayExpr, out_dtype: str) -> RelayExpr:
    if not np.issubdtype(np.dtype(out_dtype), np.integer):
        raise c.fail(f"output type {out_dtype} is not supported (integer types only)")
    info = np.iinfo(np.dtype(out_dtype))
    return transform.cast(tensor.clip(y, float(info.min), float(info.max)), out_dtype)


def _quantize(c: Any, x: RelayExpr, scale: RelayExpr, zp: RelayExpr | None, out_dtype: str,
              a: dict) -> RelayExpr:
    xs = _shape(x)
    ft = _dtype(x)
    s = _param(c, scale, xs, a)
    if _dtype(s) != ft:
        s = transform.cast(s, ft)
    y = round_half_even(tensor.divide(x, s))
    if zp is not None:
        y = tensor.add(y, transform.cast(_param(c, zp, xs, a), ft))
    return _saturate(c, y, out_dtype)


def _quantize_linear(c, i, a, n):
    x, scale = i[0], i[1]
    zp = i[2] if len(i) > 2 else None
    if a.get("output_dtype", 0):
        out = _np_dtype(a["output_dtype"])
    else:
        out = _dtype(zp) if zp is not None else "uint8"
    return _quantize(c, x, scale, zp, out, a)


def _dequantize_linear(c, i, a, n):
    x, scale = i[0], i[1]
    zp = i[2] if len(i) > 2 else None
    xs = _shape(x)
    ft = _np_dtype(a["output_dtype"]) if a.get("output_dtype", 0) else _dtype(scale)
    if np.dtype(_dtype(x)) == np.int32 and zp is not None:
        xi = tensor.subtract(x, _param(c, zp, xs, a))  # exact in int32, then one cast
        y = transform.cast(xi, ft)
    else:
        y = transform.cast(x, ft)
        if zp is not None:
            y = tensor.subtract(y, transform.cast(_param(c, zp, xs, a), ft))
    s = _param(c, scale, xs, a)
    return tensor.multiply(y, s if _dtype(s) == ft else transform.cast(s, ft))


def _shifted(x: RelayExpr, zp: RelayExpr | None, dtype: str, axis_shape: list[int] | None = None
             ) -> RelayExpr:
    """cast(x) - cast(zp); a 1-D zero point broadcasts along ``axis_shape`` when given."""
    y = transform.cast(x, dtype)
    if zp is None:
        return y
    z = transform.cast(zp, dtype)
    if axis_shape is not None and _shape(zp) and int(np.prod(_shape(zp))) > 1:
        z = reshape_to(z, axis_shape)
    elif _shape(zp):
        z = reshape_to(z, [])
    return tensor.subtract(y, z)


def _matmul(c, A, B):
    from .onnx import _CONVERTERS

    return _CONVERTERS["MatMul"](c, [A, B], {}, ["", ""])


def _matmul_integer(c, i, a, n):
    A, B = i[0], i[1]
    za = i[2] if len(i) > 2 else None
    zb = i[3] if len(i) > 3 else None
    ra = len(_shape(A))
    # a per-row zero point of A is (M,) -> (M, 1); of B, per column (N,) broadcasts as is
    a_sh = _shifted(A, za, "int32", [-1, 1] if ra >= 2 else None)
    b_sh = _shifted(B, zb, "int32")
    return _matmul(c, a_sh, b_sh)


def _requantize(c, acc: RelayExpr, sa: RelayExpr, sb: RelayExpr, sy: RelayExpr,
                zy: RelayExpr | None, out_dtype: str, channel_axis_shape: list[int] | None
                ) -> RelayExpr:
    """round(acc * (sa * sb / sy)) + zy, saturated (the multiplier in the scales' type)."""
    mult = tensor.divide(tensor.multiply(sa, sb), sy)
    if _shape(mult) and int(np.prod(_shape(mult))) > 1 and channel_axis_shape is not None:
        mult = reshape_to(mult, channel_axis_shape)
    elif _shape(mult):
        mult = reshape_to(mult, [])
    y = tensor.multiply(acc, transform.cast(mult, "float32"))
    if zy is not None:
        z = transform.cast(zy, "float32")
        y = tensor.add(y, reshape_to(z, []) if _shape(zy) else z)
    return _saturate(c, round_half_even(y), out_dtype)


def _qlinear_matmul(c, i, a, n):
    A, sa, za, B, sb, zb, sy, zy = (list(i) + [None] * 8)[:8]
    acc = _matmul(c, _shifted(A, za, "float32"), _shifted(B, zb, "float32"))
    out = _dtype(zy) if zy is not None else _dtype(A)
    return _requantize(c, acc, sa, sb, sy, zy, out, None)


def _conv_int(c, x, w, a, n, bias=None):
    from .onnx import _CONVERTERS

    return _CONVERTERS["Conv"](c, [x, w] + ([bias] if bias is not None else []), a, n)


def _conv_integer(c, i, a, n):
    x, w = i[0], i[1]
    zx = i[2] if len(i) > 2 else None
    zw = i[3] if len(i) > 3 else None
    r = len(_shape(w))
    xs = _shifted(x, zx, "float32")
    ws = _shifted(w, zw, "float32", [-1] + [1] * (r - 1))
    return transform.cast(_conv_int(c, xs, ws, a, n[:2]), "int32")


def _qlinear_conv(c, i, a, n):
    x, sx, zx, w, sw, zw, sy, zy = (list(i) + [None] * 9)[:8]
    bias = i[8] if len(i) > 8 else None
    r = len(_shape(w))
    acc = _conv_int(c, _shifted(x, zx, "float32"),
                    _shifted(w, zw, "float32", [-1] + [1] * (r - 1)), a, n[:2])
    if bias is not None:
        acc = tensor.add(acc, reshape_to(transform.cast(bias, "float32"),
                                                [-1] + [1] * (r - 2)))
    out = _dtype(zy) if zy is not None else _dtype(x)
    return _requantize(c, acc, sx, sw, sy, zy, out, [-1] + [1] * (r - 2))


CONVERTERS = {
    "QuantizeLinear": _quantize_linear, "DequantizeLinear": _dequantize_linear,
    "MatMulInteger": _matmul_integer, "QLinearMatMul": _qlinear_matmul,
    "ConvInteger": _conv_integer, "QLinearConv": _qlinear_conv,
}
