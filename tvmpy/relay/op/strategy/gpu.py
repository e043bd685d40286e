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
from .generic import COMPUTES, schedule_injective, schedule_reduce

__all__ = ["schedule_injective_gpu", "schedule_reduce_gpu", "GPU_SCHEDULES"]


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


del _name
