"""``FunctionPass`` / ``function_pass``: relay's pass kind on the shared infrastructure
(:mod:`tvmpy.transform`): ``(func, mod, ctx) -> func`` applied to each relay Function of a
module (TVM's ``relay.transform.FunctionPass``); the result is re-typed (InferType), so later
passes see ``checked_type`` everywhere. Primitive (fused) functions and tir PrimFuncs are kept
as they are.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

from ...ir.module import IRModule
from ...transform import Pass, PassContext
from ...transform.passes import check_pass_args, wrap_pass_class
from ..expr import Function, RelayExpr

__all__ = ["FunctionPass", "function_pass"]


class FunctionPass(Pass):
    """A pass from ``(func, mod, ctx) -> func``, or a subclass overriding
    ``transform_function``."""

    def __init__(self, fpass: Callable[[Function, IRModule, PassContext], Function] | None = None,
                 name: str = "", opt_level: int = 0, required: Sequence[str] | None = None):
        super().__init__(name or type(self).__name__, opt_level, required)
        self.fpass = fpass

    def transform_function(self, func: Function, mod: IRModule, ctx: PassContext) -> Function:
        if self.fpass is None:
            raise NotImplementedError(f"{type(self).__name__}.transform_function")
        return self.fpass(func, mod, ctx)

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        from . import InferType

        mod = InferType()(mod)
        out = IRModule()
        for gv, func in mod.items():
            if isinstance(func, Function) and not func.attrs.get("Primitive"):
                new = self.transform_function(func, mod, ctx)
                if not isinstance(new, RelayExpr):
                    raise TypeError(f"pass {self.name} returned {new!r} for {gv.name_hint}")
                func = new
            out[gv] = func
        return InferType()(out)


def function_pass(pass_func: Any = None, opt_level: int | None = None, name: str | None = None,
                  required: Sequence[str] | None = None) -> Any:
    """``@function_pass(opt_level=1)`` on ``def f(func, mod, ctx) -> func`` gives a
    FunctionPass (also ``function_pass(f, opt_level=1)``); on a class with
    ``transform_function(self, func, mod, ctx)`` it gives a FunctionPass subclass:
    ``MyPass(args...)`` is a pass (the arguments go to the class's constructor).
    ``opt_level`` is required, as in TVM."""
    level, required = check_pass_args("function pass", opt_level, required)

    def wrap(f: Any) -> Any:
        pname = name or str(getattr(f, "__name__", "function_pass"))
        if inspect.isclass(f):
            return wrap_pass_class(f, FunctionPass, "transform_function",
                                   lambda self, fn: FunctionPass.__init__(self, fn, pname,
                                                                          level, required))
        if not callable(f):
            raise TypeError(f"function_pass takes a function or a class, got {f!r}")
        return FunctionPass(f, pname, level, required)
    return wrap(pass_func) if pass_func is not None else wrap
