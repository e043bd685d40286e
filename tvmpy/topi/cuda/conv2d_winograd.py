"""``conv2d_nchw_winograd.cuda``: Winograd F(m x m, 3 x 3) for 3x3 stride-1 NCHW convolutions
on GPUs (TVM's ``conv2d_nchw_winograd.cuda``; CUDA and OpenCL alike).

Stages (one kernel each, the first only when the weight is not pre-transformed):

1. weight transform ``U[e, n, ci, co] = (G g G^T)[e, n]`` (``winograd_Gg`` in registers, then
   ``winograd_U``): one thread per (ci, co), all ``alpha x alpha`` values unrolled.
   ``pre_computed=True`` takes ``U`` as the input instead: relay's GPU AlterOpLayout rewrites
   a Winograd ``nn.conv2d`` into the weight transform + this form
   (:func:`conv2d_nchw_winograd_without_weight_transform`), and FoldConstant folds the
   transform of a constant weight at build time.
2. input transform ``V[e, n, ci, p] = (B^T d B)[e, n]`` of each ``alpha x alpha`` input tile
   ``p`` (``winograd_d`` in registers, then ``winograd_V``): one thread per (ci, p), unrolled.
3. the batched product ``M[e, n, co, p] = sum_ci U[e, n, ci, co] V[e, n, ci, p]``: ``alpha^2``
   independent GEMMs (output channels x tiles, input channels deep), tiled as the GEMM of TVM's
   schedule: ``blockIdx.z`` = (e, n), blocks of ``co x p``, threads with a register tile as
   virtual threads (interleaved: conflict-free shared reads), the reduction in chunks through
   ``shared`` (cooperative fetching).
4. the output transform ``Y = A^T M A`` (``winograd_S`` in registers) gathered back into the
   image: one thread per ``m x m`` output tile, elementwise consumers (bias, relu, residual add)
   fused into this kernel.

The transforms are sums of the non-zero terms of the transform matrices
(:func:`topi.nn.winograd.winograd_matrices`, the same points as the x86 Winograd), selected by
the unrolled index, so each unrolled value is a handful of adds.

Knobs of the product: ``tile_y`` (output channels, 4-way),
``tile_x`` (tiles, 4-way), ``tile_rc`` (2-way), ``auto_unroll_max_step``, ``unroll_explicit``.
Fallback: shape-derived as ``conv2d_nchw.cuda``'s (see :func:`_fallback`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ... import autotvm
from ...autotvm.space import SplitEntity
from ...te import compute, create_schedule, reduce_axis, thread_axis
from ...te import sum as te_sum
from ..nn.pad import pad
from ..nn.utils import get_pad_tuple, traverse_inline
from ..nn.winograd import _transform, winograd_matrices
from .conv2d_direct import MIN_BLOCKS, MIN_THREADS, shared_budget
from .utils import (
    _largest_divisor,
    apply_unroll,
    const_int,
    cooperative_fetch,
    max_threads,
    unroll_knobs,
)

if TYPE_CHECKING:
    from ...te import Tensor
    from ...te.schedule import Schedule

__all__ = ["conv2d_nchw_winograd", "schedule_conv2d_nchw_winograd", "winograd_tile_size",
           "conv2d_nchw_winograd_weight_transform", "winograd_conv", "schedule_winograd",
           "fixed_entities", "conv2d_nchw_winograd_without_weight_transform",
           "schedule_winograd_weight_transform"]

MAX_WASTE = 1.35
"""F(4x4) only when the output's 4x4 tiles compute at most this many times its outputs (a 7x7
or 14x14 map in 4x4 tiles computes 1.31x its outputs: 8x8, 16x16) ..."""
MIN_TILES_F4 = 16
"""... and give the batched products at least this many tiles (batch x tiles per image): F(4x4)
has 4x fewer tiles than F(2x2) to spread over the blocks. H200, batch 1, pre-transformed
weights (bench/gpu_conv_defaults.py, 2026-11-30): 256@14 (16 tiles) F(4x4) 0.026 ms vs F(2x2)
0.044; 512@7 (4 tiles) F(4x4) 0.037 vs F(2x2) 0.034."""


def winograd_tile_size(oh: int, ow: int, batch: int = 1) -> int:
    """The output tile size ``m`` for ``batch`` outputs of ``oh x ow`` (see :data:`MAX_WASTE`,
    :data:`MIN_TILES_F4`)."""
    th, tw = -(-oh // 4), -(-ow // 4)
    waste = th * 4 * tw * 4 / float(oh * ow)
    return 4 if waste <= MAX_WASTE and batch * th * tw >= MIN_TILES_F4 else 2


def conv2d_nchw_winograd_weight_transform(kernel: Tensor, tile_size: int) -> Tensor:
    """te: ``kernel[CO, CI, 3, 3]`` -> ``U[alpha, alpha, CI, CO]`` (``G g G^T``)."""
    co, ci, kh, kw = (const_int(d, "winograd weight") for d in kernel.shape)
    if (kh, kw) != (3, 3):
        raise ValueError(f"conv2d_nchw_winograd: kernel must be 3x3, got {kh}x{kw}")
    _, _, g = winograd_matrices(tile_size)
    alpha = tile_size + 2
    dt = kernel.dtype
    gk = compute((alpha, 3, ci, co), lambda e, kx, i, o: _transform(
        g, e, lambda ky: kernel[o, i, ky, kx], dt), name="winograd_Gg")
    return compute((alpha, alpha, ci, co), lambda e, n, i, o: _transform(
        g, n, lambda kx: gk[e, kx, i, o], dt), name="winograd_U")


@autotvm.register_topi_compute("conv2d_nchw_winograd.cuda")
def conv2d_nchw_winograd(cfg: Any, data: Tensor, kernel: Tensor, strides: Any, padding: Any,
                         dilation: Any = 1, out_dtype: str | None = None,
                         tile_size: int = 0, pre_computed: bool = False) -> Tensor:
    """3x3 stride-1 dilation-1 convolution ``data[N, CI, H, W]`` * ``kernel[CO, CI, 3, 3]`` (or,
    ``pre_computed``, ``U[alpha, alpha, CI, CO]``) -> ``[N, CO, OH, OW]`` (tag
    ``conv2d_nchw_winograd``). ``tile_size`` 0: :func:`winograd_tile_size`. (A pre-computed
    ``U`` through this task is a workload of its own; relay's pre-transformed form goes through
    :func:`conv2d_nchw_winograd_without_weight_transform`, which keeps the original one.)"""
    const_int(data.shape[0], "conv2d_nchw_winograd.cuda: batch")
    res = winograd_conv(data, kernel, strides, padding, dilation, out_dtype, tile_size,
                        pre_computed)
    n, co, oh, ow = (const_int(d) for d in res.shape)
    cfg.add_flop(2 * n * co * oh * ow * const_int(data.shape[1]) * 9)
    return res


def conv2d_nchw_winograd_without_weight_transform(data: Tensor, U: Tensor, strides: Any,
                                                  padding: Any, dilation: Any = 1,
                                                  out_dtype: str | None = None,
                                                  tile_size: int = 0) -> Tensor:
    """:func:`conv2d_nchw_winograd` of ``data`` with the weight transformed beforehand,
    ``U[alpha, alpha, CI, CO]`` (relay's ``nn.contrib_conv2d_winograd_without_weight_transform``,
    ``U`` folded at build time). No task of its own: the config is the one of the
    ``conv2d_nchw_winograd.cuda`` workload of the original weight ``[CO, CI, 3, 3]`` (same
    strides, padding, dilation, out_dtype), and that workload is recorded in the output (the
    schedule looks it up again) and in a task extraction, so tuning the original task tunes
    this form and its records apply here. (TVM registers a second task,
    ``conv2d_nchw_winograd_without_weight_transform.cuda``, and copies the config over in its
    AlterOpLayout; one workload here means no copy and no second task to tune.) ``tile_size``
    must be the one ``U`` was transformed for (0: the one ``U``'s shape says)."""
    from ...autotvm.task.dispatcher import ApplyConfig, DispatchContext
    from ...autotvm.task.task import args_to_workload
    from ...autotvm.task.topi_integration import TaskExtractEnv, _with_workload
    from ...target import Target
    from ...te import placeholder

    a1, _, ci, co = (const_int(d, "winograd U shape") for d in U.shape)
    kernel = placeholder((co, ci, 3, 3), U.dtype, name="kernel")
    m = int(tile_size)
    if m and a1 != m + 2:
        raise ValueError(f"conv2d_nchw_winograd: U {U.shape} is not transformed for tile {m}")
    workload = args_to_workload((data, kernel, strides, padding, dilation, out_dtype),
                                "conv2d_nchw_winograd.cuda")
    if TaskExtractEnv.current is not None:
        TaskExtractEnv.current.add(workload[0], workload[1:])
    cfg = DispatchContext.current.query(Target.current(), workload)
    with ApplyConfig(cfg):
        out = winograd_conv(data, U, strides, padding, dilation, out_dtype, m, True)
        n, oc, oh, ow = (const_int(d) for d in out.shape)
        cfg.add_flop(2 * n * oc * oh * ow * ci * 9)
    return _with_workload(out, workload).output(0)


def winograd_conv(data: Tensor, kernel: Tensor, strides: Any, padding: Any, dilation: Any = 1,
                  out_dtype: str | None = None, tile_size: int = 0, pre_computed: bool = False,
                  batch_hint: int = 1) -> Tensor:
    """The compute of :func:`conv2d_nchw_winograd` without the AutoTVM task: the batch may be
    a run-time size (the tiles are numbered batch-major, ``p = (b * nh + th) * nw + tw``, so
    the products' tile axis is ``batch x tiles per image``); ``tile_size`` 0 then picks
    :func:`winograd_tile_size` for a batch of ``batch_hint`` (a pre-computed ``U``: the tile
    its shape says)."""
    st = (strides, strides) if isinstance(strides, int) else tuple(strides)
    dl = (dilation, dilation) if isinstance(dilation, int) else tuple(dilation)
    if tuple(int(v) for v in st) != (1, 1) or tuple(int(v) for v in dl) != (1, 1):
        raise ValueError(f"conv2d_nchw_winograd: stride {st} / dilation {dl}: only 1")
    n = data.shape[0] if not isinstance(getattr(data.shape[0], "value", data.shape[0]), int) \
        else const_int(data.shape[0])
    ci, h, w = (const_int(d, "conv2d_nchw_winograd: data shape") for d in data.shape[1:])
    pt, pl, pb, pr = get_pad_tuple(padding, (3, 3))
    oh, ow = h + pt + pb - 2, w + pl + pr - 2
    if oh < 1 or ow < 1:
        raise ValueError("conv2d_nchw_winograd: the 3x3 window is larger than the padded input")
    m = int(tile_size) or (int(const_int(kernel.shape[0])) - 2 if pre_computed else
                           winograd_tile_size(oh, ow, n if isinstance(n, int) else batch_hint))
    alpha = m + 2
    at, bt, _ = winograd_matrices(m)
    if pre_computed:
        a1, a2, kci, co = (const_int(d, "winograd U shape") for d in kernel.shape)
        if (a1, a2) != (alpha, alpha) or kci != ci:
            raise ValueError(f"conv2d_nchw_winograd: U {kernel.shape} does not fit tile {m} "
                             f"and {ci} input channels")
        U = kernel
    else:
        co, kci = const_int(kernel.shape[0]), const_int(kernel.shape[1])
        if kci != ci:
            raise ValueError(f"conv2d_nchw_winograd: kernel has {kci} input channels, data {ci}")
        U = conv2d_nchw_winograd_weight_transform(kernel, m)
    out_dtype = out_dtype or data.dtype
    nh, nw = -(-oh // m), -(-ow // m)
    P = n * nh * nw
    dpad = pad(data, [0, 0, pt, pl], [0, 0, nh * m + 2 - h - pt, nw * m + 2 - w - pl],
               name="data_pad")
    dt = data.dtype

    def tile_px(c: Any, p: Any, r1: Any, r2: Any) -> Any:
        b, t = p // (nh * nw), p % (nh * nw)
        return dpad[b, c, (t // nw) * m + r1, (t % nw) * m + r2]

    d1 = compute((alpha, alpha, ci, P), lambda e, r2, c, p: _transform(
        bt, e, lambda r1: tile_px(c, p, r1, r2), dt), name="winograd_d")
    V = compute((alpha, alpha, ci, P), lambda e, nu, c, p: _transform(
        bt, nu, lambda r2: d1[e, r2, c, p], dt), name="winograd_V")
    rc = reduce_axis((0, ci), name="rc")

    def _c(x: Any) -> Any:
        return x if x.dtype == out_dtype else x.astype(out_dtype)

    M = compute((alpha, alpha, co, P), lambda e, nu, o, p: te_sum(
        _c(U[e, nu, rc, o]) * _c(V[e, nu, rc, p]), axis=rc), name="winograd_M")
    S = compute((m, alpha, co, P), lambda vh, r2, o, p: _transform(
        at, vh, lambda r1: M[r1, r2, o, p], out_dtype), name="winograd_S")

    def out(b: Any, o: Any, y: Any, x: Any) -> Any:
        p = (b * nh + y // m) * nw + x // m
        return _transform(at, x % m, lambda r2: S[y % m, r2, o, p], out_dtype)

    return compute((n, co, oh, ow), out, name="conv2d_nchw_winograd",
                   tag="conv2d_nchw_winograd", attrs={"tile_size": m})


@autotvm.register_topi_schedule("conv2d_nchw_winograd.cuda")
def schedule_conv2d_nchw_winograd(cfg: Any, outs: Any) -> Schedule:
    """Schedule ``conv2d_nchw_winograd.cuda`` (and elementwise stages fused after it)."""
    from ...te import Tensor as _T

    outs = [outs] if isinstance(outs, _T) else list(outs)
    s = create_schedule([o.op for o in outs])

    def callback(op: Any) -> None:
        if op.tag == "conv2d_nchw_winograd":
            schedule_winograd(cfg, s, op.output(0))

    traverse_inline(s, outs[0].op, callback)
    return s


def schedule_winograd_weight_transform(outs: Any) -> Schedule:
    """Schedule ``topi.nn.conv2d_winograd_weight_transform`` (``[alpha, alpha, OC/ob, C, ob]``;
    relay's ``nn.contrib_conv2d_winograd_weight_transform`` of a weight known only at run time)
    as the in-operator weight transform: one kernel, one thread per (input channel, output
    channel), the ``alpha x alpha`` values unrolled, ``G g`` in registers; output-channel
    blocks on ``blockIdx.z``."""
    from ...te import Tensor as _T

    outs = [outs] if isinstance(outs, _T) else list(outs)
    s = create_schedule([o.op for o in outs])
    U = outs[0]
    if U.op.tag != "winograd_weight_transform":
        raise ValueError(f"schedule_winograd_weight_transform: not a weight transform: {U.op.name}")
    nthreads = max(1, min(128, max_threads()))
    e, n, oo, i, oi = s[U].op.axis
    s[U].reorder(oo, i, oi, e, n)
    tx = _threads_2d(s, U, i, oi, nthreads)
    s[U].bind(oo, thread_axis("blockIdx.z"))
    s[U].unroll(e)
    s[U].unroll(n)
    gk = _stage(U, "winograd_Gg")
    s[gk].set_scope("local")
    s[gk].compute_at(s[U], tx)
    for ax in s[gk].op.axis[:2]:
        s[gk].unroll(ax)
    return s


def _stage(t: Any, name: str) -> Any:
    for x in t.op.input_tensors:
        if x.op.name == name:
            return x
    raise ValueError(f"winograd schedule: no stage {name} under {t.op.name}")


def _fallback(cfg: Any, b: int, co: int, p: int, ci: int) -> None:
    """Untuned: ``alpha^2`` GEMMs of ``co x p``, ``ci`` deep. Per thread up to 4 x 4 outputs
    (16 FMAs per 8 shared loads), as virtual threads (interleaved columns and rows: the threads
    of a warp read consecutive shared words); ``p`` on ``threadIdx.x`` (up to 16), ``co`` on
    ``threadIdx.y`` up to 256 threads; while the grid has fewer than
    :data:`~.conv2d_direct.MIN_BLOCKS` blocks (small maps at batch 1), fewer outputs per thread,
    then fewer threads (down to :data:`~.conv2d_direct.MIN_THREADS`). Input-channel chunks up to
    16 within :func:`~.conv2d_direct.shared_budget`."""
    tmax = max(1, min(256, max_threads()))
    vx = _largest_divisor(p, 4)
    tx = _largest_divisor(p // vx, min(16, tmax))
    vy = _largest_divisor(co, 4)
    ty = _largest_divisor(co // vy, max(1, tmax // tx))

    def blocks() -> int:
        return b * (co // (vy * ty)) * (p // (vx * tx))

    while blocks() < MIN_BLOCKS:
        if vy > 1 and vy >= vx:
            vy = _largest_divisor(co, vy - 1)
            ty = _largest_divisor(co // vy, max(1, tmax // tx))
        elif vx > 1:
            vx = _largest_divisor(p, vx - 1)
            tx = _largest_divisor(p // vx, min(16, tmax))
            ty = _largest_divisor(co // vy, max(1, tmax // tx))
        elif ty > 1 and _largest_divisor(co // vy, ty - 1) * tx >= MIN_THREADS:
            ty = _largest_divisor(co // vy, ty - 1)
        else:
            break
    cfg["tile_y"] = SplitEntity([-1, vy, ty, 1])
    cfg["tile_x"] = SplitEntity([-1, vx, tx, 1])
    per_channel = 4 * (vy * ty + vx * tx)
    cfg["tile_rc"] = SplitEntity([-1, _largest_divisor(ci, max(1, min(16, shared_budget()
                                                                      // per_channel)))])


def _schedule_transform(s: Schedule, T: Tensor, partial: Tensor, nthreads: int,
                        inner_hint: int = 0) -> None:
    """A transform stage ``T[e, n, a, b]`` (weights: ``a, b`` = input / output channel; input:
    channel / tile): one thread per ``(a, b)``, the ``alpha x alpha`` points unrolled in it, its
    first-pass product ``partial`` in registers (``local``) beside it."""
    e, n, a, b = s[T].op.axis
    s[T].reorder(a, b, e, n)
    tx = _threads_2d(s, T, a, b, nthreads, inner_hint)
    s[T].unroll(e)
    s[T].unroll(n)
    s[partial].set_scope("local")
    s[partial].compute_at(s[T], tx)
    for ax in s[partial].op.axis[:2]:
        s[partial].unroll(ax)


def _threads_2d(s: Any, stage: Any, outer: Any, inner: Any, nthreads: int,
                inner_hint: int = 0) -> Any:
    """Bind the 2-D ``(outer, inner)`` axes: ``inner`` split by up to ``nthreads`` threads
    (``threadIdx.x``), ``outer`` by the rest (``threadIdx.y``), the outer parts to
    ``blockIdx.y/x``. No fused-then-split axes: the per-thread region of a ``local`` stage
    attached below stays exact. ``inner_hint``: the extent to size the threads for when
    ``inner``'s is a run-time size (a guarded last block). Returns the innermost thread axis."""
    st = s[stage]
    ext = getattr(inner.dom.extent, "value", inner.dom.extent)
    ext_in = ext if isinstance(ext, int) else max(1, inner_hint or nthreads)
    ext_out = const_int(outer.dom.extent)
    tx = min(ext_in, nthreads)
    ty = max(1, min(ext_out, nthreads // tx))
    io, ii = st.split(inner, factor=tx)
    oo, oi = st.split(outer, factor=ty)
    st.reorder(oo, io, oi, ii)
    st.bind(oo, thread_axis("blockIdx.y"))
    st.bind(io, thread_axis("blockIdx.x"))
    st.bind(oi, thread_axis("threadIdx.y"))
    st.bind(ii, thread_axis("threadIdx.x"))
    return ii


def fixed_entities(cfg: Any, conv: Tensor, batch: int) -> None:
    """Set in ``cfg`` the untuned tiles of the batched products (:func:`_fallback`) of the
    Winograd stage ``conv`` as if its batch were ``batch`` (for a batch known only at run time:
    with ``batch`` 1 the tile axis' blocks divide the tiles of one image, so any batch is
    covered exactly), and the unroll knobs' defaults."""
    from ...autotvm.space import OtherOptionEntity

    S = _stage(conv, "winograd_S")
    M = _stage(S, "winograd_M")
    alpha = const_int(M.op.axis[0].dom.extent)
    co = const_int(M.op.axis[2].dom.extent)
    ci = const_int(M.op.reduce_axis[0].dom.extent)
    _fallback(cfg, alpha * alpha, co, max(1, int(batch)) * _tiles_per_image(conv), ci)
    cfg["auto_unroll_max_step"] = OtherOptionEntity(512)
    cfg["unroll_explicit"] = OtherOptionEntity(1)


def _tiles_per_image(conv: Tensor) -> int:
    m = int(conv.op.attrs["tile_size"])
    oh, ow = (const_int(d) for d in conv.shape[2:])
    return -(-oh // m) * -(-ow // m)


def schedule_winograd(cfg: Any, s: Schedule, conv: Tensor, batch_hint: int = 1) -> None:
    """The template's knobs and schedule, for the Winograd stage ``conv`` in ``s``. A batch
    known only at run time (``conv``'s tile axis symbolic) takes the tiles set in ``cfg``
    (:func:`fixed_entities`); the input transform's threads are sized for ``batch_hint``
    images, its last block guarded."""
    nthreads = max(1, min(128, max_threads()))
    S = _stage(conv, "winograd_S")
    M = _stage(S, "winograd_M")
    U, V = M.op.input_tensors
    d1 = _stage(V, "winograd_d")
    dpad = d1.op.input_tensors[0]
    s[dpad].compute_inline()

    # weight transform (unless pre-computed)
    if U.op.name == "winograd_U":
        _schedule_transform(s, U, _stage(U, "winograd_Gg"), nthreads)

    # input transform
    _schedule_transform(s, V, d1, nthreads, batch_hint * _tiles_per_image(conv))

    # batched product
    y_ax, x_ax = s[M].op.axis[2], s[M].op.axis[3]
    rc = s[M].op.reduce_axis[0]
    cfg.define_split("tile_y", y_ax, num_outputs=4, filter=lambda e: e.size[1] <= 8)
    cfg.define_split("tile_x", x_ax, num_outputs=4, filter=lambda e: e.size[1] <= 8)
    cfg.define_split("tile_rc", rc, num_outputs=2)
    unroll_knobs(cfg)
    if cfg.is_fallback:
        alpha = const_int(s[M].op.axis[0].dom.extent)
        _fallback(cfg, alpha * alpha, const_int(y_ax.dom.extent), const_int(x_ax.dom.extent),
                  const_int(rc.dom.extent))
    e, n, y, x = s[M].op.axis
    MM = s.cache_write(M, "local")
    UU = s.cache_read(U, "shared", [MM])
    VV = s.cache_read(V, "shared", [MM])
    st = s[M]
    bo = st.fuse(e, n)  # one GEMM per block row of the grid: blockIdx.z
    by, vy, ty, yi = cfg["tile_y"].apply(s, M, y)
    bx, vx, tx, xi = cfg["tile_x"].apply(s, M, x)
    kernel_scope, bo = st.split(bo, nparts=1)
    st.reorder(bo, by, bx, vy, vx, ty, tx, yi, xi)
    st.bind(bo, thread_axis("blockIdx.z"))
    st.bind(by, thread_axis("blockIdx.y"))
    st.bind(bx, thread_axis("blockIdx.x"))
    st.bind(vy, thread_axis("vthread", name="vy"))
    st.bind(vx, thread_axis("vthread", name="vx"))
    st.bind(ty, thread_axis("threadIdx.y"))
    st.bind(tx, thread_axis("threadIdx.x"))
    s[MM].compute_at(st, tx)
    e2, n2, y2, x2 = s[MM].op.axis
    rco, rci = cfg["tile_rc"].apply(s, MM, s[MM].op.reduce_axis[0])
    s[MM].reorder(rco, rci, e2, n2, y2, x2)
    s[UU].compute_at(s[MM], rco)
    s[VV].compute_at(s[MM], rco)
    threads = [("threadIdx.y", cfg["tile_y"].size[2]), ("threadIdx.x", cfg["tile_x"].size[2])]
    for load in (UU, VV):
        cooperative_fetch(s, load, threads)
    apply_unroll(cfg, st, kernel_scope)

    # output transform, gathered into the image, with the fused elementwise tail
    m = int(conv.op.attrs["tile_size"])
    if conv.op in s.outputs:
        out = conv
    else:
        s[conv].compute_inline()
        out = s.outputs[0].output(0)
    n_, co_, h, w = s[out].op.axis
    nw = -(-const_int(w.dom.extent) // m)
    ho, wo, hi, wi = s[out].tile(h, w, m, m)
    tw = min(nw, nthreads)
    tc = max(1, min(const_int(co_.dom.extent), nthreads // tw))
    woo, woi = s[out].split(wo, factor=tw)
    coo, coi = s[out].split(co_, factor=tc)
    s[out].reorder(n_, coo, ho, woo, coi, woi, hi, wi)
    s[out].bind(s[out].fuse(n_, coo), thread_axis("blockIdx.z"))
    s[out].bind(ho, thread_axis("blockIdx.y"))
    s[out].bind(woo, thread_axis("blockIdx.x"))
    s[out].bind(coi, thread_axis("threadIdx.y"))
    s[out].bind(woi, thread_axis("threadIdx.x"))
    s[out].unroll(hi)
    s[out].unroll(wi)
    to2 = woi
    s[S].set_scope("local")
    s[S].compute_at(s[out], to2)
    for ax in s[S].op.axis[:2]:
        s[S].unroll(ax)
