"""x86 convolution schedules.

``schedule_conv2d_nchw`` & co. (for the ``topi.nn`` computes: NCHW, grouped, depthwise,
transposed, N-d): each register tile holds ``oc_tile`` output channels x 16 output columns
(the columns along the vector lanes, one broadcast weight per channel), the reductions outside
the tile, tasks over (batch, channel block, row) in parallel; padding is one parallel,
vectorized stage. Injective consumers (bias, relu, residual add) run on the tile. The blocked
layout's schedule (``schedule_conv2d_NCHWc``, what AlterOpLayout makes of every conv2d at
opt_level 3) lives beside its AutoTVM template in ``conv2d_nchwc.py``; the helpers here
(``_outputs``, ``_find``, ``anchor``, ``_schedule_pad``) serve every x86 schedule.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...te import create_schedule

if TYPE_CHECKING:
    from ...te import Tensor
    from ...te.schedule import Schedule

__all__ = ["schedule_conv2d_nchw", "schedule_group_conv2d_nchw",
           "schedule_conv_nchw_direct",
           "schedule_depthwise_conv2d_nchw", "schedule_conv2d_transpose_nchw", "schedule_conv_nd",
           "schedule_conv1d_ncw", "schedule_group_conv1d_ncw", "schedule_conv3d_ncdhw",
           "schedule_conv1d_transpose_ncw", "schedule_group_conv2d_transpose_nchw",
           "schedule_conv3d_transpose_ncdhw", "anchor"]


# --- schedules for the topi.nn computes ---------------------------------------------------------

def _outputs(outs: Any) -> list[Tensor]:
    from ...te import Tensor as _T

    outs = [outs] if isinstance(outs, _T) else list(outs)
    if not outs:
        raise ValueError("schedule: outs is empty; pass the output tensor(s) of the operator")
    return outs


def _schedule_pad(s: Schedule, t: Tensor) -> None:
    """A padding stage at root: parallel over its outer axes, inner axis vectorized."""
    if t.op not in s or "pad" not in t.op.tag:
        return
    axes = s[t].op.axis
    outer = s[t].fuse(*axes[:2]) if len(axes) > 2 else axes[0]
    s[t].parallel(outer)
    vectorize_inner(s, t)


def vectorize_inner(s: Schedule, t: Tensor, lanes: int = 16) -> None:
    """Vectorize the innermost axis of stage ``t`` by ``lanes`` (padding conditions become lane
    masks; masked-off lanes do not load)."""
    inner = s[t].op.axis[-1]
    ext = int(t.shape[-1].value) if hasattr(t.shape[-1], "value") else t.shape[-1]
    if not isinstance(ext, int) or ext < 2:
        return
    if ext <= lanes:
        s[t].vectorize(inner)
    else:
        _, vi = s[t].split(inner, factor=lanes)
        s[t].vectorize(vi)


SMALL_OC_ACCUMULATORS = 12
"""Accumulator vectors of :func:`schedule_conv_nchw_direct`'s tile for a convolution with fewer
output channels than its channel tile (an image head, 128 -> 3): up to 4 column vectors per
channel (where they divide the row), then output rows stacked up to this many."""


def schedule_conv_nchw_direct(s: Schedule, conv: Tensor, out: Tensor, oc_tile: int = 16,
                              ow_tile: int = 16) -> None:
    """Register tile ``oc_tile`` output channels x ``ow_tile`` output columns for an NCHW
    convolution stage ``conv`` (plain, grouped or transposed): each tile accumulates in
    ``oc_tile`` vectors (columns along the vector lanes, one broadcast filter value per
    channel), the reduction loops outside the tile; tasks over (batch, channel block, row)
    run in parallel. ``out`` is the final output (``conv`` itself or an injective consumer)."""
    for t in conv.op.input_tensors:
        _schedule_pad(s, t)
    ow = int(conv.shape[3].value) if hasattr(conv.shape[3], "value") else int(conv.shape[3])
    oc = int(conv.shape[1].value) if hasattr(conv.shape[1], "value") else int(conv.shape[1])
    # 16-lane tiles (the tail a smaller vector): wider or odd-width vectors code badly; fewer
    # channels than the tile: up to 4 column vectors per channel (enough accumulators), where
    # they divide the row
    cols = 1
    if oc < oc_tile:
        cols = max([k for k in range(1, min(4, ow_tile // oc) + 1) if ow % (ow_tile * k) == 0],
                   default=1)
    oh = int(conv.shape[2].value) if hasattr(conv.shape[2], "value") else int(conv.shape[2])
    rows = 1
    if oc < oc_tile:  # and rows stacked up to SMALL_OC_ACCUMULATORS
        rows = max(r for r in range(1, max(1, SMALL_OC_ACCUMULATORS // (oc * cols)) + 1)
                   if oh % r == 0)
    ow_tile, oc_tile = min(ow_tile * cols, ow), min(oc_tile, oc)
    if conv.op is out.op:
        CC = s.cache_write(conv, "local")
    else:
        s[conv].set_scope("local")
        CC = conv
    n, f, y, x = s[out].op.axis
    fo, fi = s[out].split(f, factor=oc_tile)
    xo, xi = s[out].split(x, factor=ow_tile)
    if rows > 1:
        y, yi = s[out].split(y, factor=rows)
        s[out].reorder(n, fo, y, xo, yi, fi, xi)
    else:
        s[out].reorder(n, fo, y, xo, fi, xi)
    if cols > 1:  # the tile's columns as whole vectors
        xi_o, xi = s[out].split(xi, nparts=cols)
        s[out].unroll(xi_o)
    s[out].vectorize(xi)
    task = s[out].fuse(n, fo, y)
    s[out].parallel(task)
    s[CC].compute_at(s[out], xo)
    cn, cf, cy, cx = s[CC].op.axis
    if cols > 1 or rows > 1:
        cxo, cx = s[CC].split(cx, nparts=cols)
        s[CC].reorder(cn, *s[CC].op.reduce_axis, cy, cf, cxo, cx)
        s[CC].unroll(cxo)
        s[CC].unroll(cy)
    else:
        s[CC].reorder(cn, cy, *s[CC].op.reduce_axis, cf, cx)
    s[CC].unroll(cf)
    s[CC].vectorize(cx)


def anchor(main: Tensor, out: Tensor) -> Tensor:
    """The stage a complex op's loop nest is built on: the fused output ``out`` when it has the
    op's shape (its elementwise epilogue then runs on the register tile), else the op itself
    (e.g. a reshape follows; the op is computed whole first)."""
    def dims(t: Tensor) -> list[str]:
        return [str(d) for d in t.shape]
    return out if dims(out) == dims(main) else main


def _find(outs: list[Tensor], tag: str) -> tuple[Schedule, Tensor | None]:
    from ..nn.utils import traverse_inline

    s = create_schedule([o.op for o in outs])
    found: list[Tensor] = []

    def cb(op: Any) -> None:
        if op.tag == tag and not found:
            found.append(op.output(0))

    traverse_inline(s, outs[0].op, cb)
    return s, (found[0] if found else None)


def schedule_conv2d_nchw(outs: Any) -> Schedule:
    """x86 schedule of ``topi.nn.conv2d_nchw`` (and of injective ops fused after it)."""
    outs = _outputs(outs)
    s, conv = _find(outs, "conv2d_nchw")
    if conv is None:
        raise ValueError("schedule_conv2d_nchw: no conv2d_nchw stage among the outputs' inputs")
    schedule_conv_nchw_direct(s, conv, anchor(conv, outs[0]))
    return s


def schedule_group_conv2d_nchw(outs: Any) -> Schedule:
    """x86 schedule of ``topi.nn.group_conv2d_nchw``."""
    outs = _outputs(outs)
    s, conv = _find(outs, "group_conv2d_nchw")
    if conv is None:
        raise ValueError("schedule_group_conv2d_nchw: no group_conv2d_nchw stage found")
    schedule_conv_nchw_direct(s, conv, anchor(conv, outs[0]))
    return s


def schedule_depthwise_conv2d_nchw(outs: Any) -> Schedule:
    """x86 schedule of ``topi.nn.depthwise_conv2d_nchw``: a tile of 4 channels x a vector of
    output columns accumulating over the window, parallel over (batch, channel block, row)."""
    outs = _outputs(outs)
    s, conv = _find(outs, "depthwise_conv2d_nchw")
    if conv is None:
        raise ValueError("schedule_depthwise_conv2d_nchw: no depthwise_conv2d_nchw stage found")
    schedule_conv_nchw_direct(s, conv, anchor(conv, outs[0]), oc_tile=4)
    return s


def schedule_conv2d_transpose_nchw(outs: Any) -> Schedule:
    """x86 schedule of ``topi.nn.conv2d_transpose_nchw`` (the dilated+padded input is one
    parallel stage, then the direct NCHW register-tiled convolution)."""
    outs = _outputs(outs)
    s, conv = _find(outs, "conv2d_transpose_nchw")
    if conv is None:
        raise ValueError("schedule_conv2d_transpose_nchw: no conv2d_transpose_nchw stage found")
    schedule_conv_nchw_direct(s, conv, anchor(conv, outs[0]))
    return s


def schedule_conv_nd(outs: Any, oc_tile: int = 16, ow_tile: int = 16) -> Schedule:
    """x86 schedule of the N-d convolutions of ``topi.nn.conv_nd`` (1-D, 3-D, transposed,
    grouped): the NCHW register tile generalized, ``oc_tile`` channels x ``ow_tile`` columns of
    the last spatial axis, parallel over (batch, channel block, other spatial axes)."""
    outs = _outputs(outs)
    s, conv = _find(outs, "conv_nd")
    if conv is None:
        raise ValueError("schedule_conv_nd: no conv_nd stage among the outputs' inputs")
    out = anchor(conv, outs[0])
    for t in conv.op.input_tensors:
        _schedule_pad(s, t)
    ow = int(conv.shape[-1])
    oc = int(conv.shape[1])
    ow_tile, oc_tile = min(ow_tile, ow), min(oc_tile, oc)
    if conv.op is out.op:
        CC = s.cache_write(conv, "local")
    else:
        s[conv].set_scope("local")
        CC = conv
    n, f, *sp, x = s[out].op.axis
    fo, fi = s[out].split(f, factor=oc_tile)
    xo, xi = s[out].split(x, factor=ow_tile)
    s[out].reorder(n, fo, *sp, xo, fi, xi)
    s[out].vectorize(xi)
    task = s[out].fuse(n, fo, *sp)
    s[out].parallel(task)
    s[CC].compute_at(s[out], xo)
    cn, cf, *csp, cx = s[CC].op.axis
    s[CC].reorder(cn, *csp, *s[CC].op.reduce_axis, cf, cx)
    s[CC].unroll(cf)
    s[CC].vectorize(cx)
    return s


schedule_conv1d_ncw = schedule_conv_nd
schedule_group_conv1d_ncw = schedule_conv_nd
schedule_conv3d_ncdhw = schedule_conv_nd
schedule_conv1d_transpose_ncw = schedule_conv_nd
schedule_group_conv2d_transpose_nchw = schedule_conv_nd
schedule_conv3d_transpose_ncdhw = schedule_conv_nd

