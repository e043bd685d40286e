"""x86 schedules for pooling.

Plain layout (NCHW, NCW, NCDHW): with the separable compute (``pool2d(..., separable=True)``,
what the x86 strategy builds) each block of output rows is a parallel task that reduces the
window's input rows into one row per output row (contiguous vector reads, the padding a lane
mask) and then the columns (a vector of output columns, strided reads of those rows); see
``_schedule_pool_separable``. Without it, each (batch,
channel) plane is a task that pads its plane, then computes output rows with a vector of
output columns per window position. Blocked layout (NCHW{c}): the channel block is the vector.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from ...te import create_schedule
from ...tir.data_layout import block_of
from ..nn.utils import traverse_inline
from .conv2d import _outputs, anchor, vectorize_inner
from .injective import vector_lanes

if TYPE_CHECKING:
    from ...te import Tensor
    from ...te.schedule import Schedule

__all__ = ["schedule_pool", "schedule_global_pool", "schedule_adaptive_pool"]


def _find(outs: list[Tensor], tags: tuple[str, ...], what: str) -> tuple[Schedule, Tensor]:
    s = create_schedule([o.op for o in outs])
    found: list[Tensor] = []

    def cb(op: Any) -> None:
        if op.tag in tags and not found:
            found.append(op.output(0))

    traverse_inline(s, outs[0].op, cb)
    if not found:
        raise ValueError(f"{what}: no {'/'.join(tags)} stage among the outputs' inputs")
    return s, found[0]


def _int(x: Any) -> int:
    return int(x.value) if hasattr(x, "value") else int(x)


def _const(x: Any) -> int | None:
    x = getattr(x, "value", x)
    return x if isinstance(x, int) else None


def schedule_pool(outs: Any, layout: str = "NCHW") -> Schedule:
    """x86 schedule of ``topi.nn.pool1d/2d/3d`` (max or avg, + fused elementwise consumers).
    In a blocked layout (NCHW{c}) the channel block is the vector, every load contiguous."""
    outs = _outputs(outs)
    s, pool = _find(outs, ("pool_max", "pool_sum"), "schedule_pool")
    out = anchor(pool, outs[0])
    if any(block_of(layout, base) is not None for base in ("NCW", "NCHW", "NCDHW")):
        _schedule_pool_blocked(s, pool, out)
        return s
    rows = next((t for t in pool.op.input_tensors if t.op.tag == "pool_rows"), None)
    if rows is not None:
        _schedule_pool_separable(s, pool, rows, out)
        return s
    vw = min(16, _int(pool.shape[-1]))
    if pool.op is out.op:
        CC = s.cache_write(pool, "local")
    else:
        s[pool].set_scope("local")
        CC = pool
    n, c, *_, x = s[out].op.axis
    task = s[out].fuse(n, c)
    s[out].parallel(task)
    xo, xi = s[out].split(x, factor=vw)
    s[out].vectorize(xi)
    s[CC].compute_at(s[out], xo)
    *_, cx = s[CC].op.axis
    s[CC].reorder(*s[CC].op.reduce_axis, cx)
    s[CC].vectorize(cx)
    for t in pool.op.input_tensors:
        if "pad" in t.op.tag:
            s[t].compute_at(s[out], task)
            vectorize_inner(s, t)
    return s


def _local_result(s: Schedule, pool: Tensor, out: Tensor) -> Tensor:
    """The stage that accumulates the window: a local cache of ``pool`` when it is the output,
    else ``pool`` itself in local scope (its consumers are inlined into ``out``)."""
    if pool.op is out.op:
        return s.cache_write(pool, "local")
    s[pool].set_scope("local")
    return pool


# the reduced rows one task keeps (floats): a block of output rows whose ``pool_rows`` fit in
# L1 next to the input rows they are read from
ROWS_BLOCK_FLOATS = 8192
# fewer tasks than this and a plane is split into blocks of output rows (both threads busy)
MIN_POOL_TASKS = 8


def _rows_block(planes: int | None, oh: int, width: int) -> int:
    """Output rows per task: the largest divisor of ``oh`` (no partial block) whose
    ``pool_rows`` fit ``ROWS_BLOCK_FLOATS``, smaller when there are few planes."""
    limit = max(1, ROWS_BLOCK_FLOATS // width)
    if planes is not None and planes < MIN_POOL_TASKS:
        limit = min(limit, max(1, oh * planes // MIN_POOL_TASKS))
    return max(d for d in range(1, min(limit, oh) + 1) if oh % d == 0)


def _schedule_pool_separable(s: Schedule, pool: Tensor, rows: Tensor, out: Tensor) -> None:
    """Tasks over (batch, channel, [depth,] block of output rows). A task first reduces the
    window rows of its block into ``pool_rows`` (vectors of 16 input columns, the padding
    inlined as lane masks), then computes its output rows from them, a vector of output
    columns at a time (``kernel[-1]`` strided reads each). Reducing all the block's rows
    before reading any back keeps the stores out of the loads' way (store forwarding)."""
    CC = _local_result(s, pool, out)
    n, c, *lead, h, x = s[out].op.axis
    dims = [_const(d) for d in pool.shape[:2 + len(lead)]]
    planes = None if None in dims else math.prod(dims)
    # (the buffer is wider than the stage: its rows cover whole vectors of output columns)
    hb = _rows_block(planes, _int(pool.shape[-2]), _int(rows.shape[-1]) + 32)
    ho, hi = s[out].split(h, factor=hb)
    task = s[out].fuse(n, c, *lead, ho)
    s[out].parallel(task)
    xo, xi = s[out].split(x, factor=min(16, _int(pool.shape[-1])))
    s[out].vectorize(xi)
    s[CC].compute_at(s[out], xo)
    *_, cx = s[CC].op.axis
    s[CC].reorder(*s[CC].op.reduce_axis, cx)
    s[CC].vectorize(cx)
    s[rows].compute_at(s[out], task)
    ro, ri = s[rows].split(s[rows].op.axis[-1], factor=min(16, _int(rows.shape[-1])))
    s[rows].reorder(ro, *s[rows].op.reduce_axis, ri)
    s[rows].vectorize(ri)
    for t in rows.op.input_tensors:
        if "pad" in t.op.tag:
            s[t].compute_inline()


POOL_COLS = 8
"""Most output columns a blocked pooling computes together (:func:`_schedule_pool_blocked`)."""


def _pool_cols(width: int) -> int:
    """Output columns per step of a blocked pooling over ``width`` columns: all of them up to
    :data:`POOL_COLS`, else the largest divisor of ``width`` in ``[POOL_COLS // 2,
    POOL_COLS]``, else the steps balanced (one guarded tail step a column or so short)."""
    if width <= POOL_COLS:
        return width
    divs = [r for r in range(max(1, POOL_COLS // 2), POOL_COLS + 1) if width % r == 0]
    if divs:
        return max(divs)
    return -(-width // -(-width // POOL_COLS))


def _schedule_pool_blocked(s: Schedule, pool: Tensor, out: Tensor) -> None:
    """The channel block is the vector; tasks over (batch, chunk, output row) when there are
    output rows (the padding is inlined: a window row is a uniform condition over the block's
    lanes, cheaper than a padded copy of each plane), each row in steps of :func:`_pool_cols`
    output columns, the window loops outside the step's columns (independent max/sum chains;
    one column a step was one dependent chain of window-size vector maxes). SqueezeNet's ceil-mode
    3x3 stride-2 max pools, 1 thread, CPU time, Intel Xeon (Emerald Rapids, KVM), loaded
    (2026-11-30, us, one column / steps): 64 x 111x111 170 / 156, 128 x 55x55 48 / 42, 256 x
    27x27 20.4 / 16.9."""
    if pool.op is out.op:
        CC = s.cache_write(pool, "local")
    else:
        s[pool].set_scope("local")
        CC = pool
    n, c, *sp, blk = s[out].op.axis
    rows = len(sp) >= 2
    task = s[out].fuse(n, c, sp[-2]) if rows else s[out].fuse(n, c)
    s[out].parallel(task)
    s[out].vectorize(blk)
    width = _const(pool.shape[-2]) if rows else None
    if width is not None and width > 1:
        # several output columns a step, the window loops outside them: independent max/add
        # chains instead of one dependent chain per column (latency-bound)
        xo, _ = s[out].split(sp[-1], factor=_pool_cols(width))
        s[CC].compute_at(s[out], xo)
        *_, cx, cb = s[CC].op.axis
        s[CC].reorder(*s[CC].op.reduce_axis, cx, cb)
        s[CC].unroll(cx)
    else:
        s[CC].compute_at(s[out], sp[-1])
        *_, cb = s[CC].op.axis
        s[CC].reorder(*s[CC].op.reduce_axis, cb)
    s[CC].vectorize(cb)
    for t in pool.op.input_tensors:
        if "pad" in t.op.tag:
            if rows:
                s[t].compute_inline()
            else:
                s[t].compute_at(s[out], task)
                s[t].vectorize(s[t].op.axis[-1])


def schedule_global_pool(outs: Any, layout: str = "NCHW") -> Schedule:
    """x86 schedule of ``topi.nn.global_pool`` / ``adaptive_pool``: parallel over (batch,
    channel)."""
    outs = _outputs(outs)
    s, pool = _find(outs, ("global_pool_max", "global_pool_sum", "adaptive_pool_max",
                           "adaptive_pool_sum"), "schedule_global_pool")
    out = anchor(pool, outs[0])
    if len(pool.shape) == 5:  # NCHW{c}: the channel block is the vector
        if not (pool.op.tag.startswith("global_pool") and _global_blocked(s, pool, out)):
            _schedule_pool_blocked(s, pool, out)
        return s
    rf = _plane_rfactor(s, pool) if pool.op.tag.startswith("global_pool") else None
    n, c, *_ = s[out].op.axis
    task = s[out].fuse(n, c)
    s[out].parallel(task)
    if pool.op is not out.op:
        s[pool].compute_at(s[out], task)
    if isinstance(rf, tuple):  # k vectors of lanes -> one vector -> its lanes
        lanes_rf, acc_rf = rf
        for t in (lanes_rf, acc_rf):
            s[t].set_scope("local")
            s[t].compute_at(s[out], task)
        *_, ak, al = s[acc_rf].op.axis
        s[acc_rf].reorder(*s[acc_rf].op.reduce_axis, ak, al)
        s[acc_rf].unroll(ak)
        s[acc_rf].vectorize(al)
        s[lanes_rf].reorder(*s[lanes_rf].op.reduce_axis, s[lanes_rf].op.axis[-1])
        s[lanes_rf].vectorize(s[lanes_rf].op.axis[-1])
    elif rf is not None:
        if pool.op.tag == "global_pool_max" and SMALL_PLANE_MAX_RFACTOR:
            s[rf].set_scope("local")  # the W lanes stay in a register (no masked store/reload)
        s[rf].compute_at(s[out], task)
        s[rf].reorder(*s[rf].op.reduce_axis, s[rf].op.axis[-1])
        s[rf].vectorize(s[rf].op.axis[-1])
    return s


def accumulators(extent: int | None, target: Any = None) -> int:
    """How many independent vector accumulators a reduction of ``extent`` steps keeps: one
    accumulator is a chain of dependent adds (3-4 cycles each on current x86 cores, two vector
    adds issued per cycle; a NaN-propagating max is a longer chain), so several, interleaved,
    keep the adders busy. At most a quarter of the target's vector registers
    (:attr:`Target.vector_registers`: 32 with AVX-512 and on AArch64, 16 on other x86) and
    half the extent; a divisor of ``extent`` when one lies in the upper half of that range (no
    tail), else the most (the loop's tail is peeled by the lowering)."""
    from ...target import resolve_target

    if extent is None or extent < 4:
        return 1
    tgt = target or resolve_target()
    most = max(1, min(MAX_ACCUMULATORS, tgt.vector_registers // 4, extent // 2))
    return max((d for d in range(most // 2 + 1, most + 1) if extent % d == 0), default=most)


# more accumulators than this gain nothing measurable (the loads, not the adds, then limit)
MAX_ACCUMULATORS = 8


def _global_blocked(s: Schedule, pool: Tensor, out: Tensor) -> bool:
    """NCHW{c} global pool: the plane reduced into ``k`` channel-block vectors (``rfactor`` of
    the plane split by ``k``, :func:`accumulators`), ``k`` independent chains of ``H*W/k``
    vector adds/maxima instead of one chain of ``H*W``, then the ``k`` vectors combined. Tasks
    over (batch, channel chunk). False (nothing done) when the plane is not a constant size
    and at least 4 steps."""
    ry, rx = s[pool].op.reduce_axis
    h, w = _const(ry.dom.extent), _const(rx.dom.extent)
    k = accumulators(None if h is None or w is None else h * w)
    if k < 2:
        return False
    _, ki = s[pool].split(s[pool].fuse(ry, rx), factor=k)
    rf = s.rfactor(pool, ki, factor_axis=len(pool.shape) - 1)
    s[rf].set_scope("local")
    n, c, *_ = s[out].op.axis
    task = s[out].fuse(n, c)
    s[out].parallel(task)
    s[out].vectorize(s[out].op.axis[-1])
    if pool.op is not out.op:
        s[pool].compute_at(s[out], task)
        s[pool].set_scope("local")
    s[rf].compute_at(s[out], task)
    *_, rk, rb = s[rf].op.axis
    (ko,) = s[rf].op.reduce_axis
    s[rf].reorder(ko, rk, rb)
    s[rf].unroll(rk)
    s[rf].vectorize(rb)
    (kr,) = s[pool].op.reduce_axis
    s[pool].reorder(kr, s[pool].op.axis[-1])
    s[pool].vectorize(s[pool].op.axis[-1])
    return True


# small NCHW planes' global max pool: rows of W columns maxed as vectors, then the lanes (False:
# the scalar chain over the plane, as before; for comparisons)
SMALL_PLANE_MAX_RFACTOR = True
# planes at least this large are reduced 16 lanes at a time (below it, the lanes' final sum
# costs more than the dependent scalar chain it shortens: 7x7 measured slower)
VECTOR_PLANE_MIN = 256


def _plane_rfactor(s: Schedule, pool: Tensor) -> Tensor | tuple[Tensor, Tensor] | None:
    """A global pool over a large plane: the plane (contiguous in NCHW) reduced a vector of
    lanes at a time into ``k`` independent vector accumulators (:func:`accumulators` of the
    plane's vectors; two ``rfactor`` stages), the ``k`` vectors into one, then its lanes:
    ``k`` chains of ``H*W / (lanes*k)`` vector operations instead of ``H*W`` dependent scalar
    ones. Returns the (lanes, accumulators) rf stages, or one rf stage (small planes, one
    accumulator), or None (the scalar loop is kept)."""
    ry, rx = s[pool].op.reduce_axis
    h, w = _const(ry.dom.extent), _const(rx.dom.extent)
    if h is None or w is None:
        return None
    if h * w < VECTOR_PLANE_MIN:
        small_max = SMALL_PLANE_MAX_RFACTOR and pool.op.tag == "global_pool_max"
        if (pool.op.tag == "global_pool_sum" or small_max) and 4 <= w <= 16 and h > 1:
            # a small plane's sum/max: a vector of its W columns reduced over H, then W lanes
            # (7x7 sum: 3x faster; max too since the x86 max is MAXPS + a NaN fix-up, not
            # llvm.maximum's 6 instructions: codegen/llvm_arith._x86_min_max)
            return s.rfactor(pool, rx, factor_axis=len(pool.shape))
        return None
    lanes = vector_lanes(pool.dtype)
    k = accumulators(h * w // lanes)
    ro, kl = s[pool].split(s[pool].fuse(ry, rx), factor=lanes)
    if k < 2:
        return s.rfactor(pool, kl, factor_axis=len(pool.shape))
    _, kk = s[pool].split(ro, factor=k)
    lanes_rf = s.rfactor(pool, kl, factor_axis=len(pool.shape))
    acc_rf = s.rfactor(lanes_rf, s[lanes_rf].op.reduce_axis[-1],
                       factor_axis=len(lanes_rf.shape) - 1)
    return lanes_rf, acc_rf


schedule_adaptive_pool = schedule_global_pool
