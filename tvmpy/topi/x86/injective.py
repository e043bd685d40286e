"""x86 schedule of injective operators (elementwise, broadcast, transforms).

All injective producers are inlined. The innermost axis is split by the target's vector lanes
and the inner part vectorized (contiguous vector loads and stores); the outer axes are fused
into one loop that runs in parallel when the tensor is big enough to pay for the threads. When
the innermost extent is a multiple of the lanes its outer part joins the fused loop; otherwise
the guarded tail stays in its own loop, which loop partitioning peels into one shorter vector.
An innermost axis shorter than the lanes but of at least a quarter of them (a 7x7 or 13x13
image row) is one vector of its own length; a shorter one is fused with the others and the
fused loop split by the lanes (indices then need div/mod, and the vectorizer may scalarize
them).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ... import te
from ...target import resolve_target
from ...te.schedule import producer_ops
from ...tir.data_layout import block_of
from ...tir.expr import IntImm
from ..generic import as_outs, inline_injective

__all__ = ["schedule_injective", "schedule_injective_from_existing", "schedule_elemwise",
           "schedule_broadcast", "schedule_concatenate", "vector_lanes"]

# Below this many elements a parallel region costs more than it saves. A launch on tvmpy's pool
# costs 1.2-2.1 us more than a perfect split at 2 threads (bench/parallel_launch_cost.py,
# znver4, SCHED_FIFO; 0.4-1 us on the Intel Xeon) and a vectorized serial float32 copy moves
# ~60 bytes/ns (8 per element, read and written: 40960 elements in 5.5 us), so two threads save
# a launch's cost from ~1.5 us * 60 / 8 * 2 = 22500 elements: 2**15. (2**18 was set when a
# fork/join measured 5-20 us; 2**14 paid at 2 threads on the Intel Xeon but cost at 1 thread
# through the outlined body's index math, which the begin/end range attributes now remove.)
PARALLEL_MIN_ELEMENTS = 1 << 15
# ... elements that each call a vector math function (exp, erf, tanh ...: ~1-2 ns per 16 lanes
# instead of ~0.1) pay for the threads 8x earlier: BERT's bias + erf-GELU group on 128x1024
# went from 0.068 ms (serial) to ~0.04 ms
TRANSCENDENTAL_DIVISOR = 8
_TRANSCENDENTAL = frozenset({"exp", "exp2", "exp10", "log", "log2", "log10", "log1p", "erf",
                             "tanh", "sigmoid", "sin", "cos", "tan", "pow", "atan", "asin",
                             "acos", "sinh", "cosh", "atan2"})
# ... and layout transforms (one side of the copy is a strided gather or scatter, ~4x the
# cost per element of a contiguous copy) from 1/8 of it: the NCHW12c -> NCHW transform after a
# 3 -> 24 channel 56x56 convolution (75K elements) 28 -> 17 us, NCHW16c -> NCHW of 64x28x28
# 21 -> 16 us (2 threads, loaded machine)
LAYOUT_TRANSFORM_DIVISOR = 8
# ... but the tiled transforms (_schedule_unblock, _schedule_block: contiguous loads and register
# shuffles) cost about a copy's 2x, and on this loaded machine ran no faster in parallel below
# ~2**17 elements (same process, medians of 15 x 100: NCHW12c -> NCHW 24x56x56 parallel 8.8 us,
# serial 7.9; NCHW16c -> NCHW 64x28x28 7.3 vs 6.3; 64x56x56 25.2 vs 24.1, best 14.2 vs 23.4)
TILED_TRANSFORM_DIVISOR = 2
MAX_LANES = 32


def vector_lanes(dtype: str) -> int:
    """Vector lanes of ``dtype`` on the current target (host "llvm" when none is set)."""
    tgt = resolve_target()
    bits_dtype = "int8" if dtype == "bool" else dtype
    return max(1, min(MAX_LANES, tgt.vector_lanes(bits_dtype)))


def _num_cores() -> int:
    tgt = resolve_target()
    return tgt.num_cores


def _const_size(shape: Any) -> int | None:
    n = 1
    for s in shape:
        if not isinstance(s, IntImm):
            return None
        n *= int(s.value)
    return n


def _has_transcendental(out: te.Tensor) -> bool:
    """Whether ``out`` or the injective stages inlined into it call a vector math function."""
    from ...tir import expr as E
    from ...tir.functor import post_order_visit

    found = [False]

    def visit(n: Any) -> None:
        if isinstance(n, E.Call) and str(getattr(n, "op", "")) in _TRANSCENDENTAL:
            found[0] = True

    seen: set[int] = set()
    stack = [out.op]
    while stack and not found[0]:
        op = stack.pop()
        if id(op) in seen or not isinstance(op, te.ComputeOp):
            continue
        seen.add(id(op))
        for b in op.body:
            post_order_visit(b, visit)
        if not op.reduce_axis:
            stack.extend(t.op for t in op.input_tensors)
    return found[0]


def _injective_stages(out: te.Tensor) -> Iterator[Any]:
    """``out``'s op, then the injective compute stages it reads (and so may inline), each
    once, depth first; stops at reductions and placeholders."""
    seen: set[int] = set()
    stack = [out.op]
    while stack:
        op = stack.pop()
        if id(op) in seen or not isinstance(op, te.ComputeOp) or op.reduce_axis:
            continue
        seen.add(id(op))
        yield op
        stack.extend(t.op for t in op.input_tensors)


def _has_layout_transform(out: te.Tensor) -> bool:
    """Whether ``out`` or an injective stage inlined into it is a ``layout_transform``."""
    return any(op.name == "layout_transform" for op in _injective_stages(out))


def _unblock_source(out: te.Tensor) -> tuple[Any, te.Tensor, int] | None:
    """``(layout_transform op, its 5-D source, block c)`` when 4-D ``out`` reads, through a
    ``layout_transform`` NCHW{c}c -> NCHW inlined into it, a channel-blocked tensor (the output
    side of an NCHWc convolution, maybe with a crop, bias and activation fused); else None."""
    if len(out.shape) != 4:
        return None
    for op in _injective_stages(out):
        attrs = op.attrs or {}
        if op.name == "layout_transform" and str(attrs.get("dst_layout", "")) == "NCHW":
            src = str(attrs.get("src_layout", ""))
            srcs = op.input_tensors
            if (src.startswith("NCHW") and src.endswith("c") and src[4:-1].isdigit()
                    and len(srcs) == 1 and len(srcs[0].shape) == 5):
                return op, srcs[0], int(src[4:-1])
            return None
    return None


def _stage_reads(sch: Any, op: Any, src: te.Tensor) -> bool:
    """Whether ``op``'s stage still reads ``src`` as scheduled: an injective source (a
    concatenate, a channel shuffle) inlined into the layout_transform is no buffer to tile
    from (the layout_transform then reads the source's own inputs)."""
    return any(t.op is src.op and t.value_index == src.value_index
               for t in sch[op].op.input_tensors)


def _row_tile(width: int, lanes: int) -> int | None:
    """Columns per transposed tile of :func:`_schedule_unblock`: one vector when vectors divide
    the row, the whole row when it is at most a vector, else the largest divisor of the row
    from 4 to half a vector (56 -> 8, 28 -> 7), else the whole row when it is at most two
    vectors (17, 19, 31), else None (a partial last tile would read past the row). The tile's
    strided reads are register shuffles (the LLVM codegen's small local tiles): NCHW16c -> NCHW
    of 64x13x13 4.4 -> 1.5 us (gathers -> one 13-column tile per row), 128x17x17 8.3 -> 4.8,
    NCHW12c -> NCHW of 24x56x56 19.9 -> 4.9 (8-column tiles, gathers from the tile ->
    shuffles; one thread, 2026-11-26)."""
    if width % lanes == 0:
        return lanes
    if width <= lanes:
        return width
    divs = [t for t in range(lanes // 2, 3, -1) if width % t == 0]
    if divs:
        return divs[0]
    return width if width <= 2 * lanes else None


def _schedule_unblock(sch: Any, out: te.Tensor) -> bool:
    """NCHW{c}c -> NCHW through a register-sized tile: per (block, row, tile of ``t``
    columns) the ``t x c`` input floats are copied to a local buffer with contiguous vector
    loads (one per column), then each of the ``c`` output rows is one vector read across that
    buffer (strided, at constant offsets: register shuffles, see ``SMALL_TILE_BYTES`` in the
    LLVM codegen), instead of a gather from the big input per output vector. Same process, interleaved, 2 threads, with a bias + relu
    fused (tiled / gathers, medians): NCHW16c -> NCHW of 64x112x112 0.56, 64x32x32 0.36, 128x7x7
    0.70, 64x7x7 cropped to 57 0.79, NCHW12c 24x7x7 0.91; 8-column tiles of 56-wide rows
    0.73-0.89 (64x56x56, cropped to 57, NCHW12c 24x56x56), 7-column tiles of 28/14-wide rows
    0.79-0.80. Returns False (nothing scheduled) where it does not apply."""
    found = _unblock_source(out)
    if found is None or not _stage_reads(sch, found[0], found[1]):
        return False
    lt, src, blk = found
    if not _keeps_channels(out, lt):
        return _schedule_unblock_staged(sch, out, lt)
    lanes = vector_lanes(out.dtype)
    n, c, h, w = (a.dom.extent for a in sch[out.op].op.axis)
    if not all(isinstance(e, IntImm) for e in (c, h, w)) or lanes < 4 or blk < 2:
        return False
    tile = _row_tile(w.value, lanes)
    if tile is None or tile < 2 or c.value < blk or blk > MAX_LANES:
        return False
    st = sch[out.op]
    an, ac, ah, aw = st.op.axis
    cb, ci = st.split(ac, blk)
    wo, wi = st.split(aw, tile)
    st.reorder(an, cb, ah, wo, ci, wi)
    local = sch.cache_read(src, "local", [lt])
    sch[local].compute_at(st, wo)
    lax = sch[local].op.axis
    sch[local].vectorize(lax[-1])
    sch[local].unroll(lax[-2])
    st.unroll(ci)
    st.vectorize(wi)
    _parallel_tiled_transform(st, out, an, cb, ah)
    return True


def _keeps_channels(out: te.Tensor, lt: Any) -> bool:
    """Whether no ``concatenate`` lies on the way from ``out`` down to the inlined
    ``layout_transform`` ``lt``: then a tile of ``out``'s channel blocks reads one block of
    ``lt``'s source (a crop, bias and activation keep the channel index). Through a
    concatenation (and a channel shuffle after it) an output block maps onto channels of
    both branches, and bound inference, which does not see that each output channel reads
    only one branch, caches the union: for output block ``b`` the source blocks ``0 .. b/2``
    (quadratic in the channel count). Other index maps (a transpose to NHWC) keep the tile
    as before (not measured here)."""
    on_path: dict[int, bool] = {}

    def reaches(op: Any) -> bool:
        if op is lt:
            return True
        if id(op) in on_path:
            return on_path[id(op)]
        on_path[id(op)] = False
        hit = isinstance(op, te.ComputeOp) and not op.reduce_axis and any(
            reaches(t.op) for t in op.input_tensors)
        on_path[id(op)] = hit
        return hit

    reaches(out.op)
    for op in _injective_stages(out):
        if op is lt or not on_path.get(id(op)):
            continue
        if op.name == "concatenate":
            return False
    return True


def _has_gathers(out: te.Tensor, staged: list) -> bool:
    """Whether ``out`` still inlines a ``layout_transform`` that is not one of ``staged``
    (the transforms computed at the root, whose buffers ``out`` reads)."""
    return any(op.name == "layout_transform" and not any(op is t for t in staged)
               for op in _injective_stages(out))


def _schedule_unblock_staged(sch: Any, out: te.Tensor, lt: Any) -> bool:
    """An NCHW{c}c -> NCHW ``layout_transform`` read through a channel shuffle or a
    concatenation (:func:`_keeps_channels` false): the transform is computed on its own, at
    the root of the function, through :func:`_schedule_unblock`'s register tile, into an NCHW
    buffer, and ``out`` reads that buffer's rows (contiguous vectors, each output channel one
    source plane). ShuffleNetV2's concat + shuffle + crop kernels (1 thread, CPU time, Intel
    Xeon, medians of 50, loaded, 2026-11-30): 116x28x28 26 -> 18-20 us, 232x14x14 33 -> 13-14,
    464x7x7 13 -> 9 and 31 -> 11 (two blocked inputs); slower only for the 116x28x28 one with
    two blocked inputs, 30 -> 39 (both halves go through a buffer)."""
    staged = [lt]
    for op in _injective_stages(out):
        attrs = op.attrs or {}
        if (op is not lt and op.name == "layout_transform"
                and str(attrs.get("dst_layout", "")) == "NCHW"
                and block_of(str(attrs.get("src_layout", ""))) is not None
                and len(op.input_tensors) == 1
                and not isinstance(op.input_tensors[0].op, te.ComputeOp)):
            staged.append(op)  # the other unblocked inputs of the concatenation
    for op in staged:
        sch[op].compute_root()
        if not _schedule_unblock(sch, op.output(0)):
            schedule_injective_from_existing(sch, op.output(0), tiled_transforms=False)
    schedule_injective_from_existing(sch, out, tiled_transforms=False,
                                     reads_transform=_has_gathers(out, staged))
    return True


def _parallel_tiled_transform(st: Any, out: te.Tensor, *outer: Any) -> None:
    """Parallelize a tiled layout transform over its ``outer`` loops when it is large enough
    to pay for the threads (TILED_TRANSFORM_DIVISOR: tiles are cheap per element)."""
    size = _const_size(out.shape)
    if _num_cores() > 1 and size is not None and size >= PARALLEL_MIN_ELEMENTS // \
            TILED_TRANSFORM_DIVISOR:
        st.parallel(st.fuse(*outer))


def _block_source(out: te.Tensor) -> tuple[Any, te.Tensor, int] | None:
    """``(layout_transform op, its 4-D source, block c)`` when 5-D ``out`` is (or inlines) a
    ``layout_transform`` NCHW -> NCHW{c}c of a tensor that is not computed in this stage (a
    function input: the input side of a blocked convolution); else None."""
    if len(out.shape) != 5:
        return None
    for op in _injective_stages(out):
        attrs = op.attrs or {}
        if op.name == "layout_transform" and str(attrs.get("src_layout", "")) == "NCHW":
            blk = block_of(attrs.get("dst_layout", ""))
            srcs = op.input_tensors
            if blk is None or len(srcs) != 1 or len(srcs[0].shape) != 4:
                return None
            src = srcs[0]
            if not isinstance(src.op, te.ComputeOp) or _is_row_reshape(src):
                return op, src, blk
            return None
    return None


def _is_row_reshape(t: te.Tensor) -> bool:
    """Whether 4-D ``t`` is a ``reshape`` of a ``[C, H*W]`` function input to ``[1, C, H, W]``
    (the output of a 1x1 convolution computed as a matmul): its rows are the channel rows, so
    :func:`_schedule_block`'s tile can compute it into the local tile (contiguous loads)."""
    op = t.op
    if not (isinstance(op, te.ComputeOp) and op.name == "reshape" and len(op.input_tensors) == 1):
        return False
    src = op.input_tensors[0]
    if len(src.shape) != 2 or isinstance(src.op, te.ComputeOp):
        return False
    if not all(isinstance(d, IntImm) for d in (*t.shape, *src.shape)):
        return False
    n, c, h, w, rows, cols = (int(getattr(d, "value")) for d in (*t.shape, *src.shape))  # noqa: B009
    return n == 1 and rows == c and cols == h * w


def _schedule_block(sch: Any, out: te.Tensor) -> bool:
    """NCHW -> NCHW{c}c through a register-sized tile, the mirror of
    :func:`_schedule_unblock`: per (block, row, tile of ``t`` columns) the ``c`` input rows'
    ``t`` floats are copied to a local ``c x t`` buffer with contiguous loads, then each
    output pixel's ``c`` channels are one strided read across it (register shuffles) instead
    of a gather with stride H*W from the input. Medians of 11 x 200 runs (2026-11-26, gathers
    -> tiles): NCHW -> NCHW16c of 64x13x13 (before a Winograd convolution) 3.2 -> 2.2 us,
    64x17x17 5.0 -> 2.8, 64x56x56 33 -> 14, 144x14x14 8.9 -> 5.2; NCHW12c 24x56x56 17 -> 9.6;
    NCHW3c 3x224x224 23 -> 18. Returns False where it does not apply."""
    found = _block_source(out)
    if found is None or not _stage_reads(sch, found[0], found[1]):
        return False
    lt, src, blk = found
    lanes = vector_lanes(out.dtype)
    n, cb, h, w, ci = (a.dom.extent for a in sch[out.op].op.axis)
    if not all(isinstance(e, IntImm) for e in (cb, h, w, ci)) or lanes < 4 or blk < 2 \
            or blk > MAX_LANES or ci.value != blk:
        return False
    tile = _row_tile(w.value, lanes)
    if tile is None or tile < 2:
        return False
    st = sch[out.op]
    an, acb, ah, aw, aci = st.op.axis
    wo, wi = st.split(aw, tile)
    st.reorder(an, acb, ah, wo, wi, aci)
    if isinstance(src.op, te.ComputeOp):  # a reshape of rows (_is_row_reshape): computed here
        local = src
        sch[local].set_scope("local")
    else:
        local = sch.cache_read(src, "local", [lt])
    sch[local].compute_at(st, wo)
    lax = sch[local].op.axis
    sch[local].vectorize(lax[-1])
    sch[local].unroll(lax[-3])
    st.unroll(wi)
    st.vectorize(aci)
    _parallel_tiled_transform(st, out, an, acb, ah)
    return True


def schedule_injective_from_existing(sch: Any, out: te.Tensor, tiled_transforms: bool = True,
                                     reads_transform: bool | None = None) -> Any:
    """Vectorize and parallelize the loops of ``out``'s stage in ``sch``. ``tiled_transforms``:
    a layout_transform it is or inlines may be scheduled through a register tile (its source
    cached per tile of ``out``'s loops): only where ``out`` is its one consumer.
    ``reads_transform``: whether ``out`` computes a layout_transform's gathers (its lower
    parallel threshold); None: whether one of the injective stages it reads is one."""
    st = sch[out.op]
    axes = list(st.op.axis)
    if not axes:
        return sch
    if tiled_transforms and (_schedule_unblock(sch, out) or _schedule_block(sch, out)):
        return sch
    lanes = vector_lanes(out.dtype)
    size = _const_size(out.shape)
    if size == 0:
        return sch
    min_par = PARALLEL_MIN_ELEMENTS
    if size is not None and size < min_par and _has_transcendental(out):
        min_par //= TRANSCENDENTAL_DIVISOR
    elif size is not None and size < min_par and (
            _has_layout_transform(out) if reads_transform is None else reads_transform):
        min_par //= LAYOUT_TRANSFORM_DIVISOR
    big = (size is None or size >= min_par) and _num_cores() > 1
    last = axes[-1].dom.extent
    if lanes > 1 and (not isinstance(last, IntImm) or last.value >= lanes):
        # split the innermost axis: the vector lanes index memory contiguously
        wo, wi = st.split(axes[-1], lanes)
        st.vectorize(wi)
        outer = axes[:-1]
        if isinstance(last, IntImm) and last.value % lanes == 0:
            par = st.fuse(*outer, wo) if outer else wo
        else:
            # keep the guarded tail iteration of `wo` out of the fused loop, so that loop
            # partitioning peels it into one shorter vector
            fused = (st.fuse(*outer) if len(outer) > 1 else outer[0]) if outer else None
            outer_size = _const_size([a.dom.extent for a in outer])
            enough = outer_size is None or outer_size >= 2 * _num_cores()
            par = fused if fused is not None and enough else wo
        if big:
            st.parallel(par)
        return sch
    if (lanes > 1 and len(axes) >= 2 and isinstance(last, IntImm) and last.value <= 4
            and isinstance(axes[-2].dom.extent, IntImm)
            and 4 * axes[-2].dom.extent.value >= lanes):
        # an innermost axis of 2-4 (NCHW -> NCHW3c of an image): vectorize the axis before it,
        # the short one unrolled outside the vector; accesses along it become stride-2..4
        # vectors, which the LLVM backend emits as masked contiguous loads/stores (no div/mod
        # indices, no gathers): 0.115 -> ~0.02 ms for 1x3x224x224. An axis before it shorter
        # than the lanes (a row of a quarter vector or more) is one vector: 1x57x13x13 -> NCHW3c
        # 18 -> 2 us
        if axes[-2].dom.extent.value >= lanes:
            wo, wi = st.split(axes[-2], _even_split(axes[-2].dom.extent.value, lanes))
        else:
            wo, wi = None, axes[-2]
        st.reorder(*axes[:-2], *([wo] if wo is not None else []), axes[-1], wi)
        st.unroll(axes[-1])
        st.vectorize(wi)
        outer = axes[:-2] + ([wo] if wo is not None else [])
        par = (st.fuse(*outer) if len(outer) > 1 else outer[0]) if outer else None
        if big and par is not None:
            st.parallel(par)
        return sch
    if (lanes > 1 and len(axes) >= 2 and isinstance(last, IntImm)
            and 4 * last.value >= lanes):
        # an innermost axis of a quarter vector or more (a 7..15-wide image row, e.g. of
        # NCHW16c -> NCHW): one vector per row, the other axes fused (no div/mod indices):
        # NCHW16c -> NCHW of 1x128x13x13 44 -> 11 us, of 1x64x7x7 (cropped to 57) 8 -> 2 us
        st.vectorize(axes[-1])
        par = st.fuse(*axes[:-1]) if len(axes) > 2 else axes[0]
        if big:
            st.parallel(par)
        return sch
    # a short innermost axis: vectorize across the fused loop (indices need div/mod; the
    # vectorizer scalarizes what it cannot turn into vector accesses)
    fused = st.fuse(*axes) if len(axes) > 1 else axes[0]
    if size is not None and size < lanes:
        return sch
    if lanes > 1:
        outer_l, inner = st.split(fused, lanes)
        st.vectorize(inner)
    else:
        outer_l = fused
    if big:
        st.parallel(outer_l)
    return sch


def _even_split(extent: int, lanes: int) -> int:
    """The vector length for an axis of ``extent`` (at least ``lanes``) vectorized under short
    unrolled axes: ``lanes`` when it divides the axis, else half a vector when that does
    (56 -> 8 on 16 lanes), else ``lanes``. A guarded tail vector
    inside the fused outer loop is not vectorized at all (the whole row runs scalar):
    NCHW16c -> NCHW2c of 64x56x56 cropped to 58 channels, bias + relu fused, 125 -> 69 us
    with the vectorizer's folded store stride (1 thread, Intel Xeon, 2026-11-30)."""
    half = lanes // 2
    if extent % lanes and half >= 4 and extent % half == 0:
        return half
    return lanes


def _resize_rows(outs: list) -> list[te.Tensor]:
    """The ``resize2d_rows`` stages (the width pass of ``topi.image.resize2d(...,
    separable=True)``) that ``outs`` read."""
    return [op.output(0) for op in producer_ops(outs) if op.tag == "resize2d_rows"]


def _schedule_rows(sch: Any, rows: te.Tensor) -> None:
    """Rows vectorized along the width, the other axes one parallel loop (the layout-transform
    tilings of :func:`schedule_injective_from_existing` do not apply: a ``layout_transform``
    inlined here is read through the resize's column taps)."""
    st = sch[rows.op]
    axes = list(st.op.axis)
    lanes = vector_lanes(rows.dtype)
    last = axes[-1].dom.extent
    outer = axes[:-1]
    if lanes > 1 and isinstance(last, IntImm) and last.value >= lanes:
        _, wi = st.split(axes[-1], lanes)
        st.vectorize(wi)
    if not outer:
        return
    par = st.fuse(*outer) if len(outer) > 1 else outer[0]
    size = _const_size(rows.shape)
    if _num_cores() > 1 and (size is None or size >= PARALLEL_MIN_ELEMENTS):
        st.parallel(par)


def schedule_injective(outs: Any) -> Any:
    """Schedule of injective outputs for x86 (see the module docstring)."""
    outs = as_outs(outs)
    s = te.create_schedule([t.op for t in outs])
    inline_injective(s, outs)
    rows = _resize_rows(outs)
    for t in outs:
        if isinstance(t.op, te.ComputeOp):
            # (a separable resize's rows stage reads the fused layout_transform, and several
            # outputs (a split's) may all read one inlined layout_transform: a tile cached
            # inside one output's loops would not cover the others)
            schedule_injective_from_existing(s, t, tiled_transforms=not rows and len(outs) == 1)
    for r in rows:
        _schedule_rows(s, r)
    return s


schedule_elemwise = schedule_injective
schedule_broadcast = schedule_injective
schedule_concatenate = schedule_injective
