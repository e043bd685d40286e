"""The GPU AutoTVM templates as relay implementations (key "gpu", plevel 20 > the plain
schedule's 10): ``nn.conv2d`` (NCHW/OIHW: ``conv2d_nchw.cuda``, depthwise with multiplier 1:
``depthwise_conv2d_nchw.cuda``), ``nn.dense`` (2-D data: ``dense.cuda``) and
``nn.batch_matmul`` (``batch_matmul.cuda``). Calls with symbolic shapes, other layouts or
groupings keep the plain GPU schedule (strategy/gpu.py). Under ``autotvm.apply_history_best``
the tuned configs apply; ``autotvm.task.extract_from_program(..., target="opencl")`` lists these
tasks."""

from __future__ import annotations

from typing import Any

from ....topi import cuda
from .generic import _conv2d_kind, _out_dtype
from .gpu import add_gpu_implementation

__all__: list[str] = []

PLEVEL = 20


def _const(*tensors: Any) -> bool:
    return all(isinstance(getattr(d, "value", d), int) for t in tensors for d in t.shape)


def _in_target(fschedule: Any, target: Any) -> Any:
    """The schedule run with ``target`` current: the dispatch context looks tuned configs up by
    the current target (relay's lowering does not enter it), and the fallback tiles read its
    threads per block."""

    def schedule(attrs: Any, outs: list, tgt: Any) -> Any:
        with target:
            return fschedule(outs)

    return schedule


def _conv2d(attrs: Any, inputs: list, out_type: Any, target: Any, strategy: Any) -> None:
    if attrs.data_layout != "NCHW" or attrs.kernel_layout != "OIHW" or not _const(*inputs):
        return
    kind = _conv2d_kind(attrs, inputs)
    if kind == "conv2d_nchw":
        fcompute, fschedule = cuda.conv2d_nchw, cuda.schedule_conv2d_nchw
    elif kind == "depthwise_conv2d_nchw":
        fcompute, fschedule = cuda.depthwise_conv2d_nchw, cuda.schedule_depthwise_conv2d_nchw
    else:
        return

    def compute(attrs: Any, inputs: list, out_type: Any) -> list:
        with target:
            return [fcompute(inputs[0], inputs[1], tuple(attrs.strides), tuple(attrs.padding),
                             tuple(attrs.dilation), _out_dtype(attrs, out_type))]

    strategy.add_implementation(compute, _in_target(fschedule, target), f"{kind}.cuda", PLEVEL)


def _dense(attrs: Any, inputs: list, out_type: Any, target: Any, strategy: Any) -> None:
    if len(inputs[0].shape) != 2 or not _const(*inputs):
        return

    def compute(attrs: Any, inputs: list, out_type: Any) -> list:
        with target:
            return [cuda.dense(inputs[0], inputs[1], None, _out_dtype(attrs, out_type))]

    strategy.add_implementation(compute, _in_target(cuda.schedule_dense, target), "dense.cuda",
                                PLEVEL)


def _batch_matmul(attrs: Any, inputs: list, out_type: Any, target: Any, strategy: Any) -> None:
    if not _const(*inputs):
        return

    def compute(attrs: Any, inputs: list, out_type: Any) -> list:
        with target:
            return [cuda.batch_matmul(inputs[0], inputs[1], None, _out_dtype(attrs, out_type),
                                      bool(attrs.transpose_a), bool(attrs.transpose_b))]

    strategy.add_implementation(compute, _in_target(cuda.schedule_batch_matmul, target),
                                "batch_matmul.cuda", PLEVEL)


add_gpu_implementation("nn.conv2d", _conv2d)
add_gpu_implementation("nn.dense", _dense)
add_gpu_implementation("nn.batch_matmul", _batch_matmul)
