"""Ansor's evolutionary search: mutation rules on a state's step history and the search loop
(TVM's ``sketch_policy.cc`` EvolutionarySearch / ``sketch_policy_rules.cc`` mutation rules).

A mutation edits one step of a complete state and replays the history; a state whose replay
fails is dropped (the measurement's correctness check guards the rest). Rules, as Ansor's:

- tile size: move a prime factor from one level of a divisible split to another (the outer
  loop included), keeping the innermost length within ``max_innermost_split_factor``;
- auto-unroll: another ``auto_unroll_max_step`` value;
- prefetch (not in Ansor): another ``prefetch$N`` distance;
- parallel granularity: fuse more or fewer outer loops into the parallel loop;
- compute location: compute an untiled stage at another spatial loop of its consumer.
"""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from . import transform_step as ts
from .loop_state import State
from .sketch_policy import AUTO_UNROLL_CONFIGS, PREFETCH_CONFIGS, _prime_factors

__all__ = ["mutate_tile_size", "mutate_auto_unroll", "mutate_prefetch", "mutate_parallel",
           "mutate_compute_location", "MUTATION_RULES", "evolutionary_search", "state_key"]


def state_key(s: State) -> str:
    return repr([x.to_record() for x in s.transform_steps])


def _valid(dag: Any, steps: list[ts.Step]) -> State | None:
    try:
        s = State(dag, steps)
        s._ctx = ts.replay(dag, steps, check_complete=True)  # kept: the features read it
    except Exception:  # noqa: BLE001 - an invalid mutant is dropped
        return None
    return s


def mutate_tile_size(state: State, rng: random.Random, hp: Any) -> State | None:
    steps = list(state.transform_steps)
    cands = [i for i, s in enumerate(steps) if isinstance(s, ts.SplitStep) and s.extent
             and s.lengths and None not in s.lengths and s.extent % math.prod(s.lengths) == 0]  # type: ignore[arg-type]
    if not cands:
        return None
    i = rng.choice(cands)
    s = steps[i]
    assert isinstance(s, ts.SplitStep) and s.extent is not None
    lengths = [int(x) for x in s.lengths if x is not None]
    levels = [s.extent // math.prod(lengths), *lengths]
    srcs = [k for k, v in enumerate(levels) if v > 1]
    if not srcs:
        return None
    src = rng.choice(srcs)
    dst = rng.choice([k for k in range(len(levels)) if k != src])
    f = rng.choice(_prime_factors(levels[src]))
    levels[src] //= f
    levels[dst] *= f
    if levels[-1] > hp.max_innermost_split_factor:
        return None
    steps[i] = replace(s, lengths=tuple(levels[1:]))
    return _valid(state.dag, steps)


def mutate_auto_unroll(state: State, rng: random.Random, hp: Any) -> State | None:
    """Another ``auto_unroll_max_step`` (``AUTO_UNROLL_CONFIGS``) on one stage."""
    return _mutate_pragma_value(state, rng, "auto_unroll_max_step", AUTO_UNROLL_CONFIGS)


def mutate_prefetch(state: State, rng: random.Random, hp: Any) -> State | None:
    """Another prefetch distance (``sketch_policy.PREFETCH_CONFIGS``) on one loop."""
    return _mutate_pragma_value(state, rng, "prefetch", PREFETCH_CONFIGS)


def _mutate_pragma_value(state: State, rng: random.Random, name: str,
                         configs: Any) -> State | None:
    """One ``NAME$V`` pragma step, picked at random, takes another value of ``configs``."""
    steps = list(state.transform_steps)
    cands = [i for i, s in enumerate(steps) if isinstance(s, ts.PragmaStep)
             and s.pragma_type.startswith(f"{name}$")]
    if not cands:
        return None
    i = rng.choice(cands)
    s = steps[i]
    assert isinstance(s, ts.PragmaStep)
    cur = int(s.pragma_type.partition("$")[2])
    v = rng.choice([c for c in configs if c != cur])
    steps[i] = replace(s, pragma_type=f"{name}${v}")
    return _valid(state.dag, steps)


def _shift_later(steps: list[ts.Step], start: int, stage: int, delta: int) -> None:
    """Loop ids >= 1 of ``stage`` in steps after ``start`` move by ``delta`` (the fused
    parallel loop, id 0, covers ``delta`` fewer original loops)."""
    for j in range(start, len(steps)):
        s = steps[j]
        if isinstance(s, (ts.AnnotationStep, ts.PragmaStep)) and s.stage_id == stage and s.iter_id >= 1:
            steps[j] = replace(s, iter_id=s.iter_id + delta)
        elif isinstance(s, ts.ComputeAtStep) and s.target_stage_id == stage and s.target_iter_id >= 1:
            steps[j] = replace(s, target_iter_id=s.target_iter_id + delta)
        elif isinstance(s, (ts.SplitStep, ts.FollowSplitStep)) and s.stage_id == stage and s.iter_id >= 1:
            steps[j] = replace(s, iter_id=s.iter_id + delta)


def mutate_parallel(state: State, rng: random.Random, hp: Any) -> State | None:
    steps = list(state.transform_steps)
    cands = []
    for j, s in enumerate(steps):
        if isinstance(s, ts.AnnotationStep) and s.annotation == ts.IteratorAnnotation.PARALLEL \
                and s.iter_id == 0:
            prev = steps[j - 1] if j > 0 else None
            fused = prev if isinstance(prev, ts.FuseStep) and prev.stage_id == s.stage_id \
                and prev.fused_ids and prev.fused_ids[0] == 0 else None
            cands.append((j, fused))
    if not cands:
        return None
    j, fused = rng.choice(cands)
    stage = steps[j].stage_id
    n_old = len(fused.fused_ids) if fused is not None else 1
    first = j - 1 if fused is not None else j
    # the loops the fuse may take: leading spatial loops at that point of the history
    try:
        ctx = ts.replay(state.dag, steps[:first])
    except Exception:  # noqa: BLE001
        return None
    leaves = ctx.stages[stage].leaf_iter_vars
    n_max = 0
    for iv in leaves:
        if iv.iter_type != 0:  # a reduction loop ends the parallel prefix
            break
        n_max += 1
    if n_max <= 1:
        return None
    n_new = rng.choice([n for n in range(1, n_max + 1) if n != n_old])
    head: list[ts.Step] = []
    if n_new > 1:
        head.append(ts.FuseStep(stage, tuple(range(n_new))))
    head.append(steps[j])
    new = steps[:first] + head + steps[j + 1:]
    _shift_later(new, first + len(head), stage, n_new - n_old)
    # follow-split steps name split steps by index: the history must keep its length
    if len(new) != len(steps) and any(isinstance(s, ts.FollowSplitStep) and s.src_step_id >= first
                                      for s in new):
        return None
    return _valid(state.dag, new)


def mutate_compute_location(state: State, rng: random.Random, hp: Any) -> State | None:
    steps = list(state.transform_steps)
    tiled = {s.stage_id for s in steps if isinstance(s, (ts.SplitStep, ts.FollowSplitStep))}
    cands = [i for i, s in enumerate(steps) if isinstance(s, ts.ComputeAtStep)
             and s.stage_id not in tiled]
    if not cands:
        return None
    i = rng.choice(cands)
    s = steps[i]
    assert isinstance(s, ts.ComputeAtStep)
    try:
        ctx = ts.replay(state.dag, steps[:i])
    except Exception:  # noqa: BLE001
        return None
    choices = []
    for k, iv in enumerate(ctx.stages[s.target_stage_id].leaf_iter_vars):
        if iv.iter_type != 0:
            break
        if k != s.target_iter_id:
            choices.append(k)
    if not choices:
        return None
    steps[i] = replace(s, target_iter_id=rng.choice(choices))
    return _valid(state.dag, steps)


Mutation = Callable[[State, random.Random, Any], "State | None"]
MUTATION_RULES: list[tuple[Mutation, float]] = [
    (mutate_tile_size, 0.88), (mutate_auto_unroll, 0.04), (mutate_prefetch, 0.02),
    (mutate_parallel, 0.02), (mutate_compute_location, 0.04),
]
"""Ansor's default mutation weights (tile size dominates), with the prefetch rule's share
taken from the tile sizes'."""


def mutate(state: State, rng: random.Random, hp: Any, tries: int = 6) -> State | None:
    rules, weights = zip(*MUTATION_RULES)
    for _ in range(tries):
        rule = rng.choices(rules, weights=weights)[0]
        out = rule(state, rng, hp)
        if out is not None:
            return out
    return None


def evolutionary_search(init: Sequence[State], score: Callable[[Sequence[State]], np.ndarray],
                        out_size: int, rng: random.Random, hp: Any, measured: set[str],
                        population: int = 256, num_iters: int = 3,
                        mutation_prob: float = 0.85) -> list[State]:
    """The ``out_size`` best-scored unmeasured states met while evolving ``init`` for
    ``num_iters`` generations of ``population`` (roulette selection by score, mutation)."""
    pop = list(init)
    best: list[tuple[float, int, State]] = []  # min-heap of the best unmeasured
    in_best: set[str] = set()
    tick = 0
    for gen in range(num_iters + 1):
        if not pop:
            break
        scores = np.asarray(score(pop), dtype="float64")
        scores = np.where(np.isfinite(scores), scores, -1e9)
        for s, sc in zip(pop, scores):
            k = state_key(s)
            if k in measured or k in in_best:
                continue
            tick += 1
            if len(best) < out_size:
                heapq.heappush(best, (float(sc), tick, s))
                in_best.add(k)
            elif sc > best[0][0]:
                _, _, old = heapq.heapreplace(best, (float(sc), tick, s))
                in_best.discard(state_key(old))
                in_best.add(k)
        if gen == num_iters:
            break
        w = scores - scores.min() + 1e-6
        probs = w / w.sum()
        nxt: list[State] = []
        seen: set[str] = set()
        for _ in range(population * 2):
            if len(nxt) >= population:
                break
            parent = pop[int(np.searchsorted(np.cumsum(probs), rng.random() * 0.999999))]
            child = mutate(parent, rng, hp) if rng.random() < mutation_prob else parent
            if child is None:
                continue
            k = state_key(child)
            if k not in seen:
                seen.add(k)
                nxt.append(child)
        pop = nxt
    return [s for _, _, s in sorted(best, key=lambda x: -x[0])]
