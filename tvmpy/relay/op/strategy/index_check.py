"""Strategy of ``check_indices`` (relay/op/index_check.py): the ``te.extern`` kernel of
``topi.index_check`` on CPU targets. A GPU kernel cannot fail a call, so there the indices are
only wrapped and clamped into range (memory stays safe; no error is raised)."""

from __future__ import annotations

from typing import Any

from .... import te
from ....tir import op as tir_op
from ....tir.expr import Cast, Select, const
from ....topi.index_check import check_indices
from ..registry import OpPattern
from . import OpStrategy, register_strategy_func
from .generic import pattern_schedule


def _compute(attrs: Any, inputs: list, out_type: Any) -> list:
    return [check_indices(inputs[0], inputs[1], attrs.axes, attrs.what)]


def _schedule(attrs: Any, outs: list, target: Any) -> Any:
    return te.create_schedule([t.op for t in outs])


def _clamp(attrs: Any, inputs: list, out_type: Any) -> list:
    idx, data = inputs
    axes = list(attrs.axes)

    def f(*i: Any) -> Any:
        a = axes[0]
        n = data.shape[a]
        if len(axes) > 1:  # the size of the axis the entry indexes
            for k in range(1, len(axes)):
                n = Select(i[-1] == k, data.shape[axes[k]], n)
        v = idx(*i)
        n = Cast(v.dtype, n) if n.dtype != v.dtype else n
        w = Select(v < const(0, v.dtype), v + n, v)
        return tir_op.min(tir_op.max(w, const(0, v.dtype)), n - 1)

    return [te.compute(idx.shape, f, name="clamp_indices", tag="injective")]


def _schedule_gpu(attrs: Any, outs: list, target: Any) -> Any:
    return pattern_schedule(OpPattern.INJECTIVE, target)(attrs, outs, target)


def _cpu(attrs: Any, inputs: Any, out_type: Any, target: Any) -> OpStrategy:
    s = OpStrategy()
    s.add_implementation(_compute, _schedule, "check_indices.generic", 10)
    return s


def _gpu(attrs: Any, inputs: Any, out_type: Any, target: Any) -> OpStrategy:
    s = OpStrategy()
    s.add_implementation(_clamp, _schedule_gpu, "check_indices.gpu_clamp", 10)
    return s


register_strategy_func("check_indices", "generic", _cpu)
register_strategy_func("check_indices", "gpu", _gpu)
