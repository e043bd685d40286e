"""Injective schedules on GPU: all axes of an output fused, split by the target's
``max_num_threads`` and bound to ``blockIdx.x`` / ``threadIdx.x`` (injective producers
inlined, so a fused elementwise chain is one kernel)."""

from __future__ import annotations

from typing import Any

from ... import te
from ...target import Target
from ..generic import as_outs, inline_injective

__all__ = ["schedule_injective", "schedule_elemwise", "schedule_broadcast", "bind_flat",
           "bind_nd", "num_threads"]


def num_threads(target: Any = None, extent: int | None = None) -> int:
    """Threads per block: the target's ``max_num_threads`` (256 when unknown), no more than
    the next power of two of ``extent``."""
    tgt = target if target is not None else Target.current()
    n = int(getattr(tgt, "max_num_threads", 0) or 256)
    if extent is not None:
        n = min(n, 1 << max(0, (int(extent) - 1).bit_length()))
    return max(n, 1)


def _extent(axis: Any) -> int | None:
    e = getattr(axis.dom.extent, "value", axis.dom.extent)
    return int(e) if isinstance(e, int) else None


def bind_flat(s: Any, op: Any, target: Any = None) -> tuple[Any, Any]:
    """Fuse all spatial axes of ``op``'s stage, split by the thread count and bind; returns
    ``(block_axis, thread_axis)``. A 0-d stage gets one block of one thread."""
    stage = s[op]
    axes = list(op.axis)
    if not axes:  # a scalar: nothing to fuse, a 1-iteration loop to bind
        return None, None
    total = 1
    for a in axes:
        e = _extent(a)
        total = total * e if (e is not None and total is not None) else None
    fused = stage.fuse(*axes) if len(axes) > 1 else axes[0]
    bx, tx = stage.split(fused, factor=num_threads(target, total))
    stage.bind(bx, te.thread_axis("blockIdx.x"))
    stage.bind(tx, te.thread_axis("threadIdx.x"))
    return bx, tx


def bind_nd(s: Any, op: Any, target: Any = None) -> Any:
    """Bind ``op``'s axes without fusing the thread-level ones: the last axis split over
    threadIdx.x, the one before over threadIdx.y (the block's remaining threads), the outer
    parts over blockIdx.x/y/z (the outermost fused when more than three). Returns the innermost
    thread axis: a producer computed there covers one output element (bound inference does
    not see through a fused thread axis). None for a 0-d stage."""
    stage = s[op]
    axes = list(op.axis)
    if not axes:
        return None
    nt = num_threads(target)
    w = axes[-1]
    tw = num_threads(target, _extent(w) or nt)
    wo, wi = stage.split(w, factor=tw)
    outer, inner = [*axes[:-1]], [wi]
    if len(axes) >= 2 and nt // tw > 1:
        h = axes[-2]
        th = min(nt // tw, num_threads(target, _extent(h) or nt))
        ho, hi = stage.split(h, factor=th)
        outer = [*axes[:-2], ho, wo]
        inner = [hi, wi]
    else:
        outer = [*axes[:-1], wo]
    stage.reorder(*outer, *inner)
    if len(outer) > 3:
        first = stage.fuse(*outer[:len(outer) - 2])
        outer = [first, *outer[len(outer) - 2:]]
    for ax, tag in zip(reversed(outer), ("blockIdx.x", "blockIdx.y", "blockIdx.z")):
        stage.bind(ax, te.thread_axis(tag))
    for ax, tag in zip(reversed(inner), ("threadIdx.x", "threadIdx.y")):
        stage.bind(ax, te.thread_axis(tag))
    return wi


def schedule_injective(outs: Any, target: Any = None) -> Any:
    """Every output one kernel: fused axes bound to blocks x threads."""
    outs = as_outs(outs)
    s = te.create_schedule([t.op for t in outs])
    inline_injective(s, outs)
    for t in outs:
        if isinstance(t.op, te.ComputeOp):
            bind_flat(s, t.op, target)
    return s


schedule_elemwise = schedule_injective
schedule_broadcast = schedule_injective
