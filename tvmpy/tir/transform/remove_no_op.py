"""RemoveNoOp: delete statements that have no effect.

What it does
    Drops ``Evaluate`` of constants; loops, lets (unless their value calls an external
    function), attributes (other than pragmas) and allocations whose body does nothing
    (asserts stay: their check is an effect); ``if`` statements with two empty branches (the
    condition has no side effects: calls in conditions are pure intrinsics); stores of a value
    to the very element it was loaded from (``A[i] = A[i]``); and flattens nested sequences.

When valid
    Always. Loops of extent 0 are left to Simplify.

Example
    before:  for i in range(0, 4): { A[i] = A[i] }; B = allocate((4,)) { 0 }
             C[0] = 1.0f
    after:   C[0] = 1.0f
"""

from __future__ import annotations

from ...ir.node import structural_equal
from .. import expr as E
from .. import stmt as S
from ..function import PrimFunc
from ..functor import Mutator, post_order_visit
from .function_pass import PrimFuncPass

__all__ = ["RemoveNoOp", "remove_no_op_func"]


def _calls_extern(e: E.PrimExpr) -> bool:
    found = False

    def f(n: object) -> None:
        nonlocal found
        if isinstance(n, E.Call) and n.op in ("call_extern", "call_pure_extern", "tvm_call_packed"):
            found = True

    post_order_visit(e, f)
    return found


class _NoOpRemover(Mutator):
    def visit_PrimExpr(self, e: E.PrimExpr) -> E.PrimExpr:
        return e

    def visit_SeqStmt(self, s: S.SeqStmt) -> S.Stmt:
        new = [self.visit(x) for x in s.seq]
        out = S.seq(*new)
        if isinstance(out, S.SeqStmt) and len(out.seq) == len(s.seq) and all(
                a is b for a, b in zip(out.seq, s.seq)):
            return s
        return out

    def visit_Evaluate(self, s: S.Evaluate) -> S.Stmt:
        return S.no_op() if isinstance(s.value, (E.IntImm, E.FloatImm)) else s

    def visit_BufferStore(self, s: S.BufferStore) -> S.Stmt:
        v = s.value
        if (isinstance(v, E.BufferLoad) and v.buffer.data is s.buffer.data and v.predicate is None
                and s.predicate is None and structural_equal(v.indices, s.indices)):
            return S.no_op()
        return s

    def _body_stmt(self, s: S.For | S.Allocate | S.LetStmt) -> S.Stmt:
        body = self.visit(s.body)
        if S.is_no_op(body):
            return S.no_op()
        return s if body is s.body else s.replace(body=body)

    visit_For = _body_stmt
    visit_Allocate = _body_stmt

    def visit_LetStmt(self, s: S.LetStmt) -> S.Stmt:
        if _calls_extern(s.value):  # evaluated for its side effect
            body = self.visit(s.body)
            return s if body is s.body else S.LetStmt(s.var, s.value, body)
        return self._body_stmt(s)

    def visit_AssertStmt(self, s: S.AssertStmt) -> S.Stmt:
        body = self.visit(s.body)  # the check itself stays, even with nothing after it
        return s if body is s.body else S.AssertStmt(s.condition, s.message, body)

    def visit_AttrStmt(self, s: S.AttrStmt) -> S.Stmt:
        body = self.visit(s.body)
        if S.is_no_op(body) and not s.attr_key.startswith("pragma_"):
            return S.no_op()
        return s if body is s.body else S.AttrStmt(s.node, s.attr_key, s.value, body)

    def visit_IfThenElse(self, s: S.IfThenElse) -> S.Stmt:
        then = self.visit(s.then_case)
        els = self.visit(s.else_case) if s.else_case is not None else None
        if els is not None and S.is_no_op(els):
            els = None
        if S.is_no_op(then):
            if els is None:
                return S.no_op()
            return S.IfThenElse(E.Not(s.condition), els)
        if then is s.then_case and els is s.else_case:
            return s
        return S.IfThenElse(s.condition, then, els)


def remove_no_op_func(func: PrimFunc) -> PrimFunc:
    """Remove statements without effect from ``func``."""
    body = _NoOpRemover().visit(func.body)
    return func if body is func.body else func.with_body(body)


def RemoveNoOp() -> PrimFuncPass:
    """``tvm.tir.transform.RemoveNoOp()``: delete statements that have no effect, as a pass
    (the pass form of :func:`remove_no_op_func`)."""
    return PrimFuncPass.from_func(remove_no_op_func, "RemoveNoOp")
