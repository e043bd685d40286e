"""Traversal of relay graphs: ``ExprVisitor`` (each node visited once, DAG-safe), ``ExprMutator``
(rebuilds a node only when a child changed, memoized so shared subgraphs stay shared), and
``post_order_visit``. Override ``visit_<node>`` methods (``visit_call``, ``visit_var``, ...).

Dataflow chains (calls, tuples, tuple items) of any length are safe: before a handler runs, the
unvisited dataflow nodes below it are visited children first with an explicit stack
(``ir.functor.memo_post_order``), so its ``self.visit(arg)`` returns the memo without recursing
(TVM's MixedModeVisitor). Functions, lets and ifs are entered by their handlers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..ir.functor import Functor, memo_post_order, post_order
from .expr import (
    Call,
    Constant,
    Function,
    GlobalVar,
    If,
    Let,
    RelayExpr,
    Tuple,
    TupleGetItem,
    Var,
)
from .op.registry import Op

__all__ = ["ExprFunctor", "ExprVisitor", "ExprMutator", "InlineLets", "post_order_visit", "dataflow_children",
           "dataflow_post_order"]

_METHOD = {
    "Var": "visit_var", "GlobalVar": "visit_global_var", "Constant": "visit_constant",
    "Call": "visit_call", "Tuple": "visit_tuple", "TupleGetItem": "visit_tuple_getitem",
    "Let": "visit_let", "If": "visit_if", "Function": "visit_function", "Op": "visit_op",
}  # fmt: skip


def dataflow_children(e: Any) -> tuple[Any, ...]:
    """The dataflow inputs of ``e``: a call's arguments, a tuple's fields, a tuple item's tuple
    (functions, lets and ifs are scopes: their handlers enter them)."""
    t = type(e)
    if t is Call:
        return e.args
    if t is Tuple:
        return e.fields
    if t is TupleGetItem:
        return (e.tuple_value,)
    return ()


def dataflow_post_order(expr: Any) -> list[Any]:
    """The dataflow nodes of ``expr`` (through call arguments, tuple fields and tuple items),
    inputs first, each once."""
    return post_order(expr, dataflow_children)


class ExprFunctor(Functor):
    """Dispatch on the node class with a per-instance memo (each node computed once)."""

    def __init__(self) -> None:
        self.memo: dict[int, Any] = {}
        self._keep: list[Any] = []  # keep memo keys alive (ids must not be reused)

    @classmethod
    def _method_name(cls, node_cls: type) -> str | None:
        return _METHOD.get(node_cls.__name__)

    def generic_visit(self, node: Any) -> Any:
        raise TypeError(f"{type(self).__name__}: not a relay expression: {node!r}")

    def visit(self, expr: Any) -> Any:
        key = id(expr)
        memo = self.memo
        if key in memo:
            return memo[key]
        if self._unvisited_inputs(expr):  # a chain below: visit it inputs first, iteratively
            memo_post_order(expr, self._unvisited_inputs, self.visit, memo)
        cls = type(expr)
        res = (self._dispatch_table.get(cls) or type(self).dispatch(cls))(self, expr)
        memo[key] = res
        self._keep.append(expr)
        return res

    def _visited(self, e: Any) -> bool:
        """Whether visiting ``e`` would return at once (a subclass with its own cache says so)."""
        return id(e) in self.memo

    def _unvisited_inputs(self, e: Any) -> list[Any]:
        return [c for c in dataflow_children(e) if not self._visited(c)]


class ExprVisitor(ExprFunctor):
    """Visits every reachable node once; override ``visit_*`` and call ``super()`` to recurse."""

    def visit_var(self, v: Var) -> None:
        pass

    def visit_global_var(self, v: GlobalVar) -> None:
        pass

    def visit_constant(self, c: Constant) -> None:
        pass

    def visit_op(self, op: Op) -> None:
        pass

    def visit_call(self, c: Call) -> None:
        self.visit(c.op)
        for a in c.args:
            self.visit(a)

    def visit_tuple(self, t: Tuple) -> None:
        for f in t.fields:
            self.visit(f)

    def visit_tuple_getitem(self, t: TupleGetItem) -> None:
        self.visit(t.tuple_value)

    def visit_let(self, let: Let) -> None:
        self.visit(let.var)
        self.visit(let.value)
        self.visit(let.body)

    def visit_if(self, i: If) -> None:
        self.visit(i.cond)
        self.visit(i.true_branch)
        self.visit(i.false_branch)

    def visit_function(self, f: Function) -> None:
        for p in f.params:
            self.visit(p)
        self.visit(f.body)


def _same(a: Any, b: Any) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b))


class ExprMutator(ExprFunctor):
    """Returns a rewritten expression; unchanged subgraphs are returned as the same objects."""

    def visit_var(self, v: Var) -> RelayExpr:
        return v

    def visit_global_var(self, v: GlobalVar) -> RelayExpr:
        return v

    def visit_constant(self, c: Constant) -> RelayExpr:
        return c

    def visit_op(self, op: Op) -> Op:
        return op

    def visit_call(self, c: Call) -> RelayExpr:
        op = self.visit(c.op)
        args = [self.visit(a) for a in c.args]
        if op is c.op and _same(args, c.args):
            return c
        return Call(op, args, c.attrs)

    def visit_tuple(self, t: Tuple) -> RelayExpr:
        fields = [self.visit(f) for f in t.fields]
        return t if _same(fields, t.fields) else Tuple(fields)

    def visit_tuple_getitem(self, t: TupleGetItem) -> RelayExpr:
        v = self.visit(t.tuple_value)
        return t if v is t.tuple_value else TupleGetItem(v, t.index)

    def visit_let(self, let: Let) -> RelayExpr:
        var = self.visit(let.var)
        value = self.visit(let.value)
        body = self.visit(let.body)
        if var is let.var and value is let.value and body is let.body:
            return let
        return Let(var, value, body)

    def visit_if(self, i: If) -> RelayExpr:
        c, t, f = self.visit(i.cond), self.visit(i.true_branch), self.visit(i.false_branch)
        if c is i.cond and t is i.true_branch and f is i.false_branch:
            return i
        return If(c, t, f)

    def visit_function(self, f: Function) -> RelayExpr:
        params = [self.visit(p) for p in f.params]
        body = self.visit(f.body)
        if _same(params, f.params) and body is f.body:
            return f
        return Function(params, body, f.ret_type, attrs=f.attrs)


class InlineLets(ExprMutator):
    """``let v = e; body`` -> ``body`` with ``e`` for ``v`` (relay's operators are pure, so a
    binding is its value). Functions are not entered: subclasses decide (the VM beta-reduces
    calls of local functions, FuseOps leaves primitive ones alone). ``subst``: bindings
    already known (a beta-reduced call's parameters)."""

    def __init__(self, subst: dict[int, RelayExpr] | None = None):
        super().__init__()
        self.subst: dict[int, RelayExpr] = dict(subst or {})

    def visit_var(self, v: Var) -> RelayExpr:
        return self.subst.get(id(v), v)

    def visit_let(self, let: Let) -> RelayExpr:
        self.subst[id(let.var)] = self.visit(let.value)
        return self.visit(let.body)

    def visit_function(self, f: Function) -> RelayExpr:
        return f


class _PostOrder(ExprVisitor):
    def __init__(self, fn: Callable[[Any], None]):
        super().__init__()
        self.fn = fn

    def visit(self, expr: Any) -> Any:
        if id(expr) in self.memo:
            return None
        super().visit(expr)
        self.fn(expr)
        return None


def post_order_visit(expr: Any, fn: Callable[[Any], None]) -> None:
    """Call ``fn(node)`` on every node (operators included) after its children, once each."""
    _PostOrder(fn).visit(expr)
