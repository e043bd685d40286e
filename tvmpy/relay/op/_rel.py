"""Helpers shared by the type relations: argument checks, numpy broadcasting on (symbolic) shapes,
axis normalization. Every error says what was expected and what the shapes were."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...tir.op import max as tir_max
from ..expr import RelayTypeError
from ..size_checks import require_same
from ..ty import Dim, TensorType, TupleType, Type, as_dim, dim_equal, is_any, type_str

__all__ = [
    "tensor_arg",
    "broadcast_shape",
    "normalize_axis",
    "normalize_axes",
    "shape_str",
    "fail",
    "identity_rel",
    "broadcast_rel",
    "size_of",
]


def fail(msg: str) -> None:
    raise RelayTypeError(msg)


def shape_str(shape: Sequence[Dim]) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def tensor_arg(t: Type, what: str) -> TensorType:
    if not isinstance(t, TensorType):
        raise RelayTypeError(f"{what} must be a tensor, got {type_str(t)}")
    return t


def tuple_arg(t: Type, what: str) -> TupleType:
    if not isinstance(t, TupleType):
        raise RelayTypeError(f"{what} must be a tuple, got {type_str(t)}")
    return t


def broadcast_shape(a: Sequence[Dim], b: Sequence[Dim],
                    names: tuple[str, str] = ("the lhs", "the rhs")) -> tuple[Dim, ...]:
    """numpy broadcasting of two shapes (symbolic dims must be provably equal, or one is 1).

    An ``Any`` dimension broadcasts as in TVM: against 1 it stays ``Any``; against another size
    (an ``Any`` too) it takes the more specific one, and the run-time equality (or a side of
    size 1) is recorded for the executors to check (relay/size_checks.py)."""
    n = max(len(a), len(b))
    pa = (1,) * (n - len(a)) + tuple(a)
    pb = (1,) * (n - len(b)) + tuple(b)
    out = []
    for i, (x, y) in enumerate(zip(pa, pb)):
        if dim_equal(x, y):
            out.append(x)
        elif isinstance(x, int) and x == 1:
            out.append(y)
        elif isinstance(y, int) and y == 1:
            out.append(x)
        elif is_any(x) and is_any(y):  # 1 or the other's at run time: the larger one
            require_same(x, y, f"dimension {i - n} of {names[0]}",
                         f"dimension {i - n} of {names[1]}", bcast=True)
            out.append(as_dim(tir_max(x, y)))
        else:
            d = require_same(x, y, f"dimension {i - n} of {names[0]}",
                             f"dimension {i - n} of {names[1]}", bcast=True)
            if d is None:
                raise RelayTypeError(
                    f"shapes {shape_str(a)} and {shape_str(b)} do not broadcast "
                    f"(dimension {i - n} is {x} vs {y})"
                )
            out.append(d)
    return tuple(out)


def normalize_axis(axis: int, ndim: int, what: str = "axis") -> int:
    axis = int(axis)
    if not -ndim <= axis < max(ndim, 1) or (ndim == 0 and axis not in (0, -1)):
        raise RelayTypeError(f"{what} {axis} is out of range for a tensor of rank {ndim}")
    return axis + ndim if axis < 0 else axis


def normalize_axes(axes: Any, ndim: int) -> list[int]:
    if axes is None:
        return list(range(ndim))
    if isinstance(axes, int):
        axes = [axes]
    out = [normalize_axis(a, ndim) for a in axes]
    if len(set(out)) != len(out):
        raise RelayTypeError(f"repeated axes {list(axes)}")
    return out


def size_of(shape: Sequence[Dim]) -> Dim:
    s: Any = 1
    for d in shape:
        s = s * d
    return as_dim(s)


def identity_rel(arg_types: list[Type], attrs: Any) -> Type:
    return tensor_arg(arg_types[0], "the input")


def broadcast_rel(arg_types: list[Type], attrs: Any) -> Type:
    a = tensor_arg(arg_types[0], "the lhs")
    b = tensor_arg(arg_types[1], "the rhs")
    if a.dtype != b.dtype:
        fail(f"dtypes differ: lhs {a.dtype} {shape_str(a.shape)} vs rhs {b.dtype} {shape_str(b.shape)}")
    return TensorType(broadcast_shape(a.shape, b.shape), a.dtype)


def broadcast_bool_rel(arg_types: list[Type], attrs: Any) -> Type:
    t = broadcast_rel(arg_types, attrs)
    assert isinstance(t, TensorType)
    return TensorType(t.shape, "bool")
