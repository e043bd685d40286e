"""Strategies of the data-dependent operators (argwhere, compress, unique, ONNX NMS): one
``te.extern`` kernel each (``topi.data_dependent``), for the keys "generic" and "cpu" (x86),
registered explicitly per op and key; "gpu": an error naming the op.

The output extent that depends on the data is the call type's ``Any`` dimension: a size
variable of the kernel, bound from the output array the executor allocates after running the
operator's shape function. There is nothing to schedule in an extern stage (its loops are
written in its body): the schedule is the default one. CPU only (serial loops; no GPU kernel).

Each also has an upper-bound form (``relay.op.upper_bound``, at the end), which the VM runs:
output buffers sized from the input shapes, the actual count written by the kernel.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from .... import te
from ....topi import data_dependent as dd
from ...ty import TupleType
from ..upper_bound import Bounded, register_upper_bound
from . import Compute, OpStrategy, register_strategy_func


def _schedule(attrs: Any, outs: list, target: Any) -> Any:
    return te.create_schedule([t.op for t in outs])


def _argwhere(attrs: Any, inputs: list, out_type: Any) -> list:
    return [dd.argwhere(inputs[0], out_type.shape[0])]


def _compress(attrs: Any, inputs: list, out_type: Any) -> list:
    axis = attrs.axis
    dim = 0 if axis is None else axis % len(inputs[0].shape)
    return [dd.compress(inputs[0], inputs[1], axis, out_type.shape[dim])]


def _unique(attrs: Any, inputs: list, out_type: Any) -> list:
    assert isinstance(out_type, TupleType)
    return dd.unique(inputs[0], attrs.is_sorted, attrs.axis, out_type.fields[1].shape[0])


def _nms(attrs: Any, inputs: list, out_type: Any) -> list:
    return [dd.all_class_non_max_suppression(*inputs, attrs.center_point_box, out_type.shape[0])]


def _strategy(name: str, compute: Compute) -> Callable[..., OpStrategy]:
    """Keys "generic" (``<op>.generic``) and "cpu" (``<op>.x86``): the extern kernel."""
    def fstrategy(attrs: Any, inputs: Any, out_type: Any, target: Any) -> OpStrategy:
        s = OpStrategy()
        s.add_implementation(compute, _schedule, name, 10)
        return s

    return fstrategy


def _no_gpu(name: str) -> Callable[..., OpStrategy]:
    """Key "gpu": a clear error (the kernel is serial CPU code)."""
    def fstrategy(attrs: Any, inputs: Any, out_type: Any, target: Any) -> OpStrategy:
        raise NotImplementedError(f"{name}: no GPU kernel (its te.extern kernel is serial CPU "
                                  f"code, a running count); compile it for an llvm target")

    return fstrategy


register_strategy_func("argwhere", "generic", _strategy("argwhere.generic", _argwhere))
register_strategy_func("argwhere", "cpu", _strategy("argwhere.x86", _argwhere))
register_strategy_func("argwhere", "gpu", _no_gpu("argwhere"))
register_strategy_func("compress", "generic", _strategy("compress.generic", _compress))
register_strategy_func("compress", "cpu", _strategy("compress.x86", _compress))
register_strategy_func("compress", "gpu", _no_gpu("compress"))
register_strategy_func("unique", "generic", _strategy("unique.generic", _unique))
register_strategy_func("unique", "cpu", _strategy("unique.x86", _unique))
register_strategy_func("unique", "gpu", _no_gpu("unique"))
_NMS = "vision.all_class_non_max_suppression"
register_strategy_func(_NMS, "generic", _strategy(f"{_NMS}.generic", _nms))
register_strategy_func(_NMS, "cpu", _strategy(f"{_NMS}.x86", _nms))
register_strategy_func(_NMS, "gpu", _no_gpu(_NMS))


# ---- upper-bound kernels (relay.op.upper_bound: what the VM runs) --------------------------
def _count() -> Any:
    return te.var("count", "int32")


def _argwhere_bound(attrs: Any, ins: list) -> list:
    x = ins[0]
    return [(Bounded(int(x.size)), x.ndim)]


def _compress_axis(attrs: Any, ndim: int) -> int | None:
    return None if attrs.axis is None else attrs.axis % ndim


def _compress_bound(attrs: Any, ins: list) -> list:
    x, cond = ins
    axis = _compress_axis(attrs, x.ndim)
    n = x.size if axis is None else x.shape[axis]
    k = Bounded(min(int(cond.size), int(n)))
    if axis is None:
        return [(k,)]
    return [tuple(k if d == axis else s for d, s in enumerate(x.shape))]


def _compress_check(attrs: Any, counts: list, shapes: list) -> None:
    if counts[1] >= 0:
        axis = _compress_axis(attrs, len(shapes[0]))
        n = math.prod(shapes[0]) if axis is None else shapes[0][axis]
        where = "the flattened data" if axis is None else f"axis {axis}"
        raise ValueError(f"compress: the condition selects index {counts[1]}, past the end of "
                         f"{where} (size {n})")


def _unique_bound(attrs: Any, ins: list) -> list:
    x = ins[0]
    if attrs.axis is None:
        n = int(x.size)
        y: tuple = (Bounded(n),)
    else:
        ax = attrs.axis % x.ndim
        n = int(x.shape[ax])
        y = tuple(Bounded(n) if d == ax else s for d, s in enumerate(x.shape))
    return [y, (Bounded(n),), (n,), (Bounded(n),)]


def _nms_bound(attrs: Any, ins: list) -> list:
    """batch * classes * min(max_output_boxes_per_class, boxes) rows (reads that one scalar)."""
    boxes, scores, max_out = ins[0], ins[1], ins[2]
    if boxes.ndim != 3 or boxes.shape[2] != 4 or scores.ndim != 3 \
            or boxes.shape[0] != scores.shape[0] or boxes.shape[1] != scores.shape[2]:
        raise ValueError(f"non_max_suppression: boxes {boxes.shape} and scores {scores.shape} "
                         "disagree (boxes (batch, boxes, 4), scores (batch, classes, boxes))")
    limit = max(int(max_out.reshape(-1)[0]), 0) if max_out.size else 0
    nb, nc, n = scores.shape
    return [(Bounded(nb * nc * min(limit, n)), 3)]


register_upper_bound(
    "argwhere", _argwhere_bound, lambda attrs, ins: dd.argwhere(ins[0], _count(), bounded=True))
register_upper_bound(
    "compress", _compress_bound,
    lambda attrs, ins: dd.compress(ins[0], ins[1], attrs.axis, _count(), bounded=True),
    num_counts=2, check=_compress_check)
register_upper_bound(
    "unique", _unique_bound,
    lambda attrs, ins: dd.unique(ins[0], attrs.is_sorted, attrs.axis, _count(), bounded=True))
register_upper_bound(
    "vision.all_class_non_max_suppression", _nms_bound,
    lambda attrs, ins: dd.all_class_non_max_suppression(*ins, attrs.center_point_box, _count(),
                                                         bounded=True))
