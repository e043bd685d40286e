"""Features of a state for the cost model (after Ansor's ``feature.cc``, read off the loop nest).

Ansor extracts per-store features from the lowered program in C++; lowering every candidate
here costs 0.1-1 s (LoopPartition dominates), and the evolutionary search scores thousands of
candidates per round. So the features are read from the state's replayed te schedule (what the
program's loop nests will be, without lowering): per computed stage, the loop structure
(extents of the parallel, vectorized, innermost and register-tile loops, the unroll and
prefetch pragmas,
how often an attached stage is recomputed, the tile footprints), and the state's vector is the
stages' vectors placed by role (the costliest reduction, the output, the sums over the rest).
Features are log2-scaled; the vector length is fixed (:data:`N_FEATURES`), whatever the DAG.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..te.schedule import INLINE
from ..te.tensor import ComputeOp
from ..tir.expr import IterVar
from .feature_access import (
    ACCESS_FEATURE_NAMES,
    N_READS,
    STAGE_ACCESS_FEATURE_NAMES,
    access_features,
    effective_extents,
    loop_maps,
)

__all__ = ["get_per_state_features", "state_features", "N_FEATURES", "STAGE_FEATURE_NAMES",
           "FEATURE_NAMES"]

STAGE_FEATURE_NAMES = (
    "present", "is_reduction", "attached", "log_recompute", "n_loops", "log_parallel",
    "log_vectorize", "log_unroll_step", "log_innermost", "innermost_is_reduce",
    "log_inner_spatial_tile", "log_inner_reduce_tile", "log_total_iters", "log_outer_spatial",
    "n_reduce_loops", "log_second_innermost", "vectorize_is_innermost", "log_attached_inner",
    "log_prefetch",
)
_NS = len(STAGE_FEATURE_NAMES) + len(STAGE_ACCESS_FEATURE_NAMES) \
    + (N_READS + 1) * len(ACCESS_FEATURE_NAMES)
N_FEATURES = 3 * _NS + 3
_STAGE_NAMES = (*STAGE_FEATURE_NAMES, *STAGE_ACCESS_FEATURE_NAMES,
                *(f"{g}{k}.{f}" for g, cnt in (("read", N_READS), ("write", 1))
                  for k in range(cnt) for f in ACCESS_FEATURE_NAMES))
FEATURE_NAMES = (*(f"{role}.{f}" for role in ("main", "out", "rest") for f in _STAGE_NAMES),
                 "n_stages", "n_inlined", "n_steps")
"""The name of every column of :func:`state_features`' vector."""
OLD_FEATURES = np.array([r * _NS + i for r in range(3) for i in range(len(STAGE_FEATURE_NAMES))]
                        + [3 * _NS, 3 * _NS + 1, 3 * _NS + 2])
"""The columns of the loop-structure features alone (the features before the access ones)."""
_I_TOTAL = STAGE_FEATURE_NAMES.index("log_total_iters")


def _l2(x: float) -> float:
    return math.log2(max(1.0, float(x)))


def _stage_vector(ctx: Any, k: int, recompute: float,
                  regions: dict[str, list[float]] | None) -> np.ndarray:
    st = ctx.stages[k]
    leaves = list(st.leaf_iter_vars)
    ext = [ctx.extent(iv) or 1 for iv in leaves]
    red = [iv.iter_type == IterVar.CommReduce for iv in leaves]
    kinds = []
    for iv in leaves:
        a = st.iter_var_attrs.get(iv)
        kinds.append(a.kind if a is not None else None)
    par = [e for e, kd in zip(ext, kinds) if kd == IterVar.Parallelized]
    vec = [e for e, kd in zip(ext, kinds) if kd == IterVar.Vectorized]
    unroll = prefetch = 0
    for a in st.iter_var_attrs.values():
        pragmas = getattr(a, "pragmas", None) or {}
        val = pragmas.get("auto_unroll_max_step")
        if val is not None:
            unroll = max(unroll, int(getattr(val, "value", val)))
        val = pragmas.get("prefetch")
        if val is not None:
            prefetch = max(prefetch, int(getattr(val, "value", val)))
    # the register tile: the spatial loops after the last reduction loop; the reduce tile:
    # the reduction loops after the first spatial loop that follows a reduction loop
    last_r = max((i for i, r in enumerate(red) if r), default=-1)
    inner_s = math.prod(e for e, r in zip(ext[last_r + 1:], red[last_r + 1:]) if not r)
    first_r = next((i for i, r in enumerate(red) if r), len(red))
    inner_r = math.prod(e for e, r in zip(ext[first_r:], red[first_r:]) if r and last_r >= 0)
    outer_s = math.prod(ext[:first_r]) if ext else 1
    attached_inner = 0.0
    for other in ctx.stages:
        if other.attach_stage is st and other.attach_ivar in leaves:
            i = leaves.index(other.attach_ivar)
            attached_inner = max(attached_inner, _l2(math.prod(ext[i + 1:])))
    acc: list[float] = []
    if regions is not None:
        maps = loop_maps(ctx, st)
        region = regions.get(st.op.name) if st.attach_stage is not None else None
        eff = ext if region is None else effective_extents(maps, len(st.op.axis), ext, region)
        attached = {o.op.name: leaves.index(o.attach_ivar) for o in ctx.stages
                    if o.attach_stage is st and o.attach_ivar in leaves}
        acc = access_features(ctx, st, eff, kinds, recompute, IterVar.Vectorized,
                              IterVar.Unrolled, maps, attached, regions)
    return np.array([
        1.0, float(any(red)), float(st.attach_stage is not None), _l2(recompute), len(leaves),
        _l2(math.prod(par) if par else 1), _l2(math.prod(vec) if vec else 1), _l2(1 + unroll),
        _l2(ext[-1]) if ext else 0.0, float(red[-1]) if red else 0.0, _l2(inner_s),
        _l2(inner_r), _l2(math.prod(ext) * recompute), _l2(outer_s), float(sum(red)),
        _l2(ext[-2]) if len(ext) > 1 else 0.0,
        float(bool(vec) and kinds[-1] == IterVar.Vectorized), attached_inner, _l2(1 + prefetch),
        *acc,
    ], dtype="float64")


def _recompute(ctx: Any, k: int) -> float:
    """How many times stage ``k`` runs: the product of the loops enclosing its attach point."""
    st = ctx.stages[k]
    n = 1.0
    while st.attach_stage is not None:
        a = st.attach_stage
        leaves = list(a.leaf_iter_vars)
        if st.attach_ivar not in leaves:
            break
        i = leaves.index(st.attach_ivar)
        n *= math.prod(ctx.extent(iv) or 1 for iv in leaves[:i + 1])
        st = a
    return n


def state_features(state: Any, access: bool = True) -> np.ndarray:
    """The fixed-length feature vector of one (complete) state (``access=False``: the loop
    structure features alone, the columns :data:`OLD_FEATURES` of the full vector)."""
    ctx = state.ctx
    vecs: list[tuple[int, np.ndarray, bool, bool]] = []
    n_inline = 0
    # the span each consumer reads of a stage computed at its loop: visit consumers first
    regions: dict[str, list[float]] | None = {} if access else None
    for k in range(len(ctx.stages) - 1, -1, -1):
        st = ctx.stages[k]
        if not isinstance(st.op, ComputeOp):
            continue
        if st.attach_type == INLINE:
            n_inline += 1
            continue
        v = _stage_vector(ctx, k, _recompute(ctx, k), regions)
        vecs.append((k, v, bool(st.op.reduce_axis), bool(st.is_output)))
    vecs.reverse()
    main = max((x for x in vecs if x[2]), key=lambda x: x[1][_I_TOTAL], default=None)
    out = next((x for x in reversed(vecs) if x[3] and x is not main), None)
    rest = [x[1] for x in vecs if x is not main and x is not out]
    zero = np.zeros(_NS if access else len(STAGE_FEATURE_NAMES))
    return np.concatenate([
        main[1] if main is not None else zero, out[1] if out is not None else zero,
        np.sum(rest, axis=0) if rest else zero,
        np.array([len(vecs), n_inline, len(state.transform_steps)], dtype="float64"),
    ])


def get_per_state_features(states: Sequence[Any]) -> np.ndarray:
    """``(len(states), N_FEATURES)``; a state that does not replay gets a row of NaN."""
    rows = np.full((len(states), N_FEATURES), np.nan)
    for i, s in enumerate(states):
        try:
            rows[i] = state_features(s)
        except Exception:  # noqa: BLE001 - an invalid state: scored as the worst
            pass
    return rows
