"""Sketch rules and random annotation for GPU targets (cuda, opencl, nvptx): Ansor's GPU
rules of sketch_policy_rules.cc, written for tvmpy's te.

Sketch rules, walked from the last stage to the first as on CPU:

- always-inline: every injective stage that is not an output (on a GPU recomputing a cheap
  expression beats a trip through global memory, branches and exp included);
- cross-thread reduction: a reduction without data reuse (or with too little spatial work
  for its reduction) fuses its reduction loops and splits them; annotation binds the inner
  part to ``threadIdx.x`` (te lowers that to ``tvm_thread_allreduce``: see
  tir/transform/thread_allreduce.py) and the spatial loops to ``blockIdx.x``;
- add cache-write: a stage that needs multi-level tiling and has no elementwise consumer is
  computed into a ``local`` (register) stage first;
- multi-level tiling with fusion: the stage is tiled "SSSRRSRS" (spatial levels: block,
  vthread, thread, two inner; reduction: an outer level and two inner), its elementwise
  consumer follows the first three spatial levels and the stage is computed at the consumer's
  thread level; each input of the stage is then read through a ``shared`` cache stage computed
  at the last loop of the outermost reduction tile (one tile of the operands per step of the
  outer reduction loop);
- skip. (A tiled stage always has a consumer to fuse on a GPU: the cache-write gives it one.)

Annotation (``annotate_gpu``) fills the tile sizes within the target's limits (threads per
block, virtual threads, shared memory), fuses each tiled consumer's levels and binds them to
``blockIdx.x`` / ``vthread`` / ``threadIdx.x``, makes the shared stages fetch cooperatively
(their fused loop split by the block's thread count, the inner part bound to ``threadIdx.x``),
binds the remaining root stages (fused, split, ``blockIdx.x`` x ``threadIdx.x``) and puts an
``auto_unroll_max_step`` pragma on reductions.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any

from ..ir.dtype import bytes_of
from ..te.schedule import INLINE, ROOT, InferBound
from ..te.tensor import ComputeOp
from ..tir import expr as E
from ..tir.expr import IterVar
from . import transform_step as ts
from .loop_state import State
from .sketch_policy import (
    APPLY,
    APPLY_AND_SKIP_REST,
    PASS,
    Rule,
    _cum_lengths,
    _is_compute,
    _te_stage,
    elementwise_matched_consumer,
    needs_multi_level_tiling,
    sample_tile_lengths,
)

__all__ = ["GPU_SKETCH_RULES", "SKETCH_RULES", "GPUParams", "annotate_gpu", "annotate_task",
           "GPU_TILE_FORMAT", "GPU_AUTO_UNROLL_CONFIGS", "reference_state", "shared_memory_bytes"]

GPU_TILE_FORMAT = "SSSRRSRS"
GPU_AUTO_UNROLL_CONFIGS = (0, 16, 64, 512, 1024)
_FUSE_LEVELS = 3  # block, vthread, thread: the consumer follows these, the stage sits inside


@dataclass(frozen=True)
class GPUParams:
    """The limits a GPU schedule must keep (from the target: ``max_num_threads``,
    ``max_shared_memory_per_block``; ``max_vthread_extent`` as TVM's default)."""

    max_threads_per_block: int
    max_shared_memory_per_block: int
    max_vthread_extent: int = 8
    max_innermost_split_factor: int = 64
    max_local_tile: int = 256  # accumulators per thread (vthreads x inner tiles)

    @staticmethod
    def for_target(target: Any) -> GPUParams:
        from ..target import as_target

        t = as_target(target)
        threads = int(getattr(t, "max_num_threads", 0) or 0)
        smem = int(getattr(t, "max_shared_memory_per_block", 0) or 0)
        if threads <= 0 or smem <= 0:
            raise ValueError(f"GPU sketch rules: target {t} has no GPU limits "
                             "(max_num_threads, max_shared_memory_per_block)")
        return GPUParams(threads, smem)


# ---- conditions ----------------------------------------------------------------------------------
def _is_cache(s: State, k: int) -> bool:
    return _te_stage(s, k).op.name.endswith((".local", ".shared"))


def _fresh_root(s: State, k: int) -> bool:
    st = _te_stage(s, k)
    return _is_compute(st) and st.attach_type == ROOT and not st.relations


def needs_cross_thread_reduction(s: State, k: int) -> bool:
    """Ansor's NeedsCrossThreadReduction on a GPU: a reduction that does not need tiling, or
    whose spatial work is smaller than its reduction."""
    st = _te_stage(s, k)
    if not _fresh_root(s, k) or not st.op.reduce_axis or _is_cache(s, k):
        return False
    space, red = _cum_lengths(st)
    if needs_multi_level_tiling(s, k):
        return space < red
    return red > 1


# ---- rules ---------------------------------------------------------------------------------------
def _inline_cond(s: State, k: int, hp: Any) -> int:
    st = _te_stage(s, k)
    ok = _fresh_root(s, k) and not st.is_output and not st.op.reduce_axis and not _is_cache(s, k)
    return APPLY_AND_SKIP_REST if ok else PASS


def _inline_apply(s: State, k: int, hp: Any) -> list[tuple[State, int]]:
    n = s.copy()
    n.compute_inline(k)
    return [(n, k - 1)]


def _cross_thread_cond(s: State, k: int, hp: Any) -> int:
    if not needs_cross_thread_reduction(s, k):
        return PASS
    return APPLY if needs_multi_level_tiling(s, k) else APPLY_AND_SKIP_REST


def _cross_thread_apply(s: State, k: int, hp: Any) -> list[tuple[State, int]]:
    n = s.copy()
    iters = n[k].iters
    red = [i for i in iters if i.iter_kind == 1]
    n_space = len(iters) - len(red)
    if [i.index for i in red] != list(range(n_space, len(iters))):
        return []
    fused = n.fuse(k, red) if len(red) > 1 else red[0]
    outer, inner = n.split(k, fused, [None])  # inner: the threads (annotation binds it)
    # the thread loop outside the serial one: each thread sums its strided share, then one
    # allreduce (the other order would combine across the threads once per serial step)
    n.reorder(k, list(range(n_space)) + [inner.index, outer.index])
    return [(n, k - 1)]


def _cache_write_cond(s: State, k: int, hp: Any) -> int:
    if not _fresh_root(s, k) or _is_cache(s, k) or not needs_multi_level_tiling(s, k):
        return PASS
    return APPLY_AND_SKIP_REST if elementwise_matched_consumer(s, k) is None else PASS


def _cache_write_apply(s: State, k: int, hp: Any) -> list[tuple[State, int]]:
    n = s.copy()
    n.cache_write(k, "local")
    return [(n, k)]  # stage k is the cache now, its copy (k + 1) the consumer to fuse


def _stage_index(s: State, name: str) -> int:
    return next(i for i, st in enumerate(s.ctx.stages) if st.op.name == name)


def tile_for_threads(s: State, k: int, consumer: int) -> None:
    """Ansor's GPU multi-level tiling "SSSRRSRS" of stage ``k`` fused into ``consumer``: the
    consumer's spatial loops split into block / vthread / thread / inner levels (bound by the
    annotation), stage ``k`` computed at the consumer's thread level and tiled inside it:
    the per-thread tile of each spatial loop split in two ("S" levels 3 and 4, the first three
    levels being the consumer's), the reduction in three ("RRR"), ordered "S RR S R S".

    The consumer's innermost length is the product of the stage's two inner lengths (the
    annotation keeps them equal; a mismatch stays correct, te guards the tail). The stage
    splits its own per-thread region rather than following the consumer's split (TVM's FSP):
    te keeps a split's inner extent at its factor where TVM tightens it to the parent's,
    so the stage's block/vthread/thread levels would loop under guards inside each thread."""
    levels: list[list[Any]] = [[] for _ in range(_FUSE_LEVELS + 1)]
    for it in [i for i in s[consumer].iters if i.iter_kind == 0]:
        for lv, p in zip(levels, s.split(consumer, it, [None] * _FUSE_LEVELS)):
            lv.append(p)
    s.reorder(consumer, [p for lv in levels for p in lv])
    n_space = len(levels[0])
    s.compute_at(k, consumer, _FUSE_LEVELS * n_space - 1)
    sp: list[list[Any]] = [[], [], []]
    rd: list[list[Any]] = [[], [], []]
    for it in list(s[k].iters):
        parts = s.split(k, it, [None, None])
        for lv, p in zip(sp if it.iter_kind == 0 else rd, parts):
            lv.append(p)
    s.reorder(k, sp[0] + rd[0] + rd[1] + sp[1] + rd[2] + sp[2])


def add_shared_cache_reads(s: State, k: int) -> int:
    """Read every input of the tiled stage ``k`` through a ``shared`` stage computed at the
    last loop of its outermost reduction tile; returns the stage's new id."""
    name = s.ctx.stages[k].op.name
    n_space = sum(1 for it in s[k].iters if it.iter_kind == 0) // 3
    n_red = sum(1 for it in s[k].iters if it.iter_kind == 1) // 3
    if n_red == 0:
        return k
    at = n_space + n_red - 1  # the outer spatial level, then the first "R" level's last loop
    inputs = [t.op.name for t in s.ctx.stages[k].op.input_tensors]
    for inp in dict.fromkeys(inputs):
        p = _stage_index(s, inp)
        sid = s.cache_read(p, "shared", [_stage_index(s, name)])
        s.compute_at(sid, _stage_index(s, name), at)
    return _stage_index(s, name)


def _mlt_fusion_cond(s: State, k: int, hp: Any) -> int:
    if not _fresh_root(s, k) or not needs_multi_level_tiling(s, k):
        return PASS
    return PASS if elementwise_matched_consumer(s, k) is None else APPLY_AND_SKIP_REST


def _mlt_fusion_apply(s: State, k: int, hp: Any) -> list[tuple[State, int]]:
    target = elementwise_matched_consumer(s, k)
    assert target is not None
    n = s.copy()
    tile_for_threads(n, k, target)
    k = add_shared_cache_reads(n, k)
    return [(n, k - 1)]


def _skip_cond(s: State, k: int, hp: Any) -> int:
    return APPLY


def _skip_apply(s: State, k: int, hp: Any) -> list[tuple[State, int]]:
    return [(s, k - 1)]


GPU_SKETCH_RULES: list[Rule] = [
    ("always_inline", _inline_cond, _inline_apply),
    ("cross_thread_reduction", _cross_thread_cond, _cross_thread_apply),
    ("add_cache_write", _cache_write_cond, _cache_write_apply),
    ("multi_level_tiling_with_fusion", _mlt_fusion_cond, _mlt_fusion_apply),
    ("skip", _skip_cond, _skip_apply),
]
SKETCH_RULES = GPU_SKETCH_RULES


# ---- annotation ---------------------------------------------------------------------------------
@dataclass
class _Tiling:
    """One tiled stage of a sketch: its consumer's level splits (3 lengths per spatial axis),
    its own per-thread spatial splits and reduction splits (2 lengths each), step indices."""

    consumer: str
    consumer_splits: list[int] = field(default_factory=list)
    spatial_splits: list[int] = field(default_factory=list)
    reduce_splits: list[int] = field(default_factory=list)


@dataclass
class _Roles:
    """What each named stage of a sketch is, read from its steps."""

    tilings: dict[str, _Tiling] = field(default_factory=dict)  # tiled stage -> its tiling
    cross_thread: dict[str, int] = field(default_factory=dict)  # stage -> its reduction split

    def consumers(self) -> dict[str, int]:
        """Tiled consumers -> their number of spatial axes."""
        return {t.consumer: len(t.consumer_splits) for t in self.tilings.values()}


def _roles(sketch: State) -> _Roles:
    ctx = ts.ReplayContext(sketch.dag)
    r = _Roles()
    open_splits: dict[str, list[int]] = {}  # consumer -> level splits not yet claimed
    for i, step in enumerate(sketch.transform_steps):
        st = ctx.stages[step.stage_id]
        name = st.op.name
        if isinstance(step, ts.SplitStep) and None in step.lengths:
            n = len(step.lengths)
            reduce = st.leaf_iter_vars[step.iter_id].iter_type == IterVar.CommReduce
            if n == _FUSE_LEVELS:
                open_splits.setdefault(name, []).append(i)
            elif n == 2 and name in r.tilings:
                t = r.tilings[name]
                (t.reduce_splits if reduce else t.spatial_splits).append(i)
            elif n == 1 and reduce:
                r.cross_thread[name] = i
        elif isinstance(step, ts.ComputeAtStep):
            tgt = ctx.stages[step.target_stage_id].op.name
            if tgt in open_splits:
                r.tilings[name] = _Tiling(tgt, open_splits.pop(tgt))
        ts.apply_step(ctx, step)
    return r


def _prod(xs: Any) -> int:
    return math.prod(int(x) for x in xs)


def _pow2_upto(n: int) -> list[int]:
    return [1 << e for e in range(max(1, n).bit_length()) if 1 << e <= n]


def _set_lengths(steps: list[Any], i: int, lengths: Any) -> None:
    s = steps[i]
    steps[i] = ts.SplitStep(s.stage_id, s.iter_id, s.extent, tuple(int(x) for x in lengths),
                            s.inner_to_outer)


def _fill_lengths(steps: list[Any], roles: _Roles, rng: random.Random, gp: GPUParams,
                  minimal: bool) -> None:
    for t in roles.tilings.values():
        best = None
        for _ in range(0 if minimal else 64):
            # per spatial axis: vthread, thread, two inner lengths (the block takes the rest)
            ls = [sample_tile_lengths(steps[i].extent, 4, rng, gp.max_innermost_split_factor,
                                      p_nondivisible=0.0) for i in t.consumer_splits]
            vth, thr = _prod(x[0] for x in ls), _prod(x[1] for x in ls)
            if vth <= gp.max_vthread_extent and thr <= gp.max_threads_per_block \
                    and vth * _prod(x[2] * x[3] for x in ls) <= gp.max_local_tile:
                best = ls
                break
        if best is None:  # one thread, one accumulator: always within the limits
            best = [[1, 1, 1, 1] for _ in t.consumer_splits]
        for i, x in zip(t.consumer_splits, best):
            _set_lengths(steps, i, (x[0], x[1], x[2] * x[3]))
        for i, x in zip(t.spatial_splits, best):
            _set_lengths(steps, i, (x[2], x[3]))
        for i in t.reduce_splits:
            _set_lengths(steps, i, [1, 1] if minimal else sample_tile_lengths(
                steps[i].extent, 2, rng, gp.max_innermost_split_factor, p_nondivisible=0.0))
    for i in roles.cross_thread.values():
        ext = steps[i].extent or gp.max_threads_per_block
        cap = min(gp.max_threads_per_block, 1 << max(0, (ext - 1).bit_length()))
        _set_lengths(steps, i, [1 if minimal else rng.choice(_pow2_upto(cap))])
    for i, s in enumerate(steps):  # a split no role claimed: length 1
        if isinstance(s, ts.SplitStep) and None in s.lengths:
            _set_lengths(steps, i, [n or 1 for n in s.lengths])


def _bind_levels(state: State, k: int, n_space: int) -> int:
    """Fuse the first three levels of ``n_space`` loops each and bind them to blockIdx.x,
    vthread, threadIdx.x; returns the thread count."""
    threads = 1
    for level, thread in enumerate(("blockIdx.x", "vthread", "threadIdx.x")):
        ids = list(range(level, level + n_space))
        it = state.fuse(k, ids) if n_space > 1 else state[k].iters[level]
        if thread == "threadIdx.x":
            threads = it.extent or 1
        state.bind(k, it.index, thread)
    return threads


def _bind_flat(state: State, k: int, rng: random.Random, gp: GPUParams) -> None:
    """A root stage nobody tiled: its spatial loops fused, split, bound to blocks x threads."""
    iters = state[k].iters
    n_space = 0
    for it in iters:
        if it.iter_kind != 0:
            break
        n_space += 1
    if n_space == 0:
        return
    f = state.fuse(k, list(range(n_space))) if n_space > 1 else iters[0]
    cap = min(gp.max_threads_per_block, 1 << max(0, ((f.extent or 1) - 1).bit_length()))
    t = rng.choice(_pow2_upto(cap))
    outer, inner = state.split(k, f.index, [t])
    state.bind(k, outer.index, "blockIdx.x")
    state.bind(k, inner.index, "threadIdx.x")


def _bind_threads(state: State, roles: _Roles, rng: random.Random, gp: GPUParams) -> None:
    stages = state.ctx.stages
    names = [st.op.name for st in stages]
    consumers = roles.consumers()
    threads_of: dict[str, int] = {}
    # tiled consumers first: their thread counts size the cooperative fetches
    for k, name in enumerate(names):
        if name in consumers and stages[k].attach_type == ROOT:
            threads_of[name] = _bind_levels(state, k, consumers[name])
    for k, name in enumerate(names):
        st = stages[k]
        if not _is_compute(st) or st.attach_type == INLINE or name in threads_of:
            continue
        if name.endswith(".shared") and st.attach_stage is not None:
            # cooperative fetching by the threads of the block the reader runs in
            host = st.attach_stage
            while host.attach_stage is not None:
                host = host.attach_stage
            t = threads_of.get(host.op.name, 1)
            n = len(state[k].iters)
            f = state.fuse(k, list(range(n))) if n > 1 else state[k].iters[0]
            _, inner = state.split(k, f.index, [t])
            state.bind(k, inner.index, "threadIdx.x")
        elif st.attach_type != ROOT:
            continue
        elif name in roles.cross_thread:
            iters = state[k].iters
            n_space = sum(1 for it in iters if it.iter_kind == 0)
            if n_space:
                f = state.fuse(k, list(range(n_space))) if n_space > 1 else iters[0]
                state.bind(k, f.index, "blockIdx.x")
            state.bind(k, len(state[k].iters) - 2, "threadIdx.x")
        else:
            _bind_flat(state, k, rng, gp)


def _add_unroll(state: State, rng: random.Random) -> None:
    """``auto_unroll_max_step`` on every reducing stage that runs inside a thread (a tiled
    stage computed at its consumer's thread loop)."""
    for k, st in enumerate(state.ctx.stages):
        if _is_compute(st) and st.op.reduce_axis and st.attach_type not in (ROOT, INLINE) \
                and state[k].iters:
            state.pragma(k, 0, f"auto_unroll_max_step${rng.choice(GPU_AUTO_UNROLL_CONFIGS)}")


def _vthreads_around(state: State, st: Any) -> int:
    """The virtual threads a stage is computed in: te keeps a shared buffer per virtual
    thread (a vthread loop is not relaxed for shared scope), so each one is a copy."""
    n = 1
    host = st.attach_stage
    while host is not None:
        for iv in host.leaf_iter_vars:
            a = host.iter_var_attrs.get(iv)
            if a is not None and a.bind_thread is not None and \
                    a.bind_thread.thread_tag.startswith("vthread"):
                n *= state.ctx.extent(iv) or 1
        host = host.attach_stage
    return n


def shared_memory_bytes(state: State) -> int:
    """Bytes of the ``shared`` stages of ``state``, by te's bound inference (an upper bound:
    a copy per virtual thread)."""
    sch = state.ctx.sch
    shared = [st for st in sch.stages
              if isinstance(st.op, ComputeOp) and st.op.name.endswith(".shared")]
    if not shared:
        return 0
    bounds = InferBound(sch)
    total = 0
    for st in shared:
        op = st.op
        assert isinstance(op, ComputeOp)
        n = _vthreads_around(state, st)
        for iv in op.axis:
            r = bounds.get(iv) or iv.dom
            ext = r.extent if r is not None else None
            if not isinstance(ext, E.IntImm):
                raise ValueError(f"shared stage {op.name}: extent {ext} is not constant")
            n *= int(ext.value)
        total += n * bytes_of(str(op.output(0).dtype))
    return total


def annotate_gpu(sketch: State, rng: random.Random, gp: GPUParams, tries: int = 8) -> State:
    """A complete GPU state from ``sketch``: tile sizes within ``gp``'s limits, thread
    bindings, cooperative fetching, unroll pragmas."""
    roles = _roles(sketch)
    for attempt in range(tries + 1):
        steps = list(sketch.transform_steps)
        _fill_lengths(steps, roles, rng, gp, minimal=attempt == tries)
        state = State(sketch.dag, steps)
        _bind_threads(state, roles, rng, gp)
        _add_unroll(state, rng)
        if shared_memory_bytes(state) <= gp.max_shared_memory_per_block:
            return state
    return state  # minimal tiles: the build reports a kernel that still does not fit


def annotate_task(sketch: State, rng: random.Random, task: Any) -> State:
    """The annotator of the sketch-policy table (``sketch_policy.policy_for_target``)."""
    return annotate_gpu(sketch, rng, GPUParams.for_target(task.target))


def reference_state(task: Any) -> State:
    """A plain GPU schedule of ``task`` to check candidates against (the untransformed
    schedule of a CPU task does not build for a GPU: nothing is bound to threads): every
    compute stage at the root, its spatial loops fused and split over blocks of (at most) 64
    threads, reductions serial in each thread."""
    gp = GPUParams.for_target(task.target)
    state = task.compute_dag.init_state()
    for k, st in enumerate(state.ctx.stages):
        if not _is_compute(st):
            continue
        iters = state[k].iters
        n_space = sum(1 for it in iters if it.iter_kind == 0)
        if n_space == 0:
            continue
        f = state.fuse(k, list(range(n_space))) if n_space > 1 else iters[0]
        outer, inner = state.split(k, f.index, [min(64, gp.max_threads_per_block)])
        state.bind(k, outer.index, "blockIdx.x")
        state.bind(k, inner.index, "threadIdx.x")
    return state
