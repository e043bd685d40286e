"""x86 convolution schedules.

``schedule_conv2d_nchw`` & co. (for the ``topi.nn`` computes: NCHW, grouped, depthwise,
transposed, N-d): each register tile holds ``oc_tile`` output channels x 16 output columns
(the columns along the vector lanes, one broadcast weight per channel), the reductions outside
the tile, tasks over (batch, channel block, row) in parallel; padding is one parallel,
vectorized stage. ``schedule_conv2d_NCHWc`` (what AlterOpLayout makes of every conv2d at
opt_level 3, depthwise included): the blocked layout, ``reg_n`` columns x one or two whole
channel blocks per tile, padding inlined for windows up to 3x3. Injective consumers (bias, relu,
residual add) run on the tile.

``conv2d_nchw_packed`` (below, the first hand-written example) is a self-contained
NCHW-in/NCHW-out conv (batch 1): the kernel is pre-packed (at compile time, as graph-level
layout transformation would do) into
``[OC/ocb, IC, KH, KW, ocb]`` so that one vector of ``ocb`` output channels is contiguous.
The convolution runs in a blocked ``[OC/ocb, OH, OW, ocb]`` layout: each tile of ``reg_n`` output
columns x ``ocb`` channels accumulates in vector registers (reg_n * ocb/16 zmm registers), fed by
broadcasts of input pixels; a final vectorized stage writes NCHW.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ...te import compute, create_schedule, placeholder, reduce_axis
from ...te import sum as te_sum
from ...tir import all as tir_all
from ...tir.op import if_then_else

if TYPE_CHECKING:
    from ...te import Tensor
    from ...te.schedule import Schedule

__all__ = ["conv2d_nchw_packed", "pack_kernel", "schedule_conv2d_nchw", "schedule_group_conv2d_nchw",
           "schedule_conv2d_NCHWc", "schedule_conv_nchw_direct",
           "schedule_depthwise_conv2d_nchw", "schedule_conv2d_transpose_nchw", "schedule_conv_nd",
           "schedule_conv1d_ncw", "schedule_group_conv1d_ncw", "schedule_conv3d_ncdhw",
           "schedule_conv1d_transpose_ncw", "schedule_group_conv2d_transpose_nchw",
           "schedule_conv3d_transpose_ncdhw", "anchor",
           "schedule_depthwise_conv2d_NCHWc", "default_ow_tile", "MAX_OW_TILE",
           "default_inline_pad", "PAD_COPY_MIN_PIXELS"]


def pack_kernel(w: np.ndarray, ocb: int) -> np.ndarray:
    """OIHW -> [O/ocb, I, H, W, ocb] (the layout the schedule reads)."""
    oc, ic, kh, kw = w.shape
    return np.ascontiguousarray(w.reshape(oc // ocb, ocb, ic, kh, kw).transpose(0, 2, 3, 4, 1))


def conv2d_nchw_packed(ic: int, h: int, w: int, oc: int, kh: int = 3, kw: int = 3, pad: int = 1,
                       ocb: int = 32, reg_n: int = 7, dtype: str = "float32"
                       ) -> tuple[Schedule, list[Tensor]]:
    """Return ``(schedule, [data, packed_kernel, out])`` for a stride-1 conv2d."""
    if oc % ocb:
        raise ValueError(f"conv2d_nchw_packed: oc={oc} must be a multiple of ocb={ocb}")
    oh, ow = h + 2 * pad - kh + 1, w + 2 * pad - kw + 1
    data = placeholder((1, ic, h, w), dtype, name="data")
    kernel = placeholder((oc // ocb, ic, kh, kw, ocb), dtype, name="kernel")
    padded = compute(
        (1, ic, h + 2 * pad, w + 2 * pad),
        lambda n, c, y, x: if_then_else(
            tir_all(y >= pad, y < h + pad, x >= pad, x < w + pad), data[n, c, y - pad, x - pad], 0.0),
        name="pad")
    rc = reduce_axis((0, ic), name="rc")
    ry = reduce_axis((0, kh), name="ry")
    rx = reduce_axis((0, kw), name="rx")
    conv = compute(
        (1, oc // ocb, oh, ow, ocb),
        lambda n, co, y, x, ci: te_sum(padded[n, rc, y + ry, x + rx] * kernel[co, rc, ry, rx, ci],
                                       axis=[rc, ry, rx]),
        name="conv")
    out = compute((1, oc, oh, ow), lambda n, c, y, x: conv[n, c // ocb, y, x, c % ocb], name="out")

    s = create_schedule(out.op)
    CC = s.cache_write(conv, "local")
    # padding: one parallel pass over the input
    pn, pc, py, px = s[padded].op.axis
    s[padded].parallel(pc)
    # the NCHW output is the root loop nest: one parallel task per (channel block, row) ...
    on, oc_, oy, ox = s[out].op.axis
    oco, oci = s[out].split(oc_, factor=ocb)
    s[out].reorder(oco, oy, oci, ox)
    s[out].vectorize(ox)
    task = s[out].fuse(oco, oy)
    s[out].parallel(task)
    # ... computing that row in the blocked layout [ow, ocb] first
    s[conv].compute_at(s[out], task)
    n, co, y, x, ci = s[conv].op.axis
    xo, xi = s[conv].split(x, factor=reg_n)
    s[conv].reorder(co, y, xo, xi, ci)
    s[conv].vectorize(ci)
    # ... one register tile of reg_n columns x ocb channels at a time
    s[CC].compute_at(s[conv], xo)
    _, _, _, cx, cci = s[CC].op.axis
    crc, cry, crx = s[CC].op.reduce_axis
    s[CC].reorder(crc, cry, crx, cx, cci)
    s[CC].unroll(cx)
    s[CC].vectorize(cci)
    return s, [data, kernel, out]


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
    # 16-lane tiles (the tail a smaller vector): wider or odd-width vectors code badly
    ow_tile = min(ow_tile, ow)
    oc_tile = min(oc_tile, oc)
    if conv.op is out.op:
        CC = s.cache_write(conv, "local")
    else:
        s[conv].set_scope("local")
        CC = conv
    n, f, y, x = s[out].op.axis
    fo, fi = s[out].split(f, factor=oc_tile)
    xo, xi = s[out].split(x, factor=ow_tile)
    s[out].reorder(n, fo, y, xo, fi, xi)
    s[out].vectorize(xi)
    task = s[out].fuse(n, fo, y)
    s[out].parallel(task)
    s[CC].compute_at(s[out], xo)
    cn, cf, cy, cx = s[CC].op.axis
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


def _nchwc_tile(oc_chunk: int, depthwise: bool) -> tuple[int, int]:
    """``(oc_tile, reg_n)``: chunks x output columns of the register tile (oc_tile * reg_n
    vector accumulators of one channel block each).

    Each reduction step loads ``oc_tile`` weight vectors and broadcasts ``reg_n`` input pixels
    for ``oc_tile * reg_n`` FMAs. One chunk x 8 columns is load-bound when the window columns
    do not overlap (stride 2: few broadcasts are shared between neighbouring columns); two
    chunks reuse every broadcast twice: 15-25% faster on every ResNet-18 3x3 layer, stride 1
    too (bench/ops.py; 2 x 14 spills, 4 x 7 is slower). An odd chunk count keeps one chunk (no
    guarded chunk tile). Depthwise convolutions have no broadcasts (the pixel vector is per
    channel): one chunk."""
    if depthwise or oc_chunk % 2:
        return 1, 8
    return 2, 8


MAX_OW_TILE = 9
"""Most output columns in a default register tile: 9 columns x 2 channel blocks (18 zmm
accumulators) still fit the registers; 11-13 columns spilled (ow 11: 6 columns 36 us, 11
columns 49; ow 12: 6 columns 43 us, 12 columns 147; 1 thread, 64 -> 64 channels)."""


def default_ow_tile(ow: int, want: int = 8) -> int:
    """The default register tile width for ``ow`` output columns: all of them when they fit a
    tile (``MAX_OW_TILE``), else the largest divisor of ``ow`` in ``[want // 2,
    MAX_OW_TILE]`` (no tail), else the tiles balanced: ``ceil(ow / ceil(ow / MAX_OW_TILE))``
    (one guarded tail a few columns short). A fixed 8 with a tail tile of 1-5 columns was
    10-30% slower on 9, 17 columns (1 thread, 64 -> 64 channels 3x3: ow 9: 9 columns 24.6 us,
    8 + tail 31.8; ow 17: 9 + 8 83 us, 8 + 8 + 1 95)."""
    if ow <= MAX_OW_TILE:
        return max(ow, 1)
    divs = [r for r in range(max(1, want // 2), MAX_OW_TILE + 1) if ow % r == 0]
    if divs:
        return max(divs)
    return -(-ow // -(-ow // MAX_OW_TILE))


def _divisor_tile(ext: int, want: int) -> int:
    """The largest tile <= ``want`` that divides ``ext`` when it is at least ``want // 2``
    (no guarded tail inside the register tile), else ``want`` (clipped to ``ext``)."""
    want = min(want, ext)
    for r in range(want, 0, -1):
        if ext % r == 0:
            return r if r >= want // 2 else want
    return want


PAD_COPY_MIN_PIXELS = 1024
"""Output pixels from which a stride-1 convolution of an input block of at most 3 channels
(an image read in place) pads a copy of its input rather than testing bounds per pixel (see
:func:`default_inline_pad`)."""


def default_inline_pad(conv: Tensor, depthwise: bool) -> bool:
    """Whether the default NCHWc schedule inlines the padding (a bounds test per broadcast
    pixel) into convolution ``conv`` rather than reading a padded copy: windows up to 3x3,
    except stride-1 plain convolutions with an input block of at most 3 channels (an RGB image
    read in place) and at least :data:`PAD_COPY_MIN_PIXELS` output pixels, whose few input
    channels leave the per-pixel tests unamortized. Whole runs of conv + bias + relu, same
    process, 11 x 100 (2026-11-26, inline / padded copy, us): 3x56x56 -> 24 59.7 / 32.4,
    3x56x56 -> 32 45.8 / 35.3, 3x112x112 -> 24 253 / 151; below the threshold a tie or the copy
    slightly slower (3x17x17 -> 24 4.6 / 4.7, 3x13x13 -> 24 3.8 / 4.0), and with stride 2 the
    copy loses (MobileNetV2's stem 3x224x224 -> 32: 159 / 170).
    Depthwise windows up to 5x5 with a stride inline it too: the copy is a pass over an input
    stride**2 times the output (conv + bias + SiLU, 1 thread, CPU time, 2026-11-29, copy /
    inline, us: 144 ch 56 -> 28 139 / 89, 240 ch 28 -> 14 57 / 37, 672 ch 14 -> 7 41 / 25);
    at stride 1 the copy wins (120 ch 28x28 114 / 142, 480 ch 14x14 85 / 95)."""
    kernel = conv.op.input_tensors[1]
    kh, kw = (int(d) for d in kernel.shape[2:4])
    src = conv.op.input_tensors[0]
    oh, ow = int(conv.shape[2]), int(conv.shape[3])
    stride1 = int(src.shape[-2 if len(src.shape) == 4 else -3]) - kh + 1 == oh \
        and int(src.shape[-1 if len(src.shape) == 4 else -2]) - kw + 1 == ow
    if kh * kw > 9:
        return depthwise and kh * kw <= 25 and not stride1
    if depthwise or len(kernel.shape) != 6:
        return True
    ic_bn = int(kernel.shape[4])
    return not (ic_bn <= 3 and stride1 and oh * ow >= PAD_COPY_MIN_PIXELS)


def schedule_conv2d_NCHWc(outs: Any, reg_n: int | None = None, oc_tile: int | None = None,
                          inline_pad: bool = True) -> Schedule:
    """x86 schedule of ``topi.nn.conv2d_NCHWc`` (and ``depthwise_conv2d_NCHWc``): a register
    tile of ``reg_n`` output columns x ``oc_tile`` channel blocks (``oc_bn`` lanes each), fed
    by broadcasts of input pixels; reduction order (input chunk, ky, kx, input lane) outside
    the tile; parallel over (batch, chunk group, row). Defaults: ``_nchwc_tile`` and
    ``default_ow_tile``. (The tunable
    AutoTVM template with the same defaults: ``conv2d_nchwc.py``.)"""
    s, conv, out, depthwise = find_nchwc(outs)
    kh, kw = (int(d) for d in conv.op.input_tensors[1].shape[2:4])
    oc_chunk, ow = int(conv.shape[1]), int(conv.shape[3])
    d_oc, d_reg = _nchwc_tile(oc_chunk, depthwise)
    oc_tile = d_oc if oc_tile is None else max(1, min(oc_tile, oc_chunk))
    reg_n = default_ow_tile(ow, d_reg) if reg_n is None else _divisor_tile(ow, reg_n)
    schedule_nchwc_tile(s, conv, out, oc_tile, reg_n,
                        inline_pad and default_inline_pad(conv, depthwise))
    return s


def find_nchwc(outs: Any) -> tuple[Schedule, Tensor, Tensor, bool]:
    """``(schedule, conv stage, anchor output, depthwise)`` of an NCHWc convolution's outputs."""
    outs = _outputs(outs)
    s, conv = _find(outs, "conv2d_NCHWc")
    depthwise = False
    if conv is None:
        s, conv = _find(outs, "depthwise_conv2d_NCHWc")
        depthwise = True
    if conv is None:
        raise ValueError("schedule_conv2d_NCHWc: no conv2d_NCHWc stage found")
    return s, conv, anchor(conv, outs[0]), depthwise


def schedule_nchwc_tile(s: Schedule, conv: Tensor, out: Tensor, oc_tile: int, reg_n: int,
                        inline_pad: bool, unroll_kw: bool = False, tile_oh: int = 1,
                        kernel_outer: bool = False) -> None:
    """The NCHWc loop nest: ``reg_n`` columns x ``oc_tile`` chunks per register tile (both
    used as given), padding inlined into the convolution when ``inline_pad``, the kernel-width
    reduction loop unrolled when ``unroll_kw``; ``tile_oh`` output rows per parallel task (the
    weights of a chunk group reused across them while in cache); ``kernel_outer`` puts the
    window loops (ky, kx) outside the input-chunk loop of the reduction (a plain convolution's
    order is (ic_chunk, ky, kx, ic_lane) otherwise)."""
    for t in conv.op.input_tensors:
        if inline_pad and t.op in s and "pad" in t.op.tag:
            # windows up to 3x3: a per-pixel condition (uniform over the block's lanes) costs
            # less than writing and re-reading a padded copy of the whole input (depthwise
            # 1.6-2.3x, 3x3 convs 10-25% faster); a 7x7 stem with 3 input lanes is 2x slower
            s[t].compute_inline()
        else:
            _schedule_pad(s, t)
    if conv.op is out.op:
        CC = s.cache_write(conv, "local")
    else:
        s[conv].set_scope("local")
        CC = conv
    n, oco, y, x, oci = s[out].op.axis
    coo, coi = s[out].split(oco, factor=oc_tile)
    xo, xi = s[out].split(x, factor=reg_n)
    if tile_oh > 1:
        yo, yi = s[out].split(y, factor=tile_oh)
        s[out].reorder(n, coo, yo, yi, xo, coi, xi, oci)
        task = s[out].fuse(n, coo, yo)
    else:
        s[out].reorder(n, coo, y, xo, coi, xi, oci)
        task = s[out].fuse(n, coo, y)
    s[out].vectorize(oci)
    s[out].parallel(task)
    s[CC].compute_at(s[out], xo)
    _, cco, _, cx, coci = s[CC].op.axis
    red = list(s[CC].op.reduce_axis)  # (ico, ry, rx, ici); depthwise (ry, rx)
    if kernel_outer and len(red) == 4:
        red = [red[1], red[2], red[0], red[3]]
    s[CC].reorder(*red, cco, cx, coci)
    if unroll_kw:
        red = s[CC].op.reduce_axis
        s[CC].unroll(red[2] if len(red) == 4 else red[1])
    if oc_tile > 1:
        s[CC].unroll(cco)
    s[CC].unroll(cx)
    s[CC].vectorize(coci)


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


schedule_depthwise_conv2d_NCHWc = schedule_conv2d_NCHWc
