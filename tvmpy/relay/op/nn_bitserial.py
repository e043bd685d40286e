"""Bit-serial operators (``nn.bitpack``, ``nn.bitserial_dense``, ``nn.bitserial_conv2d``):
1-8 bit integer activations and weights computed with AND + popcount on packed bit planes
(topi.nn.bitserial has the arithmetic). Weights may be given unpacked or already packed by
``nn.bitpack`` with the op's axes; a constant weight is packed at compile time (see
``relay.op.strategy.bitserial``)."""

from __future__ import annotations

from typing import Any

from ...ir.dtype import bits_of
from ..expr import RelayExpr
from ..ty import TensorType, Type, as_dim, dim_equal
from ._rel import fail, shape_str, tensor_arg
from .registry import OpPattern, make_call, register_op

__all__ = ["bitpack", "bitserial_dense", "bitserial_conv2d"]

_PACK = ("uint8", "uint16", "uint32", "uint64")


def _check_attrs(op: str, attrs: Any, bit_fields: tuple[str, ...]) -> None:
    if attrs.pack_dtype not in _PACK:
        fail(f"{op}: pack_dtype must be one of {', '.join(_PACK)}, got {attrs.pack_dtype!r}")
    for f in bit_fields:
        v = getattr(attrs, f)
        if not isinstance(v, int) or not 1 <= v <= 8:
            fail(f"{op}: {f} must be an int in 1..8, got {v!r}")
    out = getattr(attrs, "out_dtype", "int16")
    if not out.startswith(("int", "uint")):
        fail(f"{op}: out_dtype must be an integer type, got {out!r}")


def _int_arg(op: str, t: Type, what: str) -> TensorType:
    tt = tensor_arg(t, what)
    if not tt.dtype.startswith(("int", "uint")):
        fail(f"{op}: {what} must be integers (the low bits are used), got {tt.dtype}")
    return tt


def _words(c: Any, pack_dtype: str) -> Any:
    w = bits_of(pack_dtype)
    return as_dim((c + w - 1) // w)


# ---- nn.bitpack --------------------------------------------------------------------------
def _bitpack_rel(arg_types: list[Type], attrs: Any) -> Type:
    op = "bitpack"
    d = _int_arg(op, arg_types[0], "the data")
    _check_attrs(op, attrs, ("bits",))
    r = len(d.shape)
    if not -r <= attrs.pack_axis < r:
        fail(f"{op}: pack_axis {attrs.pack_axis} out of range for data {shape_str(d.shape)}")
    if not 0 <= attrs.bit_axis <= r:
        fail(f"{op}: bit_axis {attrs.bit_axis} must be in 0..{r} (an axis of the result)")
    shape = list(d.shape)
    ax = attrs.pack_axis % r
    shape[ax] = _words(shape[ax], attrs.pack_dtype)
    return TensorType(shape[:attrs.bit_axis] + [attrs.bits] + shape[attrs.bit_axis:],
                      attrs.pack_dtype)


register_op("nn.bitpack", _bitpack_rel, OpPattern.INJECTIVE, 1,
            {"bits": 1, "pack_axis": 1, "bit_axis": 2, "pack_dtype": "uint32",
             "name": "BitPack"})


def bitpack(data: RelayExpr, bits: int = 1, pack_axis: int = 1, bit_axis: int = 2,
            pack_type: str = "uint32", name: str = "BitPack") -> RelayExpr:
    """Pack ``bits`` bit planes of ``data`` along ``pack_axis`` into ``pack_type`` words; the
    planes form a new axis at ``bit_axis`` of the result (TVM's ``relay.nn.bitpack``)."""
    return make_call("nn.bitpack", [data], {"bits": bits, "pack_axis": pack_axis,
                                             "bit_axis": bit_axis, "pack_dtype": pack_type,
                                             "name": name})


# ---- nn.bitserial_dense ------------------------------------------------------------------
def _bitserial_dense_rel(arg_types: list[Type], attrs: Any) -> Type:
    op = "bitserial_dense"
    d = _int_arg(op, arg_types[0], "the data")
    w = tensor_arg(arg_types[1], "the weight")
    _check_attrs(op, attrs, ("data_bits", "weight_bits"))
    if len(d.shape) != 2:
        fail(f"{op} needs 2-D data [batch, in], got {shape_str(d.shape)}")
    words = _words(d.shape[1], attrs.pack_dtype)
    if len(w.shape) == 2:
        _int_arg(op, w, "the weight")
        if not dim_equal(d.shape[1], w.shape[1]):
            fail(f"{op}: data {shape_str(d.shape)} has {d.shape[1]} input features, weight "
                 f"{shape_str(w.shape)} expects {w.shape[1]}")
    elif len(w.shape) == 3:  # packed [units, weight_bits, words]
        if w.dtype != attrs.pack_dtype or not dim_equal(w.shape[1], attrs.weight_bits) \
                or not dim_equal(w.shape[2], words):
            fail(f"{op}: a packed weight must be {attrs.pack_dtype} [units, {attrs.weight_bits}, "
                 f"{words}] for data {shape_str(d.shape)}, got {w.dtype} {shape_str(w.shape)}")
    else:
        fail(f"{op}: weight must be [units, in] or packed [units, bits, words], got "
             f"{shape_str(w.shape)}")
    if attrs.units is not None and not dim_equal(attrs.units, w.shape[0]):
        fail(f"{op}: units={attrs.units} but weight {shape_str(w.shape)}")
    return TensorType([d.shape[0], w.shape[0]], attrs.out_dtype)


register_op("nn.bitserial_dense", _bitserial_dense_rel, OpPattern.OUT_ELEMWISE_FUSABLE, 2,
            {"units": None, "data_bits": 1, "weight_bits": 1, "pack_dtype": "uint32",
             "out_dtype": "int16", "unipolar": True})


def bitserial_dense(data: RelayExpr, weight: RelayExpr, units: int | None = None,
                    data_bits: int = 1, weight_bits: int = 1, pack_dtype: str = "uint32",
                    out_dtype: str = "int16", unipolar: bool = True) -> RelayExpr:
    """``data[M, K] @ weight[N, K]^T`` on ``data_bits`` x ``weight_bits`` integers (unipolar:
    each weight bit is +1 when set, -1 when clear)."""
    return make_call("nn.bitserial_dense", [data, weight], {
        "units": None if units is None else int(units), "data_bits": data_bits,
        "weight_bits": weight_bits, "pack_dtype": pack_dtype, "out_dtype": out_dtype,
        "unipolar": bool(unipolar)})


# ---- nn.bitserial_conv2d -----------------------------------------------------------------
# unpacked kernel layout, and the packed kernel's (bit_axis, pack_axis-of-the-unpacked) per layout
_CONV_LAYOUTS = {"NCHW": ("OIHW", 1, 2), "NHWC": ("HWIO", 2, 4)}


def _conv_out(size: Any, k: int, lo: int, hi: int, stride: int) -> Any:
    if isinstance(size, int) and size + lo + hi < k:
        fail(f"bitserial_conv2d: window {k} is larger than the padded input {size + lo + hi}")
    return as_dim((size + lo + hi - k) // stride + 1)


def _bitserial_conv2d_rel(arg_types: list[Type], attrs: Any) -> Type:
    op = "bitserial_conv2d"
    d = _int_arg(op, arg_types[0], "the data")
    w = tensor_arg(arg_types[1], "the weight")
    _check_attrs(op, attrs, ("activation_bits", "weight_bits"))
    if attrs.data_layout not in _CONV_LAYOUTS:
        fail(f"{op}: data_layout must be NCHW or NHWC, got {attrs.data_layout!r}")
    klayout, pack_axis, bit_axis = _CONV_LAYOUTS[attrs.data_layout]
    if attrs.kernel_layout != klayout:
        fail(f"{op}: data_layout {attrs.data_layout} needs kernel_layout {klayout}, got "
             f"{attrs.kernel_layout!r}")
    if len(d.shape) != 4:
        fail(f"{op} needs 4-D {attrs.data_layout} data, got {shape_str(d.shape)}")
    nchw = attrs.data_layout == "NCHW"
    c, h, wd = (d.shape[1], d.shape[2], d.shape[3]) if nchw else (d.shape[3], d.shape[1],
                                                                   d.shape[2])
    if len(w.shape) == 4:
        _int_arg(op, w, "the weight")
        dims = dict(zip(klayout, w.shape))
        wc = dims["I"]
    elif len(w.shape) == 5:
        shape = list(w.shape)
        if w.dtype != attrs.pack_dtype or not dim_equal(shape[bit_axis], attrs.weight_bits):
            fail(f"{op}: a packed weight must be {attrs.pack_dtype} with {attrs.weight_bits} bit "
                 f"planes on axis {bit_axis}, got {w.dtype} {shape_str(w.shape)}")
        del shape[bit_axis]
        dims = dict(zip(klayout, shape))
        wc = None
        if not dim_equal(dims["I"], _words(c, attrs.pack_dtype)):
            fail(f"{op}: packed weight {shape_str(w.shape)} holds {dims['I']} channel words, "
                 f"data {shape_str(d.shape)} packs to {_words(c, attrs.pack_dtype)}")
    else:
        fail(f"{op}: weight must be 4-D {klayout} or packed 5-D, got {shape_str(w.shape)}")
    if wc is not None and not dim_equal(wc, c):
        fail(f"{op}: data {shape_str(d.shape)} has {c} channels, weight {shape_str(w.shape)} "
             f"expects {wc}")
    kh, kw = int(dims["H"]), int(dims["W"])
    if attrs.kernel_size is not None and tuple(attrs.kernel_size) != (kh, kw):
        fail(f"{op}: kernel_size={tuple(attrs.kernel_size)} but weight {shape_str(w.shape)}")
    if attrs.channels is not None and not dim_equal(attrs.channels, dims["O"]):
        fail(f"{op}: channels={attrs.channels} but weight {shape_str(w.shape)}")
    pt, pl, pb, pr = attrs.padding
    sh, sw = attrs.strides
    oh, ow = _conv_out(h, kh, pt, pb, sh), _conv_out(wd, kw, pl, pr, sw)
    out = [d.shape[0], dims["O"], oh, ow] if nchw else [d.shape[0], oh, ow, dims["O"]]
    return TensorType(out, attrs.out_dtype)


register_op("nn.bitserial_conv2d", _bitserial_conv2d_rel, OpPattern.OUT_ELEMWISE_FUSABLE, 2,
            {"strides": (1, 1), "padding": (0, 0, 0, 0), "channels": None, "kernel_size": None,
             "activation_bits": 1, "weight_bits": 1, "data_layout": "NCHW",
             "kernel_layout": "OIHW", "pack_dtype": "uint32", "out_dtype": "int16",
             "unipolar": True})


def bitserial_conv2d(data: RelayExpr, weight: RelayExpr, strides: Any = (1, 1),
                     padding: Any = (0, 0), channels: int | None = None,
                     kernel_size: Any = None, activation_bits: int = 1, weight_bits: int = 1,
                     data_layout: str = "NCHW", kernel_layout: str = "OIHW",
                     pack_dtype: str = "uint32", out_dtype: str = "int16",
                     unipolar: bool = True) -> RelayExpr:
    """2-D convolution on ``activation_bits`` x ``weight_bits`` integers (NCHW/OIHW or
    NHWC/HWIO; unipolar: each weight bit is +1 when set, -1 when clear)."""
    from .nn import _pad4, _pair

    return make_call("nn.bitserial_conv2d", [data, weight], {
        "strides": _pair(strides, "strides"), "padding": _pad4(padding),
        "channels": None if channels is None else int(channels),
        "kernel_size": None if kernel_size is None else _pair(kernel_size, "kernel_size"),
        "activation_bits": activation_bits, "weight_bits": weight_bits,
        "data_layout": data_layout, "kernel_layout": kernel_layout, "pack_dtype": pack_dtype,
        "out_dtype": out_dtype, "unipolar": bool(unipolar)})
