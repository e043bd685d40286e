"""Injective transforms: reshape, transpose, concatenate, split, strided_slice, take, squeeze,
expand_dims, flatten, cast, tile, repeat, gather, one_hot, layout_transform, ... (TVM's
``topi.transform``). Each output element reads
one input element at an index computed from the output index; all are tagged ``injective``."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from .. import te
from ..arith import can_prove, simplify
from ..ir import dtype as dt
from ..tir import op as tir_op
from ..tir.expr import IntImm, PrimExpr, const, convert
from ..tir.expr import cast as _cast
from . import tag
from .broadcast import broadcast_to, where
from .utils import (
    compute_unless_empty,
    get_const_int,
    is_empty_shape,
    normalize_axes,
    normalize_axis,
    prod,
)

__all__ = [
    "reshape", "transpose", "concatenate", "split", "strided_slice", "take", "squeeze",
    "expand_dims", "flatten", "cast", "broadcast_to", "where", "tile", "repeat", "stack", "full",
    "full_like", "arange", "gather", "gather_nd", "flip", "reverse", "one_hot", "layout_transform",
]


def _check(x: Any, op: str) -> te.Tensor:
    if not isinstance(x, te.Tensor):
        raise TypeError(f"topi.{op}: expected a te.Tensor, got {type(x).__name__} {x!r}")
    return x


def _fmt(shape: Sequence[Any]) -> str:
    return "(" + ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"


def _unravel(flat: PrimExpr, shape: Sequence[Any]) -> list:
    """Row-major multi-index of ``flat`` in ``shape``."""
    idx = []
    for s in reversed(shape):
        if isinstance(s, IntImm) and s.value == 1:
            idx.append(const(0, flat.dtype))
            continue
        idx.append(tir_op.floormod(flat, s))
        flat = tir_op.floordiv(flat, s)
    return list(reversed(idx))


def _ravel(idx: Sequence[Any], shape: Sequence[Any]) -> PrimExpr:
    flat: Any = const(0, "int32")
    for i, s in zip(idx, shape):
        flat = flat * s + i
    return flat


def cast(x: te.Tensor, dtype: str) -> te.Tensor:
    """``x`` converted to ``dtype`` elementwise (float to int truncates; to bool is ``!= 0``)."""
    _check(x, "cast")
    dt.parse(dtype)

    def f(*i: Any) -> PrimExpr:
        v = x(*i)
        if dt.is_bool(dtype) and not dt.is_bool(x.dtype):
            return v != const(0, x.dtype)
        return _cast(v, dtype)

    return te.compute(x.shape, f, name="cast", tag=tag.ELEMWISE)


def reinterpret(x: te.Tensor, dtype: str) -> te.Tensor:
    """The bits of each element of ``x`` read as ``dtype`` (same width)."""
    _check(x, "reinterpret")
    if dt.bits_of(dtype) != dt.bits_of(x.dtype):
        raise ValueError(f"reinterpret: {x.dtype} -> {dtype} changes the element width")
    return te.compute(x.shape, lambda *i: tir_op.reinterpret(dtype, x(*i)), name="reinterpret",
                      tag=tag.ELEMWISE)


def reshape(a: te.Tensor, newshape: Any, allowzero: bool = False) -> te.Tensor:
    """``a`` with shape ``newshape``; an entry ``-1`` is inferred, ``0`` copies the input's size
    at that position (ONNX/TVM conventions), or is a literal 0 with ``allowzero``."""
    _check(a, "reshape")
    newshape = list(newshape) if isinstance(newshape, (list, tuple)) else [newshape]
    total = prod(a.shape)
    out: list[Any] = []
    infer = None
    for k, s in enumerate(newshape):
        s = convert(s) if not isinstance(s, int) else s
        if isinstance(s, IntImm):
            s = int(s.value)
        if isinstance(s, int):
            if s == -1:
                if infer is not None:
                    raise ValueError(f"topi.reshape: more than one -1 in newshape {newshape}")
                infer = k
                out.append(None)
            elif s == 0 and allowzero:
                out.append(const(0))
            elif s == 0:
                if k >= a.ndim:
                    raise ValueError(f"topi.reshape: newshape {newshape} copies (0) dimension {k}, "
                                     f"but the input has rank {a.ndim}")
                out.append(a.shape[k])
            elif s < -1:
                raise ValueError(f"topi.reshape: invalid entry {s} in newshape {newshape}")
            else:
                out.append(const(s))
        else:
            out.append(s)
    if infer is not None:
        known = prod([s for s in out if s is not None])
        if isinstance(known, int) and isinstance(total, int):
            if known == 0 or total % known:
                raise ValueError(f"topi.reshape: cannot reshape {_fmt(a.shape)} ({total} elements) "
                                 f"into {newshape}")
            out[infer] = const(total // known)
        else:
            out[infer] = simplify(convert(total) // convert(known))
    out_total = prod(out)
    if isinstance(out_total, int) and isinstance(total, int):
        if out_total != total:
            raise ValueError(f"topi.reshape: cannot reshape {_fmt(a.shape)} ({total} elements) into "
                             f"{_fmt(out)} ({out_total} elements)")
    elif not can_prove(convert(out_total) == convert(total)):
        # sizes known only at run time: the kernel checks the counts before it computes
        msg = (f"reshape: cannot reshape {_fmt(a.shape)} into {_fmt(out)} at these sizes: the "
               "element counts differ")
        if infer is not None:
            msg += f" (the -1 of newshape {_fmt(newshape)} needs a divisible size)"
        return compute_unless_empty(out, lambda *i: a(*_unravel(_ravel(i, out), a.shape)),
                                    a.dtype, "reshape", tag.INJECTIVE,
                                    attrs={"preconditions": ((convert(out_total) == convert(total),
                                                              msg),)})

    return compute_unless_empty(out, lambda *i: a(*_unravel(_ravel(i, out), a.shape)), a.dtype,
                                "reshape", tag.INJECTIVE)


def transpose(a: te.Tensor, axes: Sequence[int] | None = None) -> te.Tensor:
    """Permute axes (reverse them when ``axes`` is None); output axis k is input axis axes[k]."""
    _check(a, "transpose")
    n = a.ndim
    if axes is None:
        perm = list(range(n))[::-1]
    else:
        axes = list(axes)
        if len(axes) != n:
            raise ValueError(f"topi.transpose: axes {axes} has {len(axes)} entries, the input has "
                             f"rank {n}")
        perm = [normalize_axis(x, n, "transpose") for x in axes]
        if sorted(perm) != list(range(n)):
            raise ValueError(f"topi.transpose: axes {axes} is not a permutation of range({n})")
    shape = [a.shape[p] for p in perm]

    def f(*i: Any) -> PrimExpr:
        idx: list[Any] = [None] * n
        for k, p in enumerate(perm):
            idx[p] = i[k]
        return a(*idx)

    return te.compute(shape, f, name="transpose", tag=tag.INJECTIVE)


def concatenate(a_tuple: Sequence[te.Tensor], axis: int = 0) -> te.Tensor:
    """Join tensors along ``axis``; the other dimensions must agree."""
    ts = list(a_tuple)
    if not ts:
        raise ValueError("topi.concatenate: needs at least one tensor")
    for t in ts:
        _check(t, "concatenate")
    n = ts[0].ndim
    ax = normalize_axis(axis, n, "concatenate")
    for t in ts[1:]:
        if t.ndim != n:
            raise ValueError(f"topi.concatenate: all inputs need rank {n}, got {_fmt(t.shape)}")
        if t.dtype != ts[0].dtype:
            raise TypeError(f"topi.concatenate: dtypes differ: {ts[0].dtype} vs {t.dtype}")
        for k in range(n):
            if k != ax and not can_prove(t.shape[k] == ts[0].shape[k]):
                raise ValueError(f"topi.concatenate: shapes {_fmt(ts[0].shape)} and {_fmt(t.shape)} "
                                 f"differ in dimension {k} (not the concatenation axis {ax})")
    offsets = [const(0)]
    for t in ts:
        offsets.append(simplify(offsets[-1] + t.shape[ax]))
    shape = list(ts[0].shape)
    shape[ax] = offsets[-1]

    def f(*i: Any) -> PrimExpr:
        j = i[ax]
        out = None
        for k in reversed(range(len(ts))):
            idx = list(i)
            idx[ax] = j - offsets[k]
            v = ts[k](*idx)
            out = v if out is None else tir_op.if_then_else(j < offsets[k + 1], v, out)
        return out

    return te.compute(shape, f, name="concatenate", tag=tag.INJECTIVE)


def stack(tensors: Sequence[te.Tensor], axis: int = 0) -> te.Tensor:
    """Join same-shaped tensors along a new axis."""
    ts = list(tensors)
    if not ts:
        raise ValueError("topi.stack: needs at least one tensor")
    ax = normalize_axis(axis, ts[0].ndim, "stack", allow_end=True)
    return concatenate([expand_dims(t, ax) for t in ts], ax)


def _slice(a: te.Tensor, begin: Sequence[int], size: Sequence[Any], ax: int) -> te.Tensor:
    shape = list(a.shape)
    shape[ax] = size

    def f(*i: Any) -> PrimExpr:
        idx = list(i)
        idx[ax] = idx[ax] + begin
        return a(*idx)

    return te.compute(shape, f, name="split", tag=tag.INJECTIVE)


def split(ary: te.Tensor, indices_or_sections: Any, axis: int = 0) -> list[te.Tensor]:
    """Split along ``axis`` into ``n`` equal sections (an int) or at the given indices."""
    _check(ary, "split")
    ax = normalize_axis(axis, ary.ndim, "split")
    n = get_const_int(ary.shape[ax], "topi.split: the split axis size")
    if isinstance(indices_or_sections, (int, IntImm)) and not isinstance(indices_or_sections, bool):
        sec = get_const_int(indices_or_sections)
        if sec <= 0:
            raise ValueError(f"topi.split: the number of sections must be positive, got {sec}")
        if n % sec:
            raise ValueError(f"topi.split: axis {ax} of size {n} does not divide into {sec} "
                             "equal sections")
        points = [n // sec * k for k in range(1, sec)]
    elif isinstance(indices_or_sections, (list, tuple)):
        points = [get_const_int(p, "topi.split index") for p in indices_or_sections]
        if any(p < 0 or p > n for p in points) or points != sorted(points):
            raise ValueError(f"topi.split: indices {points} must be increasing and within [0, {n}]")
    else:
        raise TypeError(f"topi.split: indices_or_sections must be an int or a list of ints, got "
                        f"{indices_or_sections!r}")
    bounds = [0, *points, n]
    return [_slice(ary, b, e - b, ax) for b, e in zip(bounds[:-1], bounds[1:])]


def strided_slice(a: te.Tensor, begin: Sequence[Any], end: Sequence[Any],
                  strides: Sequence[Any] | None = None, axes: Sequence[int] | None = None,
                  slice_mode: str = "end") -> te.Tensor:
    """numpy's ``a[b0:e0:s0, b1:e1:s1, ...]`` (constant bounds; negative values count from the
    end, out-of-range ones are clamped; None means the whole axis). ``axes`` names which axes
    the entries apply to (default the first ``len(begin)``); ``slice_mode="size"`` reads ``end``
    as sizes (-1: to the end), as TVM."""
    _check(a, "strided_slice")
    if slice_mode not in ("end", "size"):
        raise ValueError(f"topi.strided_slice: slice_mode must be 'end' or 'size', got {slice_mode!r}")
    begin, end = list(begin), list(end)
    strides = list(strides) if strides is not None else [1] * len(begin)
    if axes is None:
        axes = list(range(len(begin)))
    axes = [normalize_axis(x, a.ndim, "strided_slice") for x in axes]
    if not (len(begin) == len(end) == len(axes)) or len(strides) not in (len(begin), 1):
        raise ValueError(f"topi.strided_slice: begin {begin}, end {end}, strides {strides} and axes "
                         f"{axes} must have matching lengths")
    if len(strides) == 1 and len(begin) > 1:
        strides = strides * len(begin)
    shape = list(a.shape)
    starts = [const(0)] * a.ndim
    steps = [1] * a.ndim
    for b, e, s, ax in zip(begin, end, strides, axes):
        s = 1 if s is None else get_const_int(s, "strided_slice stride")
        if s == 0:
            raise ValueError(f"topi.strided_slice: stride 0 on axis {ax} (strides {strides})")
        n = get_const_int(a.shape[ax], f"topi.strided_slice: size of axis {ax}")
        b = None if b is None else get_const_int(b, "strided_slice begin")
        e = None if e is None else get_const_int(e, "strided_slice end")
        if slice_mode == "size":
            if s != 1:
                raise ValueError("topi.strided_slice: slice_mode='size' needs unit strides")
            b = b or 0
            e = None if e is None or e < 0 else b + e
        start, _, step = slice(b, e, s).indices(n)
        length = len(range(*slice(b, e, s).indices(n)))
        shape[ax] = const(length)
        starts[ax] = const(start)
        steps[ax] = step

    def f(*i: Any) -> PrimExpr:
        return a(*[st + ii * sp if sp != 1 else st + ii for st, ii, sp in zip(starts, i, steps)])

    return te.compute(shape, f, name="strided_slice", tag=tag.INJECTIVE)


def take(a: te.Tensor, indices: Any, axis: int | None = None, mode: str = "clip") -> te.Tensor:
    """Gather: ``a`` indexed along ``axis`` by ``indices`` (a tensor or an int); with
    ``axis=None`` ``a`` is flattened first. ``mode``: "clip" clamps indices into range, "wrap"
    wraps them modulo the size (so -1 is the last), "fast" assumes they are in range."""
    _check(a, "take")
    if mode not in ("clip", "wrap", "fast"):
        raise ValueError(f"topi.take: mode must be 'clip', 'wrap' or 'fast', got {mode!r}")
    if axis is None:
        a = reshape(a, [-1])
        ax = 0
    else:
        ax = normalize_axis(axis, a.ndim, "take")
    n = a.shape[ax]
    if isinstance(indices, te.Tensor):
        if not dt.is_integer(indices.dtype) or dt.is_bool(indices.dtype):
            raise TypeError(f"topi.take: indices must be integers, got {indices.dtype}")
        ishape = list(indices.shape)
    elif isinstance(indices, (int, IntImm)) and not isinstance(indices, bool):
        ishape = []
    else:
        raise TypeError(f"topi.take: indices must be a te.Tensor or an int, got {indices!r}")
    k = len(ishape)
    shape = list(a.shape[:ax]) + ishape + list(a.shape[ax + 1:])
    if is_empty_shape([n]) and not is_empty_shape(shape):
        raise ValueError(f"topi.take: cannot take elements from the empty axis {ax} of "
                         f"{_fmt(a.shape)}")

    def f(*i: Any) -> PrimExpr:
        raw = indices(*i[ax:ax + k]) if isinstance(indices, te.Tensor) else convert(indices)
        j = _cast(raw, n.dtype) if raw.dtype != n.dtype else raw
        if mode == "clip":
            j = tir_op.min(tir_op.max(j, const(0, j.dtype)), n - 1)
        elif mode == "wrap":
            j = tir_op.floormod(j, n)
        return a(*i[:ax], j, *i[ax + k:])

    return compute_unless_empty(shape, f, a.dtype, "take", tag.INJECTIVE)


def squeeze(a: te.Tensor, axis: Any = None) -> te.Tensor:
    """Remove size-1 axes (all of them when ``axis`` is None)."""
    _check(a, "squeeze")
    if axis is None:
        axes = [k for k, s in enumerate(a.shape) if isinstance(s, IntImm) and s.value == 1]
    else:
        axes = normalize_axes(axis, a.ndim, "squeeze")
        for x in axes:
            if not (isinstance(a.shape[x], IntImm) and a.shape[x].value == 1):
                raise ValueError(f"topi.squeeze: axis {x} of shape {_fmt(a.shape)} has size "
                                 f"{a.shape[x]}, not 1")
    shape = [s for k, s in enumerate(a.shape) if k not in axes]

    def f(*i: Any) -> PrimExpr:
        it = iter(i)
        return a(*[const(0, "int32") if k in axes else next(it) for k in range(a.ndim)])

    return te.compute(shape, f, name="squeeze", tag=tag.INJECTIVE)


def expand_dims(a: te.Tensor, axis: int, num_newaxis: int = 1) -> te.Tensor:
    """Insert ``num_newaxis`` size-1 axes at ``axis`` (in ``[-ndim-1, ndim]``)."""
    _check(a, "expand_dims")
    if num_newaxis < 0:
        raise ValueError(f"topi.expand_dims: num_newaxis must be >= 0, got {num_newaxis}")
    ax = normalize_axis(axis, a.ndim, "expand_dims", allow_end=True)
    shape = list(a.shape[:ax]) + [const(1)] * num_newaxis + list(a.shape[ax:])

    def f(*i: Any) -> PrimExpr:
        return a(*i[:ax], *i[ax + num_newaxis:])

    return te.compute(shape, f, name="expand_dims", tag=tag.BROADCAST)


def flatten(data: te.Tensor, axis: int = 1) -> te.Tensor:
    """2-D ``(prod(shape[:axis]), prod(shape[axis:]))`` (ONNX Flatten; axis 1 is TVM's
    ``batch_flatten``)."""
    _check(data, "flatten")
    ax = normalize_axis(axis, data.ndim, "flatten", allow_end=True)
    return reshape(data, [prod(data.shape[:ax]), prod(data.shape[ax:])], allowzero=True)


def tile(a: te.Tensor, reps: Sequence[int]) -> te.Tensor:
    """numpy's ``tile``: repeat the whole tensor ``reps[k]`` times along each axis."""
    _check(a, "tile")
    reps = [get_const_int(r, "tile reps") for r in reps]
    if any(r < 0 for r in reps):
        raise ValueError(f"topi.tile: reps must be >= 0, got {reps}")
    n = max(a.ndim, len(reps))
    reps = [1] * (n - len(reps)) + reps
    src = a if a.ndim == n else expand_dims(a, 0, n - a.ndim)
    shape = [simplify(s * r) for s, r in zip(src.shape, reps)]
    return compute_unless_empty(
        shape, lambda *i: src(*[tir_op.floormod(x, s) for x, s in zip(i, src.shape)]), a.dtype,
        "tile", tag.BROADCAST)


def repeat(a: te.Tensor, repeats: int, axis: int) -> te.Tensor:
    """numpy's ``repeat``: each element ``repeats`` times along ``axis``."""
    _check(a, "repeat")
    r = get_const_int(repeats, "repeat count")
    if r < 1:
        raise ValueError(f"topi.repeat: repeats must be >= 1, got {r}")
    ax = normalize_axis(axis, a.ndim, "repeat")
    shape = list(a.shape)
    shape[ax] = simplify(shape[ax] * r)
    return te.compute(shape, lambda *i: a(*i[:ax], tir_op.floordiv(i[ax], r), *i[ax + 1:]),
                      name="repeat", tag=tag.BROADCAST)



# ---------------------------------------------------------------------------------------------
# creation, gathers, flips, one-hot and layout transforms (what the frontends need)
def full(shape: Sequence[Any], dtype: str, fill_value: Any) -> te.Tensor:
    """A tensor of ``shape`` filled with ``fill_value``."""
    dt.parse(dtype)
    v = const(fill_value, dtype) if not isinstance(fill_value, PrimExpr) else _cast(fill_value, dtype)
    return te.compute(list(shape), lambda *i: v, name="full", tag=tag.ELEMWISE)


def full_like(x: te.Tensor, fill_value: Any) -> te.Tensor:
    """A tensor shaped and typed like ``x`` filled with ``fill_value``."""
    _check(x, "full_like")
    return full(x.shape, x.dtype, fill_value)


def arange_length(start: int, stop: PrimExpr, step: int) -> PrimExpr:
    """The length of ``arange(start, stop, step)`` with a symbolic ``stop`` (integer ``start``
    and ``step``): ``ceil((stop - start) / step)``, ``stop`` itself for ``arange(0, stop)``.
    A symbolic stop is a size: it must not fall short of ``start`` at run time (no clamp to
    0, so that the length stays the size expression the caller's shapes use)."""
    if not (isinstance(start, int) and isinstance(step, int)) or step == 0:
        raise ValueError(f"topi.arange: a symbolic stop {stop} needs integer start and a "
                         f"non-zero integer step, got {start}, {step}")
    if start == 0 and step == 1:
        return stop
    if step > 0:
        return simplify(tir_op.floordiv(stop - start + (step - 1), step))
    return simplify(tir_op.floordiv(start - stop + (-step - 1), -step))


def arange(start: Any, stop: Any = None, step: Any = 1, dtype: str = "float32") -> te.Tensor:
    """``[start, start + step, ...)`` below ``stop`` (numpy's ``arange``; constant bounds)."""
    if stop is None:
        start, stop = 0, start
    if step == 0:
        raise ValueError("topi.arange: step must not be 0")
    if isinstance(stop, PrimExpr) and not isinstance(stop, IntImm):  # a run-time length
        n = arange_length(start, stop, step)
    else:
        n = max(0, math.ceil((stop - start) / step))
    return te.compute((n,), lambda i: const(start, dtype) + _cast(i, dtype) * const(step, dtype),
                      name="arange", tag=tag.ELEMWISE)


def gather(data: te.Tensor, axis: int, indices: te.Tensor) -> te.Tensor:
    """``out[i..] = data[i.. with index[axis] replaced by indices[i..]]`` (ONNX GatherElements;
    negative indices count from the end; indices out of range are clamped, so that no read
    leaves ``data``: ``topi.index_check`` reports them). ``indices`` has ``data``'s rank."""
    _check(data, "gather")
    _check(indices, "gather")
    if indices.ndim != data.ndim:
        raise ValueError(f"topi.gather: indices rank {indices.ndim} != data rank {data.ndim}")
    ax = normalize_axis(axis, data.ndim, "gather")
    n = data.shape[ax]

    def f(*i: Any) -> PrimExpr:
        j = _cast(indices(*i), n.dtype)
        j = tir_op.Select(j < const(0, j.dtype), j + n, j)
        j = tir_op.min(tir_op.max(j, const(0, j.dtype)), n - 1)
        return data(*i[:ax], j, *i[ax + 1:])

    return te.compute(indices.shape, f, name="gather", tag=tag.INJECTIVE)


def gather_nd(a: te.Tensor, indices: te.Tensor, batch_dims: int = 0) -> te.Tensor:
    """TVM's ``gather_nd``: ``indices`` has shape ``(M, Y...)``; the output ``(Y..., rest...)``
    reads ``a[indices[0, y], ..., indices[M-1, y], rest...]`` (negative indices wrap; indices
    out of range are clamped, so that no read leaves ``a``)."""
    _check(a, "gather_nd")
    _check(indices, "gather_nd")
    if batch_dims:
        raise ValueError("topi.gather_nd: batch_dims > 0 is not supported")
    m = get_const_int(indices.shape[0], "gather_nd index depth")
    if m > a.ndim:
        raise ValueError(f"topi.gather_nd: index depth {m} exceeds the data rank {a.ndim}")
    ys = list(indices.shape[1:])
    shape = ys + list(a.shape[m:])

    def f(*i: Any) -> PrimExpr:
        y, rest = i[:len(ys)], i[len(ys):]
        idx = []
        for d in range(m):
            j = _cast(indices(const(d, "int32"), *y), a.shape[d].dtype)
            j = tir_op.Select(j < const(0, j.dtype), j + a.shape[d], j)
            idx.append(tir_op.min(tir_op.max(j, const(0, j.dtype)), a.shape[d] - 1))
        return a(*idx, *rest)

    return te.compute(shape, f, name="gather_nd", tag=tag.INJECTIVE)


def flip(a: te.Tensor, axis: Any = 0) -> te.Tensor:
    """Reverse the order of elements along ``axis`` (an int or a tuple; TVM's ``reverse``)."""
    _check(a, "flip")
    axes = normalize_axes(axis, a.ndim, "flip")

    def f(*i: Any) -> PrimExpr:
        return a(*[a.shape[k] - 1 - x if k in axes else x for k, x in enumerate(i)])

    return te.compute(a.shape, f, name="flip", tag=tag.INJECTIVE)


reverse = flip


def one_hot(indices: te.Tensor, on_value: Any, off_value: Any, depth: int, axis: int = -1,
            dtype: str = "float32") -> te.Tensor:
    """``on_value`` where the new ``axis`` index equals ``indices`` (negative wraps), else
    ``off_value``."""
    _check(indices, "one_hot")
    depth = get_const_int(depth, "one_hot depth")
    ax = normalize_axis(axis, indices.ndim, "one_hot", allow_end=True)
    shape = list(indices.shape[:ax]) + [const(depth)] + list(indices.shape[ax:])
    on, off = const(on_value, dtype), const(off_value, dtype)

    def f(*i: Any) -> PrimExpr:
        j = _cast(indices(*i[:ax], *i[ax + 1:]), "int32")
        j = tir_op.Select(j < const(0, "int32"), j + depth, j)
        return tir_op.Select(j == i[ax], on, off)

    return te.compute(shape, f, name="one_hot", tag=tag.INJECTIVE)


def _parse_layout(layout: str) -> list[tuple[str, int]]:
    """"NCHW16c" -> [("N", 0), ("C", 0), ("H", 0), ("W", 0), ("c", 16)]."""
    out: list[tuple[str, int]] = []
    num = ""
    for ch in layout:
        if ch.isdigit():
            num += ch
        elif ch.isupper() and not num:
            out.append((ch, 0))
        elif ch.islower() and num:
            out.append((ch, int(num)))
            num = ""
        else:
            raise ValueError(f"topi.layout_transform: bad layout {layout!r}")
    names = [n for n, _ in out]
    if num or len(set(names)) != len(names) or any(
            f and n.upper() not in names for n, f in out):
        raise ValueError(f"topi.layout_transform: bad layout {layout!r}")
    return out


def layout_transform(tensor: te.Tensor, src_layout: str, dst_layout: str) -> te.Tensor:
    """Re-lay ``tensor`` from ``src_layout`` to ``dst_layout`` (e.g. "NCHW" -> "NCHW16c",
    "NCHW8c" -> "NCHW"); a split axis must divide evenly."""
    _check(tensor, "layout_transform")
    src, dst = _parse_layout(src_layout), _parse_layout(dst_layout)
    if len(src) != tensor.ndim:
        raise ValueError(f"topi.layout_transform: layout {src_layout} has {len(src)} axes, the "
                         f"tensor has rank {tensor.ndim}")
    if {n for n, f in src if not f} != {n for n, f in dst if not f}:
        raise ValueError(f"topi.layout_transform: {src_layout} and {dst_layout} have different "
                         "primal axes")
    sub_src = {n.upper(): f for n, f in src if f}
    sub_dst = {n.upper(): f for n, f in dst if f}
    # the full extent of every primal axis
    full_ext: dict[str, Any] = {}
    for (n, f), s in zip(src, tensor.shape):
        if not f:
            full_ext[n] = s if n not in sub_src else simplify(s * sub_src[n])
    shape = []
    for n, f in dst:
        if f:
            shape.append(const(f))
        else:
            e = full_ext[n]
            if n in sub_dst:
                if isinstance(e, IntImm) and e.value % sub_dst[n]:
                    raise ValueError(f"topi.layout_transform: axis {n} of size {e.value} does not "
                                     f"split evenly by {sub_dst[n]} ({src_layout} -> {dst_layout})")
                e = simplify(e // sub_dst[n])
            shape.append(e)

    def f(*i: Any) -> PrimExpr:
        pos = {n: k for k, (n, _) in enumerate(dst)}
        value = {}
        for n, fac in dst:
            if not fac:
                v = i[pos[n]]
                if n in sub_dst:
                    v = v * sub_dst[n] + i[pos[n.lower()]]
                value[n] = v
        idx = []
        for n, fac in src:
            if fac:
                idx.append(tir_op.floormod(value[n.upper()], fac))
            elif n in sub_src:
                idx.append(tir_op.floordiv(value[n], sub_src[n]))
            else:
                idx.append(value[n])
        return tensor(*idx)

    return te.compute(shape, f, name="layout_transform", tag=tag.INJECTIVE,
                      attrs={"src_layout": src_layout, "dst_layout": dst_layout})
