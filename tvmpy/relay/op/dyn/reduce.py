"""Reductions over an axes *tensor* known only at run time: ``dyn.sum``, ``dyn.mean``,
``dyn.max``, ``dyn.min``, ``dyn.prod`` (``call(data, axes)``; ONNX's Reduce* with ``axes`` a
graph input). The other ONNX reductions compose from these and elementwise ops.

- Type: the output rank is static: ``keepdims`` keeps the rank (every dim ``?`` except those of
  static size 1, which stay 1); without it the rank drops by the axes count, which must then be
  static. An empty axes tensor reduces every axis, or nothing with ``noop_with_empty_axes``.
- Shape function (data-dependent: it reads the axes), FNumpy (the interpreter), pattern OPAQUE
  (an executor runs the shape function on the call's own inputs first, so an axis out of range
  is an error naming the node and the value before any kernel runs).
- Compute: ``topi.dyn.reduce`` (one kernel per kind and rank, extents bound at run time).
"""

from __future__ import annotations

import builtins
from typing import Any

import numpy as np

from ...expr import RelayExpr, RelayTypeError
from ...ty import Any as AnyDim
from ...ty import TensorType, Type
from .._rel import tensor_arg
from ..registry import (
    OpPattern,
    make_call,
    register_float16_accumulation,
    register_op,
    register_op_attr,
)
from ..shape_func import register_shape_func
from .axes_strategy import register_axes_strategy

__all__ = ["sum", "mean", "max", "min", "prod", "KINDS", "reduce_axes"]

KINDS = ("sum", "mean", "max", "min", "prod")
_SCHEMA = {"keepdims": True, "noop_with_empty_axes": False, "node": ""}


def _rel(arg_types: list[Type], attrs: Any) -> Type:
    data = tensor_arg(arg_types[0], "the data")
    axes = tensor_arg(arg_types[1], "the axes")
    if len(axes.shape) != 1 or not str(axes.dtype).startswith(("int", "uint")):
        raise RelayTypeError(f"the axes must be a 1-D integer tensor, got {axes}")
    r = len(data.shape)
    if attrs.keepdims:
        return TensorType([1 if isinstance(d, int) and d == 1 else AnyDim() for d in data.shape],
                          data.dtype)
    n = axes.shape[0]
    if not isinstance(n, int):
        raise RelayTypeError("without keepdims the number of axes must be static (it is the "
                             f"rank drop), got axes {axes}")
    if n == 0:  # every axis, or (noop) none
        return TensorType(list(data.shape) if attrs.noop_with_empty_axes else [], data.dtype)
    if n > r:
        raise RelayTypeError(f"{n} axes for data of rank {r}")
    return TensorType([AnyDim() for _ in range(r - n)], data.dtype)


def reduce_axes(attrs: Any, rank: int, axes: np.ndarray) -> list[int] | None:
    """The normalized reduced axes (None: none at all), checked: an axis out of range or a
    repeated one is an error naming the node and the value."""
    vals = [int(v) for v in np.asarray(axes).reshape(-1)]
    where = attrs.node or "reduce"
    if not vals:
        return None if attrs.noop_with_empty_axes else list(range(rank))
    out = []
    for v in vals:
        if not -rank <= v < builtins.max(rank, 1):
            raise ValueError(f"{where}: axes value {v} is out of range for data of rank {rank}")
        out.append(v % builtins.max(rank, 1))
    if len(set(out)) != len(out):
        raise ValueError(f"{where}: repeated axes {vals}")
    return out


def _shape(attrs: Any, inputs: list[np.ndarray]) -> list[tuple[int, ...]]:
    data, axes = inputs
    s = data.shape
    red = reduce_axes(attrs, len(s), axes)
    red_set = set(red or [])
    if attrs.keepdims:
        return [tuple(1 if k in red_set else d for k, d in enumerate(s))]
    return [tuple(d for k, d in enumerate(s) if k not in red_set)]


def _identity(kind: str, dtype: np.dtype) -> Any:
    if kind == "max":
        return False if dtype == np.bool_ else (-np.inf if dtype.kind == "f"
                                                else np.iinfo(dtype).min)
    if kind == "min":
        return True if dtype == np.bool_ else (np.inf if dtype.kind == "f"
                                               else np.iinfo(dtype).max)
    return None


def _numpy(kind: str) -> Any:
    def f(attrs: Any, ins: list[np.ndarray], t: Any) -> np.ndarray:
        x = np.asarray(ins[0])
        red = reduce_axes(attrs, x.ndim, ins[1])
        if red is None:
            return x.copy()
        ax = tuple(red)
        keep = bool(attrs.keepdims)
        if kind in ("max", "min"):
            fn = np.max if kind == "max" else np.min
            out = fn(x, axis=ax, keepdims=keep, initial=_identity(kind, x.dtype))
        elif kind == "mean":
            n = int(np.prod([x.shape[a] for a in ax]))
            wide = np.float32 if x.dtype == np.float16 else x.dtype
            out = np.sum(x, axis=ax, keepdims=keep, dtype=wide) / builtins.max(n, 1)
        else:
            wide = np.float32 if x.dtype == np.float16 else None
            out = (np.sum if kind == "sum" else np.prod)(x, axis=ax, keepdims=keep, dtype=wide)
        return np.asarray(out).astype(x.dtype)
    return f


def _compute(kind: str) -> Any:
    def f(attrs: Any, inputs: list, out_type: Any) -> list:
        from ....topi.dyn.reduce import dyn_reduce

        return [dyn_reduce(inputs[0], inputs[1], list(out_type.shape), kind,
                                           bool(attrs.keepdims))]
    return f




for _k in KINDS:
    _name = f"dyn.{_k}"
    register_op(_name, _rel, OpPattern.OPAQUE, 2, _SCHEMA,
                f"{_k} over the axes given by a run-time tensor")
    register_op_attr(_name, "FNumpy", _numpy(_k))
    register_shape_func(_name, _shape, data_dependent=True)
    register_axes_strategy(_name, _compute(_k), reduces=True)
    if _k in ("sum", "mean", "prod"):  # float16 accumulates in float32 (max/min are exact)
        register_float16_accumulation(_name)


def _make(kind: str) -> Any:
    def f(data: RelayExpr, axes: RelayExpr, keepdims: bool = True,
          noop_with_empty_axes: bool = False, node: str = "") -> RelayExpr:
        return make_call(f"dyn.{kind}", [data, axes], {
            "keepdims": bool(keepdims), "noop_with_empty_axes": bool(noop_with_empty_axes),
            "node": str(node)})
    f.__name__ = kind
    f.__doc__ = (f"``{kind}`` of ``data`` over the axes in the 1-D integer tensor ``axes`` (read "
                 "at run time); ``node`` names the source node in errors.")
    return f


sum = _make("sum")  # noqa: A001
mean = _make("mean")
max = _make("max")  # noqa: A001
min = _make("min")  # noqa: A001
prod = _make("prod")
