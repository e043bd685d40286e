"""Tensorize: replace a loop nest of a stage by a tensor intrinsic (TVM's MakeTensorize).

Called by schedule lowering (:mod:`tvmpy.te.schedule_ops`) for a stage with ``s[C].tensorize(xi,
intrin)``; :func:`make_tensorize_body` returns the statement that replaces loop ``xi`` and
everything inside it (reduction init included). Steps:

1. **Region.** Each root axis of the stage (spatial and reduction) takes, inside ``xi``, the values
   ``base + offset`` where ``base`` depends only on the loops outside and ``offset`` only on the
   loops inside. The loops inside must cover the intrinsic's iteration box exactly once: the
   last ``len(intrin.axis)`` spatial axes (and the last reduction axes) map in order onto the
   intrinsic's axes, with offsets ``0..extent-1``; leading axes must have a single value. This is
   checked by enumerating the (small) inner iteration space. Every tile must lie inside the
   axis domains, proved from the ranges of the outer loops: a tile that would need a guard
   (non-divisible split) is refused.
2. **Match.** The stage's compute body, with each mapped axis ``v`` replaced by
   ``intrin_axis + base``, must equal the intrinsic's body: same node types and dtypes, same
   reducer (combiner and identity), constants equal, operands of ``+ * min max == != and or``
   compared in either order. A read ``T[idx]`` matches an intrinsic input ``P[idx']`` when
   ``idx - region_min == idx'`` (region_min: ``idx`` at the intrinsic axes' origin; leading extra
   dimensions of ``T`` must stay at their minimum). Each stage tensor maps to one intrinsic input.
3. **Bind.** Each intrinsic Buffer is bound to the real buffer of its tensor: data pointer,
   ``elem_offset`` = the region start linearised with the real buffer's strides, symbolic strides
   = the real strides of the trailing dimensions. A compact intrinsic buffer needs a compact
   region; ``offset_factor`` divisibility is proved when possible, refused when provably false,
   otherwise checked at run time by an AssertStmt.
4. **Reduction.** Without reduction loops outside the region: ``body`` (or ``reset; update``).
   With outer reduction loops: ``if all outer reduce vars are at their first iteration:
   reset``, then ``update`` (or ``if first: body else: update`` when no reset is declared).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..arith import Analyzer
from ..ir import dtype as dt
from ..ir.node import structural_equal
from ..tir import expr as E
from ..tir import stmt as S
from ..tir.buffer import Buffer
from ..tir.expr import IterVar, PrimExpr, Range, Var
from ..tir.functor import Mutator, collect_vars, substitute, uses_var
from ..tir.op import likely
from .tensor import ComputeOp, Reduce, Tensor
from .tensor_intrin import TensorIntrin

__all__ = ["make_tensorize_body", "make_tensorize_parts", "TensorizeError"]

Access = Callable[[Tensor, list[PrimExpr]], tuple[Buffer, list[PrimExpr]]]
_COMMUTATIVE = (E.Add, E.Mul, E.Min, E.Max, E.EQ, E.NE, E.And, E.Or)


class TensorizeError(ValueError):
    """The tensorized region does not compute what the intrinsic declares (or cannot be bound)."""


def make_tensorize_body(stage: Any, dom_map: dict[IterVar, Range], tensorize_iv: IterVar,
                        value_map: dict[IterVar, PrimExpr], access: Access) -> S.Stmt:
    """The statement replacing loop ``tensorize_iv`` of ``stage`` and everything inside it.

    ``dom_map``: the range of every IterVar of the stage (bound inference); ``value_map``: each
    root axis (op.axis and op.reduce_axis) -> its index expression in the leaf loop variables;
    ``access(tensor, indices) -> (buffer, indices)``: where a tensor element lives in the lowered
    code. Raises :class:`TensorizeError` when the region does not match the intrinsic."""
    attr = stage.iter_var_attrs.get(tensorize_iv)
    intrin = getattr(attr, "tensor_intrin", None)
    if not isinstance(intrin, TensorIntrin):
        raise TypeError(f"tensorize of {stage.op.name}: expected a TensorIntrin "
                        f"(te.decl_tensor_intrin), got {type(intrin).__name__}")
    return _Tensorizer(stage, dom_map, tensorize_iv, value_map, access, intrin).run()


def make_tensorize_parts(stage: Any, dom_map: dict[IterVar, Range], tensorize_iv: IterVar,
                         value_map: dict[IterVar, PrimExpr],
                         access: Access) -> tuple[S.Stmt | None, S.Stmt]:
    """As :func:`make_tensorize_body`, but when reduction loops lie outside the region and the
    intrinsic declares a reset: ``(reset, update)``, the reset to be run in its own loop nest
    before the reduction loops (TVM's init nest: no per-iteration "first iteration?" branch in
    the reduction), the update unconditional. Otherwise ``(None, body)``."""
    attr = stage.iter_var_attrs.get(tensorize_iv)
    intrin = getattr(attr, "tensor_intrin", None)
    if not isinstance(intrin, TensorIntrin):
        raise TypeError(f"tensorize of {stage.op.name}: expected a TensorIntrin "
                        f"(te.decl_tensor_intrin), got {type(intrin).__name__}")
    return _Tensorizer(stage, dom_map, tensorize_iv, value_map, access, intrin).run_parts()


def _const(e: Any) -> int | None:
    return e.value if isinstance(e, E.IntImm) else None


def _intrin_extent(iv: IterVar) -> int:
    """The extent of an intrinsic's axis: a constant (decl_tensor_intrin checks it)."""
    ext = _const(iv.known_dom.extent)
    assert ext is not None, f"intrinsic axis {iv.var.name} has a non-constant extent"
    return ext


class _Tensorizer:
    def __init__(self, stage: Any, dom_map: dict, iv: IterVar, value_map: dict, access: Access,
                 intrin: TensorIntrin):
        self.stage, self.dom_map, self.iv = stage, dom_map, iv
        self.value_map, self.access, self.intrin = value_map, access, intrin
        self.op: ComputeOp = stage.op
        self.where = f"tensorize {intrin.name} at {stage.op.name}.{iv.var.name}"
        leaves = list(stage.leaf_iter_vars)
        pos = next(k for k, lv in enumerate(leaves) if lv is iv)
        self.inner, self.outer = leaves[pos:], leaves[:pos]
        self.ana = Analyzer()
        # outer loops starting at a symbolic value (inside a compute_at tile) are written
        # start + u, u from 0, for the proofs of _check_domains
        self.shift: dict[Var, PrimExpr] = {}
        for lv in self.outer:
            r = dom_map[lv]
            ext = _const(r.extent)
            if ext is None or ext > 0:
                self.ana.bind(lv.var, r)
                if not isinstance(r.min, E.IntImm):
                    u = Var(lv.var.name + ".off", lv.var.dtype)
                    self.ana.bind(u, Range.from_min_extent(E.const(0, r.min.dtype), r.extent))
                    self.shift[lv.var] = r.min + u

    def fail(self, msg: str) -> TensorizeError:
        return TensorizeError(f"{self.where}: {msg}")

    # ---- 1. region -----------------------------------------------------------------------------
    def _pairs(self) -> list[tuple[IterVar, IterVar | None]]:
        """(stage root axis, intrinsic axis or None for a leading single-valued axis)."""
        iop = self.intrin.op
        out: list[tuple[IterVar, IterVar | None]] = []
        for kind, mine, theirs in (("spatial", self.op.axis, iop.axis),
                                   ("reduction", self.op.reduce_axis, iop.reduce_axis)):
            if len(theirs) > len(mine):
                raise self.fail(f"the intrinsic has {len(theirs)} {kind} axes but {self.op.name} "
                                f"has {len(mine)}")
            lead = len(mine) - len(theirs)
            out += [(a, None) for a in mine[:lead]]
            out += list(zip(mine[lead:], theirs))
        return out

    def region(self) -> None:
        # inner loop v runs over [min, min + extent): write it min + u with u from 0
        local = {lv: Var(lv.var.name + ".local", lv.var.dtype) for lv in self.inner}
        shift = {lv.var: self.dom_map[lv].min + u for lv, u in local.items()}
        zero = {lv.var: self.dom_map[lv].min for lv in self.inner}
        local_ids = {id(u) for u in local.values()}
        self.pairs = self._pairs()
        self.base: dict[int, PrimExpr] = {}
        offsets: list[PrimExpr] = []
        for root, _ in self.pairs:
            v = self.value_map[root]
            base = self.ana.simplify(substitute(v, zero))
            off = self.ana.simplify(substitute(v, shift) - base)
            if any(id(x) not in local_ids for x in collect_vars(off)):
                raise self.fail(f"the values of axis {root.var.name} inside the region "
                                f"({self.ana.simplify(v - base)}) depend on loops outside it")
            self.base[id(root)] = base
            offsets.append(off)
        # enumerate the inner iteration space
        exts = []
        for lv in self.inner:
            e = _const(self.ana.simplify(self.dom_map[lv].extent))
            if e is None:
                raise self.fail(f"loop {lv.var.name} inside the region has the non-constant "
                                f"extent {self.dom_map[lv].extent}")
            exts.append(e)
        iop = self.intrin.op
        shape = [_intrin_extent(a) for a in (*iop.axis, *iop.reduce_axis)]
        npoints, want = math.prod(exts), math.prod(shape)
        loops = ", ".join(f"{lv.var.name}:{e}" for lv, e in zip(self.inner, exts))
        if npoints != want:
            raise self.fail(f"the loops inside the region ({loops}) run {npoints} iterations but "
                            f"the intrinsic covers {'x'.join(map(str, shape))} = {want}")
        from ..tir.interpreter import evaluate

        grids = np.meshgrid(*[np.arange(e) for e in exts], indexing="ij")
        bind = {local[lv]: g.ravel() for lv, g in zip(self.inner, grids)}
        key = np.zeros(npoints, dtype=np.int64)
        for (root, ia), off in zip(self.pairs, offsets):
            vals = np.broadcast_to(np.asarray(evaluate(off, bind), dtype=np.int64), (npoints,))
            lo, hi = int(vals.min()), int(vals.max())
            ext = 1 if ia is None else _intrin_extent(ia)
            if lo != 0 or hi != ext - 1:
                what = "a single value" if ia is None else f"{ext} values (intrinsic axis " \
                                                            f"{ia.var.name})"
                raise self.fail(f"axis {root.var.name} spans {hi - lo + 1} values inside the "
                                f"region ({loops}), the intrinsic needs {what}")
            if ia is not None:
                key = key * ext + vals
        if np.unique(key).size != want:
            raise self.fail(f"the loops inside the region ({loops}) do not visit each point of "
                            "the intrinsic's iteration box exactly once")
        self._check_domains()

    def _check_domains(self) -> None:
        widened = False
        self.guards: list[PrimExpr] = []
        for root, ia in self.pairs:
            ext = 1 if ia is None else _intrin_extent(ia)
            base = self.base[id(root)]
            for dom in (root.dom, self.dom_map.get(root)):
                if dom is None:
                    continue
                raw = (base >= dom.min, base + ext <= dom.min + dom.extent)
                conds = raw
                if self.shift:
                    conds = tuple(substitute(c, self.shift) for c in conds)
                ok = all(self.ana.can_prove(c) for c in conds)
                if not ok and not widened:
                    widened = True
                    self._bind_enclosing_loops()
                    ok = all(self.ana.can_prove(c) for c in conds)
                if not ok and ia is None and dom is root.dom:
                    # a leading axis (one value per call) past its domain, where a split does
                    # not divide: the call is guarded, the intrinsic's tile stays whole
                    self.guards += [r for r, c in zip(raw, conds) if not self.ana.can_prove(c)]
                    continue
                if not ok:
                    raise self.fail(
                        f"axis {root.var.name} ranges over {dom.min}..{dom.min}+{dom.extent}, "
                        f"which tiles of {ext} starting at {base} do not divide exactly: the last "
                        "tile would need a guard. Use a shape divisible by the intrinsic, or pad")

    def _bind_enclosing_loops(self) -> None:
        """Teach the analyzer the ranges of the loops of other stages around this one (a
        compute_at stage's region starts at their variables)."""
        from .bound import ScheduleView, infer_bound

        try:
            bounds = infer_bound(ScheduleView(self.stage.schedule))
        except Exception:  # noqa: BLE001 - no extra facts: the proof simply fails
            return
        own = {id(lv.var) for lv in self.stage.leaf_iter_vars}
        for var, (lo, hi) in bounds.var_ranges.items():
            if id(var) not in own:
                self.ana.bind(var, Range.from_min_extent(lo, self.ana.simplify(hi - lo + 1)))

    # ---- 2. match ------------------------------------------------------------------------------
    def match(self) -> None:
        from .bound import ScheduleView

        try:
            bodies = ScheduleView(self.stage.schedule).bodies[self.stage]
        except Exception:  # noqa: BLE001 - stage without a schedule view: its op's body
            bodies = list(self.op.body)
        iop = self.intrin.op
        if len(bodies) != len(iop.body):
            raise self.fail(f"{self.op.name} has {len(bodies)} outputs, the intrinsic "
                            f"{len(iop.body)}")
        vmap: dict[Var, PrimExpr] = {}
        for root, ia in self.pairs:
            base = self.base[id(root)]
            if ia is None:
                vmap[root.var] = base
            else:
                iv = ia.var if ia.var.dtype == root.var.dtype else E.cast(ia.var, root.var.dtype)
                vmap[root.var] = iv if _const(base) == 0 else iv + base
        self.intr_vars = {id(a.var) for a in (*iop.axis, *iop.reduce_axis)}
        self.origin = {a.var: E.const(0, a.var.dtype) for a in (*iop.axis, *iop.reduce_axis)}
        self.params = {id(p): p for p in self.intrin.scalar_params}
        self.tmap: dict[tuple[int, int], Tensor] = {}
        self.tsrc: dict[tuple[int, int], Tensor] = {}
        self.rev: dict[tuple[int, int], tuple[int, int]] = {}
        self.tmin: dict[tuple[int, int], list[PrimExpr]] = {}
        self.pbind: dict[int, PrimExpr] = {}
        for k, (mine, theirs) in enumerate(zip(bodies, iop.body)):
            if mine.dtype != theirs.dtype:
                raise self.fail(f"output {k} is {mine.dtype}, the intrinsic's is {theirs.dtype}")
            if not self._eq(substitute(mine, vmap), theirs):
                raise self.fail(
                    f"the region does not compute the intrinsic's expression:\n  stage:     "
                    f"{mine}\n  intrinsic: {theirs}")
        for p in self.intrin.scalar_params:
            if id(p) not in self.pbind:
                raise self.fail(f"scalar parameter {p.name} does not occur in the intrinsic's "
                                "compute, so it cannot be matched")

    def _save(self) -> tuple:
        return dict(self.tmap), dict(self.tsrc), dict(self.rev), dict(self.tmin), dict(self.pbind)

    def _restore(self, saved: tuple) -> None:
        self.tmap, self.tsrc, self.rev, self.tmin, self.pbind = (dict(x) for x in saved)

    def _eq(self, a: Any, b: Any) -> bool:
        if isinstance(b, Var) and id(b) in self.params:
            return self._bind_param(a, b)
        if type(a) is not type(b):
            return False
        if isinstance(a, E.Var):
            return a is b
        if isinstance(a, (E.IntImm, E.FloatImm, E.StringImm)):
            return a.dtype == b.dtype and a.value == b.value
        if a.dtype != b.dtype:
            return False
        if isinstance(a, E.ProducerLoad):
            return self._eq_load(a, b)
        if isinstance(a, Reduce):
            return self._eq_reduce(a, b)
        if isinstance(a, E.BinaryOp):
            saved = self._save()
            if self._eq(a.a, b.a) and self._eq(a.b, b.b):
                return True
            self._restore(saved)
            if isinstance(a, _COMMUTATIVE):
                if self._eq(a.a, b.b) and self._eq(a.b, b.a):
                    return True
                self._restore(saved)
            return False
        if isinstance(a, E.Call):
            return a.op == b.op and len(a.args) == len(b.args) and all(
                self._eq(x, y) for x, y in zip(a.args, b.args))
        if isinstance(a, (E.Ramp, E.Broadcast)) and a.lanes != b.lanes:
            return False
        fields = getattr(a, "_fields", None)
        if fields is None:
            return structural_equal(a, b)
        for f in fields:
            x, y = getattr(a, f), getattr(b, f)
            if isinstance(x, (list, tuple)):
                if len(x) != len(y) or not all(self._eq(p, q) for p, q in zip(x, y)):
                    return False
            elif not self._eq(x, y):
                return False
        return True

    def _bind_param(self, a: Any, p: Var) -> bool:
        if not isinstance(a, E.PrimExpr) or a.dtype != p.dtype:
            return False
        if any(id(v) in self.intr_vars for v in collect_vars(a)):
            return False  # varies inside the region: not a scalar
        old = self.pbind.get(id(p))
        if old is None:
            self.pbind[id(p)] = a
            return True
        return structural_equal(old, a) or (
            dt.is_integer(a.dtype) and self.ana.can_prove_equal(old, a))

    def _eq_load(self, a: E.ProducerLoad, b: E.ProducerLoad) -> bool:
        ta, tb = a.producer, b.producer
        if ta.dtype != tb.dtype or len(a.indices) < len(b.indices):
            return False
        ka, kb = (id(ta.op), ta.value_index), (id(tb.op), tb.value_index)
        if ka in self.tmap and self.tmap[ka] != tb:
            return False
        if kb in self.rev and self.rev[kb] != ka:
            return False
        if not any(tb == t for t in self.intrin.inputs):
            return False
        rmin = [self.ana.simplify(substitute(i, self.origin)) for i in a.indices]
        rel = [self.ana.simplify(i - m) for i, m in zip(a.indices, rmin)]
        lead = len(a.indices) - len(b.indices)
        if any(_const(r) != 0 for r in rel[:lead]):
            return False
        for r, i in zip(rel[lead:], b.indices):
            if not self.ana.can_prove_equal(r, i):
                return False
        old = self.tmin.get(ka)
        if old is not None and not all(self.ana.can_prove_equal(x, y) for x, y in zip(old, rmin)):
            return False
        self.tmap[ka], self.tsrc[ka], self.rev[kb], self.tmin[ka] = tb, ta, ka, rmin
        return True

    def _eq_reduce(self, a: Reduce, b: Reduce) -> bool:
        ca, cb = a.combiner, b.combiner
        if len(a.source) != len(b.source) or a.value_index != b.value_index:
            return False
        if len(ca.result) != len(cb.result):
            return False
        ren = {**dict(zip(ca.lhs, cb.lhs)), **dict(zip(ca.rhs, cb.rhs))}
        for ra, rb in zip(ca.result, cb.result):
            if not structural_equal(substitute(ra, ren), rb):
                return False
        if not all(structural_equal(x, y) for x, y in zip(ca.identity_element,
                                                           cb.identity_element)):
            return False
        if len(a.init) != len(b.init):
            return False
        pairs = [*zip(a.source, b.source), (a.condition, b.condition), *zip(a.init, b.init)]
        return all(self._eq(x, y) for x, y in pairs)

    # ---- 3. bind -------------------------------------------------------------------------------
    def bind(self) -> tuple[dict, list[tuple[PrimExpr, str]]]:
        vsub: dict[Any, Any] = {}
        asserts: list[tuple[PrimExpr, str]] = []
        pairs: list[tuple[Tensor, list[PrimExpr], Tensor]] = []
        for key, t in self.tsrc.items():
            pairs.append((t, self.tmin[key], self.tmap[key]))
        for k, t_out in enumerate(self.intrin.outputs):
            mine = self.op.output(k)
            if mine.dtype != t_out.dtype:
                raise self.fail(f"output {mine.name} is {mine.dtype}, intrinsic output "
                                f"{t_out.name} is {t_out.dtype}")
            pairs.append((mine, [self.base[id(a)] for a in self.op.axis], t_out))
        for mine, rmin, theirs in pairs:
            self._bind_one(mine, rmin, self.intrin.buffer_of(theirs), vsub, asserts)
        for p in self.intrin.scalar_params:
            vsub[p] = self.pbind[id(p)]
        return vsub, asserts

    def _bind_one(self, t: Tensor, rmin: list[PrimExpr], ib: Buffer, vsub: dict,
                  asserts: list) -> None:
        real, rel = self.access(t, list(rmin))
        if real.dtype != ib.dtype:
            raise self.fail(f"buffer {real.name} of {t.name} is {real.dtype}, intrinsic buffer "
                            f"{ib.name} is {ib.dtype}")
        strides = list(real.strides) if real.strides else list(real.compact_strides())
        m = len(ib.shape)
        offset = real.elem_offset
        for r, s in zip(rel, strides):
            offset = offset + r * s
        offset = self.ana.simplify(offset)
        tail = [self.ana.simplify(s) for s in strides[len(strides) - m:]]
        want = list(ib.strides) if ib.strides else list(ib.compact_strides())
        for d, (w, r) in enumerate(zip(want, tail)):
            if _const(ib.shape[d]) == 1:
                if isinstance(w, Var):
                    vsub.setdefault(w, r)
                continue
            if isinstance(w, Var) and w not in vsub:
                vsub[w] = r
                continue
            w = vsub.get(w, w) if isinstance(w, Var) else w
            if not self.ana.can_prove_equal(w, r):
                hint = "" if ib.strides else (
                    "; declare the intrinsic's buffer with symbolic strides, e.g. "
                    "tvm.tir.decl_buffer(shape, dtype, strides=[te.var('s'), 1])")
                raise self.fail(f"intrinsic buffer {ib.name} needs stride {w} in dimension {d}, "
                                f"but {t.name} is stored in {real.name} with stride {r}{hint}")
        if isinstance(ib.elem_offset, Var):
            vsub[ib.elem_offset] = offset
        elif not self.ana.can_prove_equal(ib.elem_offset, offset):
            raise self.fail(f"intrinsic buffer {ib.name} has the fixed element offset "
                            f"{ib.elem_offset}, the region of {t.name} starts at {offset}")
        f = ib.offset_factor
        if f > 1:
            ms = self.ana.modular_set(offset)
            if ms.coeff % f == 0 and ms.base % f != 0:
                raise self.fail(f"the region of {t.name} starts at element offset {offset}, "
                                f"never a multiple of the intrinsic's offset_factor {f}")
            if not (ms.coeff % f == 0 and ms.base % f == 0):
                asserts.append((E.FloorMod(offset, E.const(f, offset.dtype)) == 0,
                                f"{self.where}: element offset of {t.name} is not a multiple of "
                                f"offset_factor {f}"))
        vsub[ib.data] = real.data
        vsub[ib] = Buffer(real.data, ib.dtype, ib.shape, tail, offset, ib.name, real.scope,
                          ib.data_alignment, ib.offset_factor)

    # ---- 4. statements -------------------------------------------------------------------------
    def run_parts(self) -> tuple[S.Stmt | None, S.Stmt]:
        outer_red = [lv for lv in self.outer if lv.iter_type == IterVar.CommReduce
                     and _const(self.dom_map[lv].extent) != 1]
        if not outer_red or self.intrin.reset is None or self.intrin.update is None:
            return None, self.run()
        self.region()
        self.match()
        vsub, asserts = self.bind()
        tidy = _SimplifyIndices(self.ana)
        reset = tidy.visit(substitute(self.intrin.reset, vsub))
        stmt = tidy.visit(substitute(self.intrin.update, vsub))
        for cond, msg in reversed(asserts):
            stmt = S.AssertStmt(cond, msg, stmt)
        # the reset runs before the reduction loops: guards on reduction axes do not apply
        red = [lv.var for lv in self.outer if lv.iter_type == IterVar.CommReduce]
        return self._guarded(reset, skip=red), self._guarded(stmt)

    def _guarded(self, stmt: S.Stmt, skip: list | None = None) -> S.Stmt:
        """``stmt`` under the guards of leading axes that a split does not divide (but those
        using a variable of ``skip``)."""
        for cond in reversed(self.guards):
            if skip and uses_var(cond, lambda v: any(v is x for x in skip)):
                continue
            stmt = S.IfThenElse(likely(cond), stmt)
        return stmt

    def run(self) -> S.Stmt:
        self.region()
        self.match()
        vsub, asserts = self.bind()
        intrin = self.intrin

        tidy = _SimplifyIndices(self.ana)

        def sub(s: S.Stmt | None) -> S.Stmt | None:
            return None if s is None else tidy.visit(substitute(s, vsub))

        body, reset, update = sub(intrin.body), sub(intrin.reset), sub(intrin.update)
        outer_red = [lv for lv in self.outer if lv.iter_type == IterVar.CommReduce
                     and _const(self.dom_map[lv].extent) != 1]
        if not intrin.op.reduce_axis:
            stmt = body
        elif not outer_red:
            if body is not None:
                stmt = body
            elif reset is not None:
                stmt = S.seq(reset, update)
            else:
                raise self.fail("the intrinsic declares only an update: it needs a body or a "
                                "reset to start the reduction")
        else:
            names = ", ".join(lv.var.name for lv in outer_red)
            if update is None:
                raise self.fail(f"reduction loop(s) {names} are outside the tensorized region, so "
                                "the intrinsic must declare (body, reset, update) with an update")
            first = None
            for lv in outer_red:
                c = lv.var == self.dom_map[lv].min
                first = c if first is None else E.And(first, c)
            if reset is not None:
                stmt = S.seq(S.IfThenElse(first, reset), update)
            elif body is not None:
                stmt = S.IfThenElse(first, body, update)
            else:
                raise self.fail(f"reduction loop(s) {names} are outside the tensorized region: the "
                                "intrinsic needs a reset or a body for their first iteration")
        assert stmt is not None
        for cond, msg in reversed(asserts):
            stmt = S.AssertStmt(cond, msg, stmt)
        return self._guarded(stmt)


class _SimplifyIndices(Mutator):
    """Simplify the integer arguments of calls (pointer offsets, strides) after binding."""

    def __init__(self, ana: Analyzer):
        self.ana = ana

    def visit_Call(self, node: E.Call) -> Any:
        new = self.generic_visit(node)
        args = [self.ana.simplify(a) if isinstance(a, PrimExpr) and dt.is_integer(a.dtype)
                and dt.lanes_of(a.dtype) == 1 and not dt.is_bool(a.dtype) else a
                for a in new.args]
        if all(x is y for x, y in zip(args, new.args)):
            return new
        return E.Call(new.dtype, new.op, args)
