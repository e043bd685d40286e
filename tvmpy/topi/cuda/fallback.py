"""The plain GPU schedule of any operator graph: injective producers inlined; every other
stage one thread per output element (spatial axes fused, split by the thread count, bound),
its reduction loops serial in the thread. A reduction whose only consumer is an elementwise
output of the same shape (conv2d + bias + relu) is computed per thread inside the output's
kernel (a local accumulator); other non-inlined stages are kernels of their own with global
intermediates. Correct for every operator; the tuned templates replace it where they exist."""

from __future__ import annotations

from typing import Any

from ... import te
from ..generic import as_outs, inline_injective
from .injective import bind_flat, bind_nd

__all__ = ["schedule_fallback", "stages", "same_shape"]


def stages(outs: list) -> list:
    """The compute ops reachable from ``outs`` (outputs first, then producers)."""
    order, seen, stack = [], set(), [t.op for t in outs]
    while stack:
        op = stack.pop(0)
        if id(op) in seen:
            continue
        seen.add(id(op))
        if isinstance(op, te.ComputeOp):
            order.append(op)
        stack.extend(t.op for t in op.input_tensors)
    return order


def same_shape(a: Any, b: Any) -> bool:
    sa = [getattr(d, "value", d) for d in a.output(0).shape]
    sb = [getattr(d, "value", d) for d in b.output(0).shape]
    return len(sa) == len(sb) and all(isinstance(x, int) and x == y for x, y in zip(sa, sb))


def _consumers(s: Any, ops: list) -> dict[int, list]:
    """Producer op id -> the stages of ``ops`` that read it, looking through inlined stages
    (conv2d -> [add, inlined] -> relu: relu reads conv2d)."""
    cons: dict[int, list] = {}
    for op in ops:
        stack, seen = list(op.input_tensors), set()
        while stack:
            t = stack.pop()
            if id(t.op) in seen:
                continue
            seen.add(id(t.op))
            if isinstance(t.op, te.ComputeOp) and _inlined(s, t.op):
                stack.extend(t.op.input_tensors)
            elif op not in cons.setdefault(id(t.op), []):
                cons[id(t.op)].append(op)
    return cons


def schedule_fallback(outs: Any, target: Any = None) -> Any:
    """One thread per output element for every stage (see the module docstring)."""
    outs = as_outs(outs)
    s = te.create_schedule([t.op for t in outs])
    inline_injective(s, outs)
    ops = stages(outs)
    out_ops = {id(t.op) for t in outs}
    live = [op for op in ops if id(op) in out_ops or not _inlined(s, op)]
    cons = _consumers(s, live)
    attached: set[int] = set()
    if len(outs) == 1:
        out = outs[0].op
        for op in live:
            users = cons.get(id(op), [])
            if (id(op) not in out_ops and op.reduce_axis and len(users) == 1
                    and users[0] is out and same_shape(op, out) and not out.reduce_axis):
                attached.add(id(op))
    threads: dict[int, Any] = {}
    out0 = outs[0].op
    if (len(outs) == 1 and out0.reduce_axis and out0.axis and not attached
            and int(getattr(out0, "num_outputs", 1)) == 1
            and len(out0.output(0).shape) == len(out0.axis)):
        # a reduction output (conv2d alone, pooling): accumulate in a local, store once
        local = s.cache_write(outs[0], "local")
        s[local].compute_at(s[out0], bind_nd(s, out0, target))
        threads[id(out0)] = None
    if attached:  # the output's threads one element each: the reduction computed per thread
        threads[id(outs[0].op)] = bind_nd(s, outs[0].op, target)
    for op in live:
        if id(op) in attached or id(op) in threads:
            continue
        if not op.axis and op.reduce_axis:  # 0-d reduction: across the threads of one block
            from .reduction import _cross_thread

            _cross_thread(s, op, target)
            continue
        threads[id(op)] = bind_flat(s, op, target)[1]
    for op in live:
        if id(op) in attached:
            tx = threads.get(id(outs[0].op))
            if tx is None:
                bind_flat(s, op, target)
            else:
                s[op].compute_at(s[outs[0].op], tx)
    return s


def _inlined(s: Any, op: Any) -> bool:
    return bool(getattr(s[op], "attach_type", None) == "inline"
                or getattr(s[op], "is_inlined", False))
