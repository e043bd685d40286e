"""Strategy of ``nn.rnn_scan`` (relay/op/rnn.py): the ``te.extern`` kernel of ``topi.rnn`` on
CPU targets, its hidden-unit blocks sized from the target's float32 vector lanes. There is
nothing to schedule (the loops are written in the kernel). No GPU kernel."""

from __future__ import annotations

from typing import Any

from .... import te
from ....topi.rnn import rnn_scan
from ....topi.x86.injective import vector_lanes
from . import OpStrategy, register_strategy_func


def _compute(attrs: Any, inputs: list, out_type: Any) -> list:
    xw, rt, h0, aux = inputs
    return rnn_scan(xw, rt, h0, aux, attrs.cell, attrs.hidden, bool(attrs.reverse),
                    bool(attrs.linear_before_reset), lanes=vector_lanes("float32"))


def _schedule(attrs: Any, outs: list, target: Any) -> Any:
    return te.create_schedule([t.op for t in outs])


def _cpu(attrs: Any, inputs: Any, out_type: Any, target: Any) -> OpStrategy:
    s = OpStrategy()
    s.add_implementation(_compute, _schedule, "rnn_scan.cpu", 10)
    return s


def _gpu(attrs: Any, inputs: Any, out_type: Any, target: Any) -> OpStrategy:
    raise NotImplementedError("nn.rnn_scan: no GPU kernel (a serial loop over time); compile "
                              "it for an llvm target")


register_strategy_func("nn.rnn_scan", "generic", _cpu)
register_strategy_func("nn.rnn_scan", "cpu", _cpu)
register_strategy_func("nn.rnn_scan", "gpu", _gpu)
