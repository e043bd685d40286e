"""IRModule: named global functions (``@main`` and, after fusion/lowering, others).

``tvm.IRModule.from_expr(f)`` wraps an expression (a non-Function becomes the body of a function
over its free variables). ``mod["main"]`` gets a function by name; ``mod["f"] = fn`` sets one.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from ..ir.node import Node
from .expr import Function, GlobalVar, RelayExpr

__all__ = ["IRModule"]


class IRModule(Node):
    """A mapping of GlobalVar -> Function. Passes return new modules; they do not edit this one.

    ``tvm.ir.structural_equal(mod_a, mod_b)`` compares the functions (same names, same order).
    """

    __slots__ = ("functions", "_by_name")

    def __init__(self, functions: Mapping[Any, Function] | None = None):
        self._init(functions={}, _by_name={})
        for k, v in (functions or {}).items():
            self[k] = v

    @staticmethod
    def from_expr(expr: RelayExpr, functions: Mapping[Any, Function] | None = None) -> IRModule:
        from .analysis import free_vars

        if not isinstance(expr, RelayExpr):
            raise TypeError(f"IRModule.from_expr needs a relay expression, got {expr!r}")
        if not isinstance(expr, Function):
            expr = Function(free_vars(expr), expr)
        mod = IRModule(functions)
        mod["main"] = expr
        return mod

    def get_global_var(self, name: str) -> GlobalVar:
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"no function @{name} in the module (has: "
                           f"{', '.join('@' + n for n in self._by_name)})") from None

    def get_global_vars(self) -> list[GlobalVar]:
        return list(self.functions)

    def _gvar(self, key: Any, create: bool = False) -> GlobalVar:
        if isinstance(key, GlobalVar):
            return key
        if not isinstance(key, str):
            raise TypeError(f"module keys are names or GlobalVars, got {key!r}")
        if create and key not in self._by_name:
            return GlobalVar(key)
        return self.get_global_var(key)

    def __getitem__(self, key: Any) -> Function:
        g = self._gvar(key)
        if g not in self.functions:
            raise KeyError(f"no function @{g.name_hint} in the module")
        return self.functions[g]

    def __setitem__(self, key: Any, func: Function) -> None:
        if not isinstance(func, Function):
            raise TypeError(f"a module holds Functions, got {type(func).__name__}")
        g = self._gvar(key, create=True)
        old = self._by_name.get(g.name_hint)
        if old is not None and old is not g:
            del self.functions[old]
        self._by_name[g.name_hint] = g
        self.functions[g] = func

    def __contains__(self, key: Any) -> bool:
        return (key in self._by_name) if isinstance(key, str) else (key in self.functions)

    def __iter__(self) -> Iterator[GlobalVar]:
        return iter(self.functions)

    def __len__(self) -> int:
        return len(self.functions)

    def items(self):
        return self.functions.items()

    def copy(self) -> IRModule:
        new = IRModule()
        for g, f in self.functions.items():
            new._by_name[g.name_hint] = g
            new.functions[g] = f
        return new

    def astext(self, show_types: bool = True) -> str:
        from .printer import astext

        return astext(self, show_types)

    def __str__(self) -> str:
        return self.astext()
