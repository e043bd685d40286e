"""``State``: a schedule as a list of transform steps, with a view of its stages and loops
(Ansor's loop_state.cc).

The view comes from replaying the steps on a te schedule of the DAG (kept while steps are
appended, rebuilt after ``copy``), so what the state shows is exactly what the schedule will
be. Stages and loops are addressed like TVM's ``State``: a stage by id, ``te.Tensor`` or
operation; a loop by id into the stage's loop list or by the :class:`Iterator` a previous call
returned.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..te.tensor import Operation, Tensor
from ..tir.expr import IterVar
from . import transform_step as ts
from .transform_step import IteratorAnnotation, ReplayContext, Step

__all__ = ["State", "Stage", "Iterator", "ComputeAtKind", "IteratorKind"]


class IteratorKind:
    SPATIAL = 0
    REDUCTION = 1


class ComputeAtKind:
    ROOT = 0
    INLINED = 1
    ITER = 2


@dataclass(frozen=True)
class Iterator:
    """One loop of a stage: ``name``, ``extent`` (None where a split length is not chosen
    yet), ``iter_kind`` (IteratorKind), ``annotation`` (IteratorAnnotation)."""

    name: str
    extent: int | None
    iter_kind: int
    annotation: int
    stage_id: int
    index: int


@dataclass(frozen=True)
class Stage:
    """One stage of a state: its operation, loops and where it is computed."""

    op: Operation
    op_name: str
    iters: tuple[Iterator, ...]
    compute_at: int  # ComputeAtKind
    attach: tuple[int, int] | None  # (stage id, iterator id) for ComputeAtKind.ITER
    is_placeholder: bool


_KIND_TO_ANN = {IterVar.Unrolled: IteratorAnnotation.UNROLL,
                IterVar.Vectorized: IteratorAnnotation.VECTORIZE,
                IterVar.Parallelized: IteratorAnnotation.PARALLEL}

_THREAD_TO_ANN = {v: k for k, v in IteratorAnnotation.THREADS.items()}


def _ann_name(ann: int) -> str:
    return IteratorAnnotation.NAMES.get(ann) or IteratorAnnotation.THREADS.get(ann, str(ann))


class State:
    """A point of the search space: ``dag`` and the ``transform_steps`` applied to it."""

    def __init__(self, dag: Any, steps: Sequence[Step] = ()):
        self.dag = dag
        self.transform_steps: list[Step] = list(steps)
        self._ctx: ReplayContext | None = None

    # ---- the view ---------------------------------------------------------------------------
    @property
    def ctx(self) -> ReplayContext:
        if self._ctx is None:
            self._ctx = ts.replay(self.dag, self.transform_steps)
        return self._ctx

    @property
    def stages(self) -> list[Stage]:
        return [self._stage_view(k) for k in range(len(self.ctx.stages))]

    def _stage_view(self, k: int) -> Stage:
        ctx = self.ctx
        st = ctx.stages[k]
        iters = []
        for i, iv in enumerate(st.leaf_iter_vars):
            attr = st.iter_var_attrs.get(iv)
            ann = _KIND_TO_ANN.get(attr.kind, 0) if attr is not None else 0
            if attr is not None and attr.bind_thread is not None:
                ann = _THREAD_TO_ANN.get(attr.bind_thread.thread_tag, 0)
            kind = IteratorKind.REDUCTION if iv.iter_type == IterVar.CommReduce else IteratorKind.SPATIAL
            iters.append(Iterator(iv.var.name, ctx.extent(iv), kind, ann, k, i))
        attach = None
        if st.attach_type == 2 or st.attach_stage is not None:  # te's SCOPE
            a = st.attach_stage
            ai = ctx.stages.index(a)
            ii = next((i for i, iv in enumerate(a.leaf_iter_vars) if iv is st.attach_ivar), -1)
            attach = (ai, ii)
            cat = ComputeAtKind.ITER
        else:
            from ..te.schedule import INLINE

            cat = ComputeAtKind.INLINED if st.attach_type == INLINE else ComputeAtKind.ROOT
        return Stage(st.op, st.op.name, tuple(iters), cat, attach, not st.all_iter_vars)

    def __getitem__(self, stage: Any) -> Stage:
        return self._stage_view(self.stage_id(stage))

    def stage_id(self, stage: Any) -> int:
        if isinstance(stage, Stage):
            stage = stage.op
        if isinstance(stage, bool) or not isinstance(stage, (int, Tensor, Operation)):
            raise TypeError(f"expected a stage id, te.Tensor or operation, got {stage!r}")
        if isinstance(stage, int):
            if not 0 <= stage < len(self.ctx.stages):
                raise ValueError(f"stage id {stage} out of range ({len(self.ctx.stages)} stages)")
            return stage
        op = stage.op if isinstance(stage, Tensor) else stage
        for k, st in enumerate(self.ctx.stages):
            if st.op is op or st.origin_op is op:
                return k
        name = op.name
        hits = [k for k, st in enumerate(self.ctx.stages) if st.op.name == name]
        if len(hits) == 1:  # a tensor of another DAG of the same workload
            return hits[0]
        raise ValueError(f"{name!r} is not a stage of this state")

    def iter_id(self, stage_id: int, it: Any) -> int:
        leaves = self.ctx.stages[stage_id].leaf_iter_vars
        if isinstance(it, bool):
            raise TypeError(f"expected an iterator, got {it!r}")
        if isinstance(it, int):
            if not 0 <= it < len(leaves):
                raise ValueError(f"iterator id {it} out of range: the stage has {len(leaves)} loops")
            return it
        if isinstance(it, Iterator):
            for i, iv in enumerate(leaves):
                if iv.var.name == it.name:
                    return i
            raise ValueError(f"iterator {it.name!r} is not a loop of stage "
                             f"{self.ctx.stages[stage_id].op.name} any more")
        raise TypeError(f"expected an Iterator or a loop index, got {type(it).__name__}")

    # ---- steps ------------------------------------------------------------------------------
    def add_step(self, step: Step) -> Any:
        """Apply ``step`` and append it to the history (unchanged if it does not apply)."""
        ctx = self.ctx
        try:
            res = ts.apply_step(ctx, step)
        except Exception:
            self._ctx = None  # the te schedule may be half-changed: replay on next use
            raise
        self.transform_steps.append(step)
        return res

    def _iters_of(self, stage_id: int, ivs: Sequence[Any]) -> list[Iterator]:
        view = self._stage_view(stage_id)
        leaves = self.ctx.stages[stage_id].leaf_iter_vars
        return [view.iters[next(i for i, x in enumerate(leaves) if x is iv)] for iv in ivs]

    def split(self, stage: Any, iterator: Any, lengths: Sequence[int | None],
              inner_to_outer: bool = True) -> list[Iterator]:
        sid = self.stage_id(stage)
        it = self.iter_id(sid, iterator)
        ext = self.ctx.extent(self.ctx.stages[sid].leaf_iter_vars[it])
        ivs = self.add_step(ts.SplitStep(sid, it, ext, tuple(lengths), inner_to_outer))
        return self._iters_of(sid, ivs)

    def follow_split(self, stage: Any, iterator: Any, src_step_id: int, n_split: int) -> list[Iterator]:
        sid = self.stage_id(stage)
        ivs = self.add_step(ts.FollowSplitStep(sid, self.iter_id(sid, iterator), src_step_id, n_split))
        return self._iters_of(sid, ivs)

    def fuse(self, stage: Any, iters: Sequence[Any]) -> Iterator:
        sid = self.stage_id(stage)
        iv = self.add_step(ts.FuseStep(sid, tuple(self.iter_id(sid, i) for i in iters)))
        return self._iters_of(sid, [iv])[0]

    def reorder(self, stage: Any, order: Sequence[Any]) -> None:
        sid = self.stage_id(stage)
        self.add_step(ts.ReorderStep(sid, tuple(self.iter_id(sid, i) for i in order)))

    def compute_at(self, stage: Any, target_stage: Any, target_iter: Any) -> None:
        sid, tid = self.stage_id(stage), self.stage_id(target_stage)
        self.add_step(ts.ComputeAtStep(sid, tid, self.iter_id(tid, target_iter)))

    def compute_inline(self, stage: Any) -> None:
        self.add_step(ts.ComputeInlineStep(self.stage_id(stage)))

    def compute_root(self, stage: Any) -> None:
        self.add_step(ts.ComputeRootStep(self.stage_id(stage)))

    def _annotate(self, stage: Any, iterator: Any, ann: int) -> Iterator:
        sid = self.stage_id(stage)
        it = self.iter_id(sid, iterator)
        self.add_step(ts.AnnotationStep(sid, it, ann))
        return self._stage_view(sid).iters[it]

    def parallel(self, stage: Any, iterator: Any) -> Iterator:
        return self._annotate(stage, iterator, IteratorAnnotation.PARALLEL)

    def vectorize(self, stage: Any, iterator: Any) -> Iterator:
        return self._annotate(stage, iterator, IteratorAnnotation.VECTORIZE)

    def unroll(self, stage: Any, iterator: Any, max_unroll: int | None = None) -> Iterator:
        return self._annotate(stage, iterator, IteratorAnnotation.UNROLL)

    def bind(self, stage: Any, iterator: Any, thread_name: str) -> Iterator:
        """Bind a loop to a GPU thread axis: ``"vthread"``, ``"blockIdx.x"``, ``"threadIdx.x"``..."""
        codes = {v: k for k, v in IteratorAnnotation.THREADS.items()}
        if thread_name not in codes:
            raise ValueError(f"bind: unknown thread axis {thread_name!r} (one of {sorted(codes)})")
        return self._annotate(stage, iterator, codes[thread_name])

    def pragma(self, stage: Any, iterator: Any, pragma_type: str) -> None:
        sid = self.stage_id(stage)
        self.add_step(ts.PragmaStep(sid, self.iter_id(sid, iterator), pragma_type))

    def cache_write(self, stage: Any, scope_name: str) -> int:
        """Returns the id of the new cache stage (the original moves one place later)."""
        sid = self.stage_id(stage)
        self.add_step(ts.CacheWriteStep(sid, scope_name))
        return sid

    def cache_read(self, stage: Any, scope_name: str, reader_stages: Sequence[Any]) -> int:
        sid = self.stage_id(stage)
        readers = tuple(self.stage_id(r) for r in reader_stages)
        self.add_step(ts.CacheReadStep(sid, scope_name, readers))
        return sid + 1

    def rfactor(self, stage: Any, iterator: Any, factor_iter_id: int) -> int:
        """Returns the id of the new ``.rf`` stage (the original moves one place later)."""
        sid = self.stage_id(stage)
        self.add_step(ts.RfactorStep(sid, self.iter_id(sid, iterator), factor_iter_id))
        return sid

    # ---- misc -------------------------------------------------------------------------------
    def copy(self) -> State:
        return State(self.dag, self.transform_steps)

    def is_complete(self) -> bool:
        """Every split length chosen (an annotated state, not a sketch)."""
        return not any(isinstance(s, ts.SplitStep) and None in s.lengths
                       for s in self.transform_steps)

    def __str__(self) -> str:
        lines = []
        for k, st in enumerate(self.stages):
            if st.is_placeholder:
                lines.append(f"Placeholder: {st.op_name}")
                continue
            where = {ComputeAtKind.ROOT: "root", ComputeAtKind.INLINED: "inlined"}.get(
                st.compute_at, f"at {st.attach}")
            loops = ", ".join(f"{i.name}({i.extent})" + (f"[{_ann_name(i.annotation)}]"
                                                        if i.annotation else "") for i in st.iters)
            lines.append(f"{k} {st.op_name} ({where}): {loops}")
        return "\n".join(lines)
