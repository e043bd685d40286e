"""``Schedule.rfactor``: factor a reduction over one of its reduction loops (TVM's rfactor).

Given a reduction stage ``B`` and one of its reduction *leaf* loops ``k`` (typically after a
split: ``ko, ki = s[B].split(k, 16)``), a new stage ``B.rf`` computes a partial result for every
value of ``k``: its axes are B's axes with a data-parallel axis for ``k`` inserted at position
``factor_axis``, and it reduces over B's other reduction loops. B's stage then reduces ``B.rf``
over the new axis. The partial results are independent, so the rf axis can be vectorized or
parallelized. Works for any commutative reducer, including tuple reducers (argmax).
"""

from __future__ import annotations

from typing import Any

from ..arith import simplify
from ..tir import expr as E
from ..tir.expr import IterVar, Range, Var, is_const_int
from ..tir.functor import substitute
from ..tir.op import likely
from .bound import pass_down_domain, pass_up_bound_check, pass_up_index
from .schedule import Fuse, Schedule, Split, Stage
from .tensor import ComputeOp, Reduce, Tensor

__all__ = ["rfactor"]


def _touched(st: Stage, axis: IterVar) -> set[int]:
    """IterVars connected to ``axis`` through the stage's relations (ids)."""
    touched = {id(axis)}
    changed = True
    while changed:
        changed = False
        for rel in st.relations:
            if isinstance(rel, Split):
                if id(rel.parent) in touched:
                    new = {id(rel.outer), id(rel.inner)}
                elif id(rel.outer) in touched or id(rel.inner) in touched:
                    new = {id(rel.parent)} | {id(rel.outer), id(rel.inner)}
                else:
                    continue
            else:
                group = [rel.outer, rel.inner, rel.fused]
                if any(id(x) in touched for x in group):
                    new = {id(x) for x in group}
                else:
                    continue
            if not new <= touched:
                touched |= new
                changed = True
    return touched


def rfactor(sch: Schedule, tensor: Tensor, axis: IterVar, factor_axis: int = 0) -> Any:
    if not isinstance(tensor, Tensor):
        raise TypeError(f"rfactor: expected a Tensor, got {type(tensor).__name__}")
    st = sch[tensor]
    op = st.op
    if not isinstance(op, ComputeOp) or not op.reduce_axis:
        raise ValueError(f"rfactor: {op.name} is not a reduction")
    if not isinstance(axis, IterVar):
        raise TypeError(f"rfactor: axis must be an IterVar, got {type(axis).__name__}")
    st._leaf_index(axis, "rfactor")
    if axis.iter_type != IterVar.CommReduce:
        raise ValueError(f"rfactor: {axis.var.name} is not a reduction axis of {op.name}")
    sch._check_nothing_attached(st, "rfactor")
    touched = _touched(st, axis)
    for iv in op.axis:
        if id(iv) in touched:
            raise ValueError(f"rfactor: axis {axis.var.name} is fused with the data-parallel axis {iv.var.name}")
    # ranges of the touched reduction IterVars, and their values in terms of the touched leaves
    ranges: dict[IterVar, Range] = {iv: iv.known_dom for iv in op.reduce_axis if id(iv) in touched}
    sub_rels = [r for r in st.relations
                if id(r.parent if isinstance(r, Split) else r.fused) in touched]
    tmp = _RelView(sub_rels, [lv for lv in st.leaf_iter_vars if id(lv) in touched])
    pass_down_domain(tmp, ranges)
    values: dict[IterVar, E.PrimExpr] = {}
    for lv in tmp.leaf_iter_vars:
        r = ranges[lv]
        values[lv] = r.min if is_const_int(r.extent, 1) else lv.var
    pass_up_index(tmp, ranges, values)
    preds = []
    state = pass_up_bound_check(tmp, ranges)
    for iv, need in state.items():
        if need and iv in values and iv in ranges:
            r = ranges[iv]
            preds.append(values[iv] < simplify(r.min + r.extent))

    nout = len(op.axis)
    pos = factor_axis if factor_axis >= 0 else nout + 1 + factor_axis
    if not 0 <= pos <= nout:
        raise ValueError(f"rfactor: factor_axis must be in [{-nout - 1}, {nout}], got {factor_axis}")
    ar = ranges[axis]
    if not is_const_int(ar.min, 0):
        raise ValueError("rfactor: can only factor a reduction domain starting at 0")

    # the rf op: fresh axes (B's axes + the rf axis), reduction over the other touched leaves
    vsub: dict[Var, Any] = {}
    rf_axis = []
    for iv in op.axis:
        nv = IterVar(iv.dom, Var(iv.var.name, iv.var.dtype), IterVar.DataPar)
        vsub[iv.var] = nv.var
        rf_axis.append(nv)
    new_k = IterVar(Range.from_min_extent(ar.min, ar.extent), Var(axis.var.name, axis.var.dtype), IterVar.DataPar)
    rf_axis.insert(pos, new_k)
    leaf_sub: dict[Var, Any] = {axis.var: new_k.var}
    rf_reduce = [iv for iv in op.reduce_axis if id(iv) not in touched]
    for lv in tmp.leaf_iter_vars:
        if lv is axis:
            continue
        nv = IterVar(ranges[lv], Var(lv.var.name, lv.var.dtype), IterVar.CommReduce)
        leaf_sub[lv.var] = nv.var
        rf_reduce.append(nv)
    for iv in op.reduce_axis:
        if id(iv) in touched:
            vsub[iv.var] = substitute(values[iv], leaf_sub)
    r0 = op.body[0]
    assert isinstance(r0, Reduce)  # a compute with reduce_axis has a Reduce body
    cond = r0.condition
    if preds:
        p = preds[0]
        for q in preds[1:]:
            p = E.And(p, q)
        cond = likely(p if isinstance(cond, E.IntImm) and cond.value else E.And(p, cond))
    cond = substitute(cond, {**vsub, **leaf_sub})
    source = tuple(substitute(s, vsub) for s in r0.source)
    if not rf_reduce:
        # every reduction loop was factored: the rf stage is a plain copy of the source
        body = list(source)
        if not (isinstance(cond, E.IntImm) and cond.value):
            ident = r0.combiner.identity_element
            from ..tir.op import if_then_else

            body = [if_then_else(cond, s, i) for s, i in zip(source, ident)]
    else:
        body = [Reduce(r0.combiner, source, rf_reduce, cond, k) for k in range(len(op.body))]
    rf_op = ComputeOp(f"{op.name}.rf", op.tag, op.attrs, rf_axis, body)

    # the replacement of B: reduce rf over the rf axis
    rk = IterVar(Range.from_min_extent(ar.min, ar.extent), Var(axis.var.name + ".v", axis.var.dtype),
                 IterVar.CommReduce)
    repl_axis = [IterVar(iv.dom, Var(iv.var.name, iv.var.dtype), IterVar.DataPar) for iv in op.axis]
    idx: list[Any] = [iv.var for iv in repl_axis]
    idx.insert(pos, rk.var)
    loads = tuple(E.ProducerLoad(rf_op.output(k), idx) for k in range(rf_op.num_outputs))
    init = tuple(substitute(i, {a.var: b.var for a, b in zip(op.axis, repl_axis)}) for i in r0.init)
    repl_body = [Reduce(r0.combiner, loads, [rk], E.const(True), k, init) for k in range(len(op.body))]
    repl_op = ComputeOp(op.name, op.tag, op.attrs, repl_axis, repl_body)

    vmap = {(id(op), k): repl_op.output(k) for k in range(op.num_outputs)}
    sch._set_op(st, repl_op)
    st._reset_iter_vars()
    sch._replace_dataflow(vmap, skip=[st])
    rf_stage = Stage(rf_op, sch)
    sch._insert(sch.stages.index(st), rf_stage)
    outs = [rf_op.output(k) for k in range(rf_op.num_outputs)]
    return outs if len(outs) > 1 else outs[0]


class _RelView:
    """The part of a stage's relations that involves the factored axis (duck-types Stage)."""

    def __init__(self, relations: list[Split | Fuse], leaves: list[IterVar]):
        self.relations = relations
        self.leaf_iter_vars = leaves
