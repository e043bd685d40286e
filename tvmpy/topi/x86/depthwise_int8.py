"""x86 int8 depthwise convolution in the channel-blocked layout: uint8 data ``NCHW{cb}c`` x int8
kernel ``OIHW1i{cb}o`` (``[C/cb, 1, KH, KW, 1, cb]``) -> int32 ``NCHW{cb}c``, the block the
int8 NCHWc convolutions around it use (``conv2d_int8.py``), so a quantized MobileNet stays
blocked through its depthwise layers.

Depthwise has no reduction over channels, so VNNI's 4-wide dot does not apply: each output
vector (the ``cb`` channels of one pixel) accumulates the window's products lane by lane. A
uint8 x int8 product lies in [-32640, 32385], so it is computed in int16 (``vpmullw`` on the
zero-/sign-extended bytes) and widened to int32 only for the sum (exact for any window).

The spatial padding holds ``pad_value`` (the data's zero point, so a padded pixel contributes
nothing in real value): QNN canonicalization's explicit ``nn.pad`` folds into the convolution
(``relay/op/strategy/x86_int8.py``). The padding is a select on each window read, not a
padding stage: on QDQ MobileNetV2 (224, graph executor profile, one process, noisy machine) the
depthwise layers took 0.61-0.65x the time of the (unchanged) NCHWc convolutions that way, vs
0.73-1.01x with a padded copy first (its own pass and parallel region per layer) and 0.76x with
the copy computed per output row. The register tile is ``tile_ow`` output pixels of one row
(``tile_ow`` int32 vectors), the window unrolled; the accumulation runs on the width rounded up
to whole tiles (the input padded on the right to match) and is cropped, so no tile has a tail.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import te
from ...te import Tensor
from ...tir import expr as E
from .conv2d_int8 import _pad4, _pair
from .dense_int8 import _find, _ints, check_int8_dtypes

__all__ = ["depthwise_conv2d_NCHWc_int8", "schedule_depthwise_conv2d_NCHWc_int8",
           "pack_depthwise_kernel_int8_np", "depthwise_kernel_layout_int8", "DW_TILE_OW"]

DW_TILE_OW = 8
"""Output pixels per register tile (8 int32 accumulators of up to 16 lanes)."""


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _width_tile(ow: int, most: int) -> int:
    """Output pixels per tile: the whole row when it fits, else a divisor of the width of at
    least half of ``most`` (14 and 28 wide rows: 7, no padded columns), else ``most``."""
    most = max(1, most)
    if ow <= most:
        return ow
    return next((t for t in range(most, (most + 1) // 2 - 1, -1) if ow % t == 0), most)


def depthwise_kernel_layout_int8(cb: int) -> str:
    return f"OIHW1i{cb}o"


def pack_depthwise_kernel_int8_np(w: np.ndarray, cb: int) -> np.ndarray:
    """OIHW ``[C, 1, KH, KW]`` -> ``[ceil(C/cb), 1, KH, KW, 1, cb]`` (zero filters added)."""
    if w.ndim != 4 or w.shape[1] != 1 or cb < 1:
        raise ValueError(f"pack_depthwise_kernel_int8_np: needs a [C, 1, KH, KW] kernel and a "
                         f"positive block, got {w.shape}, {cb}")
    c, _, kh, kw = w.shape
    cp = _ceil(c, cb) * cb
    full = np.zeros((cp, 1, kh, kw), w.dtype)
    full[:c] = w
    return np.ascontiguousarray(full.reshape(cp // cb, cb, 1, kh, kw, 1)
                                .transpose(0, 2, 3, 4, 5, 1))


def depthwise_conv2d_NCHWc_int8(data: Tensor, kernel: Tensor, strides: Any, padding: Any,
                                dilation: Any, pad_value: int = 0,
                                out_dtype: str = "int32", tile_ow: int = DW_TILE_OW) -> Tensor:
    """Data ``[N, C/cb, H, W, cb]`` uint8, kernel ``[C/cb, 1, KH, KW, 1, cb]`` int8 ->
    ``[N, C/cb, OH, OW, cb]`` int32; the padding holds ``pad_value`` (0..255)."""
    check_int8_dtypes("depthwise_conv2d_NCHWc_int8", data, kernel, out_dtype)
    if len(data.shape) != 5 or len(kernel.shape) != 6:
        raise ValueError(f"depthwise_conv2d_NCHWc_int8: needs 5-D data and a 6-D kernel, got "
                         f"{tuple(data.shape)} and {tuple(kernel.shape)}")
    n, cc, h, w, cb = _ints(data.shape, "depthwise_conv2d_NCHWc_int8")
    kc, one, kh, kw, one2, kb = _ints(kernel.shape, "depthwise_conv2d_NCHWc_int8")
    if (kc, one, one2, kb) != (cc, 1, 1, cb):
        raise ValueError(f"depthwise_conv2d_NCHWc_int8: data {(n, cc, h, w, cb)} and kernel "
                         f"{(kc, one, kh, kw, one2, kb)} do not match (kernel layout "
                         f"{depthwise_kernel_layout_int8(cb)})")
    pad_value = int(pad_value)
    if not 0 <= pad_value <= 255:
        raise ValueError(f"depthwise_conv2d_NCHWc_int8: pad_value {pad_value} is not a uint8")
    sh, sw = _pair(strides)
    dh, dw = _pair(dilation)
    pt, pl, pb, pr = _pad4(padding)
    oh = (h + pt + pb - (kh - 1) * dh - 1) // sh + 1
    ow = (w + pl + pr - (kw - 1) * dw - 1) // sw + 1
    if oh <= 0 or ow <= 0:
        raise ValueError(f"depthwise_conv2d_NCHWc_int8: empty output {oh}x{ow} for input "
                         f"{h}x{w}, window {kh}x{kw}")
    tile_ow = _width_tile(ow, int(tile_ow))
    owp = _ceil(ow, tile_ow) * tile_ow
    pr2 = max(pr, (owp - 1) * sw + (kw - 1) * dw + 1 - w - pl)
    fill = E.const(pad_value, "uint8")

    def read(b: Any, c: Any, y: Any, x: Any, i: Any) -> Any:
        """The padded input (no padding stage: its own pass and parallel region cost more than
        the per-pixel select; see the module docstring)."""
        if not (pt or pb or pl or pr2):
            return data[b, c, y, x, i]
        ok = te.all(y >= pt, y < pt + h, x >= pl, x < pl + w)
        return te.if_then_else(ok, data[b, c, y - pt, x - pl, i], fill)

    ry = te.reduce_axis((0, kh), name="ry")
    rx = te.reduce_axis((0, kw), name="rx")
    acc = te.compute(
        (n, cc, oh, owp, cb),
        lambda b, c, y, x, i: te.sum(
            (read(b, c, y * sh + ry * dh, x * sw + rx * dw, i).astype("int16")
             * kernel[c, 0, ry, rx, 0, i].astype("int16")).astype("int32"), axis=[ry, rx]),
        name="depthwise_conv2d_NCHWc_int8_acc", tag="depthwise_conv2d_NCHWc_int8_acc")
    return te.compute((n, cc, oh, ow, cb), lambda b, c, y, x, i: acc[b, c, y, x, i],
                      name="depthwise_conv2d_NCHWc_int8", tag="depthwise_conv2d_NCHWc_int8")


def schedule_depthwise_conv2d_NCHWc_int8(outs: Any) -> Any:
    """The register tile of the module docstring, the fused epilogue written from it; parallel
    over (batch, channel blocks, output rows)."""
    s, acc, crop, out = _find(outs, "depthwise_conv2d_NCHWc_int8")
    owp = _ints(acc.shape, "depthwise_conv2d_NCHWc_int8")[3]
    tile = next(t for t in range(min(DW_TILE_OW, owp), 0, -1) if owp % t == 0)
    if out is not crop:
        s[crop].compute_inline()
    s[acc].set_scope("local")
    n, c, y, x, i = s[out].op.axis
    xo, xi = s[out].split(x, factor=tile)
    s[out].reorder(n, c, y, xo, xi, i)
    s[out].vectorize(i)
    s[out].parallel(s[out].fuse(n, c, y))
    s[acc].compute_at(s[out], xo)
    _, _, _, ax_, ai = s[acc].op.axis
    ry, rx = s[acc].op.reduce_axis
    s[acc].reorder(ry, rx, ax_, ai)
    s[acc].unroll(ry)
    s[acc].unroll(rx)
    s[acc].unroll(ax_)
    s[acc].vectorize(ai)
    return s
