"""Type inference: the shape and dtype of every node, from parameter annotations forward.

``infer_type(expr)`` types an expression (free variables need annotations);
``InferType()(mod)`` types every function of a module (calls between globals are followed).
Each node's type is cached on it (``expr.checked_type``). An operator's type comes from its
registered type relation; a failure raises ``RelayTypeError`` naming the node (operator and a short
printed form), the argument types, and the relation's own message with the mismatching shapes.
"""

from __future__ import annotations

from typing import Any

from .expr import (
    Call,
    Constant,
    Function,
    GlobalVar,
    If,
    Let,
    RelayExpr,
    RelayTypeError,
    Tuple,
    TupleGetItem,
    Var,
)
from .op.registry import Op
from .size_checks import collecting, set_size_checks
from .ty import Any as AnyDim
from .ty import (
    FuncType,
    ListType,
    TensorType,
    TupleType,
    Type,
    dim_compatible,
    dim_equal,
    type_str,
)
from .visitor import ExprFunctor

__all__ = ["infer_type", "type_equal", "type_compatible", "unify", "TypeInferencer"]


def type_equal(a: Type, b: Type) -> bool:
    """Structural type equality, with symbolic dimensions compared by value."""
    if isinstance(a, TensorType) and isinstance(b, TensorType):
        return a.dtype == b.dtype and len(a.shape) == len(b.shape) and all(
            dim_equal(x, y) for x, y in zip(a.shape, b.shape)
        )
    if isinstance(a, TupleType) and isinstance(b, TupleType):
        return len(a.fields) == len(b.fields) and all(type_equal(x, y) for x, y in zip(a.fields, b.fields))
    if isinstance(a, ListType) and isinstance(b, ListType):
        return a.dtype == b.dtype and (a.elem is b.elem or (
            a.elem is not None and b.elem is not None and type_equal(a.elem, b.elem)))
    if isinstance(a, FuncType) and isinstance(b, FuncType):
        return (len(a.arg_types) == len(b.arg_types)
                and all(type_equal(x, y) for x, y in zip(a.arg_types, b.arg_types))
                and type_equal(a.ret_type, b.ret_type))  # fmt: skip
    return False


def type_compatible(a: Type, b: Type) -> bool:
    """Type equality up to ``Any``: an ``Any`` dimension matches every size (TVM unifies it
    with the concrete one)."""
    if isinstance(a, TensorType) and isinstance(b, TensorType):
        return a.dtype == b.dtype and len(a.shape) == len(b.shape) and all(
            dim_compatible(x, y) for x, y in zip(a.shape, b.shape)
        )
    if isinstance(a, TupleType) and isinstance(b, TupleType):
        return len(a.fields) == len(b.fields) and all(
            type_compatible(x, y) for x, y in zip(a.fields, b.fields))
    if isinstance(a, ListType) and isinstance(b, ListType):  # an empty list fits every list
        return a.dtype == b.dtype and (a.elem is None or b.elem is None
                                       or type_compatible(a.elem, b.elem))
    if isinstance(a, FuncType) and isinstance(b, FuncType):
        return (len(a.arg_types) == len(b.arg_types)
                and all(type_compatible(x, y) for x, y in zip(a.arg_types, b.arg_types))
                and type_compatible(a.ret_type, b.ret_type))  # fmt: skip
    return False


def unify(a: Type, b: Type, fresh: bool = False) -> Type | None:
    """The most specific type both ``a`` and ``b`` have: equal dimensions (and ``a``'s ``Any``)
    kept, differing ones a fresh ``Any`` (e.g. the two branches of an If, or a loop-carried value before and after an
    iteration); None when they cannot be unified (different dtypes, ranks or structure).

    ``fresh`` (the If's join): an ``Any`` of ``a`` facing another size in ``b`` becomes a fresh
    ``Any`` too. Keeping it (what a loop-carried type's fixpoint needs: there ``a`` is the loop
    variable's own type) would say the If's result is as big as every other value of that
    ``Any`` (e.g. the branch's input), which executors that bind sizes by name (the VM's
    segments, the graph executor) then enforce."""
    if isinstance(a, TensorType) and isinstance(b, TensorType):
        if a.dtype != b.dtype or len(a.shape) != len(b.shape):
            return None

        def keep(x: Any, y: Any) -> bool:
            return dim_equal(x, y) or (not fresh and isinstance(x, AnyDim))

        if all(keep(x, y) for x, y in zip(a.shape, b.shape)):
            return a  # (without ``fresh``, an ``Any`` of ``a`` already stands for every size)
        return TensorType([x if keep(x, y) else AnyDim() for x, y in zip(a.shape, b.shape)],
                          a.dtype)
    if isinstance(a, TupleType) and isinstance(b, TupleType):
        if len(a.fields) != len(b.fields):
            return None
        fields = [unify(x, y, fresh) for x, y in zip(a.fields, b.fields)]
        if any(f is None for f in fields):
            return None
        if all(f is x for f, x in zip(fields, a.fields)):
            return a
        return TupleType(fields)  # type: ignore[arg-type]
    if isinstance(a, ListType) and isinstance(b, ListType):
        if a.dtype != b.dtype:
            return None
        if a.elem is None or b.elem is None:
            return b if a.elem is None else a
        e = unify(a.elem, b.elem)
        return None if e is None else a if e is a.elem else ListType(e)
    if isinstance(a, FuncType) and isinstance(b, FuncType):
        return a if type_equal(a, b) else None
    return None


def _where(expr: Any) -> str:
    from .printer import short_str

    return short_str(expr)


class TypeInferencer(ExprFunctor):
    """Forward type inference; ``mod`` resolves calls to global functions."""

    def __init__(self, mod: Any = None):
        super().__init__()
        self.mod = mod
        self._in_progress: set[str] = set()

    def visit(self, expr: Any) -> Any:
        t = getattr(expr, "_checked_type", None)
        if t is not None:
            return t
        t = super().visit(expr)
        if isinstance(expr, RelayExpr) and t is not None:
            expr._set_checked_type(t)
        return t

    def _visited(self, e: Any) -> bool:
        return getattr(e, "_checked_type", None) is not None or id(e) in self.memo

    def visit_var(self, v: Var) -> Type:
        if v.type_annotation is None:
            raise RelayTypeError(
                f"variable %{v.name_hint} has no type: give it a type annotation "
                f"(relay.var({v.name_hint!r}, shape=..., dtype=...)) or bind it with a let"
            )
        return v.type_annotation

    def visit_global_var(self, g: GlobalVar) -> Type:
        if self.mod is None:
            raise RelayTypeError(f"@{g.name_hint} needs a module to be typed (use InferType on it)")
        if g.name_hint in self._in_progress:
            # a recursive call (a loop): typed by the function's annotations, which its body is
            # checked against once typed
            f = self.mod[g]
            if f.ret_type is None or any(p.type_annotation is None for p in f.params):
                raise RelayTypeError(f"recursive call to @{g.name_hint}: a recursive function "
                                     "needs a return type annotation (ret_type=...) and "
                                     "annotated parameters")
            return FuncType([p.type_annotation for p in f.params], f.ret_type)
        self._in_progress.add(g.name_hint)
        try:
            return self.visit(self.mod[g])
        finally:
            self._in_progress.discard(g.name_hint)

    def visit_constant(self, c: Constant) -> Type:
        return TensorType(c.data.shape, c.data.dtype)

    def visit_op(self, op: Op) -> None:
        raise RelayTypeError(f"operator {op.name} used as a value (call it instead)")

    def visit_call(self, c: Call) -> Type:
        arg_types = [self.visit(a) for a in c.args]
        if isinstance(c.op, Op):
            n = c.op.num_inputs
            if n >= 0 and len(arg_types) != n:
                raise RelayTypeError(f"in `{_where(c)}`: {c.op.name} takes {n} inputs, got "
                                     f"{len(arg_types)}")
            try:
                with collecting() as sizes:
                    out = c.op.type_rel(arg_types, c.attrs)
                set_size_checks(c, sizes)
            except RelayTypeError as e:
                args = ", ".join(type_str(t) for t in arg_types)
                raise RelayTypeError(f"in `{_where(c)}`: {e} [argument types: {args}]") from None
            except (AttributeError, KeyError, TypeError, ValueError) as e:
                # e.g. a Call built by hand without the operator's attributes
                raise RelayTypeError(f"in `{_where(c)}`: bad attributes or arguments for "
                                     f"{c.op.name}: {e}") from e
            if not isinstance(out, Type):
                raise TypeError(f"type relation of {c.op.name} returned {out!r}, not a Type")
            return out
        ft = self.visit(c.op)
        if not isinstance(ft, FuncType):
            raise RelayTypeError(f"in `{_where(c)}`: callee is not a function but {type_str(ft)}")
        if len(ft.arg_types) != len(arg_types):
            raise RelayTypeError(f"in `{_where(c)}`: the function takes {len(ft.arg_types)} "
                                 f"arguments, got {len(arg_types)}")
        for i, (want, got) in enumerate(zip(ft.arg_types, arg_types)):
            if not type_compatible(want, got):
                raise RelayTypeError(f"in `{_where(c)}`: argument {i} has type {type_str(got)}, "
                                     f"the function expects {type_str(want)}")
        return ft.ret_type

    def visit_tuple(self, t: Tuple) -> Type:
        return TupleType([self.visit(f) for f in t.fields])

    def visit_tuple_getitem(self, t: TupleGetItem) -> Type:
        tt = self.visit(t.tuple_value)
        if not isinstance(tt, TupleType):
            raise RelayTypeError(f"in `{_where(t)}`: indexing a non-tuple of type {type_str(tt)}")
        if not 0 <= t.index < len(tt.fields):
            raise RelayTypeError(f"in `{_where(t)}`: index {t.index} out of range for "
                                 f"{type_str(tt)}")
        return tt.fields[t.index]

    def visit_let(self, let: Let) -> Type:
        vt = self.visit(let.value)
        ann = let.var.type_annotation
        if ann is not None:
            if not type_compatible(ann, vt):
                raise RelayTypeError(f"let %{let.var.name_hint}: annotated {type_str(ann)} but "
                                     f"the value has type {type_str(vt)}")
        if getattr(let.var, "_checked_type", None) is None:
            let.var._set_checked_type(vt)
        return self.visit(let.body)

    def visit_if(self, i: If) -> Type:
        ct = self.visit(i.cond)
        if not (isinstance(ct, TensorType) and ct.shape == () and ct.dtype == "bool"):
            raise RelayTypeError(f"if: the condition must be a bool scalar, got {type_str(ct)}")
        tt, ft = self.visit(i.true_branch), self.visit(i.false_branch)
        u = unify(tt, ft, fresh=True)
        if u is None:
            raise RelayTypeError(f"if: branches have different types {type_str(tt)} and "
                                 f"{type_str(ft)} (only dimensions may differ: they become ?)")
        return u

    def visit_function(self, f: Function) -> Type:
        arg_types = []
        for p in f.params:
            if p.type_annotation is None:
                raise RelayTypeError(f"parameter %{p.name_hint} of a function has no type "
                                     "annotation")
            arg_types.append(self.visit(p))
        ret = self.visit(f.body)
        if f.ret_type is not None and not type_compatible(f.ret_type, ret):
            raise RelayTypeError(f"function declares return type {type_str(f.ret_type)} but its "
                                 f"body has type {type_str(ret)}")
        return FuncType(arg_types, ret)


def infer_type(expr: RelayExpr, mod: Any = None) -> RelayExpr:
    """Type ``expr`` (every node gets ``checked_type``) and return it."""
    TypeInferencer(mod).visit(expr)
    return expr
