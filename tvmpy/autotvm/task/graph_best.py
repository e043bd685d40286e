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
import re
import warnings
from collections.abc import Sequence
from typing import Any

from .dispatcher import ApplyHistoryBest, _target_key

__all__ = ["ApplyGraphBest", "apply_graph_best", "conv_key", "conv_record_layout", "CONV_TASKS",
           "pad4"]

CONV_TASKS = {"conv2d_NCHWc.x86": "conv", "depthwise_conv2d_NCHWc.x86": "depthwise"}
"""The templates whose workloads carry a convolution's layout, by kind."""


def _pair(v: Any) -> tuple[int, int]:
    if isinstance(v, (int,)):
        return int(v), int(v)
    v = tuple(int(x) for x in v)
    return (v[0], v[0]) if len(v) == 1 else (v[0], v[1])


def pad4(padding: Any) -> tuple[int, int, int, int]:
    """Padding as (top, left, bottom, right), from 1, 2 or 4 numbers."""
    p = (int(padding),) if isinstance(padding, int) else tuple(int(x) for x in padding)
    if len(p) == 1:
        return (p[0], p[0], p[0], p[0])
    if len(p) == 2:
        return (p[0], p[1], p[0], p[1])
    if len(p) == 4:
        return (p[0], p[1], p[2], p[3])
    raise ValueError(f"padding must have 1, 2 or 4 values, got {padding!r}")


def conv_key(kind: str, data_shape: Sequence[int], weight_shape: Sequence[int], strides: Any,
             padding: Any, dilation: Any, dtype: str) -> tuple:
    """The layout-free key of a convolution: ``kind`` ("conv" or "depthwise"), the NCHW data
    and OIHW weight shapes, strides, padding (4 values), dilation and the data dtype."""
    return (kind, tuple(int(d) for d in data_shape), tuple(int(d) for d in weight_shape),
            _pair(strides), pad4(padding), _pair(dilation), str(dtype))


def _block(layout: str) -> int | None:
    m = re.fullmatch(r"NCHW(\d+)c", str(layout))
    return int(m.group(1)) if m else None


def conv_record_layout(workload: Sequence[Any]) -> tuple[tuple, int, int] | None:
    """``(conv_key, ic_bn, oc_bn)`` of a ``conv2d_NCHWc.x86`` / ``depthwise_conv2d_NCHWc.x86``
    workload, or None for another workload."""
    kind = CONV_TASKS.get(workload[0]) if workload else None
    if kind is None or len(workload) != 9:
        return None
    _, data, kernel, strides, padding, dilation, layout, _out_layout, _ = workload
    try:
        dshape, dtype = tuple(data[1]), str(data[2])
        kshape = tuple(kernel[1])
        ib = _block(layout)
        if kind == "conv":
            oc_chunk, ic_chunk, kh, kw, ic_bn, oc_bn = kshape
            weight = (oc_chunk * oc_bn, ic_chunk * ic_bn, kh, kw)
        else:
            c_chunk, _, kh, kw, _, oc_bn = kshape
            ic_bn = oc_bn
            weight = (c_chunk * oc_bn, 1, kh, kw)
        if ib is None:
            n, c, h, w = dshape
        else:
            n, cc, h, w, b = dshape
            c = cc * b
        key = conv_key(kind, (n, c, h, w), weight, strides, padding, dilation, dtype)
    except (TypeError, ValueError, IndexError):
        return None
    return key, int(ic_bn), int(oc_bn)


class ApplyGraphBest(ApplyHistoryBest):
    """``with autotvm.apply_graph_best("graph_opt.log"):`` builds with the graph tuner's choice
    of record (hence layout) for each convolution; other workloads as ``apply_history_best``.
    ``records``: a log path or ``(MeasureInput, MeasureResult)`` pairs (the file written by
    ``write_opt_sch2record_file``). Two records for one convolution key with different blocks:
    the first is used (with a warning)."""

    def __init__(self, records: Any):
        self._layouts: dict[tuple[str, tuple], tuple[int, int]] = {}
        self._by_layout: dict[tuple, Any] = {}
        super().__init__(None)
        if records is not None:
            self.load(records)

    def load(self, records: Any) -> None:
        from .. import record

        if isinstance(records, (str, os.PathLike)):
            records = record.load_from_file(records)
        records = list(records)
        super().load(records)
        for inp, res in records:
            if res.error_no != 0:
                continue
            lay = conv_record_layout(inp.task.workload)
            if lay is None:
                continue
            key, ic_bn, oc_bn = lay
            tk = (_target_key(inp.target), key)
            old = self._layouts.get(tk)
            if old is not None and old != (ic_bn, oc_bn):
                warnings.warn(f"apply_graph_best: two layouts for convolution {key} "
                              f"({old} and {(ic_bn, oc_bn)}); using the first", stacklevel=2)
                continue
            self._layouts[tk] = (ic_bn, oc_bn)
            self._by_layout[(tk, inp.task.name, ic_bn, oc_bn)] = inp.config

    def _layout_inside(self, target: Any, key: Any) -> tuple[int, int] | None:
        return self._layouts.get((_target_key(target), key))

    def _query_inside(self, target: Any, workload: Any) -> Any:
        cfg = super()._query_inside(target, workload)
        if cfg is not None or workload is None:
            return cfg
        lay = conv_record_layout(workload)
        if lay is None:
            return None
        key, ic_bn, oc_bn = lay
        return self._by_layout.get(((_target_key(target), key), workload[0], ic_bn, oc_bn))


def apply_graph_best(records: Any) -> ApplyGraphBest:
    """TVM's ``autotvm.apply_graph_best(path)``: see :class:`ApplyGraphBest`."""
    return ApplyGraphBest(records)
