"""Pass infrastructure as in TVM: ``Pass`` (name, opt_level, required), ``ModulePass``
(``IRModule -> IRModule``), ``FunctionPass`` (each relay Function of a module rewritten alone),
``Sequential`` (runs its passes in order, each only when
``PassContext.current().pass_enabled(name, opt_level)``: not in ``disabled_pass``, and either in
``required_pass`` or ``opt_level`` at least the pass's). A pass called directly always runs (as in
TVM); the opt_level gating is Sequential's job. Passes never mutate their input module: they
return a new IRModule (functions are immutable; shared ones are shared).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ...transform import PassContext
from ..expr import Function, RelayExpr
from ..module import IRModule

__all__ = ["Pass", "ModulePass", "FunctionPass", "Sequential", "module_pass", "function_pass"]


class Pass:
    """Base class: ``pass(mod) -> mod``. Subclasses implement ``transform_module``."""

    def __init__(self, name: str, opt_level: int = 0, required: Sequence[str] = ()):
        self.name = str(name)
        self.opt_level = int(opt_level)
        self.required = list(required)

    @property
    def info(self) -> Pass:  # TVM spells ``pass.info.name``
        return self

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        raise NotImplementedError(f"{type(self).__name__}.transform_module")

    def __call__(self, mod: IRModule) -> IRModule:
        if not isinstance(mod, IRModule):
            raise TypeError(f"pass {self.name} runs on an IRModule, got {type(mod).__name__}")
        out = self.transform_module(mod, PassContext.current())
        if not isinstance(out, IRModule):
            raise TypeError(f"pass {self.name} returned {type(out).__name__}, not an IRModule")
        return out

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name}, opt_level={self.opt_level})"


class ModulePass(Pass):
    """A pass from a function ``(mod, ctx) -> mod``."""

    def __init__(self, fpass: Callable[[IRModule, PassContext], IRModule], name: str,
                 opt_level: int = 0, required: Sequence[str] = ()):
        super().__init__(name, opt_level, required)
        self.fpass = fpass

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        return self.fpass(mod, ctx)


class FunctionPass(Pass):
    """A pass from ``(func, mod, ctx) -> func`` applied to every relay Function of the module;
    the result is re-typed (InferType) so later passes see ``checked_type`` everywhere."""

    def __init__(self, fpass: Callable[[Function, IRModule, PassContext], Function] | None = None,
                 name: str = "", opt_level: int = 0, required: Sequence[str] = ()):
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


class Sequential(Pass):
    """``Sequential([p1, p2, ...], opt_level=0, name="sequential", required=())(mod)``."""

    def __init__(self, passes: Sequence[Pass] | None = None, opt_level: int = 0,
                 name: str = "sequential", required: Sequence[str] = ()):
        super().__init__(name, opt_level, required)
        self.passes = list(passes or [])
        for p in self.passes:
            if not isinstance(p, Pass):
                raise TypeError(f"Sequential takes Pass objects, got {p!r}")

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        for p in self.passes:
            if not ctx.pass_enabled(p.name, p.opt_level):
                continue
            for req in p.required:  # TVM resolves required passes by name from a registry
                rp = _REGISTRY.get(req)
                if rp is None:
                    raise ValueError(f"pass {p.name} requires unknown pass {req!r}")
                mod = rp()(mod)
            mod = p(mod)
        return mod


_REGISTRY: dict[str, Callable[[], Pass]] = {}


def register_pass(name: str, factory: Callable[[], Pass]) -> None:
    _REGISTRY[name] = factory


def module_pass(fpass: Any = None, opt_level: int = 0, name: str = "",
                required: Sequence[str] = ()) -> Any:
    """Decorator: ``@module_pass(opt_level=2)`` on ``def f(mod, ctx) -> mod`` gives a ModulePass."""
    def wrap(f: Callable[..., IRModule]) -> ModulePass:
        return ModulePass(f, name or f.__name__, opt_level, required)
    return wrap(fpass) if fpass is not None else wrap


def function_pass(fpass: Any = None, opt_level: int = 0, name: str = "",
                  required: Sequence[str] = ()) -> Any:
    """Decorator: ``@function_pass(opt_level=1)`` on ``def f(func, mod, ctx) -> func``."""
    def wrap(f: Callable[..., Function]) -> FunctionPass:
        return FunctionPass(f, name or f.__name__, opt_level, required)
    return wrap(fpass) if fpass is not None else wrap
