"""ONNX index/selection operators: gathers, scatters, TopK, Compress, OneHot, ReverseSequence.

Gather, GatherElements and GatherND map to relay's take/gather/gather_nd. Their indices and
those of the scatters go through ``check_indices`` first: negative ones counted from the end,
one outside ``[-n, n)`` an error naming the node, as onnxruntime raises (at import for constant
indices, else when the model runs). relay here has no scatter or sort operators; with static shapes these ONNX operators
are still dataflow: a comparison against an index range gives a one-hot mask, and a reduction
over the mask computes the result exactly (sums of one selected value and zeros).

- TopK: each element's rank (how many elements come before it: larger, or equal with a lower
  index), then the r-th output is the element of rank r.
- ScatterElements / Scatter / ScatterND: a one-hot mask of where each update goes; the masked
  updates are summed (or multiplied / maxed / mined) into place.
- TensorScatter: the updates written at ``write_indices`` (+ position, modulo the cache for
  ``circular``) along the sequence axis, as ScatterElements.
- Compress: a take of the selected positions when the condition is a constant; else
  relay.compress (its output size is decided when the model runs).
- ReverseSequence: a gather along the time axis with per-batch reversed positions.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...expr import RelayExpr, const
from ...op import nn, tensor, transform
from ...op import reduce as _red
from ..common import move_axis_back, move_axis_last, reshape_to
from . import dynamic
from .context import ImportContext, dtype_of, scalar_like, shape_of, typed_const
from .registry import Attrs, Inputs, Names, Output, converter


def _limits(dt: str) -> tuple[Any, Any]:
    d = np.dtype(dt)
    if d.kind == "f":
        return -np.inf, np.inf
    if d == np.bool_:
        return False, True
    info = np.iinfo(d)
    return info.min, info.max


@converter("TopK")
def _topk(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    if "k" not in attrs and dynamic.runtime_inputs(ctx, names, 1):
        return dynamic.topk(ctx, inputs, attrs)
    x = inputs[0]
    s = shape_of(x)
    r = len(s)
    axis = int(attrs.get("axis", -1)) % r
    k = int(attrs["k"]) if "k" in attrs else int(ctx.value(names[1], "k").reshape(-1)[0])
    L = s[axis]
    if not 0 <= k <= L:
        raise ctx.fail(f"k={k} is out of range for axis {axis} of size {L}")
    xt = move_axis_last(x, axis, r)                      # (..., L)
    xi = transform.expand_dims(xt, r)                # (..., L, 1): element i
    xj = transform.expand_dims(xt, r - 1)            # (..., 1, L): element j
    bigger = tensor.greater if attrs.get("largest", 1) else tensor.less
    lower = const(np.arange(L)[None, :] < np.arange(L)[:, None])  # j < i
    before = tensor.logical_or(bigger(xj, xi), tensor.logical_and(tensor.equal(xj, xi), lower))
    rank = _red.sum(transform.cast(before, "int64"), axis=[r])      # (..., L)
    sel = tensor.equal(transform.expand_dims(rank, r - 1),          # (..., 1, L)
                       const(np.arange(k, dtype=np.int64)[:, None]))  # (k, 1) -> (..., k, L)
    vals = _red.sum(tensor.where(sel, xj, typed_const(0, dtype_of(x))), axis=[r])
    idx = _red.sum(tensor.where(sel, const(np.arange(L, dtype=np.int64)), typed_const(0, "int64")),
                   axis=[r])
    return [move_axis_back(vals, axis, r), move_axis_back(idx, axis, r)]


def _combine(ctx: ImportContext, data: RelayExpr, mask: RelayExpr, upd: RelayExpr, red_axis: int,
             reduction: str) -> RelayExpr:
    """Scatter the masked updates into data; the mask and updates broadcast to one shape whose
    axis ``red_axis`` enumerates the updates (reduced away)."""
    dt = dtype_of(data)
    hit = _red.sum(transform.cast(mask, "int32"), axis=[red_axis])
    hit = tensor.greater(hit, typed_const(0, "int32"))
    if reduction in ("none", "add"):
        contrib = _red.sum(tensor.where(mask, upd, typed_const(0, dt)), axis=[red_axis])
        if reduction == "add":
            return tensor.add(data, contrib)
        return tensor.where(hit, contrib, data)
    if reduction == "mul":
        contrib = _red.prod(tensor.where(mask, upd, typed_const(1, dt)), axis=[red_axis])
        return tensor.multiply(data, contrib)
    lo, hi = _limits(dt)
    if reduction == "max":
        contrib = _red.max(tensor.where(mask, upd, typed_const(lo, dt)), axis=[red_axis])
        return tensor.where(hit, tensor.maximum(data, contrib), data)
    if reduction == "min":
        contrib = _red.min(tensor.where(mask, upd, typed_const(hi, dt)), axis=[red_axis])
        return tensor.where(hit, tensor.minimum(data, contrib), data)
    raise ctx.fail(f"reduction={reduction!r} is not supported (none, add, mul, max, min)")


@converter("ScatterElements", "Scatter")
def _scatter_elements(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    data, idx, upd = inputs
    D, U = shape_of(data), shape_of(idx)
    r = len(D)
    axis = int(attrs.get("axis", 0)) % r
    if shape_of(upd) != U or len(U) != r or any(u > d for k, (u, d) in enumerate(zip(U, D))
                                              if k != axis):
        raise ctx.fail(f"indices {U} / updates {shape_of(upd)} do not fit data {D} on axis {axis}")
    Da = D[axis]
    idx = _checked_index(ctx, idx, names[1], data, [axis])
    it = transform.expand_dims(move_axis_last(idx, axis, r), r)              # (V..., Ua, 1)
    mask = tensor.equal(it, const(np.arange(Da, dtype=dtype_of(idx))))      # (V..., Ua, Da)
    ut = transform.expand_dims(move_axis_last(upd, axis, r), r)              # (V..., Ua, 1)
    # data with the axis last, cut to the updates' extent on the other axes
    V = [u for k, u in enumerate(U) if k != axis]
    DV = [d for k, d in enumerate(D) if k != axis]
    dt = move_axis_last(data, axis, r)                                       # (DV..., Da)
    if V != DV:
        part = transform.strided_slice(dt, [0] * (r - 1), V, axes=list(range(r - 1)))
    else:
        part = dt
    out = _combine(ctx, part, mask, ut, r - 1, attrs.get("reduction", "none"))
    if V != DV:  # put the updated corner back into the full data
        pads = [[0, d - v] for v, d in zip(V, DV)] + [[0, 0]]
        inside = const(np.pad(np.ones(V + [Da], bool), pads, constant_values=False))
        out = tensor.where(inside, nn.pad(out, pads), dt)
    return move_axis_back(out, axis, r)


@converter("ScatterND")
def _scatter_nd(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    data, idx, upd = inputs
    D, Q = shape_of(data), shape_of(idx)
    k = Q[-1]
    if k > len(D):
        raise ctx.fail(f"indices' last axis {k} exceeds the rank of data {D}")
    R = D[k:]
    P = int(np.prod(D[:k])) if k else 1
    nq = int(np.prod(Q[:-1])) if len(Q) > 1 else 1
    if shape_of(upd) != Q[:-1] + R:
        raise ctx.fail(f"updates {shape_of(upd)} must have shape {Q[:-1] + R}")
    strides = [int(np.prod(D[t + 1:k])) for t in range(k)]
    it = reshape_to(_checked_index(ctx, idx, names[1], data, list(range(k))), [nq, k])
    lin = None
    for t in range(k):
        col = reshape_to(transform.strided_slice(it, [t], [t + 1], axes=[1]), [nq])
        term = tensor.multiply(col, typed_const(strides[t], dtype_of(idx)))
        lin = term if lin is None else tensor.add(lin, term)
    ones = [1] * len(R)
    lin = reshape_to(lin, [nq, 1] + ones)
    mask = tensor.equal(lin, const(np.arange(P, dtype=dtype_of(idx)).reshape([1, P] + ones)))
    u = reshape_to(upd, [nq, 1] + R)
    d2 = reshape_to(data, [P] + R)
    out = _combine(ctx, d2, mask, u, 0, attrs.get("reduction", "none"))
    return reshape_to(out, D)


@converter("Compress")
def _compress(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    x = inputs[0]
    axis = None if "axis" not in attrs else int(attrs["axis"]) % len(shape_of(x))
    size = int(np.prod(shape_of(x))) if axis is None and all(
        isinstance(d, int) for d in shape_of(x)) else shape_of(x)[axis or 0]
    from .dynamic import runtime_inputs

    if runtime_inputs(ctx, names, 1) or not isinstance(size, int):
        # chosen at run time (or over an axis of unknown size): relay.compress (with
        # from_onnx(..., dynamic_inputs=False) a run-time condition raises OnnxConstantInputError)
        from ...op.data_dependent import compress

        return compress(x, inputs[1], axis)
    cond = np.asarray(ctx.value(names[1], "condition")).astype(bool).reshape(-1)
    if axis is None:
        x = reshape_to(x, [-1])
    if len(cond) > size:
        if cond[size:].any():
            raise ctx.fail(f"the condition selects index {size + int(np.argmax(cond[size:]))}, past "
                           f"the end of axis {axis or 0} (size {size})")
        cond = cond[:size]
    keep = np.nonzero(cond)[0].astype(np.int64)
    return transform.take(x, const(keep), axis=axis or 0)


@converter("Gather")
def _gather(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    x, idx = inputs
    ax = attrs.get("axis", 0) % len(shape_of(x))
    idx = _checked_index(ctx, idx, names[1], x, [ax])
    return transform.take(x, idx, axis=ax, mode="clip")  # (clip: never read out of bounds)


def _checked_index(ctx: ImportContext, idx: RelayExpr, name: str, data: RelayExpr,
                   axes: list[int]) -> RelayExpr:
    """``idx`` with negative indices counted from the end of the data axis they index (one axis,
    or one per entry of the last axis: GatherND/ScatterND). An index outside ``[-n, n)`` is an
    error naming the node, as in onnxruntime: at import for constant indices, else when the
    model runs (``relay.op.index_check``)."""
    from ...op.index_check import IndexOutOfRange, check_indices, check_indices_np

    if not dtype_of(idx).startswith("int"):
        idx = transform.cast(idx, "int64")
    if not axes:  # GatherND/ScatterND indices with an empty last axis: whole slices
        return idx
    dims = shape_of(data)
    if name in ctx.values and all(isinstance(dims[a], int) for a in axes):
        v = np.asarray(ctx.values[name]).astype(np.int64)
        try:
            return const(check_indices_np(v, dims, axes, ctx.where()).astype(dtype_of(idx)))
        except IndexOutOfRange:
            n = np.asarray([dims[a] for a in axes]) if len(axes) > 1 else dims[axes[0]]
            bad = np.argwhere((v < -n) | (v >= n))[0]
            a = axes[int(bad[-1])] if len(axes) > 1 else axes[0]
            raise ctx.fail(f"index {int(v[tuple(bad)])} (at {tuple(int(b) for b in bad)} of the "
                           f"constant indices {name!r}) is out of range for axis {a} of size "
                           f"{dims[a]} (valid: {-dims[a]}..{dims[a] - 1})") from None
    return check_indices(idx, data, axes, ctx.where())


def _wrap_index(idx: RelayExpr, dim: int) -> RelayExpr:
    """Negative indices counted from the end of an axis of size ``dim`` (as integers)."""
    if not dtype_of(idx).startswith("int"):
        idx = transform.cast(idx, "int64")
    return tensor.where(
        tensor.less(idx, scalar_like(0, idx)), tensor.add(idx, scalar_like(dim, idx)), idx
    )


@converter("GatherElements")
def _gather_el(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    s = shape_of(inputs[0])
    ax = attrs.get("axis", 0) % len(s)
    return transform.gather(inputs[0], ax, _checked_index(ctx, inputs[1], names[1], inputs[0],
                                                          [ax]))


@converter("GatherND")
def _gather_nd(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    x, idx = inputs
    bd = attrs.get("batch_dims", 0)
    ish = shape_of(idx)
    m = ish[-1]
    if not isinstance(m, int) or bd + m > len(shape_of(x)):
        raise ctx.fail(f"indices of shape {ish} index {m} axes of data {shape_of(x)} after "
                       f"batch_dims={bd}")
    idx = _checked_index(ctx, idx, names[1], x, list(range(bd, bd + m)))
    if bd:  # prepend each position's batch coordinates: a plain gather_nd
        grids = np.meshgrid(*[np.arange(d) for d in ish[:-1]], indexing="ij")[:bd]
        coords = const(np.stack(grids, -1).astype(dtype_of(idx)))
        idx = transform.concatenate([coords, idx], len(ish) - 1)
        bd = 0
    perm = [len(ish) - 1] + list(range(len(ish) - 1))
    return transform.gather_nd(x, transform.transpose(idx, perm), batch_dims=bd)


@converter("OneHot")
def _one_hot(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    if dynamic.runtime_inputs(ctx, names, 1, 2):
        return dynamic.one_hot(ctx, inputs, attrs)
    depth = int(ctx.value(names[1], "depth").reshape(-1)[0])
    vals = ctx.value(names[2], "values")
    idx = _wrap_index(inputs[0], depth)
    r = len(shape_of(idx))
    axis = attrs.get("axis", -1) % (r + 1)
    # an index equal to no position (out of range) gives all off_value, as ONNX
    pos = const(np.arange(depth, dtype=dtype_of(idx)).reshape([depth] + [1] * (r - axis)))
    hot = tensor.equal(transform.expand_dims(idx, axis), pos)
    return tensor.where(hot, const(vals[1]), const(vals[0]))


def _bshape(r: int, axis: int, size: int) -> list[int]:
    s = [1] * r
    s[axis] = size
    return s


@converter("ReverseSequence")
def _reverse_sequence(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    x, lens = inputs
    s = shape_of(x)
    r = len(s)
    bax, tax = int(attrs.get("batch_axis", 1)) % r, int(attrs.get("time_axis", 0)) % r
    T = s[tax]
    L = reshape_to(transform.cast(lens, "int64"), _bshape(r, bax, s[bax]))
    t = const(np.arange(T, dtype=np.int64).reshape(_bshape(r, tax, T)))
    one = const(np.int64(1))
    src = tensor.where(tensor.less(t, L), tensor.subtract(tensor.subtract(L, one), t), t)
    src = transform.broadcast_to(src, s)
    return transform.gather(x, tax, src)


@converter("TensorScatter")
def _tensor_scatter(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    cache, upd = inputs[0], inputs[1]
    write = inputs[2] if len(inputs) > 2 else None
    cs, us = shape_of(cache), shape_of(upd)
    r = len(cs)
    axis = int(attrs.get("axis", -2)) % r
    S, U = cs[axis], us[axis]
    pos = const(np.arange(U, dtype=np.int64).reshape(_bshape(r, axis, U)))
    if write is not None:
        w = reshape_to(transform.cast(write, "int64"), _bshape(r, 0, cs[0]))
        pos = tensor.add(pos, w)
    if attrs.get("mode", "linear") == "circular":
        pos = tensor.floor_mod(pos, const(np.int64(S)))
    idx = transform.broadcast_to(pos, us)
    return _scatter_elements(ctx, [cache, idx, upd], {"axis": axis}, [names[0], "", names[1]])


