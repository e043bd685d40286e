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

The fallback config (no tuned record) is chosen from the shape, for any shape: per thread up to
2 channels x 2 rows x 1 column, at most 8 x 4 x 8 threads (fewer when the target allows fewer
per block), input-channel chunks up to 8, whole kernel rows; always divisors (no tails).
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

__all__ = ["conv2d_nchw", "schedule_conv2d_nchw", "schedule_direct_conv"]

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


def _fallback(cfg: Any, n: int, f: int, y: int, x: int, rc: int, ry: int, rx: int) -> None:
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
        _fallback(cfg, *ext)

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
