"""TVM's ``relay.ScopeBuilder``: write let-bound, branching relay code in Python statements::

    sb = relay.ScopeBuilder()
    t = sb.let("t", relay.add(x, y))
    with sb.if_scope(relay.greater(relay.sum(t), relay.const(0.0))):
        sb.ret(t)
    with sb.else_scope():
        sb.ret(relay.negative(t))
    body = sb.get()   # let %t = ...; if (...) { %t } else { -%t }

Each scope collects its ``let`` bindings and one result (``ret``, or the ``if``/``else`` pair
written in it); ``get`` nests the bindings around the result.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .expr import If, Let, RelayExpr, Var, var

__all__ = ["ScopeBuilder"]


class _Scope:
    def __init__(self) -> None:
        self.bindings: list[tuple[Var, RelayExpr]] = []
        self.ret: RelayExpr | None = None
        self.open_if: tuple[RelayExpr, RelayExpr] | None = None  # (cond, then) awaiting else


class ScopeBuilder:
    """Builds a relay expression from ``let`` / ``if_scope`` / ``else_scope`` / ``ret``."""

    def __init__(self) -> None:
        self._scopes: list[_Scope] = [_Scope()]

    def let(self, var_: Any, value: RelayExpr) -> Var:
        """Bind ``value`` to a new variable (``"name"``, ``("name", type)`` or a relay Var) in
        the current scope; returns the variable."""
        if isinstance(var_, (tuple, list)):
            if len(var_) != 2:
                raise ValueError(f"ScopeBuilder.let: expected (name, relay type), got {var_!r}")
            var_ = var(var_[0], var_[1])
        elif isinstance(var_, str):
            var_ = var(var_)
        if not isinstance(var_, Var):
            raise TypeError(f"ScopeBuilder.let binds a name or a relay Var, got {var_!r}")
        if not isinstance(value, RelayExpr):
            raise TypeError(f"ScopeBuilder.let: the value must be a relay expression, got "
                            f"{type(value).__name__}")
        self._close_if()
        self._scopes[-1].bindings.append((var_, value))
        return var_

    @contextmanager
    def if_scope(self, cond: RelayExpr) -> Iterator[None]:
        """The true branch of an ``if`` on ``cond`` (it must ``ret``); an ``else_scope`` must
        follow before the enclosing scope's result is read."""
        outer = self._scopes[-1]
        self._close_if()
        if outer.ret is not None:
            raise RuntimeError("ScopeBuilder.if_scope: this scope already returned a value")
        self._scopes.append(_Scope())
        yield
        then = self._pop("if_scope")
        outer.open_if = (cond, then)

    @contextmanager
    def else_scope(self) -> Iterator[None]:
        """The false branch of the ``if_scope`` just closed (it must ``ret``)."""
        outer = self._scopes[-1]
        if outer.open_if is None:
            raise RuntimeError("ScopeBuilder.else_scope must directly follow an if_scope")
        cond, then = outer.open_if
        outer.open_if = None
        self._scopes.append(_Scope())
        yield
        other = self._pop("else_scope")
        outer.ret = If(cond, then, other)

    def ret(self, value: RelayExpr) -> None:
        """The result of the current scope."""
        scope = self._scopes[-1]
        self._close_if()
        if scope.ret is not None:
            raise RuntimeError("ScopeBuilder.ret: this scope already returned a value")
        if not isinstance(value, RelayExpr):
            raise TypeError(f"ScopeBuilder.ret takes a relay expression, got "
                            f"{type(value).__name__}")
        scope.ret = value

    def get(self) -> RelayExpr:
        """The built expression: the outermost scope's bindings around its result."""
        if not self._scopes:
            raise RuntimeError("ScopeBuilder.get: the expression was already read")
        if len(self._scopes) != 1:
            raise RuntimeError("ScopeBuilder.get inside an open if_scope/else_scope")
        return self._pop("the builder")

    def _close_if(self) -> None:
        if self._scopes[-1].open_if is not None:
            raise RuntimeError("ScopeBuilder: an if_scope needs its else_scope (relay's if "
                               "has both branches)")

    def _pop(self, what: str) -> RelayExpr:
        self._close_if()
        scope = self._scopes.pop()
        if scope.ret is None:
            raise RuntimeError(f"ScopeBuilder: {what} has no result; call sb.ret(value) in it")
        out = scope.ret
        for v, value in reversed(scope.bindings):
            out = Let(v, value, out)
        return out
