"""Schedules: how a tensor computation is turned into loops (TVM's ``te.Schedule`` / ``Stage``).

A :class:`Schedule` holds one :class:`Stage` per operation reachable from the outputs. A stage
starts with one loop per axis of its op (``op.axis`` then ``op.reduce_axis``); primitives never
touch the computation, they only record *relations* between IterVars:

- :class:`Split` ``parent -> (outer, inner)`` with ``parent = outer * factor + inner``
- :class:`Fuse` ``(outer, inner) -> fused`` with ``outer = fused // ext(inner)``,
  ``inner = fused % ext(inner)``

plus per-IterVar attributes (vectorize/unroll/parallel/bind/pragma/tensorize), the attachment of
the stage (root, inline, or at a loop of another stage), storage scope and alignment.
``leaf_iter_vars`` is the loop order. Bound inference (:mod:`.bound`) and loop-nest generation
(:mod:`.schedule_ops`) read these records. Data-flow primitives (cache_read, cache_write, rfactor)
add stages and rewrite readers' ops, as TVM's ``ReplaceDataFlow`` does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

import numpy as np

from ..tir import expr as E
from ..tir.expr import IterVar, PrimExpr, Var, convert
from ..tir.functor import Mutator
from .scan import ScanOp
from .tensor import ComputeOp, ExternOp, Operation, PlaceholderOp, Reduce, Tensor

__all__ = ["Schedule", "Stage", "Split", "Fuse", "IterVarAttr", "create_schedule"]

# attach types (TVM's AttachType)
ROOT = "root"
INLINE = "inline"
SCOPE = "scope"


class Split:
    """``parent`` was split into ``outer`` and ``inner`` (exactly one of factor / nparts set)."""

    __slots__ = ("parent", "outer", "inner", "factor", "nparts")

    def __init__(self, parent: IterVar, outer: IterVar, inner: IterVar,
                 factor: PrimExpr | None, nparts: PrimExpr | None):
        self.parent, self.outer, self.inner = parent, outer, inner
        self.factor, self.nparts = factor, nparts


class Fuse:
    """``outer`` and ``inner`` (adjacent leaves, in that order) were fused into ``fused``."""

    __slots__ = ("outer", "inner", "fused")

    def __init__(self, outer: IterVar, inner: IterVar, fused: IterVar):
        self.outer, self.inner, self.fused = outer, inner, fused


class IterVarAttr:
    """Annotations of one loop. ``kind``: one of IterVar.DataPar (plain), Vectorized, Unrolled,
    Parallelized, Tensorized. ``bind_thread``: a te.thread_axis IterVar or None."""

    __slots__ = ("kind", "bind_thread", "pragmas", "tensor_intrin")

    def __init__(self) -> None:
        self.kind = IterVar.DataPar
        self.bind_thread: IterVar | None = None
        self.pragmas: dict[str, Any] = {}
        self.tensor_intrin: Any = None


_KIND_NAMES = {IterVar.Vectorized: "vectorize", IterVar.Unrolled: "unroll",
               IterVar.Parallelized: "parallel", IterVar.Tensorized: "tensorize"}


def _ivname(iv: IterVar) -> str:
    return iv.var.name


class Stage:
    """The schedule of one operation. ``op`` may change under data-flow primitives (its inputs
    are rewritten); ``origin_op`` is the operation the stage was created for."""

    def __init__(self, op: Operation, schedule: Schedule):
        self.op = op
        self.origin_op = op
        self.schedule = schedule
        self._reset_iter_vars()
        self.attach_type = ROOT
        self.attach_stage: Stage | None = None
        self.attach_ivar: IterVar | None = None
        self.scope = ""  # "" = decided at lowering: "global"
        self.is_output = False
        self.double_buffer_ = False
        self.align: dict[int, tuple[int, int]] = {}  # dim -> (factor, offset)
        self.store_predicate: PrimExpr | None = None

    def _reset_iter_vars(self) -> None:
        op = self.op
        if isinstance(op, ComputeOp):
            self.all_iter_vars = list(op.axis) + list(op.reduce_axis)
        elif isinstance(op, ScanOp):
            self.all_iter_vars = op.root_iter_vars()
        else:
            self.all_iter_vars = []
        # a scan's spatial axes (Opaque) name its output dimensions; its one loop is scan_axis
        self.leaf_iter_vars = [iv for iv in self.all_iter_vars if iv.iter_type != IterVar.Opaque]
        self.relations: list[Split | Fuse] = []
        self.iter_var_attrs: dict[IterVar, IterVarAttr] = {}

    def __repr__(self) -> str:
        return f"stage({self.op.name})"

    # ---- helpers -----------------------------------------------------------------------------
    def _check_compute(self, what: str) -> ComputeOp:
        if isinstance(self.op, ScanOp):
            raise ValueError(
                f"{what}: stage {self.op.name} is a scan: its loop {self.op.scan_axis.var.name} "
                "walks the time steps in order and cannot be scheduled; schedule the stages of "
                "its update instead (s[update].split/bind/parallel/vectorize on the non-time "
                "axes, compute_at(s[scan], scan.op.scan_axis))")
        if not isinstance(self.op, ComputeOp):
            kind = "an extern stage (its loops are in its body)" if isinstance(self.op, ExternOp) \
                else "a placeholder"
            raise TypeError(f"{what}: stage {self.op.name} is {kind} and has no loops to schedule")
        return self.op

    def _leaf_index(self, iv: Any, what: str) -> int:
        if not isinstance(iv, IterVar):
            raise TypeError(f"{what}: expected an IterVar of stage {self.op.name}, got {type(iv).__name__} {iv!r}")
        for k, x in enumerate(self.leaf_iter_vars):
            if x is iv:
                return k
        if any(x is iv for x in self.all_iter_vars):
            raise ValueError(
                f"{what}: axis {_ivname(iv)} of stage {self.op.name} is no longer a leaf (it was split or "
                f"fused away); current loops: {[_ivname(x) for x in self.leaf_iter_vars]}")
        owner = self.schedule._owner_of(iv)
        where = f"it belongs to stage {owner.op.name}" if owner is not None else "it belongs to no stage of this schedule"
        raise ValueError(f"{what}: axis {_ivname(iv)} is not an axis of stage {self.op.name} ({where})")

    def _attr(self, iv: IterVar) -> IterVarAttr:
        a = self.iter_var_attrs.get(iv)
        if a is None:
            a = self.iter_var_attrs[iv] = IterVarAttr()
        return a

    # ---- loop structure ----------------------------------------------------------------------
    def split(self, parent: IterVar, factor: Any = None, nparts: Any = None) -> tuple[IterVar, IterVar]:
        """Split ``parent`` into ``(outer, inner)``: by ``factor`` (inner extent) or ``nparts``
        (outer extent). Non-divisible factors are allowed: the tail is guarded by a predicate."""
        self._check_compute("split")
        pos = self._leaf_index(parent, "split")
        if (factor is None) == (nparts is None):
            raise ValueError("split: give exactly one of factor= or nparts= "
                             f"(got factor={factor!r}, nparts={nparts!r})")
        amount = factor if factor is not None else nparts
        amount = convert(amount)
        if not isinstance(amount, PrimExpr) or not _is_int_dtype(amount.dtype):
            raise TypeError(f"split: factor/nparts must be an integer, got {amount!r}")
        if isinstance(amount, E.IntImm) and amount.value <= 0:
            which = "factor" if factor is not None else "nparts"
            raise ValueError(f"split: {which} must be positive, got {amount.value}")
        bits = int("".join(c for c in parent.var.dtype if c.isdigit()) or 32)
        if isinstance(amount, E.IntImm) and amount.value >= 2 ** (bits - 1):
            which = "factor" if factor is not None else "nparts"
            raise ValueError(f"split: {which}={amount.value} does not fit the {parent.var.dtype} loop "
                             f"variable of axis {_ivname(parent)}")
        amount = E.cast(amount, parent.var.dtype)
        it = parent.iter_type
        dt_ = parent.var.dtype
        outer = IterVar(None, Var(parent.var.name + ".outer", dt_), it)
        inner = IterVar(None, Var(parent.var.name + ".inner", dt_), it)
        self.relations.append(Split(parent, outer, inner, amount if factor is not None else None,
                                    amount if nparts is not None else None))
        self.all_iter_vars += [outer, inner]
        self.leaf_iter_vars[pos:pos + 1] = [outer, inner]
        return outer, inner

    def tile(self, x_parent: IterVar, y_parent: IterVar, x_factor: Any, y_factor: Any
             ) -> tuple[IterVar, IterVar, IterVar, IterVar]:
        """Split both axes and reorder to ``(xo, yo, xi, yi)``."""
        xo, xi = self.split(x_parent, factor=x_factor)
        yo, yi = self.split(y_parent, factor=y_factor)
        self.reorder(xo, yo, xi, yi)
        return xo, yo, xi, yi

    def fuse(self, *args: IterVar) -> IterVar:
        """Fuse adjacent leaf axes (outermost first) into one loop."""
        self._check_compute("fuse")
        if len(args) == 1 and isinstance(args[0], (list, tuple)):
            args = tuple(args[0])
        if not args:
            raise ValueError("fuse: needs at least one axis")
        fused = args[0]
        self._leaf_index(fused, "fuse")
        for inner in args[1:]:
            fused = self._fuse2(fused, inner)
        return fused

    def _fuse2(self, outer: IterVar, inner: IterVar) -> IterVar:
        po = self._leaf_index(outer, "fuse")
        pi = self._leaf_index(inner, "fuse")
        if pi != po + 1:
            raise ValueError(
                f"fuse: axes must be adjacent leaves, outer first: {_ivname(outer)} is loop {po} and "
                f"{_ivname(inner)} is loop {pi} of {[_ivname(x) for x in self.leaf_iter_vars]}; reorder first")
        red = [iv.iter_type == IterVar.CommReduce for iv in (outer, inner)]
        if red[0] != red[1]:
            raise ValueError(f"fuse: cannot fuse the reduction axis with the data-parallel axis "
                             f"({_ivname(outer)}, {_ivname(inner)})")
        dt_ = outer.var.dtype
        fused = IterVar(None, Var(f"{outer.var.name}.{inner.var.name}.fused", dt_), outer.iter_type)
        self.relations.append(Fuse(outer, inner, fused))
        self.all_iter_vars.append(fused)
        self.leaf_iter_vars[po:pi + 1] = [fused]
        return fused

    def reorder(self, *args: IterVar) -> None:
        """Put the given leaf axes in this relative order (the others keep their positions)."""
        self._check_compute("reorder")
        if len(args) == 1 and isinstance(args[0], (list, tuple)):
            args = tuple(args[0])
        pos = [self._leaf_index(iv, "reorder") for iv in args]
        if len(set(pos)) != len(pos):
            raise ValueError(f"reorder: an axis appears twice in {[_ivname(iv) for iv in args]}")
        for p, iv in zip(sorted(pos), args):
            self.leaf_iter_vars[p] = iv

    # ---- attachment --------------------------------------------------------------------------
    def compute_at(self, parent: Stage, scope: IterVar) -> None:
        """Compute this stage inside loop ``scope`` of ``parent`` (a consumer of this stage)."""
        self._check_compute("compute_at")
        if not isinstance(parent, Stage):
            raise TypeError(f"compute_at: parent must be a Stage (s[tensor]), got {type(parent).__name__}")
        if parent.schedule is not self.schedule:
            raise ValueError("compute_at: parent stage belongs to another schedule")
        if parent is self:
            raise ValueError(f"compute_at: cannot attach stage {self.op.name} to itself")
        if not any(x is scope for x in parent.all_iter_vars):
            owner = self.schedule._owner_of(scope) if isinstance(scope, IterVar) else None
            extra = f" (it belongs to stage {owner.op.name})" if owner is not None else ""
            raise ValueError(f"compute_at: {scope!r} is not an axis of stage {parent.op.name}{extra}")
        if not self.schedule._consumes(parent, self):
            raise ValueError(f"compute_at: stage {parent.op.name} does not consume {self.op.name} "
                             f"(directly or through other stages); attach a stage only inside its consumer")
        self.schedule._check_scan_attach(self, parent, scope)
        # cycle check: walking up from parent must not reach self
        st: Stage | None = parent
        seen = set()
        while st is not None and st.attach_type == SCOPE:
            if st is self or id(st) in seen:
                raise ValueError(f"compute_at: attaching {self.op.name} to {parent.op.name} creates a cycle")
            seen.add(id(st))
            st = st.attach_stage
        if st is self:
            raise ValueError(f"compute_at: attaching {self.op.name} to {parent.op.name} creates a cycle")
        self.attach_type = SCOPE
        self.attach_stage = parent
        self.attach_ivar = scope

    def compute_inline(self) -> None:
        """Substitute this stage's expression into its consumers (no buffer, no loops)."""
        self._check_compute("compute_inline")
        # only scans' readers matter here: reading every stage's inputs per inlined stage was
        # quadratic in a long fused chain (schedule_injective inlines each of its stages)
        for r in self.schedule.stages:
            if isinstance(r.op, ScanOp) and any(t.op is self.op for t in r.op.input_tensors):
                what = "init" if any(self.schedule[t] is self for t in r.op.init) else "update"
                raise ValueError(f"compute_inline: {self.op.name} is the {what} of scan "
                                 f"{r.op.name}, which stores it into the scan's output; it cannot "
                                 "be inlined")
        if self._check_compute("compute_inline").reduce_axis:
            raise ValueError(f"compute_inline: cannot inline the reduction {self.op.name}")
        if self.is_output:
            raise ValueError(f"compute_inline: cannot inline {self.op.name}, an output of the schedule")
        self.attach_type = INLINE
        self.attach_stage = None
        self.attach_ivar = None

    def compute_root(self) -> None:
        """Compute this stage at the root of the function (undoes compute_at / compute_inline).
        A stage of a scan's update is then computed at the root of the scan's loop."""
        self._check_compute("compute_root")
        self.attach_type = ROOT
        self.attach_stage = None
        self.attach_ivar = None

    # ---- loop annotations --------------------------------------------------------------------
    def _annotate(self, iv: IterVar, kind: int) -> None:
        name = _KIND_NAMES[kind]
        self._check_compute(name)
        self._leaf_index(iv, name)
        if kind in (IterVar.Vectorized, IterVar.Parallelized) and iv.iter_type == IterVar.CommReduce:
            raise ValueError(f"{name}: cannot {name} the reduction axis {_ivname(iv)} of {self.op.name} "
                             "(use rfactor to make it data-parallel first)")
        old = self.iter_var_attrs[iv].kind if iv in self.iter_var_attrs else None
        if old is not None and old != kind and old in _KIND_NAMES:
            raise ValueError(f"{name}: axis {_ivname(iv)} of {self.op.name} is already marked "
                             f"{_KIND_NAMES[old]}; a loop takes one of vectorize/unroll/parallel "
                             "(split it to use both)")
        self._attr(iv).kind = kind

    def vectorize(self, iv: IterVar) -> None:
        self._annotate(iv, IterVar.Vectorized)

    def unroll(self, iv: IterVar) -> None:
        self._annotate(iv, IterVar.Unrolled)

    def parallel(self, iv: IterVar) -> None:
        self._annotate(iv, IterVar.Parallelized)

    def pragma(self, iv: IterVar, pragma_type: str, pragma_value: Any = None) -> None:
        """Annotate loop ``iv`` with ``AttrStmt(loop_var, "pragma_<type>", value)``."""
        self._check_compute("pragma")
        self._leaf_index(iv, "pragma")
        if not isinstance(pragma_type, str) or not pragma_type:
            raise TypeError(f"pragma: the pragma type must be a non-empty string, got {pragma_type!r}")
        if pragma_type in ("unroll", "vectorize"):
            self._annotate(iv, IterVar.Unrolled if pragma_type == "unroll" else IterVar.Vectorized)
            return
        self._attr(iv).pragmas[pragma_type] = convert(pragma_value if pragma_value is not None else 1)

    def bind(self, iv: IterVar, thread_ivar: IterVar) -> None:
        """Bind loop ``iv`` to a thread axis (blockIdx.*, threadIdx.*, vthread)."""
        self._check_compute("bind")
        self._leaf_index(iv, "bind")
        if not isinstance(thread_ivar, IterVar) or not thread_ivar.thread_tag:
            raise TypeError(f"bind: expected a te.thread_axis, got {thread_ivar!r}")
        if iv.iter_type == IterVar.CommReduce and not thread_ivar.thread_tag.startswith("threadIdx"):
            raise ValueError(f"bind: cannot bind the reduction axis {_ivname(iv)} to {thread_ivar.thread_tag}")
        # a reduction axis bound to threadIdx: a cross-thread reduction, lowered for GPU
        # targets by tir.transform.LowerThreadAllreduce (CPU targets run it as a loop)
        tag = thread_ivar.thread_tag
        for other, a in self.iter_var_attrs.items():
            if a.bind_thread is None or other is iv or not any(
                    other is x for x in self.leaf_iter_vars):
                continue
            if a.bind_thread is thread_ivar or (
                    tag == a.bind_thread.thread_tag and not tag.startswith(("vthread", "cthread"))):
                # one hardware index cannot enumerate two loops of a stage
                raise ValueError(f"bind: {tag} is already bound to {_ivname(other)} "
                                 f"in stage {self.op.name}")
        self._attr(iv).bind_thread = thread_ivar

    def tensorize(self, iv: IterVar, tensor_intrin: Any) -> None:
        """Record that loop ``iv`` and everything inside it is replaced by ``tensor_intrin``
        (matched and lowered by :mod:`tvmpy.te.tensorize`)."""
        self._check_compute("tensorize")
        self._leaf_index(iv, "tensorize")
        from .tensor_intrin import TensorIntrin

        if not isinstance(tensor_intrin, TensorIntrin):
            raise TypeError("tensorize: expected a te.decl_tensor_intrin(...) TensorIntrin, got "
                            f"{type(tensor_intrin).__name__} {tensor_intrin!r}")
        a = self._attr(iv)
        a.kind = IterVar.Tensorized
        a.tensor_intrin = tensor_intrin

    # ---- storage -----------------------------------------------------------------------------
    def set_scope(self, scope: str) -> None:
        if not isinstance(scope, str):
            raise TypeError(f"set_scope: scope must be a string such as 'local', got {scope!r}")
        self.scope = scope

    def storage_align(self, axis: IterVar, factor: int, offset: int) -> None:
        """Make the stride of ``axis``'s dimension satisfy ``stride % factor == offset``."""
        op = self._check_compute("storage_align")
        dims = [k for k, a in enumerate(op.axis) if a is axis]
        if not dims:
            raise ValueError(f"storage_align: {axis!r} is not one of {self.op.name}.op.axis")
        for what, v in (("factor", factor), ("offset", offset)):
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool):
                raise TypeError(f"storage_align: {what} must be an int, got {type(v).__name__} {v!r}")
        if int(factor) <= 0:
            raise ValueError(f"storage_align: factor must be positive, got {factor}")
        if not 0 <= int(offset) < int(factor):
            raise ValueError(f"storage_align: offset must be in [0, factor), got {offset} (factor {factor})")
        self.align[dims[0]] = (int(factor), int(offset))

    def set_store_predicate(self, predicate: Any) -> None:
        """Only store the stage's results where ``predicate`` holds (e.g. one thread of a
        cross-thread reduction: ``tx.var.equal(0)``)."""
        self._check_compute("set_store_predicate")
        p = convert(predicate)
        from ..ir import dtype as dt

        if not isinstance(p, PrimExpr) or not dt.is_bool(p.dtype):
            raise TypeError(f"set_store_predicate: expected a boolean expression, got {predicate!r}")
        self.store_predicate = p

    def double_buffer(self) -> None:
        self._check_compute("double_buffer")
        self.double_buffer_ = True

    def env_threads(self, threads: Any) -> None:
        """TVM's persistent-kernel scan (the whole scan inside one kernel) is not supported."""
        raise ValueError(
            f"env_threads: stage {self.op.name}: tvmpy does not run a scan as one persistent GPU "
            "kernel; bind the loops of the scan's init and update stages instead "
            "(s[update].bind(...)): each time step is then one kernel launch")


def _is_int_dtype(d: str) -> bool:
    from ..ir import dtype as dt

    return dt.is_integer(d) and not dt.is_bool(d)


# ---------------------------------------------------------------------------------------------
class _ReadReplacer(Mutator):
    """Rewrite ``ProducerLoad`` of tensors in ``vmap`` ((id(op), value_index) -> Tensor)."""

    def __init__(self, vmap: dict[tuple[int, int], Tensor]):
        self.vmap = vmap
        self.hit = False

    def visit_ProducerLoad(self, node: E.ProducerLoad) -> Any:
        idx = [self.visit(i) for i in node.indices]
        t = self.vmap.get((id(node.producer.op), node.producer.value_index))
        if t is None and all(a is b for a, b in zip(idx, node.indices)):
            return node
        self.hit = True
        return E.ProducerLoad(t if t is not None else node.producer, idx)


def rewrite_bodies(body: Sequence[PrimExpr], fn: Callable[[PrimExpr], PrimExpr],
                   new_reduce_axis: Sequence[IterVar] | None = None) -> list[PrimExpr]:
    """Apply ``fn`` to every expression of a compute body, keeping a reduction's outputs sharing
    one source tuple (required by ComputeOp)."""
    if body and isinstance(body[0], Reduce):
        r0 = body[0]
        source = tuple(fn(s) for s in r0.source)
        cond = fn(r0.condition)
        init = tuple(fn(i) for i in r0.init)
        axis = tuple(new_reduce_axis) if new_reduce_axis is not None else r0.axis
        return [Reduce(r0.combiner, source, axis, cond, k, init) for k in range(len(body))]
    return [fn(b) for b in body]


def replace_inputs(op: Operation, vmap: dict[tuple[int, int], Tensor]) -> Operation:
    """``op`` with its reads of tensors in ``vmap`` redirected (same axes); ``op`` if none."""
    if isinstance(op, ExternOp):  # the same body over the replacement input buffers
        ins = [vmap.get(_key(t), t) for t in op.inputs]
        if all(a is b for a, b in zip(ins, op.inputs)):
            return op
        return ExternOp(op.name, op.tag, op.attrs, ins, op.input_placeholders,
                        op.output_placeholders, op.body)
    if isinstance(op, ScanOp):
        init = [vmap.get(_key(t), t) for t in op.init]
        update = [vmap.get(_key(t), t) for t in op.update]
        if all(a is b for a, b in zip([*init, *update], [*op.init, *op.update])):
            return op
        return op.replace_tensors(init, update)
    if not isinstance(op, ComputeOp):
        return op
    rep = _ReadReplacer(vmap)
    new_body = rewrite_bodies(op.body, rep.visit)
    if not rep.hit:
        return op
    return ComputeOp(op.name, op.tag, op.attrs, op.axis, new_body)


def _key(t: Tensor) -> tuple[int, int]:
    return (id(t.op), t.value_index)


class Schedule:
    """The schedule of a set of output operations: ``s[tensor]`` is the stage of its op."""

    def __init__(self, outputs: Sequence[Operation]):
        self.outputs = list(outputs)
        self.stages: list[Stage] = []
        self.stage_map: dict[Operation, Stage] = {}
        for op in post_order(self.outputs, lambda op: [t.op for t in op.input_tensors]):
            st = Stage(op, self)
            self.stages.append(st)
            self.stage_map[op] = st
        for op in self.outputs:
            self.stage_map[op].is_output = True

    def __getitem__(self, key: Any) -> Stage:
        op = key.op if isinstance(key, Tensor) else key
        if not isinstance(op, Operation):
            raise TypeError(f"schedule[...] takes a Tensor or an Operation, got {type(key).__name__}")
        st = self.stage_map.get(op)
        if st is None:
            raise ValueError(f"{op.name} is not part of this schedule (create_schedule reaches only the "
                             "operations the outputs depend on)")
        return st

    def __contains__(self, key: Any) -> bool:
        op = key.op if isinstance(key, Tensor) else key
        return op in self.stage_map

    # ---- graph helpers -----------------------------------------------------------------------
    def _owner_of(self, iv: IterVar) -> Stage | None:
        for st in self.stages:
            if any(x is iv for x in st.all_iter_vars):
                return st
        return None

    def _reader_stages(self, st: Stage) -> list[Stage]:
        outs = {id(st.op)}
        return [c for c in self.stages
                if any(id(t.op) in outs for t in c.op.input_tensors)]

    def _consumes(self, consumer: Stage, producer: Stage) -> bool:
        """Does ``consumer`` read ``producer``'s outputs, directly or through other stages?"""
        todo, seen = [producer], set()
        while todo:
            st = todo.pop()
            for c in self._reader_stages(st):
                if c is consumer:
                    return True
                if id(c) not in seen:
                    seen.add(id(c))
                    todo.append(c)
        return False

    def _replace_dataflow(self, vmap: dict[tuple[int, int], Tensor], skip: Sequence[Stage] = ()) -> None:
        """Rewrite every stage's op to read the tensors in ``vmap``; propagate op changes."""
        for st in self.stages:
            if any(st is s for s in skip):
                continue
            new = replace_inputs(st.op, vmap)
            if new is not st.op:
                for k in range(st.op.num_outputs):
                    vmap[(id(st.op), k)] = new.output(k)
                self._set_op(st, new)

    # ---- scans -------------------------------------------------------------------------------
    def scan_body(self, scan: Stage) -> list[Stage]:
        """The stages of ``scan``'s update: those that read one of its states (directly or
        through other stages) on the way to an update tensor, the updates themselves included.
        They run inside the scan's loop, one time step each."""
        op = scan.op
        assert isinstance(op, ScanOp)
        states = {id(t.op) for t in op.state_placeholder}
        memo: dict[int, bool] = {}

        def reads_state(st: Stage) -> bool:
            hit = memo.get(id(st))
            if hit is None:
                memo[id(st)] = False  # (no cycles in a schedule's graph)
                hit = memo[id(st)] = any(
                    id(t.op) in states or (t.op in self.stage_map and reads_state(self[t]))
                    for t in st.op.input_tensors if not isinstance(st.op, ScanOp))
            return hit

        body: list[Stage] = []
        todo = [self[t] for t in op.update]
        while todo:
            st = todo.pop()
            if any(st is b for b in body):
                continue
            body.append(st)
            for t in st.op.input_tensors:
                if t.op in self.stage_map and id(t.op) not in states and reads_state(self[t]):
                    todo.append(self[t])
        return [st for st in self.stages if any(st is b for b in body)]

    def scan_of(self, st: Stage) -> Stage | None:
        """The scan stage whose update ``st`` belongs to, or None."""
        for sc in self.stages:
            if isinstance(sc.op, ScanOp) and sc is not st and any(st is b for b in self.scan_body(sc)):
                return sc
        return None

    def _check_scan_attach(self, st: Stage, parent: Stage, scope: IterVar) -> None:
        """compute_at rules around a scan: its update stays inside its loop, its init outside."""
        if isinstance(parent.op, ScanOp):
            if scope is not parent.op.scan_axis:
                raise ValueError(f"compute_at: the scan {parent.op.name}'s only loop is its "
                                 f"scan_axis {parent.op.scan_axis.var.name}, not {_ivname(scope)}")
            if any(self[t] is st for t in parent.op.init):
                raise ValueError(f"compute_at: {st.op.name} is the init of scan {parent.op.name}: "
                                 "it is computed before the scan's loop, not inside it")
        sc = self.scan_of(st)
        if sc is None or parent is sc or self.scan_of(parent) is sc:
            return
        assert isinstance(sc.op, ScanOp)
        body = [b.op.name for b in self.scan_body(sc) if b is not st]
        raise ValueError(
            f"compute_at: stage {st.op.name} is part of the update of scan {sc.op.name} (it reads "
            f"the scan's state), so it runs inside the scan's loop: compute it at "
            f"s[{sc.op.name}] (scan_axis {sc.op.scan_axis.var.name})"
            + (f" or at a loop of another stage of the update ({', '.join(body)})" if body else "")
            + f", not at {parent.op.name}")

    def _check_nothing_attached(self, st: Stage, what: str) -> None:
        for other in self.stages:
            if other.attach_type == SCOPE and other.attach_stage is st:
                raise ValueError(f"{what}: stage {other.op.name} is computed at a loop of {st.op.name}, "
                                 f"whose loops {what} replaces; call {what} before compute_at into it")

    def _set_op(self, st: Stage, op: Operation) -> None:
        st.op = op
        self.stage_map[op] = st

    def _insert(self, pos: int, st: Stage) -> None:
        self.stages.insert(pos, st)
        self.stage_map[st.op] = st

    # ---- data-flow primitives ----------------------------------------------------------------
    def cache_read(self, tensor: Tensor, scope: str, readers: Any) -> Tensor:
        """A copy ``tensor.scope`` of ``tensor`` in ``scope``, read by ``readers`` instead."""
        if not isinstance(tensor, Tensor):
            raise TypeError(f"cache_read: expected a Tensor, got {type(tensor).__name__}")
        _check_scope("cache_read", scope)
        src_stage = self[tensor]
        readers = list(readers) if isinstance(readers, (list, tuple)) else [readers]
        if not readers:
            raise ValueError("cache_read: needs at least one reader")
        name = f"{tensor.op.name}.{scope}" if tensor.op.num_outputs == 1 else f"{tensor.name}.{scope}"
        axis = [IterVar(E.Range(0, d), Var(f"ax{k}", d.dtype), IterVar.DataPar)
                for k, d in enumerate(tensor.shape)]
        cache = ComputeOp(name, "", {}, axis, [E.ProducerLoad(tensor, [iv.var for iv in axis])]).output(0)
        vsub = {_key(tensor): cache}
        vmap: dict[tuple[int, int], Tensor] = {}
        reader_stages: list[Stage] = []
        for r in readers:
            st = self[r]
            if any(st is x for x in reader_stages):
                continue
            reader_stages.append(st)
            new = replace_inputs(st.op, vsub)
            if new is st.op:
                raise ValueError(f"cache_read: {st.op.name} does not read {tensor.name}")
            for k in range(st.op.num_outputs):
                vmap[(id(st.op), k)] = new.output(k)
            self._set_op(st, new)
        self._replace_dataflow(vmap, skip=reader_stages)
        cst = Stage(cache.op, self)
        cst.scope = scope
        self._insert(self.stages.index(src_stage) + 1, cst)
        return cache

    def cache_write(self, tensor: Tensor | list[Tensor] | tuple[Tensor, ...], scope: str) -> Any:
        """Compute ``tensor`` into a ``scope`` buffer first; the original stage becomes a copy.
        For a reduction the cache stage does the reduction. Returns the cache tensor(s)."""
        tensors = list(tensor) if isinstance(tensor, (list, tuple)) else [tensor]
        for t in tensors:
            if not isinstance(t, Tensor):
                raise TypeError(f"cache_write: expected Tensors, got {type(t).__name__}")
        _check_scope("cache_write", scope)
        st = self[tensors[0]]
        op = st.op
        if not isinstance(op, ComputeOp):
            raise TypeError(f"cache_write: {op.name} is a placeholder; only computes can be cached")
        if any(self[t] is not st for t in tensors):
            raise ValueError("cache_write: all tensors must be outputs of the same operation")
        if st.relations or st.iter_var_attrs or st.attach_type != ROOT:
            raise ValueError(f"cache_write: stage {op.name} is already scheduled; call cache_write "
                             "before split/fuse/compute_at/annotations of that stage")
        self._check_nothing_attached(st, "cache_write")
        # the cache op: same computation on fresh axes
        vsub: dict[Var, Any] = {}
        new_axis = []
        for iv in op.axis:
            nv = IterVar(iv.dom, Var(iv.var.name + ".c", iv.var.dtype), iv.iter_type)
            vsub[iv.var] = nv.var
            new_axis.append(nv)
        new_raxis = []
        for iv in op.reduce_axis:
            nv = IterVar(iv.dom, Var(iv.var.name + ".c", iv.var.dtype), iv.iter_type)
            vsub[iv.var] = nv.var
            new_raxis.append(nv)
        from ..tir.functor import substitute

        body = rewrite_bodies(op.body, lambda e: substitute(e, vsub), new_raxis if op.reduce_axis else None)
        cache_op = ComputeOp(f"{op.name}.{scope}", op.tag, op.attrs, new_axis, body)
        idx = [iv.var for iv in op.axis]
        copy_body = [E.ProducerLoad(cache_op.output(k), idx) for k in range(op.num_outputs)]
        orig_new = ComputeOp(op.name, op.tag, op.attrs, op.axis, copy_body)
        vmap = {(id(op), k): orig_new.output(k) for k in range(op.num_outputs)}
        self._set_op(st, orig_new)
        st._reset_iter_vars()
        self._replace_dataflow(vmap, skip=[st])
        cst = Stage(cache_op, self)
        cst.scope = scope
        self._insert(self.stages.index(st), cst)
        outs = [cache_op.output(t.value_index) for t in tensors]
        return outs if isinstance(tensor, (list, tuple)) else outs[0]

    def rfactor(self, tensor: Tensor, axis: IterVar, factor_axis: int = 0) -> Any:
        """Factor a reduction: a new stage ``tensor.rf`` keeps ``axis`` as a data-parallel
        dimension (at ``factor_axis``) and reduces over the other reduction loops; ``tensor``'s
        stage then reduces ``tensor.rf`` over ``axis``. Returns the rf tensor (list if several)."""
        from .rfactor import rfactor

        return rfactor(self, tensor, axis, factor_axis)

    def normalize(self) -> Schedule:
        """Kept for TVM compatibility: lowering never mutates the schedule, nothing to do."""
        return self


_T = TypeVar("_T")


def post_order(roots: Iterable[_T], children: Callable[[_T], Iterable[_T]]) -> list[_T]:
    """Every node reachable from ``roots`` (by identity), each after all of its children.
    Iterative: a long chain of operators would exceed Python's recursion limit."""
    order: list[_T] = []
    seen: set[int] = set()
    for root in roots:
        if id(root) in seen:
            continue
        seen.add(id(root))
        stack = [(root, iter(children(root)))]
        while stack:
            cur, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                stack.pop()
                order.append(cur)
            elif id(nxt) not in seen:
                seen.add(id(nxt))
                stack.append((nxt, iter(children(nxt))))
    return order


def producer_ops(outs: Iterable[Tensor]) -> Iterator[Operation]:
    """Every operation the tensors ``outs`` are computed from (theirs included), each once, in
    stack order (depth first from the last output): the walk a schedule makes to find the
    stages it inlines or schedules."""
    seen: set[int] = set()
    stack = [t.op for t in outs]
    while stack:
        op = stack.pop()
        if id(op) in seen:
            continue
        seen.add(id(op))
        yield op
        stack.extend(t.op for t in op.input_tensors)


def create_schedule(ops: Any) -> Schedule:
    """A default schedule (one root loop nest per stage) for the given output op(s)/tensor(s)."""
    items = list(ops) if isinstance(ops, (list, tuple)) else [ops]
    out: list[Operation] = []
    for x in items:
        op = x.op if isinstance(x, Tensor) else x
        if not isinstance(op, Operation):
            raise TypeError(f"create_schedule: expected Operations or Tensors, got {type(x).__name__}")
        if isinstance(op, PlaceholderOp):
            raise ValueError(f"create_schedule: {op.name} is a placeholder, not a computation")
        if not any(op is o for o in out):
            out.append(op)
    return Schedule(out)


__all__ += ["ROOT", "INLINE", "SCOPE", "replace_inputs", "rewrite_bodies", "post_order",
            "producer_ops",
            "InferBound"]


def InferBound(sch: Schedule) -> dict[IterVar, E.Range]:  # noqa: N802 - TVM's name
    """TVM's ``te.schedule.InferBound``: the inferred range of every loop (IterVar) of every
    computed stage (a scan's ``scan_axis`` included), as lowering sees it."""
    from .bound import ScheduleView, infer_bound

    if not isinstance(sch, Schedule):
        raise TypeError(f"InferBound: expected a te.Schedule, got {type(sch).__name__}")
    return dict(infer_bound(ScheduleView(sch)).ranges)


def _check_scope(what: str, scope: Any) -> None:
    if not isinstance(scope, str) or not scope:
        raise TypeError(f"{what}: scope must be a string such as 'local' or 'shared', got "
                        f"{type(scope).__name__} {scope!r}")
