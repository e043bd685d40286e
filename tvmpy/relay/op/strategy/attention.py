"""Strategy of ``nn.attention`` (relay/op/nn_attention.py): ``topi.nn.attention``, scheduled per
block of query rows on CPU targets (``topi.x86.schedule_attention``); the generic default is the
plain stage-by-stage schedule (correct anywhere, every stage whole). The FuseAttention pass makes
the operator only for CPU targets; a direct call elsewhere gets the target's always-correct
schedule."""

from __future__ import annotations

from typing import Any

from ....topi import x86
from ....topi.nn.attention import attention
from ..registry import OpPattern
from . import OpStrategy, register_strategy_func
from .generic import pattern_schedule


def _compute(attrs: Any, inputs: list, out_type: Any) -> list:
    bias = inputs[3] if len(inputs) > 3 else None
    return [attention(inputs[0], inputs[1], inputs[2], bias, float(attrs.scale),
                      bool(attrs.k_transposed), int(attrs.heads))]


def _generic(attrs: Any, inputs: Any, out_type: Any, target: Any) -> OpStrategy:
    """The compute with the target's always-correct schedule (``pattern_schedule`` of an
    opaque op: every stage whole on a CPU, one thread per output element on a GPU)."""
    s = OpStrategy()
    s.add_implementation(_compute, pattern_schedule(OpPattern.OPAQUE, target),
                         "attention.generic", 10)
    return s


def _cpu(attrs: Any, inputs: Any, out_type: Any, target: Any) -> OpStrategy:
    s = OpStrategy()
    s.add_implementation(_compute, lambda attrs, outs, target: x86.schedule_attention(outs),
                         "attention.x86", 10)
    return s


register_strategy_func("nn.attention", "generic", _generic)
register_strategy_func("nn.attention", "cpu", _cpu)
