"""TVM's ``autotvm.graph_tuner``: choose the convolutions' layouts and configs for the whole
graph (kernel time + layout transform time); see :mod:`.base_graph_tuner`.

::

    executor = DPTuner(mod["main"], {"data": shape}, "kernels.log",
                       [relay.op.get("nn.conv2d")], "llvm")
    executor.benchmark_layout_transform(min_exec_num=100)
    executor.run()
    executor.write_opt_sch2record_file("graph_opt.log")
    with autotvm.apply_graph_best("graph_opt.log"):
        lib = relay.build(mod, target="llvm", params=params)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .base_graph_tuner import BaseGraphTuner

__all__ = ["BaseGraphTuner", "DPTuner", "PBQPTuner", "layout_tasks"]


class DPTuner(BaseGraphTuner):
    """TVM's dynamic-programming graph tuner: exact on chains and trees (and, by variable
    elimination, on graphs with joins; see :mod:`.solver`)."""


class PBQPTuner(BaseGraphTuner):
    """TVM's PBQP graph tuner. The problem is the same (a partitioned boolean quadratic
    program: unary kernel costs, pairwise transform costs); here it is solved exactly by the
    same solver as :class:`DPTuner` rather than by PBQP's reduction heuristics, so both
    return the same optimum."""


def _divisors(n: int, limit: int) -> list[int]:
    return [d for d in range(1, min(n, limit) + 1) if n % d == 0]


def layout_tasks(task: Any, blocks: Sequence[int] | None = None, max_block: int = 16) -> list[Any]:
    """The tasks of the same convolution as ``task`` (a ``conv2d_NCHWc.x86`` or
    ``depthwise_conv2d_NCHWc.x86`` task from ``extract_from_program``) at other channel blocks:
    TVM tunes the blocks as knobs (``tile_ic``/``tile_oc``); here they are part of the workload,
    so tuning these tasks too gives the graph tuner layouts to choose from. ``blocks``: the
    block sizes to try (those dividing the channel counts; default: the divisors up to
    ``max_block``); the task's own blocks are always tried, and the task itself is included."""
    from ..task.graph_best import CONV_TASKS, conv_record_layout
    from ..task.task import create

    lay = conv_record_layout(task.workload)
    if lay is None:
        raise ValueError(f"layout_tasks: {task.name} is not one of {sorted(CONV_TASKS)}")
    key, own_ic, own_oc = lay
    own = (own_ic, own_oc)
    kind, (n, c, h, w), (oc, ic_per_group, kh, kw), strides, padding, dilation, dtype = key
    _, data, kernel, _, _, _, layout, _, out_dtype = task.workload
    plain = layout == "NCHW"


    def ok(b: int, ch: int) -> bool:
        return ch % b == 0 and (blocks is None or b in blocks or b in own)

    limit = max(max_block, *(blocks or [0]), *own)
    ics = [b for b in _divisors(c, limit) if ok(b, c)]
    ocs = [b for b in _divisors(oc, limit) if ok(b, oc)]
    pairs = ([(b, b) for b in ics if b in ocs] if kind == "depthwise"
             else [(i, o) for i in ics for o in ocs])
    out = []
    for ib, ob in pairs:
        dshape: tuple[int, ...]
        if kind == "depthwise":
            dshape = (n, c // ib, h, w, ib)
            kshape = (c // ob, 1, kh, kw, 1, ob)
            dlayout = f"NCHW{ib}c"
        else:
            dshape = (n, c, h, w) if plain else (n, c // ib, h, w, ib)
            kshape = (oc // ob, c // ib, kh, kw, ib, ob)
            dlayout = "NCHW" if plain else f"NCHW{ib}c"
        args = (("TENSOR", dshape, data[2]), ("TENSOR", kshape, kernel[2]), strides, padding,
                dilation, dlayout, f"NCHW{ob}c", out_dtype)
        wkl = (task.name,) + args
        out.append(task if wkl == tuple(task.workload) else create(task.name, args, task.target))
    return out
