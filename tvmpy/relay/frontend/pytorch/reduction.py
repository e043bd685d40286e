"""PyTorch frontend converters: reductions (sum/mean/prod/amax/any/all, arg-max/min, max/min
along a dim, var/std, vector norms) and the cumulative sum."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ...op import reduce as _red
from ...op import tensor, transform
from .common import (
    Args,
    ConvertContext,
    Output,
    cast_to,
    converter,
    fail,
    in_dtype,
    in_shape,
    norm_axis,
    out_dtype,
    out_shape,
    register,
    reshape_to,
    scalar,
)

if TYPE_CHECKING:
    from torch.fx import Node


def _dims(v: Any, rank: int) -> list[int] | None:
    if v is None:
        return None
    v = [v] if isinstance(v, int) else list(v)
    return None if not v else [norm_axis(int(d), rank) for d in v]


def _reduce(fn, cast_first: bool = True):
    def f(ctx: ConvertContext, node: Node, args: Args) -> Output:
        rank = len(in_shape(node))
        x = args["self"]
        if cast_first:
            x = cast_to(x, in_dtype(node), out_dtype(node))
        dims = _dims(args.get("dim"), rank)
        keep = bool(args.get("keepdim", False))
        if rank == 0:
            return x
        return fn(x, axis=dims, keepdims=keep)
    return f


for _op, _fn in [("mean", _red.mean), ("sum", _red.sum), ("prod", _red.prod)]:
    register(f"aten.{_op}.default", _reduce(_fn))
register("aten.mean.dim", _reduce(_red.mean))
register("aten.sum.dim_IntList", _reduce(_red.sum))
register("aten.prod.dim_int", _reduce(_red.prod))
for _op, _fn in [("amax", _red.max), ("amin", _red.min), ("max", _red.max), ("min", _red.min)]:
    register(f"aten.{_op}.default", _reduce(_fn))


def _bool_reduce(fn):
    inner = _reduce(fn, cast_first=False)

    def g(ctx: ConvertContext, node: Node, args: Args) -> Output:
        return inner(ctx, node, {**args, "self": cast_to(args["self"], in_dtype(node), "bool")})
    return g


for _op, _fn in [("any", _red.any), ("all", _red.all)]:
    for _ov in ("default", "dim", "dims"):
        register(f"aten.{_op}.{_ov}", _bool_reduce(_fn))


@converter("aten.argmax.default", "aten.argmin.default")
def _argmax(ctx: ConvertContext, node: Node, args: Args) -> Output:
    fn = _red.argmax if "argmax" in str(node.target) else _red.argmin
    x = args["self"]
    dim = args["dim"]
    if dim is None:
        y = fn(reshape_to(x, (-1,)), axis=0, keepdims=False)
        y = reshape_to(y, out_shape(node)) if args["keepdim"] else y
    else:
        y = fn(x, axis=norm_axis(int(dim), len(in_shape(node))), keepdims=bool(args["keepdim"]))
    return transform.cast(y, "int64")


@converter("aten.max.dim", "aten.min.dim")
def _max_dim(ctx: ConvertContext, node: Node, args: Args) -> Output:
    mx = "max" in str(node.target)
    ax = norm_axis(int(args["dim"]), len(in_shape(node)))
    keep = bool(args["keepdim"])
    vals = (_red.max if mx else _red.min)(args["self"], axis=ax, keepdims=keep)
    idx = (_red.argmax if mx else _red.argmin)(args["self"], axis=ax, keepdims=keep)
    return [vals, transform.cast(idx, "int64")]


def _var_mean(node: Node, args: Args) -> tuple:
    rank = len(in_shape(node))
    dims = _dims(args.get("dim"), rank) or list(range(rank))
    corr = args.get("correction")
    if "unbiased" in args:
        corr = 1 if args["unbiased"] else 0
    corr = 1 if corr is None else float(corr)
    x = args["self"]
    dt = out_dtype(node)
    mean = _red.mean(x, axis=dims, keepdims=True)
    d = tensor.subtract(x, mean)
    n = int(np.prod([in_shape(node)[k] for k in dims]))
    v = tensor.divide(_red.sum(tensor.multiply(d, d), axis=dims, keepdims=bool(args["keepdim"])),
                      scalar(max(n - corr, 0), dt))
    return v, mean if args["keepdim"] else reshape_to(mean, out_shape(node))


@converter("aten.var.correction", "aten.std.correction", "aten.var.dim", "aten.std.dim")
def _var(ctx: ConvertContext, node: Node, args: Args) -> Output:
    v = _var_mean(node, args)[0]
    return tensor.sqrt(v) if ".std." in str(node.target) else v


@converter("aten.var_mean.correction", "aten.std_mean.correction")
def _var_mean_op(ctx: ConvertContext, node: Node, args: Args) -> Output:
    v, mean = _var_mean(node, args)
    return [tensor.sqrt(v) if ".std_" in str(node.target) else v, mean]


@converter("aten.linalg_vector_norm.default")
def _vector_norm(ctx: ConvertContext, node: Node, args: Args) -> Output:
    """The p-norm over ``dim`` (all axes when None): p in {inf, -inf, 0, any > 0}."""
    rank = len(in_shape(node))
    dt = out_dtype(node)
    x = tensor.abs(cast_to(args["self"], in_dtype(node), dt))
    dims, keep = _dims(args["dim"], rank), bool(args["keepdim"])
    p = float(args["ord"])
    if p == float("inf"):
        return _red.max(x, axis=dims, keepdims=keep)
    if p == float("-inf"):
        return _red.min(x, axis=dims, keepdims=keep)
    if p == 0:
        return _red.sum(transform.cast(tensor.not_equal(x, scalar(0, dt)), dt), axis=dims,
                        keepdims=keep)
    if p == 1:
        return _red.sum(x, axis=dims, keepdims=keep)
    if p == 2:
        return tensor.sqrt(_red.sum(tensor.multiply(x, x), axis=dims, keepdims=keep))
    if p < 0:
        raise fail(node, f"ord={p} is not supported")
    s = _red.sum(tensor.power(x, scalar(p, dt)), axis=dims, keepdims=keep)
    return tensor.power(s, scalar(1.0 / p, dt))


@converter("aten.cumsum.default")
def _cumsum(ctx: ConvertContext, node: Node, args: Args) -> Output:
    x = cast_to(args["self"], in_dtype(node), out_dtype(node))
    return transform.cumsum(x, axis=norm_axis(int(args["dim"]), max(len(in_shape(node)), 1)))


# ------------------------------------------------------------------------------------------------
# shapes and data movement
