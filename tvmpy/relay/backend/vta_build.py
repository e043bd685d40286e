"""``relay.build`` for VTA (``target=env.target``, ``ext_dev -device=vta``): heterogeneous
offload of a ``vta.top.graph_pack``-ed graph.

The graph passes and fusion run for the host CPU (the target's host, llvm by default). Each
fused function holding a packed ``nn.conv2d`` (6-D data) is a VTA function: lowered with the
VTA target's strategies (``relay/op/strategy/vta.py``: ``vta.top.conv2d_packed`` and its
element-wise epilogue, ``clip`` as the two ALU stages min and max), scheduled by
``vta.top.schedule_conv2d_packed`` (an AutoTVM template: tuned configs apply under
``autotvm.apply_history_best``; a result that is not a copy gets one, the DMA store) and built
by ``vta.build`` into a driver of the runtime's command queue. Every other fused function (layout
transforms, the first conv, pooling, the classifier, float requantization) builds for the host
as in a CPU build. A packed function VTA cannot run (a result wider than int8: VTA's
stores narrow to int8; relay.quantize keeps residual branches in int32) builds for the host
from the same packed computes (``lower_cpu_function``). The host library imports a ``VTALibraryModule`` holding the VTA functions,
so the graph executor runs both through the one factory ``relay.build`` returns.
"""

from __future__ import annotations

from typing import Any

from ... import te, tir
from ...autotvm.task.topi_integration import TaskExtractEnv
from ...target import Target, as_target
from ..expr import Call, Function
from ..visitor import post_order_visit
from .te_compiler import LoweringError, _GroupLowering

__all__ = ["is_vta_target", "is_vta_function", "build_vta", "lower_vta_function",
           "lower_cpu_function", "cannot_offload", "lower_vta_computes"]


def is_vta_target(target: Any) -> bool:
    """Whether ``target`` (a Target, a string, or TVM's ``{"ext_dev": ...}``) is VTA's."""
    if isinstance(target, dict) and len(target) == 1:
        target = next(iter(target.values()))
    if isinstance(target, str):
        return target.split()[0] == "ext_dev" if target.strip() else False
    return isinstance(target, Target) and target.kind == "ext_dev"


def is_vta_function(func: Function) -> bool:
    """A fused function VTA runs: it holds a conv2d in the packed (6-D) layout."""
    found: list[bool] = []

    def visit(e: Any) -> None:
        if (isinstance(e, Call) and getattr(e.op, "name", None) == "nn.conv2d"
                and len(e.args[0].checked_type.shape) == 6):
            found.append(True)
    post_order_visit(func.body, visit)
    return bool(found)


def _is_copy(t: te.Tensor) -> bool:
    """``t`` is a cast or a copy of one tensor (what a DMA store does)."""
    body = getattr(t.op, "body", None)
    if not body or len(t.op.input_tensors) != 1:
        return False
    e = body[0]
    while isinstance(e, tir.Cast):
        e = e.value
    return isinstance(e, tir.ProducerLoad)


def lower_vta_function(func: Function, name: str, env: Any = None) -> Any:
    """The :class:`tvmpy.vta.build.VTAModule` of a fused VTA function (symbol ``name``); its
    arguments are the function's inputs then its output, as a host kernel's."""
    from ... import vta

    env = env or vta.get_env()
    # the VTA target current: AutoTVM looks tuned configs up for it (conv2d_packed.vta)
    with env, as_target(env.target):
        # the strategies of the "vta" key (relay/op/strategy/vta.py): the packed conv2d as
        # vta.top.conv2d_packed with its VTA schedule, clip as two ALU stages
        g = _GroupLowering(func, as_target(env.target), name)
        outs = g.outputs(func.body)
        if len(outs) != 1:
            raise LoweringError(f"{name}: a VTA function has one output, got {len(outs)}")
        out = outs[0]
        if not _is_copy(out):  # the result leaves the accumulator by a DMA store of a copy
            outs = [te.compute(out.shape, lambda *i: out(*i), name=f"{out.op.name}_store",
                               tag="elemwise")]
        anchor = [(c, impl) for _, c, impl, _ in g.calls
                  if impl is not None and impl.name == "conv2d_packed.vta"]
        if len(anchor) != 1:
            raise LoweringError(f"{name}: a VTA function has one packed conv2d, found "
                                f"{len(anchor)}")
        call, impl = anchor[0]
        try:
            sched = impl.schedule(call.attrs, outs, as_target(env.target))
        except ValueError as err:
            raise LoweringError(f"{name}: cannot run on VTA: {err}") from err
        return vta.build(sched, [*g.inputs, *outs], "ext_dev", env.target_host, name=name)


def cannot_offload(func: Function, env: Any) -> str | None:
    """Why VTA cannot run the fused VTA function ``func`` (None when it can): VTA stores its
    results narrowed to ``env.out_dtype`` (int8), so a function whose result is wider (an
    int32 residual branch of relay.quantize's graph) runs on the CPU."""
    ret = func.body.checked_type
    dtype = str(getattr(ret, "dtype", ""))
    if dtype != env.out_dtype:
        return f"its result is {dtype or ret}; VTA stores {env.out_dtype} only"
    return None


def lower_cpu_function(func: Function, name: str, host: Any, env: Any = None) -> Any:
    """A host (llvm) Module computing the fused VTA function ``func`` with the same packed
    computes (``vta.top.conv2d_packed`` and the epilogue), for what VTA cannot run: the
    element-wise stages inlined into the output, the convolution parallel over its outer
    axes."""
    from ... import driver, vta

    env = env or vta.get_env()
    with env:
        g = _GroupLowering(func, as_target(env.target), name)
        outs = g.outputs(func.body)
    s = te.create_schedule([o.op for o in outs])
    outputs = {id(o.op) for o in outs}
    seen: set[int] = set()

    def visit(t: te.Tensor) -> None:
        op = t.op
        if id(op) in seen or not isinstance(op, te.ComputeOp):
            return
        seen.add(id(op))
        for x in op.input_tensors:
            visit(x)
        if id(op) in outputs:
            return
        if op.reduce_axis:
            s[op].parallel(op.axis[1])
        else:
            s[op].compute_inline()
    for o in outs:
        visit(o)
        s[o].parallel(o.op.axis[1])
    return driver.build(s, [*g.inputs, *outs], target=host, name=name)


def _host_of(target: Any, target_host: Any = None) -> tuple[Target, Target]:
    """(VTA target, its llvm host) of ``relay.build``'s target arguments."""
    if isinstance(target, dict):
        target = next(iter(target.values()))
    tgt = as_target(target)
    host = as_target(target_host or getattr(tgt, "host", None) or "llvm")
    if host.kind != "llvm":
        raise ValueError(f"relay.build for VTA: the host target must be llvm, got {host}")
    return tgt, host


def lower_vta_computes(mod: Any, target: Any, params: Any = None) -> Any:
    """What ``autotvm.task.extract_from_program`` lowers for the VTA target (TVM's
    tune_relay_vta flow): the graph passes and fusion as :func:`build_vta`, then the computes
    (not the schedules) of each function VTA would run, under the VTA target: the tunable
    ``conv2d_packed.vta`` calls, with the workloads ``relay.build`` later looks up in
    ``autotvm.apply_history_best``. Host functions are not lowered (their tasks would be the
    CPU's; TVM's tutorial filters them out). Returns the primitive functions with ``target``
    set to the VTA target."""
    from ... import vta
    from ..build_module import lower_to_primitives

    tgt, host = _host_of(target)
    env = vta.get_env()
    extract = TaskExtractEnv.current
    TaskExtractEnv.current = None  # the host passes' computes (AlterOpLayout) are no VTA tasks
    try:
        prims = lower_to_primitives(mod, host, params, eager=False)
    finally:
        TaskExtractEnv.current = extract
    for lf in prims.compiler.funcs:
        if is_vta_function(lf.func) and cannot_offload(lf.func, env) is None:
            with env, as_target(env.target):
                _GroupLowering(lf.func, as_target(env.target), lf.name).outputs(lf.func.body)
    prims.target = tgt
    return prims


def build_vta(mod: Any, target: Any, params: Any = None, mod_name: str = "default",
              target_host: Any = None, progress: Any = None) -> Any:
    """``relay.build`` for the VTA target (see the module docstring)."""
    from ... import vta
    from ...vta.graph_module import VTALibraryModule
    from ..build_module import BuildResult, _generate, lower_to_primitives
    from .executor_factory import GraphExecutorFactoryModule

    _, host = _host_of(target, target_host)
    env = vta.get_env()
    prims = lower_to_primitives(mod, host, params, progress=progress, eager=False)
    compiler = prims.compiler
    every = list(compiler.funcs)
    packed = [lf for lf in every if is_vta_function(lf.func)]
    offload = [lf for lf in packed if cannot_offload(lf.func, env) is None]
    on_cpu = [lf for lf in packed if cannot_offload(lf.func, env) is not None]
    vta_mods = [lower_vta_function(lf.func, lf.name, env) for lf in offload]
    cpu_mods = [lower_cpu_function(lf.func, lf.name, host, env) for lf in on_cpu]
    compiler.funcs[:] = [lf for lf in every if not any(lf is o for o in packed)]
    try:
        if compiler.funcs:
            res: BuildResult = _generate(prims, progress)
            graph_json, lib, gparams, times = res.graph_json, res.lib, res.params, res.times
        else:  # everything offloaded: no host kernels, an empty host library
            from ...runtime.module import Module
            from .graph_codegen import codegen_graph

            graph_json, gparams, _ = codegen_graph(
                prims.main, lambda f: compiler.lookup(f).name)  # type: ignore[union-attr]
            lib = Module(None, {"version": 1, "entry": "", "functions": []}, "llvm")
            times = dict(prims.times)
    finally:
        compiler.funcs[:] = every
    for m in cpu_mods:
        lib.import_module(m)
    lib.import_module(VTALibraryModule(vta_mods))
    factory = GraphExecutorFactoryModule(graph_json, lib, gparams, mod_name)
    factory.build_times = times
    factory.vta_functions = [m.name for m in vta_mods]  # what runs on VTA
    factory.vta_cpu_functions = [lf.name for lf in on_cpu]  # packed, but VTA cannot store them
    return factory
