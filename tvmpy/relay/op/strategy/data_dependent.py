"""Strategies of the data-dependent operators (argwhere, compress, unique, ONNX NMS): one
``te.extern`` kernel each (``topi.data_dependent``), generic and "cpu" (x86).

The output extent that depends on the data is the call type's ``Any`` dimension: a size
variable of the kernel, bound from the output array the executor allocates after running the
operator's shape function. There is nothing to schedule in an extern stage (its loops are
written in its body): the schedule is the default one. CPU only (serial loops; no GPU kernel).
"""

from __future__ import annotations

from typing import Any

from .... import te
from ....topi import data_dependent as dd
from ...ty import TupleType
from . import OpStrategy, register_strategy_func


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


COMPUTES = {"argwhere": _argwhere, "compress": _compress, "unique": _unique,
            "vision.all_class_non_max_suppression": _nms}


def _strategy(name: str, key: str) -> Any:
    compute = COMPUTES[name]

    def fstrategy(attrs: Any, inputs: Any, out_type: Any, target: Any) -> OpStrategy:
        s = OpStrategy()
        s.add_implementation(compute, _schedule, f"{name}.{key}", 10)
        return s

    return fstrategy


def _no_gpu(name: str) -> Any:
    def fstrategy(attrs: Any, inputs: Any, out_type: Any, target: Any) -> OpStrategy:
        raise NotImplementedError(f"{name}: no GPU kernel (its te.extern kernel is serial CPU "
                                  f"code, a running count); compile it for an llvm target")

    return fstrategy


for _name in COMPUTES:
    register_strategy_func(_name, "generic", _strategy(_name, "generic"))
    register_strategy_func(_name, "cpu", _strategy(_name, "x86"))
    register_strategy_func(_name, "gpu", _no_gpu(_name))
del _name
