"""``depthwise_conv2d_nchw.cuda``: depthwise convolution (channel multiplier allowed) on GPUs.

Output axes ``f/y/x`` are split four ways ``[block, vthread, thread, inner]`` (the batch stays a
block axis, fused with the channel blocks on ``blockIdx.z``). Each block copies the padded input
window and the weights of its channels into ``shared`` memory once, cooperatively, then every
thread accumulates its ``inner`` outputs in a ``local`` stage over the (unsplit) window.
Knobs ``tile_f/y/x``, ``auto_unroll_max_step``, ``unroll_explicit``.

Fallback: per thread 1 channel x 2 rows x 1 column, up to 4 x 8 x 8 threads, divisors only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ... import autotvm
from ...te import Tensor, create_schedule, thread_axis
from ..nn.depthwise_conv2d import depthwise_conv2d_nchw as _nn_depthwise
from ..nn.utils import traverse_inline
from .utils import (
    apply_unroll,
    const_int,
    cooperative_fetch,
    fallback_tile,
    max_threads,
    output_stages,
    unroll_knobs,
)

if TYPE_CHECKING:
    from ...te.schedule import Schedule

__all__ = ["depthwise_conv2d_nchw", "schedule_depthwise_conv2d_nchw", "fallback_entities",
           "schedule_depthwise"]


@autotvm.register_topi_compute("depthwise_conv2d_nchw.cuda")
def depthwise_conv2d_nchw(cfg: Any, data: Tensor, kernel: Tensor, strides: Any, padding: Any,
                          dilation: Any = 1, out_dtype: str | None = None) -> Tensor:
    """``topi.nn.depthwise_conv2d_nchw``, tunable on GPUs."""
    out = _nn_depthwise(data, kernel, strides, padding, dilation, out_dtype)
    n, c, oh, ow = (const_int(d, "depthwise_conv2d_nchw.cuda: output shape") for d in out.shape)
    kh, kw = (const_int(d, "depthwise_conv2d_nchw.cuda: kernel") for d in kernel.shape[2:])
    cfg.add_flop(2 * n * c * oh * ow * kh * kw)
    return out


@autotvm.register_topi_schedule("depthwise_conv2d_nchw.cuda")
def schedule_depthwise_conv2d_nchw(cfg: Any, outs: Any) -> Schedule:
    """Schedule ``depthwise_conv2d_nchw.cuda`` (elementwise stages fused after it)."""
    outs = [outs] if isinstance(outs, Tensor) else list(outs)
    s = create_schedule([o.op for o in outs])

    def callback(op: Any) -> None:
        if op.tag == "depthwise_conv2d_nchw":
            schedule_depthwise(cfg, s, op.output(0))

    traverse_inline(s, outs[0].op, callback)
    return s


def fallback_entities(cfg: Any, conv: Tensor) -> None:
    """Set in ``cfg`` the untuned tiles for the depthwise stage ``conv`` (channels, rows and
    columns only: the batch stays a block axis, so a batch known only at run time needs no
    guard) and the unroll knobs' defaults."""
    from ...autotvm.space import OtherOptionEntity

    _, f, y, x = conv.op.axis
    limit = max_threads()
    tx = min(8, limit)
    ty = max(1, min(8, limit // tx))
    cfg["tile_f"] = fallback_tile(const_int(f.dom.extent), max(1, min(4, limit // (tx * ty))), 1)
    cfg["tile_y"] = fallback_tile(const_int(y.dom.extent), ty, 2)
    cfg["tile_x"] = fallback_tile(const_int(x.dom.extent), tx, 1)
    cfg["auto_unroll_max_step"] = OtherOptionEntity(256)
    cfg["unroll_explicit"] = OtherOptionEntity(1)


def schedule_depthwise(cfg: Any, s: Schedule, conv: Tensor) -> None:
    """The template's knobs and schedule, for the depthwise stage ``conv`` in ``s``."""
    pad_data, kernel = conv.op.input_tensors
    if "pad" in (pad_data.op.tag or "") and pad_data.op in s:
        s[pad_data].compute_inline()
    _, f, y, x = s[conv].op.axis
    cfg.define_split("tile_f", f, num_outputs=4)
    cfg.define_split("tile_y", y, num_outputs=4)
    cfg.define_split("tile_x", x, num_outputs=4)
    unroll_knobs(cfg, (0, 256, 1500))
    if cfg.is_fallback:
        fallback_entities(cfg, conv)

    output, OL = output_stages(s, conv)
    AA = s.cache_read(pad_data, "shared", [OL])
    WW = s.cache_read(kernel, "shared", [OL])
    st = s[output]
    n, f, y, x = st.op.axis
    bf, vf, tf, fi = cfg["tile_f"].apply(s, output, f)
    by, vy, ty, yi = cfg["tile_y"].apply(s, output, y)
    bx, vx, tx, xi = cfg["tile_x"].apply(s, output, x)
    st.reorder(n, bf, by, bx, vf, vy, vx, tf, ty, tx, fi, yi, xi)
    bz = st.fuse(n, bf)
    st.bind(bz, thread_axis("blockIdx.z"))
    st.bind(by, thread_axis("blockIdx.y"))
    st.bind(bx, thread_axis("blockIdx.x"))
    for v, nm in ((vf, "vf"), (vy, "vy"), (vx, "vx")):
        st.bind(v, thread_axis("vthread", name=nm))
    st.bind(tf, thread_axis("threadIdx.z"))
    st.bind(ty, thread_axis("threadIdx.y"))
    st.bind(tx, thread_axis("threadIdx.x"))
    s[OL].compute_at(st, tx)
    s[AA].compute_at(st, bx)
    s[WW].compute_at(st, bx)
    threads = [("threadIdx.z", cfg["tile_f"].size[2]), ("threadIdx.y", cfg["tile_y"].size[2]),
               ("threadIdx.x", cfg["tile_x"].size[2])]
    for load in (AA, WW):
        cooperative_fetch(s, load, threads)
    apply_unroll(cfg, st, bz)
