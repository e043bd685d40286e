"""Reductions (pattern COMM_REDUCE): sum, mean, max, min, prod, argmax, argmin, variance, all, any.

``axis=None`` reduces every axis; ``exclude=True`` reduces every axis *not* listed.
"""

from __future__ import annotations

from typing import Any

from ..expr import RelayExpr
from ..ty import TensorType, Type
from ._rel import normalize_axes, tensor_arg
from .registry import OpPattern, make_call, register_float16_accumulation, register_op

__all__ = ["sum", "mean", "max", "min", "prod", "argmax", "argmin", "variance", "all", "any"]

_SCHEMA = {"axis": None, "keepdims": False, "exclude": False}


def _reduced_axes(t: TensorType, attrs: Any) -> list[int]:
    axes = normalize_axes(attrs.axis, len(t.shape))
    if attrs.exclude:
        axes = [i for i in range(len(t.shape)) if i not in axes]
    return axes


def _reduce_rel(arg_types: list[Type], attrs: Any, dtype: str | None = None) -> Type:
    t = tensor_arg(arg_types[0], "the input")
    axes = _reduced_axes(t, attrs)
    if attrs.keepdims:
        shp = [1 if i in axes else s for i, s in enumerate(t.shape)]
    else:
        shp = [s for i, s in enumerate(t.shape) if i not in axes]
    return TensorType(shp, dtype or t.dtype)


def _arg_rel(arg_types: list[Type], attrs: Any) -> Type:
    return _reduce_rel(arg_types, attrs, "int32")


def _bool_rel(arg_types: list[Type], attrs: Any) -> Type:
    return _reduce_rel(arg_types, attrs, "bool")


def _variance_rel(arg_types: list[Type], attrs: Any) -> Type:
    tensor_arg(arg_types[1], "the mean")
    return _reduce_rel(arg_types[:1], attrs)


for _n in ("sum", "mean", "max", "min", "prod"):
    register_op(_n, _reduce_rel, OpPattern.COMM_REDUCE, 1, _SCHEMA)
register_op("argmax", _arg_rel, OpPattern.COMM_REDUCE, 1, _SCHEMA)
register_op("argmin", _arg_rel, OpPattern.COMM_REDUCE, 1, _SCHEMA)
register_op("all", _bool_rel, OpPattern.COMM_REDUCE, 1, _SCHEMA)
register_op("any", _bool_rel, OpPattern.COMM_REDUCE, 1, _SCHEMA)
register_op("variance", _variance_rel, OpPattern.COMM_REDUCE, 2, {**_SCHEMA, "unbiased": False})
# sums and products of float16 accumulate in float32 (max/min/arg*/all/any are exact)
for _n in ("sum", "mean", "prod", "variance"):
    register_float16_accumulation(_n)


def _axis(axis: Any) -> Any:
    if axis is None:
        return None
    if isinstance(axis, int):
        return (axis,)
    return tuple(int(a) for a in axis)


def _reducer(name: str):
    def f(data: RelayExpr, axis: Any = None, keepdims: bool = False, exclude: bool = False) -> RelayExpr:
        return make_call(name, [data], {"axis": _axis(axis), "keepdims": bool(keepdims),
                                        "exclude": bool(exclude)})

    f.__name__ = name
    f.__doc__ = f"``{name}`` over ``axis`` (None: all axes)."
    return f


sum = _reducer("sum")  # noqa: A001
mean = _reducer("mean")
max = _reducer("max")  # noqa: A001
min = _reducer("min")  # noqa: A001
prod = _reducer("prod")
argmax = _reducer("argmax")
argmin = _reducer("argmin")
all = _reducer("all")  # noqa: A001
any = _reducer("any")  # noqa: A001


def variance(data: RelayExpr, mean: RelayExpr, axis: Any = None, keepdims: bool = False,
             exclude: bool = False, unbiased: bool = False) -> RelayExpr:
    return make_call("variance", [data, mean], {"axis": _axis(axis), "keepdims": bool(keepdims),
                                                "exclude": bool(exclude), "unbiased": bool(unbiased)})
