"""ONNX reductions (Reduce*, over empty axes too: their identity elements), ArgMax/ArgMin and the
cumulative sum and product (CumProd: a product over the masked prefix, ``j <= k``;
exclusive/reverse move the bound)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ...expr import RelayExpr, const
from ...op import reduce as _red
from ...op import tensor, transform
from ..common import move_axis_back, move_axis_last
from .context import ImportContext, dtype_of, shape_of, typed_const
from .registry import Attrs, Converter, Inputs, Names, Output, converter, register


def _reduce(fn: Callable[..., RelayExpr]) -> Converter:
    def convert(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
        x = inputs[0]
        r = len(shape_of(x))
        axes = attrs.get("axes")
        if axes is None and len(names) > 1 and names[1]:
            axes = [int(v) for v in ctx.value(names[1], "axes")]
        if axes is not None and len(axes) == 0:
            axes = None
        if axes is None and attrs.get("noop_with_empty_axes", 0):
            return x
        axes = None if axes is None else [int(v) % r for v in axes]
        keep = bool(attrs.get("keepdims", 1))
        s = shape_of(x)
        if any(s[ax] == 0 for ax in (axes if axes is not None else range(r))):
            return _reduce_empty(ctx, x, s, axes, keep)
        if 0 in s:  # an empty kept axis: an empty result (nothing to compile)
            red = list(range(r)) if axes is None else axes
            out = [1 if k in red else d for k, d in enumerate(s)] if keep else \
                [d for k, d in enumerate(s) if k not in red]
            return const(np.zeros(out, dtype=dtype_of(x)))
        return fn(x, axis=axes, keepdims=keep)
    return convert


def _reduce_empty(ctx: ImportContext, x: RelayExpr, s: list[int], axes: list[int] | None,
                  keep: bool) -> RelayExpr:
    """A reduction over an empty axis is its identity element (ONNX: -inf for max, ...)."""
    dt = np.dtype(dtype_of(x))
    axes = list(range(len(s))) if axes is None else axes
    out = [1 if k in axes else d for k, d in enumerate(s)] if keep else \
        [d for k, d in enumerate(s) if k not in axes]
    op = ctx.node.op_type
    if dt == np.bool_:
        ident = {"ReduceMax": False, "ReduceMin": True}.get(op)
    elif dt.kind == "f":
        ident = {"ReduceMax": -np.inf, "ReduceMin": np.inf, "ReduceProd": 1.0,
                 "ReduceLogSum": -np.inf, "ReduceLogSumExp": -np.inf}.get(op, 0.0)
        # ReduceMean of nothing: 0, as onnxruntime (numpy would give 0 / 0 = NaN)
    else:
        info = np.iinfo(dt)
        ident = {"ReduceMax": info.min, "ReduceMin": info.max, "ReduceProd": 1}.get(op, 0)
    if ident is None or (op == "ReduceMean" and dt.kind != "f"):
        raise ctx.fail(f"{op} over an empty axis of {dt} data has no value")
    return const(np.full(out, ident, dtype=dt))


for _n, _f in [("ReduceMean", _red.mean), ("ReduceSum", _red.sum), ("ReduceMax", _red.max),
               ("ReduceMin", _red.min), ("ReduceProd", _red.prod)]:
    register(_n, _reduce(_f))


def _sum_square(x, axis=None, keepdims=False):
    return _red.sum(tensor.multiply(x, x), axis=axis, keepdims=keepdims)


def _l2(x, axis=None, keepdims=False):
    return tensor.sqrt(_sum_square(x, axis, keepdims))


def _l1(x, axis=None, keepdims=False):
    return _red.sum(tensor.abs(x), axis=axis, keepdims=keepdims)


def _log_sum(x, axis=None, keepdims=False):
    return tensor.log(_red.sum(x, axis=axis, keepdims=keepdims))


def _log_sum_exp(x, axis=None, keepdims=False):
    m = _red.max(x, axis=axis, keepdims=True)
    s = _red.sum(tensor.exp(tensor.subtract(x, m)), axis=axis, keepdims=keepdims)
    m2 = m if keepdims else _red.max(x, axis=axis, keepdims=False)
    return tensor.add(tensor.log(s), m2)


for _n, _f in [("ReduceSumSquare", _sum_square), ("ReduceL2", _l2), ("ReduceL1", _l1),
               ("ReduceLogSum", _log_sum), ("ReduceLogSumExp", _log_sum_exp)]:
    register(_n, _reduce(_f))


def _arg(fn: Callable[..., RelayExpr]) -> Converter:
    def convert(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
        x = inputs[0]
        ax = attrs.get("axis", 0) % len(shape_of(x))
        keep = bool(attrs.get("keepdims", 1))
        if not attrs.get("select_last_index", 0):
            return transform.cast(fn(x, axis=[ax], keepdims=keep), "int64")
        last = shape_of(x)[ax] - 1
        idx = transform.cast(fn(transform.reverse(x, ax), axis=[ax], keepdims=keep), "int64")
        return tensor.subtract(const(np.int64(last)), idx)
    return convert


register("ArgMax", _arg(_red.argmax))
register("ArgMin", _arg(_red.argmin))


@converter("CumSum")
def _cumsum(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    ax = int(ctx.value(names[1], "axis").reshape(-1)[0]) % len(shape_of(inputs[0]))
    if not attrs.get("reverse", 0):
        return transform.cumsum(inputs[0], axis=ax, exclusive=bool(attrs.get("exclusive", 0)))
    out = transform.cumsum(
        transform.reverse(inputs[0], ax), axis=ax, exclusive=bool(attrs.get("exclusive", 0))
    )
    return transform.reverse(out, ax)


@converter("CumProd")
def _cumprod(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    x = inputs[0]
    s = shape_of(x)
    r = len(s)
    axis = int(ctx.value(names[1], "axis").reshape(-1)[0]) % r
    L = s[axis]
    k = np.arange(L)[:, None]
    j = np.arange(L)[None, :]
    rev, exc = bool(attrs.get("reverse", 0)), bool(attrs.get("exclusive", 0))
    if rev:
        mask = j > k if exc else j >= k
    else:
        mask = j < k if exc else j <= k
    xt = transform.expand_dims(move_axis_last(x, axis, r), r - 1)  # (..., 1, L)
    y = _red.prod(tensor.where(const(mask), xt, typed_const(1, dtype_of(x))), axis=[r])
    return move_axis_back(y, axis, r)
