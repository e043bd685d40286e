"""``tvm.tir.ir_builder``: build statements imperatively (the lowering rules of tensor intrinsics).

``ib = create(); ib.emit(call_extern(...)); with ib.for_range(0, n, name="i") as i: ...;
with ib.if_scope(cond): ...; with ib.else_scope(): ...; stmt = ib.get()``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from . import stmt as S
from .expr import PrimExpr, Var

__all__ = ["IRBuilder", "create"]

_KINDS = {"serial": S.ForKind.SERIAL, "parallel": S.ForKind.PARALLEL,
          "vectorize": S.ForKind.VECTORIZED, "unroll": S.ForKind.UNROLLED}


def _seq(stmts: list[S.Stmt]) -> S.Stmt:
    if not stmts:
        return S.Evaluate(0)
    return stmts[0] if len(stmts) == 1 else S.SeqStmt(stmts)


class IRBuilder:
    """Collects statements; nested scopes (loops, conditions, attributes) wrap what they emit."""

    def __init__(self) -> None:
        self._stack: list[list[S.Stmt]] = [[]]

    def emit(self, stmt: Any) -> None:
        """Append a statement; an expression (e.g. ``call_extern``) becomes an ``Evaluate``."""
        if isinstance(stmt, PrimExpr) or not isinstance(stmt, S.Stmt):
            stmt = S.Evaluate(stmt)
        self._stack[-1].append(stmt)

    @contextmanager
    def _scope(self) -> Iterator[list[S.Stmt]]:
        self._stack.append([])
        try:
            yield self._stack[-1]
        finally:
            self._stack.pop()

    @contextmanager
    def for_range(self, begin: Any, end: Any, name: str = "i", dtype: str = "int32",
                  kind: str = "serial") -> Iterator[Var]:
        """A loop ``for name in range(begin, end)``; yields the loop variable."""
        if kind not in _KINDS:
            raise ValueError(f"for_range: unknown kind {kind!r}; expected one of {sorted(_KINDS)}")
        var = Var(name, dtype)
        with self._scope() as body:
            yield var
        self.emit(S.For(var, begin, end - begin, _KINDS[kind], _seq(body)))

    @contextmanager
    def if_scope(self, cond: Any) -> Iterator[None]:
        with self._scope() as body:
            yield
        self.emit(S.IfThenElse(cond, _seq(body)))

    @contextmanager
    def else_scope(self) -> Iterator[None]:
        prev = self._stack[-1][-1] if self._stack[-1] else None
        if not isinstance(prev, S.IfThenElse) or prev.else_case is not None:
            raise RuntimeError("else_scope must directly follow an if_scope")
        with self._scope() as body:
            yield
        self._stack[-1][-1] = S.IfThenElse(prev.condition, prev.then_case, _seq(body))

    def scope_attr(self, node: Any, attr_key: str, value: Any) -> None:
        """Wrap everything emitted after this call (in the current scope) in an AttrStmt."""
        self.emit(S.AttrStmt(node, attr_key, value, S.Evaluate(0)))

    def get(self) -> S.Stmt:
        """The statement built so far."""
        if len(self._stack) != 1:
            raise RuntimeError("IRBuilder.get() inside an open scope")
        return self._fold(self._stack[0])

    @staticmethod
    def _fold(stmts: list[S.Stmt]) -> S.Stmt:
        # an AttrStmt from scope_attr takes everything after it as its body
        for i, s in enumerate(stmts):
            if isinstance(s, S.AttrStmt) and S.is_no_op(s.body) and i + 1 < len(stmts):
                rest = IRBuilder._fold(stmts[i + 1:])
                return _seq([*stmts[:i], S.AttrStmt(s.node, s.attr_key, s.value, rest)])
        return _seq(stmts)


def create() -> IRBuilder:
    """A new IRBuilder (TVM's ``tvm.tir.ir_builder.create()``)."""
    return IRBuilder()
