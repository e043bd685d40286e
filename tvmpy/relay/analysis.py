"""Graph analyses (``relay.analysis``): free_vars, bound_vars, all_vars."""

from __future__ import annotations

from typing import Any

from .expr import Function, Let, RelayExpr, Var
from .visitor import post_order_visit

__all__ = ["free_vars", "bound_vars", "all_vars"]


def all_vars(expr: RelayExpr) -> list[Var]:
    """Every Var in ``expr``, in order of first appearance (post-order), once each."""
    out: list[Var] = []
    seen: set[int] = set()

    def f(n: Any) -> None:
        if isinstance(n, Var) and id(n) not in seen:
            seen.add(id(n))
            out.append(n)
        elif isinstance(n, Function):  # params first, in declared order
            for p in n.params:
                if id(p) not in seen:
                    seen.add(id(p))
                    out.append(p)

    post_order_visit(expr, f)
    return out


def bound_vars(expr: RelayExpr) -> list[Var]:
    """Vars bound by a Let or as Function parameters inside ``expr``."""
    out: list[Var] = []
    seen: set[int] = set()

    def f(n: Any) -> None:
        vs = n.params if isinstance(n, Function) else (n.var,) if isinstance(n, Let) else ()
        for v in vs:
            if id(v) not in seen:
                seen.add(id(v))
                out.append(v)

    post_order_visit(expr, f)
    return out


def free_vars(expr: RelayExpr) -> list[Var]:
    """Vars used in ``expr`` but not bound in it, in order of first use."""
    bound = {id(v) for v in bound_vars(expr)}
    used: list[Var] = []
    seen: set[int] = set()

    def f(n: Any) -> None:
        if isinstance(n, Var) and id(n) not in bound and id(n) not in seen:
            seen.add(id(n))
            used.append(n)

    post_order_visit(expr, f)
    return used
