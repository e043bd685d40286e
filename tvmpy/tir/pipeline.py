"""The loop-IR pass pipeline: IR form 1 (after schedule lowering) -> form 2 (for codegen).

The pipeline is TVM's ``tvm.lower`` (0.7/0.8, ``driver/build_module.py``) as named Pass objects
in four phases; ``PassContext(config={"tir.add_lower_pass": [(phase, pass), ...]})`` places
custom passes at the end of a phase, in the order given:

- phase 0: no built-in pass; custom passes see the loop IR of the schedule as te lowering left
  it (multi-dimensional buffers);
- phase 1: LegalizeStorageDtypes (bfloat16/float8/int4... as bits + float32/int32 math),
  StorageFlatten, Simplify; custom passes see flat 1-D buffers, loops as scheduled;
- phase 2: LoopPartition, Simplify, VectorizeLoop, InjectVirtualThread, InjectDoubleBuffer,
  StorageRewrite, UnrollLoop; custom passes see vector IR and unrolled loops;
- phase 3: Simplify, SkipPaddedTaps (CPU targets), RemoveNoOp, LowerIntrin; custom passes see the final IR with the
  target's intrinsics lowered (TVM runs LowerIntrin later, in ``tvm.build``; here ``tvm.lower``
  includes it), before the lowered-form check.

A custom pass is a Pass (``tvm.tir.transform.prim_func_pass`` / ``tvm.transform.module_pass``),
gated by the PassContext like the built-in ones, or a plain callable PrimFunc -> PrimFunc.
TVM 0.6's ``Stmt -> Stmt`` functions are not accepted: wrap them as
``prim_func_pass(lambda f, mod, ctx: f.with_body(fn(f.body)))``. Every built-in pass has
opt_level 0 (as in TVM), so ``disabled_pass=["LoopPartition"]`` turns one off.

``lower_pipeline(func, target)`` runs the pipeline on a one-function IRModule (LowerIntrin
bound to ``target``, else the function's or the current Target's), checks the result against
the lowered form contract (:func:`tvmpy.tir.analysis.verify_lowered`) and marks it
``"tir.lowered": True``.
Inspection (:class:`tvmpy.transform.PassTrace`): ``DUMP_IR=<dir>`` writes the input as
``00_input.txt`` and each pass's output as ``NN_<pass>.txt``; ``DEBUG>=1`` prints each pass's
name and time; ``DEBUG>=2`` also checks after each pass that every variable is defined once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..ir.module import IRModule
from ..transform import Pass, PassContext, PassTrace
from ..transform.passes import run_sequence
from .analysis import verify_lowered, verify_single_definition
from .function import PrimFunc
from .transform import (
    InjectDoubleBuffer,
    InjectPrefetch,
    InjectVirtualThread,
    LegalizeStorageDtypes,
    LoopPartition,
    LowerIntrin,
    PrimFuncPass,
    RemoveNoOp,
    Simplify,
    SkipPaddedTaps,
    StorageFlatten,
    StorageRewrite,
    UnrollLoop,
    VectorizeLoop,
)

__all__ = ["lower_pipeline", "builtin_phases", "gpu_phases", "PASSES", "pipeline_passes"]


def builtin_phases(target: Any = None) -> list[list[Pass]]:
    """The built-in passes of phases 0..3 (LowerIntrin bound to ``target`` when given); a GPU
    target (opencl, cuda, nvptx) gets the GPU phases (:func:`gpu_phases`)."""
    if getattr(target, "is_gpu", False):
        return gpu_phases(target)
    return [
        [],
        [LegalizeStorageDtypes(), StorageFlatten(), Simplify()],
        [LoopPartition(), Simplify(), VectorizeLoop(), InjectPrefetch(), InjectVirtualThread(),
         InjectDoubleBuffer(), StorageRewrite(), UnrollLoop()],
        [Simplify(), SkipPaddedTaps(), RemoveNoOp(), LowerIntrin(target)],
    ]


def gpu_phases(target: Any) -> list[list[Pass]]:
    """The phases for a GPU target: the CPU phases plus LowerThreadAllreduce (cross-thread
    reductions as shared-memory trees) before LoopPartition, UnifyThreadBinding (each thread tag
    once at a kernel's top, shared allocations hoisted there) after InjectVirtualThread (which
    must see shared allocations inside the vthread to replicate them, and LoopPartition, which
    must not split loops at thread-dependent points), LowerWarpMemory ("warp" buffers as
    registers and shuffles, or shared memory on OpenCL) after UnifyThreadBinding, and
    ThreadSync("shared") before the final Simplify. SplitHostDevice
    and the GPU checks run in ``tvm.build`` (:func:`tvmpy.driver.lower_gpu`)."""
    from .transform.lower_warp_memory import LowerWarpMemory
    from .transform.thread_allreduce import LowerThreadAllreduce
    from .transform.thread_sync import ThreadSync
    from .transform.unify_thread_binding import UnifyThreadBinding

    return [
        [],
        [LegalizeStorageDtypes(), StorageFlatten(), Simplify()],
        [LowerThreadAllreduce(target), LoopPartition(), Simplify(), VectorizeLoop(),
         InjectVirtualThread(), UnifyThreadBinding(), LowerWarpMemory(target),
         InjectDoubleBuffer(), StorageRewrite(),
         UnrollLoop()],
        [ThreadSync("shared"), Simplify(), RemoveNoOp(),
         LowerIntrin(target)],
    ]


PASSES: list[Pass] = [p for phase in builtin_phases() for p in phase]  # for listing

CustomPass = tuple[int, Any]


def _as_pass(fn: Any) -> Pass:
    if isinstance(fn, Pass):
        return fn
    return PrimFuncPass.from_func(fn, getattr(fn, "__name__", "custom"))


def pipeline_passes(custom: Sequence[CustomPass] = (), target: Any = None) -> list[Pass]:
    """The pipeline's passes, with the ``(phase, pass)`` pairs of ``custom`` at the end of
    their phases."""
    for item in custom:
        if not (isinstance(item, (tuple, list)) and len(item) == 2 and item[0] in (0, 1, 2, 3)
                and callable(item[1])):
            raise ValueError(f"tir.add_lower_pass entry {item!r}: expected (phase, pass) with "
                             "phase in 0..3 and pass a Pass or a callable PrimFunc -> PrimFunc")
    out: list[Pass] = []
    for phase, builtin in enumerate(builtin_phases(target)):
        out += builtin
        out += [_as_pass(fn) for ph, fn in custom if ph == phase]
    return out


def _check(mod: IRModule) -> None:  # the invariant every pass keeps: one definition per var
    for f in mod.functions.values():
        if isinstance(f, PrimFunc):
            verify_single_definition(f)


def _text(mod: IRModule) -> str:
    return "\n\n".join(str(f) for f in mod.functions.values())


def lower_pipeline(func: PrimFunc, target: Any = None,
                   custom_passes: Sequence[CustomPass] | None = None) -> PrimFunc:
    """Run the pass pipeline on ``func`` (form 1) and return the lowered PrimFunc (form 2).

    ``custom_passes``: ``(phase, pass)`` pairs (see the module docstring); by default the
    current PassContext's ``tir.add_lower_pass``.
    """
    if not isinstance(func, PrimFunc):
        raise TypeError(f"lower_pipeline expects a tir.PrimFunc, got {type(func).__name__}")
    if func.attrs.get("tir.lowered"):
        return func
    ctx = PassContext.current()
    if custom_passes is None:
        custom_passes = ctx.config.get("tir.add_lower_pass", ())
    if target is not None:
        from ..target import as_target

        target = as_target(target)
    passes = pipeline_passes(list(custom_passes), target)
    name = func.name
    trace = PassTrace(f"tir {name}", check=_check, text=_text)
    mod = run_sequence(passes, IRModule({name: func}), ctx, trace)
    if name not in mod or not isinstance(mod[name], PrimFunc):
        raise ValueError(f"the tir pipeline dropped function {name}")
    func = mod[name]
    verify_lowered(func)
    if getattr(target, "is_gpu", False):
        func = func.with_attr("target", target)
    return func.with_attr("tir.lowered", True)
