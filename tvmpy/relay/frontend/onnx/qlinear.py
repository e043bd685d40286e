"""ONNX quantized operators imported into the QNN dialect (``relay.qnn.op``).

QuantizeLinear / DequantizeLinear (per tensor and per axis), QLinearConv, QLinearMatMul,
ConvInteger, MatMulInteger, and the com.microsoft QOperator ops onnxruntime's
``quantize_static(QuantFormat.QOperator)`` emits: QLinearAdd, QLinearMul, QLinearSigmoid,
QLinearLeakyRelu, QLinearGlobalAveragePool, QLinearAveragePool, QLinearConcat, QLinearSoftmax and
QGemm.
DynamicQuantizeLinear imports through its ONNX function body (its QuantizeLinear is
``qnn.quantize``). QDQ graphs keep their QuantizeLinear/DequantizeLinear pairs as
``qnn.quantize``/``qnn.dequantize``; ``relay.qnn.transform.FakeQuantizationToInteger`` (run by
``relay.build``) turns the regions between them into QNN ops.

The float formulation in ``quant`` is kept where the integer one does not apply: blocked
quantization, 1-D/3-D QLinearConv/ConvInteger, a per-row zero point of MatMulInteger's A, and
per-column parameters of an N-D (batched) QLinearMatMul's B.
"""

from __future__ import annotations

import numpy as np

from ...expr import RelayExpr, const
from ...op import nn, tensor, transform
from ...qnn import op as qnn
from ...qnn.op.qnn import QUANTIZED_DTYPES
from ..common import reshape_to
from . import quant as fq
from .context import ImportContext, dtype_of, np_dtype, shape_of
from .conv import conv_pads
from .pooling import _avgpool, _pool_args
from .registry import Attrs, Inputs, Names, Output, converter

_MS = "com.microsoft."
_I32_ZERO = const(0, "int32")


def _zp(z: RelayExpr | None) -> RelayExpr:
    return _I32_ZERO if z is None else z


def _size(e: RelayExpr) -> int:
    return int(np.prod(shape_of(e))) if shape_of(e) else 1


def _axis(x: RelayExpr, attrs: Attrs) -> int:
    return int(attrs.get("axis", 1)) % max(len(shape_of(x)), 1)


def _per_channel_ok(p: RelayExpr | None) -> bool:
    return p is None or len(shape_of(p)) <= 1


@converter("QuantizeLinear")
def _quantize_linear(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    x, scale = inputs[0], inputs[1]
    zp = inputs[2] if len(inputs) > 2 else None
    out = np_dtype(attrs["output_dtype"]) if attrs.get("output_dtype", 0) else (
        dtype_of(zp) if zp is not None else "uint8")
    if attrs.get("block_size", 0) or out not in QUANTIZED_DTYPES or not (
            _per_channel_ok(scale) and _per_channel_ok(zp)):
        return fq._quantize(ctx, x, scale, zp, out, attrs)  # float formulation
    return qnn.quantize(x, scale, _zp(zp), axis=_axis(x, attrs), out_dtype=out)


@converter("DequantizeLinear")
def _dequantize_linear(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    x, scale = inputs[0], inputs[1]
    zp = inputs[2] if len(inputs) > 2 else None
    ft = np_dtype(attrs["output_dtype"]) if attrs.get("output_dtype", 0) else dtype_of(scale)
    if attrs.get("block_size", 0) or dtype_of(x) not in QUANTIZED_DTYPES or not (
            _per_channel_ok(scale) and _per_channel_ok(zp)):
        return fq.dequantize_float(ctx, x, scale, zp, ft, attrs)
    return qnn.dequantize(x, scale, _zp(zp), axis=_axis(x, attrs), out_dtype=ft)


# ---- products ----------------------------------------------------------------------------------
def _conv_attrs(ctx: ImportContext, x: RelayExpr, w: RelayExpr, attrs: Attrs) -> dict:
    xs, ws = shape_of(x), shape_of(w)
    k = list(attrs.get("kernel_shape", ws[2:]))
    strides = list(attrs.get("strides", [1, 1]))
    dil = list(attrs.get("dilations", [1, 1]))
    pads = conv_pads(ctx, attrs, xs[2:], k, strides, dil)
    return {"strides": strides, "padding": pads, "dilation": dil,
            "groups": int(attrs.get("group", 1)), "channels": ws[0], "kernel_size": k}


def _qconv(ctx: ImportContext, x, w, zx, zw, sx, sw, attrs: Attrs) -> RelayExpr:
    one = const(1.0, "float32")
    return qnn.conv2d(x, w, _zp(zx), _zp(zw), one if sx is None else sx,
                      one if sw is None else sw, **_conv_attrs(ctx, x, w, attrs))


def _integer_conv_applies(x: RelayExpr, w: RelayExpr, zw: RelayExpr | None) -> bool:
    return (len(shape_of(x)) == 4 and dtype_of(x) in ("int8", "uint8")
            and dtype_of(w) in ("int8", "uint8") and _per_channel_ok(zw))


def _requant(acc: RelayExpr, s_in: RelayExpr, s_out: RelayExpr, zy: RelayExpr | None,
             out: str, axis: int) -> RelayExpr:
    """acc (scale ``s_in``) requantized as onnxruntime: the float32 ratio ``s_in / s_out``.

    Half-precision scales: the ratio in their own type, then float32 (as ONNX's reference)."""
    if dtype_of(s_in) != "float32" or dtype_of(s_out) != "float32":
        ratio = transform.cast(tensor.divide(s_in, s_out), "float32")
        s_in, s_out = ratio, const(1.0, "float32")
    return qnn.requantize(acc, s_in, _I32_ZERO, s_out, _zp(zy), axis=axis, out_dtype=out)


def _scale_product(sa: RelayExpr, sb: RelayExpr) -> RelayExpr:
    return tensor.multiply(sa, sb)


@converter("QLinearConv")
def _qlinear_conv(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    x, sx, zx, w, sw, zw, sy, zy = (list(inputs) + [None] * 9)[:8]
    bias = inputs[8] if len(inputs) > 8 else None
    if not _integer_conv_applies(x, w, zw):
        return fq._qlinear_conv_float(ctx, inputs, attrs, names)
    acc = _qconv(ctx, x, w, zx, zw, sx, sw, attrs)
    if bias is not None:
        acc = nn.bias_add(acc, bias, axis=1)
    out = dtype_of(zy) if zy is not None else dtype_of(x)
    return _requant(acc, _scale_product(sx, sw), sy, zy, out, 1)


@converter("ConvInteger")
def _conv_integer(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    x, w = inputs[0], inputs[1]
    zx = inputs[2] if len(inputs) > 2 else None
    zw = inputs[3] if len(inputs) > 3 else None
    if not _integer_conv_applies(x, w, zw) or (zx is not None and _size(zx) > 1):
        return fq._conv_integer_float(ctx, inputs, attrs, names)
    return _qconv(ctx, x, w, zx, zw, None, None, attrs)


def _qmatmul(ctx: ImportContext, A: RelayExpr, B: RelayExpr, za, zb, sa, sb
             ) -> RelayExpr | None:
    """``(A - za) @ (B - zb)`` in int32 as qnn.dense (2-D B; per-column zb allowed) or
    qnn.batch_matmul (per-tensor); None when neither applies."""
    one = const(1.0, "float32")
    sa = one if sa is None else sa
    sb = one if sb is None else sb
    sha, shb = shape_of(A), shape_of(B)
    if dtype_of(A) not in ("int8", "uint8") or dtype_of(B) not in ("int8", "uint8"):
        return None
    if len(sha) < 2 or len(shb) < 2 or (za is not None and _size(za) > 1):
        return None
    M, K, N = sha[-2], sha[-1], shb[-1]
    if len(shb) == 2:
        if not (_per_channel_ok(zb) and _per_channel_ok(sb)):
            return None
        a2 = reshape_to(A, (int(np.prod(sha[:-1])), K)) if len(sha) > 2 else A
        out = qnn.dense(a2, transform.transpose(B, (1, 0)), _zp(za), _zp(zb), sa, sb, units=N)
        return reshape_to(out, sha[:-1] + [N]) if len(sha) > 2 else out
    if (zb is not None and _size(zb) > 1) or _size(sb) > 1:
        return None
    batch = list(np.broadcast_shapes(tuple(sha[:-2]), tuple(shb[:-2])))
    nb = int(np.prod(batch))
    a3 = A if sha[:-2] == batch else transform.broadcast_to(A, batch + [M, K])
    b3 = B if shb[:-2] == batch else transform.broadcast_to(B, batch + [K, N])
    out = qnn.batch_matmul(reshape_to(a3, (nb, M, K)), reshape_to(b3, (nb, K, N)), _zp(za),
                           _zp(zb), sa, sb, transpose_b=False)
    return reshape_to(out, batch + [M, N])


@converter("MatMulInteger")
def _matmul_integer(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    A, B = inputs[0], inputs[1]
    za = inputs[2] if len(inputs) > 2 else None
    zb = inputs[3] if len(inputs) > 3 else None
    out = _qmatmul(ctx, A, B, za, zb, None, None)
    return fq._matmul_integer_float(ctx, inputs, attrs, names) if out is None else out


@converter("QLinearMatMul")
def _qlinear_matmul(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    A, sa, za, B, sb, zb, sy, zy = (list(inputs) + [None] * 8)[:8]
    acc = _qmatmul(ctx, A, B, za, zb, sa, sb)
    if acc is None:
        return fq._qlinear_matmul_float(ctx, inputs, attrs, names)
    out = dtype_of(zy) if zy is not None else dtype_of(A)
    return _requant(acc, _scale_product(sa, sb), sy, zy, out, -1)


@converter(_MS + "QGemm")
def _qgemm(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    """alpha * (A - za)(B - zb) + C (int32, scale sa*sb), requantized to y (or float without
    y_scale)."""
    A, sa, za, B, sb, zb, C, sy, zy = (list(inputs) + [None] * 9)[:9]
    if attrs.get("transA", 0):
        A = transform.transpose(A, (1, 0))
    Bt = B if attrs.get("transB", 0) else transform.transpose(B, (1, 0))
    acc = qnn.dense(A, Bt, _zp(za), _zp(zb), sa, sb)
    if C is not None:
        acc = tensor.add(acc, C)
    s = _scale_product(sa, sb)
    alpha = float(attrs.get("alpha", 1.0))
    if alpha != 1.0:
        s = tensor.multiply(s, const(alpha, dtype_of(s)))
    if sy is None:
        return qnn.dequantize(acc, s, _I32_ZERO, axis=-1)
    return _requant(acc, s, sy, zy, dtype_of(zy) if zy is not None else dtype_of(A), -1)


# ---- com.microsoft elementwise QOperator ops ----------------------------------------------------
def _binary(fn):
    def convert(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
        a, sa, za, b, sb, zb, sc, zc = (list(inputs) + [None] * 8)[:8]
        if dtype_of(a) != dtype_of(b):
            raise ctx.fail(f"A ({dtype_of(a)}) and B ({dtype_of(b)}) must have one type")
        return fn(a, b, sa, _zp(za), sb, _zp(zb), sc, _zp(zc))

    return convert


converter(_MS + "QLinearAdd")(_binary(qnn.add))
converter(_MS + "QLinearMul")(_binary(qnn.mul))


@converter(_MS + "QLinearSigmoid")
def _qsigmoid(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    x, sx, zx, sy, zy = (list(inputs) + [None] * 5)[:5]
    return qnn.sigmoid(x, sx, _zp(zx), sy, _zp(zy))


@converter(_MS + "QLinearLeakyRelu")
def _qleaky(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    x, sx, zx, sy, zy = (list(inputs) + [None] * 5)[:5]
    return qnn.leaky_relu(x, float(attrs.get("alpha", 0.01)), sx, _zp(zx), sy, _zp(zy))


@converter(_MS + "QLinearGlobalAveragePool")
def _qgap(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    x, sx, zx, sy, zy = (list(inputs) + [None] * 5)[:5]
    if attrs.get("channels_last", 0):
        x = transform.transpose(x, (0, 3, 1, 2))
        y = qnn.global_avg_pool2d(x, sx, _zp(zx), sy, _zp(zy))
        return transform.transpose(y, (0, 2, 3, 1))
    if len(shape_of(x)) != 4:
        raise ctx.fail(f"2-D (4-D data) only, got shape {shape_of(x)}")
    return qnn.global_avg_pool2d(x, sx, _zp(zx), sy, _zp(zy))


@converter(_MS + "QLinearAveragePool")
def _qavgpool(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    """As onnxruntime: dequantize, the float average pool, quantize."""
    x, sx, zx, sy, zy = (list(inputs) + [None] * 5)[:5]
    if attrs.get("channels_last", 0):
        raise ctx.fail("channels_last=1 is not supported")
    if len(shape_of(x)) == 4:
        _, kw = _pool_args(ctx, x, attrs)
        return qnn.avg_pool2d(x, sx, _zp(zx), sy, _zp(zy), **kw,
                              count_include_pad=bool(attrs.get("count_include_pad", 0)))
    v = qnn.dequantize(x, sx, _zp(zx))  # 1-D / 3-D: the float pool
    pooled = _avgpool(ctx, [v], {k: a for k, a in attrs.items() if k != "channels_last"}, names)
    assert isinstance(pooled, RelayExpr)
    return qnn.quantize(pooled, sy, _zp(zy), out_dtype=dtype_of(x))


@converter(_MS + "QLinearConcat")
def _qconcat(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    sy, zy = inputs[0], inputs[1]
    rest = list(inputs[2:])
    if len(rest) % 3 or not rest:
        raise ctx.fail(f"expects (X, X_scale, X_zero_point) triples, got {len(rest)} inputs")
    xs, ss, zs = rest[0::3], rest[1::3], rest[2::3]
    axis = int(attrs["axis"]) % len(shape_of(xs[0]))
    return qnn.concatenate(xs, ss, [_zp(z) for z in zs], sy, _zp(zy), axis)


@converter(_MS + "QLinearSoftmax")
def _qsoftmax(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    """As onnxruntime (its lookup-table kernel; ``opset`` < 13 reduces over every axis from
    ``axis`` on, default axis 1; from 13 over ``axis``, default -1)."""
    x, sx, zx, sy, zy = (list(inputs) + [None] * 5)[:5]
    opset = int(attrs.get("opset", 13))
    axis = int(attrs.get("axis", 1 if opset < 13 else -1))
    return qnn.softmax(x, sx, _zp(zx), sy, _zp(zy), axis=axis, flatten=opset < 13)
