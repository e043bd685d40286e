"""ONNX shape and data-movement operators: Flatten, Reshape, Transpose, Concat, Split, Slice,
Squeeze/Unsqueeze, Expand, Tile, Pad, DepthToSpace/SpaceToDepth, Trilu and EyeLike. Shape-like
inputs (Reshape's shape, Slice's starts, ...) known at import time give static operators; others
give ``relay.op.dyn`` ones (``dynamic.py``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...expr import RelayExpr, const
from ...op import nn, tensor, transform
from ..common import broadcast_dims, floordiv_dim, prod, reshape_to
from . import dynamic, shape_values
from .context import ImportContext, check_2d, dtype_of, np_dtype, scalar_like, shape_of
from .dyn_args import runtime_input
from .registry import Attrs, Inputs, Names, Output, converter


@converter("Flatten")
def _flatten(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    s = shape_of(inputs[0])
    ax = attrs.get("axis", 1)
    ax = ax + len(s) if ax < 0 else ax
    return reshape_to(inputs[0], (prod(s[:ax]), prod(s[ax:])))


@converter("Reshape")
def _reshape(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    if dynamic.runtime_inputs(ctx, names, 1):
        sym = shape_values.lookup(ctx, names[1])
        if sym is not None and not attrs.get("allowzero", 0) and shape_values.connected(
                ctx, sym, inputs[0]):
            out = _static_or_none(lambda: _reshape_to_dims(inputs[0], sym))
            if out is not None:  # the target's dims computed from Shape ops, symbolically
                return out
        return dynamic.reshape(ctx, inputs, attrs)
    s = shape_of(inputs[0])
    tgt = [int(v) for v in ctx.value(names[1], "shape")]
    if not attrs.get("allowzero", 0):
        tgt = [s[k] if v == 0 else v for k, v in enumerate(tgt)]
    elif 0 in tgt:  # a literal 0 dimension: the data is empty (relay's 0 means "copy")
        if int(np.prod(s)) != 0 or -1 in tgt:
            raise ctx.fail(f"allowzero shape {tgt} for data of shape {s}")
        return const(np.zeros(tgt, dtype=dtype_of(inputs[0])))
    if tgt.count(-1) == 1:
        known = prod([v for v in tgt if v != -1])
        if isinstance(known, int) and known == 0:
            tgt[tgt.index(-1)] = 0
        else:  # (symbolic when the data has a relay.Any dimension: N * 24 // 24 is N)
            total = prod(s)
            tgt[tgt.index(-1)] = (total // known if isinstance(total, int) and
                                  isinstance(known, int) else floordiv_dim(total, known))
    return reshape_to(inputs[0], tgt)


def _reshape_to_dims(x: RelayExpr, tgt: list) -> RelayExpr:
    """Reshape (ONNX semantics, allowzero=0) to dims that may be symbolic."""
    s = shape_of(x)
    tgt = [s[k] if isinstance(v, int) and v == 0 else v for k, v in enumerate(tgt)]
    if sum(1 for v in tgt if isinstance(v, int) and v == -1) == 1:
        k = next(k for k, v in enumerate(tgt) if isinstance(v, int) and v == -1)
        tgt[k] = floordiv_dim(prod(s), prod(tgt[:k] + tgt[k + 1:]))
    return reshape_to(x, tgt)


def _static_or_none(make: Any) -> RelayExpr | None:
    """``make()`` when its result type-checks, else None (the caller's dyn operator then)."""
    from ...type_infer import infer_type

    try:
        e = make()
        infer_type(e)
        return e
    except (TypeError, ValueError):  # RelayTypeError is a TypeError
        return None


@converter("Transpose")
def _transpose(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    perm = attrs.get("perm")
    return transform.transpose(inputs[0], None if perm is None else list(perm))


@converter("Concat")
def _concat(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    return transform.concatenate([x for x in inputs if x is not None], attrs["axis"])


@converter("Split")
def _split(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    x = inputs[0]
    s = shape_of(x)
    ax = attrs.get("axis", 0) % len(s)
    if ctx.opset < 13 and "split" in attrs:
        sizes = list(attrs["split"])
    elif dynamic.runtime_inputs(ctx, names, 1):
        return dynamic.split(ctx, inputs, ax)
    elif len(names) > 1 and names[1]:
        sizes = [int(v) for v in ctx.value(names[1], "split")]
    else:
        parts = attrs.get("num_outputs", len(ctx.node.output))
        step = -(-s[ax] // parts)
        sizes = [min(step, s[ax] - k * step) for k in range(parts)]
    idx = list(np.cumsum(sizes)[:-1])
    out = transform.split(x, [int(v) for v in idx], axis=ax)
    return [out[k] for k in range(len(sizes))]


@converter("Slice")
def _slice(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    x = inputs[0]
    s = shape_of(x)
    if ctx.opset < 10:
        starts, ends = list(attrs["starts"]), list(attrs["ends"])
        axes = list(attrs.get("axes", range(len(starts))))
        steps = [1] * len(starts)
    elif dynamic.runtime_inputs(ctx, names, 1, 2, 3, 4):
        out = _slice_to_symbolic_end(ctx, x, names)
        return out if out is not None else dynamic.slice_(ctx, inputs)
    else:
        starts = [int(v) for v in ctx.value(names[1], "starts")]
        ends = [int(v) for v in ctx.value(names[2], "ends")]
        axes = ([int(v) for v in ctx.value(names[3], "axes")] if len(names) > 3 and names[3]
                else list(range(len(starts))))
        steps = ([int(v) for v in ctx.value(names[4], "steps")] if len(names) > 4 and names[4]
                 else [1] * len(starts))
    axes = [ax % len(s) for ax in axes]
    if ctx.dynamic_inputs and any(not isinstance(s[ax], int) for ax in axes):
        # a run-time extent: the bounds are clamped at run time
        vals = [const(np.asarray(v, dtype=np.int64)) for v in (starts, ends, axes, steps)]
        return dynamic.slice_(ctx, [x, vals[0], vals[1], vals[2], vals[3]])
    clamp = lambda v, d: max(-d - 1, min(d, v))  # noqa: E731  (keeps Python slice semantics)
    b = [clamp(v, s[ax]) for v, ax in zip(starts, axes)]
    e = [clamp(v, s[ax]) for v, ax in zip(ends, axes)]
    return transform.strided_slice(x, b, e, steps, axes)


def _slice_to_symbolic_end(ctx: ImportContext, x: RelayExpr, names: Names) -> RelayExpr | None:
    """``x[..., 0:D]`` along one static axis, ``D`` a symbolic dim read by a Shape op
    (``position_ids[:, :seq_len]``: a table cut to the sequence length): a take of the
    indices ``0 .. D - 1``, so the result has that same dimension D (dyn.strided_slice's would
    be a fresh Any). For ``D`` past the table's end (which the model cannot run anyway: its
    next broadcast fails) the take clips to the last row."""
    ends = shape_values.lookup(ctx, names[2])
    known = [ctx.values.get(nm) if len(names) > k and names[k] else None
             for k, nm in ((1, names[1]), (3, names[3] if len(names) > 3 else ""),
                           (4, names[4] if len(names) > 4 else ""))]
    if ends is None or len(ends) != 1 or isinstance(ends[0], int) or known[0] is None:
        return None
    if (len(names) > 3 and names[3] and known[1] is None) or (
            len(names) > 4 and names[4] and known[2] is None):
        return None
    start = int(known[0].reshape(-1)[0])
    axis = int(known[1].reshape(-1)[0]) if known[1] is not None else 0
    step = int(known[2].reshape(-1)[0]) if known[2] is not None else 1
    s = shape_of(x)
    axis %= len(s)
    if step != 1 or start != 0 or not isinstance(s[axis], int):
        return None
    idx = shape_values.index_range(ctx, ends[0])
    return None if idx is None else transform.take(x, idx, axis=axis)


def _axes_arg(ctx: ImportContext, attrs: Attrs, names: Names, pos: int) -> list[int] | None:
    if ctx.opset < 13 or "axes" in attrs:
        return list(attrs["axes"]) if "axes" in attrs else None
    if len(names) > pos and names[pos]:
        return [int(v) for v in ctx.value(names[pos], "axes").reshape(-1)]  # (a scalar axis too)
    return None


@converter("Squeeze")
def _squeeze(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    if ctx.opset >= 13 and dynamic.runtime_inputs(ctx, names, 1):
        return dynamic.squeeze(ctx, inputs)
    s = shape_of(inputs[0])
    axes = _axes_arg(ctx, attrs, names, 1)
    axes = [k for k, d in enumerate(s) if d == 1] if axes is None else [x % len(s) for x in axes]
    return reshape_to(inputs[0], [d for k, d in enumerate(s) if k not in axes])


@converter("Unsqueeze")
def _unsqueeze(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    if ctx.opset >= 13 and dynamic.runtime_inputs(ctx, names, 1):
        return dynamic.unsqueeze(ctx, inputs)
    s = shape_of(inputs[0])
    axes = _axes_arg(ctx, attrs, names, 1)
    if axes is None:
        raise ctx.fail("axes are required")
    r = len(s) + len(axes)
    axes = sorted(x % r for x in axes)
    out = list(s)
    for x in axes:
        out.insert(x, 1)
    return reshape_to(inputs[0], out)


@converter("Expand")
def _expand(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    if dynamic.runtime_inputs(ctx, names, 1):
        sym = shape_values.lookup(ctx, names[1])
        if sym is not None and shape_values.connected(ctx, sym, inputs[0]):
            out = _static_or_none(lambda: transform.broadcast_to(
                inputs[0], broadcast_dims(shape_of(inputs[0]), sym)))
            if out is not None:
                return out
        return dynamic.expand(ctx, inputs)
    tgt = [int(v) for v in ctx.value(names[1], "shape")]
    return transform.broadcast_to(inputs[0], broadcast_dims(shape_of(inputs[0]), tgt))


@converter("Tile")
def _tile(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    if dynamic.runtime_inputs(ctx, names, 1):
        return dynamic.tile(ctx, inputs)
    return transform.tile(inputs[0], [int(v) for v in ctx.value(names[1], "repeats")])


@converter("Pad")
def _pad(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    x = inputs[0]
    r = len(shape_of(x))
    mode = attrs.get("mode", "constant")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    if ctx.opset < 11:
        pads, value, axes = list(attrs["pads"]), attrs.get("value", 0.0), list(range(r))
    elif dynamic.runtime_inputs(ctx, names, 1, 2, 3):
        if mode not in ("constant", "edge", "reflect", "wrap"):
            raise ctx.fail(f"attribute mode={mode!r} is not supported")
        return dynamic.pad(ctx, inputs, mode)
    else:
        pads = [int(v) for v in ctx.value(names[1], "pads")]
        value = (
            float(ctx.value(names[2], "constant_value").reshape(-1)[0])
            if len(names) > 2 and names[2]
            else 0.0
        )
        axes = ([int(v) % r for v in ctx.value(names[3], "axes")] if len(names) > 3 and names[3]
                else list(range(r)))
    if mode not in ("constant", "edge", "reflect", "wrap"):
        raise ctx.fail(f"attribute mode={mode!r} is not supported")
    if any(p < 0 for p in pads):
        raise ctx.fail(f"negative pads {pads} are not supported")
    k = len(axes)
    width = [[0, 0] for _ in range(r)]
    for j, ax in enumerate(axes):
        width[ax] = [pads[j], pads[j + k]]
    if mode != "constant":  # ONNX's (and onnxruntime's) limits, named at the node
        s = shape_of(x)
        for ax, (lo, hi) in enumerate(width):
            if (lo or hi) and (s[ax] == 0 or (mode == "reflect" and max(lo, hi) >= s[ax])):
                raise ctx.fail(f"{mode} pads {width[ax]} do not fit axis {ax} of size {s[ax]}"
                             + (" (reflect pads must be smaller)" if s[ax] else ""))
    return nn.pad(x, width, pad_value=value, pad_mode=mode)


@converter("DepthToSpace")
def _d2s(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    check_2d(ctx, inputs[0])
    return nn.depth_to_space(inputs[0], attrs["blocksize"], mode=attrs.get("mode", "DCR"))


@converter("SpaceToDepth")
def _s2d(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    nn_, ch, h, w = check_2d(ctx, inputs[0])
    b = attrs["blocksize"]
    if attrs.get("mode", "DCR") == "DCR":
        return nn.space_to_depth(inputs[0], b)
    if h % b or w % b:
        raise ctx.fail(f"height {h} and width {w} must be multiples of blocksize {b}")
    # CRD: output channel c * b * b + (row offset) * b + (column offset)
    x = reshape_to(inputs[0], [nn_, ch, h // b, b, w // b, b])
    x = transform.transpose(x, [0, 1, 3, 5, 2, 4])
    return reshape_to(x, [nn_, ch * b * b, h // b, w // b])


@converter("Trilu")
def _trilu(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    x = inputs[0]
    s = shape_of(x)
    if runtime_input(ctx, names, 1):  # k known at run time
        from ...op.dyn import scalar_args

        return scalar_args.trilu(x, inputs[1], bool(attrs.get("upper", 1)))
    k = int(ctx.value(names[1], "k").reshape(-1)[0]) if len(names) > 1 and names[1] else 0
    ones = np.ones(s[-2:], dtype=bool)
    mask = np.triu(ones, k) if attrs.get("upper", 1) else np.tril(ones, k)
    return tensor.where(const(mask), x, scalar_like(0, x))


@converter("EyeLike")
def _eye_like(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    s = shape_of(inputs[0])
    dt = np_dtype(attrs["dtype"]) if "dtype" in attrs else dtype_of(inputs[0])
    return const(np.eye(s[0], s[1], attrs.get("k", 0), dtype=dt))
