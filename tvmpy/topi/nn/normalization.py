"""Normalization layers: ``batch_norm`` (inference form: moving statistics), ``layer_norm``,
``instance_norm`` and ``group_norm`` (statistics in two passes: mean, then variance)."""

from __future__ import annotations

from typing import Any

from ...te import Tensor, compute, reduce_axis
from ...te import sum as te_sum
from ...tir.expr import const
from ...tir.op import rsqrt, sqrt
from .dense import _same
from .utils import check_rank

__all__ = ["batch_norm", "layer_norm", "instance_norm", "group_norm"]


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


def _stats(data: Tensor, keep: list[int], red: list[int], prefix: str,
           index: Any = None, red_extents: list[Any] | None = None) -> tuple[Tensor, Tensor]:
    """Mean and (biased) variance of ``data`` over ``red`` axes, indexed by the ``keep`` axes.

    ``index(keep_vals, red_vals)`` builds the data index (default: place them at their axes);
    ``red_extents`` the reduction extents (default: those axes' extents)."""
    nd = len(data.shape)
    exts = red_extents or [data.shape[a] for a in red]
    count = 1
    for e in exts:
        count = count * e
    inv_n = const(1.0, data.dtype) / (count.astype(data.dtype) if hasattr(count, "astype")
                                      else const(count, data.dtype))

    def full(i: Any, rv: list) -> tuple:
        if index is not None:
            return index(i, rv)
        idx: list[Any] = [None] * nd
        for p, a in enumerate(keep):
            idx[a] = i[p]
        for p, a in enumerate(red):
            idx[a] = rv[p]
        return tuple(idx)

    shape = [data.shape[a] for a in keep] if index is None else None
    return _stats_stages(data, full, exts, inv_n, prefix, shape)


def _stats_stages(data: Tensor, full: Any, exts: list[Any], inv_n: Any, prefix: str,
                  shape: Any) -> tuple[Tensor, Tensor]:
    r1 = [reduce_axis((0, e), name=f"k{i}") for i, e in enumerate(exts)]
    mean = compute(shape, lambda *i: te_sum(data[full(i, r1)] * inv_n, axis=r1),
                   name=f"T_{prefix}_mean", tag=f"{prefix}_mean")
    r2 = [reduce_axis((0, e), name=f"k{i}") for i, e in enumerate(exts)]

    def fvar(*i: Any) -> Any:
        d = data[full(i, r2)] - mean[i]
        return te_sum(d * d * inv_n, axis=r2)

    var = compute(shape, fvar, name=f"T_{prefix}_var", tag=f"{prefix}_var")
    return mean, var


def instance_norm(data: Tensor, gamma: Tensor, beta: Tensor | None, channel_axis: int = 1,
                  axis: Any = None, epsilon: float = 1e-5) -> Tensor:
    """Normalize each (sample, channel) over the spatial ``axis`` (default: all after the
    channel axis); per-channel ``gamma``/``beta``."""
    nd = len(data.shape)
    if nd < 3:
        raise ValueError(f"instance_norm: data must be at least 3-D (N, C, spatial...), got "
                         f"{nd}-D")
    ca = channel_axis % nd
    axes = sorted(a % nd for a in (axis if isinstance(axis, (list, tuple)) else
                                   [axis] if axis is not None else range(ca + 1, nd)))
    if ca in axes or 0 in axes:
        raise ValueError(f"instance_norm: axis {axis} must not include the batch or channel axis")
    for name, t in (("gamma", gamma), ("beta", beta)):
        if t is not None:
            check_rank(t, 1, "instance_norm", name)
            if not _same(t.shape[0], data.shape[ca]):
                raise ValueError(f"instance_norm: {name} has {t.shape[0]} elements, data has "
                                 f"{data.shape[ca]} channels")
    keep = [i for i in range(nd) if i not in axes]
    mean, var = _stats(data, keep, axes, "instance_norm")
    eps = const(epsilon, data.dtype)

    def fout(*i: Any) -> Any:
        r = tuple(i[a] for a in keep)
        out = (data[i] - mean[r]) * rsqrt(var[r] + eps) * gamma[i[ca]]
        return out + beta[i[ca]] if beta is not None else out

    return compute(data.shape, fout, name="T_instance_norm", tag="instance_norm",
                   attrs={"axes": tuple(axes)})


def group_norm(data: Tensor, gamma: Tensor, beta: Tensor | None, num_groups: int,
               channel_axis: int = 1, axes: Any = None, epsilon: float = 1e-5) -> Tensor:
    """Normalize each (sample, group of ``C / num_groups`` channels) over the group's channels
    and the spatial axes; ``data`` is ``[N, C, spatial...]``; per-channel ``gamma``/``beta``."""
    nd = len(data.shape)
    if channel_axis % nd != 1 or nd < 2:
        raise ValueError("group_norm: data must be [N, C, spatial...] with channel_axis=1")
    spatial = list(range(2, nd))
    if axes is not None and sorted(a % nd for a in axes) != spatial:
        raise ValueError(f"group_norm: axes must be the spatial axes {spatial}, got {axes}")
    c = data.shape[1]
    ci = int(c)
    if not isinstance(num_groups, int) or num_groups < 1 or ci % num_groups:
        raise ValueError(f"group_norm: {ci} channels are not divisible by num_groups="
                         f"{num_groups}")
    cg = ci // num_groups
    for name, t in (("gamma", gamma), ("beta", beta)):
        if t is not None:
            check_rank(t, 1, "group_norm", name)
            if not _same(t.shape[0], c):
                raise ValueError(f"group_norm: {name} has {t.shape[0]} elements, data has {ci} "
                                 "channels")

    def index(i: Any, rv: list) -> tuple:
        return (i[0], i[1] * cg + rv[0], *rv[1:])

    exts = [cg, *[data.shape[a] for a in spatial]]
    count = const(cg, data.dtype)
    for a in spatial:
        count = count * data.shape[a].astype(data.dtype)
    mean, var = _stats_stages(data, index, exts, const(1.0, data.dtype) / count, "group_norm",
                              (data.shape[0], num_groups))
    eps = const(epsilon, data.dtype)

    def fout(*i: Any) -> Any:
        g = (i[0], i[1] // cg)
        out = (data[i] - mean[g]) * rsqrt(var[g] + eps) * gamma[i[1]]
        return out + beta[i[1]] if beta is not None else out

    return compute(data.shape, fout, name="T_group_norm", tag="group_norm", attrs={"axes": ()})
