"""x86 schedule of reductions (sum, max, argmax, ... and what is fused around them).

Injective producers are inlined into the reduction. A reduction stage runs its output
(data-parallel) loops in parallel. When the innermost reduced axis is the input's innermost
(contiguous) axis, it is split by the vector lanes and rfactored: local vectors of partial
results (several independent ones when the axis is long enough: ``pooling.accumulators``)
accumulate contiguous vector loads, and are reduced once per output element. When the
reduced axes are not the innermost axis of the input (e.g. a sum over axis 0 of an (N, C) tensor) the innermost output axis is contiguous in
the input, so it is split by the vector lanes (narrower than the lanes: all of it) and moved
inside the reduction loops and vectorized: each step adds a vector of inputs into a vector of accumulators. Injective stages
after the reduction (the division of ``mean``, ``argmax``'s index extraction) get the injective
schedule.
"""

from __future__ import annotations

from typing import Any

from ... import te
from ...tir.expr import IntImm, ProducerLoad, Var
from ...tir.functor import post_order_visit
from .. import tag
from ..generic import as_outs
from .injective import (
    _num_cores,
    schedule_injective_from_existing,
    vector_lanes,
)
from .pooling import accumulators

__all__ = ["schedule_reduce"]

# Reductions run in parallel from this much work (output x reduced elements): the injective
# threshold before it was lowered (injective.PARALLEL_MIN_ELEMENTS), kept until a reduction is
# measured against it.
PARALLEL_MIN_ELEMENTS = 1 << 18


def _innermost_is_data(op: te.ComputeOp) -> bool:
    """True when every tensor read has the innermost data axis as its last index."""
    return _last_index_is(op, op.axis[-1].var)


def _last_index_is(op: te.ComputeOp, last: Var) -> bool:
    """True when every tensor read in ``op`` has ``last`` as its last index."""
    ok = [True]
    seen = [False]

    def f(n: Any) -> None:
        if isinstance(n, ProducerLoad):
            seen[0] = True
            idx = n.indices[-1] if n.indices else None
            if not (isinstance(idx, Var) and idx is last):
                ok[0] = False

    for b in op.body:
        post_order_visit(b, f)
    return ok[0] and seen[0]


def _rfactor_innermost(s: Any, t: te.Tensor, par: bool) -> bool:
    """Vectorize a reduction over the input's innermost (contiguous) axis: split it by the
    lanes and rfactor the lanes into a local vector of partial results, which the stage then
    reduces. Returns False (nothing done) when the pattern does not apply."""
    op = t.op
    lanes = vector_lanes(t.dtype)
    kr = op.reduce_axis[-1]
    ext = kr.dom.extent
    if (op.num_outputs != 1 or lanes <= 1 or not isinstance(ext, IntImm)
            or ext.value < 2 * lanes or not _last_index_is(op, kr.var)):
        return False
    st = s[t.op]
    ko, ki = st.split(kr, lanes)
    k = accumulators(ext.value // lanes)
    if k > 1:
        st.split(ko, factor=k)
    rf = s.rfactor(t, ki, factor_axis=len(op.axis))
    stages = [rf]
    if k > 1:
        # k independent vector accumulators, then the k vectors into one (then its lanes)
        acc = s.rfactor(rf, s[rf].op.reduce_axis[-1], factor_axis=len(rf.shape) - 1)
        s[acc].set_scope("local")
        *_, ak, al = s[acc].op.axis
        s[acc].reorder(*s[acc].op.reduce_axis, ak, al)
        s[acc].unroll(ak)
        s[acc].vectorize(al)
        stages.append(acc)
    s[rf].set_scope("local")
    rf_axes = s[rf].op.axis
    s[rf].reorder(*s[rf].op.reduce_axis, rf_axes[-1])
    s[rf].vectorize(rf_axes[-1])
    axes = list(s[t.op].op.axis)
    if axes:
        fused = st.fuse(*axes) if len(axes) > 1 else axes[0]
        for stage in stages:
            s[stage].compute_at(st, fused)
        if par:
            st.parallel(fused)
    return True


def _schedule_reduce_stage(s: Any, t: te.Tensor) -> None:
    st = s[t.op]
    op = t.op
    axes = list(op.axis)
    work = 1
    for iv in list(op.axis) + list(op.reduce_axis):
        e = iv.dom.extent
        work = work * int(e.value) if isinstance(e, IntImm) else PARALLEL_MIN_ELEMENTS
    par = work >= PARALLEL_MIN_ELEMENTS and _num_cores() > 1
    if _rfactor_innermost(s, t, par) or not axes:
        return
    lanes = vector_lanes(t.dtype)
    last = axes[-1].dom.extent
    if (op.num_outputs == 1 and lanes > 1 and isinstance(last, IntImm) and last.value >= 2
            and _innermost_is_data(op)):
        if last.value < lanes and NARROW_KEPT_AXIS:
            _narrow_inner(s, t, par)
            return
        if last.value < lanes:  # (the schedule before: a scalar loop per output)
            fused = st.fuse(*axes) if len(axes) > 1 else axes[0]
            if par:
                st.parallel(fused)
            return
        outer, inner = st.split(axes[-1], lanes)
        fused = st.fuse(*axes[:-1], outer) if len(axes) > 1 else outer
        st.reorder(fused, *op.reduce_axis, inner)
        st.vectorize(inner)
    else:
        fused = st.fuse(*axes) if len(axes) > 1 else axes[0]
    if par:
        st.parallel(fused)


# a kept innermost axis narrower than the vector lanes: one partial vector (False: a scalar
# loop per output, as before; for comparisons)
NARROW_KEPT_AXIS = True


def _narrow_inner(s: Any, t: te.Tensor, par: bool) -> None:
    """A kept innermost axis narrower than the vector (a max over axes (0, 1) of (3, 517, 7)):
    all of it one partial vector, accumulated in a local buffer (a register) inside the
    reduction loops, then copied out: accumulating in the output itself would be a masked
    load and store per step, which LLVM cannot keep in a register."""
    cc = s.cache_write(t, "local")
    out_axes = list(s[t.op].op.axis)
    fused = s[t.op].fuse(*out_axes[:-1]) if len(out_axes) > 1 else None
    s[t.op].vectorize(out_axes[-1])
    if fused is not None:
        s[cc].compute_at(s[t.op], fused)
        if par:
            s[t.op].parallel(fused)
    cc_axes = list(s[cc].op.axis)
    s[cc].reorder(*s[cc].op.reduce_axis, cc_axes[-1])
    s[cc].vectorize(cc_axes[-1])


def schedule_reduce(outs: Any) -> Any:
    """Schedule of reduction outputs for x86 (see the module docstring)."""
    outs = as_outs(outs)
    s = te.create_schedule([t.op for t in outs])
    out_ops = {id(t.op) for t in outs}
    seen: set[int] = set()
    stack = [t.op for t in outs]
    while stack:
        op = stack.pop()
        if id(op) in seen or not isinstance(op, te.ComputeOp):
            continue
        seen.add(id(op))
        if op.reduce_axis:
            _schedule_reduce_stage(s, op.output(0))
        elif id(op) in out_ops:
            schedule_injective_from_existing(s, op.output(0))
        elif tag.is_injective(op.tag):
            s[op].compute_inline()
        stack.extend(x.op for x in op.input_tensors)
    return s
