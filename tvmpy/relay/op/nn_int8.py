"""The x86 int8 operators that AlterOpLayout makes from ``nn.conv2d`` / ``nn.dense`` with uint8
data, int8 weights and int32 output (``relay/op/strategy/x86_int8.py``), their weights packed
at compile time for the VNNI micro-kernel (``topi/x86/int8_intrin.py``):

* ``nn.contrib_conv2d_NCHWc_int8(data, kernel)``: data ``NCHW{ic_bn}c`` (``ic_bn`` a multiple
  of 4), kernel ``OIHW{ic_bn/4}i16o4i`` (7-D), output ``NCHW16c`` int32 (attrs as
  ``nn.contrib_conv2d_NCHWc``);

The convolutions' spatial padding holds the attribute ``pad_value`` (0..255: the data's zero
point, so QNN canonicalization's ``nn.pad`` folds into them).
* ``nn.contrib_depthwise_conv2d_NCHWc_int8(data, kernel)``: data and output ``NCHW{cb}c``,
  kernel ``OIHW1i{cb}o`` (6-D ``[C/cb, 1, KH, KW, 1, cb]``), or for the VNNI path (16-channel
  blocks, windows at most 4 wide) ``OIH16o4w`` (4-D ``[C/16, KH, 16, 4]``, the row's taps
  zero-padded to 4; ``kernel_size`` gives the window), output int32;
* ``nn.contrib_dense_pack_int8(data, weight)``: data ``[M, K]``, weight ``[ceil(N/16),
  ceil(K/4), 16, 4]`` (zero-padded), output ``[M, units]`` int32.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..expr import RelayExpr
from ..ty import TensorType, Type, dim_equal
from ._rel import fail, shape_str, tensor_arg
from .nn import _CONV_SCHEMA, _block_factor, _out_dim
from .numpy_impl import layout_transform_np
from .registry import REQUIRED, OpPattern, make_call, register_op, register_op_attr

__all__ = ["contrib_conv2d_nchwc_int8", "contrib_depthwise_conv2d_nchwc_int8",
           "contrib_dense_pack_int8", "unpack_kernel_int8_np",
           "unpack_weight_int8_np"]


def _check_int8(op: str, d: TensorType, w: TensorType, out_dtype: str) -> None:
    if d.dtype != "uint8" or w.dtype != "int8" or (out_dtype or "int32") != "int32":
        fail(f"{op}: needs uint8 data, int8 weight and int32 output, got {d.dtype} x {w.dtype} "
             f"-> {out_dtype}")


def _conv_rel(arg_types: list[Type], attrs: Any) -> Type:
    d = tensor_arg(arg_types[0], "the data")
    w = tensor_arg(arg_types[1], "the kernel")
    _check_int8("contrib_conv2d_NCHWc_int8", d, w, attrs.out_dtype)
    _check_pad_value("contrib_conv2d_NCHWc_int8", attrs.pad_value)
    ic_b = _block_factor(attrs.data_layout, "NCHW", "c")
    if len(d.shape) != 5 or len(w.shape) != 7:
        fail(f"contrib_conv2d_NCHWc_int8 needs 5-D data and a 7-D kernel, got "
             f"{shape_str(d.shape)} and {shape_str(w.shape)}")
    want = f"OIHW{ic_b // 4}i16o4i"
    if ic_b % 4 or attrs.kernel_layout != want or attrs.groups != 1:
        fail(f"contrib_conv2d_NCHWc_int8: data {attrs.data_layout} needs kernel layout {want} "
             f"(a block multiple of 4, groups 1), got {attrs.kernel_layout}, groups "
             f"{attrs.groups}")
    if not dim_equal(d.shape[4], ic_b) or not dim_equal(d.shape[1], w.shape[1]) or \
            tuple(w.shape[4:]) != (ic_b // 4, 16, 4):
        fail(f"contrib_conv2d_NCHWc_int8: data {shape_str(d.shape)} ({attrs.data_layout}) and "
             f"kernel {shape_str(w.shape)} ({want}) do not match")
    kh, kw = w.shape[2], w.shape[3]
    pt, pl, pb, pr = attrs.padding
    oh = _out_dim(d.shape[2], kh, pt + pb, attrs.strides[0], attrs.dilation[0])
    ow = _out_dim(d.shape[3], kw, pl + pr, attrs.strides[1], attrs.dilation[1])
    return TensorType([d.shape[0], w.shape[0], oh, ow, 16], "int32")


register_op("nn.contrib_conv2d_NCHWc_int8", _conv_rel, OpPattern.OUT_ELEMWISE_FUSABLE, 2,
            {**_CONV_SCHEMA, "data_layout": REQUIRED, "kernel_layout": REQUIRED,
             "out_layout": "NCHW16c", "out_dtype": "int32", "pad_value": 0})


def _check_pad_value(op: str, v: Any) -> None:
    if not isinstance(v, int) or not 0 <= v <= 255:
        fail(f"{op}: pad_value must be an integer in 0..255 (a uint8 zero point), got {v!r}")


def _dw_rel(arg_types: list[Type], attrs: Any) -> Type:
    op = "contrib_depthwise_conv2d_NCHWc_int8"
    d = tensor_arg(arg_types[0], "the data")
    w = tensor_arg(arg_types[1], "the kernel")
    _check_int8(op, d, w, attrs.out_dtype)
    _check_pad_value(op, attrs.pad_value)
    cb = _block_factor(attrs.data_layout, "NCHW", "c")
    if len(d.shape) != 5 or not dim_equal(d.shape[4], cb):
        fail(f"{op} needs 5-D data in {attrs.data_layout}, got {shape_str(d.shape)}")
    if attrs.kernel_layout == DW_DOT_LAYOUT:  # [C/16, KH, 16, 4]: the VNNI path
        ks = attrs.kernel_size
        if len(w.shape) != 4 or cb != 16 or tuple(w.shape[2:]) != (16, 4) or ks is None or \
                not dim_equal(d.shape[1], w.shape[0]) or ks[0] != w.shape[1] or ks[1] > 4:
            fail(f"{op}: data {shape_str(d.shape)} ({attrs.data_layout}) and kernel "
                 f"{shape_str(w.shape)} ({DW_DOT_LAYOUT}, kernel_size {ks}) do not match")
        kh, kw = ks
    else:
        want = f"OIHW1i{cb}o"
        if len(w.shape) != 6 or attrs.kernel_layout != want:
            fail(f"{op} needs a 6-D kernel in {want} (or 4-D in {DW_DOT_LAYOUT}), got "
                 f"{shape_str(w.shape)} ({attrs.kernel_layout})")
        if not dim_equal(d.shape[1], w.shape[0]) or w.shape[1] != 1 or w.shape[4] != 1 or \
                not dim_equal(w.shape[5], cb):
            fail(f"{op}: data {shape_str(d.shape)} ({attrs.data_layout}) and kernel "
                 f"{shape_str(w.shape)} ({want}) do not match")
        kh, kw = w.shape[2], w.shape[3]
    pt, pl, pb, pr = attrs.padding
    oh = _out_dim(d.shape[2], kh, pt + pb, attrs.strides[0], attrs.dilation[0])
    ow = _out_dim(d.shape[3], kw, pl + pr, attrs.strides[1], attrs.dilation[1])
    return TensorType([d.shape[0], d.shape[1], oh, ow, cb], "int32")


DW_DOT_LAYOUT = "OIH16o4w"


register_op("nn.contrib_depthwise_conv2d_NCHWc_int8", _dw_rel, OpPattern.OUT_ELEMWISE_FUSABLE,
            2, {"strides": (1, 1), "padding": (0, 0, 0, 0), "dilation": (1, 1),
                "kernel_size": None, "data_layout": REQUIRED, "kernel_layout": REQUIRED,
                "out_dtype": "int32", "pad_value": 0})


def _dense_rel(arg_types: list[Type], attrs: Any) -> Type:
    d = tensor_arg(arg_types[0], "the data")
    w = tensor_arg(arg_types[1], "the packed weight")
    _check_int8("contrib_dense_pack_int8", d, w, attrs.out_dtype)
    if len(d.shape) != 2 or len(w.shape) != 4 or tuple(w.shape[2:]) != (16, 4):
        fail(f"contrib_dense_pack_int8 needs data [M, K] and a weight [N/16, K/4, 16, 4], got "
             f"{shape_str(d.shape)} and {shape_str(w.shape)}")
    k = d.shape[1]
    if isinstance(k, int) and -(-k // 4) != w.shape[1]:
        fail(f"contrib_dense_pack_int8: data {shape_str(d.shape)} has {k} input features, the "
             f"packed weight {shape_str(w.shape)} holds {4 * int(w.shape[1])}")
    units = int(w.shape[0]) * 16 if attrs.units is None else int(attrs.units)
    if -(-units // 16) != w.shape[0]:
        fail(f"contrib_dense_pack_int8: units={units} does not fit the packed weight "
             f"{shape_str(w.shape)}")
    return TensorType([d.shape[0], units], "int32")


register_op("nn.contrib_dense_pack_int8", _dense_rel, OpPattern.OUT_ELEMWISE_FUSABLE, 2,
            {"units": None, "out_dtype": "int32"})


def contrib_conv2d_nchwc_int8(data: RelayExpr, kernel: RelayExpr, strides: Any, padding: Any,
                              dilation: Any, channels: int, kernel_size: Any, data_layout: str,
                              kernel_layout: str, pad_value: int = 0) -> RelayExpr:
    return make_call("nn.contrib_conv2d_NCHWc_int8", [data, kernel], {
        "strides": tuple(strides), "padding": tuple(padding), "dilation": tuple(dilation),
        "groups": 1, "channels": int(channels), "kernel_size": tuple(kernel_size),
        "data_layout": data_layout, "kernel_layout": kernel_layout, "out_layout": "NCHW16c",
        "out_dtype": "int32", "pad_value": int(pad_value)})  # fmt: skip


def contrib_depthwise_conv2d_nchwc_int8(data: RelayExpr, kernel: RelayExpr, strides: Any,
                                        padding: Any, dilation: Any, kernel_size: Any,
                                        data_layout: str, kernel_layout: str,
                                        pad_value: int = 0) -> RelayExpr:
    return make_call("nn.contrib_depthwise_conv2d_NCHWc_int8", [data, kernel], {
        "strides": tuple(strides), "padding": tuple(padding), "dilation": tuple(dilation),
        "kernel_size": tuple(kernel_size), "data_layout": data_layout,
        "kernel_layout": kernel_layout, "out_dtype": "int32", "pad_value": int(pad_value)})


def contrib_dense_pack_int8(data: RelayExpr, weight: RelayExpr, units: int) -> RelayExpr:
    return make_call("nn.contrib_dense_pack_int8", [data, weight],
                     {"units": int(units), "out_dtype": "int32"})


# ---- reference implementations (interpreter, constant folding) ---------------------------------
def unpack_kernel_int8_np(k: np.ndarray) -> np.ndarray:
    """``[OC/16, IC/b, KH, KW, b/4, 16, 4]`` -> OIHW (padded channel counts)."""
    occ, icc, kh, kw, icf, ob, ics = k.shape
    return k.transpose(0, 5, 1, 4, 6, 2, 3).reshape(occ * ob, icc * icf * ics, kh, kw)


def unpack_weight_int8_np(w: np.ndarray) -> np.ndarray:
    """``[N/16, K/4, 16, 4]`` -> ``[N, K]`` (padded)."""
    nb, kb, ln, lk = w.shape
    return w.transpose(0, 2, 1, 3).reshape(nb * ln, kb * lk)


def _conv_np(attrs: Any, ins: list, t: Any) -> np.ndarray:
    from ...topi import testing

    x, k = ins
    src = _padded_np(layout_transform_np(x, attrs.data_layout, "NCHW"), attrs)
    out = testing.group_conv2d_nchw_python(src, unpack_kernel_int8_np(k).astype(np.int64),
                                           attrs.strides, 0, attrs.dilation, 1)
    return layout_transform_np(out, "NCHW", "NCHW16c").astype("int32")


def _padded_np(x: np.ndarray, attrs: Any) -> np.ndarray:
    """NCHW ``x`` as int64, padded spatially with ``attrs.pad_value``."""
    pt, pl, pb, pr = (int(p) for p in attrs.padding)
    return np.pad(x.astype(np.int64), ((0, 0), (0, 0), (pt, pb), (pl, pr)),
                  constant_values=int(attrs.pad_value))


def _dw_np(attrs: Any, ins: list, t: Any) -> np.ndarray:
    from ...topi import testing

    x, k = ins
    src = _padded_np(layout_transform_np(x, attrs.data_layout, "NCHW"), attrs)
    if k.ndim == 4:  # [C/16, KH, 16, 4] -> [C/16, 1, KH, KW, 1, 16]
        k = k[..., :int(attrs.kernel_size[1])].transpose(0, 1, 3, 2)[:, None, :, :, None, :]
    cc, _, kh, kw, _, cb = k.shape
    w = k.transpose(0, 5, 1, 2, 3, 4).reshape(cc * cb, 1, kh, kw).astype(np.int64)
    out = testing.group_conv2d_nchw_python(src, w, attrs.strides, 0, attrs.dilation, cc * cb)
    return layout_transform_np(out, "NCHW", attrs.data_layout).astype("int32")


def _dense_np(attrs: Any, ins: list, t: Any) -> np.ndarray:
    x, w = ins
    full = unpack_weight_int8_np(w)[:, :x.shape[1]].astype(np.int64)
    units = t.shape[1]
    return (x.astype(np.int64) @ full[:units].T).astype("int32")


register_op_attr("nn.contrib_conv2d_NCHWc_int8", "FNumpy", _conv_np, level=1)
register_op_attr("nn.contrib_dense_pack_int8", "FNumpy", _dense_np, level=1)
register_op_attr("nn.contrib_depthwise_conv2d_NCHWc_int8", "FNumpy", _dw_np, level=1)
