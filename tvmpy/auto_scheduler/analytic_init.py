"""Analytic initial states: the annotations a careful engineer picks, from a register-blocking
model of the target (not from shapes or operator names), measured in the search's first batch
and seeded into every evolutionary population.

Random annotation starts far below the hand-written x86 schedules (a random tile rarely puts
a whole vector on the contiguous axis and a register-sized block of accumulators around it),
and with the 20-40 trials per task a model's search can afford, evolution never climbs out.
For each multi-level-tiling ("SSRSRS") and reduction-tiling ("SRS") sketch this module fills
the tile sizes deterministically:

- innermost tile of the last spatial axis (the contiguous output axis, the one that
  vectorizes): a multiple of the vector lanes (``vector_unit_bytes`` / dtype bytes) dividing
  the extent, else the largest divisor up to the lanes, else the extent;
- the other innermost spatial tiles: a register tile whose accumulators (vectors) fill a
  share of the target's vector register file (``num_vector_registers``: 32 with AVX-512, 16
  with AVX2/SSE), shaped for reuse from the compute's own read accesses (each operand is
  loaded once per tile combination of the axes its index depends on: a conv's weights per
  output-channel tile, its input per pixel tile, so the fewest loads per FMA is a balanced
  channels x pixels tile, a matmul's a row tile), in two or three shapes;
- a second reduction variant blocks for L1 (``l1d_bytes``): a middle spatial tile around the
  register tile with the innermost reduction axis tiled, so the reduction's operand panel
  stays in L1 across the middle tile (the classic GEMM blocking);
- the rest on the outermost level: the parallel loop fuses the outer loops (up to the
  compute location of the fused producer), reaching the core count where the shape allows;
- ``auto_unroll_max_step`` just covering the register tile's loop nest; two variants
  prefetch the streamed operands :data:`PREFETCH_BYTES` ahead in the innermost reduction loop
  (as the x86 NCHWc defaults' stacked-row tiles); injective untiled
  stages inlined, except those with a branch (padding: a bounds test per read) that their
  consumer reads many times per element, which stay at the root (one variant flips it).

Sketches with other open splits (rfactor) get no analytic state: the random annotations
cover them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..te.schedule import INLINE, ROOT
from ..tir.expr import IterVar
from . import transform_step as ts
from .compute_dag import branch_and_expensive
from .loop_state import State
from .sketch_policy import (
    AUTO_UNROLL_CONFIGS,
    _attached_iters,
    _consumers,
    _is_compute,
    innermost_reduce_iter,
)

PREFETCH_BYTES = 4096
"""The prefetch distance of the analytic variants that prefetch (the x86 NCHWc defaults'
``topi.x86.conv2d_nchwc.PREFETCH_BYTES``: 4 KiB ahead streamed at memory bandwidth there)."""

__all__ = ["analytic_states", "analytic_annotations", "vector_tile", "register_tile",
           "private_operand", "TileChoice"]


def _dtype_bytes(dtype: str) -> int:
    bits = int("".join(ch for ch in str(dtype) if ch.isdigit()) or 32)
    return max(1, bits // 8)


def vector_tile(extent: int, lanes: int, vectors: int = 1) -> int:
    """The innermost tile of the vectorized axis: ``vectors`` x ``lanes`` if it divides
    ``extent``, else one vector if that divides, else the largest divisor <= ``lanes`` that is
    at least half a vector, else ``extent`` when it is shorter than a vector, else ``lanes``
    (a guarded tail)."""
    if extent <= lanes:
        return max(1, extent)
    for v in (vectors * lanes, lanes):
        if extent % v == 0 and v <= extent:
            return v
    for d in range(lanes, max(1, lanes // 2) - 1, -1):
        if extent % d == 0:
            return d
    return lanes


def _largest_divisor(n: int, cap: int) -> int:
    for d in range(max(1, min(n, cap)), 0, -1):
        if n % d == 0:
            return d
    return 1


def register_tile(extents: Sequence[int], want: int, operands: Sequence[set[int]] = (),
                  rank: int = 0, fewest_axes: bool = False) -> list[int]:
    """Tiles of ``extents`` (the spatial axes outside the vectorized one) holding at most
    ``want`` accumulators, chosen for reuse: each operand of the reduction (``operands``: the
    axes, indices into ``extents``, its index depends on) is loaded once per combination of
    its axes' tiles, and every accumulator costs one FMA per load round, so the tile with
    the fewest loads per FMA wins (ties: fewer axes, more accumulators, inner axes). Divisors only
    (no guarded tail inside the register tile). ``rank`` 1: the second-best distinct tile.
    ``fewest_axes``: the number of tiled axes decides first (see :func:`private_operand`)."""
    axes = [i for i, e in enumerate(extents) if e > 1]
    if not axes:
        return [1] * len(extents)
    choices: list[list[int]] = [[1]]
    for i in axes:
        choices = [c + [d] for c in choices for d in range(1, min(extents[i], want) + 1)
                   if extents[i] % d == 0 and math.prod(c) * d <= want]
    scored = []
    for c in choices:
        t = dict(zip(axes, c[1:]))
        fma = math.prod(t.values())
        loads = sum(math.prod(t.get(a, 1) for a in deps) for deps in operands) or 1
        # within 5% of loads per FMA: fewer tiled axes (a run of contiguous columns, whose
        # sliding windows share loads: 0.9x vs 1.1-1.5x a 4 x 4 tile on a 3x3 depthwise),
        # then more accumulators, then inner axes first
        inner = tuple(-t[a] for a in reversed(axes))
        n_axes = sum(1 for v in t.values() if v > 1)
        key = (round(loads / fma * 20), n_axes)
        if fewest_axes:  # one tiled axis at least: a single accumulator is no tile
            key = (max(1, n_axes), key[0])
        scored.append((*key, -fma, inner, c[1:]))
    scored.sort()
    picks: list[list[int]] = []
    for *_, c in scored:
        if c not in picks:
            picks.append(c)
    pick = picks[min(rank, len(picks) - 1)]
    out = [1] * len(extents)
    for a, d in zip(axes, pick):
        out[a] = d
    return out


def operand_axes(op: Any, spatial: int) -> list[set[int]]:
    """For each tensor ``op`` reads, the spatial axes (indices < ``spatial`` into
    ``op.axis``) its indices depend on."""
    from .compute_dag import _vars_of, read_accesses

    ids = [id(iv.var) for iv in op.axis][:spatial]
    out = []
    for lst in read_accesses(op).values():
        used: set[int] = set()
        for idx in lst:
            for x in idx:
                used |= _vars_of(x)
        out.append({i for i, v in enumerate(ids) if v in used})
    return out


def largest_operand_axes(op: Any, spatial: int) -> set[int] | None:
    """The spatial axes (as :func:`operand_axes`) the largest tensor ``op`` reads depends on
    (by elements), or None when ``op`` reads nothing of known shape."""
    from .compute_dag import read_accesses

    by_op = {id(t.op): t for t in op.input_tensors}
    reads = list(read_accesses(op))
    sizes = []
    for key in reads:
        t = by_op.get(key)
        try:
            sizes.append(math.prod(int(getattr(d, "value", d)) for d in t.shape) if t else 0)
        except (TypeError, ValueError):
            sizes.append(0)
    if not reads or max(sizes) <= 0:
        return None
    return operand_axes(op, spatial)[sizes.index(max(sizes))]


def private_operand(operands: Sequence[set[int]], extents: Sequence[int]) -> bool:
    """Whether some operand's index depends on every tiled axis (``extents`` > 1) and on the
    vectorized one (the last of ``extents``; ``operands``: the axes each operand's index
    depends on): each accumulator of the register tile then reads its own vector of it per
    reduction step (a depthwise convolution's input; a matmul's row operand is a broadcast
    scalar instead), and the tile holds half the accumulators. Its loads per FMA hardly depend on the tile's shape (1 + 1/accumulators:
    only the shared operand is reused), so a run of columns on one axis is preferred to a
    two-dimensional tile. A 3x3 stride-2 depthwise NCHW16c + SiLU, 1 thread (min of 80 short
    runs vs the x86 default): 14 columns 1.06x, 8 columns 0.99-1.01x, 4 columns 1.08x; 5x5
    stride 2, 28 columns: 2 rows x 4 columns 1.93x."""
    axes = {i for i, e in enumerate(extents[:-1]) if e > 1}
    return bool(axes) and any(axes | {len(extents) - 1} <= deps for deps in operands)


@dataclass(frozen=True)
class TileChoice:
    """One analytic variant: accumulators (vector registers) of the register tile, its shape
    (``rank``: the best or second-best by reuse, ``vectors``: vectors on the contiguous axis),
    whether to block the reduction for L1, and whether the default location of stages with
    branches (padding, see ``INLINE_PAD_MAX_READS``) is flipped, and the prefetch distance
    (bytes, 0: none) on the innermost reduction loop of the tiled stages. ``stationary``: the
    register tile spans only axes the largest operand does not depend on, so each of its
    vectors is loaded once per tile and used by every accumulator (a convolution's weights
    on a small map: rows x columns of pixels and one output-channel vector, the x86 NCHWc
    defaults' stacked-row tile), for an operand that streams from memory."""

    accumulators: int
    rank: int = 0
    vectors: int = 1
    l1_block: bool = False
    inline_branchy: bool = False
    prefetch: int = 0
    stationary: bool = False


def _variants(hp: Any) -> list[TileChoice]:
    regs = int(getattr(hp, "num_vector_registers", 16))
    half, three_q = max(2, regs // 2), max(2, 3 * regs // 4)
    return [
        TileChoice(half),
        TileChoice(three_q),
        # third to fifth: within the first batch's limit when a task has up to 3 sketches
        TileChoice(half, prefetch=PREFETCH_BYTES),
        TileChoice(half, stationary=True, prefetch=PREFETCH_BYTES),
        TileChoice(half, stationary=True),
        TileChoice(half, vectors=2),
        TileChoice(half, l1_block=True),
        TileChoice(half, inline_branchy=True),
        TileChoice(half, rank=1),
        TileChoice(three_q, l1_block=True),
        TileChoice(three_q, prefetch=PREFETCH_BYTES),
    ]


@dataclass
class _Split:
    step: int
    extent: int
    n: int  # lengths to fill
    spatial: bool


def _open_splits(sketch: State) -> dict[int, list[_Split]] | None:
    """The open splits of ``sketch`` per stage, or None if one is not a tiling this model
    knows (a split of unknown extent, or an rfactor's split)."""
    steps = sketch.transform_steps
    if any(isinstance(s, ts.RfactorStep) for s in steps):
        return None
    out: dict[int, list[_Split]] = {}
    for i, s in enumerate(steps):
        if not isinstance(s, ts.SplitStep) or None not in s.lengths:
            continue
        if not s.extent:
            return None
        ctx = ts.replay(sketch.dag, steps[:i])
        iv = ctx.stages[s.stage_id].leaf_iter_vars[s.iter_id]
        out.setdefault(s.stage_id, []).append(
            _Split(i, int(s.extent), len(s.lengths), iv.iter_type != IterVar.CommReduce))
    return out or None


def _fill_stage(splits: list[_Split], lanes: int, choice: TileChoice, hp: Any,
                dtype_bytes: int, op: Any) -> tuple[dict[int, tuple[int, ...]], int] | None:
    """Lengths of each open split of one tiled stage, and the loop count of its innermost
    (unrolled) block; None where the variant does not apply to the stage."""
    sp = [s for s in splits if s.spatial]
    rd = [s for s in splits if not s.spatial]
    if not sp or len({s.n for s in sp}) != 1 or len({s.n for s in rd}) > 1:
        return None
    n_s = sp[0].n + 1  # spatial levels
    vec = vector_tile(sp[-1].extent, lanes, choice.vectors)
    n_vec = max(1, -(-vec // lanes))
    outer_ext = [s.extent for s in sp[:-1]]
    ops = operand_axes(op, len(outer_ext)) if len(op.axis) == len(sp) else []
    want = max(1, choice.accumulators // n_vec)
    private = n_s >= 3 and len(op.axis) == len(sp) and private_operand(
        operand_axes(op, len(sp)), [s.extent for s in sp])
    if private:
        want = max(1, want // 2)
    tile_ext = list(outer_ext)
    if choice.stationary:
        big = largest_operand_axes(op, len(outer_ext)) if len(op.axis) == len(sp) else None
        if big is None or all(tile_ext[i] <= 1 for i in range(len(tile_ext)) if i not in big):
            return None  # nothing to tile around it: the variant is one of the others
        tile_ext = [1 if i in big else e for i, e in enumerate(tile_ext)]
    reg = register_tile(tile_ext, want, ops, choice.rank, fewest_axes=private)
    # keep the parallel outer loops at the core count where the shape allows: shrink the
    # register tile from its outermost axis (a serial kernel loses more than spills)
    cores = int(getattr(hp, "num_cores", 1))
    full = [s.extent for s in sp]
    while math.prod(e // t for e, t in zip(full, [*reg, vec])) < cores:
        i = next((i for i, t in enumerate(reg) if t > 1), None)
        if i is None:
            break
        reg[i] = _largest_divisor(full[i], reg[i] - 1)
    inner = [*reg, vec]
    middle = [1] * len(sp)
    red_inner = [1] * len(rd)
    l1 = int(getattr(hp, "l1d_bytes", 32 * 1024))
    if choice.l1_block and rd and n_s >= 3:
        # a middle tile on the first non-trivial axis outside the register tile, and the
        # innermost reduction axis tiled so that its operand panel (reduction tile x the
        # register tile's vectors) and the middle block of accumulators fit half of L1
        rest = [e // t for e, t in zip([s.extent for s in sp], inner)]
        cand = [i for i in range(len(sp) - 2, -1, -1) if rest[i] > 1]
        if cand:
            middle[cand[0]] = _largest_divisor(rest[cand[0]], 4)
        block = math.prod(inner) * math.prod(middle) * dtype_bytes
        panel_cap = max(1, (l1 // 2 - block) // max(1, vec * dtype_bytes))
        r_ext = rd[-1].extent
        red_inner[-1] = _largest_divisor(r_ext, min(panel_cap, r_ext))
        if red_inner[-1] == r_ext and len(rd) == 1 and r_ext > 1:
            red_inner[-1] = _largest_divisor(r_ext, max(1, r_ext // 2))
    out: dict[int, tuple[int, ...]] = {}
    for s, t, m in zip(sp, inner, middle):
        if n_s >= 4:  # SSRSRS: (S1, S2, S3) inner lengths
            out[s.step] = (*[1] * (n_s - 3), m, t)
        elif n_s == 3:
            out[s.step] = (m, t)
        else:  # SRS
            out[s.step] = (t,)
    for s, r in zip(rd, red_inner):
        out[s.step] = (*[1] * (s.n - 1), r)
    unrolled = math.prod(t for t in inner[:-1]) * max(1, n_vec) * math.prod(red_inner)
    return out, unrolled


def _unroll_step(loops: int) -> int:
    for v in AUTO_UNROLL_CONFIGS:
        if v >= loops and v > 0:
            return v
    return AUTO_UNROLL_CONFIGS[-1]


def _locate(state: State, tiled: set[int], inline_branchy: bool) -> None:
    """Untiled root stages with one consumer, not outputs: injective ones inlined, those with
    a branch (padding) only where the consumer reads each element at most
    ``INLINE_PAD_MAX_READS`` times (``inline_branchy`` flips that choice); the rest at the
    root."""
    stages = state.ctx.stages
    for k in range(len(stages) - 1, -1, -1):
        st = stages[k]
        if (not _is_compute(st) or st.is_output or st.attach_type != ROOT or k in tiled
                or st.relations or st.op.reduce_axis
                or any(other.attach_stage is st for other in stages)):
            continue
        cons = _consumers(state, k)
        if len(cons) != 1:
            continue
        if branch_and_expensive(st.op)[0] and inline_branchy == (_reads_per_element(
                st.op, stages[cons[0]].op) <= INLINE_PAD_MAX_READS):
            continue  # padding read many times stays at the root, once or twice inlined
        state.compute_inline(k)


INLINE_PAD_MAX_READS = 32
"""Reads per element of a stage with a branch (padding) up to which it is inlined by default:
a depthwise convolution reads each padded pixel once per window tap (9 for 3x3), and a
padded copy is a whole extra pass over its input for that little work (inlined: 1.5x vs
1.7-2.1x the x86 default's time, 3x3 depthwise, 1 thread); a convolution over 32+ input
channels reads it once per output channel, and the bounds test per read costs 1.7-2.8x."""


def _extent_product(axes: Sequence[Any]) -> int:
    out = 1
    for iv in axes:
        e = getattr(iv.known_dom.extent, "value", None) if iv.dom is not None else None
        out *= int(e) if isinstance(e, int) else 1
    return out


def _reads_per_element(producer: Any, consumer: Any) -> float:
    """How often ``consumer``'s loop nest reads each element of ``producer`` (its spatial x
    reduction iterations over ``producer``'s size): the work an inlined copy repeats."""
    size = math.prod(int(getattr(d, "value", d)) for d in producer.output(0).shape)
    work = _extent_product(consumer.axis) * _extent_product(getattr(consumer, "reduce_axis", []))
    return work / max(1, size)


def _annotate_loops(state: State, hp: Any, unroll: dict[int, int], prefetch: int = 0) -> None:
    """Parallel outer loops of every root stage, vectorized innermost spatial loops, unroll
    pragmas on the tiled / reducing stages, a ``prefetch`` pragma on the innermost reduction
    loop of the tiled reductions."""
    for k in range(len(state.ctx.stages)):
        st = state.ctx.stages[k]
        if not _is_compute(st) or st.attach_type == INLINE:
            continue
        view = state[k]
        if view.iters and k not in unroll:
            # an untiled stage's long innermost loop (an epilogue over a whole row): split
            # off whole vectors so that it vectorizes too
            last = view.iters[-1]
            if (last.iter_kind == 0 and not last.annotation and last.extent is not None
                    and last.extent > hp.max_innermost_split_factor
                    and last.index not in _attached_iters(state, k)):
                lanes = max(1, hp.vector_unit_bytes // _dtype_bytes(str(st.op.output(0).dtype)))
                state.split(k, last.index, [vector_tile(last.extent, lanes, 2)])
                view = state[k]
        if st.attach_type == ROOT:
            attached = _attached_iters(state, k)
            to_fuse: list[int] = []
            degree = 1
            # the innermost loop stays out of the parallel loop: it is the one that vectorizes
            for it in view.iters[:-1] if len(view.iters) > 1 else view.iters:
                if it.iter_kind != 0 or it.annotation:
                    break
                to_fuse.append(it.index)
                degree *= it.extent or 1
                if it.index in attached or (degree >= hp.num_cores * 16 and not attached):
                    break
            if to_fuse and degree > 1:
                f = state.fuse(k, to_fuse) if len(to_fuse) > 1 else view.iters[to_fuse[0]]
                state.parallel(k, f.index)
        view = state[k]
        if view.iters:
            last = view.iters[-1]
            if (last.iter_kind == 0 and not last.annotation and last.extent is not None
                    and 1 < last.extent <= hp.max_innermost_split_factor
                    and last.index not in _attached_iters(state, k)):
                state.vectorize(k, last.index)
        if (k in unroll or st.op.reduce_axis) and state[k].iters:
            state.pragma(k, 0, f"auto_unroll_max_step${unroll.get(k, 16)}")
        r = innermost_reduce_iter(state, k) if k in unroll and st.op.reduce_axis else None
        if r is not None:
            state.pragma(k, r, f"prefetch${prefetch}")


def analytic_annotations(sketch: State, hp: Any,
                         variants: Sequence[TileChoice] | None = None) -> list[State]:
    """The analytic complete states of one sketch (none if its splits are not a tiling this
    model knows, or a variant fails to replay)."""
    opened = _open_splits(sketch)
    if opened is None:
        return []
    out: list[State] = []
    for choice in variants if variants is not None else _variants(hp):
        steps = list(sketch.transform_steps)
        unroll: dict[int, int] = {}
        ok = True
        for sid, splits in opened.items():
            dtype = str(sketch.ctx.stages[sid].op.output(0).dtype)
            b = _dtype_bytes(dtype)
            lanes = max(1, hp.vector_unit_bytes // b)
            filled = _fill_stage(splits, lanes, choice, hp, b, sketch.ctx.stages[sid].op)
            if filled is None:
                ok = False
                break
            lengths, loops = filled
            for i, ln in lengths.items():
                s = steps[i]
                assert isinstance(s, ts.SplitStep)
                steps[i] = ts.SplitStep(s.stage_id, s.iter_id, s.extent, ln, s.inner_to_outer)
            unroll[sid] = _unroll_step(loops)
        if not ok:
            continue
        try:
            state = State(sketch.dag, steps)
            tiled = set(opened)
            # stage ids of the tiled stages do not move: inlining keeps every stage
            _locate(state, tiled, choice.inline_branchy)
            _annotate_loops(state, hp, unroll, choice.prefetch)
            ts.replay(state.dag, state.transform_steps, check_complete=True)
        except Exception:  # noqa: BLE001 - a variant the schedule refuses is left out
            continue
        out.append(state)
    return out


def analytic_states(task: Any, sketches: Sequence[State], limit: int = 16) -> list[State]:
    """Distinct analytic states of ``task``'s sketches, at most ``limit``: the variants are
    interleaved across sketches (every sketch's first variant, then every second ...) so a
    small first batch still covers each sketch."""
    hp = task.hardware_params
    per = [analytic_annotations(s, hp) for s in sketches]
    out: list[State] = []
    seen: set[str] = set()
    for j in range(max((len(p) for p in per), default=0)):
        for p in per:
            if j < len(p):
                key = repr([x.to_record() for x in p[j].transform_steps])
                if key not in seen:
                    seen.add(key)
                    out.append(p[j])
    return out[:limit]
