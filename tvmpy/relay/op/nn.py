"""Neural-network operators (``relay.nn``): conv2d, dense, batch_matmul, pooling, normalization
(batch, layer, instance, group), activations, softmax, padding, depth_to_space/space_to_depth. Each with its type relation; shapes may be
symbolic."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ...tir.data_layout import block_of
from ..expr import RelayExpr, TupleGetItem
from ..size_checks import require_same
from ..ty import TensorType, TupleType, Type, as_dim, dim_equal
from ._rel import fail, normalize_axis, shape_str, size_of, tensor_arg
from .registry import REQUIRED, OpPattern, make_call, register_float16_accumulation, register_op
from .transform import TupleWrapper

__all__ = [
    "conv2d", "conv2d_transpose", "dense", "matmul", "batch_matmul", "bias_add", "relu",
    "leaky_relu", "prelu", "softmax", "log_softmax", "batch_norm", "layer_norm", "max_pool2d",
    "avg_pool2d", "global_avg_pool2d", "global_max_pool2d", "adaptive_avg_pool2d", "pad",
    "batch_flatten", "dropout", "gelu", "contrib_conv2d_nchwc", "contrib_dense_pack", "instance_norm", "group_norm",
    "contrib_conv2d_winograd_nchwc", "contrib_conv2d_winograd_weight_transform",
    "contrib_conv2d_winograd_without_weight_transform",
    "depth_to_space", "space_to_depth", "stride_interleave",
    "conv1d", "conv3d", "max_pool1d", "max_pool3d",
    "avg_pool1d", "avg_pool3d", "bitpack", "bitserial_conv2d", "bitserial_dense",
]  # fmt: skip


def _pair(v: Any, what: str) -> tuple[int, int]:
    if isinstance(v, int):
        return (v, v)
    v = tuple(int(x) for x in v)
    if len(v) == 1:
        return (v[0], v[0])
    if len(v) != 2:
        raise ValueError(f"{what} must have 1 or 2 values, got {v}")
    return v  # type: ignore[return-value]


def _pad4(v: Any) -> tuple[int, int, int, int]:
    """padding as TVM: int, (ph, pw) or (top, left, bottom, right)."""
    if isinstance(v, int):
        return (v, v, v, v)
    v = tuple(int(x) for x in v)
    if len(v) == 1:
        return (v[0],) * 4  # type: ignore[return-value]
    if len(v) == 2:
        return (v[0], v[1], v[0], v[1])
    if len(v) == 4:
        return v  # type: ignore[return-value]
    raise ValueError(f"padding must have 1, 2 or 4 values, got {v}")


def _out_dim(size: Any, k: int, pad: int, stride: int, dilation: int, ceil_mode: bool = False,
             pad_begin: int = 0) -> Any:
    eff = (k - 1) * dilation + 1
    num = size + pad - eff
    if isinstance(num, int) and num < 0:
        fail(f"window {k} (dilation {dilation}) is larger than the padded input {size + pad}")
    if ceil_mode:
        out = (num + stride - 1) // stride + 1
        if isinstance(out, int) and isinstance(size, int) and (out - 1) * stride >= size + pad_begin:
            out -= 1  # the last window must start inside the input (as topi, ONNX, PyTorch)
        return as_dim(out)
    return as_dim(num // stride + 1)


# ------------------------------------------------------------------------------------------------
# conv2d
_LAYOUT_AXES = {"NCHW": (1, 2, 3), "NHWC": (3, 1, 2)}  # channel, height, width


_PACKED_DATA = re.compile(r"NCHW(\d+)n(\d+)c")
_PACKED_KERNEL = re.compile(r"OIHW(\d+)o(\d+)i")


def _conv2d_packed_rel(d: TensorType, w: TensorType, attrs: Any) -> Type:
    """VTA's blocked layouts (``vta.top.graph_pack``): data NCHW{n}n{c}c = (N/n, C/c, H, W, n,
    c), kernel OIHW{o}o{i}i = (O/o, I/i, KH, KW, o, i); the output is NCHW{n}n{o}c."""
    dm = _PACKED_DATA.fullmatch(attrs.data_layout)
    km = _PACKED_KERNEL.fullmatch(attrs.kernel_layout or "")
    if dm is None or km is None or len(d.shape) != 6 or len(w.shape) != 6:
        fail(f"conv2d: packed data {shape_str(d.shape)} ({attrs.data_layout}) needs a 6-D "
             f"NCHW<n>n<c>c data and OIHW<o>o<i>i kernel, got kernel {shape_str(w.shape)} "
             f"({attrs.kernel_layout})")
    bn, bc = int(dm.group(1)), int(dm.group(2))
    bo, bi = int(km.group(1)), int(km.group(2))
    if attrs.groups != 1:
        fail(f"conv2d: packed layouts need groups=1, got {attrs.groups}")
    if not (dim_equal(d.shape[4], bn) and dim_equal(d.shape[5], bc) and dim_equal(w.shape[4], bo)
            and dim_equal(w.shape[5], bi) and bi == bc and dim_equal(w.shape[1], d.shape[1])):
        fail(f"conv2d: data {shape_str(d.shape)} ({attrs.data_layout}) and kernel "
             f"{shape_str(w.shape)} ({attrs.kernel_layout}) blocks do not match")
    kh, kw = w.shape[2], w.shape[3]
    if not (isinstance(kh, int) and isinstance(kw, int)):
        fail(f"conv2d: kernel size must be static, got weight {shape_str(w.shape)}")
    if attrs.channels is not None and not dim_equal(attrs.channels, as_dim(w.shape[0] * bo)):
        fail(f"conv2d: channels={attrs.channels} but the packed weight has {w.shape[0]}x{bo}")
    pt, pl, pb, pr = attrs.padding
    sh, sw = attrs.strides
    dh, dw = attrs.dilation
    oh = _out_dim(d.shape[2], kh, pt + pb, sh, dh)
    ow = _out_dim(d.shape[3], kw, pl + pr, sw, dw)
    return TensorType([d.shape[0], w.shape[0], oh, ow, bn, bo], attrs.out_dtype or d.dtype)


def _conv2d_rel(arg_types: list[Type], attrs: Any) -> Type:
    d = tensor_arg(arg_types[0], "the data")
    w = tensor_arg(arg_types[1], "the weight")
    if len(d.shape) == 6:  # VTA's packed layouts
        return _conv2d_packed_rel(d, w, attrs)
    if len(d.shape) != 4 or len(w.shape) != 4:
        fail(f"conv2d needs 4-D data and weight, got data {shape_str(d.shape)} and weight "
             f"{shape_str(w.shape)}")
    if attrs.data_layout not in _LAYOUT_AXES:
        fail(f"conv2d: data_layout {attrs.data_layout} not supported (NCHW, NHWC)")
    ci, hi, wi = _LAYOUT_AXES[attrs.data_layout]
    if attrs.kernel_layout == "OIHW":
        co_k, ci_k, kh, kw = w.shape
    elif attrs.kernel_layout == "HWIO":
        kh, kw, ci_k, co_k = w.shape
    elif attrs.kernel_layout == "HWOI":
        kh, kw, co_k, ci_k = w.shape
    else:
        fail(f"conv2d: kernel_layout {attrs.kernel_layout} not supported (OIHW, HWIO, HWOI)")
    g = attrs.groups
    cin = d.shape[ci]
    if not dim_equal(as_dim(ci_k * g), cin):
        fail(f"conv2d: data has {cin} input channels but weight {shape_str(w.shape)} "
             f"({attrs.kernel_layout}) with groups={g} expects {as_dim(ci_k * g)} "
             f"(data {shape_str(d.shape)}, weight {shape_str(w.shape)})")
    if isinstance(co_k, int) and co_k % g:
        fail(f"conv2d: {co_k} output channels are not divisible by groups={g}")
    if attrs.channels is not None and not dim_equal(attrs.channels, co_k):
        fail(f"conv2d: channels={attrs.channels} but weight {shape_str(w.shape)} has {co_k}")
    if attrs.kernel_size is not None and not (
        dim_equal(attrs.kernel_size[0], kh) and dim_equal(attrs.kernel_size[1], kw)
    ):
        fail(f"conv2d: kernel_size={list(attrs.kernel_size)} but weight {shape_str(w.shape)}")
    if not (isinstance(kh, int) and isinstance(kw, int)):
        fail(f"conv2d: kernel size must be static, got weight {shape_str(w.shape)}")
    pt, pl, pb, pr = attrs.padding
    sh, sw = attrs.strides
    dh, dw = attrs.dilation
    oh = _out_dim(d.shape[hi], kh, pt + pb, sh, dh)
    ow = _out_dim(d.shape[wi], kw, pl + pr, sw, dw)
    out = list(d.shape)
    out[ci], out[hi], out[wi] = co_k, oh, ow
    if d.dtype != w.dtype and not attrs.out_dtype:
        fail(f"conv2d: data dtype {d.dtype} and weight dtype {w.dtype} differ (give out_dtype)")
    return TensorType(out, attrs.out_dtype or d.dtype)


_CONV_SCHEMA = {
    "strides": (1, 1), "padding": (0, 0, 0, 0), "dilation": (1, 1), "groups": 1,
    "channels": None, "kernel_size": None, "data_layout": "NCHW", "kernel_layout": "OIHW",
    "out_layout": "", "out_dtype": "",
}  # fmt: skip
register_op("nn.conv2d", _conv2d_rel, OpPattern.OUT_ELEMWISE_FUSABLE, 2, _CONV_SCHEMA)
register_float16_accumulation("nn.conv2d")


def _conv2d_attrs(strides: Any, padding: Any, dilation: Any, groups: int, channels: int | None,
                  kernel_size: Any, data_layout: str, kernel_layout: str, out_layout: str,
                  out_dtype: str, **extra: Any) -> dict[str, Any]:
    """The attributes of a 2-D convolution call (nn.conv2d, nn.conv2d_transpose,
    nn.contrib_conv2d_NCHWc), normalized: pairs, 4-sided padding, ints; ``extra`` (an op's own,
    e.g. ``output_padding``) placed before ``out_dtype``."""
    return {
        "strides": _pair(strides, "strides"), "padding": _pad4(padding),
        "dilation": _pair(dilation, "dilation"), "groups": int(groups),
        "channels": None if channels is None else int(channels),
        "kernel_size": None if kernel_size is None else _pair(kernel_size, "kernel_size"),
        "data_layout": data_layout, "kernel_layout": kernel_layout, "out_layout": out_layout,
        **extra, "out_dtype": out_dtype,
    }  # fmt: skip


def conv2d(
    data: RelayExpr,
    weight: RelayExpr,
    strides: Any = (1, 1),
    padding: Any = (0, 0),
    dilation: Any = (1, 1),
    groups: int = 1,
    channels: int | None = None,
    kernel_size: Any = None,
    data_layout: str = "NCHW",
    kernel_layout: str = "",
    out_layout: str = "",
    out_dtype: str = "",
) -> RelayExpr:
    """2-D convolution. ``padding``: int, (ph, pw) or (top, left, bottom, right).

    ``kernel_layout`` defaults to OIHW for NCHW data and HWIO for NHWC data.
    """
    if not kernel_layout:
        kernel_layout = "HWIO" if data_layout == "NHWC" else "OIHW"
    return make_call("nn.conv2d", [data, weight], _conv2d_attrs(
        strides, padding, dilation, groups, channels, kernel_size, data_layout, kernel_layout,
        out_layout, out_dtype))


def _conv2d_transpose_rel(arg_types: list[Type], attrs: Any) -> Type:
    d = tensor_arg(arg_types[0], "the data")
    w = tensor_arg(arg_types[1], "the weight")
    if len(d.shape) != 4 or len(w.shape) != 4 or attrs.data_layout != "NCHW":
        fail(f"conv2d_transpose needs NCHW 4-D data and IOHW weight, got data "
             f"{shape_str(d.shape)} and weight {shape_str(w.shape)}")
    cin_w, cout_g, kh, kw = w.shape  # IOHW
    g = attrs.groups
    if not dim_equal(cin_w, d.shape[1]):
        fail(f"conv2d_transpose: data has {d.shape[1]} channels, weight {shape_str(w.shape)} "
             f"expects {cin_w}")
    pt, pl, pb, pr = attrs.padding
    sh, sw = attrs.strides
    dh, dw = attrs.dilation
    oph, opw = attrs.output_padding
    oh = as_dim((d.shape[2] - 1) * sh - pt - pb + (kh - 1) * dh + 1 + oph)
    ow = as_dim((d.shape[3] - 1) * sw - pl - pr + (kw - 1) * dw + 1 + opw)
    return TensorType([d.shape[0], as_dim(cout_g * g), oh, ow], attrs.out_dtype or d.dtype)


register_op("nn.conv2d_transpose", _conv2d_transpose_rel, OpPattern.OUT_ELEMWISE_FUSABLE, 2,
            {**_CONV_SCHEMA, "kernel_layout": "IOHW", "output_padding": (0, 0)})
register_float16_accumulation("nn.conv2d_transpose")


def conv2d_transpose(data: RelayExpr, weight: RelayExpr, strides: Any = (1, 1), padding: Any = (0, 0),
                     dilation: Any = (1, 1), groups: int = 1, channels: int | None = None,
                     kernel_size: Any = None, data_layout: str = "NCHW", kernel_layout: str = "IOHW",
                     out_layout: str = "", output_padding: Any = (0, 0),
                     out_dtype: str = "") -> RelayExpr:
    return make_call("nn.conv2d_transpose", [data, weight], _conv2d_attrs(
        strides, padding, dilation, groups, channels, kernel_size, data_layout, kernel_layout,
        out_layout, out_dtype, output_padding=_pair(output_padding, "output_padding")))


# ------------------------------------------------------------------------------------------------
# dense / matmul / batch_matmul
def _dense_rel(arg_types: list[Type], attrs: Any) -> Type:
    d = tensor_arg(arg_types[0], "the data")
    w = tensor_arg(arg_types[1], "the weight")
    if len(d.shape) < 1 or len(w.shape) != 2:
        fail(f"dense needs data of rank >= 1 and a 2-D weight [units, in], got data "
             f"{shape_str(d.shape)} and weight {shape_str(w.shape)}")
    if require_same(d.shape[-1], w.shape[1], "dimension -1 of the data",
                    "dimension 1 of the weight") is None:  # (an Any: checked at run time)
        fail(f"dense: data {shape_str(d.shape)} has {d.shape[-1]} input features but weight "
             f"{shape_str(w.shape)} expects {w.shape[1]}")
    if attrs.units is not None and not dim_equal(attrs.units, w.shape[0]):
        fail(f"dense: units={attrs.units} but weight {shape_str(w.shape)}")
    if d.dtype != w.dtype and not attrs.out_dtype:
        fail(f"dense: data dtype {d.dtype} and weight dtype {w.dtype} differ (give out_dtype)")
    return TensorType([*d.shape[:-1], w.shape[0]], attrs.out_dtype or d.dtype)


register_op("nn.dense", _dense_rel, OpPattern.OUT_ELEMWISE_FUSABLE, 2, {"units": None, "out_dtype": ""})
register_float16_accumulation("nn.dense")


def dense(data: RelayExpr, weight: RelayExpr, units: int | None = None, out_dtype: str = "") -> RelayExpr:
    """``data @ weight.T`` with weight of shape [units, in_features] (as TVM)."""
    return make_call("nn.dense", [data, weight], {"units": units, "out_dtype": out_dtype})


def _matmul_rel(arg_types: list[Type], attrs: Any) -> Type:
    a = tensor_arg(arg_types[0], "tensor_a")
    b = tensor_arg(arg_types[1], "tensor_b")
    if len(a.shape) < 1 or len(b.shape) != 2:
        fail(f"matmul needs a of rank >= 1 and a 2-D b, got {shape_str(a.shape)} and {shape_str(b.shape)}")
    k_a = a.shape[-2] if attrs.transpose_a else a.shape[-1]
    if attrs.transpose_a and len(a.shape) < 2:
        fail(f"matmul: transpose_a needs rank >= 2, got {shape_str(a.shape)}")
    k_b, n = (b.shape[1], b.shape[0]) if attrs.transpose_b else (b.shape[0], b.shape[1])
    if require_same(k_a, k_b, f"dimension {-2 if attrs.transpose_a else -1} of tensor_a",
                    f"dimension {1 if attrs.transpose_b else 0} of tensor_b") is None:
        fail(f"matmul: reduction sizes differ: a {shape_str(a.shape)} (transpose_a="
             f"{attrs.transpose_a}) vs b {shape_str(b.shape)} (transpose_b={attrs.transpose_b})")
    lead = [*a.shape[:-2], a.shape[-1]] if attrs.transpose_a else list(a.shape[:-1])
    return TensorType([*lead, n], attrs.out_dtype or a.dtype)


register_op("nn.matmul", _matmul_rel, OpPattern.OUT_ELEMWISE_FUSABLE, 2,
            {"units": None, "out_dtype": "", "transpose_a": False, "transpose_b": False})
register_float16_accumulation("nn.matmul")


def matmul(tensor_a: RelayExpr, tensor_b: RelayExpr, units: int | None = None, out_dtype: str = "",
           transpose_a: bool = False, transpose_b: bool = False) -> RelayExpr:
    return make_call("nn.matmul", [tensor_a, tensor_b], {
        "units": units, "out_dtype": out_dtype, "transpose_a": bool(transpose_a),
        "transpose_b": bool(transpose_b)})  # fmt: skip


def _batch_matmul_rel(arg_types: list[Type], attrs: Any) -> Type:
    from ._rel import broadcast_shape

    x = tensor_arg(arg_types[0], "x")
    y = tensor_arg(arg_types[1], "y")
    if len(x.shape) != 3 or len(y.shape) != 3:
        fail(f"batch_matmul needs 3-D inputs, got x {shape_str(x.shape)} and y {shape_str(y.shape)}")
    m, kx = (x.shape[2], x.shape[1]) if attrs.transpose_a else (x.shape[1], x.shape[2])
    n, ky = (y.shape[1], y.shape[2]) if attrs.transpose_b else (y.shape[2], y.shape[1])
    if require_same(kx, ky, f"dimension {1 if attrs.transpose_a else 2} of x",
                    f"dimension {2 if attrs.transpose_b else 1} of y") is None:
        fail(f"batch_matmul: reduction sizes differ ({kx} vs {ky}): x {shape_str(x.shape)} "
             f"(transpose_a={attrs.transpose_a}), y {shape_str(y.shape)} "
             f"(transpose_b={attrs.transpose_b})")
    try:
        (b,) = broadcast_shape((x.shape[0],), (y.shape[0],), ("x", "y"))
    except Exception:
        fail(f"batch_matmul: batch sizes {x.shape[0]} and {y.shape[0]} differ "
             f"(x {shape_str(x.shape)}, y {shape_str(y.shape)})")
    if x.dtype != y.dtype and not attrs.out_dtype:
        fail(f"batch_matmul: dtypes differ: {x.dtype} vs {y.dtype}")
    return TensorType([b, m, n], attrs.out_dtype or x.dtype)


register_op("nn.batch_matmul", _batch_matmul_rel, OpPattern.OUT_ELEMWISE_FUSABLE, 2,
            {"out_dtype": "", "transpose_a": False, "transpose_b": True})
register_float16_accumulation("nn.batch_matmul")


def batch_matmul(x: RelayExpr, y: RelayExpr, out_dtype: str = "", transpose_a: bool = False,
                 transpose_b: bool = True) -> RelayExpr:
    """Batched ``x @ y^T`` (TVM's default: y is [batch, N, K], ``transpose_b=True``)."""
    return make_call("nn.batch_matmul", [x, y], {
        "out_dtype": out_dtype, "transpose_a": bool(transpose_a), "transpose_b": bool(transpose_b)})


# ------------------------------------------------------------------------------------------------
# elementwise / broadcast activations
def _bias_add_rel(arg_types: list[Type], attrs: Any) -> Type:
    d = tensor_arg(arg_types[0], "the data")
    b = tensor_arg(arg_types[1], "the bias")
    ax = normalize_axis(attrs.axis, len(d.shape))
    if len(b.shape) != 1 or not dim_equal(b.shape[0], d.shape[ax]):
        fail(f"bias_add: bias {shape_str(b.shape)} must be 1-D of size {d.shape[ax]} "
             f"(axis {attrs.axis} of data {shape_str(d.shape)})")
    if d.dtype != b.dtype:
        fail(f"bias_add: dtypes differ: data {d.dtype}, bias {b.dtype}")
    return d


register_op("nn.bias_add", _bias_add_rel, OpPattern.BROADCAST, 2, {"axis": 1})
register_float16_accumulation("nn.bias_add", "epilogue")


def bias_add(data: RelayExpr, bias: RelayExpr, axis: int = 1) -> RelayExpr:
    return make_call("nn.bias_add", [data, bias], {"axis": int(axis)})


def _same_rel(arg_types: list[Type], attrs: Any) -> Type:
    return tensor_arg(arg_types[0], "the input")


register_op("nn.relu", _same_rel, OpPattern.ELEMWISE, 1)
register_op("nn.leaky_relu", _same_rel, OpPattern.ELEMWISE, 1, {"alpha": 0.01})
register_op("nn.gelu", _same_rel, OpPattern.ELEMWISE, 1, {"approximate": "none"})


def relu(data: RelayExpr) -> RelayExpr:
    return make_call("nn.relu", [data])


def leaky_relu(data: RelayExpr, alpha: float = 0.01) -> RelayExpr:
    return make_call("nn.leaky_relu", [data], {"alpha": float(alpha)})


def gelu(data: RelayExpr, approximate: str = "none") -> RelayExpr:
    """GELU (``approximate="tanh"`` for the tanh form); not a TVM nn op, added for BERT."""
    return make_call("nn.gelu", [data], {"approximate": approximate})


def _prelu_rel(arg_types: list[Type], attrs: Any) -> Type:
    d = tensor_arg(arg_types[0], "the data")
    a = tensor_arg(arg_types[1], "alpha")
    ax = normalize_axis(attrs.axis, len(d.shape))
    if len(a.shape) != 1 or not dim_equal(a.shape[0], d.shape[ax]):
        fail(f"prelu: alpha {shape_str(a.shape)} must be 1-D of size {d.shape[ax]} "
             f"(axis {attrs.axis} of data {shape_str(d.shape)})")
    return d


register_op("nn.prelu", _prelu_rel, OpPattern.BROADCAST, 2, {"axis": 1})


def prelu(data: RelayExpr, alpha: RelayExpr, axis: int = 1) -> RelayExpr:
    return make_call("nn.prelu", [data, alpha], {"axis": int(axis)})


def _axis_rel(arg_types: list[Type], attrs: Any) -> Type:
    d = tensor_arg(arg_types[0], "the input")
    normalize_axis(attrs.axis, len(d.shape))
    return d


# COMM_REDUCE (a row reduction): an elementwise / broadcast producer fuses into it (the
# attention scores' scale and mask add, read inside the softmax's row passes instead of
# written out and read back); nothing fuses after it
register_op("nn.softmax", _axis_rel, OpPattern.COMM_REDUCE, 1, {"axis": -1})
register_op("nn.log_softmax", _axis_rel, OpPattern.COMM_REDUCE, 1, {"axis": -1})
register_float16_accumulation("nn.softmax")
register_float16_accumulation("nn.log_softmax")


def softmax(data: RelayExpr, axis: int = -1) -> RelayExpr:
    return make_call("nn.softmax", [data], {"axis": int(axis)})


def log_softmax(data: RelayExpr, axis: int = -1) -> RelayExpr:
    return make_call("nn.log_softmax", [data], {"axis": int(axis)})


# ------------------------------------------------------------------------------------------------
# normalization
def _check_vec(t: Type, name: str, size: Any, d: TensorType, axis: Any) -> None:
    v = tensor_arg(t, name)
    if len(v.shape) != 1 or require_same(v.shape[0], size, f"dimension 0 of {name}",
                                         f"dimension {axis} of the data") is None:
        fail(f"{name} {shape_str(v.shape)} must be 1-D of size {size} (axis {axis} of data "
             f"{shape_str(d.shape)})")
    if v.dtype != d.dtype:
        fail(f"{name} dtype {v.dtype} differs from the data's {d.dtype}")


def _batch_norm_rel(arg_types: list[Type], attrs: Any) -> Type:
    d = tensor_arg(arg_types[0], "the data")
    ax = normalize_axis(attrs.axis, len(d.shape))
    c = d.shape[ax]
    for t, nm in zip(arg_types[1:], ("gamma", "beta", "moving_mean", "moving_var")):
        _check_vec(t, nm, c, d, attrs.axis)
    vec = TensorType([c], d.dtype)
    return TupleType([d, vec, vec])


register_op("nn.batch_norm", _batch_norm_rel, OpPattern.OPAQUE, 5,
            {"axis": 1, "epsilon": 1e-5, "center": True, "scale": True})


def batch_norm(data: RelayExpr, gamma: RelayExpr, beta: RelayExpr, moving_mean: RelayExpr,
               moving_var: RelayExpr, axis: int = 1, epsilon: float = 1e-5, center: bool = True,
               scale: bool = True) -> TupleWrapper:
    """Inference batch norm; returns a TupleWrapper (normalized data, mean, var): use ``[0]``."""
    call = make_call("nn.batch_norm", [data, gamma, beta, moving_mean, moving_var], {
        "axis": int(axis), "epsilon": float(epsilon), "center": bool(center), "scale": bool(scale)})
    return TupleWrapper(call, 3)


def _layer_norm_rel(arg_types: list[Type], attrs: Any) -> Type:
    d = tensor_arg(arg_types[0], "the data")
    ax = normalize_axis(attrs.axis, len(d.shape))
    for t, nm in zip(arg_types[1:], ("gamma", "beta")):
        _check_vec(t, nm, d.shape[ax], d, attrs.axis)
    return d


register_op("nn.layer_norm", _layer_norm_rel, OpPattern.OPAQUE, 3,
            {"axis": -1, "epsilon": 1e-5, "center": True, "scale": True})


def layer_norm(data: RelayExpr, gamma: RelayExpr, beta: RelayExpr, axis: int = -1,
               epsilon: float = 1e-5, center: bool = True, scale: bool = True) -> RelayExpr:
    return make_call("nn.layer_norm", [data, gamma, beta], {
        "axis": int(axis), "epsilon": float(epsilon), "center": bool(center), "scale": bool(scale)})


def _instance_norm_rel(arg_types: list[Type], attrs: Any) -> Type:
    d = tensor_arg(arg_types[0], "the data")
    ax = normalize_axis(attrs.axis, len(d.shape))
    for t, nm in zip(arg_types[1:], ("gamma", "beta")):
        v = tensor_arg(t, nm)
        if len(v.shape) != 1 or not dim_equal(v.shape[0], d.shape[ax]):
            fail(f"{nm} {shape_str(v.shape)} must be 1-D of size {d.shape[ax]} (axis {attrs.axis} "
                 f"of data {shape_str(d.shape)})")
    return d


register_op("nn.instance_norm", _instance_norm_rel, OpPattern.OPAQUE, 3,
            {"axis": 1, "epsilon": 1e-5, "center": True, "scale": True})


def _group_norm_rel(arg_types: list[Type], attrs: Any) -> Type:
    d = _instance_norm_rel(arg_types, attrs)
    assert isinstance(d, TensorType)
    c = d.shape[normalize_axis(attrs.axis, len(d.shape))]
    if isinstance(c, int) and c % attrs.num_groups:
        fail(f"group_norm: {c} channels are not divisible into {attrs.num_groups} groups")
    return d


register_op("nn.group_norm", _group_norm_rel, OpPattern.OPAQUE, 3,
            {"num_groups": REQUIRED, "axis": 1, "epsilon": 1e-5, "center": True, "scale": True})


def instance_norm(data: RelayExpr, gamma: RelayExpr, beta: RelayExpr, axis: int = 1,
                  epsilon: float = 1e-5, center: bool = True, scale: bool = True) -> RelayExpr:
    return make_call("nn.instance_norm", [data, gamma, beta], {
        "axis": int(axis), "epsilon": float(epsilon), "center": bool(center), "scale": bool(scale)})


def group_norm(data: RelayExpr, gamma: RelayExpr, beta: RelayExpr, num_groups: int, axis: int = 1,
               epsilon: float = 1e-5, center: bool = True, scale: bool = True) -> RelayExpr:
    return make_call("nn.group_norm", [data, gamma, beta], {
        "num_groups": int(num_groups), "axis": int(axis), "epsilon": float(epsilon),
        "center": bool(center), "scale": bool(scale)})  # fmt: skip


def _dropout_rel(arg_types: list[Type], attrs: Any) -> Type:
    d = tensor_arg(arg_types[0], "the data")
    return TupleType([d, d])


register_op("nn.dropout", _dropout_rel, OpPattern.OPAQUE, 1, {"rate": 0.5})


def dropout(data: RelayExpr, rate: float = 0.5) -> RelayExpr:
    """Dropout (identity at inference; removed by SimplifyInference). Returns the data output."""
    return TupleGetItem(make_call("nn.dropout", [data], {"rate": float(rate)}), 0)


# ------------------------------------------------------------------------------------------------
# pooling
def _pool_layout(d: TensorType, layout: str, what: str, blocked: bool = True
                 ) -> tuple[int, int, int]:
    blk = block_of(layout)
    if blk is not None and blocked:  # NCHW{c}c: the blocked layout of AlterOpLayout's x86 convs
        if len(d.shape) != 5 or not dim_equal(d.shape[4], blk):
            fail(f"{what} with layout {layout} needs 5-D data [N, C/{blk}, H, W, "
                 f"{blk}], got {shape_str(d.shape)}")
        return (1, 2, 3)
    if len(d.shape) != 4 or layout not in _LAYOUT_AXES:
        fail(f"{what} needs 4-D data in NCHW, NHWC (or 5-D in NCHW<c>c), got "
             f"{shape_str(d.shape)} ({layout})")
    return _LAYOUT_AXES[layout]


def _pool2d_rel(arg_types: list[Type], attrs: Any) -> Type:
    d = tensor_arg(arg_types[0], "the data")
    _, hi, wi = _pool_layout(d, attrs.layout, "pool2d")
    kh, kw = attrs.pool_size
    pt, pl, pb, pr = attrs.padding
    sh, sw = attrs.strides
    dh, dw = attrs.dilation
    out = list(d.shape)
    out[hi] = _out_dim(d.shape[hi], kh, pt + pb, sh, dh, attrs.ceil_mode, pt)
    out[wi] = _out_dim(d.shape[wi], kw, pl + pr, sw, dw, attrs.ceil_mode, pl)
    return TensorType(out, d.dtype)


_POOL_SCHEMA = {"pool_size": REQUIRED, "strides": (1, 1), "padding": (0, 0, 0, 0),
                "dilation": (1, 1), "layout": "NCHW", "ceil_mode": False}
register_op("nn.max_pool2d", _pool2d_rel, OpPattern.OUT_ELEMWISE_FUSABLE, 1, _POOL_SCHEMA)
register_op("nn.avg_pool2d", _pool2d_rel, OpPattern.OUT_ELEMWISE_FUSABLE, 1,
            {**_POOL_SCHEMA, "count_include_pad": False})


def max_pool2d(data: RelayExpr, pool_size: Any = (1, 1), strides: Any = (1, 1), dilation: Any = (1, 1),
               padding: Any = (0, 0), layout: str = "NCHW", ceil_mode: bool = False) -> RelayExpr:
    return make_call("nn.max_pool2d", [data], {
        "pool_size": _pair(pool_size, "pool_size"), "strides": _pair(strides, "strides"),
        "padding": _pad4(padding), "dilation": _pair(dilation, "dilation"), "layout": layout,
        "ceil_mode": bool(ceil_mode)})  # fmt: skip


def avg_pool2d(data: RelayExpr, pool_size: Any = (1, 1), strides: Any = (1, 1), dilation: Any = (1, 1),
               padding: Any = (0, 0), layout: str = "NCHW", ceil_mode: bool = False,
               count_include_pad: bool = False) -> RelayExpr:
    return make_call("nn.avg_pool2d", [data], {
        "pool_size": _pair(pool_size, "pool_size"), "strides": _pair(strides, "strides"),
        "padding": _pad4(padding), "dilation": _pair(dilation, "dilation"), "layout": layout,
        "ceil_mode": bool(ceil_mode), "count_include_pad": bool(count_include_pad)})  # fmt: skip


def _global_pool_rel(arg_types: list[Type], attrs: Any) -> Type:
    d = tensor_arg(arg_types[0], "the data")
    _, hi, wi = _pool_layout(d, attrs.layout, "global pool2d")
    out = list(d.shape)
    out[hi], out[wi] = 1, 1
    return TensorType(out, d.dtype)


register_op("nn.global_avg_pool2d", _global_pool_rel, OpPattern.OUT_ELEMWISE_FUSABLE, 1, {"layout": "NCHW"})
register_op("nn.global_max_pool2d", _global_pool_rel, OpPattern.OUT_ELEMWISE_FUSABLE, 1, {"layout": "NCHW"})


def global_avg_pool2d(data: RelayExpr, layout: str = "NCHW") -> RelayExpr:
    return make_call("nn.global_avg_pool2d", [data], {"layout": layout})


def global_max_pool2d(data: RelayExpr, layout: str = "NCHW") -> RelayExpr:
    return make_call("nn.global_max_pool2d", [data], {"layout": layout})


def _adaptive_pool_rel(arg_types: list[Type], attrs: Any) -> Type:
    d = tensor_arg(arg_types[0], "the data")
    _, hi, wi = _pool_layout(d, attrs.layout, "adaptive_avg_pool2d", blocked=False)
    out = list(d.shape)
    out[hi], out[wi] = attrs.output_size
    return TensorType(out, d.dtype)


register_op("nn.adaptive_avg_pool2d", _adaptive_pool_rel, OpPattern.OUT_ELEMWISE_FUSABLE, 1,
            {"output_size": REQUIRED, "layout": "NCHW"})


def adaptive_avg_pool2d(data: RelayExpr, output_size: Any, layout: str = "NCHW") -> RelayExpr:
    return make_call("nn.adaptive_avg_pool2d", [data], {
        "output_size": _pair(output_size, "output_size"), "layout": layout})


# ------------------------------------------------------------------------------------------------
# padding and flattening
PAD_MODES = ("constant", "edge", "reflect", "wrap")  # numpy.pad's names (topi.nn.PAD_MODES)


def _pad_rel(arg_types: list[Type], attrs: Any) -> Type:
    d = tensor_arg(arg_types[0], "the data")
    pw = attrs.pad_width
    if len(pw) != len(d.shape) or any(len(p) != 2 for p in pw):
        fail(f"pad: pad_width {[list(p) for p in pw]} needs one (before, after) pair per axis "
             f"of {shape_str(d.shape)}")
    if any(b < 0 or a < 0 for b, a in pw):
        fail(f"pad: negative pad_width {[list(p) for p in pw]}")
    mode = attrs.pad_mode
    if mode not in PAD_MODES:
        fail(f"pad: pad_mode must be one of {', '.join(PAD_MODES)}, got {mode!r}")
    for i, (s, (b, a)) in enumerate(zip(d.shape, pw)):
        if mode == "constant" or not isinstance(s, int) or not (b or a):
            continue
        if s == 0:
            fail(f"pad: cannot pad the empty axis {i} of {shape_str(d.shape)} in {mode} mode "
                 f"(pads {b}, {a}); only constant padding extends an empty axis")
        if mode == "reflect" and (b >= s or a >= s):
            fail(f"pad: reflect pads ({b}, {a}) of axis {i} must be smaller than its size {s} "
                 f"(data {shape_str(d.shape)})")
    return TensorType([as_dim(s + b + a) for s, (b, a) in zip(d.shape, pw)], d.dtype)


register_op("nn.pad", _pad_rel, OpPattern.INJECTIVE, 1, {"pad_width": (), "pad_value": 0.0,
                                                          "pad_mode": "constant"})


def pad(data: RelayExpr, pad_width: Sequence[Sequence[int]], pad_value: float = 0.0,
        pad_mode: str = "constant") -> RelayExpr:
    """Pad each axis by its ``(before, after)`` pair of ``pad_width`` as numpy's ``pad`` in
    ``pad_mode``: "constant" (``pad_value``), "edge", "reflect" (pads smaller than the axis) or
    "wrap" (periodic; torch's circular padding)."""
    if pad_mode not in PAD_MODES:
        raise ValueError(f"pad: pad_mode must be one of {', '.join(PAD_MODES)}, got {pad_mode!r}")
    pw = tuple((int(b), int(a)) for b, a in pad_width)
    return make_call("nn.pad", [data], {"pad_width": pw, "pad_value": float(pad_value),
                                        "pad_mode": pad_mode})


def _batch_flatten_rel(arg_types: list[Type], attrs: Any) -> Type:
    d = tensor_arg(arg_types[0], "the data")
    if len(d.shape) < 1:
        fail("batch_flatten needs rank >= 1")
    return TensorType([d.shape[0], size_of(d.shape[1:])], d.dtype)


register_op("nn.batch_flatten", _batch_flatten_rel, OpPattern.INJECTIVE, 1)


def batch_flatten(data: RelayExpr) -> RelayExpr:
    return make_call("nn.batch_flatten", [data])


# ------------------------------------------------------------------------------------------------
# blocked layouts for x86 (what AlterOpLayout rewrites conv2d into)
def _block_factor(layout: str, base: str, sub: str) -> int:
    """"NCHW8c" with base "NCHW", sub "c" -> 8."""
    if not layout.startswith(base) or not layout.endswith(sub) or not layout[len(base):-1].isdigit():
        fail(f"layout {layout!r} is not of the form {base}<n>{sub}")
    return int(layout[len(base):-1])


def _conv2d_nchwc_rel(arg_types: list[Type], attrs: Any) -> Type:
    d = tensor_arg(arg_types[0], "the data")
    w = tensor_arg(arg_types[1], "the weight")
    kl = attrs.kernel_layout  # OIHW{i}i{o}o
    if not (kl.startswith("OIHW") and kl.endswith("o") and "i" in kl[4:]):
        fail(f"contrib_conv2d_NCHWc: kernel_layout {kl!r} is not OIHW<n>i<m>o")
    ki, ko = (int(p) for p in kl[4:-1].split("i"))
    # data_layout "NCHW" (plain groups-1 data read in place, x86): blocks of the kernel's ki
    plain = attrs.data_layout == "NCHW" and attrs.groups == 1
    ic_b = ki if plain else _block_factor(attrs.data_layout, "NCHW", "c")
    if not attrs.out_layout and plain:
        fail("contrib_conv2d_NCHWc: data_layout NCHW needs an out_layout NCHW<n>c")
    oc_b = _block_factor(attrs.out_layout or attrs.data_layout, "NCHW", "c")
    if len(d.shape) != (4 if plain else 5) or len(w.shape) != 6:
        fail(f"contrib_conv2d_NCHWc needs {4 if plain else 5}-D data ({attrs.data_layout}) and "
             f"6-D weight, got {shape_str(d.shape)} and {shape_str(w.shape)}")
    if (not plain and not dim_equal(d.shape[4], ic_b)) or w.shape[4] != ki or w.shape[5] != ko:
        fail(f"contrib_conv2d_NCHWc: data {shape_str(d.shape)} ({attrs.data_layout}) and weight "
             f"{shape_str(w.shape)} ({kl}) disagree with their layouts")
    cin = as_dim(d.shape[1]) if plain else as_dim(d.shape[1] * d.shape[4])
    if not dim_equal(as_dim(w.shape[1] * ki * attrs.groups), cin):
        fail(f"contrib_conv2d_NCHWc: data has {cin} input channels, weight {shape_str(w.shape)} "
             f"with groups={attrs.groups} expects {w.shape[1] * ki * attrs.groups}")
    cout = w.shape[0] * ko
    if cout % oc_b:
        fail(f"contrib_conv2d_NCHWc: {cout} output channels not divisible by block {oc_b}")
    kh, kw = w.shape[2], w.shape[3]
    pt, pl, pb, pr = attrs.padding
    oh = _out_dim(d.shape[2], kh, pt + pb, attrs.strides[0], attrs.dilation[0])
    ow = _out_dim(d.shape[3], kw, pl + pr, attrs.strides[1], attrs.dilation[1])
    return TensorType([d.shape[0], cout // oc_b, oh, ow, oc_b], attrs.out_dtype or d.dtype)


register_op("nn.contrib_conv2d_NCHWc", _conv2d_nchwc_rel, OpPattern.OUT_ELEMWISE_FUSABLE, 2,
            {**_CONV_SCHEMA, "data_layout": REQUIRED, "kernel_layout": REQUIRED})


def _winograd_rel(arg_types: list[Type], attrs: Any) -> Type:
    d = tensor_arg(arg_types[0], "the data")
    w = tensor_arg(arg_types[1], "the transformed weight")
    m = attrs.tile_size
    alpha = m + 2
    ic_b = _block_factor(attrs.data_layout, "NCHW", "c")
    if len(d.shape) != 5 or len(w.shape) != 5:
        fail(f"contrib_conv2d_winograd_nchwc needs 5-D data (NCHW<n>c) and a 5-D transformed "
             f"weight [alpha, alpha, OC/ob, C, ob], got {shape_str(d.shape)} and "
             f"{shape_str(w.shape)}")
    if w.shape[0] != alpha or w.shape[1] != alpha:
        fail(f"contrib_conv2d_winograd_nchwc: tile_size={m} needs a weight transformed for "
             f"{alpha}x{alpha} tiles, got {shape_str(w.shape)}")
    if not dim_equal(d.shape[4], ic_b):
        fail(f"contrib_conv2d_winograd_nchwc: data {shape_str(d.shape)} is not "
             f"{attrs.data_layout}")
    cin = as_dim(d.shape[1] * d.shape[4])
    if not dim_equal(w.shape[3], cin):
        fail(f"contrib_conv2d_winograd_nchwc: data has {cin} input channels, the weight "
             f"{shape_str(w.shape)} expects {w.shape[3]}")
    oc_b = _block_factor(attrs.out_layout, "NCHW", "c")
    if w.shape[4] != oc_b:
        fail(f"contrib_conv2d_winograd_nchwc: out_layout {attrs.out_layout} and the weight's "
             f"block {w.shape[4]} disagree")
    pt, pl, pb, pr = attrs.padding
    oh = _out_dim(d.shape[2], 3, pt + pb, 1, 1)
    ow = _out_dim(d.shape[3], 3, pl + pr, 1, 1)
    return TensorType([d.shape[0], w.shape[2], oh, ow, oc_b], attrs.out_dtype or d.dtype)


register_op("nn.contrib_conv2d_winograd_nchwc", _winograd_rel, OpPattern.OUT_ELEMWISE_FUSABLE, 2,
            {"tile_size": REQUIRED, "padding": (0, 0, 0, 0), "channels": None,
             "kernel_size": (3, 3), "data_layout": REQUIRED, "out_layout": REQUIRED,
             "out_dtype": ""})


def _winograd_weight_rel(arg_types: list[Type], attrs: Any) -> Type:
    w = tensor_arg(arg_types[0], "the weight")
    if len(w.shape) != 4 or w.shape[2] != 3 or w.shape[3] != 3:
        fail(f"contrib_conv2d_winograd_weight_transform needs a 3x3 OIHW weight, got "
             f"{shape_str(w.shape)}")
    alpha = attrs.tile_size + 2
    if w.shape[0] % attrs.oc_bn:
        fail(f"contrib_conv2d_winograd_weight_transform: {w.shape[0]} output channels are not "
             f"a multiple of oc_bn={attrs.oc_bn}")
    return TensorType([alpha, alpha, w.shape[0] // attrs.oc_bn, w.shape[1], attrs.oc_bn],
                      w.dtype)


register_op("nn.contrib_conv2d_winograd_weight_transform", _winograd_weight_rel,
            OpPattern.OPAQUE, 1, {"tile_size": REQUIRED, "oc_bn": REQUIRED})


def contrib_conv2d_winograd_nchwc(data: RelayExpr, weight: RelayExpr, tile_size: int,
                                  padding: Any = (1, 1), channels: int | None = None,
                                  data_layout: str = "NCHW16c", out_layout: str = "NCHW16c",
                                  out_dtype: str = "") -> RelayExpr:
    """3x3 stride-1 convolution by Winograd F(m x m, 3 x 3) (``m = tile_size``) on blocked
    layouts: data NCHW{i}c, ``weight`` transformed by
    :func:`contrib_conv2d_winograd_weight_transform` (``[alpha, alpha, OC/o, C, o]``), output
    NCHW{o}c. AlterOpLayout makes it where it measures faster than the direct convolution."""
    return make_call("nn.contrib_conv2d_winograd_nchwc", [data, weight], {
        "tile_size": int(tile_size), "padding": _pad4(padding),
        "channels": None if channels is None else int(channels), "kernel_size": (3, 3),
        "data_layout": data_layout, "out_layout": out_layout, "out_dtype": out_dtype})


def contrib_conv2d_winograd_weight_transform(weight: RelayExpr, tile_size: int,
                                             oc_bn: int) -> RelayExpr:
    """``G g G^T`` of a 3x3 OIHW weight for F(tile_size x tile_size, 3 x 3), laid out
    ``[alpha, alpha, OC/oc_bn, C, oc_bn]`` (folded at compile time for constant weights)."""
    return make_call("nn.contrib_conv2d_winograd_weight_transform", [weight],
                     {"tile_size": int(tile_size), "oc_bn": int(oc_bn)})


def _winograd_pre_rel(arg_types: list[Type], attrs: Any) -> Type:
    d = tensor_arg(arg_types[0], "the data")
    w = tensor_arg(arg_types[1], "the transformed weight")
    op = "contrib_conv2d_winograd_without_weight_transform"
    alpha = attrs.tile_size + 2
    if len(d.shape) != 4 or len(w.shape) != 4:
        fail(f"{op} needs 4-D NCHW data and a 4-D transformed weight [alpha, alpha, CI, CO], "
             f"got {shape_str(d.shape)} and {shape_str(w.shape)}")
    if attrs.data_layout != "NCHW" or tuple(attrs.strides) != (1, 1) \
            or tuple(attrs.dilation) != (1, 1):
        fail(f"{op}: only NCHW data, stride 1 and dilation 1, got {attrs.data_layout}, "
             f"strides {tuple(attrs.strides)}, dilation {tuple(attrs.dilation)}")
    if w.shape[0] != alpha or w.shape[1] != alpha:
        fail(f"{op}: tile_size={attrs.tile_size} needs a weight transformed for {alpha}x{alpha} "
             f"tiles, got {shape_str(w.shape)}")
    if not dim_equal(w.shape[2], d.shape[1]):
        fail(f"{op}: data has {d.shape[1]} input channels, the weight {shape_str(w.shape)} "
             f"expects {w.shape[2]}")
    if attrs.channels is not None and not dim_equal(w.shape[3], attrs.channels):
        fail(f"{op}: channels={attrs.channels} but the weight {shape_str(w.shape)} has "
             f"{w.shape[3]} output channels")
    pt, pl, pb, pr = attrs.padding
    oh = _out_dim(d.shape[2], 3, pt + pb, 1, 1)
    ow = _out_dim(d.shape[3], 3, pl + pr, 1, 1)
    return TensorType([d.shape[0], w.shape[3], oh, ow], attrs.out_dtype or d.dtype)


register_op("nn.contrib_conv2d_winograd_without_weight_transform", _winograd_pre_rel,
            OpPattern.OUT_ELEMWISE_FUSABLE, 2,
            {"tile_size": REQUIRED, "strides": (1, 1), "padding": (0, 0, 0, 0),
             "dilation": (1, 1), "groups": 1, "channels": None, "kernel_size": (3, 3),
             "data_layout": "NCHW", "kernel_layout": "", "out_layout": "", "out_dtype": ""})


def contrib_conv2d_winograd_without_weight_transform(
        data: RelayExpr, weight: RelayExpr, tile_size: int, strides: Any = (1, 1),
        padding: Any = (1, 1), dilation: Any = (1, 1), groups: int = 1,
        channels: int | None = None, kernel_size: Any = (3, 3), data_layout: str = "NCHW",
        kernel_layout: str = "", out_layout: str = "", out_dtype: str = "") -> RelayExpr:
    """3x3 stride-1 NCHW convolution by Winograd F(m x m, 3 x 3) (``m = tile_size``) of
    ``data[N, CI, H, W]`` with a weight already transformed, ``weight[alpha, alpha, CI, CO]``
    (``G g G^T``; TVM's op of this name with its CUDA weight layout). The GPU AlterOpLayout
    (``relay/op/strategy/gpu_alter_op.py``) makes it out of the ``nn.conv2d`` calls the GPU
    strategy runs as ``conv2d_nchw_winograd.cuda``, the weight as
    ``reshape(contrib_conv2d_winograd_weight_transform(W, m, oc_bn=CO), (alpha, alpha, CI, CO))``,
    which FoldConstant folds when ``W`` is a constant. ``strides`` and ``dilation`` must be 1;
    ``groups``, ``kernel_size`` and ``kernel_layout`` are kept for TVM's signature."""
    if groups != 1 or tuple(_pair(kernel_size, "kernel_size")) != (3, 3):
        raise ValueError("contrib_conv2d_winograd_without_weight_transform: groups 1 and a 3x3 "
                         f"kernel only, got groups={groups}, kernel_size={kernel_size}")
    return make_call("nn.contrib_conv2d_winograd_without_weight_transform", [data, weight], {
        "tile_size": int(tile_size), "strides": _pair(strides, "strides"),
        "padding": _pad4(padding), "dilation": _pair(dilation, "dilation"), "groups": 1,
        "channels": None if channels is None else int(channels), "kernel_size": (3, 3),
        "data_layout": data_layout, "kernel_layout": kernel_layout, "out_layout": out_layout,
        "out_dtype": out_dtype})


def _dense_pack_rel(arg_types: list[Type], attrs: Any) -> Type:
    d = tensor_arg(arg_types[0], "the data")
    w = tensor_arg(arg_types[1], "the packed weight")
    if len(d.shape) != 2 or len(w.shape) != 3:
        fail(f"contrib_dense_pack needs 2-D data and a packed weight [units/n, in, n], got data "
             f"{shape_str(d.shape)} and weight {shape_str(w.shape)}")
    if not dim_equal(d.shape[1], w.shape[1]):
        fail(f"contrib_dense_pack: data {shape_str(d.shape)} has {d.shape[1]} input features but "
             f"the packed weight {shape_str(w.shape)} expects {w.shape[1]}")
    held = int(w.shape[0]) * int(w.shape[2])
    units = as_dim(held)
    if attrs.units is not None:
        # the last panel may be zero-padded: units in ((panels - 1) * n, panels * n]
        u = getattr(attrs.units, "value", attrs.units)
        if not isinstance(u, int) or not held - int(w.shape[2]) < u <= held:
            fail(f"contrib_dense_pack: units={u} but the packed weight "
                 f"{shape_str(w.shape)} holds {held} (its last panel may be padded)")
        units = as_dim(u)
    return TensorType([d.shape[0], units], attrs.out_dtype or d.dtype)


register_op("nn.contrib_dense_pack", _dense_pack_rel, OpPattern.OUT_ELEMWISE_FUSABLE, 2,
            {"units": None, "out_dtype": ""})


def contrib_dense_pack(data: RelayExpr, weight: RelayExpr, units: int | None = None,
                       out_dtype: str = "") -> RelayExpr:
    """``dense`` with the weight pre-packed into column panels: ``weight[N/n, K, n]`` holds
    ``W[j, k]`` at ``[j // n, k, j % n]`` (TVM's ``nn.contrib_dense_pack``, layout ``NC{n}n``);
    ``units`` (the output width) may be less than ``N`` when the last panel is zero-padded;
    AlterOpLayout rewrites constant-weight dense to it so the packing happens at compile time
    (``relay.op.strategy.x86_alter_op.alter_dense_layout``; its compute:
    ``relay.op.strategy.generic.dense_prepacked_compute``)."""
    return make_call("nn.contrib_dense_pack", [data, weight],
                     {"units": units, "out_dtype": out_dtype})


def contrib_conv2d_nchwc(data: RelayExpr, kernel: RelayExpr, strides: Any = (1, 1),
                         padding: Any = (0, 0), dilation: Any = (1, 1), groups: int = 1,
                         channels: int | None = None, kernel_size: Any = None,
                         data_layout: str = "NCHW8c", kernel_layout: str = "OIHW8i8o",
                         out_layout: str = "", out_dtype: str = "") -> RelayExpr:
    """conv2d on blocked layouts: data NCHW{i}c, kernel OIHW{i}i{o}o, output NCHW{o}c."""
    return make_call("nn.contrib_conv2d_NCHWc", [data, kernel], _conv2d_attrs(
        strides, padding, dilation, groups, channels, kernel_size, data_layout, kernel_layout,
        out_layout, out_dtype))


# ------------------------------------------------------------------------------------------------
# depth <-> space
def _d2s_rel(arg_types: list[Type], attrs: Any) -> Type:
    d = tensor_arg(arg_types[0], "the data")
    b = attrs.block_size
    if len(d.shape) != 4 or attrs.layout != "NCHW":
        fail(f"depth_to_space needs NCHW 4-D data, got {shape_str(d.shape)}")
    n, c, h, w = d.shape
    if isinstance(c, int) and c % (b * b):
        fail(f"depth_to_space: {c} channels not divisible by block_size^2 = {b * b}")
    return TensorType([n, as_dim(c // (b * b)), as_dim(h * b), as_dim(w * b)], d.dtype)


def _s2d_rel(arg_types: list[Type], attrs: Any) -> Type:
    d = tensor_arg(arg_types[0], "the data")
    b = attrs.block_size
    if len(d.shape) != 4 or attrs.layout != "NCHW":
        fail(f"space_to_depth needs NCHW 4-D data, got {shape_str(d.shape)}")
    n, c, h, w = d.shape
    if (isinstance(h, int) and h % b) or (isinstance(w, int) and w % b):
        fail(f"space_to_depth: spatial size {h}x{w} not divisible by block_size {b}")
    return TensorType([n, as_dim(c * b * b), as_dim(h // b), as_dim(w // b)], d.dtype)


def _stride_interleave_rel(arg_types: list[Type], attrs: Any) -> Type:
    if not isinstance(arg_types[0], TupleType) or not arg_types[0].fields:
        fail("stride_interleave needs a non-empty tuple of tensors")
    ts = [tensor_arg(f, f"field {i}") for i, f in enumerate(arg_types[0].fields)]
    sh, sw = attrs.strides
    oh, ow = attrs.out_size
    first = ts[0]
    rank = 4 if attrs.layout == "NCHW" else 5
    if len(ts) != sh * sw or any(t.dtype != first.dtype or len(t.shape) != rank
                                 or not all(dim_equal(a, b) for a, b in zip(t.shape, first.shape))
                                 for t in ts):
        fail(f"stride_interleave with strides {(sh, sw)} needs {sh * sw} {attrs.layout} tensors "
             f"of one shape and dtype, got {[shape_str(t.shape) for t in ts]}")
    qh, qw = first.shape[2], first.shape[3]
    if (isinstance(qh, int) and qh * sh < oh) or (isinstance(qw, int) and qw * sw < ow):
        fail(f"stride_interleave: phases of {qh}x{qw} at strides {(sh, sw)} cannot fill "
             f"{oh}x{ow}")
    return TensorType([first.shape[0], first.shape[1], oh, ow, *first.shape[4:]], first.dtype)


register_op("nn.stride_interleave", _stride_interleave_rel, OpPattern.INJECTIVE, 1,
            {"strides": REQUIRED, "out_size": REQUIRED, "layout": "NCHW"})


def stride_interleave(parts: Any, strides: Sequence[int], out_size: Sequence[int],
                      layout: str = "NCHW") -> RelayExpr:
    """Element ``(y, x)`` of the result is element ``(y // sh, x // sw)`` of
    ``parts[(y % sh) * sw + x % sw]`` (NCHW or NCHW{c}c tensors of one shape), cropped to
    ``out_size``: the output phases of a strided transposed convolution put together."""
    from ..expr import Tuple

    return make_call("nn.stride_interleave", [parts if isinstance(parts, RelayExpr)
                                              else Tuple(list(parts))], {
        "strides": tuple(int(v) for v in strides), "out_size": tuple(int(v) for v in out_size),
        "layout": layout})


register_op("nn.depth_to_space", _d2s_rel, OpPattern.INJECTIVE, 1,
            {"block_size": REQUIRED, "layout": "NCHW", "mode": "DCR"})
register_op("nn.space_to_depth", _s2d_rel, OpPattern.INJECTIVE, 1,
            {"block_size": REQUIRED, "layout": "NCHW"})


def depth_to_space(data: RelayExpr, block_size: int, layout: str = "NCHW", mode: str = "DCR"
                   ) -> RelayExpr:
    if mode not in ("DCR", "CRD"):
        raise ValueError(f"depth_to_space: mode must be DCR or CRD, got {mode!r}")
    return make_call("nn.depth_to_space", [data], {"block_size": int(block_size), "layout": layout,
                                                   "mode": mode})


def space_to_depth(data: RelayExpr, block_size: int, layout: str = "NCHW") -> RelayExpr:
    return make_call("nn.space_to_depth", [data], {"block_size": int(block_size), "layout": layout})


# relay.nn.attention: scaled dot-product attention as one operator (its own module)
from .nn_attention import attention  # noqa: E402,F401
from .nn_bitserial import bitpack, bitserial_conv2d, bitserial_dense  # noqa: E402,F401
from .nn_nd import (  # noqa: E402
    avg_pool1d,
    avg_pool3d,
    conv1d,
    conv3d,
    max_pool1d,
    max_pool3d,
)
