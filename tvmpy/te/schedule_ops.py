"""Schedule -> loop IR (TVM's ScheduleOps + MakePipeline): IR form 1 of the team contract.

For every computed stage, a loop nest over its leaf IterVars (in leaf order), built from the
inside out:

- the body stores each output at its root-axis indices, recovered from the leaves through the
  split/fuse relations (``outer * factor + inner``; ``fused // ext``, ``fused % ext``);
- guards ``IfThenElse(likely(cond))`` only where a value can leave its domain: a non-divisible
  split, or a root axis whose inferred range is not the op's own domain (compute_at);
- a reduction stores its init right outside its outermost reduction loop (with fresh copies of the
  data-parallel loops inside that point), and its update inside all loops;
- stages attached (compute_at) to a loop are placed, with their ``Allocate``, at the start of that
  loop's body; root stages follow each other at the function root, producers first;
- loop kinds come from annotations; ``bind`` replaces a loop by an ``AttrStmt(thread_iv,
  "thread_extent"/"virtual_thread", extent)`` with the loop variable replaced by the thread's;
  pragmas wrap the loop in ``AttrStmt(loop_var, "pragma_<key>", value)``.

Preconditions: a ComputeOp may carry ``attrs["preconditions"]``, pairs ``(condition, message)``
over its shape variables that its producer could not prove at compile time (``topi.reshape`` of
symbolic sizes: the element counts agree). Every stage's, inlined ones included, becomes an
``AssertStmt`` at the function root, so the call fails with the message instead of computing on
inconsistent shapes.

Intermediate buffers have the shape of the inferred region; indices are made relative to its
start. Loops always start at 0 (a region starting elsewhere shifts the loop variable).

Tensorize: when a leaf loop carries a tensor intrinsic (``s[C].tensorize(iv, intrin)``), that loop
and everything inside it are replaced by what :func:`tvmpy.te.tensorize.make_tensorize_body`
returns (reduction init included: no separate init is emitted for that stage)::

    make_tensorize_body(stage, dom_map, tensorize_iv, value_map, access) -> Stmt

``dom_map``: the inferred Range of every IterVar of the stage (leaves and root axes);
``value_map``: each root axis / reduce axis -> its index in terms of the leaf loop variables;
``access(tensor, indices) -> (buffer, indices)``: the Buffer holding a tensor read or written by
the stage and the indices made relative to that buffer's region.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..arith import Analyzer, simplify
from ..ir.node import structural_equal
from ..tir import expr as E
from ..tir import stmt as S
from ..tir.buffer import Buffer, decl_buffer
from ..tir.expr import IterVar, PrimExpr, Range, Var, is_const_int
from ..tir.function import PrimFunc
from ..tir.functor import Mutator, post_order_visit, substitute, uses_var
from ..tir.op import likely
from .bound import (
    Bounds,
    ScheduleView,
    infer_bound,
    is_zero_extent,
    pass_up_bound_check,
    pass_up_index,
    storage_scope,
)
from .scan import ScanOp
from .schedule import INLINE, ROOT, SCOPE, Schedule, Stage
from .tensor import ComputeOp, ExternOp, PlaceholderOp, Reduce, Tensor

__all__ = ["schedule_to_primfunc", "Lowering"]

_FOR_KIND = {IterVar.DataPar: S.ForKind.SERIAL, IterVar.CommReduce: S.ForKind.SERIAL,
             IterVar.Vectorized: S.ForKind.VECTORIZED, IterVar.Unrolled: S.ForKind.UNROLLED,
             IterVar.Parallelized: S.ForKind.PARALLEL, IterVar.Tensorized: S.ForKind.SERIAL}


def schedule_to_primfunc(sch: Schedule, args: Sequence[Any], name: str = "main",
                         binds: dict | None = None) -> PrimFunc:
    """Lower ``sch`` to a PrimFunc whose parameters are ``args`` (Tensors -> buffer handles,
    Vars -> scalars). ``binds`` may map an argument tensor to the Buffer to use for it."""
    return Lowering(sch, args, name, binds or {}).run()


class _BodyConverter(Mutator):
    """Substitute root axis variables and turn tensor reads into buffer loads."""

    def __init__(self, vmap: dict, access: Callable[[Tensor, list[PrimExpr]], tuple[Buffer, list[PrimExpr]]]):
        self.vmap = vmap
        self.access = access

    def visit_Var(self, v: Var) -> Any:
        r = self.vmap.get(v)
        return v if r is None else r

    def visit_ProducerLoad(self, node: E.ProducerLoad) -> Any:
        idx = [self.visit(i) for i in node.indices]
        buf, new_idx = self.access(node.producer, idx)
        return E.BufferLoad(buf, new_idx)

    def visit_Reduce(self, node: Reduce) -> Any:
        raise ValueError("a reduction nested inside an expression cannot be lowered; "
                         "make it the top-level expression of its own compute")


class _IndexSimplifier(Mutator):
    """Simplify buffer indices knowing each loop variable's range (tvmpy.arith's Analyzer:
    e.g. ``(yi + yo * 32) // 32 -> yo`` when ``0 <= yi < 32``); the te simplifier if the
    analyzer cannot handle an index."""

    def __init__(self, body: S.Stmt) -> None:
        self.ana = Analyzer()
        # a thread variable bound with different extents (in different stages) has no single
        # range: it is left unbound
        extents: dict[Var, list[PrimExpr]] = {}

        def f(n: Any) -> None:
            if isinstance(n, S.AttrStmt) and n.attr_key in ("thread_extent", "virtual_thread") \
                    and isinstance(n.node, IterVar):
                seen = extents.setdefault(n.node.var, [])
                if not any(structural_equal(x, n.value) for x in seen):
                    seen.append(n.value)

        post_order_visit(body, f)
        self.thread_ok = {v for v, e in extents.items() if len(e) == 1}

    def _simp(self, e: PrimExpr) -> PrimExpr:
        if isinstance(e, (E.IntImm, E.Var)):
            return e
        try:
            return self.ana.simplify(e)
        except Exception:  # keep the expression where the analyzer has a limitation
            return e

    def visit_For(self, node: S.For) -> Any:
        # a loop's range (and what it implies: extent >= 1) holds only inside it, not after it
        with self.ana.constraint_scope(E.const(True)):
            self.ana.bind(node.loop_var, Range.from_min_extent(node.min, node.extent))
            return self.generic_visit(node)

    def visit_AttrStmt(self, node: S.AttrStmt) -> Any:
        with self.ana.constraint_scope(E.const(True)):
            if node.attr_key in ("thread_extent", "virtual_thread") \
                    and isinstance(node.node, IterVar) and node.node.var in self.thread_ok:
                self.ana.bind(node.node.var, Range.from_min_extent(0, node.value))
            return self.generic_visit(node)

    def visit_BufferLoad(self, node: E.BufferLoad) -> Any:
        new = self.generic_visit(node)
        idx = tuple(self._simp(i) for i in new.indices)
        return E.BufferLoad(new.buffer, idx, new.predicate)

    def visit_BufferStore(self, node: S.BufferStore) -> Any:
        new = self.generic_visit(node)
        idx = tuple(self._simp(i) for i in new.indices)
        return S.BufferStore(new.buffer, new.value, idx, new.predicate)


class Lowering:
    """One schedule_to_primfunc run (holds buffers, bounds and attachment tables)."""

    def __init__(self, sch: Schedule, args: Sequence[Any], name: str, binds: dict):
        if not isinstance(sch, Schedule):
            raise TypeError(f"schedule_to_primfunc: expected a te.Schedule, got {type(sch).__name__}")
        self.sch = sch
        self.name = name
        self.view = ScheduleView(sch)
        self.params: list[Var] = []
        self.buffer_map: dict[Var, Buffer] = {}
        self.buffers: dict[tuple[int, int], Buffer] = {}  # (id(stage), value_index) -> Buffer
        self.offsets: dict[int, list[PrimExpr]] = {}  # id(stage) -> region mins
        self.arg_stages: list[Stage] = []
        seen: set[int] = set()
        arg_tensors = [a for a in args if isinstance(a, Tensor)]
        for t in binds:
            if not any(t is a or (isinstance(t, Tensor) and t == a) for a in arg_tensors):
                raise ValueError(f"binds: {t!r} is not one of the args; binds gives the Buffer of an "
                                 "argument tensor")
        for a in args:
            if isinstance(a, Tensor):
                if a.op not in sch and not isinstance(a.op, PlaceholderOp):
                    raise ValueError(f"argument {a.name} is not a tensor of this schedule")
                # an input the computation does not read is still a parameter (keyed by its op)
                st = self.view.stage_of(a) if a.op in sch else None
                key = (id(st) if st is not None else id(a.op), a.value_index)
                if key in self.buffers:
                    raise ValueError(f"tensor {a.name} appears twice in args")
                buf = binds.get(a)
                if buf is None:
                    buf = decl_buffer(a.shape, a.dtype, a.name)
                elif not isinstance(buf, Buffer):
                    raise TypeError(f"binds[{a.name}] must be a tir.Buffer, got {type(buf).__name__}")
                self.buffers[key] = buf
                self.params.append(buf.data)
                self.buffer_map[buf.data] = buf
                if st is not None and id(st) not in seen:
                    seen.add(id(st))
                    self.arg_stages.append(st)
            elif isinstance(a, Var):
                self.params.append(a)
            else:
                raise TypeError(f"args must be te.Tensors or scalar te.var Vars, got {type(a).__name__}: {a!r}")
        # an inlined stage named in args stays a parameter that nothing writes or reads (TVM
        # keeps it so: ``tvm.lower(s, [A, B, C])`` after ``s[B].compute_inline()``); its values
        # are computed where they are read, so it is no output of the function
        self.arg_stages = [st for st in self.arg_stages if st.attach_type != INLINE]
        # a scan's init, update and state tensors are its output buffer: (stage, k) -> (scan, k)
        self.alias: dict[tuple[int, int], tuple[int, int]] = {}
        # buffers of a scan that is not an argument, allocated around its first init stage
        self.group_alloc: dict[int, list[Buffer]] = {}
        for st in self.view.order:
            if isinstance(st.op, ScanOp):
                self._alias_scan(st, seen)
        self.bounds: Bounds = infer_bound(self.view, self.arg_stages)
        # attached stages per (attach stage, leaf)
        self.attached: dict[tuple[int, int], list[Stage]] = {}
        self.roots: list[Stage] = []
        for st in self.view.order:
            if isinstance(st.op, ExternOp):
                self._check_extern(st)
                self.roots.append(st)
                continue
            if isinstance(st.op, ScanOp):
                self.roots.append(st)
                continue
            if not isinstance(st.op, ComputeOp) or st.attach_type == INLINE:
                continue
            ap = self.view.attach_point(st)
            if ap is None:
                self.roots.append(st)
            else:
                self.attached.setdefault((id(ap[0]), id(ap[1])), []).append(st)
        self._analyzer: Any = None
        self._make_buffers()

    def _prove_nonneg(self, e: PrimExpr) -> bool:
        """``e >= 0`` for all loop values: tvmpy.arith's Analyzer with every loop variable bound
        to its (possibly symbolic) range."""
        if self._analyzer is None:
            ana = Analyzer()
            for v, (lo, hi) in self.bounds.var_ranges.items():
                ana.bind(v, Range.from_min_extent(lo, simplify(hi - lo + 1)))
            self._analyzer = ana
        try:
            return bool(self._analyzer.can_prove(e >= 0))
        except Exception:  # a limitation of the analyzer: keep the guard
            return False

    def _max_extent(self, e: PrimExpr) -> PrimExpr:
        """``e`` or, when it varies with loop variables, its constant upper bound."""
        if isinstance(e, E.IntImm):
            return e
        self._prove_nonneg(E.const(0))  # builds the analyzer over the loop ranges
        try:
            hi = self._analyzer.const_int_bound(e).max_value
        except Exception:  # the analyzer's limitation: keep the expression
            return e
        return E.const(int(hi), e.dtype) if abs(hi) < (1 << 31) else e

    def _check_extern(self, st: Stage) -> None:
        if st.attach_type != ROOT:
            raise ValueError(f"extern stage {st.op.name} has no loops: it cannot be inlined or "
                             "computed at another stage's loop")
        for t in st.op.input_tensors:
            p = self.view.stage_of(t)
            if p.attach_type == INLINE:
                raise ValueError(f"tensor {t.name} is an input of extern stage {st.op.name} and "
                                 "cannot be compute_inline'd (the extern body reads its buffer)")
            if p.attach_type == SCOPE:
                raise ValueError(f"tensor {t.name} is an input of extern stage {st.op.name} and "
                                 "cannot be computed at a loop (the extern stage has none)")

    # ---- buffers -----------------------------------------------------------------------------
    def _alias_scan(self, st: Stage, args: set[int]) -> None:
        op = st.op
        assert isinstance(op, ScanOp)
        if st.attach_type != ROOT:
            raise ValueError(f"scan {op.name} must be computed at the root (it has no loop to "
                             "attach to another stage and cannot be inlined)")
        for k in range(op.num_outputs):
            for what, t in (("init", op.init[k]), ("update", op.update[k]),
                            ("state", op.state_placeholder[k])):
                p = self.view.stage_of(t)
                if what != "state" and id(p) in args:
                    raise ValueError(f"tensor {t.name} is the {what} of scan {op.name}, stored in "
                                     f"the scan's output: pass the scan's output ({op.output(k).name}) "
                                     "as the argument instead")
                self.alias[(id(p), t.value_index)] = (id(st), k)
        if id(st) in args:
            return
        bufs = []
        for k in range(op.num_outputs):
            t = op.output(k)
            b = Buffer(Var(t.name, "handle"), t.dtype, t.shape, (), 0, t.name, st.scope or "global")
            self.buffers[(id(st), k)] = b
            bufs.append(b)
        first = next(p for p in self.view.order if any(self.view.stage_of(i) is p for i in op.init))
        self.group_alloc.setdefault(id(first), []).extend(bufs)

    def _make_buffers(self) -> None:
        arg_ids = {id(s) for s in self.arg_stages}
        for st in self.view.order:
            op = st.op
            if all((id(st), k) in self.alias for k in range(op.num_outputs)):
                continue  # a scan's init or update: written into the scan's output
            if isinstance(op, ExternOp):
                for k in range(op.num_outputs):
                    if id(st) in arg_ids:
                        if (id(st), k) not in self.buffers:
                            raise ValueError(f"output {k} of extern {op.name} must be in args too: "
                                             "a multi-output extern is passed as all of its tensors")
                        continue
                    t = op.output(k)
                    self.buffers[(id(st), k)] = Buffer(Var(t.name, "handle"), t.dtype, t.shape, (), 0,
                                                       t.name, st.scope or "global")
                continue
            if not isinstance(op, ComputeOp) or st.attach_type == INLINE:
                continue
            rng = [self.bounds.ranges[iv] for iv in op.axis]
            if id(st) in arg_ids:
                for k in range(op.num_outputs):
                    if (id(st), k) not in self.buffers:
                        raise ValueError(f"output {k} of {op.name} must be in args too: a multi-output "
                                         "compute is passed as all of its tensors")
                self.offsets[id(st)] = [E.const(0, r.min.dtype) for r in rng]
                continue
            self.offsets[id(st)] = [r.min for r in rng]
            shape = [r.extent for r in rng]
            encl = self.view.enclosing(st)
            scope = storage_scope(st, encl)
            if any(_thread_bound(a, iv) for a, iv in encl):
                # inside a GPU kernel: one allocation of the largest region (a region that
                # varies with the attach loops, e.g. a non-dividing split, has no fixed size)
                shape = [self._max_extent(x) for x in shape]
            strides = _aligned_strides(shape, st.align) if st.align else ()
            for k in range(op.num_outputs):
                t = op.output(k)
                self.buffers[(id(st), k)] = Buffer(Var(t.name, "handle"), t.dtype, shape, strides, 0,
                                                   t.name, scope)

    def access(self, t: Tensor, indices: Sequence[PrimExpr]) -> tuple[Buffer, list[PrimExpr]]:
        """The buffer that holds ``t`` and ``indices`` made relative to its region."""
        st = self.view.stage_of(t)
        key = self.alias.get((id(st), t.value_index))
        if key is not None:  # at the same (absolute) indices of the scan's output
            return self.buffers[key], [simplify(i) for i in indices]
        buf = self.buffers.get((id(st), t.value_index))
        if buf is None:
            if isinstance(st.op, PlaceholderOp):
                raise ValueError(f"placeholder {t.name} is read by the computation but is not in args")
            raise ValueError(f"tensor {t.name} has no buffer (is it inlined?)")
        offs = self.offsets.get(id(st))
        if offs is None:
            return buf, [simplify(i) for i in indices]
        return buf, [simplify(i - o) if not is_const_int(o, 0) else i for i, o in zip(indices, offs)]

    # ---- top level ---------------------------------------------------------------------------
    def run(self) -> PrimFunc:
        body: S.Stmt = S.no_op()
        for st in reversed(self.roots):
            body = self._realize(st, S.seq(self._stage_stmt(st), body))
        body = _IndexSimplifier(body).visit(body)
        body = self._assert_preconditions(body)
        return PrimFunc(self.params, body, self.buffer_map, {"global_symbol": self.name})

    def _assert_preconditions(self, body: S.Stmt) -> S.Stmt:
        """Wrap ``body`` in an AssertStmt per distinct precondition of the schedule's stages."""
        conds: list[tuple[PrimExpr, str]] = []
        for st in self.view.order:
            for cond, msg in st.op.attrs.get("preconditions", ()):
                cond = simplify(cond)
                if is_const_int(cond, 1):
                    continue
                if not any(m == msg and structural_equal(c, cond) for c, m in conds):
                    conds.append((cond, msg))
        for cond, msg in reversed(conds):
            body = S.AssertStmt(cond, E.StringImm(msg), body)
        return body

    def _realize(self, st: Stage, body: S.Stmt) -> S.Stmt:
        """Wrap ``body`` (which starts with st's nest) in st's Allocates."""
        op = st.op
        bufs = [self.buffers[(id(st), k)] for k in range(op.num_outputs)
                if (id(st), k) not in self.alias and not isinstance(op, ScanOp)]
        bufs += self.group_alloc.get(id(st), [])
        if not bufs or any(b.data in self.buffer_map for b in bufs):
            return body
        if st.double_buffer_:
            if isinstance(body, S.SeqStmt):
                first, rest = body.seq[0], body.seq[1:]
                body = S.seq(S.AttrStmt(bufs[0].data, "double_buffer_scope", 1, first), *rest)
            else:
                body = S.AttrStmt(bufs[0].data, "double_buffer_scope", 1, body)
        for b in reversed(bufs):
            body = S.Allocate(b, body)
        return body

    def _attach_here(self, st: Stage, leaf: IterVar, body: S.Stmt) -> S.Stmt:
        prods = self.attached.get((id(st), id(leaf)), [])
        for p in reversed(prods):
            body = self._realize(p, S.seq(self._stage_stmt(p), body))
        return body

    # ---- one stage ---------------------------------------------------------------------------
    def _stage_stmt(self, st: Stage) -> S.Stmt:
        op = st.op
        if isinstance(op, ExternOp):
            return self._extern_stmt(op)
        if isinstance(op, ScanOp):  # the time loop around the update's stages
            iv = op.scan_axis
            steps = self._attach_here(st, iv, S.no_op())
            return _loop(iv, self.bounds.ranges[iv], st.iter_var_attrs.get(iv), steps)
        assert isinstance(op, ComputeOp)
        if any(is_zero_extent(iv.known_dom.extent) for iv in op.axis):
            # an empty output: nothing to compute (its loops' index arithmetic, split and
            # fused by the schedule, would divide by the empty extent)
            return S.Evaluate(E.const(0, "int32"))
        ranges = self.bounds.ranges
        leaves = list(st.leaf_iter_vars)
        values: dict[IterVar, PrimExpr] = {leaf: leaf.var for leaf in leaves}
        pass_up_index(st, ranges, values)
        roots = list(op.axis) + list(op.reduce_axis)
        for iv in roots:
            if iv not in values:
                raise ValueError(f"internal: axis {iv.var.name} of {op.name} has no loop")
        preds: list[Any] = self._predicates(st, op, values)
        vmap = {iv.var: values[iv] for iv in roots}
        conv = _BodyConverter(vmap, self.access)
        if st.store_predicate is not None:
            pred = conv.visit(st.store_predicate)
            if _reduce_on_threads(st, leaves):
                pred = _at_thread_zero(st, leaves, pred)
            preds.append(_StorePred(pred))
        body = self.view.bodies[st]
        out_idx = [values[iv] for iv in op.axis]
        bufs = [self.access(op.output(k), out_idx) for k in range(op.num_outputs)]

        tensorize_pos = next((k for k, lv in enumerate(leaves)
                              if st.iter_var_attrs.get(lv) is not None
                              and st.iter_var_attrs[lv].tensor_intrin is not None), None)
        is_reduce = isinstance(body[0], Reduce)
        begin = next((k for k, lv in enumerate(leaves) if lv.iter_type == IterVar.CommReduce), len(leaves))
        init: S.Stmt | None = None
        if tensorize_pos is not None:
            for lv in leaves[tensorize_pos:]:
                if self.attached.get((id(st), id(lv))):
                    raise ValueError(f"stage {op.name}: cannot compute another stage inside the "
                                     f"tensorized loop {lv.var.name}")
            from .tensorize import make_tensorize_parts

            # Contract (tvmpy.te.tensorize): ranges of every IterVar of the stage; root axis ->
            # index in leaf loop vars; access() maps (tensor, original indices) to the lowered
            # buffer and its indices. The result replaces the loop at tensorize_iv and all inside
            # it, including the reduction init (or, with reduction loops outside it, returns
            # the intrinsic's reset for an init nest before them).
            dom_map = {iv: ranges[iv] for iv in st.all_iter_vars}
            value_map = {iv: values[iv] for iv in roots}
            reset, inner = make_tensorize_parts(st, dom_map, leaves[tensorize_pos], value_map,
                                                self.access)
            stop = tensorize_pos
            if reset is not None:
                init = self._tensorize_init(st, leaves[begin:stop], reset)
        else:
            stop = len(leaves)
            if is_reduce:
                update = self._reduce_update(body, conv, bufs, op.name)
                if len(body) > 1 and isinstance(body[0], Reduce) and _reduce_on_threads(
                        st, leaves):
                    update = _mark_tuple_reduce(body[0], conv, update)
                inner = _guard(update, preds)
                init = self._reduce_init(st, body, leaves, begin, values, preds, bufs, conv)
            else:
                stores = [S.BufferStore(b, conv.visit(e), idx) for (b, idx), e in zip(bufs, body)]
                inner = _guard(S.seq(*stores), preds)
        if init is not None and begin >= stop:
            inner = S.seq(init, inner)
        for k in reversed(range(stop)):
            leaf = leaves[k]
            inner = self._attach_here(st, leaf, inner)
            inner = _loop(leaf, ranges[leaf], st.iter_var_attrs.get(leaf), inner)
            if init is not None and k == begin:
                inner = S.seq(init, inner)
        return inner

    def _extern_stmt(self, op: ExternOp) -> S.Stmt:
        """The extern body with its placeholder buffers (and any view of their memory, e.g.
        ``ib.buffer_ptr``) bound to the buffers of its inputs and outputs."""
        real: dict[Var, Buffer] = {}
        for t, b in zip(op.inputs, op.input_placeholders):
            real[b.data] = self.access(t, [E.const(0)] * t.ndim)[0]
        for k, b in enumerate(op.output_placeholders):
            real[b.data] = self.buffers[(id(self.view.stage_of(op.output(k))), k)]
        vmap: dict[Any, Any] = {}

        def f(n: Any) -> None:
            if not isinstance(n, (E.BufferLoad, S.BufferStore)):
                return
            b: Buffer = n.buffer
            if b.data in real and b not in vmap:
                r = real[b.data]
                vmap[b] = r if _same_layout(b, r) else Buffer(
                    r.data, b.dtype, b.shape, b.strides, b.elem_offset, b.name, r.scope)

        post_order_visit(op.body, f)
        # the placeholders' shapes and data pointers: the real buffers'
        for pb_data, r in real.items():
            vmap[pb_data] = r.data
        for b in (*op.input_placeholders, *op.output_placeholders):
            r = real[b.data]
            for d, rd in zip(b.shape, r.shape):
                if isinstance(d, Var) and d not in vmap and not structural_equal(d, rd):
                    vmap[d] = rd
        # marked as TVM marks it: where the hand-written statement of the stage begins
        return S.AttrStmt(op, "extern_scope", 0, substitute(op.body, vmap))

    # ---- predicates --------------------------------------------------------------------------
    def _predicates(self, st: Stage, op: ComputeOp, values: dict[IterVar, PrimExpr]) -> list[PrimExpr]:
        ranges = self.bounds.ranges
        preds: list[PrimExpr] = []
        state = pass_up_bound_check(st, ranges)
        for iv in st.all_iter_vars:
            if not state.get(iv) or iv not in values:
                continue
            r = ranges[iv]
            v = simplify(values[iv] - r.min)
            if not self._prove_nonneg(simplify(r.extent - 1 - v)):
                preds.append(simplify(values[iv]) < simplify(r.min + r.extent))
        for iv in op.axis:
            r, d = ranges[iv], iv.known_dom
            if _same_range(r, d):
                continue
            v = values[iv]
            if not self._prove_nonneg(simplify(v - d.min)):
                preds.append(v >= d.min)
            if not self._prove_nonneg(simplify(d.min + d.extent - 1 - v)):
                preds.append(v < simplify(d.min + d.extent))
        return preds

    # ---- reductions --------------------------------------------------------------------------
    def _reduce_update(self, body: list, conv: _BodyConverter, bufs: list, name: str) -> S.Stmt:
        r0: Reduce = body[0]
        comb = r0.combiner
        n = len(body)
        lhs = [E.BufferLoad(b, idx) for b, idx in bufs]
        rhs = [conv.visit(s) for s in r0.source]
        new = list(comb.combine(lhs, rhs))

        def reads_earlier_lhs(k: int) -> bool:
            earlier = comb.lhs[:k]
            return uses_var(comb.result[k], lambda v: any(v is x for x in earlier))

        hazard = any(reads_earlier_lhs(k) for k in range(n))
        if hazard:
            tmps = [Var(f"{name}_v{k}", new[k].dtype) for k in range(n)]
            stmt: S.Stmt = S.seq(*[S.BufferStore(b, t, idx) for (b, idx), t in zip(bufs, tmps)])
            for t, v in reversed(list(zip(tmps, new))):
                stmt = S.LetStmt(t, v, stmt)
        else:
            stmt = S.seq(*[S.BufferStore(b, v, idx) for (b, idx), v in zip(bufs, new)])
        cond = r0.condition
        if not (isinstance(cond, E.IntImm) and cond.value):
            stmt = S.IfThenElse(conv.visit(cond), stmt)
        return stmt

    def _tensorize_init(self, st: Stage, between: list[IterVar], reset: S.Stmt) -> S.Stmt:
        """The init nest of a tensorized reduction: the intrinsic's ``reset`` inside fresh copies
        of the spatial loops between the first reduction loop and the tensorized one."""
        inner_sp = [lv for lv in between if lv.iter_type != IterVar.CommReduce]
        fresh = {lv.var: Var(lv.var.name + ".init", lv.var.dtype) for lv in inner_sp}
        stmt = substitute(reset, fresh)
        for lv in reversed(inner_sp):
            stmt = _plain_loop(fresh[lv.var], self.bounds.ranges[lv], S.ForKind.SERIAL, stmt)
        return stmt

    def _reduce_init(self, st: Stage, body: list, leaves: list[IterVar], begin: int,
                     values: dict[IterVar, PrimExpr], preds: list[PrimExpr], bufs: list,
                     conv: _BodyConverter) -> S.Stmt:
        r0: Reduce = body[0]
        red_vars = [lv.var for lv in leaves if lv.iter_type == IterVar.CommReduce]
        inner_sp = [lv for lv in leaves[begin:] if lv.iter_type != IterVar.CommReduce]
        fresh = {lv.var: Var(lv.var.name + ".init", lv.var.dtype) for lv in inner_sp}
        init_vals = list(r0.init) if r0.init else list(r0.combiner.identity_element)
        stores = []
        for (b, idx), v in zip(bufs, init_vals):
            stores.append(S.BufferStore(b, substitute(conv.visit(v), fresh), [substitute(i, fresh) for i in idx]))
        ipreds: list[Any] = []
        for p in preds:
            c = p.cond if isinstance(p, _StorePred) else p
            if uses_var(c, lambda v: any(v is x for x in red_vars)):
                continue
            c = substitute(c, fresh)
            ipreds.append(_StorePred(c) if isinstance(p, _StorePred) else c)
        stmt = _guard(S.seq(*stores), ipreds)
        for lv in reversed(inner_sp):
            r = self.bounds.ranges[lv]
            fv = fresh[lv.var]
            attr = st.iter_var_attrs.get(lv)
            kind = attr.kind if attr is not None and attr.bind_thread is None else IterVar.DataPar
            stmt = _plain_loop(fv, r, _FOR_KIND.get(kind, S.ForKind.SERIAL), stmt)
        return stmt


# ---------------------------------------------------------------------------------------------
def _same_layout(a: Buffer, b: Buffer) -> bool:
    return (a.dtype == b.dtype and not a.strides and not b.strides and len(a.shape) == len(b.shape)
            and all(structural_equal(x, y) for x, y in zip(a.shape, b.shape)))


def _thread_bound(stage: Stage, iv: IterVar) -> bool:
    attr = stage.iter_var_attrs.get(iv)
    return attr is not None and attr.bind_thread is not None


def _guard(body: S.Stmt, preds: list[PrimExpr]) -> S.Stmt:
    """``if likely(p0 and p1 ...)`` around ``body``; a store predicate (``_StorePred``) is a plain
    ``if`` inside it (it is not expected to hold almost always)."""
    store = [p.cond for p in preds if isinstance(p, _StorePred)]
    preds = [p for p in preds if not isinstance(p, _StorePred)]
    for c in store:
        body = S.IfThenElse(c, body)
    if not preds:
        return body
    cond = preds[0]
    for p in preds[1:]:
        cond = E.And(cond, p)
    return S.IfThenElse(likely(cond), body)


class _StorePred:
    """A stage's store predicate among the bound predicates (kept apart from ``likely``)."""

    def __init__(self, cond: PrimExpr):
        self.cond = cond


def _same_range(a: Range, b: Range) -> bool:
    d1 = simplify(a.min - b.min)
    d2 = simplify(a.extent - b.extent)
    return is_const_int(d1, 0) and is_const_int(d2, 0)


def _plain_loop(var: Var, r: Range, kind: S.ForKind, body: S.Stmt) -> S.Stmt:
    if is_const_int(r.extent, 1):
        return substitute(body, {var: r.min})
    if not is_const_int(r.min, 0):
        nv = Var(var.name, var.dtype)
        body = substitute(body, {var: nv + r.min})
        var = nv
    return S.For(var, E.const(0, r.extent.dtype), r.extent, kind, body)


#: pragmas that mark a region rather than a loop (VTA's ``dma_copy``, ``alu``): kept as an
#: ``AttrStmt`` when their loop has extent 1 and is elided; a package adds its keys here
UNIT_LOOP_PRAGMAS: set[str] = set()


def _loop(leaf: IterVar, r: Range, attr: Any, body: S.Stmt) -> S.Stmt:
    if attr is not None and attr.bind_thread is not None:
        t = attr.bind_thread
        tv = t.var if t.var.dtype == leaf.var.dtype else E.cast(t.var, leaf.var.dtype)
        value = tv if is_const_int(r.min, 0) else tv + r.min
        body = substitute(body, {leaf.var: value})
        tag = t.thread_tag
        key = "virtual_thread" if tag.startswith("vthread") or tag.startswith("cthread") else "thread_extent"
        return S.AttrStmt(t, key, r.extent, body)
    kind = _FOR_KIND.get(attr.kind, S.ForKind.SERIAL) if attr is not None else S.ForKind.SERIAL
    if is_const_int(r.extent, 1):
        stmt = _plain_loop(leaf.var, r, kind, body)
        keep = [k for k in (attr.pragmas if attr is not None else {}) if k in UNIT_LOOP_PRAGMAS]
        for key in reversed(keep):  # the loop is gone; its pragma still marks the region
            stmt = S.AttrStmt(leaf.var, "pragma_" + key, attr.pragmas[key], stmt)
        return stmt
    stmt = _plain_loop(leaf.var, r, kind, body)
    if attr is not None and attr.pragmas and isinstance(stmt, S.For):
        loop_var = stmt.loop_var
        for key, val in reversed(list(attr.pragmas.items())):
            stmt = S.AttrStmt(loop_var, "pragma_" + key, val, stmt)
    return stmt


def _aligned_strides(shape: list[PrimExpr], align: dict[int, tuple[int, int]]) -> tuple[PrimExpr, ...]:
    """Row-major strides where dimension d's stride satisfies ``stride % factor == offset``."""
    strides: list[PrimExpr] = [E.const(0)] * len(shape)
    stride: PrimExpr = E.const(1, shape[-1].dtype if shape else "int32")
    for d in reversed(range(len(shape))):
        if d in align:
            factor, offset = align[d]
            stride = simplify(stride + (factor + offset - stride % factor) % factor)
        strides[d] = stride
        stride = simplify(stride * shape[d])
    return tuple(strides)


#: the attribute around a tuple reduction's update when a reduction axis is bound to threadIdx
#: (node: the CommReducer; value: ``tir.tvm_tuple(rhs...)``, this thread's values), for
#: LowerThreadAllreduce to rebuild the combiner across threads (it removes the attribute)
TUPLE_REDUCE_ATTR = "tvmpy.tuple_reduce"


def _reduce_on_threads(st: Any, leaves: list[IterVar]) -> bool:
    for lv in leaves:
        a = st.iter_var_attrs.get(lv)
        if (lv.iter_type == IterVar.CommReduce and a is not None and a.bind_thread is not None
                and a.bind_thread.thread_tag.startswith("threadIdx")):
            return True
    return False


def _at_thread_zero(st: Any, leaves: list[IterVar], pred: PrimExpr) -> PrimExpr:
    """A cross-thread reduction's store predicate as thread 0 sees it: after the allreduce
    (LowerThreadAllreduce) only thread 0 of the reduction's threads stores the result, so
    ``set_store_predicate(tx.var.equal(0))`` (TVM's idiom) holds there. Kept as is, the
    predicate would also guard the reduction's init, outside the thread's scope (before the
    kernel when nothing is bound to blockIdx), and let the simplifier specialise the update's
    reads to thread 0 before the allreduce is formed."""
    zero = {}
    for lv in leaves:
        a = st.iter_var_attrs.get(lv)
        if (lv.iter_type == IterVar.CommReduce and a is not None and a.bind_thread is not None
                and a.bind_thread.thread_tag.startswith("threadIdx")):
            zero[a.bind_thread.var] = E.const(0, a.bind_thread.var.dtype)
    return simplify(substitute(pred, zero))


def _mark_tuple_reduce(r0: Reduce, conv: Any, update: S.Stmt) -> S.Stmt:
    rhs = [conv.visit(x) for x in r0.source]
    return S.AttrStmt(r0.combiner, TUPLE_REDUCE_ATTR, E.Call("handle", "tir.tvm_tuple", rhs),
                      update)
