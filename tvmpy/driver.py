"""``tvm.lower`` and ``tvm.build``: schedule -> loop IR -> passes -> machine code -> Module."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .arith.sum_form import cache_scope
from .ir.module import IRModule
from .target import Target, as_target
from .tir.function import PrimFunc

if TYPE_CHECKING:
    from .runtime.module import Module
    from .tir.interpreter import InterpModule

__all__ = ["lower", "lower_primfunc", "build", "lower_gpu", "LoweredModule"]


def _to_primfunc(inputs: Any, args: Sequence[Any] | None, name: str, binds: dict | None) -> PrimFunc:
    if not isinstance(name, str) or not name.isidentifier() or not name.isascii():
        raise ValueError(f"lower/build: name must be a C identifier such as 'my_func' (it is the "
                         f"function's symbol), got {type(name).__name__} {name!r}")
    if isinstance(inputs, PrimFunc):
        return inputs if name == "default_function" or "global_symbol" in inputs.attrs else inputs.with_attr("global_symbol", name)
    from .te.schedule import Schedule
    from .te.schedule_ops import schedule_to_primfunc

    if not isinstance(inputs, Schedule):
        raise TypeError(f"lower/build expects a te.Schedule or a tir.PrimFunc, got {type(inputs).__name__}")
    if args is None:
        raise TypeError("lower/build of a schedule needs `args`: the tensors (and scalar vars) of the function")
    if not isinstance(args, (list, tuple)):
        raise TypeError(f"lower/build: args must be a list of tensors (and scalar vars), got "
                        f"{type(args).__name__} {args!r}")
    if binds is not None and not isinstance(binds, dict):
        raise TypeError(f"lower/build: binds must be a dict {{Tensor: Buffer}}, got {type(binds).__name__}")
    return schedule_to_primfunc(inputs, list(args), name, binds or {})


class LoweredModule(IRModule):
    """What ``tvm.lower`` returns: an IRModule (TVM 0.7+: ``mod["f"]``, ``mod.functions``,
    ``tvm.build(mod)``) that, holding one function, also reads as that function, for code of
    TVM 0.6, whose ``lower`` returned the function itself (``print(f)``, ``f.body``,
    ``f.params``): ``mod["main"]`` is that function unless one is named ``main`` (TVM 0.8's
    default name), and attributes IRModule lacks are the function's."""

    __slots__ = ()

    def single(self) -> PrimFunc:
        """The one function of this module (ValueError when it holds several)."""
        if len(self.functions) != 1:
            raise ValueError(f"this module holds {len(self.functions)} functions ("
                             + ", ".join("@" + g.name_hint for g in self.functions)
                             + "); pick one: mod[name]")
        return next(iter(self.functions.values()))  # type: ignore[return-value]

    def __getitem__(self, key: Any) -> Any:
        if key == "main" and "main" not in self._by_name and len(self.functions) == 1:
            return self.single()
        return super().__getitem__(key)

    def __getattr__(self, attr: str) -> Any:  # only for names IRModule does not have
        if attr.startswith("_") or attr == "functions":
            raise AttributeError(attr)
        funcs = self.functions.values()
        if len(funcs) == 1:
            return getattr(next(iter(funcs)), attr)
        raise AttributeError(f"'IRModule' object has no attribute {attr!r}")

    def __str__(self) -> str:  # one function prints as itself (as TVM 0.6 printed lower's)
        return str(self.single()) if len(self.functions) == 1 else super().__str__()


def lower_primfunc(inputs: Any, args: Sequence[Any] | None = None, name: str = "default_function",
                   binds: dict | None = None, target: Any = None) -> PrimFunc:
    """A schedule (or PrimFunc) lowered to optimized loop IR: the one PrimFunc ``lower``'s
    module holds (the compiler's own entry point)."""
    from .tir.pipeline import lower_pipeline  # with PassContext's tir.add_lower_pass

    func = _to_primfunc(inputs, args, name, binds)
    return lower_pipeline(func, target)


def _module_funcs(mod: IRModule, what: str) -> list[PrimFunc]:
    """The PrimFuncs of ``mod``, each with its name as its symbol (TVM's ``global_symbol``)."""
    out = []
    for g, f in mod.functions.items():
        if not isinstance(f, PrimFunc):
            raise TypeError(f"{what}: @{g.name_hint} is a {type(f).__name__}; tvm.{what} takes an "
                            "IRModule of tir.PrimFuncs (a relay module is built by relay.build)")
        out.append(f if "global_symbol" in f.attrs else f.with_attr("global_symbol", g.name_hint))
    return out


def lower(inputs: Any, args: Sequence[Any] | None = None, name: str = "default_function", binds: dict | None = None,
          simple_mode: bool = False, target: Any = None) -> LoweredModule:
    """Lower a schedule, PrimFunc or IRModule of PrimFuncs to optimized loop IR: an IRModule
    (TVM 0.7+) with the function under ``name``, which ``print()`` shows (see
    :class:`LoweredModule` for TVM 0.6's function-valued use)."""
    out = LoweredModule()
    if isinstance(inputs, IRModule):
        for f in _module_funcs(inputs, "lower"):
            g = lower_primfunc(f, target=target)
            out[g.attrs["global_symbol"]] = g
        return out
    func = lower_primfunc(inputs, args, name, binds, target)
    out[func.attrs.get("global_symbol", name)] = func
    return out


def build(inputs: Any, args: Sequence[Any] | None = None, target: Any = None, name: str = "default_function",
          binds: dict | None = None, target_host: Any = None) -> Module | InterpModule:
    """Compile to a runtime Module for ``target`` ("llvm ..." default, or "c"). ``inputs``: a
    schedule (with ``args``), a PrimFunc, an IRModule of PrimFuncs (``tvm.lower``'s result:
    every function is built, under its name), or a list of those."""
    tgt = as_target(target, default="llvm")
    if tgt.kind == "ext_dev":
        raise ValueError("target ext_dev (the VTA accelerator) is built by "
                         "tvmpy.vta.build(s, args, 'ext_dev', env.target_host)")
    funcs_in: list[Any] = []
    for item in inputs if isinstance(inputs, (list, tuple)) else [inputs]:
        funcs_in.extend(_module_funcs(item, "build") if isinstance(item, IRModule) else [item])
    if not funcs_in:
        raise ValueError("build: no functions to build")
    with cache_scope():  # the simplifier's memo tables do not outlive the compilation
        funcs = [lower_primfunc(f, args, name, binds, target=tgt) for f in funcs_in]
    if tgt.is_gpu:
        if target_host is not None:  # TVM's build(..., target="cuda", target_host="llvm")
            tgt = Target(str(tgt), host=target_host)
        mod = lower_gpu(funcs, tgt)
        from .codegen import gpu_build

        return gpu_build(tgt.kind)(mod, tgt)
    if tgt.kind == "llvm":
        from .codegen.llvm import build as build_llvm

        return build_llvm(funcs, tgt)
    if tgt.kind == "c":
        from .codegen.c import build as build_c

        return build_c(funcs, tgt)
    if tgt.kind == "interp":
        from .tir.interpreter import build as build_interp

        return build_interp(funcs, tgt)
    raise ValueError(f"no code generator for target {tgt}")


def lower_gpu(funcs: Sequence[PrimFunc | IRModule], target: Any) -> Any:
    """GPU-lowered PrimFuncs (``lower(..., target=gpu)``) -> an IRModule of host functions
    and device kernels (SplitHostDevice), after checking each kernel against the target's
    limits (threads per block, shared memory per block: ValueError naming the excess)."""
    from .tir.analysis import check_gpu_limits
    from .tir.transform.split_host_device import split_host_device

    tgt = as_target(target)
    out = IRModule()
    flat: list[PrimFunc] = []
    for item in funcs:
        flat.extend(_module_funcs(item, "build") if isinstance(item, IRModule) else [item])
    for f in flat:
        for g in split_host_device(f, tgt):
            if g.attrs.get("calling_conv") == "device_kernel":
                check_gpu_limits(g, tgt)
            out[g.name] = g
    return out
