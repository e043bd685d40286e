"""The graph tuner's choices applied at build time (TVM's ``autotvm.apply_graph_best``).

On x86 the layout of a convolution (its channel blocks ``ic_bn``/``oc_bn``: data
``NCHW{ic_bn}c``, output ``NCHW{oc_bn}c``) is chosen by the layout pass
(``relay.op.strategy.x86_alter_op.conv_blocks``) and is part of the tuning workload (the packed
kernel's shape). The graph tuner (``autotvm.graph_tuner``) picks one tuned record per
convolution so that kernel time plus layout-transform time is least; :class:`ApplyGraphBest`
makes a build use them: the layout pass asks the dispatch context
(:meth:`DispatchContext.query_layout`) for the blocks of each convolution, by its layout-free
key (:func:`conv_key`: shapes in NCHW/OIHW, strides, padding, dilation, dtype), and the
templates then get the chosen record's config (matched by key and blocks, whichever way the
convolution's input arrives: plain NCHW or blocked).
"""

from __future__ import annotations

import os
import warnings
from typing import Any

from .conv_layout import CONV_TASKS, conv_key, conv_record_layout, pad4
from .dispatcher import ApplyHistoryBest, _record_tkey

__all__ = ["ApplyGraphBest", "apply_graph_best", "conv_key", "conv_record_layout", "CONV_TASKS",
           "pad4"]

class ApplyGraphBest(ApplyHistoryBest):
    """``with autotvm.apply_graph_best("graph_opt.log"):`` builds with the graph tuner's choice
    of record (hence layout) for each convolution, even where only one blocking was tuned;
    other workloads as ``apply_history_best``. ``records``: a log path or ``(MeasureInput,
    MeasureResult)`` pairs (the file written by ``write_opt_sch2record_file``). Two records
    for one convolution with different blocks: the first is used (with a warning)."""

    def __init__(self, records: Any, include_compatible: bool = False):
        self._layouts: dict[tuple[Any, tuple], tuple[int, int]] = {}
        super().__init__(None, include_compatible=include_compatible)
        if records is not None:
            self.load(records)

    def load(self, records: Any) -> None:
        from .. import record

        if isinstance(records, (str, os.PathLike)):
            records = record.load_from_file(records)
        records = list(records)
        super().load(records)
        for inp, res in records:
            lay = conv_record_layout(inp.task.workload) if res.error_no == 0 else None
            if lay is None:
                continue
            key, ic_bn, oc_bn = lay
            tk = (_record_tkey(inp.target), key)
            old = self._layouts.get(tk)
            if old is not None and old != (ic_bn, oc_bn):
                warnings.warn(f"apply_graph_best: two layouts for convolution {key} "
                              f"({old} and {(ic_bn, oc_bn)}); using the first", stacklevel=2)
                continue
            self._layouts[tk] = (ic_bn, oc_bn)

    def _layout_of(self, target: Any, key: Any) -> tuple[int, int] | None:
        """The chosen blocks of convolution ``key`` among the records that apply to
        ``target`` (this CPU's first, as ApplyHistoryBest's rule)."""
        for tk in self._tkeys(target, lambda tk: (tk, key) in self._layouts):
            return self._layouts[(tk, key)]
        return None

    def _layout_inside(self, target: Any, key: Any) -> tuple[int, int] | None:
        return self._layout_of(target, key)

    def _conv_config(self, target: Any, workload: Any) -> Any:
        lay = conv_record_layout(workload)
        if lay is None or self._layout_of(target, lay[0]) != lay[1:]:
            return None
        return super()._conv_config(target, workload)


def apply_graph_best(records: Any, include_compatible: bool = False) -> ApplyGraphBest:
    """TVM's ``autotvm.apply_graph_best(path)``: see :class:`ApplyGraphBest`."""
    return ApplyGraphBest(records, include_compatible=include_compatible)
