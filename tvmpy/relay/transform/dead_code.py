"""DeadCodeElimination and RemoveUnusedFunctions: drop what nothing uses.

What it does
    DeadCodeElimination drops ``let`` bindings whose variable the body never uses (their values
    are pure, so not computing them changes nothing). Unreachable dataflow nodes need no pass:
    a graph holds only what its output reaches. Function parameters are kept (they are the
    signature). RemoveUnusedFunctions drops the module's functions that no entry function
    reaches.

When valid
    Under the pure-dataflow assumption of the package docstring.

Example
    before:  fn (%a) { let %t = exp(%a); add(%a, %a) }
    after:   fn (%a) { add(%a, %a) }
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...ir.module import IRModule
from ...transform import ModulePass
from ..expr import Let, RelayExpr, Var
from ..visitor import ExprMutator, ExprVisitor
from .pass_infra import FunctionPass

__all__ = ["DeadCodeElimination", "RemoveUnusedFunctions"]


class _UseCount(ExprVisitor):
    """Number of references to each Var (binding occurrences excluded)."""

    def __init__(self) -> None:
        super().__init__()
        self.uses: dict[int, int] = {}

    def visit_var(self, v: Var) -> None:
        pass

    def _use(self, e: Any) -> None:
        if isinstance(e, Var):
            self.uses[id(e)] = self.uses.get(id(e), 0) + 1
        self.visit(e)

    def visit_call(self, c: Any) -> None:
        self.visit(c.op)
        for a in c.args:
            self._use(a)

    def visit_tuple(self, t: Any) -> None:
        for f in t.fields:
            self._use(f)

    def visit_tuple_getitem(self, t: Any) -> None:
        self._use(t.tuple_value)

    def visit_let(self, let: Let) -> None:
        self._use(let.value)
        self._use(let.body)

    def visit_if(self, i: Any) -> None:
        for e in (i.cond, i.true_branch, i.false_branch):
            self._use(e)

    def visit_function(self, f: Any) -> None:
        self._use(f.body)


class _DCE(ExprMutator):
    def __init__(self, uses: dict[int, int]):
        super().__init__()
        self.uses = uses

    def visit_let(self, let: Let) -> RelayExpr:
        if self.uses.get(id(let.var), 0) == 0:
            return self.visit(let.body)
        return super().visit_let(let)


class DeadCodeElimination(FunctionPass):
    """``relay.transform.DeadCodeElimination()`` (opt_level 1, as in TVM)."""

    def __init__(self) -> None:
        super().__init__(name="DeadCodeElimination", opt_level=1)

    def transform_function(self, func: Any, mod: Any, ctx: Any) -> Any:
        # iterate: dropping a binding can make the variables its value used dead in turn
        while True:
            cnt = _UseCount()
            cnt.visit(func)
            new = _DCE(cnt.uses).visit(func)
            if new is func:
                return func
            func = new


def _referenced_globals(func: Any) -> list[str]:
    """The names of the global functions ``func`` refers to."""
    from ..expr import Function, GlobalVar
    from ..visitor import post_order_visit

    if not isinstance(func, Function):
        return []
    names: list[str] = []
    post_order_visit(func, lambda e: names.append(e.name_hint)
                     if isinstance(e, GlobalVar) else None)
    return names


class RemoveUnusedFunctions(ModulePass):
    """``relay.transform.RemoveUnusedFunctions(entry_functions=None)`` (TVM's, opt_level 1):
    keep the functions reachable from ``entry_functions`` (default ``["main"]``) through global
    references; a module without any of them is returned as it is."""

    def __init__(self, entry_functions: Sequence[str] | None = None) -> None:
        entries = ["main"] if entry_functions is None else [str(n) for n in entry_functions]
        self.entry_functions = entries

        def remove(mod: IRModule, ctx: Any) -> IRModule:
            by_name = {g.name_hint: f for g, f in mod.items()}
            todo = [n for n in entries if n in by_name]
            if not todo:
                return mod
            keep: set[str] = set()
            while todo:
                name = todo.pop()
                if name in keep or name not in by_name:
                    continue
                keep.add(name)
                todo.extend(_referenced_globals(by_name[name]))
            out = IRModule()
            for g, f in mod.items():
                if g.name_hint in keep:
                    out[g] = f
            return out

        super().__init__(remove, "RemoveUnusedFunctions", 1)
