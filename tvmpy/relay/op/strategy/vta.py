"""VTA's operator strategies (TVM's ``vta/python/vta/top/op.py``), for targets whose keys
contain "vta" (``ext_dev -device=vta -keys=vta,cpu``).

``nn.conv2d`` in the packed layout (data ``NCHW{BATCH}n{BLOCK_IN}c``, kernel
``OIHW{BLOCK_OUT}o{BLOCK_IN}i``, int8 operands, groups 1) and ``nn.dense`` on packed 4-D int8
operands run as ``vta.top.conv2d_packed`` / ``dense_packed`` with the VTA schedules (AutoTVM
templates ``conv2d_packed.vta`` / ``dense_packed.vta``); the fused epilogue (shift, bias add,
clip, cast) runs on VTA's ALU inside that schedule. ``clip`` computes as two element-wise stages
(min, then max) so the ALU can run it. Anything else falls back to the CPU strategies (the
target's "cpu" key), as TVM falls back to arm_cpu.
"""

from __future__ import annotations

from typing import Any

from .... import te, tir
from ....topi import tag as _tag
from . import OpStrategy, register_strategy_func
from .generic import out_dtype_of, wrap_topi_schedule
from .x86 import conv2d_strategy_cpu, dense_strategy_cpu

__all__ = ["conv2d_strategy_vta", "dense_strategy_vta", "clip_strategy_vta", "is_packed_conv2d",
           "is_packed_dense"]


def _env() -> Any:
    from ....vta import get_env

    return get_env()


def is_packed_conv2d(attrs: Any, inputs: list) -> bool:
    """Whether this ``nn.conv2d`` call is in VTA's packed int8 layout."""
    env = _env()
    data, kernel = inputs
    return (attrs.data_layout == f"NCHW{env.BATCH}n{env.BLOCK_IN}c"
            and attrs.kernel_layout == f"OIHW{env.BLOCK_OUT}o{env.BLOCK_IN}i"
            and int(attrs.groups) == 1 and str(data.dtype) == env.inp_dtype
            and str(kernel.dtype) == env.wgt_dtype and len(data.shape) == 6
            and len(kernel.shape) == 6)


def is_packed_dense(inputs: list) -> bool:
    env = _env()
    data, weight = inputs
    return (len(data.shape) == 4 and len(weight.shape) == 4 and str(data.dtype) == env.inp_dtype
            and str(weight.dtype) == env.wgt_dtype and int(data.shape[2]) == env.BATCH
            and int(data.shape[3]) == env.BLOCK_IN and int(weight.shape[2]) == env.BLOCK_OUT)


@register_strategy_func("nn.conv2d", "vta")
def conv2d_strategy_vta(attrs: Any, inputs: list, out_type: Any, target: Any) -> OpStrategy:
    if not is_packed_conv2d(attrs, inputs):
        return conv2d_strategy_cpu(attrs, inputs, out_type, target)
    from ....vta import top

    def compute(attrs: Any, inputs: list, out_type: Any) -> list:
        return [top.conv2d_packed(inputs[0], inputs[1], attrs.strides, attrs.padding,
                                  attrs.dilation, attrs.data_layout,
                                  out_dtype_of(attrs, out_type))]
    s = OpStrategy()
    s.add_implementation(compute, wrap_topi_schedule(top.schedule_conv2d_packed),
                         "conv2d_packed.vta", 10)
    return s


@register_strategy_func("nn.dense", "vta")
def dense_strategy_vta(attrs: Any, inputs: list, out_type: Any, target: Any) -> OpStrategy:
    if not is_packed_dense(inputs):
        return dense_strategy_cpu(attrs, inputs, out_type, target)
    from ....vta import top

    def compute(attrs: Any, inputs: list, out_type: Any) -> list:
        return [top.dense_packed(inputs[0], inputs[1], None, out_dtype_of(attrs, out_type))]
    s = OpStrategy()
    s.add_implementation(compute, wrap_topi_schedule(top.schedule_dense_packed),
                         "dense_packed.vta", 10)
    return s


def clip_two_stages(attrs: Any, inputs: list, out_type: Any) -> list:
    """``clip`` as ``min`` then ``max`` (two ALU instructions), as TVM's compute_clip_vta."""
    x = inputs[0]
    hi, lo = tir.const(attrs.a_max, x.dtype), tir.const(attrs.a_min, x.dtype)
    a: Any = te.compute(x.shape, lambda *i: te.min(x(*i), hi), name="clipA", tag=_tag.ELEMWISE)
    return [te.compute(x.shape, lambda *i: te.max(a(*i), lo), name="clipB", tag=_tag.ELEMWISE)]


@register_strategy_func("clip", "vta")
def clip_strategy_vta(attrs: Any, inputs: list, out_type: Any, target: Any) -> OpStrategy:
    from .generic import schedule_injective

    s = OpStrategy()
    s.add_implementation(clip_two_stages,
                         lambda attrs, outs, target: schedule_injective(attrs, outs, target),
                         "clip.vta", 10)
    return s
