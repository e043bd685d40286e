"""``relay.build`` for VTA (``target=env.target``, ``ext_dev -device=vta``): heterogeneous
offload of a ``vta.top.graph_pack``-ed graph.

The graph passes and fusion run for the host CPU (the target's host, llvm by default). Each
fused function holding a packed ``nn.conv2d`` (6-D data) is a VTA function: lowered with
``vta.top.conv2d_packed`` and its element-wise epilogue (``clip`` as the two ALU stages min
and max, as TVM's VTA ``clip`` compute), scheduled by ``vta.top.schedule_conv2d_packed`` (an
AutoTVM template: tuned configs apply under ``autotvm.apply_history_best``) and built by
``vta.build`` into a driver of the runtime's command queue. Every other fused function (layout
transforms, the first conv, pooling, the classifier, float requantization) builds for the host
as in a CPU build. The host library imports a ``VTALibraryModule`` holding the VTA functions,
so the graph executor runs both through the one factory ``relay.build`` returns.
"""

from __future__ import annotations

from typing import Any

from ... import te, tir
from ...target import Target, as_target
from ..expr import Call, Function
from ..visitor import post_order_visit
from .te_compiler import LoweringError, _GroupLowering

__all__ = ["is_vta_target", "is_vta_function", "build_vta", "lower_vta_function"]


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


class _VTALowering(_GroupLowering):
    """A fused VTA function's calls to tensor expressions: the packed conv2d by
    ``vta.top.conv2d_packed``, ``clip`` as two ALU stages, the rest by their computes."""

    def _lower(self, e: Any) -> list[te.Tensor]:
        name = getattr(getattr(e, "op", None), "name", None) if isinstance(e, Call) else None
        if name == "nn.conv2d":
            from ...vta import top as vta_top
            from ..op.registry import OpPattern

            data, kernel = (self.memo[id(a)][0] for a in e.args)
            a = e.attrs
            out = vta_top.conv2d_packed(data, kernel, tuple(a.strides), tuple(a.padding),
                                        tuple(a.dilation), a.data_layout,
                                        a.out_dtype or "int32")
            self.calls.append((int(OpPattern.OUT_ELEMWISE_FUSABLE), e, None, [out]))
            return [out]
        if name == "clip":
            from ..op.registry import OpPattern

            x = self.memo[id(e.args[0])][0]
            lo = tir.const(int(float(e.attrs.a_min)), x.dtype)
            hi = tir.const(int(float(e.attrs.a_max)), x.dtype)
            a = te.compute(x.shape, lambda *i: tir.min(x(*i), hi), name="clip_a_max",
                           tag="elemwise")
            b = te.compute(x.shape, lambda *i: tir.max(a(*i), lo), name="clip_a_min",
                           tag="elemwise")
            self.calls.append((int(OpPattern.ELEMWISE), e, None, [b]))
            return [b]
        return super()._lower(e)


def lower_vta_function(func: Function, name: str, env: Any = None) -> Any:
    """The :class:`tvmpy.vta.build.VTAModule` of a fused VTA function (symbol ``name``); its
    arguments are the function's inputs then its output, as a host kernel's."""
    from ... import vta
    from ...vta import top as vta_top

    env = env or vta.get_env()
    with env:
        g = _VTALowering(func, as_target("llvm"), name)
        outs = g.outputs(func.body)
        if len(outs) != 1:
            raise LoweringError(f"{name}: a VTA function has one output, got {len(outs)}")
        try:
            sched = vta_top.schedule_conv2d_packed(outs)
        except ValueError as err:
            raise LoweringError(f"{name}: cannot run on VTA: {err}") from err
        return vta.build(sched, [*g.inputs, *outs], "ext_dev", env.target_host, name=name)


def build_vta(mod: Any, target: Any, params: Any = None, mod_name: str = "default",
              target_host: Any = None, progress: Any = None) -> Any:
    """``relay.build`` for the VTA target (see the module docstring)."""
    from ... import vta
    from ...vta.graph_module import VTALibraryModule
    from ..build_module import BuildResult, _generate, lower_to_primitives
    from .executor_factory import GraphExecutorFactoryModule

    if isinstance(target, dict):
        target = next(iter(target.values()))
    tgt = as_target(target)
    host = as_target(target_host or getattr(tgt, "host", None) or "llvm")
    if host.kind != "llvm":
        raise ValueError(f"relay.build for VTA: the host target must be llvm, got {host}")
    env = vta.get_env()
    prims = lower_to_primitives(mod, host, params, progress=progress, eager=False)
    compiler = prims.compiler
    every = list(compiler.funcs)
    offload = [lf for lf in every if is_vta_function(lf.func)]
    vta_mods = [lower_vta_function(lf.func, lf.name, env) for lf in offload]
    compiler.funcs[:] = [lf for lf in every if not any(lf is o for o in offload)]
    try:
        res: BuildResult = _generate(prims, progress)
    finally:
        compiler.funcs[:] = every
    res.lib.import_module(VTALibraryModule(vta_mods))
    factory = GraphExecutorFactoryModule(res.graph_json, res.lib, res.params, mod_name)
    factory.build_times = res.times
    factory.vta_functions = [m.name for m in vta_mods]
    return factory
