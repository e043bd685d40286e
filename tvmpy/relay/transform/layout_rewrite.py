"""The rewriter that ConvertLayout and AlterOpLayout share (TVM's ``transform_layout.h``
``LayoutRewriter``): ``visit(e) -> (new_e, Layout | None)`` over a function's dataflow graph.
A pass subclasses it and says which calls *enter* a new layout (``convert``: ConvertLayout's
desired layouts, AlterOpLayout's target hooks); every other call follows its inputs through
its op's layout rule (``layout_rules.layout_rule``), or, without one, reads them back in their
original layouts through one shared ``layout_transform``. Tuples, lets, ifs and the function's
result always see the original layouts."""

from __future__ import annotations

from typing import Any

from ..expr import Call, Function, If, Let, RelayExpr, Tuple, TupleGetItem, Var
from ..op.registry import Op
from ..visitor import ExprFunctor
from .layout_rules import Layout, SharedTransforms, layout_rule

__all__ = ["LayoutRewriter"]

_State = tuple[RelayExpr, "Layout | None"]


class LayoutRewriter(ExprFunctor):
    """``visit(e) -> (new_e, layout)``: ``layout`` is None when ``new_e`` has ``e``'s layout.
    Also the ``LayoutContext`` the layout rules see."""

    def __init__(self) -> None:
        super().__init__()
        self._transform = SharedTransforms()

    # -- the pass's own conversions (override) ---------------------------------------------------
    def convert(self, c: Call) -> _State | None:
        """``c`` rewritten into a layout of the pass's choosing, or None (the rules apply)."""
        return None

    def wanted(self, call: Call) -> bool:
        """Whether ``call``'s result is wanted in the new layout (default: always)."""
        return True

    # -- LayoutContext -------------------------------------------------------------------------
    def layout(self, e: RelayExpr) -> Layout | None:
        return self.visit(e)[1]

    def plain(self, e: RelayExpr) -> RelayExpr:
        """The rewritten ``e`` in its original layout."""
        new, lay = self.visit(e)
        return new if lay is None else self._transform(new, lay.cur, lay.orig)

    def get(self, e: RelayExpr, layout: Layout) -> RelayExpr:
        """The rewritten ``e`` (a 4-D value in layout ``layout.orig`` originally) in
        ``layout.cur``."""
        new, lay = self.visit(e)
        if lay is None or lay.orig != layout.orig:
            new, cur = self.plain(e), layout.orig
        else:
            cur = lay.cur
        return self._transform(new, cur, layout.cur)

    def transform(self, e: RelayExpr, src: str, dst: str) -> RelayExpr:
        return self._transform(e, src, dst)

    # -- nodes ---------------------------------------------------------------------------------
    def visit_var(self, v: Var) -> _State:
        return v, None

    def visit_global_var(self, v: Any) -> _State:
        return v, None

    def visit_constant(self, c: Any) -> _State:
        return c, None

    def visit_op(self, op: Op) -> _State:
        return op, None

    def visit_tuple(self, t: Tuple) -> _State:
        fields = [self.plain(f) for f in t.fields]
        return (t if all(a is b for a, b in zip(fields, t.fields)) else Tuple(fields)), None

    def visit_tuple_getitem(self, t: TupleGetItem) -> _State:
        v = self.plain(t.tuple_value)
        return (t if v is t.tuple_value else TupleGetItem(v, t.index)), None

    def visit_let(self, let: Let) -> _State:
        return Let(let.var, self.plain(let.value), self.plain(let.body)), None

    def visit_if(self, i: If) -> _State:
        return If(self.plain(i.cond), self.plain(i.true_branch), self.plain(i.false_branch)), None

    def visit_function(self, f: Function) -> _State:
        if f.attrs.get("Primitive"):
            return f, None
        body = self.plain(f.body)
        return (f if body is f.body else Function(f.params, body, f.ret_type, attrs=f.attrs)), None

    def visit_call(self, c: Call) -> _State:
        if isinstance(c.op, Op):
            res = self.convert(c)
            if res is None:
                res = self.propagate(c)
            if res is not None:
                return res
        op = c.op if isinstance(c.op, Op) else self.plain(c.op)
        args = [self.plain(a) for a in c.args]
        if op is c.op and all(a is b for a, b in zip(args, c.args)):
            return c, None
        return Call(op, args, c.attrs), None

    def propagate(self, c: Call) -> _State | None:
        """``c`` following the layouts of its inputs by its op's layout rule, or None."""
        rule = layout_rule(c)
        prop = None if rule is None else rule(c, self)
        return None if prop is None else (prop.build(), prop.out)
