"""PyTorch frontend converters: sorting (topk, sort, argsort), scatters (scatter, scatter_add,
scatter_reduce) and advanced indexing (index, index_put, index_copy / index_add / index_fill /
index_reduce).

relay here has no sort, topk or scatter operator (the ONNX importer builds TopK and
ScatterElements from comparisons and reductions too, in ``onnx/indexing.py``). With static shapes
they are dataflow, and exact:

- sorting: each element's rank along the axis (how many elements come before it: larger (or
  smaller), or equal with a lower index; NaN after every number, as torch orders it), then the
  index of the element of rank r is summed out of a one-hot comparison (int64, exact) and the
  values are gathered at those indices (bit for bit, NaN and -0.0 included). Equal elements keep
  their index order: exactly torch's ``stable=True``; where torch leaves the order of ties
  unspecified (``topk``, ``sort`` without ``stable``) this is one valid order.
- scatters: a one-hot mask says which update goes to which position. A plain scatter takes, per
  position, the last update that hits it (gathered: bit for bit; torch leaves duplicates
  undefined); a reduction reduces the masked updates (sum, prod, amax, amin; mean as sum / count,
  with torch's floor division on integers) and combines them with the data, or replaces it
  (``include_self=False``). Positions no update hits keep the data.
- advanced indexing: the indexed axes are flattened into one; the index tensors (broadcast
  together, negative entries wrapped) become one flat index into it, so indexing is a ``take``
  and a put is a row scatter as above. Index tensors known at import time are combined in numpy.

The masks cost O(updates x positions) per scatter and O(L^2) per sorted axis of length L: fine
for the static shapes of models, not for sorting 10^5 elements.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from ...expr import RelayExpr, const
from ...op import reduce as _red
from ...op import tensor, transform
from ..common import move_axis_back, move_axis_last
from .common import (
    Args,
    ConvertContext,
    Output,
    broadcast_dims,
    cast_to,
    converter,
    dim,
    dims_equal,
    fail,
    in_dtype,
    in_shape,
    norm_axis,
    np_dtype,
    out_dtype,
    out_shape,
    reshape_to,
    scalar,
)

if TYPE_CHECKING:
    from torch.fx import Node

__all__: list[str] = []  # converters register themselves in common.CONVERTERS


# ------------------------------------------------------------------------------------------------
# helpers
def _arg_node(node: Any, name: str) -> Any:
    """The raw (unresolved) argument ``name`` of an fx node: an fx node, a list, a constant."""
    for k, arg in enumerate(node.target._schema.arguments):
        if arg.name == name:
            return node.args[k] if k < len(node.args) else node.kwargs.get(name)
    raise KeyError(name)


def _meta_shape(n: Any) -> list[int]:
    return [dim(d) for d in n.meta["val"].shape]


def _meta_dtype(n: Any) -> str:
    return np_dtype(n.meta["val"].dtype)



def _limits(dt: str) -> tuple[Any, Any]:
    d = np.dtype(dt)
    if d.kind == "f":
        return -np.inf, np.inf
    info = np.iinfo(d)
    return info.min, info.max


def _empty(shape: list[int], dt: str) -> RelayExpr:
    return const(np.zeros(shape, dtype=dt))


# ------------------------------------------------------------------------------------------------
# sorting
def _sort_along(x: RelayExpr, shape: list[int], dt: str, axis: int, k: int,
                descending: bool) -> tuple[RelayExpr, RelayExpr]:
    """The first ``k`` elements of ``x`` along ``axis`` in sorted order, and their int64
    indices; equal elements in index order, NaN after (descending: before) every number."""
    r = len(shape)
    n = shape[axis]
    out = shape[:axis] + [k] + shape[axis + 1:]
    if k == 0 or math.prod(shape) == 0:
        return _empty(out, dt), _empty(out, "int64")
    key = transform.cast(x, "int32") if dt == "bool" else x
    kt = move_axis_last(key, axis, r)                    # (..., n)
    ki = transform.expand_dims(kt, r)                # (..., n, 1): element i
    kj = transform.expand_dims(kt, r - 1)            # (..., 1, n): element j
    first = (tensor.greater if descending else tensor.less)(kj, ki)
    same = tensor.equal(kj, ki)
    if dt.startswith("float"):
        ni, nj = tensor.isnan(ki), tensor.isnan(kj)
        if descending:  # NaN first
            first = tensor.logical_or(first, tensor.logical_and(nj, tensor.logical_not(ni)))
        else:           # NaN last
            first = tensor.logical_or(first, tensor.logical_and(ni, tensor.logical_not(nj)))
        same = tensor.logical_or(same, tensor.logical_and(ni, nj))
    lower = const(np.arange(n)[None, :] < np.arange(n)[:, None])   # [i, j]: j < i
    before = tensor.logical_or(first, tensor.logical_and(same, lower))
    rank = _red.sum(transform.cast(before, "int64"), axis=[r])     # (..., n): rank of element i
    sel = tensor.equal(transform.expand_dims(rank, r - 1),          # (..., k, n)
                       const(np.arange(k, dtype=np.int64)[:, None]))
    idx = _red.sum(tensor.where(sel, const(np.arange(n, dtype=np.int64)), scalar(0, "int64")),
                   axis=[r])                                        # (..., k)
    vals = transform.gather(move_axis_last(x, axis, r), r - 1, idx)
    return move_axis_back(vals, axis, r), move_axis_back(idx, axis, r)


def _sorted_node(node: Any, x: RelayExpr, dim: Any, k: int | None,
                 descending: bool) -> list[RelayExpr]:
    s = in_shape(node)
    dt = in_dtype(node)
    if not s:  # a 0-d tensor sorts as one element
        v, i = _sort_along(reshape_to(x, [1]), [1], dt, 0, 1 if k is None else k, descending)
        want = out_shape(node)
        return [reshape_to(v, want), reshape_to(i, want)]
    axis = norm_axis(int(dim), len(s))
    k = s[axis] if k is None else k
    if not 0 <= k <= s[axis]:
        raise fail(node, f"k={k} is out of range for dim {dim} of size {s[axis]}")
    return list(_sort_along(x, s, dt, axis, k, descending))


@converter("aten.topk.default")
def _topk(ctx: ConvertContext, node: Node, args: Args) -> Output:
    """Values and int64 indices of the k largest (smallest) elements, in sorted order (also for
    ``sorted=False``, where torch's order is unspecified)."""
    return _sorted_node(node, args["self"], args["dim"], int(args["k"]), bool(args["largest"]))


@converter("aten.sort.default", "aten.sort.stable")
def _sort(ctx: ConvertContext, node: Node, args: Args) -> Output:
    """Sorted values and int64 indices; always stable (``stable=True``'s order)."""
    return _sorted_node(node, args["self"], args["dim"], None, bool(args["descending"]))


@converter("aten.argsort.default", "aten.argsort.stable")
def _argsort(ctx: ConvertContext, node: Node, args: Args) -> Output:
    return _sorted_node(node, args["self"], args["dim"], None, bool(args["descending"]))[1]


# ------------------------------------------------------------------------------------------------
# scatter core
_REDUCTIONS = ("sum", "prod", "amax", "amin", "mean")


def _scatter_core(node: Any, data: RelayExpr, pos: RelayExpr, upd: RelayExpr, lead: list[int],
                  n: int, p: int, rest: list[int], mode: str, include_self: bool,
                  dt: str) -> RelayExpr:
    """Scatter ``upd`` (lead..., n, rest...) into ``data`` (lead..., p, rest...): update u goes
    to position ``pos[lead..., u]`` (int64 in [0, p)). ``mode``: "none" (replace; the last
    update of a position wins), or a reduction combined with the data (``include_self``) or
    replacing it. Positions no update hits keep the data."""
    g = len(lead)
    ones = [1] * len(rest)
    if dt == "bool":  # bools scatter as 0/1 integers: sum is "or", prod "and", amax/amin alike
        if mode == "mean":
            raise fail(node, "reduce='mean' on a bool tensor is not supported")
        y = _scatter_core(node, transform.cast(data, "int32"), pos, transform.cast(upd, "int32"),
                          lead, n, p, rest, mode, include_self, "int32")
        return transform.cast(y, "bool")
    mask = tensor.equal(transform.expand_dims(pos, g + 1),             # (lead..., n, 1)
                        const(np.arange(p, dtype=np.int64)))           # -> (lead..., n, p)
    if mode == "none":
        who = tensor.where(mask, const(np.arange(n, dtype=np.int64)[:, None]),
                           scalar(-1, "int64"))
        who = _red.max(who, axis=[g])                                  # (lead..., p)
        hit = tensor.greater_equal(who, scalar(0, "int64"))
        who = tensor.maximum(who, scalar(0, "int64"))
        if rest:
            who = transform.broadcast_to(reshape_to(who, lead + [p] + ones), lead + [p] + rest)
            hit = reshape_to(hit, lead + [p] + ones)
        return tensor.where(hit, transform.gather(upd, g, who), data)
    if mode not in _REDUCTIONS:
        raise fail(node, f"reduce={mode!r} is not supported ({', '.join(_REDUCTIONS)})")
    count = _red.sum(transform.cast(mask, "int64"), axis=[g])          # (lead..., p)
    hit = reshape_to(tensor.greater(count, scalar(0, "int64")), lead + [p] + ones)
    mask_e = reshape_to(mask, lead + [n, p] + ones) if rest else mask
    upd_e = transform.expand_dims(upd, g + 1)                          # (lead..., n, 1, rest...)

    def masked(fn, fill):
        return fn(tensor.where(mask_e, upd_e, scalar(fill, dt)), axis=[g])

    lo, hi = _limits(dt)
    if mode == "sum":
        s = masked(_red.sum, 0)
        return tensor.add(data, s) if include_self else tensor.where(hit, s, data)
    if mode == "prod":
        s = masked(_red.prod, 1)
        return tensor.multiply(data, s) if include_self else tensor.where(hit, s, data)
    if mode == "amax":
        s = masked(_red.max, lo)
        return tensor.where(hit, tensor.maximum(data, s) if include_self else s, data)
    if mode == "amin":
        s = masked(_red.min, hi)
        return tensor.where(hit, tensor.minimum(data, s) if include_self else s, data)
    # mean: (data +) sum over (1 +) count, floor-divided on integers as torch does
    s = masked(_red.sum, 0)
    total = tensor.add(data, s) if include_self else s
    if include_self:
        count = tensor.add(count, scalar(1, "int64"))
    count = transform.cast(reshape_to(tensor.maximum(count, scalar(1, "int64")),
                                      lead + [p] + ones), dt)
    div = tensor.divide if dt.startswith("float") else tensor.floor_divide
    return tensor.where(hit, div(total, count), data)


# ------------------------------------------------------------------------------------------------
# scatter along a dim (torch.scatter family)
_SCATTER_REDUCE_ARG = {"add": "sum", "multiply": "prod"}


def _scatter_mode(node: Node, args: Args) -> tuple[str, bool]:
    k = str(node.target)
    if k == "aten.scatter_reduce.two":
        return str(args["reduce"]), bool(args["include_self"])
    if k == "aten.scatter_add.default":
        return "sum", True
    red = args.get("reduce")
    if red is None:
        return "none", True
    if red not in _SCATTER_REDUCE_ARG:
        raise fail(node, f"reduce={red!r} is not supported (add, multiply)")
    return _SCATTER_REDUCE_ARG[red], True


@converter("aten.scatter.src", "aten.scatter.value", "aten.scatter.reduce",
           "aten.scatter.value_reduce", "aten.scatter_add.default", "aten.scatter_reduce.two")
def _scatter(ctx: ConvertContext, node: Node, args: Args) -> Output:
    """``out[..., index[..., u, ...], ...] = src[..., u, ...]`` along ``dim`` (plain: torch
    leaves duplicate indices undefined; reduce: every update counts)."""
    mode, include_self = _scatter_mode(node, args)
    dt = out_dtype(node)
    shape, ishape = in_shape(node), in_shape(node, "index")
    data, index = args["self"], args["index"]
    if "src" in args:
        src = cast_to(args["src"], in_dtype(node, "src"), dt)
        sshape = in_shape(node, "src")
    else:
        src, sshape = transform.broadcast_to(scalar(args["value"], dt), ishape), ishape
    if any(isinstance(d, int) and d == 0 for d in ishape):
        return data
    rank0 = not shape
    if rank0:  # 0-d self, index and src: one element
        data, index, src = (reshape_to(v, [1]) for v in (data, index, src))
        shape, ishape, sshape = [1], [1], [1]
    r = len(shape)
    axis = norm_axis(int(args["dim"]), r)
    if len(ishape) != r or len(sshape) != r or any(
            _gt(u, s) or (k != axis and _gt(u, d))
            for k, (u, s, d) in enumerate(zip(ishape, sshape, shape))):
        raise fail(node, f"index {ishape} / src {sshape} do not fit self {shape} on dim {axis}")
    if not _same(sshape, ishape):  # only src's corner the index covers is used
        src = transform.strided_slice(src, [0] * r, ishape)
    index = cast_to(index, in_dtype(node, "index"), "int64")
    lead = [u for k, u in enumerate(ishape) if k != axis]
    dlead = [d for k, d in enumerate(shape) if k != axis]
    data_last = move_axis_last(data, axis, r)  # (dlead..., shape[axis])
    part = data_last
    if not _same(lead, dlead):  # the corner of data the index reaches
        part = transform.strided_slice(data_last, [0] * (r - 1), lead, axes=list(range(r - 1)))
    out = _scatter_core(
        node,
        part,
        move_axis_last(index, axis, r),
        move_axis_last(src, axis, r),
        lead,
        ishape[axis],
        shape[axis],
        [],
        mode,
        include_self,
        dt,
    )
    if not _same(lead, dlead):  # put the updated corner back
        out = _paste_corner(out, data_last, lead + [shape[axis]], dlead + [shape[axis]])
    out = move_axis_back(out, axis, r)
    return reshape_to(out, []) if rank0 else out


def _gt(a: Any, b: Any) -> bool:
    """``a > b`` for static sizes; a symbolic one is taken to fit (torch checked it)."""
    return isinstance(a, int) and isinstance(b, int) and a > b


def _same(a: list, b: list) -> bool:
    """Whether two shapes (ints, symbolic sizes) are provably the same."""
    return len(a) == len(b) and all(dims_equal(x, y) for x, y in zip(a, b))


def _paste_corner(corner: RelayExpr, full: RelayExpr, cshape: list[int],
                  fshape: list[int]) -> RelayExpr:
    """``full`` with its leading corner replaced by ``corner``: the corner grown one axis at a
    time by the rest of ``full`` along it (earlier axes already at full extent)."""
    r = len(fshape)
    for ax in range(r):
        if cshape[ax] == fshape[ax]:
            continue
        begin = [0] * r
        begin[ax] = cshape[ax]
        tail = transform.strided_slice(full, begin, fshape[:ax] + [fshape[ax]] + cshape[ax + 1:])
        corner = transform.concatenate([corner, tail], ax)
        cshape = cshape[:ax] + [fshape[ax]] + cshape[ax + 1:]
    return corner


# ------------------------------------------------------------------------------------------------
# advanced indexing
class _Plan:
    """Integer index tensors over the axes ``axes`` (ascending) of a tensor of shape ``shape``:
    their broadcast shape ``bshape`` and the flat int64 index ``flat`` (of shape ``bshape``) into
    those axes flattened to one of ``size`` entries. ``adjacent``: the axes are consecutive, and
    torch puts the broadcast dims in their place (else first)."""

    def __init__(self, shape: list[int], axes: list[int], bshape: list[int], flat: RelayExpr):
        self.shape, self.axes, self.bshape, self.flat = shape, axes, bshape, flat
        self.size = math.prod(shape[ax] for ax in axes)
        self.adjacent = axes == list(range(axes[0], axes[-1] + 1))
        self.rest = [d for d in range(len(shape)) if d not in axes]

    def indexed_shape(self) -> list[int]:
        """The shape of ``x[indices]``."""
        s = self.shape
        if self.adjacent:
            return s[:self.axes[0]] + self.bshape + s[self.axes[-1] + 1:]
        return self.bshape + [s[d] for d in self.rest]

    def rows(self, x: RelayExpr) -> RelayExpr:
        """``x`` with the indexed axes first, flattened: (size, rest...)."""
        perm = self.axes + self.rest
        if perm != list(range(len(perm))):
            x = transform.transpose(x, perm)
        return reshape_to(x, [self.size] + [self.shape[d] for d in self.rest])

    def unrows(self, y: RelayExpr) -> RelayExpr:
        """The inverse of ``rows``."""
        perm = self.axes + self.rest
        y = reshape_to(y, [self.shape[d] for d in perm])
        if perm != list(range(len(perm))):
            y = transform.transpose(y, [int(v) for v in np.argsort(perm)])
        return y


class _Mask:
    """A boolean mask index, known only at run time, over axes ``first .. first + rank - 1``."""

    def __init__(self, expr: RelayExpr, first: int, shape: list[int]):
        self.expr, self.first, self.shape = expr, first, shape


def _wrap_np(v: np.ndarray, size: int, node: Any) -> np.ndarray:
    v = v.astype(np.int64)
    if v.size and (v.min() < -size or v.max() >= size):
        raise fail(node, f"index out of range for a dimension of size {size}")
    return np.where(v < 0, v + size, v)


def _wrap(e: RelayExpr, size: int) -> RelayExpr:
    return tensor.where(tensor.less(e, scalar(0, "int64")), tensor.add(e, scalar(size, "int64")), e)


def _index_plan(ctx: Any, node: Any, shape: list[int], nodes: list, exprs: list) -> _Plan | _Mask:
    """The plan of ``x[indices]`` (``indices``: fx nodes / relay exprs, None for a full slice).
    A boolean mask known at import time becomes its nonzero coordinates, as in torch; one known
    only at run time is returned as a ``_Mask`` when it is the only index."""
    entries: list[tuple[int, Any, list[int]]] = []  # (axis, np array or relay expr, shape)
    mask = None
    ax = 0
    for n, e in zip(nodes, exprs):
        if n is None:
            ax += 1
            continue
        dt, ishape = _meta_dtype(n), _meta_shape(n)
        known = ctx.values.get(n)
        if dt in ("bool", "uint8"):
            q = len(ishape)
            if shape[ax:ax + q] != ishape:
                raise fail(
                    node, f"mask {ishape} does not match the indexed dims {shape[ax : ax + q]}"
                )
            if known is None:
                mask = _Mask(cast_to(e, dt, "bool"), ax, ishape)
            else:
                for k, v in enumerate(np.nonzero(known.detach().cpu().numpy())):
                    entries.append((ax + k, v, [int(v.size)]))
            ax += q
            continue
        v = None if known is None else known.detach().cpu().numpy()
        entries.append((ax, e if v is None else v, ishape))
        ax += 1
    if ax > len(shape):
        raise fail(node, f"{ax} indexed dims for a tensor of rank {len(shape)}")
    if mask is not None:
        if entries:
            raise fail(node, "a boolean mask known only at run time together with other index "
                             "tensors is not supported")
        return mask
    axes = [e[0] for e in entries]
    bshape = broadcast_dims(*[e[2] for e in entries])
    sizes = [shape[x] for x in axes]
    strides = [math.prod(sizes[k + 1:]) for k in range(len(sizes))]
    if all(isinstance(e[1], np.ndarray) for e in entries):
        flat = sum(_wrap_np(e[1], sz, node) * st for e, sz, st in zip(entries, sizes, strides))
        return _Plan(shape, axes, bshape, const(np.broadcast_to(flat, bshape).astype(np.int64)))
    flat = None
    for (_, v, _shape), sz, st in zip(entries, sizes, strides):
        if isinstance(v, np.ndarray):
            term = const(_wrap_np(v, sz, node) * st)
        else:
            term = _wrap(transform.cast(v, "int64"), sz)
            if st != 1:
                term = tensor.multiply(term, scalar(st, "int64"))
        flat = term if flat is None else tensor.add(flat, term)
    if any(e[2] != bshape for e in entries):
        flat = transform.broadcast_to(flat, bshape)
    return _Plan(shape, axes, bshape, flat)


@converter("aten.index.Tensor", "aten._unsafe_index.Tensor")
def _index(ctx: ConvertContext, node: Node, args: Args) -> Output:
    """``x[i0, i1, ...]`` with integer index tensors (broadcast together; None entries are full
    slices; negative entries wrap) and boolean masks known at import time."""
    x = args["self"]
    shape, want = in_shape(node), out_shape(node)
    if math.prod(want) == 0:
        return _empty(want, out_dtype(node))
    plan = _index_plan(ctx, node, shape, list(_arg_node(node, "indices")), list(args["indices"]))
    if isinstance(plan, _Mask):
        raise fail(node, "boolean mask indexing (data-dependent shape) is not supported")
    if plan.adjacent:  # the indexed axes flattened in place, taken along that one axis
        k0, k1 = plan.axes[0], plan.axes[-1]
        if k1 > k0:
            x = reshape_to(x, shape[:k0] + [plan.size] + shape[k1 + 1:])
        y = transform.take(x, plan.flat, axis=k0, mode="clip")
    else:
        y = transform.take(plan.rows(x), plan.flat, axis=0, mode="clip")
    if plan.indexed_shape() != want:
        raise fail(node, f"indexing gives {plan.indexed_shape()}, torch {want}")
    return y


def _put(ctx: Any, node: Any, x: RelayExpr, plan: _Plan | _Mask, values: RelayExpr,
         vshape: list[int], mode: str, include_self: bool = True) -> RelayExpr:
    """``x[indices] = values`` (mode "none"), or reduced into ``x[indices]`` (mode "sum",
    "prod", "amax", "amin", "mean"); ``values`` of dtype ``x``'s, broadcast to the indexed
    shape."""
    shape, dt = in_shape(node), out_dtype(node)
    if isinstance(plan, _Mask):
        return _masked_put(node, x, shape, plan, values, vshape, mode)
    nb = math.prod(plan.bshape)
    if nb == 0 or math.prod(shape) == 0:
        return x
    ishape = plan.indexed_shape()
    try:
        np.broadcast_shapes(tuple(vshape), tuple(ishape))
    except ValueError:
        raise fail(
            node, f"values {vshape} do not broadcast to the indexed shape {ishape}"
        ) from None
    if vshape != ishape:
        values = transform.broadcast_to(values, ishape)
    k0, nbd = plan.axes[0], len(plan.bshape)
    if plan.adjacent and k0 > 0:  # broadcast dims first, as in plan.rows
        values = transform.transpose(values, list(range(k0, k0 + nbd)) + list(range(k0))
                                     + list(range(k0 + nbd, len(ishape))))
    rest = [shape[d] for d in plan.rest]
    upd = reshape_to(values, [nb] + rest)
    pos = reshape_to(plan.flat, [nb])
    out = _scatter_core(node, plan.rows(x), pos, upd, [], nb, plan.size, rest, mode,
                        include_self, dt)
    return plan.unrows(out)


def _masked_put(node: Any, x: RelayExpr, shape: list[int], m: _Mask, values: RelayExpr,
                vshape: list[int], mode: str) -> RelayExpr:
    """``x[mask] = values`` (or ``+=``) for a mask known only at run time: the values must be the
    same for every masked element (else which value goes where depends on the mask)."""
    if mode not in ("none", "sum"):
        raise fail(node, f"reduce={mode!r} with a boolean mask index is not supported")
    r, p, q = len(shape), m.first, len(m.shape)
    after = r - p - q
    if len(vshape) > after:
        j = len(vshape) - after - 1  # the values' axis along the masked elements
        if vshape[j] != 1:
            raise fail(node, f"values {vshape} give each element of a boolean mask (known only "
                             "at run time) its own value: not supported")
        vpre, vpost = vshape[:j], vshape[j + 1:]
    else:
        vpre, vpost = [], vshape
    target = [1] * (p - len(vpre)) + vpre + [1] * q + [1] * (after - len(vpost)) + vpost
    try:
        fits = len(vpre) <= p and list(np.broadcast_shapes(tuple(target), tuple(shape))) == shape
    except ValueError:
        fits = False
    if not fits:
        raise fail(node, f"values {vshape} do not broadcast to the masked shape")
    values = reshape_to(values, target)
    mask = reshape_to(m.expr, [1] * p + m.shape + [1] * after)
    return tensor.where(mask, values if mode == "none" else tensor.add(x, values), x)


@converter("aten.index_put.default", "aten._unsafe_index_put.default")
def _index_put(ctx: ConvertContext, node: Node, args: Args) -> Output:
    """``x[indices] = values`` (``accumulate``: ``+=``, duplicates summed). Without accumulate
    torch leaves duplicate indices undefined; here the last one wins."""
    dt = out_dtype(node)
    values = cast_to(args["values"], in_dtype(node, "values"), dt)
    plan = _index_plan(ctx, node, in_shape(node), list(_arg_node(node, "indices")),
                       list(args["indices"]))
    return _put(ctx, node, args["self"], plan, values, in_shape(node, "values"),
                "sum" if args["accumulate"] else "none")


@converter("aten.index_copy.default", "aten.index_add.default", "aten.index_reduce.default",
           "aten.index_fill.int_Scalar", "aten.index_fill.int_Tensor")
def _index_dim(ctx: ConvertContext, node: Node, args: Args) -> Output:
    """index_copy / index_add (``alpha``) / index_reduce / index_fill along ``dim``: a put with
    the 1-D (or 0-d) index at ``dim``."""
    k = str(node.target)
    shape, dt = in_shape(node), out_dtype(node)
    if not shape:
        raise fail(node, "a 0-d self is not supported")
    dim = norm_axis(int(args["dim"]), len(shape))
    plan = _index_plan(ctx, node, shape, [None] * dim + [_arg_node(node, "index")],
                       [None] * dim + [args["index"]])
    if not isinstance(plan, _Plan):  # torch takes only integer indices here
        raise fail(node, "a boolean index is not supported")
    vshape = plan.indexed_shape()
    include_self = True
    if k.startswith("aten.index_fill"):
        values = cast_to(args["value"], in_dtype(node, "value"), dt) if k.endswith("Tensor") \
            else scalar(args["value"], dt)
        return _put(ctx, node, args["self"], plan, values, [], "none")
    values = reshape_to(cast_to(args["source"], in_dtype(node, "source"), dt), vshape)
    if k == "aten.index_copy.default":
        mode = "none"
    elif k == "aten.index_add.default":
        mode = "sum"
        if args["alpha"] != 1:
            values = tensor.multiply(values, scalar(args["alpha"], dt))
    else:
        mode, include_self = str(args["reduce"]), bool(args["include_self"])
    return _put(ctx, node, args["self"], plan, values, vshape, mode, include_self)
