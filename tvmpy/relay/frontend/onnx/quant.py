"""ONNX quantization operators as float arithmetic on relay ops: the fallbacks of ``qlinear``
(which imports them into the QNN dialect) where the integer formulation does not apply.

QuantizeLinear / DequantizeLinear (blocked, or non-8/16-bit types), QLinearMatMul, QLinearConv,
MatMulInteger and ConvInteger. Integer products are computed on the zero-point-shifted values in
float32 (exact while the sums stay below 2**24, true for the 8-bit operators' sizes here) or
int32; requantization rounds half to even and saturates, as the ONNX definitions.
"""

from __future__ import annotations

import numpy as np

from ....ir import dtype as dt
from ...expr import RelayExpr
from ...op import tensor, transform
from ..common import reshape_to
from .context import ImportContext, dtype_of, shape_of
from .conv import conv
from .linalg import matmul
from .low_precision import LOW_FLOATS, cast_to
from .registry import Attrs, Inputs, Names, Output


def _param(ctx: ImportContext, p: RelayExpr, x_shape: list[int], attrs: Attrs) -> RelayExpr:
    """A scale or zero point shaped to broadcast against x (per tensor, per axis, or blocked)."""
    ps = shape_of(p)
    r = len(x_shape)
    if len(ps) == 0 or int(np.prod(ps)) == 1 and len(ps) <= 1:
        return reshape_to(p, []) if ps else p
    axis = int(attrs.get("axis", 1)) % r
    block = int(attrs.get("block_size", 0))
    if block:
        if len(ps) != r:
            raise ctx.fail(f"blocked quantization: parameter shape {ps} must have rank {r}")
        return transform.repeat(p, block, axis) if ps[axis] * block == x_shape[axis] else \
            transform.strided_slice(transform.repeat(p, block, axis), [0], [x_shape[axis]],
                                    axes=[axis])
    if len(ps) != 1 or ps[0] != x_shape[axis]:
        raise ctx.fail(f"per-axis parameter of shape {ps} does not match axis {axis} of {x_shape}")
    shape = [1] * r
    shape[axis] = ps[0]
    return reshape_to(p, shape)


def _saturate(ctx: ImportContext, y: RelayExpr, out_dtype: str) -> RelayExpr:
    """``y`` (already rounded to integers) clamped to the range of the integer ``out_dtype``
    (int4/uint4/int2/uint2 included) and cast to it."""
    import ml_dtypes

    npd = dt.to_numpy(out_dtype)
    if npd.kind not in "iu" and out_dtype not in ("int4", "uint4", "int2", "uint2"):
        raise ctx.fail(f"output type {out_dtype} is not supported (integer, float8 and float4 types)")
    info = ml_dtypes.iinfo(npd)
    return transform.cast(tensor.clip(y, float(info.min), float(info.max)), out_dtype)


def _quantize(ctx: ImportContext, x: RelayExpr, scale: RelayExpr, zp: RelayExpr | None,
              out_dtype: str, attrs: Attrs) -> RelayExpr:
    xs = shape_of(x)
    ft = dtype_of(x)
    s = _param(ctx, scale, xs, attrs)
    if dtype_of(s) != ft:
        s = transform.cast(s, ft)
    if out_dtype in LOW_FLOATS:  # no rounding to integers: the float8/float4 cast rounds
        y = tensor.divide(x, s)
        if zp is not None:
            y = tensor.add(y, transform.cast(_param(ctx, zp, xs, attrs), ft))
        return cast_to(y, out_dtype, bool(attrs.get("saturate", 1)))
    y = tensor.nearbyint(tensor.divide(x, s))
    if zp is not None:
        y = tensor.add(y, transform.cast(_param(ctx, zp, xs, attrs), ft))
    return _saturate(ctx, y, out_dtype)


def dequantize_float(ctx: ImportContext, x: RelayExpr, scale: RelayExpr, zp: RelayExpr | None,
                     ft: str, attrs: Attrs) -> RelayExpr:
    xs = shape_of(x)
    if np.dtype(dtype_of(x)) == np.int32 and zp is not None:
        xi = tensor.subtract(x, _param(ctx, zp, xs, attrs))  # exact in int32, then one cast
        y = transform.cast(xi, ft)
    else:
        y = transform.cast(x, ft)
        if zp is not None:
            y = tensor.subtract(y, transform.cast(_param(ctx, zp, xs, attrs), ft))
    s = _param(ctx, scale, xs, attrs)
    return tensor.multiply(y, s if dtype_of(s) == ft else transform.cast(s, ft))


def _shifted(x: RelayExpr, zp: RelayExpr | None, dtype: str, axis_shape: list[int] | None = None
             ) -> RelayExpr:
    """cast(x) - cast(zp); a 1-D zero point broadcasts along ``axis_shape`` when given."""
    y = transform.cast(x, dtype)
    if zp is None:
        return y
    z = transform.cast(zp, dtype)
    if axis_shape is not None and shape_of(zp) and int(np.prod(shape_of(zp))) > 1:
        z = reshape_to(z, axis_shape)
    elif shape_of(zp):
        z = reshape_to(z, [])
    return tensor.subtract(y, z)


def _matmul(ctx: ImportContext, A, B):
    return matmul(ctx, [A, B], {}, ["", ""])


def _matmul_integer_float(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    A, B = inputs[0], inputs[1]
    za = inputs[2] if len(inputs) > 2 else None
    zb = inputs[3] if len(inputs) > 3 else None
    ra = len(shape_of(A))
    # a per-row zero point of A is (M,) -> (M, 1); of B, per column (N,) broadcasts as is
    a_sh = _shifted(A, za, "int32", [-1, 1] if ra >= 2 else None)
    b_sh = _shifted(B, zb, "int32")
    return _matmul(ctx, a_sh, b_sh)


def _requantize(ctx: ImportContext, acc: RelayExpr, sa: RelayExpr, sb: RelayExpr, sy: RelayExpr,
                zy: RelayExpr | None, out_dtype: str, channel_axis_shape: list[int] | None
                ) -> RelayExpr:
    """round(acc * (sa * sb / sy)) + zy, saturated (the multiplier in the scales' type)."""
    mult = tensor.divide(tensor.multiply(sa, sb), sy)
    if shape_of(mult) and int(np.prod(shape_of(mult))) > 1 and channel_axis_shape is not None:
        mult = reshape_to(mult, channel_axis_shape)
    elif shape_of(mult):
        mult = reshape_to(mult, [])
    y = tensor.multiply(acc, transform.cast(mult, "float32"))
    if zy is not None:
        z = transform.cast(zy, "float32")
        y = tensor.add(y, reshape_to(z, []) if shape_of(zy) else z)
    return _saturate(ctx, tensor.nearbyint(y), out_dtype)


def _qlinear_matmul_float(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    A, sa, za, B, sb, zb, sy, zy = (list(inputs) + [None] * 8)[:8]
    acc = _matmul(ctx, _shifted(A, za, "float32"), _shifted(B, zb, "float32"))
    out = dtype_of(zy) if zy is not None else dtype_of(A)
    return _requantize(ctx, acc, sa, sb, sy, zy, out, None)


def _conv_int(ctx: ImportContext, x, w, attrs: Attrs, names: Names, bias=None):
    return conv(ctx, [x, w] + ([bias] if bias is not None else []), attrs, names)


def _conv_integer_float(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    x, w = inputs[0], inputs[1]
    zx = inputs[2] if len(inputs) > 2 else None
    zw = inputs[3] if len(inputs) > 3 else None
    r = len(shape_of(w))
    xs = _shifted(x, zx, "float32")
    ws = _shifted(w, zw, "float32", [-1] + [1] * (r - 1))
    return transform.cast(_conv_int(ctx, xs, ws, attrs, names[:2]), "int32")


def _qlinear_conv_float(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    x, sx, zx, w, sw, zw, sy, zy = (list(inputs) + [None] * 9)[:8]
    bias = inputs[8] if len(inputs) > 8 else None
    r = len(shape_of(w))
    acc = _conv_int(ctx, _shifted(x, zx, "float32"),
                    _shifted(w, zw, "float32", [-1] + [1] * (r - 1)), attrs, names[:2])
    if bias is not None:
        acc = tensor.add(acc, reshape_to(transform.cast(bias, "float32"),
                                                [-1] + [1] * (r - 2)))
    out = dtype_of(zy) if zy is not None else dtype_of(x)
    return _requantize(ctx, acc, sx, sw, sy, zy, out, [-1] + [1] * (r - 2))


