"""Features of a lowered loop program, for AutoTVM's learned cost model (TVM's autotvm.feature).

The program is read in IR form 1: the output of schedule lowering (``schedule_to_primfunc``),
*before* :func:`tvmpy.tir.pipeline.lower_pipeline` flattens buffers. Buffers are still
multi-dimensional there, so the region a loop touches is computed per dimension, loop kinds
(parallel / vectorized / unrolled) are still ``For`` kinds, and it costs ~2 ms for a GEMM instead
of ~25 ms for the whole pipeline.

The hot path is the chain of loops around the statement that runs most often (the reduction update
of a GEMM). For each loop of that chain, innermost first, up to :data:`MAX_DEPTH` levels:

- ``extent``, the loop kind one-hot (serial, parallel, vectorized, unrolled, and on GPUs
  blockIdx, threadIdx, vthread: a thread-bound loop of a GPU schedule is an ``AttrStmt``
  ``thread_extent`` / ``virtual_thread`` with its extent, read as a loop), ``depth`` (0 for
  the outermost), ``topdown`` (product of the extents from the outermost loop to this one),
  ``bottomup`` (iterations of the hot statement inside one entry into this loop);
- arithmetic counts executed inside the loop, over all statements below it: ``add`` (add/sub/
  compare/min/max), ``mul``, ``div`` (div/mod), ``call`` (math intrinsics);
- per buffer slot (:data:`MAX_BUFFERS`: the written buffer first, then the buffers read by the
  hot statement in order, then other buffers by access count): ``stride`` (the coefficient of this
  loop's variable in the buffer's row-major flat index, 0 when the loop does not move the access),
  ``count`` (elements accessed inside the loop), ``bytes`` (distinct bytes touched inside the
  loop: per dimension, the span of the affine index over this and the inner loops) and ``reuse``
  (``count / distinct elements``), ``shared`` / ``local`` (1 when the buffer is a GPU
  shared-memory / per-thread stage, by its storage scope).

:func:`get_itervar_feature_flatten` flattens that into a fixed-length float32 vector
(missing levels and buffers are zero), followed by :data:`GPU_FEATURES`, the launch shape of a
GPU kernel (grid and block extents, virtual threads, shared/local bytes; zeros on CPUs); with ``take_log`` every value ``v`` becomes
``sign(v) * log2(1 + |v|)``). :func:`get_curve_feature` samples, per buffer slot, the relation
"touched bytes -> reuse / access count" along the hot path at fixed log2 byte sizes, a
task-independent summary (TVM's 'curve' features, simplified).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..ir import dtype as dt
from ..tir import expr as E
from ..tir import stmt as S
from ..tir.function import PrimFunc

__all__ = [
    "MAX_DEPTH", "MAX_BUFFERS", "LOOP_FEATURES", "BUFFER_FEATURES", "CURVE_SAMPLES",
    "itervar_feature_length", "curve_feature_length", "get_itervar_feature",
    "get_itervar_feature_flatten", "get_curve_feature", "get_flatten_name", "lower_for_feature",
    "func_itervar_feature", "func_curve_feature", "GPU_FEATURES", "get_gpu_feature",
]

MAX_DEPTH = 10
MAX_BUFFERS = 4
LOOP_FEATURES = ("extent", "serial", "parallel", "vectorized", "unrolled", "blockIdx",
                 "threadIdx", "vthread", "depth", "topdown", "bottomup", "add", "mul", "div",
                 "call")
BUFFER_FEATURES = ("stride", "count", "bytes", "reuse", "shared", "local")
# the launch shape of a GPU schedule, appended to both vectors (zeros for CPU programs): the
# hot path's MAX_DEPTH innermost levels often miss the block and thread loops of a GPU kernel
GPU_FEATURES = ("blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x", "threadIdx.y",
                "threadIdx.z", "vthread", "shared_bytes", "local_bytes")
# loop kinds: For kinds 0-4 (serial, parallel, vectorized, unrolled, thread binding), and the
# GPU thread attributes of lowered schedules (AttrStmt "thread_extent" / "virtual_thread")
_KIND_BLOCK, _KIND_THREAD, _KIND_VTHREAD = 10, 11, 12
_KIND_SLOT = {0: 0, 1: 1, 2: 2, 3: 3, 4: 1, _KIND_BLOCK: 4, _KIND_THREAD: 5, _KIND_VTHREAD: 6}
# log2(bytes) sample points of the curve features: 1 B .. 2^38 B
CURVE_SAMPLES = tuple(range(0, 40, 2))
CURVE_KINDS = ("reuse", "count")

_LEVEL_LEN = len(LOOP_FEATURES) + MAX_BUFFERS * len(BUFFER_FEATURES)


def itervar_feature_length() -> int:
    """Length of :func:`get_itervar_feature_flatten`'s vector."""
    return MAX_DEPTH * _LEVEL_LEN + len(GPU_FEATURES)


def curve_feature_length() -> int:
    """Length of :func:`get_curve_feature`'s vector."""
    return MAX_BUFFERS * len(CURVE_KINDS) * len(CURVE_SAMPLES) + len(GPU_FEATURES)


def get_flatten_name() -> list[str]:
    """Names of the entries of the itervar feature vector, e.g. ``"L0.B1.stride"``."""
    names = []
    for lv in range(MAX_DEPTH):
        names += [f"L{lv}.{n}" for n in LOOP_FEATURES]
        for b in range(MAX_BUFFERS):
            names += [f"L{lv}.B{b}.{n}" for n in BUFFER_FEATURES]
    names += [f"gpu.{n}" for n in GPU_FEATURES]
    return names


# ---------------------------------------------------------------------------------------------
# affine index analysis

Coef = dict[int, float]  # id(loop var) -> coefficient; key 0 is unused


def _affine(e: Any) -> Coef:
    """Coefficients of the loop variables in an index expression (approximate off the affine
    fragment: ``x // c`` scales by 1/c, ``x % c`` keeps ``x``'s, unknown nodes count each variable
    they use with coefficient 1)."""
    if isinstance(e, (E.IntImm, E.FloatImm)):
        return {}
    if isinstance(e, E.Var):
        return {id(e): 1.0}
    if isinstance(e, E.Add):
        return _combine(_affine(e.a), _affine(e.b), 1.0)
    if isinstance(e, E.Sub):
        return _combine(_affine(e.a), _affine(e.b), -1.0)
    if isinstance(e, E.Mul):
        if isinstance(e.b, (E.IntImm, E.FloatImm)):
            return {k: v * float(e.b.value) for k, v in _affine(e.a).items()}
        if isinstance(e.a, (E.IntImm, E.FloatImm)):
            return {k: v * float(e.a.value) for k, v in _affine(e.b).items()}
    if isinstance(e, (E.FloorDiv, E.Div)) and isinstance(e.b, E.IntImm) and e.b.value != 0:
        return {k: v / abs(e.b.value) for k, v in _affine(e.a).items()}
    if isinstance(e, (E.FloorMod, E.Mod)) and isinstance(e.b, E.IntImm):
        return _affine(e.a)
    if isinstance(e, (E.Cast, E.Broadcast)):
        return _affine(e.value)
    if isinstance(e, E.Ramp):
        return _affine(e.base)
    if isinstance(e, (E.Min, E.Max)):
        return _affine(e.a)
    out: Coef = {}
    for v in _vars_in(e):
        out[id(v)] = 1.0
    return out


def _combine(a: Coef, b: Coef, sign: float) -> Coef:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0.0) + sign * v
    return out


def _vars_in(e: Any) -> list[E.Var]:
    found: list[E.Var] = []
    stack = [e]
    while stack:
        n = stack.pop()
        if isinstance(n, E.Var):
            found.append(n)
            continue
        for f in getattr(n, "_fields", ()) or ():
            v = getattr(n, f, None)
            if isinstance(v, (list, tuple)):
                stack.extend(x for x in v if isinstance(x, E.PrimExpr))
            elif isinstance(v, E.PrimExpr):
                stack.append(v)
    return found


# ---------------------------------------------------------------------------------------------
# the walk


@dataclass
class _Loop:
    var_id: int
    extent: int
    kind: int
    depth: int
    tag: str = ""  # the thread tag of a GPU thread loop


@dataclass
class _Access:
    buffer: Any
    coefs: list[Coef]  # per dimension
    lanes: int
    write: bool


@dataclass
class _Leaf:
    loops: tuple[_Loop, ...]
    accesses: list[_Access]
    ops: np.ndarray  # add, mul, div, call

    @property
    def iterations(self) -> int:
        return math.prod(lp.extent for lp in self.loops)


@dataclass
class _Walk:
    leaves: list[_Leaf] = field(default_factory=list)
    # a thread attribute nested in one of the same tag (a cooperative fetch bound to threadIdx.x
    # inside the kernel's threadIdx.x) is the same hardware index: its var aliases the outer one
    alias: dict[int, int] = field(default_factory=dict)
    gpu: dict[str, float] = field(default_factory=dict)  # GPU_FEATURES
    vthreads: set[int] = field(default_factory=set)

    def remap(self, accesses: list[_Access]) -> None:
        if not self.alias:
            return
        for acc in accesses:
            acc.coefs = [{self.alias.get(k, k): v for k, v in c.items()} for c in acc.coefs]


_ADD = (E.Add, E.Sub, E.Min, E.Max, E.CmpOp, E.Select)
_DIV = (E.Div, E.Mod, E.FloorDiv, E.FloorMod)
_NOT_MATH = {"if_then_else", "likely", "call_extern", "reinterpret", "tvm_if_then_else"}


def _int_extent(e: Any) -> int:
    if isinstance(e, E.IntImm):
        return max(int(e.value), 0)
    return 1  # symbolic extent: unknown, counts as one iteration


def _expr_info(e: Any, accesses: list[_Access], ops: np.ndarray) -> None:
    """Count arithmetic of ``e`` into ``ops`` and its buffer reads into ``accesses``
    (index arithmetic is not counted)."""
    stack = [e]
    while stack:
        n = stack.pop()
        if isinstance(n, E.BufferLoad):
            accesses.append(_access(n.buffer, n.indices, write=False))
            continue
        if isinstance(n, E.Mul):
            ops[1] += 1
        elif isinstance(n, _DIV):
            ops[2] += 1
        elif isinstance(n, _ADD):
            ops[0] += 1
        elif isinstance(n, E.Call) and n.op not in _NOT_MATH:
            ops[3] += 1
        children: list[Any] = []
        for f in getattr(n, "_fields", ()) or ():
            v = getattr(n, f, None)
            if isinstance(v, (list, tuple)):
                children.extend(x for x in v if isinstance(x, E.PrimExpr))
            elif isinstance(v, E.PrimExpr):
                children.append(v)
        stack.extend(reversed(children))  # visit left to right: reads in program order


def _access(buffer: Any, indices: Sequence[Any], write: bool) -> _Access:
    lanes = 1
    for i in indices:
        if isinstance(i, E.Ramp):
            lanes = max(lanes, int(i.lanes))
    return _Access(buffer, [_affine(i) for i in indices], lanes, write)


def _walk(stmt: Any, loops: tuple[_Loop, ...], out: _Walk) -> None:
    if stmt is None:
        return
    if isinstance(stmt, S.For):
        lp = _Loop(id(stmt.loop_var), _int_extent(stmt.extent), int(stmt.kind), len(loops))
        _walk(stmt.body, loops + (lp,), out)
    elif isinstance(stmt, S.SeqStmt):
        for s in stmt.seq:
            _walk(s, loops, out)
    elif isinstance(stmt, S.IfThenElse):
        _walk(stmt.then_case, loops, out)
        _walk(stmt.else_case, loops, out)
    elif isinstance(stmt, S.BufferStore):
        accesses = [_access(stmt.buffer, stmt.indices, write=True)]
        ops = np.zeros(4)
        _expr_info(stmt.value, accesses, ops)
        out.remap(accesses)
        out.leaves.append(_Leaf(loops, accesses, ops))
    elif isinstance(stmt, S.Evaluate):
        accesses: list[_Access] = []
        ops = np.zeros(4)
        _expr_info(stmt.value, accesses, ops)
        out.remap(accesses)
        if accesses or ops.any():
            out.leaves.append(_Leaf(loops, accesses, ops))
    elif isinstance(stmt, S.AttrStmt) and stmt.attr_key in ("thread_extent", "virtual_thread"):
        iv = stmt.node
        tag = str(getattr(iv, "thread_tag", "") or "")
        kind = (_KIND_VTHREAD if stmt.attr_key == "virtual_thread" or tag.startswith("vthread")
                else _KIND_BLOCK if tag.startswith("blockIdx") else _KIND_THREAD)
        var = getattr(iv, "var", iv)
        ext = float(_int_extent(stmt.value))
        if kind == _KIND_VTHREAD:
            if id(var) not in out.vthreads:
                out.vthreads.add(id(var))
                out.gpu["vthread"] = out.gpu.get("vthread", 1.0) * ext
        elif tag in GPU_FEATURES:
            out.gpu[tag] = max(out.gpu.get(tag, 0.0), ext)
        outer = next((x for x in loops if kind != _KIND_VTHREAD and x.tag == tag), None)
        if outer is not None:
            out.alias[id(var)] = outer.var_id
            _walk(stmt.body, loops, out)
        else:
            lp = _Loop(id(var), _int_extent(stmt.value), kind, len(loops), tag)
            _walk(stmt.body, loops + (lp,), out)
    elif isinstance(stmt, S.Allocate):
        scope = _scope(stmt.buffer)
        if scope in ("shared", "local"):
            size = math.prod(_int_extent(d) for d in stmt.buffer.shape)
            key = f"{scope}_bytes"
            out.gpu[key] = out.gpu.get(key, 0.0) + size * dt.bytes_of(stmt.buffer.dtype)
        _walk(stmt.body, loops, out)
    elif isinstance(stmt, (S.LetStmt, S.AttrStmt, S.AssertStmt)):
        _walk(stmt.body, loops, out)
    elif isinstance(stmt, S.Stmt):
        body = getattr(stmt, "body", None)
        if isinstance(body, S.Stmt):
            _walk(body, loops, out)


def _row_strides(buffer: Any) -> list[float]:
    shape = [_int_extent(s) for s in buffer.shape]
    strides = [1.0] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        strides[d] = strides[d + 1] * max(shape[d + 1], 1)
    return strides


def _span(acc: _Access, inner: Sequence[_Loop]) -> float:
    """Distinct elements of ``acc`` over all iterations of the loops ``inner``."""
    total = 1.0
    for d, coef in enumerate(acc.coefs):
        span = 1.0
        for lp in inner:
            c = coef.get(lp.var_id, 0.0)
            if c:
                span += abs(c) * (lp.extent - 1)
        shape_d = _int_extent(acc.buffer.shape[d]) if d < len(acc.buffer.shape) else 1
        total *= min(span, float(max(shape_d, 1)))
    return total * acc.lanes


def _buffer_order(hot: _Leaf, leaves: list[_Leaf]) -> list[Any]:
    order: list[Any] = []
    seen: set[int] = set()
    for acc in sorted(hot.accesses, key=lambda a: not a.write):
        if id(acc.buffer) not in seen:
            seen.add(id(acc.buffer))
            order.append(acc.buffer)
    counts: dict[int, tuple[float, int, Any]] = {}
    for li, leaf in enumerate(leaves):
        for acc in leaf.accesses:
            if id(acc.buffer) in seen:
                continue
            c, first, b = counts.get(id(acc.buffer), (0.0, li, acc.buffer))
            counts[id(acc.buffer)] = (c + leaf.iterations * acc.lanes, first, b)
    rest = sorted(counts.values(), key=lambda t: (-t[0], t[1]))
    order += [b for _, _, b in rest]
    return order[:MAX_BUFFERS]


def _scope(buffer: Any) -> str:
    return str(getattr(buffer, "scope", "") or "global")


def _walked(func: PrimFunc) -> _Walk:
    walk = _Walk()
    _walk(func.body, (), walk)
    return walk


def _gpu_vector(walk: _Walk, take_log: bool) -> np.ndarray:
    v = [walk.gpu.get(n, 0.0) for n in GPU_FEATURES]
    return np.asarray([_log(x) for x in v] if take_log else v, dtype=np.float32)


def _levels(func: PrimFunc, walk: _Walk | None = None) -> list[dict[str, Any]]:
    if walk is None:
        walk = _walked(func)
    if not walk.leaves:
        return []
    hot = max(walk.leaves, key=lambda lf: (lf.iterations * (1 + lf.ops.sum()), -len(lf.loops)))
    buffers = _buffer_order(hot, walk.leaves)
    path = hot.loops
    levels = []
    top = 1.0
    tops = []
    for lp in path:
        top *= lp.extent
        tops.append(top)
    for pos in range(len(path) - 1, max(len(path) - 1 - MAX_DEPTH, -1), -1):
        lp = path[pos]
        under = [lf for lf in walk.leaves if len(lf.loops) > pos and lf.loops[pos] is lp]
        ops = np.zeros(4)
        bufs = {id(b): [0.0, 0.0, 0.0, 0.0] for b in buffers}  # stride, count, elems, -
        stride_set: set[int] = set()
        for lf in under:
            inner = lf.loops[pos:]
            iters = math.prod(x.extent for x in inner)
            ops += lf.ops * iters
            for acc in lf.accesses:
                slot = bufs.get(id(acc.buffer))
                if slot is None:
                    continue
                slot[1] += iters * acc.lanes
                slot[2] = max(slot[2], _span(acc, inner))
                if lf is hot and id(acc.buffer) not in stride_set:
                    stride_set.add(id(acc.buffer))
                    rs = _row_strides(acc.buffer)
                    slot[0] = sum(c.get(lp.var_id, 0.0) * s for c, s in zip(acc.coefs, rs))
        kind = [0.0] * 7
        kind[_KIND_SLOT.get(lp.kind, 0)] = 1.0
        level: dict[str, Any] = {
            "extent": float(lp.extent), "serial": kind[0], "parallel": kind[1],
            "vectorized": kind[2], "unrolled": kind[3], "blockIdx": kind[4],
            "threadIdx": kind[5], "vthread": kind[6], "depth": float(lp.depth),
            "topdown": tops[pos], "bottomup": float(math.prod(x.extent for x in path[pos:])),
            "add": float(ops[0]), "mul": float(ops[1]), "div": float(ops[2]),
            "call": float(ops[3]), "buffers": [],
        }
        for b in buffers:
            stride, count, elems, _ = bufs[id(b)]
            nbytes = elems * dt.bytes_of(b.dtype)
            level["buffers"].append({
                "name": b.name, "stride": stride, "count": count, "bytes": nbytes,
                "reuse": count / elems if elems else 0.0,
                "shared": float(_scope(b) == "shared"), "local": float(_scope(b) == "local"),
            })
        levels.append(level)
    return levels


# ---------------------------------------------------------------------------------------------
# public API


def lower_for_feature(sch: Any, args: Sequence[Any]) -> PrimFunc:
    """The IR form features are read from: schedule lowering, without the tir pass pipeline."""
    from ..te.schedule_ops import schedule_to_primfunc

    return schedule_to_primfunc(sch, list(args), "feature_function", {})


def _log(v: float) -> float:
    return math.copysign(math.log2(1.0 + abs(v)), v)


def func_itervar_feature(func: PrimFunc, take_log: bool = True) -> np.ndarray:
    """Fixed-length itervar feature vector of a form-1 PrimFunc."""
    if not isinstance(func, PrimFunc):
        raise TypeError(f"func_itervar_feature expects a tir.PrimFunc, got {type(func).__name__}")
    out = np.zeros(itervar_feature_length(), dtype=np.float32)
    walk = _walked(func)
    out[MAX_DEPTH * _LEVEL_LEN:] = _gpu_vector(walk, take_log)
    for lv, level in enumerate(_levels(func, walk)):
        row = [level[n] for n in LOOP_FEATURES]
        for b in level["buffers"]:
            row += [b[n] for n in BUFFER_FEATURES]
        if take_log:
            row = [_log(v) for v in row]
        out[lv * _LEVEL_LEN: lv * _LEVEL_LEN + len(row)] = row
    return out


def func_curve_feature(func: PrimFunc) -> np.ndarray:
    """Curve features of a form-1 PrimFunc: per buffer slot, log2(reuse) and log2(count) at the
    largest loop level whose touched bytes fit in ``2**x`` for x in :data:`CURVE_SAMPLES`."""
    if not isinstance(func, PrimFunc):
        raise TypeError(f"func_curve_feature expects a tir.PrimFunc, got {type(func).__name__}")
    walk = _walked(func)
    levels = _levels(func, walk)
    n_s = len(CURVE_SAMPLES)
    out = np.zeros((MAX_BUFFERS, len(CURVE_KINDS), n_s), dtype=np.float32)
    samples = np.asarray(CURVE_SAMPLES, dtype=np.float64)
    for b in range(MAX_BUFFERS):
        pts = [(math.log2(max(lv["buffers"][b]["bytes"], 1.0)),
                _log(lv["buffers"][b]["reuse"]), _log(lv["buffers"][b]["count"]))
               for lv in levels if b < len(lv["buffers"])]
        if not pts:
            continue
        for x, reuse, count in pts:  # levels go inner -> outer: bytes grow; keep the largest fit
            fits = samples >= x
            out[b, 0, fits] = np.maximum(out[b, 0, fits], reuse)
            out[b, 1, fits] = np.maximum(out[b, 1, fits], count)
    return np.concatenate([out.reshape(-1), _gpu_vector(walk, True)])


def get_gpu_feature(sch: Any, args: Sequence[Any]) -> dict[str, float]:
    """The launch shape of a GPU schedule: grid and block extents (the largest binding of each
    tag), the product of the virtual thread extents, shared / local bytes allocated."""
    walk = _walked(lower_for_feature(sch, args))
    return {n: walk.gpu.get(n, 0.0) for n in GPU_FEATURES}


def get_itervar_feature(sch: Any, args: Sequence[Any], take_log: bool = False
                        ) -> list[dict[str, Any]]:
    """Per-loop features of the hot path, innermost first (dicts; see the module docstring)."""
    levels = _levels(lower_for_feature(sch, args))
    if take_log:
        for level in levels:
            for n in LOOP_FEATURES:
                level[n] = _log(level[n])
            for b in level["buffers"]:
                for n in BUFFER_FEATURES:
                    b[n] = _log(b[n])
    return levels


def get_itervar_feature_flatten(sch: Any, args: Sequence[Any], take_log: bool = True
                                ) -> np.ndarray:
    """Fixed-length (:func:`itervar_feature_length`) float32 itervar feature vector."""
    return func_itervar_feature(lower_for_feature(sch, args), take_log)


def get_curve_feature(sch: Any, args: Sequence[Any]) -> np.ndarray:
    """Fixed-length (:func:`curve_feature_length`) float32 curve feature vector."""
    return func_curve_feature(lower_for_feature(sch, args))
