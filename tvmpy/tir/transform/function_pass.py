"""``prim_func_pass``: wrap ``fn(func, mod, ctx) -> func`` as a pass callable on a PrimFunc
(TVM's ``tvm.tir.transform.prim_func_pass``, for ``tir.add_lower_pass``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..function import PrimFunc

__all__ = ["PrimFuncPass", "prim_func_pass"]


class PrimFuncPass:
    """A pass over one PrimFunc; ``pass_(func)`` returns the transformed PrimFunc."""

    def __init__(self, fn: Callable[..., Any], opt_level: int, name: str):
        self.fn, self.opt_level, self.name = fn, opt_level, name

    def __call__(self, func: PrimFunc) -> PrimFunc:
        from ...transform import PassContext

        if not isinstance(func, PrimFunc):
            raise TypeError(f"pass {self.name}: expected a tir.PrimFunc, got {type(func).__name__}")
        out = self.fn(func, None, PassContext.current())
        if not isinstance(out, PrimFunc):
            raise TypeError(f"pass {self.name} must return a tir.PrimFunc, got "
                            f"{type(out).__name__}")
        return out


def prim_func_pass(pass_func: Callable[..., Any] | None = None, opt_level: int = 0,
                   name: str | None = None, required: Any = None) -> Any:
    """``prim_func_pass(fn, opt_level=0)`` or as a decorator ``@prim_func_pass(opt_level=0)``."""

    def make(fn: Callable[..., Any]) -> PrimFuncPass:
        return PrimFuncPass(fn, opt_level, name or getattr(fn, "__name__", "pass"))

    return make if pass_func is None else make(pass_func)
