"""Transform steps: the serializable history of a :class:`State` (Ansor's transform_step.cc).

Each step names stages and loops by index (``stage_id`` into the DAG's stages as they stand
after the previous steps, ``iter_id`` into that stage's current loop list, outermost first), so
a history replays on a fresh schedule of the same compute and writes to a log as a JSON list
in TVM's record spelling (``["SP", stage_id, iter_id, extent, lengths, inner_to_outer]`` ...).

A split whose lengths are still ``None`` (a sketch before annotation) replays with length 1:
the loop structure is the same, so a sketch can be inspected and extended; a schedule to build
requires every length (``replay(..., check_complete=True)``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from ..te import schedule as te_schedule
from ..tir import expr as E

__all__ = ["Step", "SplitStep", "FollowSplitStep", "FuseStep", "ReorderStep", "AnnotationStep",
           "PragmaStep", "ComputeAtStep", "ComputeInlineStep", "ComputeRootStep",
           "CacheWriteStep", "CacheReadStep", "RfactorStep", "IteratorAnnotation",
           "step_from_record", "replay", "print_python", "ReplayContext"]


class IteratorAnnotation:
    """TVM's ``IteratorAnnotation`` numbering (the record's ``AN`` code)."""

    NONE = 0
    UNROLL = 1
    VECTORIZE = 2
    PARALLEL = 3
    VTHREAD = 4
    BLOCK_X = 5
    THREAD_X = 6
    BLOCK_Y = 7
    THREAD_Y = 8
    BLOCK_Z = 9
    THREAD_Z = 10
    TENSORIZE = 11
    NAMES: ClassVar[dict[int, str]] = {0: "", 1: "unroll", 2: "vectorize", 3: "parallel"}
    #: the thread annotations (GPU): ``AN`` binds the loop to this thread axis
    THREADS: ClassVar[dict[int, str]] = {4: "vthread", 5: "blockIdx.x", 6: "threadIdx.x",
                                         7: "blockIdx.y", 8: "threadIdx.y", 9: "blockIdx.z",
                                         10: "threadIdx.z"}


def _ceil_div(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else -(-a // b)


def _ident(name: str) -> str:
    s = re.sub(r"\W", "_", name)
    return s if s and not s[0].isdigit() else "_" + s


class ReplayContext:
    """A te schedule under construction from steps, with the extent of every loop (``None``
    where a split length is not chosen yet) and, when asked, the Python code of the steps."""

    def __init__(self, dag: Any, want_code: bool = False):
        self.dag = dag
        self.sch = te_schedule.create_schedule([t.op for t in dag.outputs])
        self.steps: list[Step] = []
        self._ext: dict[int, int | None] = {}
        self.code: list[str] | None = [] if want_code else None
        self._names: dict[int, str] = {}
        self._used: set[str] = set()
        if self.code is not None:
            for k in range(len(self.sch.stages)):
                self._declare_stage(k)

    @property
    def stages(self) -> list[Any]:
        return self.sch.stages

    def stage(self, stage_id: int, what: str) -> Any:
        if not isinstance(stage_id, int) or not 0 <= stage_id < len(self.stages):
            raise ValueError(f"{what}: stage id {stage_id!r} out of range (the state has "
                             f"{len(self.stages)} stages)")
        return self.stages[stage_id]

    def leaf(self, stage_id: int, iter_id: int, what: str) -> Any:
        st = self.stage(stage_id, what)
        leaves = st.leaf_iter_vars
        if not isinstance(iter_id, int) or not 0 <= iter_id < len(leaves):
            raise ValueError(f"{what}: iterator id {iter_id!r} out of range: stage "
                             f"{st.op.name} has {len(leaves)} loops")
        return leaves[iter_id]

    def extent(self, iv: Any) -> int | None:
        if id(iv) in self._ext:
            return self._ext[id(iv)]
        dom = iv.dom
        if dom is not None and isinstance(dom.extent, E.IntImm):
            return int(dom.extent.value)
        return None

    def set_extent(self, iv: Any, ext: int | None) -> None:
        self._ext[id(iv)] = ext

    # -- code printing --
    def name(self, iv: Any) -> str:
        n = self._names.get(id(iv))
        if n is None:
            base = _ident(iv.var.name)
            n, k = base, 0
            while n in self._used:
                k += 1
                n = f"{base}_{k}"
            self._used.add(n)
            self._names[id(iv)] = n
        return n

    def tname(self, stage_id: int) -> str:
        return _ident(self.stages[stage_id].op.name)

    def emit(self, line: str) -> None:
        if self.code is not None:
            self.code.append(line)

    def _declare_stage(self, k: int) -> None:
        st = self.stages[k]
        if not st.all_iter_vars:
            return
        names = [self.name(iv) for iv in st.leaf_iter_vars]
        t = self.tname(k)
        red = f" + tuple({t}.op.reduce_axis)" if getattr(st.op, "reduce_axis", ()) else ""
        self.emit(f"{', '.join(names)}, = tuple({t}.op.axis){red}")

    def declare_new_stages(self, before: list[Any]) -> None:
        if self.code is None:
            return
        for k, st in enumerate(self.stages):
            if not any(st is b for b in before):
                self._declare_stage(k)


@dataclass
class Step:
    """Base class: ``stage_id`` names the stage the step changes."""

    stage_id: int
    CODE: ClassVar[str] = ""

    def apply(self, ctx: ReplayContext) -> Any:
        raise NotImplementedError

    def to_record(self) -> list[Any]:
        raise NotImplementedError


def _split(ctx: ReplayContext, stage_id: int, iter_id: int, lengths: Sequence[int | None],
           inner_to_outer: bool, what: str) -> list[Any]:
    st = ctx.stage(stage_id, what)
    iv = ctx.leaf(stage_id, iter_id, what)
    for n in lengths:
        if n is not None and (not isinstance(n, int) or isinstance(n, bool) or n < 1):
            raise ValueError(f"{what}: split lengths must be positive integers or None, "
                             f"got {list(lengths)}")
    ext = ctx.extent(iv)
    t = ctx.tname(stage_id)
    if inner_to_outer:
        cur, inner = iv, []
        rest = ext
        for n in reversed(lengths):
            o, i = st.split(cur, factor=n or 1)
            ctx.set_extent(i, n)
            rest = _ceil_div(rest, n)
            ctx.set_extent(o, rest)
            ctx.emit(f"{ctx.name(o)}, {ctx.name(i)} = s[{t}].split({ctx.name(cur)}, factor={n})")
            inner.append(i)
            cur = o
        res = [cur, *reversed(inner)]
    else:
        cur, res = iv, []
        rest = ext
        for n in lengths:
            o, i = st.split(cur, nparts=n or 1)
            ctx.set_extent(o, n)
            rest = _ceil_div(rest, n)
            ctx.set_extent(i, rest)
            ctx.emit(f"{ctx.name(o)}, {ctx.name(i)} = s[{t}].split({ctx.name(cur)}, nparts={n})")
            res.append(o)
            cur = i
        res.append(cur)
    for other in ctx.stages:  # a stage computed at the split loop: at its innermost part (TVM)
        if other.attach_stage is st and other.attach_ivar is iv:
            other.compute_at(st, res[-1])
    return res


@dataclass
class SplitStep(Step):
    """Split loop ``iter_id`` into ``len(lengths) + 1`` loops; ``lengths`` are the extents of
    the inner loops, outermost first. ``inner_to_outer``: split by factors from the innermost
    (the outermost loop takes the rest, ceil-divided: non-divisible tails are guarded);
    else by nparts from the outermost."""

    iter_id: int = 0
    extent: int | None = None
    lengths: tuple[int | None, ...] = ()
    inner_to_outer: bool = True
    CODE: ClassVar[str] = "SP"

    def apply(self, ctx: ReplayContext) -> list[Any]:
        return _split(ctx, self.stage_id, self.iter_id, self.lengths, self.inner_to_outer, "split")

    def to_record(self) -> list[Any]:
        return ["SP", self.stage_id, self.iter_id, self.extent, list(self.lengths),
                int(self.inner_to_outer)]


@dataclass
class FollowSplitStep(Step):
    """Split loop ``iter_id`` like the split step ``src_step_id`` into ``n_split + 1`` loops:
    its first ``n_split - 1`` lengths, then the product of the rest (Ansor's FSP)."""

    iter_id: int = 0
    src_step_id: int = 0
    n_split: int = 1
    CODE: ClassVar[str] = "FSP"

    def lengths(self, steps: Sequence[Step]) -> list[int | None]:
        if not 0 <= self.src_step_id < len(steps) or not isinstance(steps[self.src_step_id], SplitStep):
            raise ValueError(f"follow_split: step {self.src_step_id} is not a split step")
        src = steps[self.src_step_id]
        assert isinstance(src, SplitStep)
        if not 1 <= self.n_split <= len(src.lengths):
            raise ValueError(f"follow_split: n_split={self.n_split} must be in 1.."
                             f"{len(src.lengths)} (the lengths of step {self.src_step_id})")
        out = list(src.lengths[:self.n_split - 1])
        last: int | None = 1
        for n in src.lengths[self.n_split - 1:]:
            last = None if last is None or n is None else last * n
        return [*out, last]

    def apply(self, ctx: ReplayContext) -> list[Any]:
        return _split(ctx, self.stage_id, self.iter_id, self.lengths(ctx.steps), True, "follow_split")

    def to_record(self) -> list[Any]:
        return ["FSP", self.stage_id, self.iter_id, self.src_step_id, self.n_split]


@dataclass
class FuseStep(Step):
    """Fuse the consecutive loops ``fused_ids`` into one. A stage computed at one of them is
    computed at the fused loop."""

    fused_ids: tuple[int, ...] = ()
    CODE: ClassVar[str] = "FU"

    def apply(self, ctx: ReplayContext) -> Any:
        st = ctx.stage(self.stage_id, "fuse")
        ids = list(self.fused_ids)
        if not ids or ids != list(range(ids[0], ids[0] + len(ids))):
            raise ValueError(f"fuse: iterator ids must be consecutive, got {ids}")
        ivs = [ctx.leaf(self.stage_id, i, "fuse") for i in ids]
        f = st.fuse(*ivs)
        ext: int | None = 1
        for iv in ivs:
            e = ctx.extent(iv)
            ext = None if ext is None or e is None else ext * e
        ctx.set_extent(f, ext)
        t = ctx.tname(self.stage_id)
        if len(ivs) > 1:
            ctx.emit(f"{ctx.name(f)} = s[{t}].fuse({', '.join(ctx.name(iv) for iv in ivs)})")
        for other in ctx.stages:
            if other.attach_stage is st and any(other.attach_ivar is iv for iv in ivs):
                other.compute_at(st, f)
        return f

    def to_record(self) -> list[Any]:
        return ["FU", self.stage_id, list(self.fused_ids)]


@dataclass
class ReorderStep(Step):
    """Put the stage's loops in the order ``after_ids`` (a permutation of its loop ids)."""

    after_ids: tuple[int, ...] = ()
    CODE: ClassVar[str] = "RE"

    def apply(self, ctx: ReplayContext) -> None:
        st = ctx.stage(self.stage_id, "reorder")
        n = len(st.leaf_iter_vars)
        if sorted(self.after_ids) != list(range(n)):
            raise ValueError(f"reorder: {list(self.after_ids)} is not a permutation of the "
                             f"{n} loops of stage {st.op.name}")
        ivs = [st.leaf_iter_vars[i] for i in self.after_ids]
        st.reorder(*ivs)
        ctx.emit(f"s[{ctx.tname(self.stage_id)}].reorder({', '.join(ctx.name(iv) for iv in ivs)})")

    def to_record(self) -> list[Any]:
        return ["RE", self.stage_id, list(self.after_ids)]


@dataclass
class AnnotationStep(Step):
    """Mark loop ``iter_id`` unrolled / vectorized / parallel, or bind it to a GPU thread
    axis (vthread, blockIdx.x, threadIdx.x, ...: IteratorAnnotation codes 4..10)."""

    iter_id: int = 0
    annotation: int = IteratorAnnotation.NONE
    CODE: ClassVar[str] = "AN"

    def apply(self, ctx: ReplayContext) -> None:
        st = ctx.stage(self.stage_id, "annotation")
        iv = ctx.leaf(self.stage_id, self.iter_id, "annotation")
        thread = IteratorAnnotation.THREADS.get(self.annotation)
        if thread is not None:  # bind to a GPU thread axis (Ansor's thread annotations)
            from ..te.tensor import thread_axis

            st.bind(iv, thread_axis(thread))
            ctx.emit(f"s[{ctx.tname(self.stage_id)}].bind({ctx.name(iv)}, "
                     f"te.thread_axis(\"{thread}\"))")
            return
        name = IteratorAnnotation.NAMES.get(self.annotation)
        if name is None:
            raise ValueError(f"annotation: {self.annotation} is not an annotation "
                             "(0 none, 1 unroll, 2 vectorize, 3 parallel, 4..10 thread bindings)")
        if name:
            getattr(st, name)(iv)
            ctx.emit(f"s[{ctx.tname(self.stage_id)}].{name}({ctx.name(iv)})")

    def to_record(self) -> list[Any]:
        return ["AN", self.stage_id, self.iter_id, self.annotation]


@dataclass
class PragmaStep(Step):
    """``pragma_type`` is ``"auto_unroll_max_step$N"`` (Ansor's spelling), ``"prefetch$N"``
    (software prefetches of the loop's streamed vector loads N bytes ahead, the pragma of
    ``tir.transform.InjectPrefetch``; N = 0: none) or a pragma name."""

    iter_id: int = 0
    pragma_type: str = ""
    CODE: ClassVar[str] = "PR"

    def apply(self, ctx: ReplayContext) -> None:
        st = ctx.stage(self.stage_id, "pragma")
        iv = ctx.leaf(self.stage_id, self.iter_id, "pragma")
        if self.pragma_type.startswith("auto_unroll_max_step"):
            _, _, v = self.pragma_type.partition("$")
            if not v.isdigit():
                raise ValueError(f"pragma: expected auto_unroll_max_step$<int>, got {self.pragma_type!r}")
            st.pragma(iv, "auto_unroll_max_step", int(v))
            ctx.emit(f"s[{ctx.tname(self.stage_id)}].pragma({ctx.name(iv)}, "
                     f"\"auto_unroll_max_step\", {int(v)})")
        elif self.pragma_type.startswith("prefetch$"):
            _, _, v = self.pragma_type.partition("$")
            if not v.isdigit():
                raise ValueError(f"pragma: expected prefetch$<bytes>, got {self.pragma_type!r}")
            if int(v):
                st.pragma(iv, "prefetch", int(v))
                ctx.emit(f"s[{ctx.tname(self.stage_id)}].pragma({ctx.name(iv)}, "
                         f"\"prefetch\", {int(v)})")
        elif self.pragma_type == "debug_skip_region":
            pass
        else:
            st.pragma(iv, self.pragma_type)
            ctx.emit(f"s[{ctx.tname(self.stage_id)}].pragma({ctx.name(iv)}, \"{self.pragma_type}\")")

    def to_record(self) -> list[Any]:
        return ["PR", self.stage_id, self.iter_id, self.pragma_type]


@dataclass
class ComputeAtStep(Step):
    target_stage_id: int = 0
    target_iter_id: int = 0
    CODE: ClassVar[str] = "CA"

    def apply(self, ctx: ReplayContext) -> None:
        st = ctx.stage(self.stage_id, "compute_at")
        tgt = ctx.stage(self.target_stage_id, "compute_at")
        iv = ctx.leaf(self.target_stage_id, self.target_iter_id, "compute_at")
        st.compute_at(tgt, iv)
        ctx.emit(f"s[{ctx.tname(self.stage_id)}].compute_at(s[{ctx.tname(self.target_stage_id)}], "
                 f"{ctx.name(iv)})")

    def to_record(self) -> list[Any]:
        return ["CA", self.stage_id, self.target_stage_id, self.target_iter_id]


@dataclass
class ComputeInlineStep(Step):
    CODE: ClassVar[str] = "CI"

    def apply(self, ctx: ReplayContext) -> None:
        ctx.stage(self.stage_id, "compute_inline").compute_inline()
        ctx.emit(f"s[{ctx.tname(self.stage_id)}].compute_inline()")

    def to_record(self) -> list[Any]:
        return ["CI", self.stage_id]


@dataclass
class ComputeRootStep(Step):
    CODE: ClassVar[str] = "CR"

    def apply(self, ctx: ReplayContext) -> None:
        ctx.stage(self.stage_id, "compute_root").compute_root()
        ctx.emit(f"s[{ctx.tname(self.stage_id)}].compute_root()")

    def to_record(self) -> list[Any]:
        return ["CR", self.stage_id]


@dataclass
class CacheWriteStep(Step):
    """Compute the stage into a ``scope_name`` buffer first: a new stage at ``stage_id``
    (the cache), the original (now a copy) moves to ``stage_id + 1``."""

    scope_name: str = "local"
    CODE: ClassVar[str] = "CHW"

    def apply(self, ctx: ReplayContext) -> None:
        st = ctx.stage(self.stage_id, "cache_write")
        before = list(ctx.stages)
        outs = [st.op.output(k) for k in range(st.op.num_outputs)]
        t = ctx.tname(self.stage_id)
        ctx.sch.cache_write(outs if len(outs) > 1 else outs[0], self.scope_name)
        ctx.emit(f"{_ident(st.op.name + '.' + self.scope_name)} = s.cache_write({t}, "
                 f"\"{self.scope_name}\")")
        ctx.declare_new_stages([b for b in before if b is not st])

    def to_record(self) -> list[Any]:
        return ["CHW", self.stage_id, self.scope_name]


@dataclass
class CacheReadStep(Step):
    """Read the stage's output through a ``scope_name`` copy (a new stage at ``stage_id + 1``)
    in the stages ``reader_stage_ids``."""

    scope_name: str = "local"
    reader_stage_ids: tuple[int, ...] = ()
    CODE: ClassVar[str] = "CHR"

    def apply(self, ctx: ReplayContext) -> None:
        st = ctx.stage(self.stage_id, "cache_read")
        readers = [ctx.stage(r, "cache_read").op for r in self.reader_stage_ids]
        before = list(ctx.stages)
        t = ctx.tname(self.stage_id)
        names = [ctx.tname(r) for r in self.reader_stage_ids]
        ctx.sch.cache_read(st.op.output(0), self.scope_name, readers)
        ctx.emit(f"{_ident(st.op.name + '.' + self.scope_name)} = s.cache_read({t}, "
                 f"\"{self.scope_name}\", [{', '.join(names)}])")
        ctx.declare_new_stages(before)

    def to_record(self) -> list[Any]:
        return ["CHR", self.stage_id, self.scope_name, list(self.reader_stage_ids)]


@dataclass
class RfactorStep(Step):
    """Factor the reduction over loop ``iter_id``: a new stage ``.rf`` at ``stage_id`` keeps
    it as a data-parallel axis at ``factor_iter_id``; the original reduces the partials."""

    iter_id: int = 0
    factor_iter_id: int = 0
    CODE: ClassVar[str] = "RF"

    def apply(self, ctx: ReplayContext) -> None:
        st = ctx.stage(self.stage_id, "rfactor")
        iv = ctx.leaf(self.stage_id, self.iter_id, "rfactor")
        before = list(ctx.stages)
        t = ctx.tname(self.stage_id)
        ctx.sch.rfactor(st.op.output(0), iv, self.factor_iter_id)
        ctx.emit(f"{_ident(st.op.name + '.rf')} = s.rfactor({t}, {ctx.name(iv)}, "
                 f"factor_axis={self.factor_iter_id})")
        ctx.declare_new_stages([b for b in before if b is not st])
        # the original stage's loops changed: declare them again
        ctx._declare_stage(ctx.stages.index(st))

    def to_record(self) -> list[Any]:
        return ["RF", self.stage_id, self.iter_id, self.factor_iter_id]


def _int(x: Any, what: str) -> int:
    if not isinstance(x, int) or isinstance(x, bool):
        raise ValueError(f"bad step record: {what} must be an integer, got {x!r}")
    return x


def step_from_record(rec: Sequence[Any]) -> Step:
    """The step of a record list (``["SP", 2, 0, 512, [8, 4], 1]`` ...)."""
    if not isinstance(rec, (list, tuple)) or not rec or not isinstance(rec[0], str):
        raise ValueError(f"bad step record {rec!r}: expected [code, ...]")
    code, args = rec[0], list(rec[1:])
    try:
        if code == "SP":
            sid, it, ext, lengths, i2o = args
            return SplitStep(_int(sid, "stage"), _int(it, "iter"), ext,
                             tuple(None if n is None else _int(n, "length") for n in lengths),
                             bool(i2o))
        if code == "FSP":
            sid, it, src, n = args
            return FollowSplitStep(_int(sid, "stage"), _int(it, "iter"), _int(src, "src step"),
                                   _int(n, "n_split"))
        if code == "FU":
            sid, ids = args
            return FuseStep(_int(sid, "stage"), tuple(_int(i, "iter") for i in ids))
        if code == "RE":
            sid, ids = args
            return ReorderStep(_int(sid, "stage"), tuple(_int(i, "iter") for i in ids))
        if code == "AN":
            sid, it, ann = args
            return AnnotationStep(_int(sid, "stage"), _int(it, "iter"), _int(ann, "annotation"))
        if code == "PR":
            sid, it, p = args
            return PragmaStep(_int(sid, "stage"), _int(it, "iter"), str(p))
        if code == "CA":
            sid, ts, ti = args
            return ComputeAtStep(_int(sid, "stage"), _int(ts, "target stage"), _int(ti, "target iter"))
        if code == "CI":
            (sid,) = args
            return ComputeInlineStep(_int(sid, "stage"))
        if code == "CR":
            (sid,) = args
            return ComputeRootStep(_int(sid, "stage"))
        if code == "CHW":
            sid, scope = args
            return CacheWriteStep(_int(sid, "stage"), str(scope))
        if code == "CHR":
            sid, scope, readers = args
            return CacheReadStep(_int(sid, "stage"), str(scope),
                                 tuple(_int(r, "reader") for r in readers))
        if code == "RF":
            sid, it, fi = args
            return RfactorStep(_int(sid, "stage"), _int(it, "iter"), _int(fi, "factor iter"))
    except (TypeError, ValueError) as e:
        if isinstance(e, ValueError) and str(e).startswith("bad step record"):
            raise
        raise ValueError(f"bad step record {list(rec)!r}: {e}") from None
    raise ValueError(f"bad step record {list(rec)!r}: unknown step code {code!r}")


def apply_step(ctx: ReplayContext, step: Step) -> Any:
    """Apply one step to ``ctx`` and remember it (follow splits read earlier steps)."""
    res = step.apply(ctx)
    ctx.steps.append(step)
    return res


def replay(dag: Any, steps: Sequence[Step], check_complete: bool = False,
           want_code: bool = False) -> ReplayContext:
    """Apply ``steps`` in order to a fresh schedule of ``dag``."""
    if check_complete:
        for k, s in enumerate(steps):
            if isinstance(s, SplitStep) and any(n is None for n in s.lengths):
                raise ValueError(f"step {k} ({s.to_record()}) has split lengths not chosen yet: "
                                 "a sketch must be annotated before it is built")
    ctx = ReplayContext(dag, want_code)
    for k, s in enumerate(steps):
        try:
            apply_step(ctx, s)
        except (ValueError, TypeError) as e:
            raise ValueError(f"step {k} {s.to_record()} does not apply: {e}") from e
    return ctx


def print_python(dag: Any, steps: Sequence[Step]) -> str:
    ctx = replay(dag, steps, want_code=True)
    assert ctx.code is not None
    return "\n".join(ctx.code) + "\n"
