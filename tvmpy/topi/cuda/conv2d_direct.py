"""``conv2d_nchw.cuda``: the direct NCHW convolution template of the TVM paper for GPUs (used for
CUDA and OpenCL alike).

Each output axis ``n/f/y/x`` is split four ways ``[block, vthread, thread, inner]``: the
blocks go to ``blockIdx.z`` (batch x channels) / ``.y`` / ``.x``, the virtual threads interleave
independent tiles in one thread (Figure 6), the threads to ``threadIdx.z/y/x``, the inner part is
the per-thread register tile, accumulated in a ``local`` stage. The reduction ``rc/ry/rx`` is
split in two: at each outer step the block copies the input window and the weights it needs into
``shared`` memory, every thread fetching a slice (cooperative fetching), then the inner steps run
out of shared memory. Knobs ``tile_n/f/y/x`` (4-way), ``tile_rc/ry/rx`` (2-way),
``auto_unroll_max_step``, ``unroll_explicit``. Splits whose threads alone exceed the target's
block limit, or with more than 8 virtual threads on one axis, are left out of the space; the
rest is checked per candidate by ``verify_gpu_code`` in the builder.

The fallback config (no tuned record) is chosen from the shape, for any shape (:func:`_fallback`):
per thread up to 4 channels x 2 rows x 2 columns (columns as virtual threads), whole rows of up
to 16 columns on ``threadIdx.x``, up to 256 threads, fewer outputs per thread and then fewer
threads while the grid has under :data:`MIN_BLOCKS` blocks, the whole kernel window and up to
16 input channels per shared-memory chunk; always divisors (no tails). ``FALLBACK_RULE = "v1"``
restores the earlier rule (2 x 2 x 1 per thread, 8 x 4 x 8 threads, chunks of 8 channels and
one kernel row) for comparisons.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ... import autotvm
from ...autotvm.space import SplitEntity
from ...te import create_schedule, thread_axis
from ..nn.conv2d import conv2d_nchw as _nn_conv2d_nchw
from ..nn.utils import traverse_inline
from .utils import (
    _largest_divisor,
    apply_unroll,
    const_int,
    cooperative_fetch,
    fallback_tile,
    max_threads,
    output_stages,
    unroll_knobs,
)

if TYPE_CHECKING:
    from ...te import Tensor
    from ...te.schedule import Schedule

__all__ = ["conv2d_nchw", "schedule_conv2d_nchw", "schedule_direct_conv", "fallback_entities"]

MAX_VTHREAD = 8  # virtual threads per axis (each one replicates the per-thread tile)


@autotvm.register_topi_compute("conv2d_nchw.cuda")
def conv2d_nchw(cfg: Any, data: Tensor, kernel: Tensor, strides: Any, padding: Any,
                dilation: Any = 1, out_dtype: str | None = None) -> Tensor:
    """``topi.nn.conv2d_nchw`` (tag "conv2d_nchw"), tunable on GPUs."""
    out = _nn_conv2d_nchw(data, kernel, strides, padding, dilation, out_dtype)
    n, oc, oh, ow = (const_int(d, "conv2d_nchw.cuda: output shape") for d in out.shape)
    _, ic, kh, kw = (const_int(d, "conv2d_nchw.cuda: kernel shape") for d in kernel.shape)
    cfg.add_flop(2 * n * oc * oh * ow * ic * kh * kw)
    return out


@autotvm.register_topi_schedule("conv2d_nchw.cuda")
def schedule_conv2d_nchw(cfg: Any, outs: Any) -> Schedule:
    """Schedule ``conv2d_nchw.cuda`` (and elementwise stages fused after it)."""
    from ...te import Tensor as _T

    outs = [outs] if isinstance(outs, _T) else list(outs)
    s = create_schedule([o.op for o in outs])

    def callback(op: Any) -> None:
        if op.tag == "conv2d_nchw":
            schedule_direct_conv(cfg, s, op.output(0))

    traverse_inline(s, outs[0].op, callback)
    return s


FALLBACK_RULE = "shape"
"""Which untuned config :func:`schedule_direct_conv` derives: ``"shape"`` (the rule of
:func:`_fallback`) or ``"v1"`` (the earlier fixed-tile rule, :func:`_fallback_v1`; kept for the
A/B of ``bench/gpu_conv_defaults.py``)."""

MIN_BLOCKS = 132
"""Blocks the untuned rule aims for: one per SM of a 132-SM GPU (H100/H200) -- more waves on
smaller GPUs, which costs little; fewer leaves SMs idle (ResNet-18's 512x7x7 layer at batch 1 has
25,088 outputs: four per thread in 128-thread blocks is 49 blocks). On the H200 at batch 1
(bench/gpu_conv_defaults.py, 2026-11-30) aiming at 132 was faster than at 264 (two per SM) on
five of ResNet-18's eleven conv shapes (stem 0.049 -> 0.031 ms, 1x1/2 64->128 0.034 -> 0.022) and
equal on the others."""
MIN_THREADS = 64
"""Threads per block the rule does not go below (two warps) while shrinking for blocks."""
MAX_THREAD_Z = 64
"""CUDA's limit on ``threadIdx.z`` (the channel threads)."""
SHARED_BUDGET = 24 * 1024
"""Bytes of shared memory per block the untuned rule allows (half of the 48 KB a block may have
statically: two blocks' tiles resident on any SM, more on sm_80/sm_90's 164/228 KB)."""


def shared_budget() -> int:
    """:data:`SHARED_BUDGET`, or half of the current target's shared memory per block where
    that is less (WebGPU's guaranteed 16 KB: 8 KB; Vulkan's 32 KB: 16 KB)."""
    from ...target import Target

    tgt = Target.current()
    limit = int(getattr(tgt, "max_shared_memory_per_block", 0) or 0) if tgt is not None else 0
    return min(SHARED_BUDGET, limit // 2) if limit else SHARED_BUDGET


def _fallback_v1(cfg: Any, n: int, f: int, y: int, x: int, rc: int, ry: int, rx: int,
                 span: tuple[int, int, int, int]) -> None:
    """The earlier untuned rule: per thread up to 2 channels x 2 rows x 1 column, at most
    8 x 4 x 8 threads, input-channel chunks up to 8, one kernel row per chunk."""
    limit = max_threads()
    tx = min(8, limit)
    ty = min(4, max(1, limit // tx))
    tf = max(1, min(8, limit // (tx * ty)))
    cfg["tile_n"] = SplitEntity([-1, 1, 1, 1])
    cfg["tile_f"] = fallback_tile(f, tf, 2)
    cfg["tile_y"] = fallback_tile(y, ty, 2)
    cfg["tile_x"] = fallback_tile(x, tx, 1)
    cfg["tile_rc"] = SplitEntity([-1, _largest_divisor(rc, 8)])
    cfg["tile_ry"] = SplitEntity([-1, 1])
    cfg["tile_rx"] = SplitEntity([-1, rx])


def _fallback(cfg: Any, n: int, f: int, y: int, x: int, rc: int, ry: int, rx: int,
              span: tuple[int, int, int, int]) -> None:
    """The untuned config, derived from the shape (divisors only: exact tiles for any shape).

    A thread accumulates ``fi`` channels x ``yi`` rows x ``vx`` columns in registers; per
    reduction step it reads ``fi`` weights (the same for every thread of a warp whose threads
    are all spatial: a broadcast) and ``yi * vx`` inputs from shared memory for
    ``fi * yi * vx`` FMAs, so the larger tile (4 x 2 x 2: 16 FMAs per 8 loads) keeps shared
    bandwidth from bounding the FMAs. The columns are virtual threads (interleaved: the threads
    of a warp read consecutive words, no bank conflicts), the channels and rows inner loops.
    Threads: whole rows of up to 16 columns on ``threadIdx.x``, rows up to ~64 spatial threads
    on ``threadIdx.y``, channels on ``threadIdx.z`` up to 256 threads in all. The batch is a
    block axis (``blockIdx.z`` with the channel blocks). While the grid has fewer than
    :data:`MIN_BLOCKS` blocks the tile shrinks -- channels per thread, then rows, columns, then
    threads per block down to :data:`MIN_THREADS` -- as an idle SM costs more than a lower
    reuse. The reduction: the whole kernel window and the largest input-channel chunk up to 16
    whose shared tiles (input window + weights) fit :func:`shared_budget`, so that one
    ``__syncthreads`` pair covers ``16 x kh x kw`` steps (was one kernel row of 8 channels).

    ``span``: ``(stride_h, stride_w, window_h, window_w)``, the input rows/columns one output
    row/column advances and one output reads."""
    sh, sw, wh, ww = span
    tmax = max(1, min(256, max_threads()))
    vx = _largest_divisor(x, 2) if x >= 16 else 1
    tx = _largest_divisor(x // vx, min(16, tmax))
    yi = _largest_divisor(y, 2) if y >= 8 else 1
    ty = _largest_divisor(y // yi, max(1, min(64, tmax) // tx))
    fi = _largest_divisor(f, 4)
    tz = min(MAX_THREAD_Z, tmax)
    tf = _largest_divisor(f // fi, max(1, min(tz, tmax // (tx * ty))))

    def blocks() -> int:
        return n * (f // (fi * tf)) * (y // (yi * ty)) * (x // (vx * tx))

    while blocks() < MIN_BLOCKS:
        if fi > 1:
            fi = _largest_divisor(f, fi - 1)
            tf = _largest_divisor(f // fi, max(1, min(tz, tmax // (tx * ty))))
        elif yi > 1:
            yi = 1
            ty = _largest_divisor(y, max(1, min(64, tmax) // tx))
        elif vx > 1:
            vx = 1
            tx = _largest_divisor(x, min(16, tmax))
        elif tf > 1 and _largest_divisor(f // fi, tf - 1) * ty * tx >= MIN_THREADS:
            tf = _largest_divisor(f // fi, tf - 1)
        elif ty > 1 and tf * _largest_divisor(y // yi, ty - 1) * tx >= MIN_THREADS:
            ty = _largest_divisor(y // yi, ty - 1)
        else:
            break
    cfg["tile_n"] = SplitEntity([-1, 1, 1, 1])
    cfg["tile_f"] = SplitEntity([-1, 1, tf, fi])
    cfg["tile_y"] = SplitEntity([-1, 1, ty, yi])
    cfg["tile_x"] = SplitEntity([-1, vx, tx, 1])
    # shared tiles per input channel: the input window of the block's outputs, its weights
    rows = (ty * yi - 1) * sh + wh
    cols = (tx * vx - 1) * sw + ww
    per_channel_full = 4 * (rows * cols + fi * tf * ry * rx)
    per_channel_row = 4 * (((ty * yi - 1) * sh + 1) * cols + fi * tf * rx)
    budget = shared_budget()
    if per_channel_full <= budget:
        kry, per_channel = ry, per_channel_full
    else:  # a large window (a 7x7 stem on a wide tile): one kernel row per chunk
        kry, per_channel = 1, per_channel_row
    chunk = _largest_divisor(rc, max(1, min(16, budget // per_channel)))
    cfg["tile_rc"] = SplitEntity([-1, chunk])
    cfg["tile_ry"] = SplitEntity([-1, kry])
    cfg["tile_rx"] = SplitEntity([-1, rx])


def _span(pad_data: Any, kernel: Any, out: Any) -> tuple[int, int, int, int]:
    """``(stride_h, stride_w, window_h, window_w)`` from the (padded) input, kernel and output
    extents: the largest stride that gives the output extent with the kernel's taps, and the
    input rows (columns) the outputs leave beyond it, ``window = padded - (out - 1) * stride``
    (the dilated window plus any unread tail: never under the true window; the compute keeps
    no stride/dilation attributes). For the shared-memory budget only."""
    res = []
    for ax in (2, 3):
        hp = const_int(pad_data.shape[ax])
        k = const_int(kernel.shape[ax])
        o = const_int(out.shape[ax])
        s = max([st for st in range(1, max(2, hp + 1)) if (hp - k) // st + 1 == o] or [1])
        res.append((s, hp - (o - 1) * s if o > 1 else hp))
    return res[0][0], res[1][0], res[0][1], res[1][1]


def fallback_entities(cfg: Any, conv: Tensor, batch: int) -> None:
    """Set in ``cfg`` the untuned rule's tiles (:data:`FALLBACK_RULE`) for the conv2d stage
    ``conv`` as if its batch were ``batch``: for a batch known only at run time (the tiles
    cover the constant axes exactly; the batch stays a block axis, one image a block, so any
    run-time batch is covered without guards), and the unroll knobs' defaults."""
    from ...autotvm.space import OtherOptionEntity

    pad_data, kernel = conv.op.input_tensors
    axes = conv.op.axis[1:] + conv.op.reduce_axis
    ext = [max(1, int(batch))] + [const_int(a.dom.extent) for a in axes]
    rule = _fallback if FALLBACK_RULE == "shape" else _fallback_v1
    rule(cfg, *ext, _span(pad_data, kernel, conv))
    cfg["auto_unroll_max_step"] = OtherOptionEntity(512)
    cfg["unroll_explicit"] = OtherOptionEntity(1)


def schedule_direct_conv(cfg: Any, s: Schedule, conv: Tensor) -> None:
    """The direct template's knobs and schedule, for the conv2d stage ``conv`` in ``s``."""
    pad_data, kernel = conv.op.input_tensors
    if "pad" in (pad_data.op.tag or "") and pad_data.op in s:
        s[pad_data].compute_inline()
    n, f, y, x = s[conv].op.axis
    rc, ry, rx = s[conv].op.reduce_axis
    limit = max_threads()
    for name, ax in (("tile_n", n), ("tile_f", f), ("tile_y", y), ("tile_x", x)):
        # prune what can never fit: one axis' threads above the block limit, > 8 vthreads
        cfg.define_split(name, ax, num_outputs=4,
                         filter=lambda e: e.size[2] <= limit and e.size[1] <= MAX_VTHREAD)
    for name, ax in (("tile_rc", rc), ("tile_ry", ry), ("tile_rx", rx)):
        cfg.define_split(name, ax, num_outputs=2)
    unroll_knobs(cfg)
    if cfg.is_fallback:
        ext = [const_int(a.dom.extent) for a in (n, f, y, x, rc, ry, rx)]
        rule = _fallback if FALLBACK_RULE == "shape" else _fallback_v1
        rule(cfg, *ext, _span(pad_data, kernel, conv))

    output, OL = output_stages(s, conv)
    AA = s.cache_read(pad_data, "shared", [OL])
    WW = s.cache_read(kernel, "shared", [OL])

    st = s[output]
    n, f, y, x = st.op.axis
    kernel_scope, n = st.split(n, nparts=1)
    bn, vn, tn, ni = cfg["tile_n"].apply(s, output, n)
    bf, vf, tf, fi = cfg["tile_f"].apply(s, output, f)
    by, vy, ty, yi = cfg["tile_y"].apply(s, output, y)
    bx, vx, tx, xi = cfg["tile_x"].apply(s, output, x)
    st.reorder(bn, bf, by, bx, vn, vf, vy, vx, tn, tf, ty, tx, ni, fi, yi, xi)
    bz = st.fuse(bn, bf)
    tz = st.fuse(tn, tf)
    st.bind(bz, thread_axis("blockIdx.z"))
    st.bind(by, thread_axis("blockIdx.y"))
    st.bind(bx, thread_axis("blockIdx.x"))
    for v, nm in ((vn, "vn"), (vf, "vf"), (vy, "vy"), (vx, "vx")):
        st.bind(v, thread_axis("vthread", name=nm))
    st.bind(tz, thread_axis("threadIdx.z"))
    st.bind(ty, thread_axis("threadIdx.y"))
    st.bind(tx, thread_axis("threadIdx.x"))
    s[OL].compute_at(st, tx)

    n, f, y, x = s[OL].op.axis
    rc, ry, rx = s[OL].op.reduce_axis
    rco, rci = cfg["tile_rc"].apply(s, OL, rc)
    ryo, ryi = cfg["tile_ry"].apply(s, OL, ry)
    rxo, rxi = cfg["tile_rx"].apply(s, OL, rx)
    s[OL].reorder(rco, ryo, rxo, rci, ryi, rxi, n, f, y, x)
    s[AA].compute_at(s[OL], rxo)
    s[WW].compute_at(s[OL], rxo)
    nz = cfg["tile_n"].size[2] * cfg["tile_f"].size[2]
    threads = [("threadIdx.z", nz), ("threadIdx.y", cfg["tile_y"].size[2]),
               ("threadIdx.x", cfg["tile_x"].size[2])]
    for load in (AA, WW):
        cooperative_fetch(s, load, threads)
    apply_unroll(cfg, st, kernel_scope)
