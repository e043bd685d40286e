"""Local response normalization across channels (``topi.nn.lrn``, ONNX LRN):
``out = x / (bias + alpha / size * sum_{window} x^2) ^ beta``; the window over the ``axis``
holds channels ``c - floor((size-1)/2) ... c + ceil((size-1)/2)`` (clipped to the tensor)."""

from __future__ import annotations

from typing import Any

from ...te import Tensor, compute, reduce_axis
from ...te import sum as te_sum
from ...tir.expr import const
from ...tir.op import power
from .pad import pad

__all__ = ["lrn"]


def lrn(data: Tensor, size: int, axis: int = 1, alpha: float = 0.0001, beta: float = 0.75,
        bias: float = 2.0) -> Tensor:
    """Local response normalization over ``size`` neighbouring entries along ``axis``."""
    nd = len(data.shape)
    if not isinstance(size, int) or size < 1:
        raise ValueError(f"lrn: size must be a positive int, got {size!r}")
    if not isinstance(axis, int) or not -nd <= axis < nd:
        raise ValueError(f"lrn: axis {axis!r} is out of range for a {nd}-D input")
    ax = axis % nd
    before, after = (size - 1) // 2, size - 1 - (size - 1) // 2
    pb = [0] * nd
    pa = [0] * nd
    pb[ax], pa[ax] = before, after
    padded = pad(data, pb, pa, name="lrn_pad")
    r = reduce_axis((0, size), name="rk")

    def fsq(*i: Any) -> Any:
        idx = list(i)
        idx[ax] = i[ax] + r
        v = padded[tuple(idx)]
        return te_sum(v * v, axis=r)

    sqr_sum = compute(data.shape, fsq, name="T_lrn_sqr_sum", tag="lrn_sqr_sum")
    k = const(alpha / size, data.dtype)
    return compute(data.shape, lambda *i: data[i] / power(
        const(bias, data.dtype) + k * sqr_sum[i], const(beta, data.dtype)),
        name="T_lrn", tag="lrn")
