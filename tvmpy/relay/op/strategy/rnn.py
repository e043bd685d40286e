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
from ....topi.rnn import (
    GATES,
    packed_block,
    rnn_cell_key,
    rnn_cell_workload,
    rnn_scan,
    rnn_scan_stepped,
)
from ....topi.x86.injective import vector_lanes
from .. import transform as _tr
from ..registry import register_alter_op_layout, register_op_attr
from ..rnn import rnn_scan as _relay_rnn_scan
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
    G = GATES[cell]
    # the cell of the layout the kernel reads: a packed R^T is its own task (its own key)
    packed = len(rt.shape) == 3
    ub = int(rt.shape[2]) // G if packed else None
    hp = int(rt.shape[-1]) // G * (int(rt.shape[0]) if packed else 1)
    tensors = rnn_cell_workload(cell, n, hidden, hp, lbr, ub)
    sch = schedule_fused(tensors, rnn_cell_key(cell, n, hidden, hp, lbr, ub), target)
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


@generic_func
def rnn_scan_alter_layout(call: Any, inputs: Any) -> Any:
    """``FTVMAlterOpLayout`` of ``nn.rnn_scan``: the target's rewrite (default: none)."""
    return None


@rnn_scan_alter_layout.register("cpu")
def _pack_rt(call: Any, inputs: Any) -> Any:
    """The kernel's ``R^T`` packed by its blocks of hidden units (``topi.rnn.pack_rt_np``:
    (Hp/ub, H, G*ub), ``ub`` the block the kernel picks for the call's batch rows and the
    target's float32 lanes): each block's k loop then reads one contiguous run instead of G
    runs a row ``G*Hp`` floats apart. A constant ``R^T`` is packed once (FoldConstant after
    the pass). Not where the packed layout is the plain one (one block). The auto-scheduler's
    cell of a packed call reads the packed layout too (``topi.rnn.rnn_cell_workload``'s
    ``ub``, in its workload key): a tuned cell replaces the kernel on the same layout."""
    xw_t, rt_t = call.args[0].checked_type, call.args[1].checked_type
    if len(rt_t.shape) != 2 or not all(isinstance(d, int) for d in rt_t.shape):
        return None
    cell, H = str(call.attrs.cell), int(call.attrs.hidden)
    G = GATES[cell]
    hp = int(rt_t.shape[1]) // G
    n = xw_t.shape[1] if isinstance(xw_t.shape[1], int) else None
    ub = packed_block(cell, hp, vector_lanes("float32"), n)
    nb = hp // ub
    if nb <= 1:
        return None
    rt = inputs.plain(1)
    packed = _tr.reshape(_tr.transpose(_tr.reshape(rt, (H, G, nb, ub)), (2, 0, 1, 3)),
                         (nb, H, G * ub))
    args = [inputs.plain(0), packed, inputs.plain(2), inputs.plain(3)]
    a = call.attrs
    return _relay_rnn_scan(*args, cell, H, bool(a.reverse), bool(a.linear_before_reset)), None


register_alter_op_layout("nn.rnn_scan", rnn_scan_alter_layout)
