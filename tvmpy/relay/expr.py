"""Relay expressions: the dataflow graph IR (Var, Constant, Call, Tuple, TupleGetItem, Let, If,
Function, GlobalVar) and the user-facing builders ``var``/``const``.

Nodes are immutable (``tvmpy.ir.node.Node``) and shared freely, so a graph is a DAG. The one
exception is the ``checked_type`` cache: type inference writes each node's type once; the type is
a pure function of the node (its subgraph and annotations), so caching it changes no meaning.
``==`` on relay expressions is identity; use ``tvmpy.ir.structural_equal`` to compare programs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..ir import dtype as _dt
from ..ir import expr as _ir
from ..ir.expr import GlobalVar
from ..ir.function import BaseFunc
from ..ir.node import Node
from .ty import FuncType, TensorType, Type

__all__ = [
    "RelayExpr",
    "Expr",
    "Var",
    "GlobalVar",
    "Constant",
    "Call",
    "Tuple",
    "TupleGetItem",
    "Let",
    "If",
    "Function",
    "Attrs",
    "ConstData",
    "var",
    "const",
    "RelayTypeError",
]


class RelayTypeError(TypeError):
    """A type/shape error found by type inference; the message names the node and the shapes."""


class Attrs(Node):
    """Operator attributes: an immutable mapping, readable as ``attrs.strides`` or ``attrs["strides"]``.

    Keys are kept sorted so that two Attrs with the same content compare structurally equal.
    """

    __slots__ = ("values",)

    def __init__(self, values: Mapping[str, Any] | None = None):
        vals = {k: _freeze(v) for k, v in sorted((values or {}).items())}
        self._init(values=vals)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        try:
            return object.__getattribute__(self, "values")[name]
        except KeyError:
            raise AttributeError(f"attrs have no field {name!r} (fields: {sorted(self.values)})") from None

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    def __contains__(self, name: str) -> bool:
        return name in self.values

    def get(self, name: str, default: Any = None) -> Any:
        return self.values.get(name, default)

    def keys(self):
        return self.values.keys()

    def items(self):
        return self.values.items()

    def __str__(self) -> str:
        return "{" + ", ".join(f"{k}={v!r}" for k, v in self.values.items()) + "}"


def _freeze(v: Any) -> Any:
    if isinstance(v, list):
        return tuple(_freeze(x) for x in v)
    if isinstance(v, tuple):
        return tuple(_freeze(x) for x in v)
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.floating):
        return float(v)
    return v


class ConstData:
    """The value of a Constant: a read-only numpy array, compared and hashed by content.

    ``.numpy()`` returns the array (as ``tvm.nd.NDArray.numpy()`` does in TVM).
    """

    __slots__ = ("_a", "_h")

    def __init__(self, a: np.ndarray, copy: bool = True, *, strided: bool = False):
        """``copy=False``: adopt ``a`` (a C-contiguous array the caller just made, which no
        one else writes) without copying it; it is made read-only. ``strided=True``: adopt
        ``a`` even when it is a strided view (of arrays no one writes): it is copied to a
        C-contiguous array only when ``numpy()`` is first asked for, so a chain of layout
        changes folded one by one (transpose, reshape, transpose of a packed weight) is
        copied once, not once per step (``strided()`` reads it without the copy)."""
        keep = isinstance(a, np.ndarray) and (a.flags.c_contiguous or strided)
        if copy or not keep:
            a = np.array(a, copy=True)
        a.setflags(write=False)
        object.__setattr__(self, "_a", a)
        object.__setattr__(self, "_h", None)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("ConstData is immutable")

    def numpy(self) -> np.ndarray:
        """The value, a read-only C-contiguous array."""
        a = self._a
        if not a.flags.c_contiguous:  # adopted strided (see __init__): copied once, here
            a = np.array(a, order="C")
            a.setflags(write=False)
            object.__setattr__(self, "_a", a)
        return a

    def strided(self) -> np.ndarray:
        """The value as held: a read-only array, maybe a strided view (numpy semantics)."""
        return self._a

    def __reduce__(self):
        return (ConstData, (self.numpy(),))

    asnumpy = numpy

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self._a.shape)

    @property
    def dtype(self) -> str:
        return str(self._a.dtype)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ConstData):
            return NotImplemented
        a, b = self._a, other._a
        return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()

    def __hash__(self) -> int:
        if self._h is None:
            object.__setattr__(self, "_h", hash((self._a.dtype.str, self._a.shape, self._a.tobytes())))
        return self._h

    def __repr__(self) -> str:
        return f"ConstData({self._a!r})"


class RelayExpr(_ir.RelayExpr):
    """Base of relay expressions. Arithmetic operators build ``add``/``subtract``/... calls."""

    __slots__ = ()

    @property
    def checked_type(self) -> Type:
        t = getattr(self, "_checked_type", None)
        if t is None and isinstance(self, Var) and self.type_annotation is not None:
            return self.type_annotation  # a parameter's type is its annotation
        return _ir.RelayExpr.checked_type.fget(self)  # type: ignore[attr-defined]

    def as_function(self) -> Function:
        """A function over this expression's free variables with it as the body (how
        ``IRModule.from_expr`` wraps an expression)."""
        from .analysis import free_vars

        return Function(free_vars(self), self)

    def __str__(self) -> str:
        from .printer import astext

        return astext(self)

    def astext(self, show_meta_data: bool = True, annotate: Any = None,
               show_types: bool = True) -> str:
        """TVM's text format (see ``IRModule.astext``): version line, the expression, the
        metadata section (``show_meta_data``) or a note that it was left out."""
        from ..ir.function import TextMeta
        from .printer import astext

        meta = TextMeta(annotate)
        return meta.finish(astext(self, show_types, meta), show_meta_data)

    def __bool__(self) -> bool:
        raise TypeError("a relay expression has no truth value (use structural_equal / `is`)")

    # arithmetic sugar, as in TVM
    def _bin(self, name: str, other: Any, reverse: bool = False) -> RelayExpr:
        from .op import tensor as _t

        o = other if isinstance(other, RelayExpr) else _const_like(other, self)
        a, b = (o, self) if reverse else (self, o)
        return getattr(_t, name)(a, b)

    def __add__(self, o: Any) -> RelayExpr:
        return self._bin("add", o)

    def __radd__(self, o: Any) -> RelayExpr:
        return self._bin("add", o, True)

    def __sub__(self, o: Any) -> RelayExpr:
        return self._bin("subtract", o)

    def __rsub__(self, o: Any) -> RelayExpr:
        return self._bin("subtract", o, True)

    def __mul__(self, o: Any) -> RelayExpr:
        return self._bin("multiply", o)

    def __rmul__(self, o: Any) -> RelayExpr:
        return self._bin("multiply", o, True)

    def __truediv__(self, o: Any) -> RelayExpr:
        return self._bin("divide", o)

    def __rtruediv__(self, o: Any) -> RelayExpr:
        return self._bin("divide", o, True)

    def __neg__(self) -> RelayExpr:
        from .op import tensor as _t

        return _t.negative(self)

    def astype(self, dtype: str) -> RelayExpr:
        from .op import transform as _tr

        return _tr.cast(self, dtype)


Expr = RelayExpr


def _const_like(value: Any, like: RelayExpr) -> Constant:
    t = getattr(like, "_checked_type", None)
    if t is None and isinstance(like, Var) and like.type_annotation is not None:
        t = like.type_annotation
    dtype = t.dtype if isinstance(t, TensorType) else None
    return const(value, dtype)


class Var(RelayExpr):
    """A local variable: a function parameter or a let-bound name, compared by binding site."""

    __slots__ = ("name_hint", "type_annotation")
    name_hint: str
    type_annotation: Type | None
    _struct_var = True

    def __init__(self, name_hint: str, type_annotation: Type | None = None):
        if type_annotation is not None and not isinstance(type_annotation, Type):
            raise TypeError(f"type_annotation must be a relay Type, got {type_annotation!r}")
        self._init(name_hint=str(name_hint), type_annotation=type_annotation, span=None)

    def _struct_sig(self) -> str:
        return str(self.type_annotation)


class Constant(RelayExpr):
    """A constant tensor. ``data`` is a ConstData (``data.numpy()`` gives the array)."""

    __slots__ = ("data",)
    data: ConstData

    def __init__(self, data: Any):
        if not isinstance(data, ConstData):
            arr = np.asarray(data)
            if arr.dtype == np.float64 and not isinstance(data, np.ndarray):
                arr = arr.astype("float32")
            data = ConstData(arr)
        _dt.parse(data.dtype)
        self._init(data=data, span=None)


class Call(RelayExpr):
    """``op(args...)`` with attributes; ``op`` is an Op (operator), a Function or a GlobalVar."""

    __slots__ = ("op", "args", "attrs")
    op: Any
    args: tuple[RelayExpr, ...]
    attrs: Attrs

    def __init__(self, op: Any, args: Sequence[RelayExpr], attrs: Attrs | Mapping | None = None):
        args = tuple(args)
        for a in args:
            if not isinstance(a, RelayExpr):
                raise TypeError(f"arguments of a call must be relay expressions, got {a!r}")
        if attrs is None or isinstance(attrs, Mapping):
            attrs = Attrs(attrs)
        self._init(op=op, args=args, attrs=attrs, span=None)


class Tuple(RelayExpr):
    __slots__ = ("fields",)
    fields: tuple[RelayExpr, ...]

    def __init__(self, fields: Sequence[RelayExpr]):
        fields = tuple(fields)
        for f in fields:
            if not isinstance(f, RelayExpr):
                raise TypeError(f"tuple fields must be relay expressions, got {f!r}")
        self._init(fields=fields, span=None)

    def __len__(self) -> int:
        return len(self.fields)

    def __getitem__(self, i: int) -> RelayExpr:
        return self.fields[i]


class TupleGetItem(RelayExpr):
    __slots__ = ("tuple_value", "index")
    tuple_value: RelayExpr
    index: int

    def __init__(self, tuple_value: RelayExpr, index: int):
        if not isinstance(tuple_value, RelayExpr):
            raise TypeError(f"TupleGetItem needs a relay expression, got {tuple_value!r}")
        self._init(tuple_value=tuple_value, index=int(index), span=None)


class Let(RelayExpr):
    """``let var = value; body``."""

    __slots__ = ("var", "value", "body")
    var: Var
    value: RelayExpr
    body: RelayExpr
    _def_fields = ("var",)

    def __init__(self, var: Var, value: RelayExpr, body: RelayExpr):
        if not isinstance(var, Var):
            raise TypeError(f"Let binds a relay Var, got {var!r}")
        self._init(var=var, value=value, body=body, span=None)


class If(RelayExpr):
    __slots__ = ("cond", "true_branch", "false_branch")
    cond: RelayExpr
    true_branch: RelayExpr
    false_branch: RelayExpr

    def __init__(self, cond: RelayExpr, true_branch: RelayExpr, false_branch: RelayExpr):
        self._init(cond=cond, true_branch=true_branch, false_branch=false_branch, span=None)


class Function(RelayExpr, BaseFunc):
    """``fn (params) -> ret_type { body }``; ``attrs`` holds e.g. ``Primitive=1`` after fusion."""

    __slots__ = ("params", "body", "ret_type", "attrs")
    params: tuple[Var, ...]
    body: RelayExpr
    ret_type: Type | None
    attrs: Attrs
    _def_fields = ("params",)

    def __init__(
        self,
        params: Sequence[Var],
        body: RelayExpr,
        ret_type: Type | None = None,
        type_params: Sequence[Any] | None = None,
        attrs: Attrs | Mapping | None = None,
    ):
        if type_params:
            raise NotImplementedError("polymorphic functions (type_params) are not supported")
        params = tuple(params)
        for p in params:
            if not isinstance(p, Var):
                raise TypeError(f"function parameters must be relay Vars, got {p!r}")
        if not isinstance(body, RelayExpr):
            raise TypeError(f"function body must be a relay expression, got {body!r}")
        if attrs is None or isinstance(attrs, Mapping):
            attrs = Attrs(attrs)
        self._init(params=params, body=body, ret_type=ret_type, attrs=attrs, span=None)

    def with_attr(self, key: str, value: Any) -> Function:
        vals = dict(self.attrs.values)
        vals[key] = value
        return Function(self.params, self.body, self.ret_type, attrs=vals)

    def astext_global(self, name: str, show_types: bool = True, meta: Any = None) -> str:
        from .module import IRModule
        from .printer import astext

        return astext(IRModule({name: self}), show_types, meta)

    @property
    def func_type(self) -> FuncType:
        t = self.checked_type
        assert isinstance(t, FuncType)
        return t


def var(
    name_hint: str,
    type_annotation: Type | None = None,
    shape: Sequence[Any] | None = None,
    dtype: str = "float32",
) -> Var:
    """``relay.var("x", shape=(1, 3), dtype="float32")``, or with an explicit type."""
    if type_annotation is not None and shape is not None:
        raise ValueError("give either type_annotation or shape, not both")
    if isinstance(type_annotation, str):  # relay.var("x", "float32"): a scalar
        type_annotation = TensorType((), type_annotation)
    if type_annotation is None and shape is not None:
        type_annotation = TensorType(shape, dtype)
    return Var(name_hint, type_annotation)


def const(value: Any, dtype: str | None = None) -> Constant:
    """``relay.const(np_array)`` or ``relay.const(1.0, "float32")``.

    Python floats default to float32 and Python ints to int32, as in TVM.
    """
    if isinstance(value, np.ndarray):
        arr = value.astype(dtype) if dtype is not None else value
    else:
        arr = np.asarray(value)
        if dtype is None:
            if arr.dtype == np.float64:
                dtype = "float32"
            elif arr.dtype == np.int64 and not isinstance(value, np.generic):
                dtype = "int32"
        arr = arr.astype(dtype) if dtype is not None else arr
    return Constant(ConstData(arr))


# ``gv(x)`` for a GlobalVar (TVM's GlobalVar.__call__): a relay Call of that global function
def _call_global(gv: GlobalVar, args: Sequence[Any]) -> Call:
    return Call(gv, args)


_ir.register_global_var_call(_call_global)
