"""``relay.build``: a relay module -> one deployable factory module (contract C6).

The stages, each a named function so its output can be inspected:

1. ``check_graph``: the graph is something the graph executor can run (no If/closures,
   every operator has a compute), with ONE error listing every problem;
2. ``optimize``: bind ``params`` as constants; when the module calls ``qnn.*`` operators,
   ``FakeQuantizationToInteger`` and ``CanonicalizeOps`` (``qnn_passes``, any opt_level); then
   the graph passes TVM runs at the PassContext's opt_level (SimplifyInference, EliminateCommonSubexpr, FoldConstant,
   FoldScaleAxis, AlterOpLayout, FuseOps, ...; each pass runs when its own opt_level is at most
   the context's, see ``build_passes``);
3. ``lower_primitives``: each distinct primitive function to loop IR with the implementation
   its operators' strategies chose for the target (``te_compiler``, cached by structure);
4. ``graph_codegen``: the graph JSON, its parameters and the memory plan;
5. codegen: ALL functions compiled into ONE runtime Module (``tvm.build`` of the list); for
   CPU (llvm) targets one object file per distinct function, each from the persistent kernel
   cache or compiled (in worker processes when that pays), linked into one library
   (``backend/kernel_build.py``; a rebuild of a model built before skips lowering and LLVM);
6. ``GraphExecutorFactoryModule(graph_json, lib, params)``.

``lower_to_primitives(mod, target, params)`` runs stages 1-3 (the public lowering entry point:
relay.build continues from it, ``autotvm.task.extract_from_program`` reads the tasks it met);
``lower_module`` runs stages 3-5 on an optimized module.

Inspecting a build: ``DUMP_IR=<dir>`` writes ``relay/<k>_<pass>.txt`` (the module after each
graph pass that ran), ``graph/00_graph.json`` and the memory plan, and ``tir/<symbol>/`` (each
function's loop IR after each tir pass); ``DEBUG=1`` prints each pass's and stage's time.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from .. import config
from ..arith.sum_form import cache_scope
from ..autotvm.task.dispatcher import FALLBACK
from ..autotvm.task.relay_integration import register_program_lowering
from ..target import Target, as_target
from ..transform import PassContext, PassTrace
from ..transform.instrument import check_budget, dump_text
from ..transform.passes import run_sequence
from .expr import Call, Constant, Function, GlobalVar, If, Let, Tuple, TupleGetItem, Var
from .module import IRModule
from .op.registry import list_op_names
from .visitor import dataflow_post_order

__all__ = ["build", "optimize", "build_passes", "qnn_passes", "check_graph", "lower_to_primitives",
           "lower_primitives", "PrimitiveFunctions", "lower_module", "BuildResult",
           "RelayBuildError", "vm_reason", "needs_vm", "data_dependent_ops", "build_config",
           "create_executor", "bind_params_by_name", "GraphExecutor"]

Progress = Callable[[str, int, int], None]


class RelayBuildError(ValueError):
    """The module cannot be built (the message lists every problem found)."""


# ---- argument checks ------------------------------------------------------------------------
def _as_module(mod: Any) -> IRModule:
    if isinstance(mod, Function):
        return IRModule.from_expr(mod)
    if not isinstance(mod, IRModule):
        raise TypeError(f"relay.build takes an IRModule (or a relay Function), got "
                        f"{type(mod).__name__}")
    if "main" not in [gv.name_hint for gv in mod.functions]:
        raise RelayBuildError("relay.build: the module has no 'main' function (have "
                              f"{sorted(gv.name_hint for gv in mod.functions)})")
    return mod


def _build_target(target: Any) -> Target:
    """relay.build's target: as ``as_target`` (None: "llvm"), also TVM's ``{"cpu": target}``; a CPU
    kind, or a GPU kind (its host code runs on the CPU)."""
    if isinstance(target, Mapping) and len(target) == 1:  # {"cpu": "llvm"} (TVM's form)
        target = next(iter(target.values()))
    try:
        target = as_target(target, default="llvm")
    except TypeError as e:
        raise TypeError(f"relay.build: {e}") from None
    if target.kind not in ("llvm", "c") and not getattr(target, "is_gpu", False):
        raise RelayBuildError(f"relay.build: target {target} cannot run a graph here; use an "
                              "'llvm ...' or 'c' CPU target, or a GPU target (opencl, cuda)")
    return target


def _check_params(main: Function, params: Any) -> dict[str, np.ndarray]:
    if params is None:
        return {}
    if not isinstance(params, Mapping):
        raise TypeError(f"relay.build: params must be a dict name -> array, got "
                        f"{type(params).__name__}")
    names = [p.name_hint for p in main.params]
    unknown = sorted(str(k) for k in params if k not in names)
    if unknown:
        raise RelayBuildError(f"relay.build: params {unknown} are not parameters of main "
                              f"(main's parameters: {names})")
    out = {}
    for k, v in params.items():
        out[k] = v.numpy() if hasattr(v, "numpy") else np.asarray(v)
    return out


def check_graph(main: Function) -> None:
    """Raise ONE RelayBuildError listing what the graph executor cannot run in ``main``:
    If, nested (non-primitive) functions, calls of global functions, and operators without a
    compute (grouped by operator). ``Let`` is accepted: operators are pure, so FuseOps inlines
    it."""
    from .backend.te_compiler import has_compute

    problems: dict[str, int] = {}
    no_compute: dict[str, int] = {}
    seen: set[int] = set()
    stack: list[Any] = [main.body]
    while stack:
        e = stack.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, Call):
            op = e.op
            if isinstance(op, Function):
                if not op.attrs.get("Primitive"):
                    problems["call of a local function"] = problems.get(
                        "call of a local function", 0) + 1
                else:
                    stack.append(op.body)
            elif isinstance(op, GlobalVar):
                key = f"call of global function @{op.name_hint}"
                problems[key] = problems.get(key, 0) + 1
            elif hasattr(op, "get_attr"):
                if not has_compute(op) and op.get_attr("FTVMQnnCanonicalize") is None:
                    no_compute[op.name] = no_compute.get(op.name, 0) + 1
            else:
                problems[f"call of {type(op).__name__}"] = 1
            stack.extend(e.args)
        elif isinstance(e, Tuple):
            stack.extend(e.fields)
        elif isinstance(e, TupleGetItem):
            stack.append(e.tuple_value)
        elif isinstance(e, Let):  # a naming device in this pure IR: FuseOps inlines it
            stack.extend([e.value, e.body])
        elif isinstance(e, If):
            problems["If (control flow)"] = problems.get("If (control flow)", 0) + 1
        elif isinstance(e, Function):
            problems["nested function"] = problems.get("nested function", 0) + 1
        elif not isinstance(e, (Var, Constant)):
            problems[type(e).__name__] = problems.get(type(e).__name__, 0) + 1
    msgs = [f"{k} (x{n})" for k, n in sorted(problems.items())]
    if no_compute:
        msgs.append("operators without a compute/strategy for code generation: "
                    + ", ".join(f"{k} (x{n})" for k, n in sorted(no_compute.items())))
    if msgs:
        hint = ("; relay.vm.compile (the virtual machine) runs control flow and calls of "
                "functions" if problems else "")
        raise RelayBuildError("relay.build: the graph executor cannot run this main: "
                              + "; ".join(msgs) + hint)


def data_dependent_ops(mod: Any) -> dict[str, int]:
    """The operators of ``mod``'s main (If branches and Let values included) whose output
    shapes depend on input values (``register_shape_func(..., data_dependent=True)``), with
    their call counts."""
    from .op import Op
    from .op.shape_func import is_data_dependent
    from .visitor import post_order_visit

    found: dict[str, int] = {}

    def count(e: Any) -> None:
        if isinstance(e, Call) and isinstance(e.op, Op) and is_data_dependent(e.op):
            found[e.op.name] = found.get(e.op.name, 0) + 1

    post_order_visit(_as_module(mod)["main"].body, count)
    return found


def vm_reason(mod: Any) -> str:
    """Why the graph executor cannot run ``mod`` (so ``relay.vm.compile`` must), or ``""`` when
    ``relay.build`` can: a main input that is not a tensor (a tuple or list), an operator whose
    output shape depends on input values, or what ``check_graph`` refuses (If, calls of global
    functions such as an imported Loop, operators without a compute). The one rule the ONNX
    backend and ``tvmpy compile`` use to choose an executor."""
    from .ty import TensorType

    mod = _as_module(mod)
    main = mod["main"]
    if any(getattr(p, "_checked_type", None) is None for p in main.params):
        from .transform import InferType

        mod = InferType()(mod)
        main = mod["main"]
    reasons = [f"input {p.name_hint!r} is not a tensor" for p in main.params
               if not isinstance(p.checked_type, TensorType)]
    dd = data_dependent_ops(mod)
    if dd:
        reasons.append("output shapes that depend on input values: "
                       + ", ".join(f"{k} (x{n})" for k, n in sorted(dd.items())))
    try:
        check_graph(main)
    except RelayBuildError as e:
        msg = str(e).split("cannot run this main: ", 1)[-1].split("; relay.vm.compile", 1)[0]
        reasons.append(msg)
    return "; ".join(reasons)


def needs_vm(mod: Any) -> bool:
    """Whether the graph executor cannot run ``mod`` (see :func:`vm_reason`)."""
    return bool(vm_reason(mod))


# ---- optimization ---------------------------------------------------------------------------
def build_passes() -> list[Any]:
    """The graph passes of relay.build in TVM's order; each runs when the PassContext's
    opt_level is at least the pass's own (Legalize 0 (``FTVMLegalize``: e.g. nn.rnn_scan on
    GPU targets), SimplifyInference 0, LegalizeLayouts 0 (NHWC convolutions
    and pools as NCHW ones, ``transform/convert_layout.py``), ConvTransposeToConv 0, FuseOps 0,
    DeadCodeElimination 1, FoldConstant 2, DropPaddingTaps 2 (tvmpy's own: conv2d taps that read
    only padding), SplitConcatConv 2 (tvmpy's own: a conv2d over a channel concatenation as
    the sum over its parts), EliminateCommonSubexpr / FoldScaleAxis / PadChannels (tvmpy's own:
    half-vector channel counts of conv chains padded to whole vectors) / AlterOpLayout / SinkReshape /
    FuseAttention / CopyViewsIntoTakes 3)."""
    from . import transform as T

    # DropPaddingTaps after FoldScaleAxis: a batch norm folds into the whole convolution's
    # weights before it is split into bands (FoldConstant then folds the weight slices)
    # LegalizeLayouts: NHWC convolutions and pools (no compute of their own) as NCHW ones
    # Legalize: calls without an implementation on the target as ops that have one
    passes: list[Any] = [T.InferType(), T.Legalize(), T.SimplifyInference(), T.LegalizeLayouts(),
                         T.ConvTransposeToConv(),
                         T.EliminateCommonSubexpr(), T.FoldConstant(), T.FoldScaleAxis(),
                         T.DropPaddingTaps(), T.SplitConcatConv(), T.FoldConstant()]
    alter = getattr(T, "AlterOpLayout", None)  # the x86 NCHWc layout pass (opt_level 3)
    if alter is not None:
        # CSE again: the weight packing each altered call adds (x86 dense_pack, NCHWc) is one
        # shared copy for the calls that share a weight (an RNN's recurrent dense per time
        # step), not one folded constant per call (64 MB for a 32-step 2-layer LSTM)
        # PadChannels: half-vector channel counts of conv chains as whole vectors (the layout
        # pass then blocks them by whole vectors); nothing on targets other than CPUs
        passes += [T.PadChannels(), alter(), T.EliminateCommonSubexpr(), T.FoldConstant()]
    # FuseAttention after SinkReshape: the attention scale moved onto the Q K^T product
    # CopyViewsIntoTakes: a transposed view read only by takes (MultiheadAttention's Q/K/V)
    # becomes one copy per take, fused with it, instead of a kernel copying the whole view
    passes += [T.SinkReshape(), T.FuseAttention(), T.CopyViewsIntoTakes(),
               T.DeadCodeElimination()]
    fuse = getattr(T, "FuseOps", None)
    if fuse is None:
        raise RelayBuildError("relay.build needs relay.transform.FuseOps, which is not available")
    passes += [fuse(), T.InferType()]
    return passes


def optimize(mod: Any, params: Mapping[str, Any] | None = None,
             target: Any = None) -> IRModule:
    """Bind ``params`` into main and run ``build_passes`` under the current PassContext (with
    ``target`` as the current target when given: the target-dependent passes, AlterOpLayout,
    see it); returns the fused, typed module (contract C1)."""
    if target is not None:
        with _build_target(target):
            return optimize(mod, params)
    from . import transform as T

    mod = _as_module(mod)
    bound = _check_params(mod["main"], params)
    mod = T.InferType()(mod)
    if bound:
        mod = T.BindParams(bound)(mod)
    trace = PassTrace("relay.build", folder="relay")  # DUMP_IR: relay/NN_<pass>.txt
    return run_sequence(qnn_passes(mod) + build_passes(), mod, PassContext.current(), trace)


def qnn_passes(mod: IRModule) -> list[Any]:
    """When ``mod`` calls ``qnn.*`` operators: FakeQuantizationToInteger (QDQ regions -> QNN
    ops; its optional rewrites from the PassContext config
    ``relay.FakeQuantizationToInteger.optional_qnn_ops``, default ``["nn.softmax"]``), then the
    QNN canonicalization to standard integer ops, before every other pass (before FoldConstant,
    which would fold a dequantized constant weight back to float)."""
    from .qnn import transform as QT

    if not QT.has_qnn_ops(mod):
        return []
    optional = PassContext.current().config.get(
        "relay.FakeQuantizationToInteger.optional_qnn_ops", ["nn.softmax"])
    return [QT.FakeQuantizationToInteger(tuple(optional)), QT.CanonicalizeOps()]


def _dump(folder: str, index: int, name: str, text: str) -> None:
    """With ``DUMP_IR=<dir>``: write a stage's output to ``<dir>/<folder>/<index>_<name>``."""
    root = config.get("DUMP_IR")
    if root:
        dump_text(os.path.join(root, folder), f"{index:02d}_{name}", text)


def _debug(line: str) -> None:
    if config.get("DEBUG") >= 1:
        print(f"[relay.build] {line}")


# ---- lowering and code generation ------------------------------------------------------------
class BuildResult:
    """What ``lower_module`` produced: the graph JSON, the ONE runtime library, the params,
    the memory plan, the distinct lowered functions, the loop-IR PrimFuncs the library was
    compiled from, and the seconds spent per stage."""

    def __init__(self, graph_json: str, lib: Any, params: dict[str, np.ndarray],
                 memory_plan: Any, funcs: list[Any], times: dict[str, float],
                 lowered: list[Any] | None = None):
        self.graph_json = graph_json
        self.lib = lib
        self.params = params
        self.memory_plan = memory_plan
        self.funcs = funcs
        self.times = times
        self.lowered = lowered or []


def _primitive_calls(main: Function) -> list[Function]:
    """The primitive functions called by ``main``, callees before callers."""
    return [e.op for e in dataflow_post_order(main.body)
            if isinstance(e, Call) and isinstance(e.op, Function)]


def _copy_outputs(main: Function) -> Function:
    """``main`` with each tensor of its result passed through a primitive ``copy``, so that
    a graph whose outputs are inputs or constants still has a kernel (and one library)."""
    from .op.registry import get
    from .transform import infer_type
    from .ty import TupleType

    def copy(e: Any, t: Any) -> Any:
        if isinstance(t, TupleType):
            fields = e.fields if isinstance(e, Tuple) else [TupleGetItem(e, i)
                                                             for i in range(len(t.fields))]
            return Tuple([copy(f, ft) for f, ft in zip(fields, t.fields)])
        p = Var("p0", t)
        return Call(Function([p], Call(get("copy"), [p]), attrs={"Primitive": 1}), [e])

    return infer_type(Function(main.params, copy(main.body, main.body.checked_type),
                               attrs=main.attrs))


class PrimitiveFunctions:
    """What ``lower_to_primitives`` / ``lower_primitives`` produced: ``main`` (the fused main,
    calling one primitive function per kernel), ``compiler`` (the TECompiler holding each
    distinct primitive function lowered with the implementation its operators' strategies chose
    for ``target``; ``funcs``, in first-call order) and the seconds per stage (``times``)."""

    def __init__(self, target: Target, main: Function, compiler: Any, times: dict[str, float]):
        self.target = target
        self.main = main
        self.compiler = compiler
        self.times = times

    @property
    def funcs(self) -> list[Any]:
        return self.compiler.funcs


def lower_primitives(mod: IRModule, target: Any = "llvm",
                     progress: Progress | None = None, *, eager: bool = True
                     ) -> PrimitiveFunctions:
    """Stage 3 on a fused module (``optimize``'s result): lower every distinct primitive
    function called by main to loop IR with its chosen implementation (``te_compiler``).
    ``eager=False``: only find and name the distinct functions (``relay.build`` for CPU
    targets compiles them per kernel, from the kernel cache when it can:
    ``backend/kernel_build.py``)."""
    from .backend.te_compiler import TECompiler, primitive_name

    tgt = _build_target(target)
    main = mod["main"]
    report = progress or (lambda stage, done, total: None)
    t0 = time.perf_counter()
    compiler = TECompiler(tgt)
    calls = _primitive_calls(main)
    if not calls:  # main only routes inputs/constants (e.g. all folded): copy them out
        main = _copy_outputs(main)
        calls = _primitive_calls(main)
    for i, func in enumerate(calls):
        t1 = time.perf_counter()
        compiler.lower(func, eager)
        if eager and config.get("DEBUG"):
            check_budget(f"lowering {primitive_name(func)} (fused call {i})",
                         time.perf_counter() - t1)
        report("lower", i + 1, len(calls))
    return PrimitiveFunctions(tgt, main, compiler, {"lower": time.perf_counter() - t0})


def lower_to_primitives(mod: Any, target: Any = "llvm", params: Mapping[str, Any] | None = None,
                        *, progress: Progress | None = None, eager: bool = True
                        ) -> PrimitiveFunctions:
    """Stages 1-3 of ``relay.build`` (the graph check, ``optimize`` under ``target``,
    ``lower_primitives``): a relay module (or Function) to its fused primitive functions, each
    lowered with its chosen implementation. ``relay.build`` continues from here to code;
    ``autotvm.task.extract_from_program`` reads the tunable tasks the lowering met."""
    mod = _as_module(mod)
    tgt = _build_target(target)
    bound = _check_params(mod["main"], params)
    check_graph(mod["main"])
    t0 = time.perf_counter()
    if progress is not None:
        progress("optimize", 0, 1)
    fused = optimize(mod, bound, tgt)
    if progress is not None:
        progress("optimize", 1, 1)
    t_opt = time.perf_counter() - t0
    prims = lower_primitives(fused, tgt, progress, eager=eager)
    prims.times = {"optimize": t_opt, **prims.times}
    return prims


def lower_for_tasks(mod: Any, target: Any = "llvm", params: Mapping[str, Any] | None = None
                    ) -> PrimitiveFunctions:
    """The lowering ``autotvm.task.extract_from_program`` runs: :func:`lower_to_primitives`,
    or for VTA's target (``ext_dev``) the computes of the functions VTA would run
    (``relay/backend/vta_build.py``)."""
    from .backend.vta_build import is_vta_target, lower_vta_computes

    if is_vta_target(target):
        return lower_vta_computes(mod, target, params)  # type: ignore[no-any-return]
    return lower_to_primitives(mod, target, params)


# autotvm's task extraction lowers with it (and checks the relay operators named in its ops=)
register_program_lowering(lower_for_tasks, lambda name: name in list_op_names())


def lower_module(mod: IRModule, target: Any = "llvm", progress: Progress | None = None,
                 plan_memory: bool = True) -> BuildResult:
    """Stages 3-5 on a fused module: lower every distinct primitive function, generate the
    graph, compile all functions into one library."""
    return _generate(lower_primitives(mod, target, progress), progress, plan_memory)


def _generate(prims: PrimitiveFunctions, progress: Progress | None = None,
              plan_memory: bool = True) -> BuildResult:
    """Stages 4-5: the graph, its memory plan, and all functions compiled into one library."""
    from .. import driver
    from .backend.graph_codegen import codegen_graph

    tgt, main, compiler = prims.target, prims.main, prims.compiler
    times = dict(prims.times)
    report = progress or (lambda stage, done, total: None)
    t0 = time.perf_counter()

    lazy = any(lf.prim_func is None for lf in compiler.funcs)

    def symbol(func: Function) -> str:
        hit = compiler.lookup(func)
        return (hit or compiler.lower(func, not lazy)).name

    graph_json, params, memory_plan = codegen_graph(main, symbol, plan=plan_memory)
    times["graph_codegen"] = time.perf_counter() - t0
    _dump("graph", 0, "graph.json", graph_json)
    if memory_plan is not None:
        _dump("graph", 1, "memory_plan.txt", str(memory_plan))

    if lazy:
        return _generate_kernels(prims, graph_json, params, memory_plan, times, report)
    t0 = time.perf_counter()
    lowered = []
    root = config.get("DUMP_IR")
    for i, lf in enumerate(compiler.funcs):
        if root:  # each function's tir passes in a folder of its own
            with config.config(DUMP_IR=os.path.join(root, "tir", lf.name)):
                lowered.append(driver.lower_primfunc(lf.prim_func, target=tgt))
        else:
            lowered.append(driver.lower_primfunc(lf.prim_func, target=tgt))
        report("tir", i + 1, len(compiler.funcs))
    times["tir"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    report("codegen", 0, 1)
    lib = driver.build(lowered, target=tgt)
    report("codegen", 1, 1)
    times["codegen"] = time.perf_counter() - t0
    for stage, sec in times.items():
        if stage != "optimize":
            _debug(f"{stage:<27s} {1e3 * sec:8.1f} ms")
    return BuildResult(graph_json, lib, params, memory_plan, compiler.funcs, times, lowered)


def _per_kernel(target: Target) -> bool:
    """Whether relay.build compiles ``target``'s kernels one by one (``kernel_build``: the
    kernel cache, worker processes): LLVM CPU targets but WebAssembly (one linked .wasm)."""
    return (target.kind == "llvm" and not getattr(target, "is_gpu", False)
            and not (target.mtriple or "").startswith("wasm"))


def _generate_kernels(prims: PrimitiveFunctions, graph_json: str, params: dict[str, np.ndarray],
                      memory_plan: Any, times: dict[str, float], report: Progress
                      ) -> BuildResult:
    """Stage 5 per kernel: each distinct function's object file from the kernel cache or
    compiled (here or in worker processes), then one library links them all."""
    from ..codegen.extern_link import extern_modules_for
    from ..runtime.module import Module
    from ..target.cpu_features import requirement
    from .backend.kernel_build import LazyLowered, compile_kernels

    tgt, compiler = prims.target, prims.compiler
    t0 = time.perf_counter()
    items = [(lf.func, lf.name) for lf in compiler.funcs]
    arts = compile_kernels(items, tgt, lambda done, total: report("tir", done, total))
    times["kernels"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    report("codegen", 0, 1)
    from ..codegen.llvm_parallel import install_fork_guard

    install_fork_guard()
    objects = [o for a in arts for o in (a.object, *a.extra_objects)]
    libs = list(dict.fromkeys(lib for a in arts for lib in a.link_libs))
    externs = [s for a in arts for s in a.externs]
    lib = Module.from_objects(objects, [a.signature for a in arts], link_libs=libs,
                              type_key="llvm", sources={"ll": "\n".join(a.ir for a in arts)},
                              imports=extern_modules_for(externs, tgt),
                              load=not tgt.is_foreign, cpu=requirement(*arts[0].machine))
    times["link"] = time.perf_counter() - t0
    report("codegen", 1, 1)
    for stage, sec in times.items():
        if stage != "optimize":
            _debug(f"{stage:<27s} {1e3 * sec:8.1f} ms")
    lowered = LazyLowered(arts, [f for f, _ in items], tgt)
    return BuildResult(graph_json, lib, params, memory_plan, compiler.funcs, times, lowered)


def build(mod: Any, target: Any = "llvm", params: Mapping[str, Any] | None = None,
          mod_name: str = "default", *, progress: Progress | None = None,
          target_host: Any = None) -> Any:
    """``relay.build(mod, target="llvm", params=None)`` -> GraphExecutorFactoryModule.

    ``params``: values of main's parameters to bind as constants (weights). The opt_level
    comes from ``tvm.transform.PassContext`` (2 by default, as in TVM). ``progress(stage,
    done, total)`` is called for the graph passes ("optimize"), while lowering ("lower": per
    primitive call, "tir": per distinct function) and compiling ("codegen"). For CPU (llvm)
    targets "tir" counts the kernels compiled (lowered, through tir and LLVM, in worker
    processes when config ``BUILD_WORKERS`` allows) or found in the persistent kernel cache
    (``backend/kernel_build.py``), and "codegen" is the link of the library.

    A GPU ``target`` ("opencl", "cuda", "nvptx") compiles every fused function to device kernels
    plus a launch plan (host side: ``target_host``, llvm by default; CPU targets ignore it); the
    factory's executor then keeps its tensors on the device it is created for
    (``lib["default"](tvm.opencl(0))``).

    VTA's target (``env.target``, ``ext_dev -device=vta``; host ``target_host``, llvm) builds a
    ``vta.top.graph_pack``-ed graph heterogeneously: the fused functions holding a packed conv2d
    run on VTA, the rest on the host (``relay/backend/vta_build.py``)."""
    from .backend.vta_build import is_vta_target

    if is_vta_target(target):  # VTA: offloaded packed convolutions + the rest on the host
        from .backend.vta_build import build_vta

        return build_vta(mod, target, params, mod_name, target_host, progress)
    if target_host is not None:  # GPU targets: where the launch code runs (default llvm)
        tgt = _build_target(target)
        if tgt.is_gpu:
            host = as_target(target_host)
            if host.kind not in ("llvm", "c"):
                raise RelayBuildError(f"relay.build: target_host {host} is not a CPU target "
                                      "(the host side of a GPU build runs on the CPU: 'llvm')")
            target = Target(str(tgt), host=host)
    if not isinstance(mod_name, str) or not mod_name.isidentifier():
        raise ValueError(f"relay.build: mod_name must be an identifier, got {mod_name!r}")
    # the arithmetic simplifier's memo tables hold the IR they describe alive: scoped to this
    # build, so that building many models in one process does not keep the finished ones
    eager = not _per_kernel(_build_target(target))
    with cache_scope(), FALLBACK.build_scope():  # one untuned-workloads line per build
        res = _generate(lower_to_primitives(mod, target, params, progress=progress,
                                            eager=eager), progress)
    from .backend.executor_factory import GraphExecutorFactoryModule

    factory = GraphExecutorFactoryModule(res.graph_json, res.lib, res.params, mod_name)
    try:
        factory.build_times = res.times  # per-stage seconds, for reports and the CLI
        factory.lowered_funcs = res.lowered  # the loop IR compiled (tir.interpreter can run it)
    except AttributeError:
        pass
    return factory


# ---- TVM's executors and legacy names (relay.build_module.*) ------------------------------------
from .transform.bind_params import bind_params_by_name  # noqa: E402  (TVM's build_module name)


def build_config(opt_level: int = 2, fallback_device: Any = None,
                 required_pass: Any = None, disabled_pass: Any = None,
                 trace: Any = None) -> PassContext:
    """TVM 0.6/0.7's ``relay.build_config(opt_level=...)``: a ``tvm.transform.PassContext``
    (what to write instead, as TVM's deprecation says). ``fallback_device`` (heterogeneous
    execution) has nothing to choose between here and is accepted; ``trace`` is refused."""
    import warnings

    warnings.warn("relay.build_config is TVM's legacy name: use tvm.transform.PassContext",
                  DeprecationWarning, stacklevel=2)
    if trace is not None:
        raise NotImplementedError("relay.build_config(trace=...): pass a pass instrument "
                                  "instead: tvm.transform.PassContext(instruments=[...])")
    return PassContext(opt_level=opt_level, required_pass=required_pass,
                       disabled_pass=disabled_pass)


class GraphExecutor:
    """``relay.create_executor("graph", mod, device, target)``: each ``evaluate()`` builds main
    (or the Function given) with ``relay.build`` and returns a callable of main's inputs (by position
    or name) whose result is an NDArray, or a tuple of them for a tuple output, as TVM's."""

    def __init__(self, mod: IRModule, device: Any = None, target: Any = "llvm",
                 params: Mapping[str, Any] | None = None):
        if not isinstance(mod, IRModule):
            raise TypeError("create_executor('graph', mod=...): mod must be an IRModule, got "
                            f"{type(mod).__name__}")
        from ..runtime.device import cpu

        self.mod = mod
        self.device = device if device is not None else cpu(0)
        self.target = target
        self.params = dict(params or {})

    def _make_executor(self, expr: Any = None) -> Callable[..., Any]:
        from ..contrib.graph_executor import GraphModule
        from ..runtime.ndarray import NDArray
        from .transform import InferType
        from .ty import TupleType

        mod = self.mod
        if expr is not None and expr is not mod["main"]:
            if not isinstance(expr, Function):
                raise TypeError("GraphExecutor.evaluate(expr): expr must be a relay Function, "
                                f"got {type(expr).__name__}")
            mod = mod.copy()
            mod["main"] = expr
        main = InferType()(mod)["main"]
        if needs_vm(mod):
            raise RelayBuildError("create_executor('graph'): the graph executor needs static "
                                  f"shapes and no control flow ({vm_reason(mod)}); use "
                                  "create_executor('vm', ...)")
        factory = build(mod, target=self.target, params=self.params)
        gmod = GraphModule(factory["default"](self.device))
        names = [p.name_hint for p in main.params if p.name_hint not in self.params]
        tuple_out = isinstance(getattr(main.checked_type, "ret_type", None), TupleType)

        def run(*args: Any, **kwargs: Any) -> Any:
            if len(args) > len(names):
                raise TypeError(f"{len(args)} positional inputs for the {len(names)} inputs "
                                f"{names}")
            feeds = dict(zip(names, args))
            twice = sorted(set(feeds) & set(kwargs))
            if twice:
                raise TypeError(f"inputs {twice} given by position and by name")
            feeds.update(kwargs)
            missing = [n for n in names if n not in feeds]
            if missing:
                raise TypeError(f"missing inputs {missing} (inputs: {names})")
            outs = [NDArray(o) for o in gmod.infer(**feeds)]
            return tuple(outs) if tuple_out or len(outs) > 1 else outs[0]

        return run

    def evaluate(self, expr: Any = None) -> Callable[..., Any]:
        return self._make_executor(expr)


def create_executor(kind: str = "debug", mod: IRModule | None = None, device: Any = None,
                    target: Any = "llvm", params: Mapping[str, Any] | None = None) -> Any:
    """TVM's ``relay.create_executor``: ``"debug"`` (the numpy reference interpreter), ``"graph"``
    (``relay.build`` + the graph executor) or ``"vm"`` (the virtual machine); ``params`` are
    bound to main's parameters of those names."""
    from .interpreter import Executor

    if kind not in ("debug", "graph", "vm"):
        raise ValueError(f"create_executor: unknown executor kind {kind!r}; kinds: 'debug', "
                         "'graph', 'vm'")
    if mod is None:
        if kind != "debug":
            raise ValueError(f"create_executor({kind!r}) needs mod=")
        return Executor(None)
    if not isinstance(mod, IRModule):
        raise TypeError(f"create_executor: mod must be an IRModule, got {type(mod).__name__}")
    if params:  # TVM binds them into main first
        mod = mod.copy()
        mod["main"] = bind_params_by_name(mod["main"], params)
    if kind == "graph":
        return GraphExecutor(mod, device, target)
    if kind == "vm":
        from .backend.vm import VMExecutor

        return VMExecutor(mod, device, target)
    return Executor(mod)
