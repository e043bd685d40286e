"""Bit-serial (ultra-low-precision) operators: ``bitpack``, ``bitserial_dense`` and
``bitserial_conv2d_nchw`` / ``_nhwc`` (the paper's 1-2 bit ARM experiment; TVM's names).

An ``a``-bit activation times a ``w``-bit weight is the sum over bit planes ``i < a, j < w`` of
``popcount(A_i & W_j) << (i + j)``, where ``A_i`` packs bit ``i`` of 32 or 64 consecutive
reduction elements into one machine word. ``unipolar=True`` reads each weight bit as +1 (set) or
-1 (clear), so a 1-bit weight is a sign: the plane term becomes
``popcount(A_i & W_j) - popcount(A_i & ~W_j)``.

Inputs are integers; only their low ``bits`` bits are used (values are taken modulo
``2**bits``). The packed reduction axis is padded with zero bits to whole words, and zero
activation bits contribute nothing to either term, so any channel count works. Spatial padding
pads with 0.

A weight may be given packed already (``bitpack`` of the unpacked weight with the op's own
axes, see each function), so a constant weight is packed once at compile time (FoldConstant)
instead of on every run.
"""

from __future__ import annotations

from typing import Any

from ...ir.dtype import bits_of
from ...te import Tensor, compute, reduce_axis
from ...te import sum as te_sum
from ...tir.expr import const
from ...tir.op import if_then_else, popcount
from ..utils import get_const_int, get_const_tuple
from .conv2d import conv_out_size
from .pad import pad
from .utils import check_rank, get_pad_tuple, pair

__all__ = ["bitpack", "bitserial_dense", "bitserial_conv2d_nchw", "bitserial_conv2d_nhwc",
           "PACK_DTYPES"]

PACK_DTYPES = ("uint8", "uint16", "uint32", "uint64")


def _check(op: str, bits: Any, what: str, pack_type: str, out_dtype: str | None = None) -> int:
    if pack_type not in PACK_DTYPES:
        raise ValueError(f"{op}: pack_dtype must be one of {', '.join(PACK_DTYPES)}, got "
                         f"{pack_type!r}")
    if out_dtype is not None and not (out_dtype.startswith("int") or out_dtype.startswith("uint")):
        raise ValueError(f"{op}: out_dtype must be an integer type, got {out_dtype!r}")
    if not isinstance(bits, int) or isinstance(bits, bool) or not 1 <= bits <= 8:
        raise ValueError(f"{op}: {what} must be an int in 1..8, got {bits!r}")
    return bits


def bitpack(data: Tensor, bits: int, pack_axis: int, bit_axis: int, pack_type: str,
            name: str = "QuantizeInput") -> Tensor:
    """Pack bit planes of ``data`` along ``pack_axis`` into words of ``pack_type``.

    The result has ``pack_axis`` shrunk to ``ceil(C / word_bits)`` words, and a new axis of
    length ``bits`` inserted at ``bit_axis`` (an index of the result). Element ``j`` of a word
    is bit ``word_bits - 1 - j`` (the first element in the most significant bit); elements past
    ``C`` are zero bits.
    """
    op = "bitpack"
    _check(op, bits, "bits", pack_type)
    if not data.dtype.startswith(("int", "uint")):
        raise ValueError(f"{op}: data must be integers, got {data.dtype}")
    rank = len(data.shape)
    if not -rank <= pack_axis < rank:
        raise ValueError(f"{op}: pack_axis {pack_axis} out of range for rank {rank}")
    pack_axis %= rank
    if not 0 <= bit_axis <= rank:
        raise ValueError(f"{op}: bit_axis {bit_axis} must be in 0..{rank} (an axis of the result)")
    word = bits_of(pack_type)
    c = get_const_int(data.shape[pack_axis], f"{op}: packed axis extent")
    words = (c + word - 1) // word
    shape = list(data.shape)
    shape[pack_axis] = words
    out_shape = shape[:bit_axis] + [bits] + shape[bit_axis:]

    def fcompute(*idx: Any) -> Any:
        # an OR of ``word`` shifted bits, not a reduction: the stage stays injective (relay's
        # nn.bitpack fuses and inlines like any injective op)
        b = idx[bit_axis]
        src = list(idx[:bit_axis]) + list(idx[bit_axis + 1:])
        base = src[pack_axis] * word
        acc = None
        for j in range(word):
            src[pack_axis] = base + j
            v = (data[tuple(src)] >> b.astype(data.dtype)) & const(1, data.dtype)
            term = v.astype(pack_type) << const(word - 1 - j, pack_type)
            if c % word and j >= c % word:  # only the last word reaches past C
                term = if_then_else(base + j < c, term, const(0, pack_type))
            acc = term if acc is None else acc | term
        return acc

    return compute(out_shape, fcompute, name=name, tag="bitpack",
                   attrs={"bits": bits, "pack_axis": pack_axis, "bit_axis": bit_axis})


def _plane_term(a: Any, w: Any, shift: Any, out_dtype: str, unipolar: bool) -> Any:
    pos = popcount(a & w).astype(out_dtype)
    if unipolar:
        pos = pos - popcount(a & ~w).astype(out_dtype)
    return pos << shift.astype(out_dtype)


def _packed_or_pack(op: str, t: Tensor, rank: int, bits: int, pack_axis: int, bit_axis: int,
                    pack_type: str, what: str) -> Tensor:
    """``t`` as given when already packed (rank + 1, ``pack_type``), else bitpacked."""
    if len(t.shape) == rank + 1:
        if t.dtype != pack_type:
            raise ValueError(f"{op}: a packed {what} must have dtype {pack_type}, got {t.dtype}")
        if get_const_int(t.shape[bit_axis], f"{op}: {what} bit planes") != bits:
            raise ValueError(f"{op}: packed {what} {tuple(t.shape)} has "
                             f"{t.shape[bit_axis]} bit planes along axis {bit_axis}, expected "
                             f"{bits}")
        return t
    check_rank(t, rank, op, what)
    return bitpack(t, bits, pack_axis, bit_axis, pack_type, name=f"{what}_packed")


def bitserial_dense(data: Tensor, weight: Tensor, data_bits: int, weight_bits: int,
                    pack_dtype: str = "uint32", out_dtype: str = "int16",
                    unipolar: bool = True) -> Tensor:
    """``data[M, K] @ weight[N, K]^T`` on ``data_bits`` x ``weight_bits`` integers -> ``[M, N]``.

    ``weight`` may be pre-packed: ``bitpack(weight, weight_bits, 1, 1, pack_dtype)``, shape
    ``[N, weight_bits, ceil(K / word)]``.
    """
    op = "bitserial_dense"
    _check(op, data_bits, "data_bits", pack_dtype, out_dtype)
    _check(op, weight_bits, "weight_bits", pack_dtype)
    check_rank(data, 2, op, "data")
    dq = bitpack(data, data_bits, 1, 1, pack_dtype, name="data_packed")
    wq = _packed_or_pack(op, weight, 2, weight_bits, 1, 1, pack_dtype, "weight")
    m, _, words = dq.shape
    n, _, wwords = get_const_tuple(wq.shape, f"{op}: weight shape", symbolic=False)
    if get_const_int(words) != wwords:
        raise ValueError(f"{op}: data {tuple(data.shape)} packs to {words} words per row, the "
                         f"weight to {wwords}: the reduction extents differ")
    k = reduce_axis((0, wwords), name="k")
    db = reduce_axis((0, data_bits), name="db")
    wb = reduce_axis((0, weight_bits), name="wb")
    return compute(
        (m, n), lambda i, j: te_sum(_plane_term(dq[i, db, k], wq[j, wb, k], db.var + wb.var,
                                                out_dtype, unipolar), axis=[db, wb, k]),
        name="bitserial_dense", tag="bitserial_dense",
        attrs={"unipolar": unipolar, "data_bits": data_bits, "weight_bits": weight_bits})


def _spatial(op: str, h: int, w: int, kh: int, kw: int, stride: Any, padding: Any
             ) -> tuple[tuple[int, int], tuple[int, int, int, int], tuple[int, int]]:
    sh, sw = pair(stride, f"{op}: stride")
    pads = get_pad_tuple(padding, (kh, kw))
    oh = conv_out_size(h, kh, sh, 1, pads[0], pads[2], op, "height")
    ow = conv_out_size(w, kw, sw, 1, pads[1], pads[3], op, "width")
    return (sh, sw), pads, (oh, ow)


# per data layout: (kernel's unpacked layout, the packing axes of data and kernel as
# (pack_axis, bit_axis), the packed data's spatial axes, the packed kernel's (O, words) axes)
_CONV_LAYOUTS = {
    "NCHW": ("OIHW", (1, 2), (1, 2), (3, 4), (0, 1)),
    "NHWC": ("HWIO", (3, 4), (2, 4), (1, 2), (3, 2)),
}


def _bitserial_conv2d(layout: str, data: Tensor, kernel: Tensor, stride: Any, padding: Any,
                      activation_bits: int, weight_bits: int, pack_dtype: str, out_dtype: str,
                      unipolar: bool) -> Tensor:
    op = f"bitserial_conv2d_{layout.lower()}"
    klayout, dpack, kpack, (hy, hx), (ko, kc) = _CONV_LAYOUTS[layout]
    _check(op, activation_bits, "activation_bits", pack_dtype, out_dtype)
    _check(op, weight_bits, "weight_bits", pack_dtype)
    check_rank(data, 4, op, "data", layout)
    kq = _packed_or_pack(op, kernel, 4, weight_bits, *kpack, pack_dtype, "kernel")
    kshape = get_const_tuple(kq.shape, f"{op}: kernel shape", symbolic=False)
    o, cw = kshape[ko], kshape[kc]
    kh, kw = (kshape[3], kshape[4]) if layout == "NCHW" else (kshape[0], kshape[1])
    dq = bitpack(data, activation_bits, *dpack, pack_dtype, name="data_packed")
    dcw = get_const_int(dq.shape[dpack[0]])
    if dcw != cw:
        raise ValueError(f"{op}: data {tuple(data.shape)} packs to {dcw} channel words, the "
                         f"kernel to {cw}: the input channel counts differ")
    h, w = get_const_int(dq.shape[hy]), get_const_int(dq.shape[hx])
    (sh, sw), (pt, pl, pb, pr), (oh, ow) = _spatial(op, h, w, kh, kw, stride, padding)
    if pt or pl or pb or pr:
        before, after = [0] * 5, [0] * 5
        before[hy], before[hx], after[hy], after[hx] = pt, pl, pb, pr
        dq = pad(dq, before, after, name="data_pad")
    rc = reduce_axis((0, cw), name="rc")
    ab = reduce_axis((0, activation_bits), name="ab")
    wb = reduce_axis((0, weight_bits), name="wb")
    ry = reduce_axis((0, kh), name="ry")
    rx = reduce_axis((0, kw), name="rx")
    shift = ab.var + wb.var

    if layout == "NCHW":
        def fcompute(b: Any, f: Any, y: Any, x: Any) -> Any:
            a = dq[b, rc, ab, y * sh + ry, x * sw + rx]
            return te_sum(_plane_term(a, kq[f, rc, wb, ry, rx], shift, out_dtype, unipolar),
                          axis=[rc, ry, rx, ab, wb])
        shape = (data.shape[0], o, oh, ow)
    else:
        def fcompute(b: Any, y: Any, x: Any, f: Any) -> Any:
            a = dq[b, y * sh + ry, x * sw + rx, rc, ab]
            return te_sum(_plane_term(a, kq[ry, rx, rc, f, wb], shift, out_dtype, unipolar),
                          axis=[ry, rx, rc, ab, wb])
        shape = (data.shape[0], oh, ow, o)
    return compute(shape, fcompute, name=op, tag=op, attrs={"unipolar": unipolar})


def bitserial_conv2d_nchw(data: Tensor, kernel: Tensor, stride: Any, padding: Any,
                          activation_bits: int, weight_bits: int, pack_dtype: str = "uint32",
                          out_dtype: str = "int16", unipolar: bool = True) -> Tensor:
    """``data[N, C, H, W]`` * ``kernel[O, C, KH, KW]`` -> ``[N, O, OH, OW]``.

    ``kernel`` may be pre-packed: ``bitpack(kernel, weight_bits, 1, 2, pack_dtype)``, shape
    ``[O, ceil(C / word), weight_bits, KH, KW]``.
    """
    return _bitserial_conv2d("NCHW", data, kernel, stride, padding, activation_bits, weight_bits,
                             pack_dtype, out_dtype, unipolar)


def bitserial_conv2d_nhwc(data: Tensor, kernel: Tensor, stride: Any, padding: Any,
                          activation_bits: int, weight_bits: int, pack_dtype: str = "uint32",
                          out_dtype: str = "int16", unipolar: bool = True) -> Tensor:
    """``data[N, H, W, C]`` * ``kernel[KH, KW, C, O]`` (HWIO) -> ``[N, OH, OW, O]``.

    ``kernel`` may be pre-packed: ``bitpack(kernel, weight_bits, 2, 4, pack_dtype)``, shape
    ``[KH, KW, ceil(C / word), O, weight_bits]``.
    """
    return _bitserial_conv2d("NHWC", data, kernel, stride, padding, activation_bits, weight_bits,
                             pack_dtype, out_dtype, unipolar)
