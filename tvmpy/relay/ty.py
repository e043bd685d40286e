"""Relay types: ``TensorType(shape, dtype)``, ``TupleType(fields)``, ``FuncType(args, ret)``.

A shape is a tuple of dimensions; a dimension is a Python ``int`` or a symbolic ``tir`` integer
expression (``te.var("n")``, ``n * 2``...). Helpers here compare and simplify dimensions so that the
type relations treat ``n + 1 - 1`` and ``n`` as the same size.

``Any()`` (TVM's ``relay.Any``) is a dimension known only at run time: a size variable of its own
(each ``Any()`` is distinct; the same object in two places means the same size), printed ``?``.
The type relations treat it as TVM does: it unifies with any concrete size (``type_compatible``),
broadcasts to the other side's size unless that side is 1, and two different ``Any`` broadcast to
``max(?, ?)``; where an operator needs two sizes equal the relation records the equality, which
the executors check at run time (relay/size_checks.py). Being a ``tir`` size variable, it also
becomes the symbolic extent of the kernels generated for it (one compiled function serves every
size).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any as _AnyT

from ..ir import dtype as _dt
from ..ir.node import Node
from ..tir import expr as _te

Dim = _AnyT  # int | tir.PrimExpr

__all__ = [
    "Type",
    "TensorType",
    "TupleType",
    "FuncType",
    "ListType",
    "Dim",
    "Any",
    "is_any",
    "has_any",
    "dim_compatible",
    "as_dim",
    "dim_equal",
    "dim_str",
    "is_static",
    "scalar_type",
]


def as_dim(d: _AnyT) -> Dim:
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


class Any(_te.SizeVar):
    """``relay.Any()``: a dimension unknown until run time (printed ``?`` in relay types).

    ``hint`` names it in generated code and error messages (``from_onnx`` passes the ONNX
    ``dim_param``); the name is made unique, so two ``Any`` never share a kernel's shape var."""

    __slots__ = ()
    _count = 0
    broadcast_at_run_time = True  # topi broadcasts it when it is 1 at run time (size_checks.py)

    def __init__(self, hint: str = "any"):
        hint = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in str(hint)) or "any"
        if not (hint[0].isalpha() or hint[0] == "_"):
            hint = "d_" + hint
        Any._count += 1
        super().__init__(f"{hint}_{Any._count}", "int32")


def is_any(d: _AnyT) -> bool:
    """Whether ``d`` is an ``Any`` dimension."""
    return isinstance(d, Any)


def has_any(shape: Sequence[Dim]) -> bool:
    """Whether some dimension of ``shape`` is, or is computed from, an ``Any``."""
    from ..tir.functor import collect_vars

    return any(isinstance(d, _te.PrimExpr) and any(isinstance(v, Any) for v in collect_vars(d))
               for d in shape)


def dim_compatible(a: Dim, b: Dim) -> bool:
    """True when the two dimensions may be the same size: provably equal, or either involves
    an ``Any`` (which unifies with any size)."""
    return dim_equal(a, b) or has_any((a,)) or has_any((b,))


def dim_equal(a: Dim, b: Dim) -> bool:
    """True when the two dimensions are provably equal."""
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    from ..arith import simplify

    diff = simplify(_te.convert(a) - _te.convert(b))
    v = _te.const_value(diff)
    return v is not None and v == 0


def dim_str(d: Dim) -> str:
    """A dimension as relay prints it: ``?`` for ``Any``."""
    if isinstance(d, Any):
        return "?"
    text = str(d)
    if isinstance(d, _te.PrimExpr) and has_any((d,)):  # n * 48 with n an Any: "? * 48"
        import re

        from ..tir.functor import collect_vars

        for v in collect_vars(d):
            if isinstance(v, Any):
                text = re.sub(rf"\b{re.escape(v.name)}\b", "?", text)
    return text


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
    shape: tuple[_AnyT, ...]    # ints and symbolic dims (tir PrimExprs)
    dtype: str

    def __init__(self, shape: Sequence[_AnyT], dtype: str = "float32"):
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


class ListType(Type):
    """A list of tensors whose length is known only at run time (an ONNX sequence grown in a
    loop or fed as a graph input of unknown length): TVM's prelude ``List[Tensor[...]]`` in
    effect. ``elem`` is the type every element has (``Any`` where their sizes differ), or None
    for a list known to be empty when built (then only ``dtype`` is known: ONNX SequenceEmpty).
    Lists are values of the interpreter/VM (Python lists there), made and read by the ``list.*``
    operators (relay/op/sequence.py); no kernel takes one."""

    __slots__ = ("elem", "dtype")
    _fields = ("elem", "dtype")

    def __init__(self, elem: TensorType | None, dtype: str | None = None):
        if elem is not None and not isinstance(elem, TensorType):
            raise TypeError(f"ListType holds tensors, got {elem!r}")
        dtype = elem.dtype if elem is not None else str(dtype or "float32")
        self._init(elem=elem, dtype=dtype)


def type_str(t: _AnyT) -> str:
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
    if isinstance(t, ListType):
        return f"List[{type_str(t.elem) if t.elem is not None else t.dtype}]"
    if isinstance(t, FuncType):
        return "fn (" + ", ".join(type_str(a) for a in t.arg_types) + ") -> " + type_str(t.ret_type)
    return str(t)


def scalar_type(dtype: str) -> TensorType:
    """TVM's ``relay.scalar_type("float32")``: the type of a 0-d tensor of ``dtype``."""
    return TensorType((), dtype)
