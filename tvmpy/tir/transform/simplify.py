"""Simplify: statement-level simplification with the arithmetic analyzer.

What it does
    - every expression is simplified by ``tvmpy.arith.Analyzer`` with the facts that hold at
      its position: loop variables are bound to their ranges, the branches of an ``if`` are
      visited under the constraint (or its negation), let variables are bound to their values;
    - ``likely(c)`` that always holds becomes ``True`` (and one that never holds ``False``), so
      the guards of non-divisible splits disappear where they are redundant;
    - ``if`` with a constant condition keeps only the taken branch; ``assert`` of a provable
      condition is removed; ``Evaluate`` of a constant is dropped;
    - a loop of extent 1 is replaced by its body with the loop variable substituted; a loop of
      extent <= 0 disappears; a ``let`` of a constant or variable is substituted.

When valid
    Always (it only uses facts that hold where they are used). Expects each variable to be
    defined once (see :mod:`.common`).

Example
    before:  for i in range(0, 4): for j in range(0, 16):
                 C[(i * 16 + j) // 16 * 16 + (i * 16 + j) % 16] = select(i < 4, A[i * 16 + j], 0f)
    after:   for i in range(0, 4): for j in range(0, 16): C[i * 16 + j] = A[i * 16 + j]
"""

from __future__ import annotations

from typing import Any

from ...ir import dtype as dt
from .. import expr as E
from .. import stmt as S
from ..function import PrimFunc
from ..functor import Mutator, reads_memory, substitute, uses_var
from .common import make_analyzer, substitute_buffers
from .function_pass import PrimFuncPass

__all__ = ["Simplify", "simplify_func", "simplify_stmt"]


class _LikelyFolder(Mutator):
    """Decide ``likely(c)`` and ``if_then_else(c, ..)`` whose condition is provable."""

    def __init__(self, ana: Any):
        self.ana = ana
        self.changed = False

    def visit_Call(self, e: E.Call) -> E.PrimExpr:
        e = self.generic_visit(e)
        if e.op not in ("likely", "if_then_else") or dt.lanes_of(e.args[0].dtype) != 1:
            return e
        cond = e.args[0]
        if not isinstance(cond, E.IntImm):
            if self.ana.can_prove(cond):
                cond = E.const(True)
            elif self.ana.can_prove(E.Not(cond)):
                cond = E.const(False)
        if not isinstance(cond, E.IntImm):
            return e
        self.changed = True
        if e.op == "likely":
            return cond
        return e.args[1] if cond.value else e.args[2]


class _Simplifier(Mutator):
    def __init__(self, ana: Any):
        self.ana = ana

    # ---- expressions: simplified whole, at their statement ------------------------------------
    def expr(self, e: Any) -> Any:
        if not isinstance(e, E.PrimExpr) or isinstance(e, (E.IntImm, E.FloatImm, E.StringImm)):
            return e
        out = self.ana.simplify(e)
        folder = _LikelyFolder(self.ana)
        out2 = folder.visit(out)
        if folder.changed:
            out = self.ana.simplify(out2)
        return out

    def visit_PrimExpr(self, e: E.PrimExpr) -> E.PrimExpr:
        return self.expr(e)

    # ---- statements ---------------------------------------------------------------------------
    def visit_For(self, f: S.For) -> S.Stmt:
        mn, ext = self.expr(f.min), self.expr(f.extent)
        if isinstance(ext, E.IntImm) and ext.value <= 0:
            return S.no_op()
        if isinstance(ext, E.IntImm) and ext.value == 1:
            return self.visit(substitute(f.body, {f.loop_var: mn}))
        if not isinstance(ext, E.IntImm) and self.ana.can_prove(ext <= 0):
            return S.no_op()
        # the loop's range (and what it implies, e.g. extent >= 1) holds only inside the loop:
        # scoped, so that it does not leak into the statements after it
        with self.ana.constraint_scope(E.const(True)):
            self.ana.bind(f.loop_var, E.Range.from_min_extent(mn, ext))
            body = self.visit(f.body)
        if S.is_no_op(body):
            return S.no_op()
        if mn is f.min and ext is f.extent and body is f.body:
            return f
        return f.replace(min=mn, extent=ext, body=body)

    def visit_IfThenElse(self, s: S.IfThenElse) -> S.Stmt:
        cond = self.expr(s.condition)
        if isinstance(cond, E.IntImm):
            branch = s.then_case if cond.value else s.else_case
            return S.no_op() if branch is None else self.visit(branch)
        with self.ana.constraint_scope(cond):
            then = self.visit(s.then_case)
        els = None
        if s.else_case is not None:
            with self.ana.constraint_scope(E.Not(cond)):
                els = self.visit(s.else_case)
            if S.is_no_op(els):
                els = None
        if S.is_no_op(then):
            if els is None:
                return S.no_op()
            return S.IfThenElse(self.expr(E.Not(cond)), els)
        if cond is s.condition and then is s.then_case and els is s.else_case:
            return s
        return S.IfThenElse(cond, then, els)

    def visit_LetStmt(self, s: S.LetStmt) -> S.Stmt:
        value = self.expr(s.value)
        if isinstance(value, (E.IntImm, E.FloatImm, E.Var)):
            return self.visit(substitute(s.body, {s.var: value}))
        if dt.is_integer(value.dtype) and dt.lanes_of(value.dtype) == 1 and not reads_memory(value):
            self.ana.bind(s.var, value)  # never for loads: memory may change under the let
        body = self.visit(s.body)
        if not uses_var(body, s.var) and not reads_memory(value):
            return body
        if value is s.value and body is s.body:
            return s
        return S.LetStmt(s.var, value, body)

    def visit_AssertStmt(self, s: S.AssertStmt) -> S.Stmt:
        cond = self.expr(s.condition)
        if isinstance(cond, E.IntImm) and cond.value:
            return self.visit(s.body)
        if not isinstance(cond, E.IntImm) and self.ana.can_prove(cond):
            return self.visit(s.body)
        body = self.visit(s.body)
        return S.AssertStmt(cond, s.message, body)

    def visit_Evaluate(self, s: S.Evaluate) -> S.Stmt:
        v = self.expr(s.value)
        if isinstance(v, (E.IntImm, E.FloatImm)):
            return S.no_op()
        return s if v is s.value else S.Evaluate(v)

    def visit_AttrStmt(self, s: S.AttrStmt) -> S.Stmt:
        value = self.expr(s.value)
        with self.ana.constraint_scope(E.const(True)):
            if s.attr_key in ("thread_extent", "virtual_thread") and isinstance(s.node, E.IterVar):
                self.ana.bind(s.node.var, E.Range.from_min_extent(E.const(0, value.dtype), value))
            body = self.visit(s.body)
        if S.is_no_op(body) and not s.attr_key.startswith("pragma_"):
            return S.no_op()
        if value is s.value and body is s.body:
            return s
        return S.AttrStmt(s.node, s.attr_key, value, body)

    def visit_SeqStmt(self, s: S.SeqStmt) -> S.Stmt:
        new = [self.visit(x) for x in s.seq]
        if all(a is b for a, b in zip(new, s.seq)):
            return s
        return S.seq(*new)

    def visit_Allocate(self, s: S.Allocate) -> S.Stmt:
        body = self.visit(s.body)
        if S.is_no_op(body):
            return S.no_op()
        shape = tuple(self.expr(x) for x in s.buffer.shape)
        if all(a is b for a, b in zip(shape, s.buffer.shape)):
            return s if body is s.body else S.Allocate(s.buffer, body, s.condition)
        nb = s.buffer.replace(shape=shape)
        return S.Allocate(nb, substitute_buffers(body, {id(nb.data): nb}), s.condition)


def simplify_stmt(stmt: S.Stmt, ana: Any | None = None) -> S.Stmt:
    """Simplify one statement (a fresh analyzer unless one is given)."""
    return _Simplifier(ana if ana is not None else make_analyzer()).visit(stmt)


def simplify_func(func: PrimFunc) -> PrimFunc:
    """Simplify ``func``'s body; shape variables of the parameters are known to be >= 0."""
    body = _Simplifier(make_analyzer(func)).visit(func.body)
    return func if body is func.body else func.with_body(body)


def Simplify() -> PrimFuncPass:
    """``tvm.tir.transform.Simplify()``: simplify the body of each PrimFunc, as a pass
    (the pass form of :func:`simplify_func`)."""
    return PrimFuncPass.from_func(simplify_func, "Simplify")
