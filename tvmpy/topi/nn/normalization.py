"""Normalization layers: ``batch_norm`` (inference form: moving statistics) and
``layer_norm`` (statistics over the given axes, two passes: mean, then variance)."""

from __future__ import annotations

from typing import Any

from ...te import Tensor, compute, reduce_axis
from ...te import sum as te_sum
from ...tir.expr import const
from ...tir.op import rsqrt, sqrt
from .dense import _same
from .utils import check_rank

__all__ = ["batch_norm", "layer_norm"]


def batch_norm(data: Tensor, gamma: Tensor, beta: Tensor, moving_mean: Tensor,
               moving_var: Tensor, axis: int | None = None, epsilon: float = 1e-5,
               center: bool = True, scale: bool = True, training: bool = False,
               momentum: float | None = None) -> list[Tensor]:
    """``(x - mean) / sqrt(var + eps) * gamma + beta`` per channel ``axis`` (default 1).

    Returns ``[out, moving_mean, moving_var]`` as TVM does (inference: the statistics are the
    inputs). ``training=True`` is not supported.
    """
    if training:
        raise ValueError("batch_norm: training=True is not supported (inference form only)")
    nd = len(data.shape)
    ax = 1 if axis is None else axis
    if not -nd <= ax < nd:
        raise ValueError(f"batch_norm: axis {axis} is out of range for a {nd}-D input")
    ax %= nd
    for name, t in (("gamma", gamma), ("beta", beta), ("moving_mean", moving_mean),
                    ("moving_var", moving_var)):
        check_rank(t, 1, "batch_norm", name)
        if not _same(t.shape[0], data.shape[ax]):
            raise ValueError(f"batch_norm: {name} has {t.shape[0]} elements, data has "
                             f"{data.shape[ax]} channels on axis {ax}")
    eps = const(epsilon, data.dtype)

    def f(*i: Any) -> Any:
        c = i[ax]
        out = (data[i] - moving_mean[c]) / sqrt(moving_var[c] + eps)
        if scale:
            out = out * gamma[c]
        if center:
            out = out + beta[c]
        return out

    out = compute(data.shape, f, name="T_batch_norm", tag="broadcast,batch_norm")
    return [out, moving_mean, moving_var]


def layer_norm(data: Tensor, gamma: Tensor, beta: Tensor | None, axis: Any,
               epsilon: float = 1e-5) -> Tensor:
    """Normalize over ``axis`` (an int or a list), then scale by ``gamma`` and shift by
    ``beta`` (shapes: the normalized axes' extents)."""
    nd = len(data.shape)
    axes = list(axis) if isinstance(axis, (list, tuple)) else [axis]
    for a in axes:
        if not isinstance(a, int) or not -nd <= a < nd:
            raise ValueError(f"layer_norm: axis {a!r} is out of range for a {nd}-D input")
    axes = sorted({a % nd for a in axes})
    norm_shape = [data.shape[a] for a in axes]
    for name, t in (("gamma", gamma), ("beta", beta)):
        if t is None:
            continue
        if len(t.shape) != len(axes) or not all(_same(x, y) for x, y in zip(t.shape, norm_shape)):
            raise ValueError(f"layer_norm: {name} shape {tuple(str(s) for s in t.shape)} != "
                             f"the normalized axes' extents {tuple(str(s) for s in norm_shape)}")
    keep = [i for i in range(nd) if i not in axes]
    red_shape = [data.shape[i] for i in keep]
    count = 1
    for s in norm_shape:
        count = count * s
    inv_n = const(1.0, data.dtype) / (count.astype(data.dtype) if hasattr(count, "astype")
                                      else const(count, data.dtype))

    def full(i: Any, rv: list) -> tuple:
        idx: list[Any] = [None] * nd
        for p, a in enumerate(keep):
            idx[a] = i[p]
        for p, a in enumerate(axes):
            idx[a] = rv[p]
        return tuple(idx)

    r1 = [reduce_axis((0, data.shape[a]), name=f"k{a}") for a in axes]
    mean = compute(red_shape, lambda *i: te_sum(data[full(i, r1)] * inv_n, axis=r1),
                   name="T_layer_norm_mean", tag="layer_norm_mean")
    r2 = [reduce_axis((0, data.shape[a]), name=f"k{a}") for a in axes]

    def fvar(*i: Any) -> Any:
        d = data[full(i, r2)] - mean[i]
        return te_sum(d * d * inv_n, axis=r2)

    var = compute(red_shape, fvar, name="T_layer_norm_var", tag="layer_norm_var")
    eps = const(epsilon, data.dtype)

    def fout(*i: Any) -> Any:
        r = tuple(i[a] for a in keep)
        g = tuple(i[a] for a in axes)
        out = (data[i] - mean[r]) * rsqrt(var[r] + eps) * gamma[g]
        return out + beta[g] if beta is not None else out

    return compute(data.shape, fout, name="T_layer_norm", tag="layer_norm",
                   attrs={"axes": tuple(axes)})
