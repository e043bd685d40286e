"""Sketch generation and random annotation for CPU (Ansor's sketch_policy_rules.cc).

A sketch is a :class:`State` whose split lengths are still open (``None``). The rules walk
the stages from the last to the first; each rule that meets its condition turns a state into
one or more states (a tree of choices):

- always-inline: an injective stage without branch or expensive call, not an output;
- rfactor: a reduction with little spatial parallelism and a long reduction (fuse the
  reduction loops, split them, factor either part out);
- add cache-write: a stage that needs multi-level tiling and has no elementwise consumer to
  fuse, or whose epilogue holds an expensive call (SiLU's ``sigmoid``: fused or as its own
  pass is then a measured choice), gets a ``local`` cache stage (tiled next, its copy becomes
  the fused consumer);
- multi-level tiling with fusion: tile "SSRSRS" and compute the stage at level 1 or 2 of its
  single elementwise consumer, tiled alike (follow_split);
- multi-level tiling with slice fusion (not in Ansor): a stage whose single consumer reads it
  at its own axes plus constant indices (an LSTM's gates ``[i, g, u]`` read at ``g = 0..3``)
  is tiled "SSRSRS" over the axes the consumer follows, the sliced axes whole in the last
  spatial level, and computed at level 1 or 2 of its consumer (with or without a cache stage);
- multi-level tiling: tile "SSRSRS";
- reduction tiling (not in Ansor): a reduction without data reuse tiled "SRS", so that its
  innermost loop is spatial and vectorizes (fused with an elementwise consumer as above);
- skip.

Annotation (``annotate``) fills the tile sizes (factorisations of the extents, sometimes
non-divisible: te guards the tail), fuses and parallelizes the outer spatial loops of every
root stage, vectorizes innermost spatial loops and puts an ``auto_unroll_max_step`` pragma on
tiled and reducing stages, and on the innermost reduction loop of a tiled reduction a
``prefetch$N`` pragma (:data:`PREFETCH_CONFIGS`; 0: none): software prefetches of the vector
loads the loop streams from its arguments, N bytes ahead (``tir.transform.InjectPrefetch``;
not in Ansor). A register tile that uses each loaded weight vector for many FMAs keeps few
misses in flight and streams weights that come from beyond L2 slower than memory allows; the
x86 NCHWc defaults prefetch 4 KiB ahead there (``topi.x86.conv2d_nchwc.PREFETCH_BYTES``).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

from ..te.schedule import INLINE, ROOT
from ..te.tensor import ComputeOp
from ..tir import expr as E
from ..tir.expr import IterVar
from . import transform_step as ts
from .compute_dag import branch_and_expensive, has_data_reuse, read_accesses, same_index
from .loop_state import State

__all__ = ["generate_sketches", "sample_initial_population", "annotate",
           "AUTO_UNROLL_CONFIGS", "PREFETCH_CONFIGS", "innermost_reduce_iter"]

AUTO_UNROLL_CONFIGS = (0, 16, 64, 512)
#: prefetch distances (bytes) sampled for a tiled reduction's innermost reduction loop
PREFETCH_CONFIGS = (0, 1024, 4096)


def innermost_reduce_iter(state: State, k: int) -> int | None:
    """The index of stage ``k``'s innermost reduction loop of more than one iteration in
    ``state`` (a loop of one disappears in lowering, and its pragma with it), or None."""
    red = [it.index for it in state[k].iters
           if it.iter_kind == 1 and (it.extent is None or it.extent > 1)]
    return red[-1] if red else None
PASS, APPLY, APPLY_AND_SKIP_REST = 0, 1, 2


# ---- analysis on the state's current stages ------------------------------------------------------
def _te_stage(state: State, k: int) -> Any:
    return state.ctx.stages[k]


def _is_compute(st: Any) -> bool:
    return isinstance(st.op, ComputeOp)


def _consumers(state: State, k: int) -> list[int]:
    """Stages reading stage ``k`` directly, seen through inlined stages."""
    stages = state.ctx.stages
    out: list[int] = []
    todo, seen = [k], {k}
    while todo:
        p = todo.pop()
        pop = stages[p].op
        for c, st in enumerate(stages):
            if c in seen or not any(t.op is pop for t in st.op.input_tensors):
                continue
            seen.add(c)
            if st.attach_type == INLINE:
                todo.append(c)
            else:
                out.append(c)
    return sorted(out)


def _reads_elementwise(consumer: Any, producer: Any) -> bool:
    if not isinstance(consumer, ComputeOp) or consumer.reduce_axis:
        return False
    acc = read_accesses(consumer).get(id(producer))
    if not acc:
        return False
    axis = [iv.var for iv in consumer.axis]
    shape_p = [int(d.value) if isinstance(d, E.IntImm) else d for d in producer.output(0).shape]
    shape_c = [int(iv.known_dom.extent.value) if isinstance(iv.known_dom.extent, E.IntImm) else None
               for iv in consumer.axis]
    if shape_p != shape_c:
        return False
    return all(len(idx) == len(axis) and all(same_index(a, iv) for a, iv in zip(idx, consumer.axis))
               for idx in acc)


def _direct_consumers(state: State, k: int) -> list[int]:
    stages = state.ctx.stages
    return [c for c, st in enumerate(stages)
            if any(t.op is stages[k].op for t in st.op.input_tensors)]


def elementwise_matched_consumer(state: State, k: int) -> int | None:
    """The single consumer of stage ``k`` if it reads ``k`` elementwise (through inlined
    elementwise stages), else None. Every path from ``k`` to it counts: an inlined stage may
    feed the consumer both directly and through another inlined stage (SiLU: ``add`` read
    by ``sigmoid`` and by ``multiply(add, sigmoid)``), each edge elementwise."""
    stages = state.ctx.stages
    cons = _consumers(state, k)
    if len(cons) != 1:
        return None
    target = cons[0]
    todo, seen = [k], set()
    while todo:
        cur = todo.pop()
        if cur in seen:
            continue
        seen.add(cur)
        direct = _direct_consumers(state, cur)
        if not direct or (stages[cur].is_output and cur != k):
            return None  # an inlined stage whose value escapes
        for c in direct:
            if not _reads_elementwise(stages[c].op, stages[cur].op):
                return None
            if c != target:
                todo.append(c)
    return target


def _slice_axes(consumer: Any, producer: Any) -> list[int] | None:
    """For each consumer axis, the producer axis it indexes, if ``consumer`` (no reduction)
    reads ``producer`` only at index tuples made of its own axes (each once, in order, on
    producer axes of the same extent) and integer constants (the "slices" of the other
    producer axes: an LSTM's epilogue reads ``gates[i, 0..3, u]``), the same axes in every
    read; else None. An elementwise read is the case without constants."""
    if not isinstance(consumer, ComputeOp) or consumer.reduce_axis:
        return None
    acc = read_accesses(consumer).get(id(producer))
    if not acc:
        return None
    shape_p = [int(d.value) if isinstance(d, E.IntImm) else None for d in producer.output(0).shape]
    shape_c = [int(iv.known_dom.extent.value) if isinstance(iv.known_dom.extent, E.IntImm) else None
               for iv in consumer.axis]
    found: list[int] | None = None
    for idx in acc:
        if len(idx) != len(shape_p):
            return None
        pos: list[int] = []
        for p, e in enumerate(idx):
            if isinstance(e, E.IntImm):
                continue
            hit = [c for c, iv in enumerate(consumer.axis) if same_index(e, iv)]
            if len(hit) != 1:
                return None
            pos.append(p)
            if hit[0] != len(pos) - 1:  # the consumer's axes in order, each once
                return None
        if len(pos) != len(consumer.axis) or (found is not None and pos != found):
            return None
        found = pos
    if found is None or any(shape_p[p] is None or shape_p[p] != shape_c[c]
                            for c, p in enumerate(found)):
        return None
    return found


def slice_matched_consumer(state: State, k: int) -> tuple[int, list[int]] | None:
    """``(consumer, producer axes of its axes)`` if stage ``k``'s only consumer reads it
    through slices (``_slice_axes``) but not elementwise (that is the elementwise rule's)."""
    stages = state.ctx.stages
    direct = [c for c, st in enumerate(stages) if any(t.op is stages[k].op
                                                      for t in st.op.input_tensors)]
    if len(direct) != 1 or stages[direct[0]].attach_type == INLINE:
        return None
    target = direct[0]
    if stages[target].relations or stages[target].attach_type != ROOT:
        return None
    axes = _slice_axes(stages[target].op, stages[k].op)
    if axes is None or len(axes) == len(stages[k].op.axis):
        return None
    return target, axes


def needs_multi_level_tiling(state: State, k: int) -> bool:
    st = _te_stage(state, k)
    return _is_compute(st) and has_data_reuse(st.op)


def should_always_inline(state: State, k: int) -> bool:
    """Ansor's strictly-inlineable stages (injective, no branch, no expensive call), and also
    an expensive one (``sigmoid``, ``exp``) whose single consumer, itself not inlined and not
    a reduction, reads it elementwise once: each value is then still computed once. Kept at
    the root, such a stage left an epilogue like SiLU (``x * sigmoid(x)``) unfusable: the
    producer's value reached the ``multiply`` both directly and through the root
    ``sigmoid``, so no sketch computed the producer's tiles inside its epilogue's."""
    st = _te_stage(state, k)
    if not _is_compute(st) or st.is_output or st.op.reduce_axis or st.attach_type != ROOT:
        return False
    if st.relations:  # already scheduled
        return False
    branch, expensive = branch_and_expensive(st.op)
    if branch:
        return False
    if not expensive:
        return True
    direct = _direct_consumers(state, k)
    if len(direct) != 1:
        return False
    cst = state.ctx.stages[direct[0]]
    return (cst.attach_type != INLINE and _reads_elementwise(cst.op, st.op)
            and len(read_accesses(cst.op).get(id(st.op), ())) == 1)


def _cum_lengths(st: Any) -> tuple[int, int]:
    space = red = 1
    for iv in st.leaf_iter_vars:
        e = iv.known_dom.extent.value if iv.dom is not None and isinstance(iv.known_dom.extent, E.IntImm) else 1
        if iv.iter_type == IterVar.CommReduce:
            red *= e
        else:
            space *= e
    return space, red


def needs_rfactor(state: State, k: int, num_cores: int) -> bool:
    st = _te_stage(state, k)
    if not _is_compute(st) or not st.op.reduce_axis or st.relations:
        return False
    space, red = _cum_lengths(st)
    if needs_multi_level_tiling(state, k):
        return not (space > red or space > num_cores * 16)
    return red > 1 and red > num_cores


# ---- rules --------------------------------------------------------------------------------------
Rule = tuple[str, Callable[[State, int, Any], int], Callable[[State, int, Any], list[tuple[State, int]]]]


def _inline_cond(s: State, k: int, hp: Any) -> int:
    return APPLY_AND_SKIP_REST if should_always_inline(s, k) else PASS


def _inline_apply(s: State, k: int, hp: Any) -> list[tuple[State, int]]:
    n = s.copy()
    n.compute_inline(k)
    return [(n, k - 1)]


def _rfactor_cond(s: State, k: int, hp: Any) -> int:
    return APPLY if needs_rfactor(s, k, hp.num_cores) else PASS


def _rfactor_apply(s: State, k: int, hp: Any) -> list[tuple[State, int]]:
    base = s.copy()
    iters = base[k].iters
    n_space = sum(1 for i in iters if i.iter_kind == 0)
    red = [i for i in iters if i.iter_kind == 1]
    if [i.index for i in red] != list(range(n_space, len(iters))):
        return []
    fused = base.fuse(k, red) if len(red) > 1 else red[0]
    parts = base.split(k, fused, [None])
    out = []
    for which in (0, 1):
        n = base.copy()
        rid = n.rfactor(k, parts[which].index, n_space)
        if which == 1:  # the factored (spatial) axis innermost, for vectorization
            its = n[rid].iters
            order = [i for i in range(len(its)) if i != n_space] + [n_space]
            n.reorder(rid, order)
        out.append((n, k - 1))
    return out


def _cache_write_cond(s: State, k: int, hp: Any) -> int:
    st = _te_stage(s, k)
    if st.relations or st.attach_type != ROOT:
        return PASS
    if not needs_multi_level_tiling(s, k):
        return PASS
    ew = elementwise_matched_consumer(s, k)
    if ew is None and slice_matched_consumer(s, k) is not None:
        return PASS  # the slice rule caches itself
    if ew is None or _expensive_epilogue(s, k):
        return APPLY
    return PASS


def _expensive_epilogue(state: State, k: int) -> bool:
    """Whether an expensive call (``sigmoid``, ``exp``) lies between stage ``k`` and its
    consumer, in the consumer or in a stage inlined on the way."""
    stages = state.ctx.stages
    todo, seen = [k], {k}
    while todo:
        for c in _direct_consumers(state, todo.pop()):
            if c in seen:
                continue
            seen.add(c)
            if branch_and_expensive(stages[c].op)[1]:
                return True
            if stages[c].attach_type == INLINE:
                todo.append(c)
    return False


def _cache_write_apply(s: State, k: int, hp: Any) -> list[tuple[State, int]]:
    n = s.copy()
    n.cache_write(k, "local")
    return [(n, k)]  # the cache stage is now stage k; its copy (k + 1) is its consumer


def do_multi_level_tiling(s: State, k: int, fmt: str = "SSRSRS") -> list[int]:
    """Tile stage ``k`` as ``fmt``; returns the ids of the spatial split steps."""
    n_s, n_r = fmt.count("S"), fmt.count("R")
    levels_s: list[list[Any]] = [[] for _ in range(n_s)]
    levels_r: list[list[Any]] = [[] for _ in range(n_r)]
    split_ids = []
    for it in list(s[k].iters):
        if it.iter_kind == 0:
            parts = s.split(k, it, [None] * (n_s - 1))
            split_ids.append(len(s.transform_steps) - 1)
            for lv, p in zip(levels_s, parts):
                lv.append(p)
        elif n_r > 1:
            parts = s.split(k, it, [None] * (n_r - 1))
            for lv, p in zip(levels_r, parts):
                lv.append(p)
        else:  # one reduction level ("SRS"): the loop as it is
            levels_r[0].append(it)
    order: list[Any] = []
    si = ri = 0
    for c in fmt:
        if c == "S":
            order += levels_s[si]
            si += 1
        else:
            order += levels_r[ri]
            ri += 1
    s.reorder(k, order)
    return split_ids


def follow_tiling(s: State, k: int, split_ids: Sequence[int], n_split: int) -> None:
    levels: list[list[Any]] = [[] for _ in range(n_split + 1)]
    spatial = [it for it in s[k].iters if it.iter_kind == 0]
    if len(spatial) != len(split_ids):
        raise ValueError("follow_tiling: the consumer's loops do not match the producer's")
    for it, sid in zip(spatial, split_ids):
        parts = s.follow_split(k, it, sid, n_split)
        for lv, p in zip(levels, parts):
            lv.append(p)
    s.reorder(k, [p for lv in levels for p in lv])


def _mlt_fusion_cond(s: State, k: int, hp: Any) -> int:
    st = _te_stage(s, k)
    if st.relations or st.attach_type != ROOT or not needs_multi_level_tiling(s, k):
        return PASS
    if elementwise_matched_consumer(s, k) is None:
        return PASS
    is_cache = k + 1 < len(s.ctx.stages) and s.ctx.stages[k].op.name.endswith(".local")
    return APPLY_AND_SKIP_REST if is_cache else APPLY


def _mlt_fusion_apply(s: State, k: int, hp: Any) -> list[tuple[State, int]]:
    target = elementwise_matched_consumer(s, k)
    assert target is not None
    base = s.copy()
    split_ids = do_multi_level_tiling(base, k)
    n_space = len(split_ids)
    out = []
    for level in (1, 2):
        n = base.copy()
        follow_tiling(n, target, split_ids, level)
        n.compute_at(k, target, level * n_space - 1)
        out.append((n, k - 1))
    return out


def _slice_fusion_cond(s: State, k: int, hp: Any) -> int:
    st = _te_stage(s, k)
    if st.relations or st.attach_type != ROOT or not needs_multi_level_tiling(s, k):
        return PASS
    return APPLY_AND_SKIP_REST if slice_matched_consumer(s, k) is not None else PASS


def _slice_tiling(s: State, k: int, axes: list[int]) -> list[int]:
    """Tile stage ``k`` "SSRSRS" over its spatial axes ``axes`` (those its consumer follows),
    the other spatial axes whole in the last spatial level, before the innermost tiles (an
    LSTM's gate axis: all gates of a tile of units, kept in registers together); returns the
    split step ids of ``axes``, in order."""
    levels_s: list[list[Any]] = [[] for _ in range(4)]
    levels_r: list[list[Any]] = [[] for _ in range(2)]
    whole: list[Any] = []
    split_ids = []
    for p, it in enumerate(list(s[k].iters)):
        if it.iter_kind == 0 and p in axes:
            parts = s.split(k, it, [None] * 3)
            split_ids.append(len(s.transform_steps) - 1)
            for lv, q in zip(levels_s, parts):
                lv.append(q)
        elif it.iter_kind == 0:
            whole.append(it)
        else:
            for lv, q in zip(levels_r, s.split(k, it, [None])):
                lv.append(q)
    order = (levels_s[0] + levels_s[1] + levels_r[0] + levels_s[2] + levels_r[1] + whole
             + levels_s[3])
    s.reorder(k, order)
    return split_ids


def _slice_fusion_apply(s: State, k: int, hp: Any) -> list[tuple[State, int]]:
    """The producer tiled (``_slice_tiling``) and computed at level 1 or 2 of its consumer's
    tiles (the consumer split as the producer's four spatial levels), with or without a
    ``local`` cache stage (its copy inlined into the consumer)."""
    found = slice_matched_consumer(s, k)
    assert found is not None
    out = []
    for cached in (False, True):
        base = s.copy()
        target, axes = found
        if cached:
            base.cache_write(k, "local")
            base.compute_inline(k + 1)
            target += 1
        split_ids = _slice_tiling(base, k, axes)
        for level in (1, 2):
            n = base.copy()
            # the consumer follows every level (its loops inside the tile are the producer's
            # inner tiles: the innermost one vectorizes as the producer's does)
            follow_tiling(n, target, split_ids, 3)
            n.compute_at(k, target, level * len(split_ids) - 1)
            out.append((n, k - 1))
    return out


def _mlt_cond(s: State, k: int, hp: Any) -> int:
    st = _te_stage(s, k)
    if st.relations or st.attach_type != ROOT:
        return PASS
    return APPLY_AND_SKIP_REST if needs_multi_level_tiling(s, k) else PASS


def _mlt_apply(s: State, k: int, hp: Any) -> list[tuple[State, int]]:
    n = s.copy()
    do_multi_level_tiling(n, k)
    return [(n, k - 1)]


def needs_reduction_tiling(state: State, k: int) -> bool:
    """A reduction without data reuse (a pool, a sum, a mean, a max) with a spatial loop
    longer than 1: te puts its reduction loops innermost, so no loop of it vectorizes. Tiled
    "SRS" (outer spatial tiles, the reduction, inner spatial tiles) its innermost loop is
    spatial: the inner tile of the contiguous output axis vectorizes, the reduction reads
    rows at a time (a global pool over NCHWc reads 16-channel vectors)."""
    st = _te_stage(state, k)
    if not _is_compute(st) or not st.op.reduce_axis or st.relations or st.attach_type != ROOT:
        return False
    if needs_multi_level_tiling(state, k):
        return False
    return any(iv.iter_type != IterVar.CommReduce and isinstance(iv.known_dom.extent, E.IntImm)
               and iv.known_dom.extent.value > 1 for iv in st.leaf_iter_vars)


def _reduction_tiling_cond(s: State, k: int, hp: Any) -> int:
    return APPLY if needs_reduction_tiling(s, k) else PASS


def _reduction_tiling_apply(s: State, k: int, hp: Any) -> list[tuple[State, int]]:
    base = s.copy()
    split_ids = do_multi_level_tiling(base, k, "SRS")
    target = elementwise_matched_consumer(s, k)
    if target is None:
        return [(base, k - 1)]
    n = base.copy()  # the elementwise consumer (a mean's division) tiled alike, fused at level 1
    follow_tiling(n, target, split_ids, 1)
    n.compute_at(k, target, len(split_ids) - 1)
    return [(n, k - 1)]


def _skip_cond(s: State, k: int, hp: Any) -> int:
    return APPLY


def _skip_apply(s: State, k: int, hp: Any) -> list[tuple[State, int]]:
    return [(s, k - 1)]


CPU_SKETCH_RULES: list[Rule] = [
    ("always_inline", _inline_cond, _inline_apply),
    ("add_rfactor", _rfactor_cond, _rfactor_apply),
    ("add_cache_write", _cache_write_cond, _cache_write_apply),
    ("multi_level_tiling_with_fusion", _mlt_fusion_cond, _mlt_fusion_apply),
    ("multi_level_tiling_with_slice_fusion", _slice_fusion_cond, _slice_fusion_apply),
    ("multi_level_tiling", _mlt_cond, _mlt_apply),
    ("reduction_tiling", _reduction_tiling_cond, _reduction_tiling_apply),
    ("skip", _skip_cond, _skip_apply),
]
SKETCH_RULES = CPU_SKETCH_RULES


def _cpu_policy() -> Any:
    import sys

    return sys.modules[__name__]


def _gpu_policy() -> Any:
    from . import sketch_rules_gpu  # imports this module: loaded on first use

    return sketch_rules_gpu


#: the sketch rules and annotator of each target kind (Ansor's IsGPUTask choice): a loader of
#: the module holding ``SKETCH_RULES`` and ``annotate_task(sketch, rng, task)``
SKETCH_POLICY_BY_TARGET_KIND: dict[str, Callable[[], Any]] = {
    "llvm": _cpu_policy, "c": _cpu_policy,
    "cuda": _gpu_policy, "opencl": _gpu_policy, "nvptx": _gpu_policy,
}


def policy_for_target(target: Any) -> Any:
    """The module holding the sketch rules and annotator for ``target``'s kind."""
    kind = str(getattr(target, "kind", None) or str(target).split()[0])
    load = SKETCH_POLICY_BY_TARGET_KIND.get(kind)
    if load is None:
        raise ValueError(f"auto_scheduler: no sketch rules for target kind {kind!r} "
                         f"(known: {sorted(SKETCH_POLICY_BY_TARGET_KIND)})")
    return load()


def annotate_task(sketch: State, rng: random.Random, task: Any) -> State:
    """The CPU annotator of the table above."""
    return annotate(sketch, rng, task.hardware_params)


def generate_sketches(task: Any, rules: Sequence[Rule] | None = None, max_sketches: int = 64) -> list[State]:
    """The sketches of ``task`` (a SearchTask) by Ansor's rules for its target's kind."""
    rules = policy_for_target(task.target).SKETCH_RULES if rules is None else rules
    hp = task.hardware_params
    init = task.compute_dag.init_state()
    pnow = [(init, len(init.ctx.stages) - 1)]
    out: list[State] = []
    while pnow:
        pnext = []
        for state, k in pnow:
            if k < 0:
                out.append(state)
                continue
            st = _te_stage(state, k)
            if not _is_compute(st) or st.attach_type == INLINE:
                pnext.append((state, k - 1))
                continue
            for _, cond, apply in rules:
                c = cond(state, k, hp)
                if c == PASS:
                    continue
                pnext += apply(state, k, hp)
                if c == APPLY_AND_SKIP_REST:
                    break
        pnow = pnext
        if len(out) + len(pnow) > max_sketches * 4:
            pnow = pnow[:max_sketches * 4]
    # distinct histories only
    seen, uniq = set(), []
    for s in out:
        key = repr([x.to_record() for x in s.transform_steps])
        if key not in seen:
            seen.add(key)
            uniq.append(s)
    return uniq[:max_sketches]


# ---- random annotation --------------------------------------------------------------------------
def _prime_factors(n: int) -> list[int]:
    out, p = [], 2
    while p * p <= n:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    if n > 1:
        out.append(n)
    return out


def sample_tile_lengths(extent: int | None, n: int, rng: random.Random, max_innermost: int = 64,
                        p_nondivisible: float = 0.05) -> list[int]:
    """``n`` inner lengths of a split of ``extent``: a random factorisation (the outer loop
    takes the rest), or with probability ``p_nondivisible`` powers of two that need not divide
    it (te guards the tail). Ansor samples factorisations only; non-divisible tiles are kept
    rare because each guarded tail multiplies the code LoopPartition generates (and the build
    time: see bench/auto_scheduler_build_time.py)."""
    if extent is None or extent <= 1:
        return [1] * n
    if rng.random() < p_nondivisible:
        out, rest = [], extent
        for _ in range(n):
            cap = max(1, min(rest, max_innermost))
            v = rng.choice([1 << e for e in range(cap.bit_length()) if 1 << e <= cap])
            out.append(v)
            rest = max(1, -(-rest // v))
        return out
    for _ in range(8):
        slots = [1] * (n + 1)
        for p in _prime_factors(extent):
            slots[rng.randrange(n + 1)] *= p
        if slots[-1] <= max_innermost:
            return slots[1:]
    return [1] * n


def _attached_iters(state: State, k: int) -> set[int]:
    st = state.ctx.stages[k]
    out = set()
    for other in state.ctx.stages:
        if other.attach_stage is st:
            for i, iv in enumerate(st.leaf_iter_vars):
                if iv is other.attach_ivar:
                    out.add(i)
    return out


def change_compute_location(state: State, rng: random.Random, tiled: set[int]) -> None:
    """Ansor's InitChangeComputeLocation: every untiled, unannotated stage at the root that is
    not an output and has one consumer is left at the root, inlined (if injective) or computed
    at a random spatial loop of its consumer."""
    stages = state.ctx.stages
    for k in range(len(stages) - 1, -1, -1):
        st = stages[k]
        if (not _is_compute(st) or st.is_output or st.attach_type != ROOT or k in tiled
                or st.relations or any(other.attach_stage is st for other in stages)):
            continue
        cons = _consumers(state, k)
        if len(cons) != 1:
            continue
        target = cons[0]
        tst = stages[target]
        choices: list[Any] = ["root"]
        if not st.op.reduce_axis:
            choices.append("inline")
        for i, iv in enumerate(tst.leaf_iter_vars):
            if iv.iter_type == IterVar.CommReduce:
                break
            choices.append(i)
        pick = rng.choice(choices)
        if pick == "inline":
            state.compute_inline(k)
        elif pick != "root":
            state.compute_at(k, target, pick)


_INNERMOST_SPLITS: dict[str, dict[int, int]] = {}


def innermost_splits(sketch: State) -> dict[int, int]:
    """``{split step id: vector lanes}`` of the open splits whose innermost part is the
    innermost loop of its stage in ``sketch`` (spatial: the loop that vectorizes), with the
    lanes of the stage's output type in a 16-byte vector unit (scaled by the caller)."""
    key = repr([x.to_record() for x in sketch.transform_steps]) + repr(id(sketch.dag))
    hit = _INNERMOST_SPLITS.get(key)
    if hit is not None:
        return hit
    out: dict[int, int] = {}
    steps = list(sketch.transform_steps)
    for i, s in enumerate(steps):
        if not isinstance(s, ts.SplitStep) or None not in s.lengths:
            continue
        last = sketch[s.stage_id].iters
        if not last or last[-1].iter_kind != 0 or last[-1].extent is not None:
            continue
        part = State(sketch.dag, steps[:i + 1])[s.stage_id].iters[s.iter_id + len(s.lengths)]
        if part.name == last[-1].name and part.iter_kind == 0:
            dtype = str(sketch.ctx.stages[s.stage_id].op.output(0).dtype)
            bits = int("".join(ch for ch in dtype if ch.isdigit()) or 32)
            out[i] = max(1, 128 // bits)
    if len(_INNERMOST_SPLITS) > 4096:
        _INNERMOST_SPLITS.clear()
    _INNERMOST_SPLITS[key] = out
    return out


def _vector_friendly(lengths: list[int], extent: int, lanes: int, rng: random.Random) -> list[int]:
    """``lengths`` with the innermost replaced by a multiple of ``lanes`` that divides
    ``extent`` (the largest such up to the vector unit, or a random one), the others
    rescaled to keep the product within ``extent``."""
    cands = [v for v in range(lanes, min(extent, 4 * lanes) + 1, lanes) if extent % v == 0]
    if not cands:
        return lengths
    inner = rng.choice(cands)
    rest = extent // inner
    out = []
    for v in lengths[:-1]:
        v = v if rest % v == 0 else 1
        out.append(v)
        rest //= v
    return out + [inner]


def _parallel_cut(iters: Sequence[Any], cands: list[int], num_cores: int,
                  rng: random.Random) -> int:
    """How many of the outer loops ``cands`` to fuse into the parallel loop: a random count
    among those whose fused extent reaches ``num_cores`` (else all of them). A random count
    alone often took only leading loops of extent 1 (the batch, a tile's outer part of 1):
    a parallel loop of one iteration, a serial kernel."""
    degree, ok = 1, []
    for n, i in enumerate(cands, 1):
        degree *= iters[i].extent or 1
        if degree >= num_cores:
            ok.append(n)
    return rng.choice(ok) if ok else len(cands)


def annotate(sketch: State, rng: random.Random, hp: Any) -> State:
    """A complete state from a sketch: tile sizes, parallel, vectorize, unroll (random).

    The innermost tile of a stage's innermost spatial loop (the one that vectorizes) is, half
    the time, a multiple of the vector lanes of the target (``hp.vector_unit_bytes``) that
    divides the extent: uniform factorisations rarely give full vectors, and with a few dozen
    trials per subgraph the search then never finds the vectorized kernel the defaults have."""
    steps = list(sketch.transform_steps)
    inner = innermost_splits(sketch)
    for i, s in enumerate(steps):
        if isinstance(s, ts.SplitStep) and None in s.lengths:
            lengths = sample_tile_lengths(s.extent, len(s.lengths), rng, hp.max_innermost_split_factor)
            if i in inner and s.extent and rng.random() < 0.5:
                lanes = max(1, inner[i] * hp.vector_unit_bytes // 16)
                lengths = _vector_friendly(lengths, s.extent, lanes, rng)
            steps[i] = ts.SplitStep(s.stage_id, s.iter_id, s.extent, tuple(lengths), s.inner_to_outer)
    state = State(sketch.dag, steps)
    n_stages = len(state.ctx.stages)
    tiled = {s.stage_id for s in steps if isinstance(s, ts.SplitStep)}
    change_compute_location(state, rng, tiled)
    for k in range(n_stages):
        st = state.ctx.stages[k]
        if not _is_compute(st) or st.attach_type == INLINE:
            continue
        # parallel: fuse outer spatial loops (up to a random count) at the root
        if st.attach_type == ROOT:
            view = state[k]
            attached = _attached_iters(state, k)
            to_fuse: list[int] = []
            degree = 1
            for it in view.iters:
                if it.iter_kind != 0 or it.annotation:
                    break
                to_fuse.append(it.index)
                degree *= it.extent or 1
                if degree > hp.num_cores * 16 or it.index in attached:
                    break
            if to_fuse:
                to_fuse = to_fuse[:_parallel_cut(view.iters, to_fuse, hp.num_cores, rng)]
                if len(to_fuse) < len(view.iters) or rng.random() < 0.5:
                    f = state.fuse(k, to_fuse) if len(to_fuse) > 1 else view.iters[to_fuse[0]]
                    state.parallel(k, f.index)
        # vectorize the innermost spatial loop
        view = state[k]
        if view.iters and rng.random() < 0.85:
            last = view.iters[-1]
            if (last.iter_kind == 0 and not last.annotation and last.extent is not None
                    and 1 < last.extent <= hp.max_innermost_split_factor
                    and last.index not in _attached_iters(state, k)):
                state.vectorize(k, last.index)
        # unroll pragma on tiled / reducing stages
        if (k in tiled or st.op.reduce_axis) and state[k].iters:
            n = rng.choice(AUTO_UNROLL_CONFIGS)
            state.pragma(k, 0, f"auto_unroll_max_step${n}")
        # software prefetch on a tiled reduction's innermost reduction loop
        r = innermost_reduce_iter(state, k) if k in tiled and st.op.reduce_axis else None
        if r is not None:
            state.pragma(k, r, f"prefetch${rng.choice(PREFETCH_CONFIGS)}")
    return state


def sample_initial_population(task: Any, n: int, seed: int | None = None,
                              sketches: Sequence[State] | None = None) -> list[State]:
    """``n`` distinct random annotations of ``task``'s sketches (fewer if the space is
    smaller)."""
    rng = random.Random(seed)
    sketches = list(sketches) if sketches is not None else generate_sketches(task)
    annotate_one = policy_for_target(task.target).annotate_task
    out: list[State] = []
    seen: set[str] = set()
    for _ in range(n * 4):
        if len(out) >= n:
            break
        st = annotate_one(rng.choice(sketches), rng, task)
        key = repr([x.to_record() for x in st.transform_steps])
        if key not in seen:
            seen.add(key)
            out.append(st)
    return out
