"""The layout of an x86 convolution workload: its layout-free key and channel blocks.

A ``conv2d_NCHWc.x86`` / ``depthwise_conv2d_NCHWc.x86`` workload names its layout through its
shapes (data ``NCHW`` or ``NCHW{ic_bn}c``, kernel ``OIHW{ic_bn}i{oc_bn}o`` packed as
``[O/oc_bn, I/ic_bn, KH, KW, ic_bn, oc_bn]``); :func:`conv_record_layout` recovers the
convolution (:func:`conv_key`, the same for every blocking) and the blocks, so that records of
several blockings of one convolution can be compared (``ApplyHistoryBest``,
``ApplyGraphBest``, the graph tuner).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...tir.data_layout import block_of

__all__ = ["CONV_TASKS", "conv_key", "conv_record_layout", "pad4"]


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
        ib = block_of(layout)
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
