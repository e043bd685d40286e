"""The QNN operators (``relay.qnn.op.*``, TVM's signatures): quantized tensors are integer tensors
whose real value is ``scale * (q - zero_point)``; scales (float) and zero points (integer) are relay
expressions, a scalar (per tensor) or a 1-D tensor along ``axis`` (per channel).

Their meaning (``FNumpy``, :mod:`.reference`) is onnxruntime's: float32 arithmetic, rounding half to
even, saturation to the output type. ``relay.qnn.transform.CanonicalizeOps`` lowers them to integer
relay arithmetic before code generation (they have no compute of their own).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...expr import RelayExpr, Tuple
from ...op._rel import fail, normalize_axis, shape_str, tensor_arg, tuple_arg
from ...op.nn import (
    _CONV_SCHEMA,
    _POOL_SCHEMA,
    _batch_matmul_rel,
    _conv2d_rel,
    _dense_rel,
    _global_pool_rel,
    _pad4,
    _pair,
    _pool2d_rel,
)
from ...op.registry import OpPattern, make_call, register_op
from ...op.transform import _concat_rel
from ...ty import TensorType, Type, dim_equal

__all__ = [
    "quantize", "dequantize", "requantize", "conv2d", "dense", "batch_matmul", "add", "mul",
    "subtract", "concatenate", "sigmoid", "leaky_relu", "avg_pool2d", "global_avg_pool2d",
    "softmax", "QUANTIZED_DTYPES",
]  # fmt: skip

QUANTIZED_DTYPES = ("int8", "uint8", "int16", "uint16", "int32")
_KERNEL_DTYPES = ("int8", "uint8")
ROUNDINGS = ("TONEAREST", "UPWARD")
COMPUTE_DTYPES = ("float32", "int64")


# ---- argument checks -----------------------------------------------------------------------
def _qdata(t: Type, what: str, dtypes: Sequence[str] = QUANTIZED_DTYPES) -> TensorType:
    d = tensor_arg(t, what)
    if d.dtype not in dtypes:
        fail(f"{what} must be {'/'.join(dtypes)}, got {d.dtype}{shape_str(d.shape)}")
    return d


def _qparam(t: Type, what: str, data: TensorType | None, axis: int, is_scale: bool) -> None:
    """A scale (float) or zero point (integer): a scalar, or 1-D along ``axis`` of ``data``."""
    p = tensor_arg(t, what)
    kind = "float" if is_scale else "int"
    if not (p.dtype.startswith("float") if is_scale else p.dtype.startswith(("int", "uint"))):
        fail(f"{what} must be a {kind} tensor, got {p.dtype}")
    if len(p.shape) == 0 or (len(p.shape) == 1 and dim_equal(p.shape[0], 1)):
        return
    if len(p.shape) != 1 or data is None:
        fail(f"{what} must be a scalar{' or 1-D per channel' if data is not None else ''}, "
             f"got shape {shape_str(p.shape)}")
    assert data is not None
    ax = normalize_axis(axis, len(data.shape))
    if not dim_equal(p.shape[0], data.shape[ax]):
        fail(f"{what} has {p.shape[0]} values but axis {axis} of {shape_str(data.shape)} has "
             f"{data.shape[ax]}")


def _out_dtype(dtype: str, allowed: Sequence[str] = QUANTIZED_DTYPES) -> str:
    if dtype not in allowed:
        fail(f"out_dtype must be one of {'/'.join(allowed)}, got {dtype!r}")
    return dtype


# ---- quantize / dequantize / requantize ------------------------------------------------------
def _quantize_rel(arg_types: list[Type], attrs: Any) -> Type:
    d = tensor_arg(arg_types[0], "qnn.quantize's data")
    if not d.dtype.startswith("float"):
        fail(f"qnn.quantize: data must be float, got {d.dtype}")
    _qparam(arg_types[1], "qnn.quantize's output_scale", d, attrs.axis, True)
    _qparam(arg_types[2], "qnn.quantize's output_zero_point", d, attrs.axis, False)
    return TensorType(d.shape, _out_dtype(attrs.out_dtype))


def _dequantize_rel(arg_types: list[Type], attrs: Any) -> Type:
    d = _qdata(arg_types[0], "qnn.dequantize's data")
    _qparam(arg_types[1], "qnn.dequantize's input_scale", d, attrs.axis, True)
    _qparam(arg_types[2], "qnn.dequantize's input_zero_point", d, attrs.axis, False)
    if not attrs.out_dtype.startswith("float"):
        fail(f"qnn.dequantize: out_dtype must be float, got {attrs.out_dtype!r}")
    return TensorType(d.shape, attrs.out_dtype)


def _requantize_rel(arg_types: list[Type], attrs: Any) -> Type:
    d = _qdata(arg_types[0], "qnn.requantize's data")
    for i, what in enumerate(("input_scale", "input_zero_point", "output_scale",
                              "output_zero_point")):
        _qparam(arg_types[1 + i], f"qnn.requantize's {what}", d, attrs.axis, i % 2 == 0)
    if attrs.rounding not in ROUNDINGS:
        fail(f"qnn.requantize: rounding must be one of {ROUNDINGS}, got {attrs.rounding!r}")
    if attrs.compute_dtype not in COMPUTE_DTYPES:
        fail(f"qnn.requantize: compute_dtype must be one of {COMPUTE_DTYPES}, got "
             f"{attrs.compute_dtype!r}")
    return TensorType(d.shape, _out_dtype(attrs.out_dtype))


register_op("qnn.quantize", _quantize_rel, OpPattern.OPAQUE, 3,
            {"axis": -1, "out_dtype": "int8"})
register_op("qnn.dequantize", _dequantize_rel, OpPattern.OPAQUE, 3,
            {"axis": -1, "out_dtype": "float32"})
register_op("qnn.requantize", _requantize_rel, OpPattern.OPAQUE, 5,
            {"axis": -1, "rounding": "TONEAREST", "compute_dtype": "float32", "out_dtype": "int8"})


def quantize(data: RelayExpr, output_scale: RelayExpr, output_zero_point: RelayExpr,
             axis: int = -1, out_dtype: str = "int8") -> RelayExpr:
    """``saturate(round_half_even(data / scale) + zero_point)`` (ONNX QuantizeLinear)."""
    return make_call("qnn.quantize", [data, output_scale, output_zero_point],
                     {"axis": int(axis), "out_dtype": str(out_dtype)})


def dequantize(data: RelayExpr, input_scale: RelayExpr, input_zero_point: RelayExpr,
               axis: int = -1, out_dtype: str = "float32") -> RelayExpr:
    """``(data - zero_point) * scale`` (ONNX DequantizeLinear)."""
    return make_call("qnn.dequantize", [data, input_scale, input_zero_point],
                     {"axis": int(axis), "out_dtype": str(out_dtype)})


def requantize(data: RelayExpr, input_scale: RelayExpr, input_zero_point: RelayExpr,
               output_scale: RelayExpr, output_zero_point: RelayExpr, axis: int = -1,
               rounding: str = "TONEAREST", compute_dtype: str = "float32",
               out_dtype: str = "int8") -> RelayExpr:
    """Re-express ``data`` (scale ``input_scale``) in the output's scale and zero point.

    ``compute_dtype="float32"`` (default): as onnxruntime's requantization of an int32
    accumulator: ``(data - zp_in)`` times the float32 ratio ``input_scale / output_scale``, rounded
    half to even, plus ``zp_out``, saturated; bit-exact with ORT. ``compute_dtype="int64"``:
    TVM's fixed-point form (a Q31 multiplier and a rounding right shift, constant scales only),
    ``rounding`` "TONEAREST" (ties away from zero) or "UPWARD" (ties toward +inf).
    """
    return make_call("qnn.requantize", [data, input_scale, input_zero_point, output_scale,
                                        output_zero_point],
                     {"axis": int(axis), "rounding": str(rounding),
                      "compute_dtype": str(compute_dtype), "out_dtype": str(out_dtype)})


# ---- conv2d / dense / batch_matmul --------------------------------------------------------------
def _acc_dtype(attrs: Any, what: str) -> None:
    if attrs.out_dtype not in ("int32",):
        fail(f"{what}: out_dtype must be int32 (the accumulator), got {attrs.out_dtype!r}")


def _qconv2d_rel(arg_types: list[Type], attrs: Any) -> Type:
    d = _qdata(arg_types[0], "qnn.conv2d's data", _KERNEL_DTYPES)
    w = _qdata(arg_types[1], "qnn.conv2d's kernel", _KERNEL_DTYPES)
    _acc_dtype(attrs, "qnn.conv2d")
    if attrs.data_layout != "NCHW" or attrs.kernel_layout != "OIHW":
        fail(f"qnn.conv2d: layouts NCHW/OIHW only, got {attrs.data_layout}/{attrs.kernel_layout}")
    out = _conv2d_rel([d, w], attrs)
    _qparam(arg_types[2], "qnn.conv2d's input_zero_point", None, 0, False)
    _qparam(arg_types[3], "qnn.conv2d's kernel_zero_point", w, 0, False)
    _qparam(arg_types[4], "qnn.conv2d's input_scale", None, 0, True)
    _qparam(arg_types[5], "qnn.conv2d's kernel_scale", w, 0, True)
    return out


def _qdense_rel(arg_types: list[Type], attrs: Any) -> Type:
    d = _qdata(arg_types[0], "qnn.dense's data", _KERNEL_DTYPES)
    w = _qdata(arg_types[1], "qnn.dense's weight", _KERNEL_DTYPES)
    _acc_dtype(attrs, "qnn.dense")
    out = _dense_rel([d, w], attrs)
    _qparam(arg_types[2], "qnn.dense's input_zero_point", None, 0, False)
    _qparam(arg_types[3], "qnn.dense's kernel_zero_point", w, 0, False)
    _qparam(arg_types[4], "qnn.dense's input_scale", None, 0, True)
    _qparam(arg_types[5], "qnn.dense's kernel_scale", w, 0, True)
    return out


def _qbatch_matmul_rel(arg_types: list[Type], attrs: Any) -> Type:
    x = _qdata(arg_types[0], "qnn.batch_matmul's x", _KERNEL_DTYPES)
    y = _qdata(arg_types[1], "qnn.batch_matmul's y", _KERNEL_DTYPES)
    _acc_dtype(attrs, "qnn.batch_matmul")
    out = _batch_matmul_rel([x, y], attrs)
    for i, what in enumerate(("x_zero_point", "y_zero_point", "x_scale", "y_scale")):
        _qparam(arg_types[2 + i], f"qnn.batch_matmul's {what}", None, 0, i >= 2)
    return out


register_op("qnn.conv2d", _qconv2d_rel, OpPattern.OPAQUE, 6, {**_CONV_SCHEMA, "out_dtype": "int32"})
register_op("qnn.dense", _qdense_rel, OpPattern.OPAQUE, 6, {"units": None, "out_dtype": "int32"})
register_op("qnn.batch_matmul", _qbatch_matmul_rel, OpPattern.OPAQUE, 6,
            {"out_dtype": "int32", "transpose_a": False, "transpose_b": True})


def conv2d(data: RelayExpr, kernel: RelayExpr, input_zero_point: RelayExpr,
           kernel_zero_point: RelayExpr, input_scale: RelayExpr, kernel_scale: RelayExpr,
           kernel_size: Any = None, channels: int | None = None, strides: Any = (1, 1),
           padding: Any = (0, 0), dilation: Any = (1, 1), groups: int = 1,
           data_layout: str = "NCHW", kernel_layout: str = "OIHW", out_layout: str = "",
           out_dtype: str = "int32") -> RelayExpr:
    """``sum((data - zp_d) * (kernel - zp_k))`` in int32 (scale ``input_scale * kernel_scale``);
    the padding holds the data's zero point (real value 0). ``kernel_zero_point`` and
    ``kernel_scale`` may be per output channel."""
    return make_call("qnn.conv2d", [data, kernel, input_zero_point, kernel_zero_point,
                                    input_scale, kernel_scale], {
        "strides": _pair(strides, "strides"), "padding": _pad4(padding),
        "dilation": _pair(dilation, "dilation"), "groups": int(groups), "channels": channels,
        "kernel_size": None if kernel_size is None else _pair(kernel_size, "kernel_size"),
        "data_layout": data_layout, "kernel_layout": kernel_layout, "out_layout": out_layout,
        "out_dtype": out_dtype})  # fmt: skip


def dense(data: RelayExpr, weight: RelayExpr, input_zero_point: RelayExpr,
          kernel_zero_point: RelayExpr, input_scale: RelayExpr, kernel_scale: RelayExpr,
          units: int | None = None, out_dtype: str = "int32") -> RelayExpr:
    """``(data - zp_d) @ (weight - zp_w).T`` in int32; weight ``[units, K]``, its zero point and
    scale may be per unit."""
    return make_call("qnn.dense", [data, weight, input_zero_point, kernel_zero_point, input_scale,
                                   kernel_scale], {"units": units, "out_dtype": out_dtype})


def batch_matmul(x: RelayExpr, y: RelayExpr, x_zero_point: RelayExpr, y_zero_point: RelayExpr,
                 x_scale: RelayExpr, y_scale: RelayExpr, out_dtype: str = "int32",
                 transpose_a: bool = False, transpose_b: bool = True) -> RelayExpr:
    """Batched ``(x - zp_x) @ (y - zp_y)^T`` in int32 (per-tensor parameters)."""
    return make_call("qnn.batch_matmul", [x, y, x_zero_point, y_zero_point, x_scale, y_scale],
                     {"out_dtype": out_dtype, "transpose_a": bool(transpose_a),
                      "transpose_b": bool(transpose_b)})


# ---- elementwise binary -------------------------------------------------------------------
def _qbinary_rel(name: str):
    def rel(arg_types: list[Type], attrs: Any) -> Type:
        a = _qdata(arg_types[0], f"{name}'s lhs")
        b = _qdata(arg_types[1], f"{name}'s rhs")
        if a.dtype != b.dtype:
            fail(f"{name}: lhs {a.dtype} and rhs {b.dtype} differ")
        from ...op._rel import broadcast_shape

        shape = broadcast_shape(a.shape, b.shape)
        _qparam(arg_types[2], f"{name}'s lhs_scale", a, attrs.lhs_axis, True)
        _qparam(arg_types[3], f"{name}'s lhs_zero_point", a, attrs.lhs_axis, False)
        _qparam(arg_types[4], f"{name}'s rhs_scale", b, attrs.rhs_axis, True)
        _qparam(arg_types[5], f"{name}'s rhs_zero_point", b, attrs.rhs_axis, False)
        _qparam(arg_types[6], f"{name}'s output_scale", None, 0, True)
        _qparam(arg_types[7], f"{name}'s output_zero_point", None, 0, False)
        return TensorType(shape, a.dtype)

    return rel


for _n in ("add", "mul", "subtract"):
    register_op(f"qnn.{_n}", _qbinary_rel(f"qnn.{_n}"), OpPattern.OPAQUE, 8,
                {"lhs_axis": -1, "rhs_axis": -1})


def _binary(name: str, doc: str):
    def f(lhs: RelayExpr, rhs: RelayExpr, lhs_scale: RelayExpr, lhs_zero_point: RelayExpr,
          rhs_scale: RelayExpr, rhs_zero_point: RelayExpr, output_scale: RelayExpr,
          output_zero_point: RelayExpr, lhs_axis: int = -1, rhs_axis: int = -1) -> RelayExpr:
        return make_call(f"qnn.{name}", [lhs, rhs, lhs_scale, lhs_zero_point, rhs_scale,
                                         rhs_zero_point, output_scale, output_zero_point],
                         {"lhs_axis": int(lhs_axis), "rhs_axis": int(rhs_axis)})

    f.__name__ = name
    f.__doc__ = doc
    return f


add = _binary("add", "Quantized broadcasting add (as ORT's QLinearAdd: float32 scale ratios).")
mul = _binary("mul", "Quantized broadcasting multiply (as ORT's QLinearMul).")
subtract = _binary("subtract", "Quantized broadcasting subtract.")


# ---- concatenate ------------------------------------------------------------------------------
def _qconcat_rel(arg_types: list[Type], attrs: Any) -> Type:
    data = tuple_arg(arg_types[0], "qnn.concatenate's data")
    scales = tuple_arg(arg_types[1], "qnn.concatenate's input_scales")
    zps = tuple_arg(arg_types[2], "qnn.concatenate's input_zero_points")
    n = len(data.fields)
    if len(scales.fields) != n or len(zps.fields) != n:
        fail(f"qnn.concatenate: {n} inputs but {len(scales.fields)} scales and "
             f"{len(zps.fields)} zero points")
    for i, t in enumerate(data.fields):
        _qdata(t, f"qnn.concatenate's input {i}")
        _qparam(scales.fields[i], f"qnn.concatenate's input_scales[{i}]", None, 0, True)
        _qparam(zps.fields[i], f"qnn.concatenate's input_zero_points[{i}]", None, 0, False)
    _qparam(arg_types[3], "qnn.concatenate's output_scale", None, 0, True)
    _qparam(arg_types[4], "qnn.concatenate's output_zero_point", None, 0, False)
    return _concat_rel([data], attrs)


register_op("qnn.concatenate", _qconcat_rel, OpPattern.OPAQUE, 5, {"axis": 0})


def _tuple(v: Any) -> RelayExpr:
    return v if isinstance(v, RelayExpr) else Tuple(list(v))


def concatenate(data: Any, input_scales: Any, input_zero_points: Any, output_scale: RelayExpr,
                output_zero_point: RelayExpr, axis: int) -> RelayExpr:
    """Concatenate quantized tensors, each requantized to the output's parameters."""
    return make_call("qnn.concatenate", [_tuple(data), _tuple(input_scales),
                                         _tuple(input_zero_points), output_scale,
                                         output_zero_point], {"axis": int(axis)})


# ---- unary ops computed through float (dequantize -> op -> quantize) ------------------------------
def _qunary_rel(name: str, inner: Any = None):
    def rel(arg_types: list[Type], attrs: Any) -> Type:
        d = _qdata(arg_types[0], f"{name}'s data", ("int8", "uint8"))
        _qparam(arg_types[1], f"{name}'s input_scale", None, 0, True)
        _qparam(arg_types[2], f"{name}'s input_zero_point", None, 0, False)
        _qparam(arg_types[3], f"{name}'s output_scale", None, 0, True)
        _qparam(arg_types[4], f"{name}'s output_zero_point", None, 0, False)
        if inner is None:
            return d
        t = inner([d], attrs)
        return TensorType(t.shape, d.dtype)

    return rel


register_op("qnn.sigmoid", _qunary_rel("qnn.sigmoid"), OpPattern.OPAQUE, 5)
register_op("qnn.leaky_relu", _qunary_rel("qnn.leaky_relu"), OpPattern.OPAQUE, 5, {"alpha": 0.01})
register_op("qnn.avg_pool2d", _qunary_rel("qnn.avg_pool2d", _pool2d_rel), OpPattern.OPAQUE, 5,
            {**_POOL_SCHEMA, "count_include_pad": False})
register_op("qnn.global_avg_pool2d", _qunary_rel("qnn.global_avg_pool2d", _global_pool_rel),
            OpPattern.OPAQUE, 5, {"layout": "NCHW"})


def _qsoftmax_rel(arg_types: list[Type], attrs: Any) -> Type:
    t = _qunary_rel("qnn.softmax")(arg_types, attrs)
    assert isinstance(t, TensorType)
    normalize_axis(attrs.axis, len(t.shape), "qnn.softmax's axis")
    return t


register_op("qnn.softmax", _qsoftmax_rel, OpPattern.OPAQUE, 5, {"axis": -1, "flatten": False})


def _qargs(data: RelayExpr, input_scale: RelayExpr, input_zero_point: RelayExpr,
           output_scale: RelayExpr, output_zero_point: RelayExpr) -> list[RelayExpr]:
    return [data, input_scale, input_zero_point, output_scale, output_zero_point]


def sigmoid(data: RelayExpr, input_scale: RelayExpr, input_zero_point: RelayExpr,
            output_scale: RelayExpr, output_zero_point: RelayExpr) -> RelayExpr:
    return make_call("qnn.sigmoid", _qargs(data, input_scale, input_zero_point, output_scale,
                                           output_zero_point))


def leaky_relu(data: RelayExpr, alpha: float, input_scale: RelayExpr, input_zero_point: RelayExpr,
               output_scale: RelayExpr, output_zero_point: RelayExpr) -> RelayExpr:
    return make_call("qnn.leaky_relu", _qargs(data, input_scale, input_zero_point, output_scale,
                                              output_zero_point), {"alpha": float(alpha)})


def avg_pool2d(data: RelayExpr, input_scale: RelayExpr, input_zero_point: RelayExpr,
               output_scale: RelayExpr, output_zero_point: RelayExpr, pool_size: Any,
               strides: Any = (1, 1), padding: Any = (0, 0), dilation: Any = (1, 1),
               ceil_mode: bool = False, count_include_pad: bool = False,
               layout: str = "NCHW") -> RelayExpr:
    """As onnxruntime's QLinearAveragePool: dequantize, float average, quantize (TVM's
    argument order)."""
    return make_call("qnn.avg_pool2d", _qargs(data, input_scale, input_zero_point, output_scale,
                                              output_zero_point), {
        "pool_size": _pair(pool_size, "pool_size"), "strides": _pair(strides, "strides"),
        "padding": _pad4(padding), "dilation": _pair(dilation, "dilation"), "layout": layout,
        "ceil_mode": bool(ceil_mode), "count_include_pad": bool(count_include_pad)})  # fmt: skip


def global_avg_pool2d(data: RelayExpr, input_scale: RelayExpr, input_zero_point: RelayExpr,
                      output_scale: RelayExpr, output_zero_point: RelayExpr,
                      layout: str = "NCHW") -> RelayExpr:
    """Mean over H, W: the integer sum requantized by ``input_scale / (output_scale * H * W)``
    (as ORT's QLinearGlobalAveragePool)."""
    return make_call("qnn.global_avg_pool2d", _qargs(data, input_scale, input_zero_point,
                                                     output_scale, output_zero_point),
                     {"layout": layout})



def softmax(data: RelayExpr, input_scale: RelayExpr, input_zero_point: RelayExpr,
            output_scale: RelayExpr, output_zero_point: RelayExpr, axis: int = -1,
            flatten: bool = False) -> RelayExpr:
    """onnxruntime's QLinearSoftmax: a 256-entry float32 table of ``exp((q - max) * s)``
    (shifted so that the sum fits), a float32 sum per row, ``nearbyint(e * floor(1 / s_out) /
    sum) + zp_out``. ``flatten``: reduce over every axis from ``axis`` on (ONNX opset < 13).
    ``input_scale`` must be a constant; the input zero point cancels."""
    return make_call("qnn.softmax", _qargs(data, input_scale, input_zero_point, output_scale,
                                           output_zero_point),
                     {"axis": int(axis), "flatten": bool(flatten)})
