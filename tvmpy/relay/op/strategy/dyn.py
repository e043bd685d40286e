"""Strategies of the dynamic operators (``relay.op.dyn`` and ``shape_of``): the ``topi.dyn``
kernels, whose output extents are the call type's ``Any`` dimensions (size variables the output
buffers bind at run time). Per op, one compute (its attributes and the call type choose the
kernel's arguments) and one strategy per target kind, registered explicitly below: "generic",
the always-correct schedule; "cpu", the x86 injective schedule (vectorized, parallel) for the
index-mapping kernels; ``dyn.topk`` (reductions) keeps the generic strategy on every target."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ....topi import x86
from ....topi.dyn.image import dyn_resize
from ....topi.dyn.nn import dyn_pad
from ....topi.dyn.shape import shape_of
from ....topi.dyn.transform import (
    dyn_arange,
    dyn_broadcast_to,
    dyn_full,
    dyn_one_hot,
    dyn_reshape,
    dyn_split,
    dyn_strided_slice,
    dyn_tile,
    dyn_topk,
)
from . import Compute, OpStrategy, Schedule, register_strategy_func
from .generic import generic_schedule, wrap_topi_schedule


def _shape(t: Any) -> tuple:
    return tuple(t.shape)


# ---- computes: one per op ----------------------------------------------------------------------
def _reshape(attrs: Any, inputs: list, out_type: Any) -> list:
    return [dyn_reshape(inputs[0], _shape(out_type))]


def _squeeze(attrs: Any, inputs: list, out_type: Any) -> list:
    return [dyn_reshape(inputs[0], _shape(out_type), "T_dyn_squeeze")]


def _expand_dims(attrs: Any, inputs: list, out_type: Any) -> list:
    return [dyn_reshape(inputs[0], _shape(out_type), "T_dyn_expand_dims")]


def _broadcast_to(attrs: Any, inputs: list, out_type: Any) -> list:
    return [dyn_broadcast_to(inputs[0], _shape(out_type))]


def _tile(attrs: Any, inputs: list, out_type: Any) -> list:
    return [dyn_tile(inputs[0], _shape(out_type))]


def _full(attrs: Any, inputs: list, out_type: Any) -> list:
    return [dyn_full(inputs[0], _shape(out_type), out_type.dtype)]


def _arange(attrs: Any, inputs: list, out_type: Any) -> list:
    return [dyn_arange(inputs[0], inputs[2], _shape(out_type), out_type.dtype)]


def _strided_slice(attrs: Any, inputs: list, out_type: Any) -> list:
    return [dyn_strided_slice(*inputs, _shape(out_type))]


def _pad(attrs: Any, inputs: list, out_type: Any) -> list:
    return [dyn_pad(*inputs, _shape(out_type), attrs.pad_mode)]


def _split(attrs: Any, inputs: list, out_type: Any) -> list:
    return dyn_split(inputs[0], inputs[1], attrs.axis, [_shape(f) for f in out_type.fields])


def _one_hot(attrs: Any, inputs: list, out_type: Any) -> list:
    return [dyn_one_hot(*inputs, attrs.axis, _shape(out_type), out_type.dtype)]


def _topk(attrs: Any, inputs: list, out_type: Any) -> list:
    return dyn_topk(inputs[0], attrs.axis, attrs.is_ascend, _shape(out_type.fields[0]),
                    attrs.dtype)


def _resize(attrs: Any, inputs: list, out_type: Any) -> list:
    a = attrs
    return [dyn_resize(*inputs, _shape(out_type), a.axes, a.use_sizes, a.mode,
                       a.coordinate_transformation_mode, a.nearest_mode, a.extrapolation_value,
                       a.keep_aspect_ratio_policy,
                       antialias=bool(a.antialias) and a.mode != "nearest")]


def _shape_of(attrs: Any, inputs: list, out_type: Any) -> list:
    return [shape_of(inputs[0], attrs.dtype)]


# ---- strategies: one per op and target kind ----------------------------------------------------
_SCHEDULE_CPU = wrap_topi_schedule(x86.schedule_injective)


def _strategy(name: str, compute: Compute, schedule: Schedule) -> Callable[..., OpStrategy]:
    """The strategy of ``name`` with its one implementation (named ``name``, plevel 10)."""
    def fstrategy(attrs: Any, inputs: Any, out_type: Any, target: Any) -> OpStrategy:
        s = OpStrategy()
        s.add_implementation(compute, schedule, name, 10)
        return s

    return fstrategy


def _generic(name: str, compute: Compute) -> Callable[..., OpStrategy]:
    """Every target: the compute with the always-correct schedule."""
    return _strategy(name, compute, generic_schedule)


def _injective_cpu(name: str, compute: Compute) -> Callable[..., OpStrategy]:
    """Key "cpu": an index-mapping kernel with the x86 injective schedule."""
    return _strategy(name, compute, _SCHEDULE_CPU)


register_strategy_func("dyn.reshape", "generic", _generic("dyn.reshape", _reshape))
register_strategy_func("dyn.reshape", "cpu", _injective_cpu("dyn.reshape", _reshape))
register_strategy_func("dyn.squeeze", "generic", _generic("dyn.squeeze", _squeeze))
register_strategy_func("dyn.squeeze", "cpu", _injective_cpu("dyn.squeeze", _squeeze))
register_strategy_func("dyn.expand_dims", "generic", _generic("dyn.expand_dims", _expand_dims))
register_strategy_func("dyn.expand_dims", "cpu", _injective_cpu("dyn.expand_dims", _expand_dims))
register_strategy_func("dyn.broadcast_to", "generic", _generic("dyn.broadcast_to", _broadcast_to))
register_strategy_func("dyn.broadcast_to", "cpu", _injective_cpu("dyn.broadcast_to", _broadcast_to))
register_strategy_func("dyn.tile", "generic", _generic("dyn.tile", _tile))
register_strategy_func("dyn.tile", "cpu", _injective_cpu("dyn.tile", _tile))
register_strategy_func("dyn.full", "generic", _generic("dyn.full", _full))
register_strategy_func("dyn.full", "cpu", _injective_cpu("dyn.full", _full))
register_strategy_func("dyn.arange", "generic", _generic("dyn.arange", _arange))
register_strategy_func("dyn.arange", "cpu", _injective_cpu("dyn.arange", _arange))
register_strategy_func("dyn.strided_slice", "generic",
                       _generic("dyn.strided_slice", _strided_slice))
register_strategy_func("dyn.strided_slice", "cpu",
                       _injective_cpu("dyn.strided_slice", _strided_slice))
register_strategy_func("dyn.nn.pad", "generic", _generic("dyn.nn.pad", _pad))
register_strategy_func("dyn.nn.pad", "cpu", _injective_cpu("dyn.nn.pad", _pad))
register_strategy_func("dyn.split", "generic", _generic("dyn.split", _split))
register_strategy_func("dyn.split", "cpu", _injective_cpu("dyn.split", _split))
register_strategy_func("dyn.one_hot", "generic", _generic("dyn.one_hot", _one_hot))
register_strategy_func("dyn.one_hot", "cpu", _injective_cpu("dyn.one_hot", _one_hot))
register_strategy_func("dyn.topk", "generic", _generic("dyn.topk", _topk))
# dyn.topk: reductions, not injective: the generic strategy on "cpu" too
register_strategy_func("dyn.image.resize", "generic", _generic("dyn.image.resize", _resize))
register_strategy_func("dyn.image.resize", "cpu", _injective_cpu("dyn.image.resize", _resize))
register_strategy_func("shape_of", "generic", _generic("shape_of", _shape_of))
register_strategy_func("shape_of", "cpu", _injective_cpu("shape_of", _shape_of))
