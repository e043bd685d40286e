"""Depthwise 2-D convolution, NCHW (``Filter[C, multiplier, KH, KW]``)."""

from __future__ import annotations

from typing import Any

from ...te import Tensor, compute, reduce_axis
from ...te import sum as te_sum
from .conv2d import _cast, _prepare
from .utils import check_rank, get_const_tuple, infer_out_dtype

__all__ = ["depthwise_conv2d_nchw"]


def depthwise_conv2d_nchw(Input: Tensor, Filter: Tensor, stride: Any, padding: Any,
                          dilation: Any = 1, out_dtype: str | None = None) -> Tensor:
    """Output channel ``c * multiplier + m`` convolves input channel ``c`` with
    ``Filter[c, m]``: ``[N, C, H, W]`` -> ``[N, C * multiplier, OH, OW]``."""
    op = "depthwise_conv2d_nchw"
    check_rank(Input, 4, op, "Input", "NCHW")
    check_rank(Filter, 4, op, "Filter", "C, multiplier, KH, KW")
    n, c, _, _ = get_const_tuple(Input.shape, f"{op}: Input shape")
    fc, mult, kh, kw = get_const_tuple(Filter.shape, f"{op}: Filter shape")
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
