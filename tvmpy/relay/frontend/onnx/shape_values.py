"""Shape values known symbolically at import time.

Exporters compute reshape targets from the input's shape: ``Shape -> Gather -> Unsqueeze ->
Concat -> Reshape`` (the attention's ``(batch, seq, heads, d)``). With a symbolic batch the
``Shape`` output is known only at run time, so the Reshape would become ``dyn.reshape`` whose
output has a fresh ``relay.Any`` in EVERY dimension: the static sizes (heads, d) and the
identity of the batch dimension are lost, and later ops (a batch_matmul of two such operands,
a conv's input channels) can no longer be typed. This module follows each small integer tensor
computed from ``Shape`` as a list of dimensions — ints, and the input's own symbolic dims
(the same ``relay.Any`` objects, or expressions of them) — through the ops exporters use on
shapes, so that Reshape / Expand with such a target convert as static operators over
symbolic dimensions. Anything else leaves the tensor untracked (the dyn operator path).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...expr import const
from ...ty import dim_equal
from ...type_infer import infer_type
from ..common import floordiv_dim, prod
from .context import ImportContext, shape_of

__all__ = ["SymValue", "track", "lookup", "connected"]


@dataclass(frozen=True)
class SymValue:
    """An integer tensor of rank 0 (``scalar``) or 1 whose elements are dimensions."""

    items: tuple[Any, ...]
    scalar: bool = False


def _table(ctx: ImportContext) -> dict[str, SymValue]:
    if not hasattr(ctx, "shape_values"):
        ctx.shape_values = {}  # type: ignore[attr-defined]
    return ctx.shape_values  # type: ignore[attr-defined]


def _get(ctx: ImportContext, name: str) -> SymValue | None:
    """A tracked value, or a small integer constant as one."""
    if not name:
        return None
    sv = _table(ctx).get(name)
    if sv is not None:
        return sv
    v = ctx.values.get(name)
    if v is None or v.dtype.kind not in "iub" or v.ndim > 1 or v.size > 64:
        return None
    cast = bool if v.dtype.kind == "b" else int
    return SymValue(tuple(cast(x) for x in v.reshape(-1)), v.ndim == 0)


def _sources(ctx: ImportContext) -> dict[int, tuple[Any, Any, int]]:
    """id(symbolic dim) -> (the dim, a tensor that has it, the axis) from the Shape ops seen."""
    if not hasattr(ctx, "dim_sources"):
        ctx.dim_sources = {}  # type: ignore[attr-defined]
    return ctx.dim_sources  # type: ignore[attr-defined]


def index_range(ctx: ImportContext, dim: Any) -> Any:
    """int64 ``[0, 1, ..., dim - 1]`` of shape ``(dim,)`` — the very symbolic ``dim``, not a
    fresh Any as ``dyn.arange`` gives — built from a tensor that has that dimension (element 0
    of its other axes, a running count); None when no Shape op read ``dim``."""
    from ...op import tensor, transform

    src = _sources(ctx).get(id(dim))
    if src is None:
        return None
    _, x, axis = src
    rank = len(shape_of(x))
    line = x
    for k in reversed(range(rank)):
        if k != axis:
            line = transform.take(line, const(np.int64(0)), axis=k)
    ones = tensor.ones_like(transform.cast(line, "int64"))
    return tensor.subtract(transform.cumsum(ones, axis=0), const(np.int64(1)))


def scalar(ctx: ImportContext, name: str) -> Any:
    """The dim a tracked scalar (or one-element) shape value is, else None."""
    sv = _table(ctx).get(name)
    if sv is None or len(sv.items) != 1:
        return None
    return sv.items[0]


def lookup(ctx: ImportContext, name: str) -> list[Any] | None:
    """The dims of a 1-D shape tensor tracked symbolically (None when it is a constant, whose
    value ``ctx.values`` has, or unknown)."""
    sv = _table(ctx).get(name)
    if sv is None or sv.scalar or name in ctx.values:
        return None
    return list(sv.items)


def connected(ctx: ImportContext, dims: list[Any], data: Any = None) -> bool:
    """Whether every size variable ``dims`` read is one an executor can know where a static
    operator over ``data`` runs: a dimension of ``data`` itself or of a function parameter
    (a graph input, a loop body's argument). A size only some other tensor has (a NonZero's
    count read by a Shape op whose tensor nothing else uses) is not: in a static attribute it
    would lose its source (the tensor is dead code), so the caller takes the dyn operator with
    the shape tensor instead."""
    from ....tir.functor import collect_vars
    from ...expr import Var

    wanted = {id(v): v for d in dims if not isinstance(d, (int, bool)) for v in collect_vars(d)}
    if not wanted:
        return True
    have: set[int] = set()
    for e in ([data] if data is not None else []) + [
            e for e in ctx.exprs.values() if isinstance(e, Var)]:
        for d in shape_of(e) if _is_tensor(e) else ():
            if not isinstance(d, int):
                have |= {id(v) for v in collect_vars(d)}
    return set(wanted) <= have


def _is_tensor(e: Any) -> bool:
    from ...ty import TensorType

    try:
        return isinstance(infer_type(e).checked_type, TensorType)
    except Exception:  # noqa: BLE001 - a list / tuple input, untyped: binds no tensor size
        return False


def _attr_ints(attrs: dict, key: str, default: Any = None) -> Any:
    v = attrs.get(key, default)
    return None if v is None else [int(x) for x in np.asarray(v).reshape(-1)]


_ARITH: dict[str, Callable[[Any, Any], Any]] = {
    "Mul": lambda a, b: prod([a, b]),
    "Add": lambda a, b: a + b if isinstance(a, int) and isinstance(b, int) else None,
    "Sub": lambda a, b: a - b if isinstance(a, int) and isinstance(b, int) else None,
    "Div": lambda a, b: (a // b if isinstance(a, int) and isinstance(b, int)
                         else floordiv_dim(a, b) if isinstance(b, int) and b > 0 else None),
}


def _compute(ctx: ImportContext, op: str, names: list[str], attrs: dict) -> SymValue | None:
    if op == "Shape":
        dims = shape_of(ctx.exprs[names[0]])
        srcs = _sources(ctx)
        for k, d in enumerate(dims):
            if not isinstance(d, int) and id(d) not in srcs:
                srcs[id(d)] = (d, ctx.exprs[names[0]], k)
        start, end = attrs.get("start", 0), attrs.get("end", len(dims))
        return SymValue(tuple(dims[slice(start, end)]))
    ins = [_get(ctx, nm) for nm in names]
    if not ins or ins[0] is None:
        return None
    x = ins[0]
    if op == "Equal":
        y = ins[1] if len(ins) == 2 else None
        if y is None:
            return None
        n = max(len(x.items), len(y.items))
        xs = x.items if len(x.items) == n else x.items * n
        ys = y.items if len(y.items) == n else y.items * n
        out = []
        for p, q in zip(xs, ys):
            if isinstance(p, int) and isinstance(q, int):
                out.append(p == q)
            elif (isinstance(p, int) and p < 0) or (isinstance(q, int) and q < 0):
                out.append(False)  # a dimension is never negative (the exporters' -1 test)
            elif dim_equal(p, q):
                out.append(True)
            else:
                return None
        return SymValue(tuple(out), x.scalar and y.scalar)
    if op == "Where":
        if len(ins) != 3 or ins[1] is None or ins[2] is None:
            return None
        c, a, b = x, ins[1], ins[2]
        n = max(len(c.items), len(a.items), len(b.items))
        if any(len(v.items) not in (1, n) for v in (c, a, b)):
            return None
        pick = [(c.items * n)[k] if len(c.items) == 1 else c.items[k] for k in range(n)]
        av = a.items * n if len(a.items) == 1 else a.items
        bv = b.items * n if len(b.items) == 1 else b.items
        return SymValue(tuple(p if s else q for s, p, q in zip(pick, av, bv)),
                        c.scalar and a.scalar and b.scalar)
    if op == "Reshape":  # of the shape vector itself, to 1-D ([-1] or [n])
        tgt = ctx.values.get(names[1]) if len(names) > 1 else None
        if tgt is None or tgt.size != 1 or int(tgt.reshape(-1)[0]) not in (-1, len(x.items)):
            return None
        return SymValue(x.items)
    if op in ("Identity", "Cast"):
        if op == "Cast" and attrs.get("to") not in (6, 7):  # INT32, INT64
            return None
        return x
    if op == "Gather":
        idx = ctx.values.get(names[1]) if len(names) > 1 else None
        if x.scalar or idx is None or int(attrs.get("axis", 0)) != 0 or idx.ndim > 1:
            return None
        picked = tuple(x.items[int(i)] for i in idx.reshape(-1))
        return SymValue(picked, idx.ndim == 0)
    if op == "Unsqueeze":  # a scalar with one new axis is a 1-D shape vector; more axes are not
        if ctx.opset < 13:
            axes = _attr_ints(attrs, "axes")
        else:
            given = ctx.values.get(names[1]) if len(names) > 1 else None
            axes = None if given is None else [int(v) for v in given.reshape(-1)]
        return SymValue(x.items) if x.scalar and axes is not None and len(axes) == 1 else None
    if op == "Squeeze":
        return SymValue(x.items, True) if not x.scalar and len(x.items) == 1 else None
    if op == "Concat":
        if any(v is None or v.scalar for v in ins):
            return None
        return SymValue(tuple(d for v in ins for d in v.items))  # type: ignore[union-attr]
    if op == "Slice":
        if x.scalar:
            return None
        if ctx.opset < 10:
            starts, ends = _attr_ints(attrs, "starts"), _attr_ints(attrs, "ends")
            axes, steps = _attr_ints(attrs, "axes"), None
        else:
            vals = [ctx.values.get(nm) if nm else None
                    for nm in list(names[1:5]) + [""] * (5 - len(names))]
            if vals[0] is None or vals[1] is None or (len(names) > 3 and names[3]
                                                      and vals[2] is None):
                return None
            if len(names) > 4 and names[4] and vals[3] is None:
                return None
            starts, ends = [int(v) for v in vals[0]], [int(v) for v in vals[1]]
            axes = None if vals[2] is None else [int(v) for v in vals[2]]
            steps = None if vals[3] is None else [int(v) for v in vals[3]]
        if len(starts) != 1 or (axes is not None and axes[0] not in (0, -1)):
            return None
        n = len(x.items)
        sl = slice(max(-n - 1, min(n, starts[0])), max(-n - 1, min(n, ends[0])),
                   steps[0] if steps else 1)
        return SymValue(tuple(x.items[sl]))
    b = ins[1] if len(ins) == 2 else None
    if op in _ARITH and b is not None:
        a = x
        if a.scalar != b.scalar and not (len(a.items) == 1 or len(b.items) == 1):
            return None
        n = max(len(a.items), len(b.items))
        ai = a.items if len(a.items) == n else a.items * n
        bi = b.items if len(b.items) == n else b.items * n
        out = [_ARITH[op](p, q) for p, q in zip(ai, bi)]
        if any(d is None for d in out):
            return None
        return SymValue(tuple(out), a.scalar and b.scalar)
    return None


_TRACKED = {"Shape", "Identity", "Cast", "Gather", "Unsqueeze", "Squeeze", "Concat", "Slice",
            "Equal", "Where", "Reshape", *_ARITH}


def track(ctx: ImportContext, node: Any, names: list[str], attrs: dict) -> None:
    """Record the symbolic value of ``node``'s output when it is a shape computation whose
    value is not already a constant."""
    if node.op_type not in _TRACKED or len(node.output) != 1 or node.output[0] in ctx.values:
        return
    try:
        sv = _compute(ctx, node.op_type, list(names), attrs)
    except (TypeError, ValueError, IndexError):  # not a shape computation after all
        sv = None
    if sv is None:
        return
    out = node.output[0]
    if all(isinstance(d, (int, bool)) for d in sv.items):
        # every element known (static dims of a symbolic shape, a -1 test): a constant, so that
        # Slice / Split / Resize... take it as an attribute and stay static operators
        dtype = str(infer_type(ctx.exprs[out]).checked_type.dtype)
        val = np.asarray(sv.items[0] if sv.scalar else list(sv.items), dtype=dtype)
        ctx.bind(out, const(val))
        return
    _table(ctx)[out] = sv
