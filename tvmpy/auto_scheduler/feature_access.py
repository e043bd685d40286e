"""Per buffer access features of one stage (after Ansor's ``feature.cc``), without lowering.

Each read and write of a computed stage is an affine map from the stage's root axes to the
buffer's indices (read off the compute's index expressions, through inlined producers). The
replayed stage's leaf loops are affine in the root axes too (split: ``parent = outer * f +
inner``; fuse: the fused loop counts in steps of its inner part). Composing the two gives, per
loop and buffer dimension, the stride of the access, from which Ansor's per-access quantities
follow: bytes, unique bytes and cache lines touched inside each loop level, the innermost loop
the access does not depend on (its reuse: count, distance in iterations and in bytes), the
stride of the innermost loop, and how the vector loop walks the buffer (contiguous, broadcast,
strided). The affine maps of an operation are computed once per DAG and cached.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..te.schedule import INLINE
from ..te.tensor import ComputeOp, Reduce
from ..tir import expr as E

__all__ = ["ACCESS_FEATURE_NAMES", "STAGE_ACCESS_FEATURE_NAMES", "N_READS", "access_features"]

CACHE_LINE = 64
N_READS = 3
"""Reads reported per stage (the ones touching the most cache lines); one write besides."""
N_LEVELS = 4
"""Bytes touched by all accesses inside the innermost 1..N_LEVELS loops (register/L1 tiles)."""

ACCESS_FEATURE_NAMES = (
    "present", "log_bytes", "log_unique_bytes", "log_lines", "has_loop_reuse", "log_reuse_ct",
    "log_reuse_dis_iter", "log_reuse_dis_bytes", "log_bytes_d_reuse", "log_lines_d_reuse",
    "log_stride", "vec_contiguous", "vec_broadcast", "vec_strided", "log_inner1_bytes",
    "log_inner2_bytes",
)
STAGE_ACCESS_FEATURE_NAMES = (
    "log_flops", "log_arith_intensity", "log_alloc_bytes", "log_unroll_extent", "n_vector_loops",
    "log_vec_lanes_total", *(f"log_inner{k}_bytes_all" for k in range(1, N_LEVELS + 1)),
    "log_unique_bytes_all", "log_lines_all", "frac_reads_vec_contig",
)
_NA = len(ACCESS_FEATURE_NAMES)
_LOG_COLS = [i for i, n in enumerate(ACCESS_FEATURE_NAMES) if n.startswith("log_")]

Lin = dict[int, float]  # root axis position -> coefficient


def _l2(x: float) -> float:
    return math.log2(max(1.0, float(x)))


def _elem_bytes(dtype: str) -> int:
    digits = "".join(c for c in dtype.split("x")[0] if c.isdigit())
    return max(1, int(digits) // 8) if digits else 4


@dataclass
class _Access:
    name: str  # the tensor: its operation's name, and ":k" for output k > 0
    shape: tuple[int, ...]
    elem_bytes: int
    dims: tuple[Lin, ...]
    write: bool


@dataclass
class _OpInfo:
    """The accesses of one operation, stacked for numpy: column ``j`` of ``coef`` is one buffer
    dimension (``seg`` gives each access's first column; a scalar access has one column of
    extent 1), ``flops`` the arithmetic per iteration."""

    accesses: list[_Access]
    flops: float
    coef: np.ndarray  # (n_roots, n_columns): root axis -> index of that buffer dimension
    shape: np.ndarray  # (n_columns,)
    elem_stride: np.ndarray  # (n_columns,): row-major stride of the dimension, in elements
    seg: np.ndarray  # (n_accesses,)
    last: np.ndarray  # (n_accesses,): each access's last (contiguous) column
    eb: np.ndarray  # (n_accesses,)
    write: np.ndarray  # (n_accesses,) bool


def _stack(accesses: list[_Access], n_roots: int, flops: float) -> _OpInfo:
    cols: list[Lin] = []
    shape: list[int] = []
    stride: list[int] = []
    seg, last = [], []
    for a in accesses:
        seg.append(len(cols))
        dims, shp = (a.dims, a.shape) if a.shape else (({},), (1,))
        for d, lin in enumerate(dims):
            cols.append(lin)
            shape.append(max(1, shp[d]))
            stride.append(math.prod(shp[d + 1:]))
        last.append(len(cols) - 1)
    coef = np.zeros((n_roots, len(cols)))
    for j, lin in enumerate(cols):
        for k, v in lin.items():
            if k < n_roots:
                coef[k, j] = v
    return _OpInfo(accesses, flops, coef, np.array(shape, dtype="float64"),
                   np.array(stride, dtype="float64"), np.array(seg), np.array(last),
                   np.array([a.elem_bytes for a in accesses], dtype="float64"),
                   np.array([a.write for a in accesses]))


def _tname(t: Any) -> str:
    return t.op.name if t.value_index == 0 else f"{t.op.name}:{t.value_index}"


def _lin(e: Any, env: dict[int, Lin]) -> Lin:
    """The affine form of index expression ``e`` over root positions (non-affine parts: each
    variable met counts with coefficient 1)."""
    if isinstance(e, E.Var):
        return dict(env.get(id(e), {}))
    if isinstance(e, (E.IntImm, E.FloatImm)):
        return {}
    if isinstance(e, E.Cast):
        return _lin(e.value, env)
    if isinstance(e, (E.Add, E.Sub)):
        a, b = _lin(e.a, env), _lin(e.b, env)
        sign = -1.0 if isinstance(e, E.Sub) else 1.0
        for k, v in b.items():
            a[k] = a.get(k, 0.0) + sign * v
        return a
    if isinstance(e, E.Mul):
        for x, c in ((e.a, e.b), (e.b, e.a)):
            if isinstance(c, E.IntImm):
                return {k: v * c.value for k, v in _lin(x, env).items()}
    if isinstance(e, (E.FloorDiv, E.Div)) and isinstance(e.b, E.IntImm) and e.b.value:
        return {k: v / e.b.value for k, v in _lin(e.a, env).items()}
    if isinstance(e, (E.FloorMod, E.Mod)) and isinstance(e.b, E.IntImm):
        return _lin(e.a, env)
    out: Lin = {}
    for f in getattr(e, "_fields", ()):
        sub = getattr(e, f, None)
        for x in sub if isinstance(sub, tuple) else (sub,):
            if isinstance(x, E.PrimExpr):
                for k in _lin(x, env):
                    out[k] = 1.0
    return out


_FLOP_NODES = (E.Add, E.Sub, E.Mul, E.Div, E.FloorDiv, E.Min, E.Max, E.Select)


def _walk(e: Any, env: dict[int, Lin], sch: Any, acc: list[_Access], depth: int = 0) -> float:
    """Collect the reads of ``e`` into ``acc`` (through inlined producers); return its flops."""
    if isinstance(e, E.ProducerLoad):
        t = e.producer
        st = sch.stage_map.get(t.op)
        idx = [_lin(i, env) for i in e.indices]
        if st is not None and st.attach_type == INLINE and isinstance(t.op, ComputeOp) and depth < 16:
            penv = {id(iv.var): lin for iv, lin in zip(t.op.axis, idx)}
            return _walk(t.op.body[t.value_index], penv, sch, acc, depth + 1)
        shape = tuple(int(getattr(s, "value", 1)) for s in t.shape)
        acc.append(_Access(_tname(t), shape, _elem_bytes(t.dtype), tuple(idx), False))
        return 0.0
    if isinstance(e, Reduce):
        f = 1.0 + _walk(e.source[e.value_index], env, sch, acc, depth)
        if not (isinstance(e.condition, E.IntImm) and e.condition.value):
            f += _walk(e.condition, env, sch, acc, depth)
        return f
    f = 1.0 if isinstance(e, _FLOP_NODES) else (8.0 if isinstance(e, E.Call) else 0.0)
    for name in getattr(e, "_fields", ()):
        sub = getattr(e, name, None)
        for x in sub if isinstance(sub, tuple) else (sub,):
            if isinstance(x, E.PrimExpr):
                f += _walk(x, env, sch, acc, depth)
    return f


_CACHE: weakref.WeakKeyDictionary[Any, dict[tuple, _OpInfo]] = weakref.WeakKeyDictionary()


def _op_info(ctx: Any, st: Any) -> _OpInfo:
    op = st.op
    sch = ctx.sch
    inlined = tuple(sorted(s.op.name for s in sch.stages if s.attach_type == INLINE))
    key = (op.name, len(op.axis), len(op.reduce_axis), inlined)
    per_dag = _CACHE.setdefault(ctx.dag, {})
    info = per_dag.get(key)
    if info is not None:
        return info
    roots = list(op.axis) + list(op.reduce_axis)
    env = {id(iv.var): {k: 1.0} for k, iv in enumerate(roots)}
    acc: list[_Access] = []
    flops = _walk(op.body[0], env, sch, acc)
    for t in (op.output(i) for i in range(op.num_outputs)):
        shape = tuple(int(getattr(s, "value", 1)) for s in t.shape)
        acc.append(_Access(_tname(t), shape, _elem_bytes(t.dtype),
                           tuple({k: 1.0} for k in range(len(op.axis))), True))
    info = _stack(acc, len(roots), max(flops, 1.0))
    per_dag[key] = info
    return info


def _loop_maps(ctx: Any, st: Any) -> np.ndarray:
    """``(n_leaves, n_roots)``: each leaf loop of ``st`` as an affine form of the root axes."""
    roots = list(st.op.axis) + list(st.op.reduce_axis)
    eye = np.eye(len(roots))
    m: dict[int, np.ndarray] = {id(iv): eye[k] for k, iv in enumerate(roots)}
    zero = np.zeros(len(roots))
    for r in st.relations:
        if hasattr(r, "parent"):
            p = m.get(id(r.parent), zero)
            m[id(r.outer)] = p * (ctx.extent(r.inner) or 1)
            m[id(r.inner)] = p
        else:  # the fused loop steps like its inner part
            m[id(r.fused)] = m.get(id(r.inner), zero)
    leaves = st.leaf_iter_vars
    return np.array([m.get(id(iv), zero) for iv in leaves]).reshape(len(leaves), len(roots))


def effective_extents(maps: np.ndarray, n_spatial: int, ext: list[int],
                      region: list[float]) -> list[int]:
    """The loop extents of a stage computed at another's loop, as bound inference makes them:
    per output dimension, the loops (innermost first) keep what fits in ``region``, the part
    of the output the consumer reads inside the attach point; the rest run once."""
    out = list(ext)
    left = list(region[:n_spatial])
    rows = maps.tolist()
    for i in range(len(ext) - 1, -1, -1):
        row = rows[i]
        if any(row[n_spatial:]):
            continue  # a reduction loop: not bounded by the region
        k = next((c for c in range(n_spatial - 1, -1, -1) if row[c]), -1)
        if k < 0 or k >= len(left):
            continue
        out[i] = max(1, min(ext[i], math.ceil(left[k])))
        left[k] = left[k] / out[i]
    return out


def loop_maps(ctx: Any, st: Any) -> np.ndarray:
    return _loop_maps(ctx, st)


def access_features(ctx: Any, st: Any, ext: list[int], kinds: list[Any],
                    recompute: float, vec_kind: Any, unroll_kind: Any, maps: np.ndarray,
                    attached: dict[str, int], regions: dict[str, list[float]]) -> list[float]:
    """Stage-level access features followed by ``N_READS`` reads and one write (each
    ``len(ACCESS_FEATURE_NAMES)`` long; zeros where the stage has fewer accesses).
    ``attached`` names the stages computed at a loop of this one (name -> loop index): the
    span of this stage's reads of them inside that loop goes into ``regions``."""
    info = _op_info(ctx, st)
    n = len(ext)
    e = np.array(ext, dtype="float64")
    cd = maps @ info.coef  # (n, columns): the index step of each loop
    flat = np.abs(np.add.reduceat(cd * info.elem_stride, info.seg, axis=1)) if n else \
        np.zeros((0, len(info.seg)))
    dep = np.add.reduceat(cd != 0, info.seg, axis=1) > 0 if n else np.zeros((0, len(info.seg)), bool)
    # the span of every buffer dimension inside loop level L (loops L..n-1), capped at the shape
    span = np.ones((n + 1, cd.shape[1]))
    if n:
        grow = np.cumsum((np.abs(cd) * (e - 1)[:, None])[::-1], axis=0)[::-1]
        span[:n] = np.minimum(info.shape, 1.0 + grow)
    for j, a in enumerate(info.accesses):
        at = attached.get(a.name)
        if at is not None and not a.write:
            c0 = int(info.seg[j])
            got = span[min(at + 1, n), c0:c0 + len(a.shape)].tolist()
            old = regions.get(a.name)
            regions[a.name] = got if old is None else [max(x, y) for x, y in zip(old, got)]
    uniq = np.multiply.reduceat(span, info.seg, axis=1)  # (n+1, accesses), elements
    sl = span[:, info.last]
    lines = uniq / sl * np.ceil(sl * info.eb / CACHE_LINE)
    ubytes = uniq * info.eb
    iters = float(math.prod(ext)) * recompute
    vec_i = [i for i, kd in enumerate(kinds) if kd == vec_kind]
    na = len(info.seg)
    cols = np.arange(na)
    ub_sum = ubytes.sum(axis=1)
    suffix = np.ones(n + 2)  # suffix[i]: product of the extents of loops i..n-1
    if n:
        suffix[:n] = np.cumprod(e[::-1])[::-1]
        # the innermost loop the access does not depend on (Ansor's loop-multiple-read reuse)
        free = (~dep) & (e > 1)[:, None]
        r_any = free.any(axis=0)
        r_at = n - 1 - free[::-1].argmax(axis=0)
        stride = np.where(dep.any(axis=0), flat[n - 1 - dep[::-1].argmax(axis=0), cols], 0.0)
    else:
        r_any, r_at, stride = np.zeros(na, bool), np.zeros(na, int), np.zeros(na)
    ct = np.where(r_any, e[np.minimum(r_at, n - 1)] if n else 1.0, 1.0)
    vs = flat[vec_i[-1]] if vec_i else np.full(na, -1.0)
    bytes_ = iters * info.eb
    # one row per access, in ACCESS_FEATURE_NAMES order; the log2 columns are logged at once
    rows = np.stack([
        np.ones(na), bytes_, ubytes[0], lines[0], r_any.astype(float), ct,
        np.where(r_any, suffix[r_at + 1], 0.0), np.where(r_any, ub_sum[np.minimum(r_at + 1, n)], 0.0),
        bytes_ / ct, lines[0] * recompute / ct, 1.0 + stride, (vs == 1.0).astype(float),
        (vs == 0.0).astype(float), ((vs > 0.0) & (vs != 1.0)).astype(float),
        ubytes[max(0, n - 1)], ubytes[max(0, n - 2)]], axis=1)
    rows[:, _LOG_COLS] = np.log2(np.maximum(rows[:, _LOG_COLS], 1.0))
    flops = info.flops * iters
    uniq_all = float(ub_sum[0])
    unroll = math.prod(x for x, kd in zip(ext, kinds) if kd == unroll_kind)
    w = info.accesses[-1]  # the stage's output: its region is the allocation when attached
    alloc = (math.prod(x for x, it in zip(ext, st.leaf_iter_vars) if it.iter_type == 0)
             if st.attach_stage is not None else math.prod(w.shape)) * w.elem_bytes
    reads = np.flatnonzero(~info.write)
    n_contig = int((vs[reads] == 1.0).sum())
    out = [_l2(flops), math.log2(max(flops, 1.0) / max(uniq_all, 1.0)) + 32.0, _l2(alloc),
           _l2(unroll), float(len(vec_i)), _l2(math.prod(ext[i] for i in vec_i) if vec_i else 1),
           *(_l2(float(ub_sum[max(0, n - k)])) for k in range(1, N_LEVELS + 1)), _l2(uniq_all),
           _l2(float(lines[0].sum())), n_contig / len(reads) if len(reads) else 0.0]
    top = reads[np.argsort(-lines[0, reads], kind="stable")[:N_READS]]
    block = np.zeros((N_READS + 1, _NA))
    block[:len(top)] = rows[top]
    wr = np.flatnonzero(info.write)
    if len(wr):
        block[N_READS] = rows[wr[0]]
    out += block.ravel().tolist()
    return out
