"""``tvm.lower`` and ``tvm.build``: schedule -> loop IR -> passes -> machine code -> Module."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .arith.sum_form import cache_scope
from .target import Target, as_target
from .tir.function import PrimFunc

if TYPE_CHECKING:
    from .runtime.module import Module
    from .tir.interpreter import InterpModule

__all__ = ["lower", "build", "lower_gpu"]


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


def _is_irmodule(x: Any) -> bool:
    from .ir.module import IRModule

    return isinstance(x, IRModule)


def _module_funcs(mod: Any) -> list[PrimFunc]:
    """TVM 0.8's ``tvm.build(mod)`` of an IRModule of PrimFuncs: each function under its
    global name (its ``global_symbol`` when it has one)."""
    out = []
    for gv, f in mod.items():
        if not isinstance(f, PrimFunc):
            raise TypeError(f"tvm.build of an IRModule builds tir.PrimFuncs; @{gv.name_hint} is a "
                            f"{type(f).__name__} (build relay functions with relay.build)")
        out.append(f if "global_symbol" in f.attrs else f.with_attr("global_symbol", gv.name_hint))
    if not out:
        raise ValueError("tvm.build: the IRModule has no functions")
    return out


def lower(inputs: Any, args: Sequence[Any] | None = None, name: str = "default_function", binds: dict | None = None,
          simple_mode: bool = False, target: Any = None) -> PrimFunc:
    """Lower a schedule (or PrimFunc) to optimized loop IR. ``print()`` the result to read it."""
    from .tir.pipeline import lower_pipeline  # with PassContext's tir.add_lower_pass

    func = _to_primfunc(inputs, args, name, binds)
    return lower_pipeline(func, as_target(target) if target is not None else None)


def build(inputs: Any, args: Sequence[Any] | None = None, target: Any = None, name: str = "default_function",
          binds: dict | None = None, target_host: Any = None) -> Module | InterpModule:
    """Compile to a runtime Module for ``target`` ("llvm ..." default, or "c")."""
    tgt = as_target(target, default="llvm")
    funcs_in = (_module_funcs(inputs) if _is_irmodule(inputs)
                else inputs if isinstance(inputs, (list, tuple)) else [inputs])
    with cache_scope():  # the simplifier's memo tables do not outlive the compilation
        funcs = [lower(f, args, name, binds, target=tgt) for f in funcs_in]
    if tgt.is_gpu:
        if target_host is not None:  # TVM's build(..., target="cuda", target_host="llvm")
            tgt = Target(str(tgt), host=target_host)
        mod = lower_gpu(funcs, tgt)
        # codegen.opencl / codegen.cuda (nvptx too): build(mod: IRModule, target) -> Module
        if tgt.kind == "opencl":
            from .codegen.opencl import build as build_gpu
        else:
            from .codegen.cuda import build as build_gpu
        return build_gpu(mod, tgt)
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


def lower_gpu(funcs: Sequence[PrimFunc], target: Any) -> Any:
    """GPU-lowered PrimFuncs (``lower(..., target=gpu)``) -> an IRModule of host functions
    and device kernels (SplitHostDevice), after checking each kernel against the target's
    limits (threads per block, shared memory per block: ValueError naming the excess)."""
    from .ir.module import IRModule
    from .tir.analysis import check_gpu_limits
    from .tir.transform.split_host_device import split_host_device

    tgt = as_target(target)
    out = IRModule()
    for f in funcs:
        for g in split_host_device(f, tgt):
            if g.attrs.get("calling_conv") == "device_kernel":
                check_gpu_limits(g, tgt)
            out[g.name] = g
    return out
