"""FoldConstant: evaluate at compile time what depends only on constants.

What it does
    Every operator call whose arguments are all constants is evaluated (with the numpy
    reference interpreter) and replaced by a Constant (a Tuple of Constants for tuple results);
    ``TupleGetItem`` of a literal Tuple becomes the field, and a ``Let`` binding a constant is
    inlined. Calls of relay Functions (fused primitives, closures) are not folded, nor operators
    the interpreter has no numpy implementation for.

When valid
    Operators are pure and deterministic (see the package docstring); parameters become
    constants only once bound (``relay.build_module.bind_params_by_name`` /
    ``transform.bind_params_by_name``).

Example
    before:  add(%a, multiply(meta[relay.Constant][0], meta[relay.Constant][1]))
    after:   add(%a, meta[relay.Constant][2])                  (the product, computed once)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..expr import Call, Constant, ConstData, Let, RelayExpr, Tuple, TupleGetItem, Var
from ..interpreter import evaluate
from ..op.registry import Op
from ..visitor import ExprMutator
from .pass_infra import FunctionPass

__all__ = ["FoldConstant"]

_SKIP = frozenset()  # operators never folded (none are stateful or random today)


def _is_const(e: Any) -> bool:
    return isinstance(e, Constant) or (isinstance(e, Tuple) and all(_is_const(f) for f in e.fields))


def _to_expr(v: Any) -> RelayExpr:
    if isinstance(v, (tuple, list)):
        return Tuple([_to_expr(x) for x in v])
    # a new array (or a view of another constant's read-only one): adopted, not copied again
    # (a BERT-base build folds 85 M packed weights); a strided view (a transposed weight) is
    # copied only when something other than folding reads it: a weight transposed by the
    # frontend, then reshaped and transposed again by the layout packing, is copied once
    return Constant(ConstData(np.asarray(v), copy=False, strided=True))


def _symbolic_result(call: Call) -> bool:
    """Whether ``call`` (of constants) has a symbolic dimension in its result type: sized by
    its attributes at run time (a constant broadcast to a ``relay.Any`` batch)."""
    from ..ty import TensorType, TupleType
    from ..type_infer import infer_type

    def symbolic(t: Any) -> bool:
        if isinstance(t, TupleType):
            return any(symbolic(f) for f in t.fields)
        return isinstance(t, TensorType) and not all(isinstance(d, int) for d in t.shape)

    return symbolic(infer_type(call).checked_type)


class _Fold(ExprMutator):
    def __init__(self) -> None:
        super().__init__()
        self.subst: dict[int, RelayExpr] = {}

    def visit_var(self, v: Var) -> RelayExpr:
        return self.subst.get(id(v), v)

    def visit_let(self, let: Let) -> RelayExpr:
        value = self.visit(let.value)
        if _is_const(value):
            self.subst[id(let.var)] = value
            return self.visit(let.body)
        return super().visit_let(let)

    def visit_call(self, c: Call) -> RelayExpr:
        new = super().visit_call(c)
        if not (isinstance(new, Call) and isinstance(new.op, Op)) or new.op.name in _SKIP:
            return new
        if not all(_is_const(a) for a in new.args):
            return new
        if _symbolic_result(new):  # broadcast_to(const, (batch, 1, 32)): no constant to be
            return new
        try:
            value = evaluate(new)
        except NotImplementedError:  # no numpy reference for this operator: keep the call
            return new
        return _to_expr(value)

    def visit_tuple_getitem(self, t: TupleGetItem) -> RelayExpr:
        new = super().visit_tuple_getitem(t)
        if isinstance(new, TupleGetItem) and isinstance(new.tuple_value, Tuple):
            return new.tuple_value.fields[new.index]
        return new


class FoldConstant(FunctionPass):
    """``relay.transform.FoldConstant()`` (opt_level 2, as in TVM)."""

    def __init__(self) -> None:
        super().__init__(name="FoldConstant", opt_level=2)

    def transform_function(self, func: Any, mod: Any, ctx: Any) -> Any:
        return _Fold().visit(func)
