"""Bound inference (TVM's InferBound): the range of every loop of every stage.

Stages are visited consumers first. A stage's root axes cover the union of the regions its
consumers read; a consumer's loops that enclose the stage's attach point (``compute_at``) stay
symbolic (the stage is recomputed for each of their values), the consumer's other loops are
relaxed to their full ranges. Ranges then flow down the stage's split/fuse relations to its
leaf loops. Outputs (and root stages bound to function arguments) cover their whole shape.

The graph the bounds are inferred on is a :class:`ScheduleView`: the schedule with inlined
stages substituted into their consumers (the schedule object itself is never mutated).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from ..arith import IntervalSet, eval_set, simplify
from ..ir.node import HashMemo, structural_equal, structural_hash
from ..tir import expr as E
from ..tir.expr import IterVar, PrimExpr, Range, is_const_int
from ..tir.functor import Visitor, collect_vars, substitute, uses_var
from .inline import InlineScope
from .inline_budget import materialize_blowups
from .scan import ScanOp
from .schedule import INLINE, SCOPE, Fuse, Schedule, Split, Stage, post_order, rewrite_bodies
from .tensor import ComputeOp, ExternOp, Reduce, Tensor

__all__ = ["ScheduleView", "infer_bound", "Bounds", "pass_up_index", "pass_up_bound_check", "is_zero_extent",
           "pass_down_domain", "Interval", "Relations"]

# Inclusive symbolic bounds ``(lo, hi)``: bound inference keeps loop variables of enclosing
# (compute_at) loops as symbols, so its intervals are pairs of expressions, never infinite.
Interval = tuple[PrimExpr, PrimExpr]


class Relations(Protocol):
    """What the relation passes read of a stage: a Stage, or rfactor's view of part of one."""

    @property
    def relations(self) -> Sequence[Split | Fuse]: ...

    @property
    def leaf_iter_vars(self) -> Sequence[IterVar]: ...


def _index_simplifier(op: ComputeOp) -> Any:
    """Simplifies an index of ``op``'s body under the ranges of its axes (see InlineScope)."""
    from ..arith.analyzer import Analyzer

    an: Analyzer | None = None

    def simplify_index(e: PrimExpr) -> PrimExpr:
        nonlocal an
        if an is None:
            an = Analyzer()
            for iv in (*op.axis, *op.reduce_axis):
                an.bind(iv.var, iv.dom)
        return an.simplify(e)

    return simplify_index


def _ceildiv(a: PrimExpr, b: PrimExpr) -> PrimExpr:
    return simplify((a + b - 1) // b)


class ScheduleView:
    """The schedule as lowering sees it: stages in topological order (producers first), each
    compute stage's body with inlined stages substituted, and who reads whom."""

    def __init__(self, sch: Schedule):
        self.sch = sch
        self._by_op: dict[int, Stage] = {}
        for st in sch.stages:
            self._by_op[id(st.op)] = st
            self._by_op.setdefault(id(st.origin_op), st)
        for op, st in sch.stage_map.items():
            self._by_op.setdefault(id(op), st)
        self.order = self._topo(sch)
        # inlined stages whose copies would multiply are computed into buffers instead
        materialize_blowups(sch, self.order, self.stage_of)
        # bodies of the computed (not inlined) stages, inlined stages substituted
        self.bodies: dict[Stage, list[PrimExpr]] = {}
        inl = InlineScope(self._inlined)
        for st in self.order:
            if isinstance(st.op, ComputeOp) and st.attach_type != INLINE:
                inl.simplify_index = _index_simplifier(st.op)
                self.bodies[st] = rewrite_bodies(st.op.body, inl.rewrite)
        # reads[c] = ProducerLoads of non-inlined stages in c's effective body
        self.reads: dict[Stage, list[E.ProducerLoad]] = {}
        self.consumers: dict[Stage, list[Stage]] = {st: [] for st in self.order}
        # the stages of each scan's update -> the scan (they run inside its loop)
        self.scan_of: dict[int, Stage] = {}
        for st in self.order:
            if isinstance(st.op, ScanOp):
                for b in sch.scan_body(st):
                    self.scan_of[id(b)] = st
        for st in self.order:
            if isinstance(st.op, (ExternOp, ScanOp)):  # reads each input whole / one step
                for t in st.op.input_tensors:
                    p = self.stage_of(t)
                    if st not in self.consumers[p]:
                        self.consumers[p].append(st)
                continue
            if st.attach_type == INLINE or st not in self.bodies:
                continue
            loads = _collect_loads(self.bodies[st])
            self.reads[st] = loads
            seen: set[int] = set()
            for ld in loads:
                p = self.stage_of(ld.producer)
                if id(p) not in seen:
                    seen.add(id(p))
                    self.consumers[p].append(st)

        self._check_scans()

    def _check_scans(self) -> None:
        """A scan's update runs inside its loop; nothing outside the update reads its state."""
        states: dict[int, tuple[Stage, ScanOp]] = {}
        for sc in self.order:
            if isinstance(sc.op, ScanOp):
                for t in sc.op.state_placeholder:
                    states[id(t.op)] = (sc, sc.op)
        for st in self.order:
            for t in st.op.input_tensors:
                owner = states.get(id(t.op))
                if owner is not None and self.scan_of.get(id(st)) is not owner[0] \
                        and not isinstance(st.op, ScanOp):
                    raise ValueError(
                        f"stage {st.op.name} reads {t.name}, the state of scan {owner[1].name}, "
                        f"but does not feed the scan's update {[u.name for u in owner[1].update]}: "
                        "only the update reads the state (read the scan's output instead)")
            scan = self.scan_of.get(id(st))
            if scan is None or st.attach_type == INLINE or st is scan:
                continue
            if not any(a is scan for a, _ in self.enclosing(st)):
                raise ValueError(
                    f"stage {st.op.name} is part of the update of scan {scan.op.name} but is "
                    "computed outside the scan's loop; compute it at "
                    f"s[{scan.op.name}]'s scan_axis or inside another stage of the update")

    def _inlined(self, t: Tensor) -> tuple[int, list[E.Var], PrimExpr] | None:
        st = self.stage_of(t)
        if st.attach_type != INLINE:
            return None
        assert isinstance(st.op, ComputeOp)  # compute_inline checks it
        return id(st), [iv.var for iv in st.op.axis], st.op.body[t.value_index]

    def stage_of(self, t: Tensor) -> Stage:
        st = self._by_op.get(id(t.op))
        if st is None:
            raise ValueError(f"tensor {t.name} is read but is not part of the schedule")
        return st

    def _topo(self, sch: Schedule) -> list[Stage]:
        rank = {id(st): k for k, st in enumerate(sch.stages)}
        outputs = sorted((s for s in sch.stages if s.is_output), key=lambda s: rank[id(s)])
        return post_order(outputs, self._inputs)

    def _inputs(self, st: Stage) -> list[Stage]:
        out, seen = [], set()
        for t in st.op.input_tensors:
            p = self.stage_of(t)
            if id(p) not in seen:
                seen.add(id(p))
                out.append(p)
        return out

    # ---- attachment structure ----------------------------------------------------------------
    def attach_point(self, st: Stage) -> tuple[Stage, IterVar] | None:
        """Where ``st`` is computed: (stage, leaf IterVar), or None for the root.

        A stage attached to a stage that was later inlined is computed at the root (the inlined
        stage has no loops). An attach axis that was later split or fused resolves to the leaf
        derived from it (split -> inner, fuse -> fused): one iteration of the original axis is
        then one iteration of that leaf.
        """
        # "the root" of a stage of a scan's update is the scan's loop
        sc = self.scan_of.get(id(st))
        root = None if sc is None or st.attach_type == INLINE else (sc, _scan_axis(sc))
        if st.attach_type != SCOPE:
            return root
        a, iv = st.attach_stage, st.attach_ivar
        assert a is not None and iv is not None
        if a.attach_type == INLINE:
            return root
        while not any(x is iv for x in a.leaf_iter_vars):
            nxt = None
            for rel in a.relations:
                if isinstance(rel, Split) and rel.parent is iv:
                    nxt = rel.inner
                elif isinstance(rel, Fuse) and (rel.outer is iv or rel.inner is iv):
                    nxt = rel.fused
            if nxt is None:
                raise ValueError(f"stage {st.op.name} is computed at axis {iv.var.name}, which is not a "
                                 f"loop of {a.op.name}; loops: {[x.var.name for x in a.leaf_iter_vars]}")
            iv = nxt
        return a, iv

    def enclosing(self, st: Stage) -> list[tuple[Stage, IterVar]]:
        """The loops (stage, leaf IterVar) around ``st``'s loop nest, outermost first."""
        chain: list[list[tuple[Stage, IterVar]]] = []
        cur, seen = st, set()
        while True:
            ap = self.attach_point(cur)
            if ap is None:
                break
            if id(cur) in seen:
                raise ValueError(f"cyclic compute_at involving stage {st.op.name}")
            seen.add(id(cur))
            a, iv = ap
            pos = next(k for k, x in enumerate(a.leaf_iter_vars) if x is iv)
            chain.append([(a, x) for x in a.leaf_iter_vars[:pos + 1]])
            cur = a
        out: list[tuple[Stage, IterVar]] = []
        for part in reversed(chain):
            out.extend(part)
        return out


def _interval(e: PrimExpr, env: dict[E.Var, Interval]) -> Interval | None:
    """Inclusive bounds of ``e`` over ``env`` (tvmpy.arith's symbolic interval sets); None when
    they are not finite: the caller then takes the whole region."""
    r = eval_set(e, {v: IntervalSet(lo, hi) for v, (lo, hi) in env.items()})
    if r.has_lower_bound() and r.has_upper_bound() and not r.is_empty():
        lo, hi = E.binary_match(r.min_value, r.max_value)
        if lo.dtype == e.dtype:
            return simplify(lo), simplify(hi)
    return None


def _union(x: Interval, y: Interval) -> Interval:
    return simplify(E.Min(x[0], y[0])), simplify(E.Max(x[1], y[1]))


def _relax(iv: Interval, ranges: dict[E.Var, Interval], rounds: int = 16) -> Interval | None:
    """Re-evaluate until no variable of ``ranges`` is left in the bounds."""
    lo, hi = iv
    for _ in range(rounds):
        if not uses_var(lo, lambda v: v in ranges) and not uses_var(hi, lambda v: v in ranges):
            return lo, hi
        a, b = _interval(lo, ranges), _interval(hi, ranges)
        if a is None or b is None:
            return None
        lo, hi = a[0], b[1]
    return None


def _collect_loads(bodies: Sequence[PrimExpr]) -> list[E.ProducerLoad]:
    """The reads in a body; indices that use ``Let`` variables (inlining binds shared values)
    get the bound values substituted, so bound inference sees what they range over."""
    c = _LoadCollector()
    if bodies and isinstance(bodies[0], Reduce):
        r = bodies[0]
        exprs = [*r.source, r.condition, *r.init]
    else:
        exprs = list(bodies)
    for e in exprs:
        c.visit(e)
    return c.loads


class _LoadCollector(Visitor):
    def __init__(self) -> None:
        self.loads: list[E.ProducerLoad] = []
        self.env: dict[E.Var, PrimExpr] = {}  # Let variable -> its value (as written)
        self.resolved: dict[E.Var, PrimExpr] = {}

    def visit_Let(self, node: E.Let) -> None:
        self.visit(node.value)
        self.env[node.var] = node.value
        self.visit(node.body)

    def _resolve(self, e: PrimExpr) -> PrimExpr:
        """``e`` with Let variables replaced by their values (only done for indices that use
        one: a data-dependent index, rare)."""
        names = [v for v in collect_vars(e) if v in self.env]
        for v in names:
            if v not in self.resolved:
                self.resolved[v] = self._resolve(self.env[v])
        return substitute(e, {v: self.resolved[v] for v in names}) if names else e

    def visit_ProducerLoad(self, node: E.ProducerLoad) -> None:
        for i in node.indices:
            self.visit(i)
        if self.env and any(uses_var(i, lambda v: v in self.env) for i in node.indices):
            node = E.ProducerLoad(node.producer, [self._resolve(i) for i in node.indices])
        self.loads.append(node)


# ---------------------------------------------------------------------------------------------
class Bounds:
    """Result of bound inference: ``ranges[iv]`` for every IterVar of every computed stage, and
    the symbolic interval of every leaf loop variable (for proofs)."""

    def __init__(self) -> None:
        self.ranges: dict[IterVar, Range] = {}
        self.var_ranges: dict[E.Var, Interval] = {}


def _rng(lo: PrimExpr, hi: PrimExpr) -> Range:
    return Range.from_min_extent(simplify(lo), simplify(hi - lo + 1))


def _interval_of(r: Range) -> Interval:
    return r.min, simplify(r.min + r.extent - 1)


def _clip_to_domain(r: Interval, dom: Range) -> Interval:
    """A root stage's consumer region cut to the stage's own domain where both are constants.

    Interval arithmetic over-approximates index expressions such as a channel shuffle's
    ``c % 2 * 4 + c // 2``: the region can reach past the axis's extent. The elements there do
    not exist (lowering guards each store with the domain), so the loop would only run guarded
    empty iterations: a 200-stage shuffle chain's intermediate stages looped 20 channels of 8.
    """
    lo, hi = r
    dlo, dhi = _interval_of(dom)
    if not (isinstance(lo, E.IntImm) and isinstance(hi, E.IntImm)
            and isinstance(dlo, E.IntImm) and isinstance(dhi, E.IntImm)):
        return r
    nlo, nhi = max(lo.value, dlo.value), min(hi.value, dhi.value)
    if nlo > nhi or (nlo, nhi) == (lo.value, hi.value):
        return r
    return E.const(nlo, lo.dtype), E.const(nhi, hi.dtype)


TIGHTEN_SPLITS = True  # infer_bound tightens splits (False: the loops before; for A/B benches)


def pass_down_domain(st: Relations, ranges: dict[IterVar, Range], tighten: bool = False) -> None:
    """Ranges of split/fuse results from their parents' ranges (loops start at 0).

    ``tighten`` (the final bound inference, TVM's ``PassDownDomain`` with ``allow_missing``
    false): a split's factor (or nparts) loop runs ``min(parent extent, factor)`` iterations
    when the parent provably has fewer than ``factor``, unless a loop derived from it is bound
    to a thread (a split sized to the launched threads keeps its extent) or lies in a
    tensorized region (sized to the intrinsic), or the parent's extent is 0. Without it, a
    stage attached inside a tile smaller than its own split factors (the auto-scheduler's
    follow-splits) looped the factor's full extent, all but the first iterations guarded off
    (or recomputing a producer attached inside them). ``infer_bound``
    tightens the stages attached inside another's loops only: a root stage's loops are the
    region its attached producers compute, which a schedule may size to an intrinsic (an
    int8 dense's accumulator, 16 columns for VNNI, under an output of 1 column)."""
    threaded = _thread_dominating(st) if tighten else set()

    def tight(iv: IterVar, parent_extent: PrimExpr, n: PrimExpr) -> PrimExpr:
        if not tighten or id(iv) in threaded or is_const_int(parent_extent, 0):
            return n
        return parent_extent if _provably_lt(parent_extent, n) else n

    for rel in st.relations:
        if isinstance(rel, Split):
            pr = ranges[rel.parent]
            dt_ = pr.extent.dtype
            if rel.factor is not None:
                f = E.cast(rel.factor, dt_)
                ranges[rel.inner] = Range.from_min_extent(E.const(0, dt_),
                                                          tight(rel.inner, pr.extent, f))
                ranges[rel.outer] = Range.from_min_extent(E.const(0, dt_), _ceildiv(pr.extent, f))
            else:
                n = E.cast(rel.nparts, dt_)
                ranges[rel.outer] = Range.from_min_extent(E.const(0, dt_),
                                                          tight(rel.outer, pr.extent, n))
                ranges[rel.inner] = Range.from_min_extent(E.const(0, dt_), _ceildiv(pr.extent, n))
        elif isinstance(rel, Fuse):
            ro, ri = ranges[rel.outer], ranges[rel.inner]
            ext = simplify(ro.extent * E.cast(ri.extent, ro.extent.dtype))
            ranges[rel.fused] = Range.from_min_extent(E.const(0, ext.dtype), ext)


def _provably_lt(a: PrimExpr, b: PrimExpr) -> bool:
    d = simplify(b - a)
    return isinstance(d, E.IntImm) and d.value > 0


def _thread_dominating(st: Relations) -> set[int]:
    """The ids of the IterVars of ``st`` from which a loop of fixed extent derives: a
    thread-bound leaf, or a leaf inside a tensorized region (the intrinsic's shape)."""
    attrs = getattr(st, "iter_var_attrs", {})
    out: set[int] = set()
    in_intrin = False
    for iv in st.leaf_iter_vars:
        a = attrs.get(iv)
        in_intrin = in_intrin or (a is not None and a.tensor_intrin is not None)
        if in_intrin or (a is not None and a.bind_thread is not None):
            out.add(id(iv))
    for rel in reversed(st.relations):
        if isinstance(rel, Split):
            if id(rel.outer) in out or id(rel.inner) in out:
                out.add(id(rel.parent))
        elif isinstance(rel, Fuse) and id(rel.fused) in out:
            out.update((id(rel.outer), id(rel.inner)))
    return out


def pass_up_index(st: Relations, ranges: dict[IterVar, Range], values: dict[IterVar, PrimExpr]) -> None:
    """Index expressions of parents from their children's (``values`` holds the leaves)."""
    for rel in reversed(st.relations):
        if isinstance(rel, Split):
            if rel.outer not in values or rel.inner not in values:
                continue
            f = ranges[rel.inner].extent
            v = values[rel.outer] * f + values[rel.inner]
            pmin = ranges[rel.parent].min
            if not is_const_int(pmin, 0):
                v = v + pmin
            values[rel.parent] = simplify(v)
        elif isinstance(rel, Fuse):
            if rel.fused not in values:
                continue
            v = values[rel.fused]
            ro, ri = ranges[rel.outer], ranges[rel.inner]
            f = E.cast(ri.extent, v.dtype)
            o, i = v // f, v % f
            if not is_const_int(ro.min, 0):
                o = o + ro.min
            if not is_const_int(ri.min, 0):
                i = i + ri.min
            values[rel.outer] = simplify(o)
            values[rel.inner] = simplify(i)


def pass_up_bound_check(st: Relations, ranges: dict[IterVar, Range]) -> dict[IterVar, bool]:
    """Which IterVars may take values past their range because of a non-divisible split."""
    state = {iv: False for iv in st.leaf_iter_vars}
    for rel in reversed(st.relations):
        if isinstance(rel, Split):
            o, i = state.get(rel.outer, False), state.get(rel.inner, False)
            if o or i:
                state[rel.parent] = True
            else:
                prod = simplify(ranges[rel.outer].extent * ranges[rel.inner].extent - ranges[rel.parent].extent)
                state[rel.parent] = not is_const_int(prod, 0)
        elif isinstance(rel, Fuse):
            f = state.get(rel.fused, False)
            state[rel.outer] = f
            state[rel.inner] = f
    return state


def _pass_up_interval(st: Stage, ranges: dict[IterVar, Range], env: dict[IterVar, Interval],
                      full: dict[IterVar, bool]) -> None:
    for rel in reversed(st.relations):
        if isinstance(rel, Split):
            if rel.outer not in env or rel.inner not in env:
                continue
            pr = ranges[rel.parent]
            if full[rel.outer] and full[rel.inner]:
                env[rel.parent] = _interval_of(pr)
                full[rel.parent] = True
                continue
            f = ranges[rel.inner].extent
            ov, iv_ = rel.outer.var, rel.inner.var
            r = _interval(ov * f + iv_ + pr.min, {ov: env[rel.outer], iv_: env[rel.inner]})
            env[rel.parent] = r if r is not None else _interval_of(pr)
            full[rel.parent] = r is None
        elif isinstance(rel, Fuse):
            if rel.fused not in env:
                continue
            ro, ri = ranges[rel.outer], ranges[rel.inner]
            lo, hi = env[rel.fused]
            if full[rel.fused] or is_zero_extent(ri.extent):  # an empty inner axis: nothing runs
                env[rel.outer], env[rel.inner] = _interval_of(ro), _interval_of(ri)
                full[rel.outer] = full[rel.inner] = True
                continue
            f = E.cast(ri.extent, lo.dtype)
            # a single point (the split above returns equal but distinct bounds for one)
            if lo is hi or structural_equal(lo, hi):
                env[rel.outer] = (simplify(lo // f + ro.min),) * 2
                env[rel.inner] = (simplify(lo % f + ri.min),) * 2
                full[rel.outer] = full[rel.inner] = False
            else:
                env[rel.outer] = (simplify(lo // f + ro.min), simplify(hi // f + ro.min))
                env[rel.inner] = _interval_of(ri)
                full[rel.outer] = False
                full[rel.inner] = True


def is_zero_extent(e: Any) -> bool:
    """A constant zero extent: the loop runs no iteration (an empty tensor's axis)."""
    return isinstance(e, E.IntImm) and e.value == 0


def _root_intervals(c: Stage, bounds: Bounds, fixed: set[int]) -> dict[E.Var, Interval]:
    """Interval of each root variable of consumer ``c``: its leaf loops in ``fixed`` (var ids)
    are single symbolic points, the others range over their loops."""
    env: dict[IterVar, Interval] = {}
    full: dict[IterVar, bool] = {}
    for leaf in c.leaf_iter_vars:
        if id(leaf.var) in fixed:
            r = bounds.ranges[leaf]
            # a loop of extent 1 is its min (as lowering substitutes it), which may still depend
            # on outer loops that are relaxed
            pt = r.min if is_const_int(r.extent, 1) else leaf.var
            env[leaf] = (pt, pt)
            full[leaf] = False
        else:
            env[leaf] = _interval_of(bounds.ranges[leaf])
            full[leaf] = True
    _pass_up_interval(c, bounds.ranges, env, full)
    op = c.op
    assert isinstance(op, ComputeOp)  # a consumer computes
    out: dict[E.Var, Interval] = {}
    for iv in list(op.axis) + list(op.reduce_axis):
        out[iv.var] = env.get(iv, _interval_of(bounds.ranges[iv]))
    return out


def infer_bound(view: ScheduleView, arg_stages: Sequence[Stage] = ()) -> Bounds:
    """Infer the range of every IterVar of every non-inlined compute stage."""
    b = Bounds()
    args = {id(s) for s in arg_stages}
    for st in reversed(view.order):
        op = st.op
        if isinstance(op, ScanOp):  # its loop covers the time steps after the init
            for iv in op.root_iter_vars():
                b.ranges[iv] = iv.known_dom
            b.var_ranges[op.scan_axis.var] = _interval_of(b.ranges[op.scan_axis])
            continue
        if not isinstance(op, ComputeOp) or st.attach_type == INLINE:
            continue
        consumers = view.consumers.get(st, [])
        encl = view.enclosing(st)
        _check_consumers_in_scope(view, st, consumers, encl)
        scope = storage_scope(st, encl)
        fixed = {id(iv.var) for a, iv in encl if not _need_relax(a, iv, scope)}
        whole = (not consumers or st.is_output or (not encl and id(st) in args)
                 or any(isinstance(c.op, ExternOp) for c in consumers))
        regions = None if whole else _consumer_regions(view, st, consumers, b, fixed)
        for d, iv in enumerate(op.axis):
            r = regions[d] if regions is not None else None
            if r is not None and not encl:
                r = _clip_to_domain(r, iv.known_dom)
            b.ranges[iv] = _rng(*r) if r is not None else iv.known_dom
        for iv in op.reduce_axis:
            b.ranges[iv] = iv.known_dom
        pass_down_domain(st, b.ranges, tighten=TIGHTEN_SPLITS and bool(encl))
        for leaf in st.leaf_iter_vars:
            b.var_ranges[leaf.var] = _interval_of(b.ranges[leaf])
    return b


def storage_scope(st: Stage, encl: Sequence[tuple[Stage, IterVar]]) -> str:
    """The stage's storage scope: its ``set_scope``, else (TVM's InferStorageScope) "local"
    when it is attached inside a threadIdx-bound loop, "shared" inside a blockIdx-bound one,
    "global" otherwise."""
    if st.scope:
        return st.scope
    rank = -1
    for a, iv in encl:
        attr = a.iter_var_attrs.get(iv)
        if attr is not None and attr.bind_thread is not None:
            rank = max(rank, _THREAD_RANK.get(attr.bind_thread.thread_tag.split(".")[0], -1))
    return {1: "local", 0: "shared"}.get(rank, "global")


_STORAGE_RANK = {"global": 0, "shared": 1, "warp": 2, "local": 3}
_THREAD_RANK = {"blockIdx": 0, "threadIdx": 1}


def _need_relax(a: Stage, iv: IterVar, scope: str) -> bool:
    """A loop enclosing a stage's attach point is relaxed (the stage's region covers all its
    values) when it is bound to threads that share the stage's storage: every
    blockIdx/threadIdx loop for a global buffer, threadIdx loops for a shared one (TVM's
    NeedRelax: storage rank <= thread rank; a warp buffer is shared by the threadIdx.x lanes,
    so threadIdx.x loops are relaxed for it too). Other enclosing loops stay fixed."""
    attr = a.iter_var_attrs.get(iv)
    if attr is None or attr.bind_thread is None:
        return False
    trank = _THREAD_RANK.get(attr.bind_thread.thread_tag.split(".")[0])
    srank = _STORAGE_RANK.get(scope.split(".")[0])
    if trank is None or srank is None:
        return False
    if scope.split(".")[0] == "warp" and attr.bind_thread.thread_tag == "threadIdx.x":
        return True
    return srank <= trank


def _check_consumers_in_scope(view: ScheduleView, st: Stage, consumers: list[Stage],
                              encl: list[tuple[Stage, IterVar]]) -> None:
    ap = view.attach_point(st)
    if ap is None:
        return
    a, iv = ap
    for c in consumers:
        if c is a:
            continue
        ce = view.enclosing(c)
        if not any(s is a and x is iv for s, x in ce):
            if isinstance(a.op, ScanOp):
                raise ValueError(
                    f"stage {st.op.name} is computed at scan {a.op.name}'s loop (once per time "
                    f"step), but {c.op.name}, which reads it, runs outside that loop (e.g. the "
                    f"scan's init): compute {st.op.name} at the root instead")
            raise ValueError(
                f"stage {st.op.name} is computed at {a.op.name}'s loop {iv.var.name}, but its consumer "
                f"{c.op.name} is computed outside that loop; compute_at {c.op.name} inside it too, or "
                f"compute {st.op.name} at a loop enclosing every consumer")


def _consumer_regions(view: ScheduleView, st: Stage, consumers: list[Stage], b: Bounds,
                      fixed: set[int]) -> list[Interval | None] | None:
    ndim = st.op.output(0).ndim  # one interval per root axis
    acc: list[Interval | None] = [None] * ndim
    relaxable = {v: r for v, r in b.var_ranges.items() if id(v) not in fixed}
    for c in consumers:
        if isinstance(c.op, ScanOp):
            for d, rd in enumerate(_scan_read(view, c, st, b, fixed)):
                prev_d = acc[d]
                acc[d] = rd if prev_d is None else _union(prev_d, rd)
            continue
        env = _root_intervals(c, b, fixed)
        # the distinct index expressions per axis: an unrolled or inlined body reads the same
        # element many times (a conv's 3x3 window, a shared value), one interval each suffices
        done: list[dict[int, list[PrimExpr]]] = [{} for _ in range(ndim)]
        hashes = HashMemo(map_free_vars=False)
        for ld in view.reads[c]:
            if view.stage_of(ld.producer) is not st:
                continue
            for d, idx in enumerate(ld.indices):
                bucket = done[d].setdefault(
                    structural_hash(idx, map_free_vars=False, memo=hashes), [])
                if any(structural_equal(idx, seen) for seen in bucket):
                    continue
                bucket.append(idx)
                r = _interval(idx, env)
                if r is not None:
                    r = _relax(r, relaxable)
                if r is None:
                    return None
                prev = acc[d]
                acc[d] = r if prev is None else _union(prev, r)
    if any(a is None for a in acc):
        return None
    return acc



def _scan_axis(st: Stage) -> IterVar:
    assert isinstance(st.op, ScanOp)
    return st.op.scan_axis


def _scan_read(view: ScheduleView, scan: Stage, st: Stage, b: Bounds,
               fixed: set[int]) -> list[Interval]:
    """What ``scan`` reads of ``st`` (an init or update stage of it): an init's first time
    steps, an update's current step (every step after the init when the update is not inside
    the scan's loop); all of the other dimensions."""
    op = scan.op
    assert isinstance(op, ScanOp)
    t_iv = op.scan_axis
    out: list[Interval] | None = None
    for i, u in zip(op.init, op.update):
        for t, is_init in ((i, True), (u, False)):
            if view.stage_of(t) is not st:
                continue
            if is_init:
                time: Interval = (E.const(0, t.shape[0].dtype), simplify(t.shape[0] - 1))
            elif id(t_iv.var) in fixed:
                time = (t_iv.var, t_iv.var)
            else:
                time = _interval_of(b.ranges[t_iv])
            r = [time] + [(E.const(0, d.dtype), simplify(d - 1)) for d in t.shape[1:]]
            out = r if out is None else [_union(x, y) for x, y in zip(out, r)]
    assert out is not None, "a scan's consumer regions are asked only of its init and update"
    return out
