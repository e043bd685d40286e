"""GPU schedules of reductions, softmax, layer_norm and pooling.

A reduction over a long extent is a cross-thread reduction: one block per output row, the
reduced axes fused, split by the thread count and bound to ``threadIdx.x`` (the lowering's
tree in shared memory, or warp shuffles on CUDA). Softmax and layer_norm are one kernel per
row: their statistics (max, sum; mean, variance) are such reductions computed at the row's
block, and the row's outputs are spread over the same threads. Short reductions (pooling
windows, a few channels) are one thread per output (``fallback``)."""

from __future__ import annotations

from typing import Any

from ... import te
from ..generic import as_outs, inline_injective
from .fallback import _inlined, schedule_fallback, stages
from .injective import bind_flat, num_threads

__all__ = ["schedule_reduce", "schedule_softmax", "schedule_layer_norm", "schedule_pool",
           "CROSS_THREAD_MIN"]

# a reduced extent at least this long is reduced across the threads of a block
CROSS_THREAD_MIN = 32


class _NoRowAnchor(ValueError):
    """The fused group has no softmax / layer_norm output of the output's shape: the row
    schedule does not apply (any other error of the row schedule is a bug, and propagates)."""


def _extent(ivs: list) -> int | None:
    n = 1
    for iv in ivs:
        e = getattr(iv.dom.extent, "value", iv.dom.extent)
        if not isinstance(e, int):
            return None
        n *= e
    return n


def multi_value(op: Any) -> bool:
    """A reduction with a tuple combiner (argmin/argmax: value and index): it is reduced across
    threads like a single value (LowerThreadAllreduce carries each value of the tuple) but is
    computed at the root, its outputs read by a separate stage."""
    return int(getattr(op, "num_outputs", 1)) > 1


def _cross_thread(s: Any, red: Any, target: Any) -> None:
    """``red`` at the root: one block per output element, its reduced axes (fused) split over
    the threads of the block (a cross-thread reduction), a tuple reduction too."""
    ext = _extent(list(red.reduce_axis)) or 1
    stage = s[red]
    if red.axis:
        bx = stage.fuse(*red.axis) if len(red.axis) > 1 else red.axis[0]
        stage.bind(bx, te.thread_axis("blockIdx.x"))
    rs = list(red.reduce_axis)
    k = stage.fuse(*rs) if len(rs) > 1 else rs[0]
    ko, ki = stage.split(k, factor=num_threads(target, ext))
    if not red.axis:  # a full reduction: one block, the serial loop inside each thread
        stage.reorder(ki, ko)
    stage.bind(ki, te.thread_axis("threadIdx.x"))


def _rows(s: Any, out: Any, row_axes: list[int], reds: list, target: Any) -> Any:
    """One block per row of ``out`` (its axes but ``row_axes``): the reductions ``reds``
    computed at the row's block (shared memory) with their reduced axes across the threads,
    then ``out``'s row over the same threads (TVM's softmax / layer_norm form)."""
    live = [op for op in stages([out.output(0)]) if op is not out and not _inlined(s, op)]
    for op in live:  # an intermediate elementwise stage (softmax's exp): recomputed where read
        if not op.reduce_axis and op not in reds:
            s[op].compute_inline()
    keep = [a for i, a in enumerate(out.axis) if i not in row_axes]
    row = [out.axis[i] for i in row_axes]
    if not keep or not row:  # no rows to spread over blocks: a kernel per statistic
        for red in reds:
            _cross_thread(s, red, target)
        if out not in reds:
            bind_flat(s, out, target)
        return s
    ext = min(_extent(list(r.reduce_axis)) or 1 for r in reds)
    nt = num_threads(target, ext)
    tx = te.thread_axis("threadIdx.x")
    stage = s[out]
    stage.reorder(*keep, *row)
    bx = stage.fuse(*keep) if len(keep) > 1 else keep[0]
    stage.bind(bx, te.thread_axis("blockIdx.x"))
    r = stage.fuse(*row) if len(row) > 1 else row[0]
    _, ri = stage.split(r, factor=nt)
    stage.bind(ri, tx)
    for red in reds:
        s[red].compute_at(stage, bx)
        rs = list(red.reduce_axis)
        k = s[red].fuse(*rs) if len(rs) > 1 else rs[0]
        _, ki = s[red].split(k, factor=nt)
        s[red].bind(ki, tx)
    return s


def schedule_reduce(outs: Any, target: Any = None) -> Any:
    """A reduction (+ fused elementwise consumers): cross-thread when the reduced extent is at
    least ``CROSS_THREAD_MIN``, else one thread per output."""
    outs = as_outs(outs)
    if len(outs) != 1:
        return schedule_fallback(outs, target)
    s = te.create_schedule([outs[0].op])
    inline_injective(s, outs)
    out = outs[0].op
    live = [op for op in stages(outs) if op is out or not _inlined(s, op)]
    reds = [op for op in live if op.reduce_axis]
    others = [op for op in live if not op.reduce_axis and op is not out]
    scalar = not reds or not reds[0].axis  # 0-d: the reduce loop must be bound to threads
    if (len(reds) != 1 or others or not _same(reds[0], out)
            or ((_extent(list(reds[0].reduce_axis)) or 0) < CROSS_THREAD_MIN and not scalar)):
        return schedule_fallback(outs, target)
    red = reds[0]
    if out is red or not out.axis or multi_value(red):
        _cross_thread(s, red, target)
        if out is not red:
            bind_flat(s, out, target)
        return s
    # red + elementwise (mean = sum / n): one block per output element, the reduction in
    # shared memory at the block across its threads, the elementwise store after it
    stage = s[out]
    bx = stage.fuse(*out.axis) if len(out.axis) > 1 else out.axis[0]
    stage.bind(bx, te.thread_axis("blockIdx.x"))
    s[red].compute_at(stage, bx)
    rs = list(red.reduce_axis)
    k = s[red].fuse(*rs) if len(rs) > 1 else rs[0]
    _, ki = s[red].split(k, factor=num_threads(target, _extent(rs) or 1))
    s[red].bind(ki, te.thread_axis("threadIdx.x"))
    return s


def _same(a: Any, b: Any) -> bool:
    sa = [getattr(d, "value", d) for d in a.output(0).shape]
    sb = [getattr(d, "value", d) for d in b.output(0).shape]
    return sa == sb


def _row_schedule(outs: Any, target: Any, row_axes: Any) -> Any:
    outs = as_outs(outs)
    out = outs[0].op
    s = te.create_schedule([out])
    inline_injective(s, outs)
    reds = [op for op in stages(outs) if op.reduce_axis and op is not out]
    ext = min((_extent(list(r.reduce_axis)) or 0) for r in reds) if reds else 0
    if (len(outs) != 1 or not reds or ext < CROSS_THREAD_MIN or out.reduce_axis
            or any(multi_value(r) for r in reds)):
        return schedule_fallback(outs, target)
    return _rows(s, out, row_axes(out), reds, target)


def _anchor(out: Any, tags: tuple[str, ...]) -> Any:
    for op in stages([out.output(0)]):
        if op.tag in tags:
            return op
    return None


def schedule_softmax(outs: Any, target: Any = None) -> Any:
    """softmax / log_softmax: one block per row (the softmax axis across the threads)."""
    def row_axes(out: Any) -> list[int]:
        a = _anchor(out, ("softmax_output", "log_softmax_output"))
        if a is None or len(a.axis) != len(out.axis):
            raise _NoRowAnchor("schedule_softmax: no softmax output of the fused shape")
        return [int(a.attrs["axis"])]

    outs = as_outs(outs)
    try:
        return _row_schedule(outs, target, row_axes)
    except _NoRowAnchor:
        return schedule_fallback(outs, target)


def schedule_layer_norm(outs: Any, target: Any = None) -> Any:
    """layer_norm: one block per normalized row (mean and variance across the threads)."""
    def row_axes(out: Any) -> list[int]:
        a = _anchor(out, ("layer_norm",))
        if a is None or len(a.axis) != len(out.axis):
            raise _NoRowAnchor("schedule_layer_norm: no layer_norm output of the fused shape")
        return [int(x) for x in a.attrs["axes"]]

    outs = as_outs(outs)
    try:
        return _row_schedule(outs, target, row_axes)
    except _NoRowAnchor:
        return schedule_fallback(outs, target)


def schedule_pool(outs: Any, target: Any = None) -> Any:
    """Pooling: windows are short, one thread per output (global pooling: ``schedule_reduce``,
    cross-thread over a large image)."""
    return schedule_reduce(outs, target)
