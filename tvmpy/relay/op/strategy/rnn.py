"""Strategy of ``nn.rnn_scan`` (relay/op/rnn.py): the ``te.extern`` kernel of ``topi.rnn`` on
CPU targets, its hidden-unit blocks sized from the target's float32 vector lanes. There is
nothing to schedule (the loops are written in the kernel). Its time step is an auto-scheduler
task (``topi.rnn.rnn_cell``): under ``relay.backend.use_auto_scheduler`` with a record of the
cell in the current ``ApplyHistoryBest``, the kernel is ``topi.rnn.rnn_scan_stepped`` around the
record's schedule of the cell instead. No GPU kernel: on GPU targets the
``Legalize`` pass (``relay/transform/legalize.py``) expands the call into the per-step ops it
replaced (``relay/op/rnn_expand.py``) before fusion."""

from __future__ import annotations

from typing import Any

from .... import te
from ....target.generic_func import generic_func
from ....topi.rnn import GATES, rnn_cell_key, rnn_cell_workload, rnn_scan, rnn_scan_stepped
from ....topi.x86.injective import vector_lanes
from ..registry import register_op_attr
from ..rnn_expand import expand_rnn_scan
from . import OpStrategy, register_strategy_func


def _compute(attrs: Any, inputs: list, out_type: Any) -> list:
    xw, rt, h0, aux = inputs
    return rnn_scan(xw, rt, h0, aux, attrs.cell, attrs.hidden, bool(attrs.reverse),
                    bool(attrs.linear_before_reset), lanes=vector_lanes("float32"))


def _tuned_cell(attrs: Any, inputs: list, target: Any) -> tuple[Any, list] | None:
    """``(schedule, cell tensors)`` of the cell's best record in the current
    ``ApplyHistoryBest`` under ``relay.backend.use_auto_scheduler``, else None."""
    from ....auto_scheduler.relay_integration import is_auto_scheduler_enabled, schedule_fused

    if not is_auto_scheduler_enabled():
        return None
    xw, rt = inputs[0], inputs[1]
    n = getattr(xw.shape[1], "value", xw.shape[1])
    if not isinstance(n, int):
        return None  # a batch size known only at run time: no task
    cell, hidden, lbr = str(attrs.cell), int(attrs.hidden), bool(attrs.linear_before_reset)
    hp = int(rt.shape[1]) // GATES[cell]
    tensors = rnn_cell_workload(cell, n, hidden, hp, lbr)
    sch = schedule_fused(tensors, rnn_cell_key(cell, n, hidden, hp, lbr), target)
    return None if sch is None else (sch, tensors)


def _compute_for(target: Any) -> Any:
    def compute(attrs: Any, inputs: list, out_type: Any) -> list:
        tuned = _tuned_cell(attrs, inputs, target)
        if tuned is None:
            return _compute(attrs, inputs, out_type)
        xw, rt, h0, aux = inputs
        return rnn_scan_stepped(xw, rt, h0, aux, attrs.cell, attrs.hidden, bool(attrs.reverse),
                                bool(attrs.linear_before_reset), *tuned)

    return compute


def _schedule(attrs: Any, outs: list, target: Any) -> Any:
    return te.create_schedule([t.op for t in outs])


def _cpu(attrs: Any, inputs: Any, out_type: Any, target: Any) -> OpStrategy:
    s = OpStrategy()
    s.add_implementation(_compute_for(target), _schedule, "rnn_scan.cpu", 10)
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
