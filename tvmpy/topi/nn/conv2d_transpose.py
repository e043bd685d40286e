"""Transposed 2-D convolution, NCHW (``Filter[IC, OC, KH, KW]``, as TVM / PyTorch).

Computed as TVM does: the input is dilated by the stride and padded by ``k - 1 - pad`` (one
stage), then convolved with the spatially flipped kernel at stride 1.
"""

from __future__ import annotations

from typing import Any

from ...te import Tensor, compute, reduce_axis
from ...te import sum as te_sum
from ...tir import all as tir_all
from ...tir.expr import const
from ...tir.op import if_then_else
from ..utils import get_const_tuple
from .conv2d import _cast
from .utils import batch_const_shape, check_rank, get_pad_tuple, infer_out_dtype, pair

__all__ = ["conv2d_transpose_nchw", "stride_interleave"]


def conv2d_transpose_nchw(Input: Tensor, Filter: Tensor, strides: Any, padding: Any,
                          out_dtype: str | None = None, output_padding: Any = (0, 0)) -> Tensor:
    """``[N, IC, H, W]`` -> ``[N, OC, (H-1)*sh - pt - pb + KH + oph, ...]``."""
    op = "conv2d_transpose_nchw"
    check_rank(Input, 4, op, "Input", "NCHW")
    check_rank(Filter, 4, op, "Filter", "IOHW")
    n, ic, h, w = batch_const_shape(Input.shape, f"{op}: Input shape")
    fic, oc, kh, kw = get_const_tuple(Filter.shape, f"{op}: Filter shape", symbolic=False)
    if fic != ic:
        raise ValueError(f"{op}: Filter has {fic} input channels, Input has {ic}")
    sh, sw = pair(strides, f"{op}: strides")
    oph, opw = (0, 0) if output_padding in (0, None) else tuple(
        int(v) for v in (output_padding if isinstance(output_padding, (list, tuple))
                         else (output_padding, output_padding)))
    if not (0 <= oph < sh and 0 <= opw < sw):
        raise ValueError(f"{op}: output_padding {output_padding} must be >= 0 and < strides "
                         f"{(sh, sw)}")
    pt, pl, pb, pr = get_pad_tuple(padding, (kh, kw))
    if max(pt, pb) > kh - 1 or max(pl, pr) > kw - 1:
        raise ValueError(f"{op}: padding {(pt, pl, pb, pr)} must be at most kernel - 1 "
                         f"({kh - 1}, {kw - 1})")
    bt, bl = kh - 1 - pt, kw - 1 - pl
    bb, br = kh - 1 - pb + oph, kw - 1 - pr + opw
    dil_h, dil_w = (h - 1) * sh + 1, (w - 1) * sw + 1
    out_dtype = infer_out_dtype(out_dtype, Input)
    zero = const(0, Input.dtype)

    def fpad(b: Any, c: Any, y: Any, x: Any) -> Any:
        yy, xx = y - bt, x - bl
        cond = [yy >= 0, yy < dil_h, xx >= 0, xx < dil_w]
        if sh > 1:
            cond.append(yy % sh == 0)
        if sw > 1:
            cond.append(xx % sw == 0)
        return if_then_else(tir_all(*cond), Input[b, c, yy // sh, xx // sw], zero)

    data_pad = compute((n, ic, dil_h + bt + bb, dil_w + bl + br), fpad, name="data_pad",
                       tag="injective,pad")
    oh, ow = dil_h + bt + bb - kh + 1, dil_w + bl + br - kw + 1
    if oh < 1 or ow < 1:
        raise ValueError(f"{op}: output would be empty ({oh} x {ow})")
    rc = reduce_axis((0, ic), name="rc")
    ry = reduce_axis((0, kh), name="ry")
    rx = reduce_axis((0, kw), name="rx")
    return compute(
        (n, oc, oh, ow),
        lambda b, f, y, x: te_sum(
            _cast(data_pad[b, rc, y + ry, x + rx], out_dtype)
            * _cast(Filter[rc, f, kh - 1 - ry, kw - 1 - rx], out_dtype), axis=[rc, ry, rx]),
        name=op, tag="conv2d_transpose_nchw")


def stride_interleave(parts: list[Tensor], strides: Any, out_size: Any) -> Tensor:
    """``out[n, c, y, x, ...] = parts[(y % sh) * sw + x % sw][n, c, y // sh, x // sw, ...]``
    for ``y < out_size[0]``, ``x < out_size[1]``: the output phases of a strided transposed
    convolution (``relay.transform.ConvTransposeToConv``) put together; NCHW or NCHW{c}c parts
    (in the blocked layout the select is uniform across a vector of channels)."""
    sh, sw = pair(strides, "stride_interleave: strides")
    oh, ow = (int(v) for v in out_size)
    if len(parts) != sh * sw:
        raise ValueError(f"stride_interleave: strides {(sh, sw)} need {sh * sw} parts, got "
                         f"{len(parts)}")
    shape = list(parts[0].shape)

    def f(*i: Any) -> Any:
        y, x = i[2], i[3]
        qy, ry_ = (y // sh, y % sh) if sh > 1 else (y, 0)
        qx, rx_ = (x // sw, x % sw) if sw > 1 else (x, 0)
        idx = (i[0], i[1], qy, qx, *i[4:])
        out = parts[-1][idx]
        for k in range(len(parts) - 2, -1, -1):  # k = ry * sw + rx
            ry, rx = divmod(k, sw)
            conds = ([ry_ == ry] if sh > 1 else []) + ([rx_ == rx] if sw > 1 else [])
            out = if_then_else(tir_all(*conds), parts[k][idx], out)
        return out

    return compute((shape[0], shape[1], oh, ow, *shape[4:]), f, name="T_stride_interleave",
                   tag="injective")
