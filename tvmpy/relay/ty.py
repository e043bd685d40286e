"""Relay types: ``TensorType(shape, dtype)``, ``TupleType(fields)``, ``FuncType(args, ret)``.

A shape is a tuple of dimensions; a dimension is a Python ``int`` or a symbolic ``tir`` integer
expression (``te.var("n")``, ``n * 2``...). Helpers here compare and simplify dimensions so that the
type relations treat ``n + 1 - 1`` and ``n`` as the same size.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..ir import dtype as _dt
from ..ir.node import Node
from ..tir import expr as _te

Dim = Any  # int | tir.PrimExpr

__all__ = [
    "Type",
    "TensorType",
    "TupleType",
    "FuncType",
    "Dim",
    "as_dim",
    "dim_equal",
    "dim_str",
    "is_static",
]


def as_dim(d: Any) -> Dim:
    """Normalize a dimension: ints (and constant tir ints) to ``int``, simplify expressions."""
    if isinstance(d, bool):
        raise TypeError(f"a shape dimension must be an int or an integer expression, got {d!r}")
    if isinstance(d, int):
        return d
    if hasattr(d, "__index__") and not isinstance(d, _te.PrimExpr):  # numpy ints
        return int(d)
    if isinstance(d, _te.PrimExpr):
        if not _dt.is_integer(d.dtype):
            raise TypeError(f"a shape dimension must be an integer expression, got {d} ({d.dtype})")
        from ..arith import simplify

        d = simplify(d)
        v = _te.const_value(d)
        return int(v) if v is not None else d
    raise TypeError(f"a shape dimension must be an int or an integer expression, got {d!r}")


def dim_equal(a: Dim, b: Dim) -> bool:
    """True when the two dimensions are provably equal."""
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    from ..arith import simplify

    diff = simplify(_te.convert(a) - _te.convert(b))
    v = _te.const_value(diff)
    return v is not None and v == 0


def dim_str(d: Dim) -> str:
    return str(d)


def is_static(shape: Sequence[Dim]) -> bool:
    return all(isinstance(d, int) for d in shape)


class Type(Node):
    """Base of relay types. Printed like TVM: ``Tensor[(1, 3), float32]``."""

    __slots__ = ()

    def __str__(self) -> str:
        return type_str(self)


class TensorType(Type):
    """The type of a tensor: a shape (ints or symbolic dims) and an element dtype."""

    __slots__ = ("shape", "dtype")
    _fields = ("shape", "dtype")

    def __init__(self, shape: Sequence[Any], dtype: str = "float32"):
        if isinstance(shape, (int, _te.PrimExpr)):
            shape = (shape,)
        shp = tuple(as_dim(d) for d in shape)
        for d in shp:
            if isinstance(d, int) and d < 0:
                raise ValueError(f"negative dimension {d} in shape {shp}")
        dtype = str(dtype)
        _dt.parse(dtype)
        self._init(shape=shp, dtype=dtype)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def concrete_shape(self) -> tuple[int, ...]:
        if not is_static(self.shape):
            raise ValueError(f"{self} has symbolic dimensions")
        return tuple(self.shape)


class TupleType(Type):
    __slots__ = ("fields",)
    _fields = ("fields",)

    def __init__(self, fields: Sequence[Type]):
        fields = tuple(fields)
        for f in fields:
            if not isinstance(f, Type):
                raise TypeError(f"TupleType fields must be types, got {f!r}")
        self._init(fields=fields)

    def __len__(self) -> int:
        return len(self.fields)

    def __getitem__(self, i: int) -> Type:
        return self.fields[i]


class FuncType(Type):
    __slots__ = ("arg_types", "ret_type")
    _fields = ("arg_types", "ret_type")

    def __init__(self, arg_types: Sequence[Type], ret_type: Type):
        self._init(arg_types=tuple(arg_types), ret_type=ret_type)


def type_str(t: Any) -> str:
    if isinstance(t, TensorType):
        if not t.shape:
            return t.dtype  # a scalar, as TVM prints it
        if len(t.shape) == 1:
            shp = f"({dim_str(t.shape[0])})"
        else:
            shp = "(" + ", ".join(dim_str(d) for d in t.shape) + ")"
        return f"Tensor[{shp}, {t.dtype}]"
    if isinstance(t, TupleType):
        return "(" + ", ".join(type_str(f) for f in t.fields) + ("," if len(t.fields) == 1 else "") + ")"
    if isinstance(t, FuncType):
        return "fn (" + ", ".join(type_str(a) for a in t.arg_types) + ") -> " + type_str(t.ret_type)
    return str(t)
