"""EliminateCommonSubexpr: compute each value once.

What it does
    Merges operator calls that apply the same operator with equal attributes to the same
    (already merged) arguments, and equal ``TupleGetItem``s. Arguments are compared by identity
    after rewriting bottom-up, so chains of equal subgraphs collapse fully. ``fskip(call) ->
    bool`` exempts calls (TVM's hook). Constants are not merged by value.

When valid
    For pure operators (package docstring).

Example
    before:  %0 = exp(%a); %1 = exp(%a); add(%0, %1)
    after:   %0 = exp(%a); add(%0, %0)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..expr import Call, RelayExpr, TupleGetItem
from ..op.registry import Op
from ..visitor import ExprMutator
from .pass_infra import FunctionPass

__all__ = ["EliminateCommonSubexpr"]


def _attrs_key(attrs: Any) -> str:
    return repr(sorted((k, repr(v)) for k, v in attrs.items()))


class _CSE(ExprMutator):
    def __init__(self, fskip: Callable[[Call], bool] | None):
        super().__init__()
        self.fskip = fskip
        self.table: dict[tuple, RelayExpr] = {}

    def visit_call(self, c: Call) -> RelayExpr:
        new = super().visit_call(c)
        if not isinstance(new, Call) or not isinstance(new.op, Op):
            return new
        if self.fskip is not None and self.fskip(new):
            return new
        key = ("call", new.op.name, tuple(id(a) for a in new.args), _attrs_key(new.attrs))
        return self.table.setdefault(key, new)

    def visit_tuple_getitem(self, t: TupleGetItem) -> RelayExpr:
        new = super().visit_tuple_getitem(t)
        if not isinstance(new, TupleGetItem):
            return new
        return self.table.setdefault(("tgi", id(new.tuple_value), new.index), new)


class EliminateCommonSubexpr(FunctionPass):
    """``relay.transform.EliminateCommonSubexpr(fskip=None)`` (opt_level 3, as in TVM)."""

    def __init__(self, fskip: Callable[[Call], bool] | None = None) -> None:
        super().__init__(name="EliminateCommonSubexpr", opt_level=3)
        self.fskip = fskip

    def transform_function(self, func: Any, mod: Any, ctx: Any) -> Any:
        return _CSE(self.fskip).visit(func)
