"""Strategies of the dynamic operators (``relay.op.dyn`` and ``shape_of``): the ``topi.dyn``
kernels, whose output extents are the call type's ``Any`` dimensions (size variables the output
buffers bind at run time). Generic: the always-correct schedule; "cpu": the x86 injective
schedule (vectorized, parallel) for the index-mapping kernels, the generic one for topk's
reductions."""

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
from . import OpStrategy, register_strategy_func
from .generic import generic_schedule, wrap_topi_schedule

__all__ = ["DYN_COMPUTES"]


def _shape(t: Any) -> tuple:
    return tuple(t.shape)


def _fields(t: Any) -> list:
    return list(t.fields)


DYN_COMPUTES: dict[str, Callable[[Any, list, Any], list]] = {
    "dyn.reshape": lambda a, ins, t: [dyn_reshape(ins[0], _shape(t))],
    "dyn.squeeze": lambda a, ins, t: [dyn_reshape(ins[0], _shape(t), "T_dyn_squeeze")],
    "dyn.expand_dims": lambda a, ins, t: [dyn_reshape(ins[0], _shape(t), "T_dyn_expand_dims")],
    "dyn.broadcast_to": lambda a, ins, t: [dyn_broadcast_to(ins[0], _shape(t))],
    "dyn.tile": lambda a, ins, t: [dyn_tile(ins[0], _shape(t))],
    "dyn.full": lambda a, ins, t: [dyn_full(ins[0], _shape(t), t.dtype)],
    "dyn.arange": lambda a, ins, t: [dyn_arange(ins[0], ins[2], _shape(t), t.dtype)],
    "dyn.strided_slice": lambda a, ins, t: [dyn_strided_slice(*ins, _shape(t))],
    "dyn.nn.pad": lambda a, ins, t: [dyn_pad(*ins, _shape(t), a.pad_mode)],
    "dyn.split": lambda a, ins, t: dyn_split(ins[0], ins[1], a.axis,
                                               [_shape(f) for f in _fields(t)]),
    "dyn.one_hot": lambda a, ins, t: [dyn_one_hot(*ins, a.axis, _shape(t), t.dtype)],
    "dyn.topk": lambda a, ins, t: dyn_topk(ins[0], a.axis, a.is_ascend, _shape(t.fields[0]),
                                             a.dtype),
    "dyn.image.resize": lambda a, ins, t: [dyn_resize(
        *ins, _shape(t), a.axes, a.use_sizes, a.mode, a.coordinate_transformation_mode,
        a.nearest_mode, a.extrapolation_value, a.keep_aspect_ratio_policy,
        antialias=bool(a.antialias) and a.mode != "nearest")],
    "shape_of": lambda a, ins, t: [shape_of(ins[0], a.dtype)],
}

_REDUCING = {"dyn.topk"}  # (not injective: the generic schedule on every target)


def _strategy(name: str, schedule: Callable[..., Any]) -> Callable[..., OpStrategy]:
    def fstrategy(attrs: Any, inputs: Any, out_type: Any, target: Any) -> OpStrategy:
        s = OpStrategy()
        s.add_implementation(DYN_COMPUTES[name], schedule, name, 10)
        return s

    return fstrategy


for _name in DYN_COMPUTES:
    register_strategy_func(_name, "generic", _strategy(_name, generic_schedule))
    if _name not in _REDUCING:
        register_strategy_func(_name, "cpu", _strategy(
            _name, wrap_topi_schedule(x86.schedule_injective)))
