"""Passes as in TVM (``tvm.transform``): ``PassInfo`` (name, opt_level, required), ``Pass``
(``pass(mod) -> mod`` on an IRModule), ``ModulePass`` / ``module_pass`` and ``Sequential``.

A pass called directly always runs (as in TVM), under the current PassContext (its instruments
see the call). ``Sequential`` decides which of its passes run, by the context's rule: a pass in
``disabled_pass`` never runs; otherwise one in ``required_pass`` always runs; otherwise it runs
when the context's ``opt_level`` is at least the pass's. Before a pass that runs, the passes it
names in ``required`` run (looked up by name, see :func:`register_pass`). Passes never mutate
their input module: they return a new IRModule (functions are immutable; shared ones are shared).
The level-specific kinds build on ``Pass``: ``tir.transform.PrimFuncPass`` (each PrimFunc of a
module) and ``relay.transform.FunctionPass`` (each relay Function).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

from ..ir.module import IRModule
from .context import PassContext

if TYPE_CHECKING:
    from .instrument import PassTrace

__all__ = ["PassInfo", "Pass", "ModulePass", "Sequential", "module_pass", "check_pass_args", "register_pass",
           "run_sequence", "PrintIR", "wrap_pass_class"]


class PassInfo:
    """A pass's name, the least opt_level that enables it, and the passes it requires."""

    __slots__ = ("name", "opt_level", "required")

    def __init__(self, opt_level: int, name: str, required: Sequence[str] | None = None):
        self.opt_level = int(opt_level)
        self.name = str(name)
        self.required = list(required or [])

    def __repr__(self) -> str:
        return f"PassInfo({self.name}, opt_level={self.opt_level}, required={self.required})"


class Pass:
    """Base class: ``pass(mod) -> mod``. Subclasses implement ``transform_module``."""

    def __init__(self, name: str, opt_level: int = 0, required: Sequence[str] | None = None):
        self.info = PassInfo(opt_level, name, required)

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def opt_level(self) -> int:
        return self.info.opt_level

    @property
    def required(self) -> list[str]:
        return self.info.required

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        raise NotImplementedError(f"{type(self).__name__}.transform_module")

    def __call__(self, mod: IRModule) -> IRModule:
        if not isinstance(mod, IRModule):
            raise TypeError(f"pass {self.name} runs on an IRModule, got {type(mod).__name__}")
        ctx = PassContext.current()
        if ctx.instruments:
            return _instrumented(self, mod, ctx)
        return self._checked(self.transform_module(mod, ctx))

    def _checked(self, out: Any) -> IRModule:
        if not isinstance(out, IRModule):
            raise TypeError(f"pass {self.name} returned {type(out).__name__}, not an IRModule")
        return out

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name}, opt_level={self.opt_level})"


def _instrumented(p: Pass, mod: IRModule, ctx: PassContext) -> IRModule:
    """TVM's protocol: every instrument's ``should_run`` is asked (all of them, unless the
    pass is in ``required_pass``); if none said False, each ``run_before_pass``, the pass, each
    ``run_after_pass``. An exception from any of them propagates at once."""
    insts = list(ctx.instruments)
    run = True
    if p.name not in ctx.required_pass:
        for i in insts:
            if hasattr(i, "should_run"):
                verdict = i.should_run(mod, p.info)
                run = run and (verdict is None or bool(verdict))
    if not run:
        return mod
    for i in insts:
        if hasattr(i, "run_before_pass"):
            i.run_before_pass(mod, p.info)
    out = p._checked(p.transform_module(mod, ctx))
    for i in insts:
        if hasattr(i, "run_after_pass"):
            i.run_after_pass(out, p.info)
    return out


class ModulePass(Pass):
    """A pass from a function ``(mod, ctx) -> mod``."""

    def __init__(self, fpass: Callable[[IRModule, PassContext], IRModule], name: str,
                 opt_level: int = 0, required: Sequence[str] | None = None):
        super().__init__(name, opt_level, required)
        self.fpass = fpass

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        return self.fpass(mod, ctx)


_REGISTRY: dict[str, Callable[[], Pass]] = {}


def register_pass(name: str, factory: Callable[[], Pass]) -> None:
    """Make ``factory()`` the pass that ``required=[name]`` runs."""
    _REGISTRY[name] = factory


def run_sequence(passes: Sequence[Pass], mod: IRModule, ctx: PassContext,
                 trace: PassTrace | None = None) -> IRModule:
    """Run the enabled ``passes`` in order (each after the passes it requires); ``trace``
    (DUMP_IR / DEBUG / checks) sees each pass that ran."""
    if trace is not None:
        trace.start(mod)
    for p in passes:
        if not ctx.pass_enabled(p.name, p.opt_level):
            continue
        for req in p.required:
            factory = _REGISTRY.get(req)
            if factory is None:
                raise ValueError(f"pass {p.name} requires unknown pass {req!r}")
            mod = factory()(mod)
        mod = p(mod) if trace is None else trace.run(p, mod)
    return mod


class Sequential(Pass):
    """``Sequential([p1, p2, ...], opt_level=0, name="sequential", required=())(mod)``."""

    def __init__(self, passes: Sequence[Pass] | None = None, opt_level: int = 0,
                 name: str = "sequential", required: Sequence[str] | None = None):
        super().__init__(name, opt_level, required)
        self.passes = list(passes or [])
        for p in self.passes:
            if not isinstance(p, Pass):
                raise TypeError(f"Sequential takes Pass objects, got {p!r}")

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        return run_sequence(self.passes, mod, ctx)


def wrap_pass_class(pass_cls: type, base: type, method: str,
                    init: Callable[[Any, Callable[..., Any]], None]) -> type:
    """TVM's pass decorators on a class: a subclass of ``base`` (a Pass kind) whose
    constructor takes ``pass_cls``'s arguments, makes a ``pass_cls`` instance and calls
    ``init(self, instance.<method>)`` (the base's constructor with that function); the
    instance's other attributes read through the pass."""
    if not callable(getattr(pass_cls, method, None)):
        raise TypeError(f"{pass_cls.__name__}: a class made a pass must define {method}()")

    class PyPass(base):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            inst = pass_cls(*args, **kwargs)
            self.__dict__["_inst"] = inst
            init(self, getattr(inst, method))

        def __getattr__(self, attr: str) -> Any:
            inst = self.__dict__.get("_inst")
            if inst is None:
                raise AttributeError(attr)
            return getattr(inst, attr)

    user_init: Any = cast(Any, pass_cls).__init__
    functools.update_wrapper(PyPass.__init__, user_init)
    PyPass.__name__ = pass_cls.__name__
    PyPass.__qualname__ = pass_cls.__qualname__
    PyPass.__doc__ = pass_cls.__doc__
    PyPass.__module__ = pass_cls.__module__
    return PyPass


def check_pass_args(kind: str, opt_level: Any, required: Any) -> tuple[int, list[str]]:
    """TVM's checks on a pass decorator's arguments: ``opt_level`` is required (the pass runs
    only under ``PassContext(opt_level=n)`` with ``n >= opt_level``, so there is no neutral
    default) and ``required`` is a list or tuple of pass names. Returns ``(opt_level, list(required))``."""
    if opt_level is None:
        raise ValueError(f"Please provide opt_level for the {kind}: e.g. "
                         f"@{kind.replace(' ', '_')}(opt_level=0) (it runs when the "
                         "PassContext's opt_level is at least this)")
    if isinstance(opt_level, bool) or not isinstance(opt_level, int):
        raise TypeError(f"opt_level of the {kind} must be an int, got {opt_level!r}")
    if required is None:
        return opt_level, []
    if not isinstance(required, (list, tuple)):
        raise TypeError(f"required of the {kind} must be a list/tuple of pass names, got "
                        f"{type(required).__name__}")
    return opt_level, list(required)


def module_pass(pass_func: Any = None, opt_level: int | None = None, name: str | None = None,
                required: Sequence[str] | None = None) -> Any:
    """``@module_pass(opt_level=2)`` on ``def f(mod, ctx) -> mod`` gives a ModulePass (also
    ``module_pass(f, opt_level=2)``); on a class with ``transform_module(self, mod, ctx)`` it
    gives a ModulePass subclass: ``MyPass(args...)`` is a pass (the arguments go to the
    class's constructor). ``opt_level`` is required, as in TVM."""
    level, required = check_pass_args("module pass", opt_level, required)

    def wrap(f: Any) -> Any:
        pname = name or str(getattr(f, "__name__", "module_pass"))
        if inspect.isclass(f):
            return wrap_pass_class(f, ModulePass, "transform_module",
                                   lambda self, fn: ModulePass.__init__(self, fn, pname,
                                                                        level, required))
        if not callable(f):
            raise TypeError(f"module_pass takes a function or a class, got {f!r}")
        return ModulePass(f, pname, level, required)
    return wrap(pass_func) if pass_func is not None else wrap


def PrintIR(header: str = "", show_meta_data: bool = False) -> ModulePass:
    """``tvm.transform.PrintIR(header)``: a pass that prints the module and returns it
    (``show_meta_data=True``: as ``mod.astext(show_meta_data=True)``, with the metadata)."""

    def print_ir(mod: IRModule, ctx: PassContext) -> IRModule:
        text = mod.astext(show_meta_data=True) if show_meta_data else str(mod)
        print(f"PrintIR({header}):\n{text}")
        return mod

    return ModulePass(print_ir, "PrintIR", 0)
