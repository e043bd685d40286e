"""Graph analyses (``relay.analysis``): free_vars, bound_vars, all_vars, well_formed."""

from __future__ import annotations

from typing import Any

from .expr import Function, Let, RelayExpr, Var
from .visitor import post_order_visit

__all__ = ["free_vars", "bound_vars", "all_vars", "well_formed"]


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


def well_formed(expr: RelayExpr) -> bool:
    """True when every variable is bound at most once (one Let or one parameter list) and no
    bound variable is used outside the scope that binds it. Passes should keep graphs well formed."""
    from .expr import Call, If, Tuple, TupleGetItem

    binders: dict[int, int] = {}  # var id -> id of the node binding it
    ok = True

    def record(n: Any) -> None:
        nonlocal ok
        vs = n.params if isinstance(n, Function) else (n.var,) if isinstance(n, Let) else ()
        if len({id(v) for v in vs}) != len(vs):
            ok = False
        for v in vs:
            if binders.setdefault(id(v), id(n)) != id(n):
                ok = False

    post_order_visit(expr, record)
    if not ok:
        return False
    # every use must be in scope: a depth-first search over (node, scope) pairs, each once
    stack: list[tuple[Any, frozenset[int]]] = [(expr, frozenset())]
    seen: set[tuple[int, frozenset[int]]] = set()
    while stack:
        e, scope = stack.pop()
        key = (id(e), scope)
        if key in seen:
            continue
        seen.add(key)
        if isinstance(e, Var):
            if id(e) in binders and id(e) not in scope:
                return False
        elif isinstance(e, Let):
            stack += [(e.value, scope), (e.body, scope | {id(e.var)})]
        elif isinstance(e, Function):
            stack.append((e.body, scope | {id(p) for p in e.params}))
        elif isinstance(e, Call):
            stack += [(x, scope) for x in (e.op, *e.args)]
        elif isinstance(e, Tuple):
            stack += [(x, scope) for x in e.fields]
        elif isinstance(e, TupleGetItem):
            stack.append((e.tuple_value, scope))
        elif isinstance(e, If):
            stack += [(x, scope) for x in (e.cond, e.true_branch, e.false_branch)]
    return True
