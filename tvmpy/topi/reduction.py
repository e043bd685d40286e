"""Reductions over axes (TVM's ``topi.sum`` etc.): ``axis`` is None (all), an int or a tuple of
ints (negative counts from the end); ``keepdims`` keeps reduced axes as size 1.

``argmax``/``argmin`` return int32 indices (ties: the first index, or the last with
``select_last_index``); with several axes (or None) the index is into those axes flattened in
row-major order, as numpy's ``argmax`` of the flattened tensor.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .. import te
from ..ir import dtype as dt
from ..tir import op as tir_op
from ..tir.expr import Select, cast, const
from . import tag
from .utils import normalize_axes

__all__ = ["sum", "mean", "max", "min", "prod", "all", "any", "argmax", "argmin"]

_prod = te.comm_reducer(lambda x, y: x * y, lambda d: const(1, d), name="prod")


def _check(data: Any, op: str) -> te.Tensor:
    if not isinstance(data, te.Tensor):
        raise TypeError(f"topi.{op}: expected a te.Tensor, got {type(data).__name__} {data!r}")
    return data


def _layout(data: te.Tensor, axis: Any, keepdims: bool, op: str) -> tuple[list[int], tuple]:
    axes = normalize_axes(axis, data.ndim, op)
    for a in axes:
        e = data.shape[a]
        if hasattr(e, "value") and e.value == 0:
            if op in ("max", "min", "argmax", "argmin"):
                raise ValueError(f"topi.{op}: cannot reduce over axis {a} of size 0 "
                                 f"(shape {tuple(data.shape)}): the result has no identity")
    out_shape = tuple(const(1, s.dtype) if k in axes else s for k, s in enumerate(data.shape)
                      if keepdims or k not in axes)
    return axes, out_shape


def _reduced_index(ndim: int, rvs: dict[int, Any], keepdims: bool, out: tuple) -> list[Any]:
    """The input index of a reduction's body at output index ``out``: the reduce axis
    ``rvs[k]`` on each reduced axis ``k`` (whose output index, kept with ``keepdims``, is 0 and
    skipped), the output's index on the others."""
    idx = []
    it = iter(out)
    for k in range(ndim):
        if k in rvs:
            if keepdims:
                next(it)
            idx.append(rvs[k].var)
        else:
            idx.append(next(it))
    return idx


def _reduce(data: te.Tensor, axis: Any, keepdims: bool, op: str,
            reducer: Callable[..., Any], prep: Callable[[Any], Any] | None = None) -> te.Tensor:
    _check(data, op)
    axes, out_shape = _layout(data, axis, keepdims, op)
    rvs = {a: te.reduce_axis((0, data.shape[a]), name=f"k{a}") for a in axes}

    def body(*i: Any) -> Any:
        v = data(*_reduced_index(data.ndim, rvs, keepdims, i))
        if prep is not None:
            v = prep(v)
        if not rvs:
            return v
        return reducer(v, axis=[rvs[a] for a in axes])

    return te.compute(out_shape, body, name=op, tag=tag.COMM_REDUCE if rvs else tag.ELEMWISE)


def sum(data: te.Tensor, axis: Any = None, keepdims: bool = False) -> te.Tensor:  # noqa: A001
    """Sum over ``axis`` (bool inputs are counted as int32). It accumulates in the input's
    dtype, as TVM's: relay's float16 sums are widened to float32 by
    ``relay/transform/float16_accumulation.py``; te users cast first."""
    _check(data, "sum")
    if dt.is_bool(data.dtype):
        return _reduce(data, axis, keepdims, "sum", te.sum, lambda v: cast(v, "int32"))
    return _reduce(data, axis, keepdims, "sum", te.sum)


def prod(data: te.Tensor, axis: Any = None, keepdims: bool = False) -> te.Tensor:
    """Product over ``axis`` (accumulated in the input's dtype, as :func:`sum`)."""
    _check(data, "prod")
    return _reduce(data, axis, keepdims, "prod", _prod)


def max(data: te.Tensor, axis: Any = None, keepdims: bool = False) -> te.Tensor:  # noqa: A001
    return _reduce(data, axis, keepdims, "max", te.max)


def min(data: te.Tensor, axis: Any = None, keepdims: bool = False) -> te.Tensor:  # noqa: A001
    return _reduce(data, axis, keepdims, "min", te.min)


def all(data: te.Tensor, axis: Any = None, keepdims: bool = False) -> te.Tensor:  # noqa: A001
    """True where every element over ``axis`` is nonzero."""
    _check(data, "all")
    return _reduce(data, axis, keepdims, "all", te.min, _as_bool)


def any(data: te.Tensor, axis: Any = None, keepdims: bool = False) -> te.Tensor:  # noqa: A001
    """True where some element over ``axis`` is nonzero."""
    _check(data, "any")
    return _reduce(data, axis, keepdims, "any", te.max, _as_bool)


def _as_bool(v: Any) -> Any:
    return v if dt.is_bool(v.dtype) else v != const(0, v.dtype)


def mean(data: te.Tensor, axis: Any = None, keepdims: bool = False) -> te.Tensor:
    """Sum over ``axis`` divided by the number of reduced elements (float tensors)."""
    _check(data, "mean")
    if not dt.is_float(data.dtype):
        raise TypeError(f"topi.mean: needs a float tensor, got {data.dtype} (cast it first)")
    axes, _ = _layout(data, axis, keepdims, "mean")
    s = _reduce(data, axis, keepdims, "sum", te.sum)
    count: Any = 1
    for a in axes:
        count = count * data.shape[a]
    return te.compute(s.shape, lambda *i: cast(s(*i) / cast(count, s.dtype), data.dtype),
                      name="mean", tag=tag.ELEMWISE)


def _arg_reducer(is_max: bool, last: bool) -> Callable[..., Any]:
    def fcombine(x: Any, y: Any) -> Any:
        (xi, xv), (yi, yv) = x, y
        better = (yv > xv) if is_max else (yv < xv)
        # the identity's index -1 never wins a tie: a row whose every value equals the
        # identity's (all -inf for argmax) gives its first index, as numpy does
        tie_pick_y = (yi > xi) if last else tir_op.any(xi < 0, tir_op.all(yi >= 0, yi < xi))
        take_y = tir_op.any(better, tir_op.all(yv == xv, tie_pick_y))
        return Select(take_y, yi, xi), Select(take_y, yv, xv)

    def fidentity(ti: str, tv: str) -> Any:
        return const(-1, ti), tir_op.min_value(tv) if is_max else tir_op.max_value(tv)

    return te.comm_reducer(fcombine, fidentity, name="argmax" if is_max else "argmin")


def _argreduce(data: te.Tensor, axis: Any, keepdims: bool, is_max: bool, last: bool) -> te.Tensor:
    op = "argmax" if is_max else "argmin"
    _check(data, op)
    axes, out_shape = _layout(data, axis, keepdims, op)
    rvs = {a: te.reduce_axis((0, data.shape[a]), name=f"k{a}") for a in axes}
    reducer = _arg_reducer(is_max, last)

    def body(*i: Any) -> Any:
        idx = _reduced_index(data.ndim, rvs, keepdims, i)
        flat: Any = const(0, "int32")
        for a in axes:
            flat = flat * cast(data.shape[a], "int32") + cast(rvs[a].var, "int32")
        if not rvs:
            return const(0, "int32")
        return reducer((flat, data(*idx)), axis=[rvs[a] for a in axes])

    res = te.compute(out_shape, body, name=op + "_red", tag=tag.COMM_REDUCE_IDX)
    if not rvs:
        return res
    return te.compute(out_shape, lambda *i: res[0](*i), name=op, tag=tag.INJECTIVE)


def argmax(data: te.Tensor, axis: Any = None, keepdims: bool = False,
           select_last_index: bool = False) -> te.Tensor:
    """Index of the largest element over ``axis`` (int32)."""
    return _argreduce(data, axis, keepdims, True, select_last_index)


def argmin(data: te.Tensor, axis: Any = None, keepdims: bool = False,
           select_last_index: bool = False) -> te.Tensor:
    """Index of the smallest element over ``axis`` (int32)."""
    return _argreduce(data, axis, keepdims, False, select_last_index)
