"""PyTorch frontend converters: reductions and data movement (views, permutes, concat/split,
slicing, index_select, gather, padding; advanced indexing is in ``pytorch_index``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..expr import RelayExpr
from ..op import nn, tensor, transform
from ..op import reduce as _red
from .pytorch_common import (
    CONVERTERS,
    cast_to,
    fail,
    in_dtype,
    in_shape,
    norm_axis,
    np_dtype,
    out_dtype,
    out_shape,
    reg,
    reshape_to,
    scalar,
    split_sizes,
    val,
)


# ------------------------------------------------------------------------------------------------
# reductions
def _dims(v: Any, rank: int) -> list[int] | None:
    if v is None:
        return None
    v = [v] if isinstance(v, int) else list(v)
    return None if not v else [norm_axis(int(d), rank) for d in v]


def _reduce(fn, cast_first: bool = True):
    def f(c, node, a):
        rank = len(in_shape(node))
        x = a["self"]
        if cast_first:
            x = cast_to(x, in_dtype(node), out_dtype(node))
        dims = _dims(a.get("dim"), rank)
        keep = bool(a.get("keepdim", False))
        if rank == 0:
            return x
        return fn(x, axis=dims, keepdims=keep)
    return f


for _op, _fn in [("mean", _red.mean), ("sum", _red.sum), ("prod", _red.prod)]:
    CONVERTERS[f"aten.{_op}.default"] = _reduce(_fn)
CONVERTERS["aten.mean.dim"] = _reduce(_red.mean)
CONVERTERS["aten.sum.dim_IntList"] = _reduce(_red.sum)
CONVERTERS["aten.prod.dim_int"] = _reduce(_red.prod)
for _op, _fn in [("amax", _red.max), ("amin", _red.min), ("max", _red.max), ("min", _red.min)]:
    CONVERTERS[f"aten.{_op}.default"] = _reduce(_fn)


def _bool_reduce(fn):
    inner = _reduce(fn, cast_first=False)

    def g(c, node, a):
        return inner(c, node, {**a, "self": cast_to(a["self"], in_dtype(node), "bool")})
    return g


for _op, _fn in [("any", _red.any), ("all", _red.all)]:
    for _ov in ("default", "dim", "dims"):
        CONVERTERS[f"aten.{_op}.{_ov}"] = _bool_reduce(_fn)


@reg("aten.argmax.default", "aten.argmin.default")
def _argmax(c, node, a):
    fn = _red.argmax if "argmax" in str(node.target) else _red.argmin
    x = a["self"]
    dim = a["dim"]
    if dim is None:
        y = fn(reshape_to(x, (-1,)), axis=0, keepdims=False)
        y = reshape_to(y, out_shape(node)) if a["keepdim"] else y
    else:
        y = fn(x, axis=norm_axis(int(dim), len(in_shape(node))), keepdims=bool(a["keepdim"]))
    return transform.cast(y, "int64")


@reg("aten.max.dim", "aten.min.dim")
def _max_dim(c, node, a):
    mx = "max" in str(node.target)
    ax = norm_axis(int(a["dim"]), len(in_shape(node)))
    keep = bool(a["keepdim"])
    vals = (_red.max if mx else _red.min)(a["self"], axis=ax, keepdims=keep)
    idx = (_red.argmax if mx else _red.argmin)(a["self"], axis=ax, keepdims=keep)
    return [vals, transform.cast(idx, "int64")]


def _var_mean(node, a) -> tuple:
    rank = len(in_shape(node))
    dims = _dims(a.get("dim"), rank) or list(range(rank))
    corr = a.get("correction")
    if "unbiased" in a:
        corr = 1 if a["unbiased"] else 0
    corr = 1 if corr is None else float(corr)
    x = a["self"]
    dt = out_dtype(node)
    mean = _red.mean(x, axis=dims, keepdims=True)
    d = tensor.subtract(x, mean)
    n = int(np.prod([in_shape(node)[k] for k in dims]))
    v = tensor.divide(_red.sum(tensor.multiply(d, d), axis=dims, keepdims=bool(a["keepdim"])),
                      scalar(max(n - corr, 0), dt))
    return v, mean if a["keepdim"] else reshape_to(mean, out_shape(node))


@reg("aten.var.correction", "aten.std.correction", "aten.var.dim", "aten.std.dim")
def _var(c, node, a):
    v = _var_mean(node, a)[0]
    return tensor.sqrt(v) if ".std." in str(node.target) else v


@reg("aten.var_mean.correction", "aten.std_mean.correction")
def _var_mean_op(c, node, a):
    v, mean = _var_mean(node, a)
    return [tensor.sqrt(v) if ".std_" in str(node.target) else v, mean]


@reg("aten.linalg_vector_norm.default")
def _vector_norm(c, node, a):
    """The p-norm over ``dim`` (all axes when None): p in {inf, -inf, 0, any > 0}."""
    rank = len(in_shape(node))
    dt = out_dtype(node)
    x = tensor.abs(cast_to(a["self"], in_dtype(node), dt))
    dims, keep = _dims(a["dim"], rank), bool(a["keepdim"])
    p = float(a["ord"])
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


@reg("aten.cumsum.default")
def _cumsum(c, node, a):
    x = cast_to(a["self"], in_dtype(node), out_dtype(node))
    return transform.cumsum(x, axis=norm_axis(int(a["dim"]), max(len(in_shape(node)), 1)))


# ------------------------------------------------------------------------------------------------
# shapes and data movement
@reg("aten.view.default", "aten.reshape.default", "aten._unsafe_view.default",
     "aten.flatten.using_ints", "aten.unflatten.int", "aten.squeeze.default",
     "aten.squeeze.dim", "aten.squeeze.dims", "aten.unsqueeze.default", "aten.view_as.default",
     "aten.reshape_as.default")
def _reshape(c, node, a):
    want = out_shape(node)
    if in_shape(node) == want:
        return a["self"]
    return reshape_to(a["self"], want)


@reg("aten.permute.default")
def _permute(c, node, a):
    rank = len(in_shape(node))
    return transform.transpose(a["self"], [norm_axis(int(d), rank) for d in a["dims"]])


@reg("aten.transpose.int", "aten.t.default", "aten.swapaxes.default", "aten.numpy_T.default")
def _transpose(c, node, a):
    rank = len(in_shape(node))
    if rank < 2:
        return a["self"]
    if "dim0" in a or "axis0" in a:
        d0 = norm_axis(int(a.get("dim0", a.get("axis0"))), rank)
        d1 = norm_axis(int(a.get("dim1", a.get("axis1"))), rank)
        perm = list(range(rank))
        perm[d0], perm[d1] = perm[d1], perm[d0]
    else:
        perm = list(reversed(range(rank)))
    return transform.transpose(a["self"], perm)


@reg("aten.expand.default", "aten.expand_as.default", "aten.broadcast_to.default")
def _expand(c, node, a):
    want = out_shape(node)
    if in_shape(node) == want:
        return a["self"]
    return transform.broadcast_to(a["self"], want)


@reg("aten.repeat.default")
def _repeat(c, node, a):
    s = in_shape(node)
    reps = [int(r) for r in a["repeats"]]
    x = a["self"]
    if len(reps) > len(s):
        x = reshape_to(x, [1] * (len(reps) - len(s)) + s)
    return transform.tile(x, reps)


@reg("aten.cat.default", "aten.concat.default", "aten.concatenate.default")
def _cat(c, node, a):
    dt = out_dtype(node)
    metas = [n.meta["val"] for n in node.args[0]]
    xs = [cast_to(x, np_dtype(m.dtype), dt) for x, m in zip(a["tensors"], metas)
          if tuple(m.shape) != (0,)]  # torch skips legacy 1-D empty tensors
    return transform.concatenate(xs, norm_axis(int(a["dim"]), len(out_shape(node))))


@reg("aten.stack.default")
def _stack(c, node, a):
    want = out_shape(node)
    ax = norm_axis(int(a["dim"]), len(want))
    dt = out_dtype(node)
    metas = [n.meta["val"] for n in node.args[0]]
    xs = []
    for x, m in zip(a["tensors"], metas):
        shp = [int(d) for d in m.shape]
        shp.insert(ax, 1)
        xs.append(reshape_to(cast_to(x, np_dtype(m.dtype), dt), shp))
    return transform.concatenate(xs, ax)



@reg("aten.split.Tensor", "aten.split_with_sizes.default", "aten.chunk.default",
     "aten.unbind.int", "aten.split.sizes")
def _split(c, node, a):
    s = in_shape(node)
    ax = norm_axis(int(a["dim"]), len(s))
    if str(node.target) == "aten.unbind.int":
        outs = split_sizes(a["self"], [1] * s[ax], ax)
        return [reshape_to(o, s[:ax] + s[ax + 1:]) for o in outs]
    return split_sizes(a["self"], [int(v.shape[ax]) for v in val(node)], ax)


@reg("aten.slice.Tensor")
def _slice(c, node, a):
    s = in_shape(node)
    ax = norm_axis(int(a["dim"]), len(s))
    start, end, step = a["start"], a["end"], int(a["step"])
    start = 0 if start is None else int(start)
    end = s[ax] if end is None else int(end)
    start = min(max(start + s[ax] if start < 0 else start, 0), s[ax])
    end = min(max(end + s[ax] if end < 0 else end, 0), s[ax])
    if start == 0 and end == s[ax] and step == 1:
        return a["self"]
    end = max(end, start)  # an empty slice: a tensor with a 0-length axis
    return transform.strided_slice(a["self"], [start], [end], [step], axes=[ax])


@reg("aten.select.int")
def _select(c, node, a):
    s = in_shape(node)
    ax = norm_axis(int(a["dim"]), len(s))
    i = int(a["index"])
    i = i + s[ax] if i < 0 else i
    y = transform.strided_slice(a["self"], [i], [i + 1], [1], axes=[ax])
    return reshape_to(y, out_shape(node))


@reg("aten.index_select.default")
def _index_select(c, node, a):
    ax = norm_axis(int(a["dim"]), max(len(in_shape(node)), 1))
    idx = a["index"]
    if len(in_shape(node, "index")) == 0:
        idx = reshape_to(idx, (1,))
    return transform.take(a["self"], idx, axis=ax, mode="clip")


@reg("aten.gather.default")
def _gather(c, node, a):
    return transform.gather(a["self"], norm_axis(int(a["dim"]), len(in_shape(node))), a["index"])


@reg("aten.embedding.default")
def _embedding(c, node, a):
    return transform.take(a["weight"], a["indices"], axis=0, mode="clip")


@reg("aten.flip.default")
def _flip(c, node, a):
    x = a["self"]
    for d in a["dims"]:
        x = transform.reverse(x, norm_axis(int(d), len(in_shape(node))))
    return x


def _pad_widths(node, pads: list[int], rank: int) -> tuple[list[list[int]], list[list[int]]]:
    """torch's pad list (last axis first, before/after pairs) as per-axis widths, and crops for
    the negative entries."""
    if len(pads) % 2 or len(pads) // 2 > rank:
        raise fail(node, f"pad {pads} does not fit a tensor of rank {rank}")
    width = [[0, 0] for _ in range(rank)]
    for j in range(len(pads) // 2):
        width[rank - 1 - j] = [int(pads[2 * j]), int(pads[2 * j + 1])]
    return [[max(b, 0), max(e, 0)] for b, e in width], [[min(b, 0), min(e, 0)] for b, e in width]


def _pad(c, node, x, pads, mode: str, value: float) -> RelayExpr:
    s = in_shape(node)
    pos, neg = _pad_widths(node, list(pads), len(s))
    if any(b or e for b, e in neg):
        x = transform.strided_slice(x, [-b for b, _ in neg], [d + e for d, (_, e) in zip(s, neg)])
    if any(b or e for b, e in pos):
        x = nn.pad(x, pos, pad_value=float(value), pad_mode=mode)
    return x


@reg("aten.constant_pad_nd.default")
def _constant_pad(c, node, a):
    return _pad(c, node, a["self"], a["pad"], "constant", a["value"])


@reg("aten.pad.default")
def _pad_default(c, node, a):
    mode = {"constant": "constant", "reflect": "reflect", "replicate": "edge",
            "circular": "wrap"}.get(a["mode"])
    if mode is None:
        raise fail(node, f"mode={a['mode']!r} is not supported (constant, reflect, replicate, circular)")
    return _pad(c, node, a["self"], a["pad"], mode, a["value"] or 0.0)


@reg("aten.reflection_pad1d.default", "aten.reflection_pad2d.default",
     "aten.replication_pad1d.default", "aten.replication_pad2d.default")
def _pad_mode(c, node, a):
    mode = "reflect" if "reflection" in str(node.target) else "edge"
    return _pad(c, node, a["self"], a["padding"], mode, 0.0)
