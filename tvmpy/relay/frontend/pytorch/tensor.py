"""PyTorch frontend converters: data movement (views, permutes, concat/split, slicing,
index_select, gather, padding; advanced indexing is in ``index``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...expr import RelayExpr
from ...op import nn, transform
from .common import (
    Args,
    ConvertContext,
    Output,
    cast_to,
    converter,
    dim,
    dims_equal,
    fail,
    in_shape,
    norm_axis,
    np_dtype,
    out_dtype,
    out_shape,
    reshape_to,
    scalar,
    split_sizes,
    val,
)

if TYPE_CHECKING:
    from torch.fx import Node


# ------------------------------------------------------------------------------------------------
# reductions
@converter("aten.view.default", "aten.reshape.default", "aten._unsafe_view.default",
           "aten.flatten.using_ints", "aten.unflatten.int", "aten.squeeze.default",
           "aten.squeeze.dim", "aten.squeeze.dims", "aten.unsqueeze.default",
           "aten.view_as.default", "aten.reshape_as.default")
def _reshape(ctx: ConvertContext, node: Node, args: Args) -> Output:
    want = out_shape(node)
    if in_shape(node) == want:
        return args["self"]
    return reshape_to(args["self"], want)


@converter("aten.permute.default")
def _permute(ctx: ConvertContext, node: Node, args: Args) -> Output:
    rank = len(in_shape(node))
    return transform.transpose(args["self"], [norm_axis(int(d), rank) for d in args["dims"]])


@converter("aten.transpose.int", "aten.t.default", "aten.swapaxes.default", "aten.numpy_T.default")
def _transpose(ctx: ConvertContext, node: Node, args: Args) -> Output:
    rank = len(in_shape(node))
    if rank < 2:
        return args["self"]
    if "dim0" in args or "axis0" in args:
        d0 = norm_axis(int(args.get("dim0", args.get("axis0"))), rank)
        d1 = norm_axis(int(args.get("dim1", args.get("axis1"))), rank)
        perm = list(range(rank))
        perm[d0], perm[d1] = perm[d1], perm[d0]
    else:
        perm = list(reversed(range(rank)))
    return transform.transpose(args["self"], perm)


@converter("aten.expand.default", "aten.expand_as.default", "aten.broadcast_to.default")
def _expand(ctx: ConvertContext, node: Node, args: Args) -> Output:
    want = out_shape(node)
    if in_shape(node) == want:
        return args["self"]
    return transform.broadcast_to(args["self"], want)


@converter("aten.repeat.default")
def _repeat(ctx: ConvertContext, node: Node, args: Args) -> Output:
    s = in_shape(node)
    reps = [int(r) for r in args["repeats"]]
    x = args["self"]
    if len(reps) > len(s):
        x = reshape_to(x, [1] * (len(reps) - len(s)) + s)
    return transform.tile(x, reps)


@converter("aten.cat.default", "aten.concat.default", "aten.concatenate.default")
def _cat(ctx: ConvertContext, node: Node, args: Args) -> Output:
    dt = out_dtype(node)
    metas = [n.meta["val"] for n in node.args[0]]
    xs = [cast_to(x, np_dtype(m.dtype), dt) for x, m in zip(args["tensors"], metas)
          if tuple(m.shape) != (0,)]  # torch skips legacy 1-D empty tensors
    return transform.concatenate(xs, norm_axis(int(args["dim"]), len(out_shape(node))))


@converter("aten.stack.default")
def _stack(ctx: ConvertContext, node: Node, args: Args) -> Output:
    want = out_shape(node)
    ax = norm_axis(int(args["dim"]), len(want))
    dt = out_dtype(node)
    metas = [n.meta["val"] for n in node.args[0]]
    xs = []
    for x, m in zip(args["tensors"], metas):
        shp = [dim(d) for d in m.shape]
        shp.insert(ax, 1)
        xs.append(reshape_to(cast_to(x, np_dtype(m.dtype), dt), shp))
    return transform.concatenate(xs, ax)



@converter("aten.split.Tensor", "aten.split_with_sizes.default", "aten.chunk.default",
           "aten.unbind.int", "aten.split.sizes")
def _split(ctx: ConvertContext, node: Node, args: Args) -> Output:
    s = in_shape(node)
    ax = norm_axis(int(args["dim"]), len(s))
    if str(node.target) == "aten.unbind.int":
        outs = split_sizes(args["self"], [1] * s[ax], ax)
        return [reshape_to(o, s[:ax] + s[ax + 1:]) for o in outs]
    return split_sizes(args["self"], [dim(v.shape[ax]) for v in val(node)], ax)


@converter("aten.slice.Tensor")
def _slice(ctx: ConvertContext, node: Node, args: Args) -> Output:
    s = in_shape(node)
    ax = norm_axis(int(args["dim"]), len(s))
    start, end, step = args["start"], args["end"], int(args["step"])
    if not all(isinstance(v, int) for v in (s[ax], start, end) if v is not None):
        return _symbolic_slice(node, args["self"], s, ax, 0 if start is None else start, step)
    start = 0 if start is None else int(start)
    end = s[ax] if end is None else int(end)
    start = min(max(start + s[ax] if start < 0 else start, 0), s[ax])
    end = min(max(end + s[ax] if end < 0 else end, 0), s[ax])
    if start == 0 and end == s[ax] and step == 1:
        return args["self"]
    end = max(end, start)  # an empty slice: a tensor with a 0-length axis
    return transform.strided_slice(args["self"], [start], [end], [step], axes=[ax])


def _symbolic_slice(node: Node, x: RelayExpr, s: list, ax: int, start: Any, step: int
                    ) -> RelayExpr:
    """A slice over a symbolic dim or with a symbolic bound: a gather of the ``n`` indices
    ``start + step * arange(n)`` (``n`` the length torch recorded; a negative ``start`` counts
    from the end: ``mode="wrap"``)."""
    n = out_shape(node)[ax]
    if not isinstance(start, int):
        raise fail(node, f"a symbolic slice start {start} is not supported")
    if start == 0 and step == 1 and dims_equal(n, s[ax]):
        return x
    if step < 0:
        raise fail(node, f"step {step} over a symbolic dim is not supported")
    idx = transform.arange(0, n, 1, dtype="int64")
    if step != 1:
        idx = idx * scalar(step, "int64")
    if start != 0:
        idx = idx + scalar(start, "int64")
    return transform.take(x, idx, axis=ax, mode="wrap" if start < 0 else "clip")


@converter("aten.select.int")
def _select(ctx: ConvertContext, node: Node, args: Args) -> Output:
    s = in_shape(node)
    ax = norm_axis(int(args["dim"]), len(s))
    i = int(args["index"])
    i = i + s[ax] if i < 0 else i
    y = transform.strided_slice(args["self"], [i], [i + 1], [1], axes=[ax])
    return reshape_to(y, out_shape(node))


@converter("aten.index_select.default")
def _index_select(ctx: ConvertContext, node: Node, args: Args) -> Output:
    ax = norm_axis(int(args["dim"]), max(len(in_shape(node)), 1))
    idx = args["index"]
    if len(in_shape(node, "index")) == 0:
        idx = reshape_to(idx, (1,))
    return transform.take(args["self"], idx, axis=ax, mode="clip")


@converter("aten.gather.default")
def _gather(ctx: ConvertContext, node: Node, args: Args) -> Output:
    return transform.gather(
        args["self"], norm_axis(int(args["dim"]), len(in_shape(node))), args["index"]
    )


@converter("aten.embedding.default")
def _embedding(ctx: ConvertContext, node: Node, args: Args) -> Output:
    return transform.take(args["weight"], args["indices"], axis=0, mode="clip")


@converter("aten.flip.default")
def _flip(ctx: ConvertContext, node: Node, args: Args) -> Output:
    x = args["self"]
    for d in args["dims"]:
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


def _pad(ctx: ConvertContext, node: Node, x, pads, mode: str, value: float) -> RelayExpr:
    s = in_shape(node)
    pos, neg = _pad_widths(node, list(pads), len(s))
    if any(b or e for b, e in neg):
        x = transform.strided_slice(x, [-b for b, _ in neg], [d + e for d, (_, e) in zip(s, neg)])
    if any(b or e for b, e in pos):
        x = nn.pad(x, pos, pad_value=float(value), pad_mode=mode)
    return x


@converter("aten.constant_pad_nd.default")
def _constant_pad(ctx: ConvertContext, node: Node, args: Args) -> Output:
    return _pad(ctx, node, args["self"], args["pad"], "constant", args["value"])


@converter("aten.pad.default")
def _pad_default(ctx: ConvertContext, node: Node, args: Args) -> Output:
    mode = {"constant": "constant", "reflect": "reflect", "replicate": "edge",
            "circular": "wrap"}.get(args["mode"])
    if mode is None:
        raise fail(
            node, f"mode={args['mode']!r} is not supported (constant, reflect, replicate, circular)"
        )
    return _pad(ctx, node, args["self"], args["pad"], mode, args["value"] or 0.0)


@converter("aten.reflection_pad1d.default", "aten.reflection_pad2d.default",
           "aten.replication_pad1d.default", "aten.replication_pad2d.default")
def _pad_mode(ctx: ConvertContext, node: Node, args: Args) -> Output:
    mode = "reflect" if "reflection" in str(node.target) else "edge"
    return _pad(ctx, node, args["self"], args["padding"], mode, 0.0)


@converter("aten.arange.default", "aten.arange.start", "aten.arange.start_step")
def _arange(ctx: ConvertContext, node: Node, args: Args) -> Output:
    """An ``arange`` whose bounds are sizes (static ones are evaluated by torch at import):
    ``start + step * arange(n)`` with ``n`` the length torch recorded."""
    start, step = args.get("start", 0), args.get("step", 1)
    if not all(isinstance(v, (int, float)) for v in (start, step)):
        raise fail(node, f"start {start} and step {step} must be numbers (a symbolic end only)")
    dt = out_dtype(node)
    n = out_shape(node)[0]
    y = transform.arange(0, n, 1, dtype=dt)
    if step != 1:
        y = y * scalar(step, dt)
    if start != 0:
        y = y + scalar(start, dt)
    return y
