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
from .dyn_args import runtime_input
from .registry import Attrs, Converter, Inputs, Names, Output, converter, register

# A reduction is written once against ``R(kind)(x, keepdims)``: the relay reduction of that kind
# (sum, mean, max, min, prod) over the node's axes, static (an attribute or a constant axes
# input) or dynamic (an axes tensor known at run time: relay.op.dyn.sum, ...).
Reducer = Callable[[str], Callable[[RelayExpr, bool], RelayExpr]]

_COMPOSED: dict[str, Callable[[Reducer, RelayExpr, bool], RelayExpr]] = {
    "ReduceMean": lambda R, x, k: R("mean")(x, k),
    "ReduceSum": lambda R, x, k: R("sum")(x, k),
    "ReduceMax": lambda R, x, k: R("max")(x, k),
    "ReduceMin": lambda R, x, k: R("min")(x, k),
    "ReduceProd": lambda R, x, k: R("prod")(x, k),
    "ReduceSumSquare": lambda R, x, k: R("sum")(tensor.multiply(x, x), k),
    "ReduceL2": lambda R, x, k: tensor.sqrt(R("sum")(tensor.multiply(x, x), k)),
    "ReduceL1": lambda R, x, k: R("sum")(tensor.abs(x), k),
    "ReduceLogSum": lambda R, x, k: tensor.log(R("sum")(x, k)),
    "ReduceLogSumExp": lambda R, x, k: _log_sum_exp(R, x, k),
}


def _log_sum_exp(R: Reducer, x: RelayExpr, keepdims: bool) -> RelayExpr:
    m = R("max")(x, True)
    s = R("sum")(tensor.exp(tensor.subtract(x, m)), keepdims)
    m2 = m if keepdims else R("max")(x, False)
    return tensor.add(tensor.log(s), m2)


def _static(axes: list[int] | None) -> Reducer:
    return lambda kind: lambda x, keep: getattr(_red, kind)(x, axis=axes, keepdims=keep)


def _reduce(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    compose = _COMPOSED[ctx.node.op_type]
    x = inputs[0]
    r = len(shape_of(x))
    keep = bool(attrs.get("keepdims", 1))
    axes = attrs.get("axes")
    if axes is None and len(names) > 1 and names[1]:
        if runtime_input(ctx, names, 1) and shape_of(inputs[1]) != [0]:
            return _reduce_dynamic(ctx, compose, x, inputs[1], keep, attrs)
        empty = names[1] not in ctx.values and shape_of(inputs[1]) == [0]  # (no values needed)
        axes = [] if empty else [int(v) for v in ctx.value(names[1], "axes")]
    if axes is not None and len(axes) == 0:
        axes = None
    if axes is None and attrs.get("noop_with_empty_axes", 0):
        return x
    axes = None if axes is None else [int(v) % r for v in axes]
    s = shape_of(x)
    if any(s[ax] == 0 for ax in (axes if axes is not None else range(r))):
        return _reduce_empty(ctx, x, s, axes, keep)
    if 0 in s:  # an empty kept axis: an empty result (nothing to compile)
        red = list(range(r)) if axes is None else axes
        out = [1 if k in red else d for k, d in enumerate(s)] if keep else \
            [d for k, d in enumerate(s) if k not in red]
        return const(np.zeros(out, dtype=dtype_of(x)))
    return compose(_static(axes), x, keep)


def _reduce_dynamic(ctx: ImportContext, compose: Callable[[Reducer, RelayExpr, bool], RelayExpr],
                    x: RelayExpr, axes: RelayExpr | None, keep: bool, attrs: Attrs) -> RelayExpr:
    """The reduction over an axes tensor known at run time (``relay.op.dyn`` reductions)."""
    from ...op.dyn import reduce as _dyn

    assert axes is not None
    n = shape_of(axes)
    if len(n) != 1:
        raise ctx.fail(f"axes must be 1-D, got shape {n}")
    if not keep and not isinstance(n[0], int):
        raise ctx.fail("keepdims=0 needs a static number of axes (the output rank), got axes "
                       f"of shape {n}")
    noop = bool(attrs.get("noop_with_empty_axes", 0))
    where = ctx.where()

    def R(kind: str) -> Callable[[RelayExpr, bool], RelayExpr]:
        fn = getattr(_dyn, kind)
        return lambda v, k: fn(v, axes, keepdims=k, noop_with_empty_axes=noop, node=where)

    return compose(R, x, keep)


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


for _n in _COMPOSED:
    register(_n, _reduce)


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
    if runtime_input(ctx, names, 1):
        return _scan_dynamic(ctx, inputs, attrs, "cumsum")
    ax = int(ctx.value(names[1], "axis").reshape(-1)[0]) % len(shape_of(inputs[0]))
    if not attrs.get("reverse", 0):
        return transform.cumsum(inputs[0], axis=ax, exclusive=bool(attrs.get("exclusive", 0)))
    out = transform.cumsum(
        transform.reverse(inputs[0], ax), axis=ax, exclusive=bool(attrs.get("exclusive", 0))
    )
    return transform.reverse(out, ax)


@converter("CumProd")
def _cumprod(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    if runtime_input(ctx, names, 1):
        return _scan_dynamic(ctx, inputs, attrs, "cumprod")
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


def _scan_dynamic(ctx: ImportContext, inputs: Inputs, attrs: Attrs, kind: str) -> Output:
    """CumSum / CumProd along an axis known at run time (relay.op.dyn.cumsum / cumprod)."""
    from ...op.dyn import scalar_args

    x, axis = inputs[0], inputs[1]
    assert x is not None and axis is not None
    if not dtype_of(axis).startswith(("int", "uint")) or len(shape_of(axis)) > 1:
        raise ctx.fail(f"axis must be one integer, got {shape_of(axis)} {dtype_of(axis)}")
    return getattr(scalar_args, kind)(x, axis, exclusive=bool(attrs.get("exclusive", 0)),
                                      reverse=bool(attrs.get("reverse", 0)), node=ctx.where())
