"""GPU strategies, registered for the target key "gpu" (opencl, cuda, nvptx; TVM's
``strategy/cuda.py``): the generic computes (NCHW layouts: no AlterOpLayout rewrite is
registered for "gpu") with ``topi.cuda`` schedules: injective chains fused into one kernel,
cross-thread reductions, softmax and layer_norm one block per row, and the plain
one-thread-per-output schedule (``topi.cuda.schedule_fallback``) for the rest. The tuned
templates (conv2d_nchw.cuda, depthwise_conv2d_nchw.cuda, dense.cuda, batch_matmul.cuda) add
implementations at a higher priority in their own file."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ....topi import cuda
from ..registry import OpPattern, get
from . import OpStrategy, register_strategy_func
from .generic import COMPUTES, schedule_fallback, schedule_injective, schedule_reduce

__all__ = ["schedule_injective_gpu", "schedule_reduce_gpu", "schedule_fallback_gpu",
           "GPU_SCHEDULES", "add_gpu_implementation"]

# op name -> functions ``f(attrs, inputs, out_type, target, strategy)`` that add implementations
# (e.g. the AutoTVM templates, at a plevel above 10) to the op's "gpu" strategy
_EXTRA: dict[str, list[Callable[..., None]]] = {}


def add_gpu_implementation(op_name: str, fn: Callable[..., None]) -> Callable[..., None]:
    """Let ``fn(attrs, inputs, out_type, target, strategy)`` add implementations to
    ``op_name``'s "gpu" strategy (after the plain one, plevel 10: a higher plevel wins; ``fn``
    may add nothing for shapes it does not handle)."""
    if op_name not in COMPUTES:
        raise ValueError(f"add_gpu_implementation: {op_name!r} has no generic compute")
    _EXTRA.setdefault(op_name, []).append(fn)
    return fn


def _wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
    return lambda attrs, outs, target: fn(outs, target)


GPU_SCHEDULES: dict[str, Callable[..., Any]] = {
    "nn.softmax": _wrap(cuda.schedule_softmax),
    "nn.log_softmax": _wrap(cuda.schedule_softmax),
    "nn.layer_norm": _wrap(cuda.schedule_layer_norm),
    "nn.instance_norm": _wrap(cuda.schedule_layer_norm),
    "nn.group_norm": _wrap(cuda.schedule_layer_norm),
    "nn.global_avg_pool2d": _wrap(cuda.schedule_pool),
    "nn.global_max_pool2d": _wrap(cuda.schedule_pool),
    "nn.adaptive_avg_pool2d": _wrap(cuda.schedule_pool),
}


def _gpu_strategy(name: str) -> Callable[..., OpStrategy]:
    compute = COMPUTES[name]
    pattern = get(name).pattern
    if name in GPU_SCHEDULES:
        sched = GPU_SCHEDULES[name]
    elif pattern <= OpPattern.INJECTIVE:
        sched = _wrap(cuda.schedule_injective)
    elif pattern == OpPattern.COMM_REDUCE:
        sched = _wrap(cuda.schedule_reduce)
    else:
        sched = _wrap(cuda.schedule_fallback)

    def fstrategy(attrs: Any, inputs: Any, out_type: Any, target: Any) -> OpStrategy:
        s = OpStrategy()
        s.add_implementation(compute, sched, f"{name}.gpu", 10)
        for extra in _EXTRA.get(name, ()):
            extra(attrs, inputs, out_type, target, s)
        return s

    return fstrategy


for _name in COMPUTES:
    register_strategy_func(_name, "gpu", _gpu_strategy(_name))


@schedule_injective.register("gpu")
def schedule_injective_gpu(attrs: Any, outs: list, target: Any) -> Any:
    return cuda.schedule_injective(outs, target)


@schedule_reduce.register("gpu")
def schedule_reduce_gpu(attrs: Any, outs: list, target: Any) -> Any:
    return cuda.schedule_reduce(outs, target)


@schedule_fallback.register("gpu")
def schedule_fallback_gpu(attrs: Any, outs: list, target: Any) -> Any:
    return cuda.schedule_fallback(outs, target)


del _name
