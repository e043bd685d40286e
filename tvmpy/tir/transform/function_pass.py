"""``PrimFuncPass`` / ``prim_func_pass``: tir's pass kind on the shared infrastructure
(:mod:`tvmpy.transform`), TVM's ``tvm.tir.transform.prim_func_pass``: ``fn(func, mod, ctx) ->
func`` applied to each PrimFunc of an IRModule (relay functions are kept as they are; a ``None``
result removes the function). ``PrimFuncPass.from_func(f, name)`` is the pass form of a
function-level ``PrimFunc -> PrimFunc`` transformation (how the built-in passes are exposed).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

from ...ir.module import IRModule
from ...transform import Pass, PassContext
from ...transform.passes import check_pass_args, wrap_pass_class
from ..function import PrimFunc

__all__ = ["PrimFuncPass", "prim_func_pass"]

PassFunc = Callable[[PrimFunc, IRModule, PassContext], Any]


class PrimFuncPass(Pass):
    """A pass that rewrites every PrimFunc of a module with ``pass_func(func, mod, ctx)``."""

    def __init__(self, pass_func: PassFunc, opt_level: int = 0, name: str = "",
                 required: Sequence[str] | None = None):
        super().__init__(name or getattr(pass_func, "__name__", "PrimFuncPass"), opt_level,
                         required)
        self.pass_func = pass_func

    @staticmethod
    def from_func(fn: Callable[[PrimFunc], PrimFunc], name: str, opt_level: int = 0
                  ) -> PrimFuncPass:
        """The pass that applies ``fn(func)`` to each PrimFunc."""
        return PrimFuncPass(lambda f, m, c: fn(f), opt_level, name)

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        out = IRModule()
        for gv, func in mod.items():
            if isinstance(func, PrimFunc):
                func = self.pass_func(func, mod, ctx)
                if func is None:
                    continue
                if not isinstance(func, PrimFunc):
                    raise TypeError(f"pass {self.name} must return a tir.PrimFunc, got "
                                    f"{type(func).__name__}")
            out[gv] = func
        return out


def prim_func_pass(pass_func: Any = None, opt_level: int | None = None, name: str | None = None,
                   required: Sequence[str] | None = None) -> Any:
    """``prim_func_pass(fn, opt_level=0)`` or the decorator ``@prim_func_pass(opt_level=0)`` on
    ``def fn(func, mod, ctx) -> func``; on a class with ``transform_function(self, func, mod,
    ctx)``, it gives a PrimFuncPass subclass: ``MyPass(args...)`` is a pass (the arguments go
    to the class's constructor). ``opt_level`` is required, as in TVM."""
    level, required = check_pass_args("prim_func pass", opt_level, required)

    def make(arg: Any) -> Any:
        pname = name or str(getattr(arg, "__name__", "PrimFuncPass"))
        if inspect.isclass(arg):
            return wrap_pass_class(arg, PrimFuncPass, "transform_function",
                                   lambda self, fn: PrimFuncPass.__init__(self, fn, level,
                                                                          pname, required))
        if not callable(arg):
            raise TypeError(f"prim_func_pass takes a function or a class, got {arg!r}")
        return PrimFuncPass(arg, level, pname, required)

    return make if pass_func is None else make(pass_func)
