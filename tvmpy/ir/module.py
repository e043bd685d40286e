"""IRModule: named global functions, relay Functions and tir PrimFuncs alike (TVM's
``tvm.IRModule``); the unit every pass (``tvmpy.transform``) maps to a new module.

``mod["main"]`` gets a function by name or GlobalVar; ``mod["f"] = fn`` sets one.
``IRModule.from_expr(e)`` wraps a function, or a relay expression as the body of a function over
its free variables, as ``@main``.
"""

from __future__ import annotations

from collections.abc import Callable, ItemsView, Iterator, Mapping
from typing import Any

from .expr import GlobalVar, RelayExpr
from .function import BaseFunc, TextMeta
from .node import Node

__all__ = ["IRModule"]


class IRModule(Node):
    """A mapping of GlobalVar -> function. Passes return new modules; they do not edit this one.

    ``tvm.ir.structural_equal(mod_a, mod_b)`` compares the functions (same names, same order).
    """

    __slots__ = ("functions", "_by_name")
    functions: dict[GlobalVar, BaseFunc]
    _by_name: dict[str, GlobalVar]

    def __init__(self, functions: Mapping[Any, BaseFunc] | None = None):
        self._init(functions={}, _by_name={})
        for k, v in (functions or {}).items():
            self[k] = v

    @staticmethod
    def from_expr(expr: Any, functions: Mapping[Any, BaseFunc] | None = None) -> IRModule:
        if not isinstance(expr, BaseFunc):
            if not isinstance(expr, RelayExpr) or not hasattr(expr, "as_function"):
                raise TypeError(f"IRModule.from_expr needs a function or a relay expression, "
                                f"got {expr!r}")
            expr = expr.as_function()
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

    def __getitem__(self, key: Any) -> Any:
        g = self._gvar(key)
        if g not in self.functions:
            raise KeyError(f"no function @{g.name_hint} in the module")
        return self.functions[g]

    def __setitem__(self, key: Any, func: BaseFunc) -> None:
        if not isinstance(func, BaseFunc):
            raise TypeError(f"a module holds Functions (relay.Function or tir.PrimFunc), got "
                            f"{type(func).__name__}")
        g = self._gvar(key, create=True)
        old = self._by_name.get(g.name_hint)
        if old is not None and old is not g:
            del self.functions[old]
        self._by_name[g.name_hint] = g
        self.functions[g] = func

    def update_func(self, var: Any, func: BaseFunc) -> None:
        """TVM's ``mod.update_func(gvar, func)``: replace (or add) the function of ``var``."""
        self[var] = func

    def __delitem__(self, key: Any) -> None:
        g = self._gvar(key)
        del self.functions[g]
        del self._by_name[g.name_hint]

    def __contains__(self, key: Any) -> bool:
        return (key in self._by_name) if isinstance(key, str) else (key in self.functions)

    def __iter__(self) -> Iterator[GlobalVar]:
        return iter(self.functions)

    def __len__(self) -> int:
        return len(self.functions)

    def items(self) -> ItemsView[GlobalVar, Any]:
        return self.functions.items()

    def copy(self) -> IRModule:
        new = IRModule()
        for g, f in self.functions.items():
            new._by_name[g.name_hint] = g
            new.functions[g] = f
        return new

    def astext(self, show_meta_data: bool = True, annotate: Callable[[Any], Any] | None = None,
               show_types: bool = True) -> str:
        """TVM's text format: a version line, the functions, the metadata section (the
        tensor constants, ``show_meta_data=True``) or a note that it was left out;
        ``annotate(expr) -> str`` replaces the ``/* ty=... */`` comments (tvmpy's
        ``show_types=False`` drops them)."""
        meta = TextMeta(annotate)
        text = "\n\n".join(f.astext_global(g.name_hint, show_types, meta)
                           for g, f in self.functions.items())
        return meta.finish(text, show_meta_data)

    def __str__(self) -> str:
        return "\n\n".join(f.astext_global(g.name_hint) for g, f in self.functions.items())
