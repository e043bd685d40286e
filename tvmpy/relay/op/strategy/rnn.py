"""Strategy of ``nn.rnn_scan`` (relay/op/rnn.py): the ``te.extern`` kernel of ``topi.rnn`` on
CPU targets, its hidden-unit blocks sized from the target's float32 vector lanes. There is
nothing to schedule (the loops are written in the kernel). No GPU kernel: on GPU targets the
``Legalize`` pass (``relay/transform/legalize.py``) expands the call into the per-step ops it
replaced (``relay/op/rnn_expand.py``) before fusion."""

from __future__ import annotations

from typing import Any

from .... import te
from ....target.generic_func import generic_func
from ....topi.rnn import rnn_scan
from ....topi.x86.injective import vector_lanes
from ..registry import register_op_attr
from ..rnn_expand import expand_rnn_scan
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
    raise NotImplementedError("nn.rnn_scan: no GPU kernel (a serial loop over time): the "
                              "Legalize pass expands the call into per-step ops for GPU targets")


@generic_func
def rnn_scan_legalize(attrs: Any, args: list, arg_types: list) -> Any:
    """``FTVMLegalize`` of ``nn.rnn_scan``: None (the kernel) where the target has one."""
    return None


rnn_scan_legalize.register("gpu", expand_rnn_scan)
register_op_attr("nn.rnn_scan", "FTVMLegalize", rnn_scan_legalize)


register_strategy_func("nn.rnn_scan", "generic", _cpu)
register_strategy_func("nn.rnn_scan", "cpu", _cpu)
register_strategy_func("nn.rnn_scan", "gpu", _gpu)
