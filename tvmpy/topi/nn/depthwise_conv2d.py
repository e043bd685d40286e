"""Depthwise 2-D convolution: NCHW (``Filter[C, multiplier, KH, KW]``) and the blocked
NCHW{c} form the x86 layout pass produces."""

from __future__ import annotations

from typing import Any

from ...te import Tensor, compute, reduce_axis
from ...te import sum as te_sum
from ..utils import get_const_tuple
from .conv2d import _cast, _prepare
from .utils import batch_const_shape, check_rank, infer_out_dtype

__all__ = ["depthwise_conv2d_nchw", "depthwise_conv2d_NCHWc"]


def depthwise_conv2d_nchw(Input: Tensor, Filter: Tensor, stride: Any, padding: Any,
                          dilation: Any = 1, out_dtype: str | None = None) -> Tensor:
    """Output channel ``c * multiplier + m`` convolves input channel ``c`` with
    ``Filter[c, m]``: ``[N, C, H, W]`` -> ``[N, C * multiplier, OH, OW]``."""
    op = "depthwise_conv2d_nchw"
    check_rank(Input, 4, op, "Input", "NCHW")
    check_rank(Filter, 4, op, "Filter", "C, multiplier, KH, KW")
    n, c, _, _ = batch_const_shape(Input.shape, f"{op}: Input shape")
    fc, mult, kh, kw = get_const_tuple(Filter.shape, f"{op}: Filter shape", symbolic=False)
    if fc != c:
        raise ValueError(f"{op}: Filter has {fc} channels, Input has {c}")
    out_dtype = infer_out_dtype(out_dtype, Input)
    data, (sh, sw), (dh, dw), (oh, ow) = _prepare(op, Input, (kh, kw), stride, padding, dilation)
    ry = reduce_axis((0, kh), name="ry")
    rx = reduce_axis((0, kw), name="rx")
    return compute(
        (n, c * mult, oh, ow),
        lambda b, f, y, x: te_sum(
            _cast(data[b, f // mult, y * sh + ry * dh, x * sw + rx * dw], out_dtype)
            * _cast(Filter[f // mult, f % mult, ry, rx], out_dtype), axis=[ry, rx]),
        name=op, tag="depthwise_conv2d_nchw")


def depthwise_conv2d_NCHWc(Input: Tensor, Filter: Tensor, stride: Any, padding: Any,
                           dilation: Any, layout: str = "", out_layout: str = "",
                           out_dtype: str | None = None) -> Tensor:
    """Blocked depthwise convolution (channel multiplier 1): ``Input[N, C/cb, H, W, cb]``,
    ``Filter[C/cb, 1, KH, KW, 1, cb]`` -> ``[N, C/cb, OH, OW, cb]``."""
    op = "depthwise_conv2d_NCHWc"
    check_rank(Input, 5, op, "Input", "NCHWc")
    check_rank(Filter, 6, op, "Filter", "OIHWio")
    n, cc, _, _, cb = batch_const_shape(Input.shape, f"{op}: Input shape")
    fcc, one, kh, kw, one2, fcb = get_const_tuple(Filter.shape, f"{op}: Filter shape", symbolic=False)
    if (fcc, fcb) != (cc, cb) or one != 1 or one2 != 1:
        raise ValueError(f"{op}: Filter {(fcc, one, kh, kw, one2, fcb)} does not match Input "
                         f"channels {cc}x{cb} (expected ({cc}, 1, KH, KW, 1, {cb}))")
    for name, lay in (("layout", layout), ("out_layout", out_layout)):
        if lay and lay != f"NCHW{cb}c":
            raise ValueError(f"{op}: {name}={lay!r} does not match the block size, expected "
                             f"'NCHW{cb}c'")
    out_dtype = infer_out_dtype(out_dtype, Input)
    data, (sh, sw), (dh, dw), (oh, ow) = _prepare(op, Input, (kh, kw), stride, padding, dilation)
    ry = reduce_axis((0, kh), name="ry")
    rx = reduce_axis((0, kw), name="rx")
    return compute(
        (n, cc, oh, ow, cb),
        lambda b, co, y, x, ci: te_sum(
            _cast(data[b, co, y * sh + ry * dh, x * sw + rx * dw, ci], out_dtype)
            * _cast(Filter[co, 0, ry, rx, 0, ci], out_dtype), axis=[ry, rx]),
        name=op, tag="depthwise_conv2d_NCHWc")
