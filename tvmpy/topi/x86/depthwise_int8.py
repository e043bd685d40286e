"""x86 int8 depthwise convolution in the channel-blocked layout: uint8 data ``NCHW{cb}c`` x int8
kernel -> int32 ``NCHW{cb}c``, the block the int8 NCHWc convolutions around it use
(``conv2d_int8.py``), so a quantized MobileNet stays blocked through its depthwise layers. Two
paths, by the kernel's layout (AlterOpLayout picks, ``relay/op/strategy/x86_int8.py``):

* **VNNI** (kernel ``OIH16o4w`` = ``[C/16, KH, 16, 4]``; 16-channel blocks, windows at most 4
  wide, no width dilation, a VNNI target): depthwise has no reduction over channels, but a
  window row has one over its taps, and for any stride the 4 taps ``x*sw + 0..3`` of a row are
  4 consecutive pixels = 64 contiguous bytes of the padded input. One 512-bit load, a byte
  permutation to channel-major (one shufflevector; ``vpermb`` where LLVM has VBMI) and one ``vpdpbusd`` against the row's 4 weights
  per channel (the 4th tap of a 3-wide window weighs 0) replace 3 taps x (extend, multiply,
  widen, add). Measured (kernel alone, 2 threads, best of 5 x 20 calls, interleaved, MobileNetV2
  layers): 1.0-1.5x faster than the int16 path (32x112x112 21 vs 33 us, 144x56x56 45 vs 68).
  The padded input rows an output row reads are computed per output row (inside its parallel
  iteration: a separate padded copy cost up to 2x on the 96x112x112 stride-2 layer).
* **int16 products** (kernel ``OIHW1i{cb}o`` = ``[C/cb, 1, KH, KW, 1, cb]``; any block, window,
  dilation, ISA): each output vector accumulates the window's products lane by lane; a uint8 x
  int8 product lies in [-32640, 32385], so it is computed in int16 (``vpmullw`` on the
  zero-/sign-extended bytes) and widened to int32 only for the sum. The padding is a select on
  each window read, not a padding stage: on QDQ MobileNetV2 (224, graph executor profile) the
  depthwise layers took 0.61-0.65x the time of the (unchanged) NCHWc convolutions that way, vs
  0.73-1.01x with a padded copy first and 0.76x with the copy computed per output row.

The spatial padding holds ``pad_value`` (the data's zero point, so a padded pixel contributes
nothing in real value): QNN canonicalization's explicit ``nn.pad`` folds into the convolution.
The register tile is ``tile_ow`` output pixels of one row (``tile_ow`` int32 vectors), the
window unrolled; the accumulation runs on the width rounded up to whole tiles (the input padded
on the right to match) and is cropped, so no tile has a tail.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np

from ... import te, tir
from ...te import Tensor
from ...tir import expr as E
from .conv2d_int8 import _pair, window_geometry
from .dense_int8 import _find, _ints, check_int8_dtypes
from .int8_intrin import K_GROUP, LANES, _vload, _vstore

__all__ = ["depthwise_conv2d_NCHWc_int8", "schedule_depthwise_conv2d_NCHWc_int8",
           "pack_depthwise_kernel_int8_np", "depthwise_kernel_layout_int8", "DW_TILE_OW",
           "pack_depthwise_kernel_dot_np", "DOT_KERNEL_LAYOUT", "uses_dot"]

DOT_KERNEL_LAYOUT = f"OIH{LANES}o{K_GROUP}w"
"""The kernel of the VNNI depthwise path: ``[C/16, KH, 16, 4]`` (the row's taps, zero-padded to
4, innermost: one 64-byte row per window row feeds one ``vpdpbusd``)."""

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


def uses_dot(cb: int, kw: int, dilation_w: int, isa: str) -> bool:
    """Whether the VNNI path applies: 16-channel blocks, a window row of at most 4 taps, no
    dilation along the width, and ``vpdpbusd``."""
    return cb == LANES and kw <= K_GROUP and dilation_w == 1 and isa == "vnni"


def pack_depthwise_kernel_dot_np(w: np.ndarray) -> np.ndarray:
    """OIHW ``[C, 1, KH, KW]`` (KW <= 4) -> ``[ceil(C/16), KH, 16, 4]`` (zero filters and taps
    added)."""
    if w.ndim != 4 or w.shape[1] != 1 or w.shape[3] > K_GROUP:
        raise ValueError(f"pack_depthwise_kernel_dot_np: needs a [C, 1, KH, KW<=4] kernel, got "
                         f"{w.shape}")
    c, _, kh, kw = w.shape
    cp = _ceil(c, LANES) * LANES
    full = np.zeros((cp, kh, K_GROUP), w.dtype)
    full[:c, :, :kw] = w[:, 0]
    return np.ascontiguousarray(full.reshape(cp // LANES, LANES, kh, K_GROUP)
                                .transpose(0, 2, 1, 3))


@cache
def _dot_intrin() -> Any:
    """``out[i] += sum_{k<4} data[k, i] * w[i, k]`` (data uint8 ``[4 pixels, 16 channels]``
    contiguous, w int8 ``[16, 4]``, out int32x16): the 64 data bytes loaded at once, permuted
    channel-major (``vpermb``), one ``vpdpbusd``."""
    data = te.placeholder((K_GROUP, LANES), "uint8", name="data")
    weight = te.placeholder((LANES, K_GROUP), "int8", name="weight")
    k = te.reduce_axis((0, K_GROUP), name="k")
    out = te.compute((LANES,), lambda i: te.sum(
        data[k, i].astype("int32") * weight[i, k].astype("int32"), axis=k), name="out")
    bufs = {data: tir.decl_buffer(data.shape, "uint8", "data_buf", offset_factor=1),
            weight: tir.decl_buffer(weight.shape, "int8", "weight_buf", offset_factor=1),
            out: tir.decl_buffer(out.shape, "int32", "out_buf", offset_factor=1)}
    n = LANES * K_GROUP

    def fintrin(ins: list, outs: list) -> tuple:
        d, w = ins
        (o,) = outs
        zero = E.Broadcast(tir.const(0, "int32"), LANES)

        def acc(init: E.PrimExpr) -> Any:
            perm = E.Shuffle([_vload(d, [0, 0], n)],
                             [(j % K_GROUP) * LANES + j // K_GROUP for j in range(n)])
            a = tir.reinterpret(f"int32x{LANES}", perm)
            b = tir.reinterpret(f"int32x{LANES}", _vload(w, [0, 0], n))
            return _vstore(o, tir.call_llvm_pure_intrin(
                f"int32x{LANES}", "llvm.x86.avx512.vpdpbusd.512", init, a, b))

        return acc(zero), _vstore(o, zero), acc(_vload(o, [0], LANES))

    return te.decl_tensor_intrin(out.op, fintrin, name="dw_4x16_u8s8i32_vnni", binds=bufs)


def _dot_compute(data: Tensor, kernel: Tensor, sh: int, dh: int, pad: tuple[int, ...],
                 kw: int, pad_value: int, oh: int, ow: int, tile_ow: int) -> Tensor:
    """The VNNI path: ``acc[.., x, i] = sum_{ry, k<4} pad[.., y*sh + ry*dh, x*sw + k, i] *
    w[c, ry, i, k]`` (tap ``k >= kw`` has weight 0): the four taps of a window row are four
    consecutive pixels, 64 contiguous bytes of the padded input."""
    n, cc, h, w, cb = _ints(data.shape, "depthwise_conv2d_NCHWc_int8")
    kc, kh, kb, kg = _ints(kernel.shape, "depthwise_conv2d_NCHWc_int8")
    if (kc, kb, kg) != (cc, LANES, K_GROUP) or cb != LANES:
        raise ValueError(f"depthwise_conv2d_NCHWc_int8: data {(n, cc, h, w, cb)} and kernel "
                         f"{(kc, kh, kb, kg)} do not match (kernel layout {DOT_KERNEL_LAYOUT})")
    pt, pl, pb, sw = pad
    owp = _ceil(ow, tile_ow) * tile_ow
    wp = max(w + pl, (owp - 1) * sw + K_GROUP)
    fill = E.const(pad_value, "uint8")
    dp = te.compute((n, cc, h + pt + pb, wp, cb), lambda b, c, y, x, i: te.if_then_else(
        te.all(y >= pt, y < pt + h, x >= pl, x < pl + w), data[b, c, y - pt, x - pl, i], fill),
        name="data_dw_int8_pad", tag="int8_pad")
    ry = te.reduce_axis((0, kh), name="ry")
    rk = te.reduce_axis((0, K_GROUP), name="rk")
    acc = te.compute(
        (n, cc, oh, owp, cb),
        lambda b, c, y, x, i: te.sum(dp[b, c, y * sh + ry * dh, x * sw + rk, i].astype("int32")
                                     * kernel[c, ry, i, rk].astype("int32"), axis=[ry, rk]),
        name="depthwise_conv2d_NCHWc_int8_acc", tag="depthwise_conv2d_NCHWc_int8_acc")
    return te.compute((n, cc, oh, ow, cb), lambda b, c, y, x, i: acc[b, c, y, x, i],
                      name="depthwise_conv2d_NCHWc_int8", tag="depthwise_conv2d_NCHWc_int8")


def depthwise_conv2d_NCHWc_int8(data: Tensor, kernel: Tensor, strides: Any, padding: Any,
                                dilation: Any, pad_value: int = 0,
                                out_dtype: str = "int32", tile_ow: int = DW_TILE_OW,
                                kernel_size: Any = None) -> Tensor:
    """Data ``[N, C/cb, H, W, cb]`` uint8, kernel ``[C/cb, 1, KH, KW, 1, cb]`` int8 ->
    ``[N, C/cb, OH, OW, cb]`` int32; the padding holds ``pad_value`` (0..255). A 4-D kernel
    ``[C/16, KH, 16, 4]`` (:data:`DOT_KERNEL_LAYOUT`; ``kernel_size`` gives KH, KW) selects the
    VNNI path (see :func:`uses_dot`)."""
    check_int8_dtypes("depthwise_conv2d_NCHWc_int8", data, kernel, out_dtype)
    if len(data.shape) == 5 and len(kernel.shape) == 4:
        return _dot_entry(data, kernel, strides, padding, dilation, pad_value, kernel_size,
                          tile_ow)
    if len(data.shape) != 5 or len(kernel.shape) != 6:
        raise ValueError(f"depthwise_conv2d_NCHWc_int8: needs 5-D data and a 6-D kernel, got "
                         f"{tuple(data.shape)} and {tuple(kernel.shape)}")
    n, cc, h, w, cb = _ints(data.shape, "depthwise_conv2d_NCHWc_int8")
    kc, one, kh, kw, one2, kb = _ints(kernel.shape, "depthwise_conv2d_NCHWc_int8")
    if (kc, one, one2, kb) != (cc, 1, 1, cb):
        raise ValueError(f"depthwise_conv2d_NCHWc_int8: data {(n, cc, h, w, cb)} and kernel "
                         f"{(kc, one, kh, kw, one2, kb)} do not match (kernel layout "
                         f"{depthwise_kernel_layout_int8(cb)})")
    pad_value, (sh, sw), (dh, dw), (pt, pl, pb, pr), (oh, ow) = window_geometry(
        "depthwise_conv2d_NCHWc_int8", (h, w), (kh, kw), strides, padding, dilation, pad_value)
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


def _dot_entry(data: Tensor, kernel: Tensor, strides: Any, padding: Any, dilation: Any,
               pad_value: int, kernel_size: Any, tile_ow: int) -> Tensor:
    n, cc, h, w, cb = _ints(data.shape, "depthwise_conv2d_NCHWc_int8")
    kh = _ints(kernel.shape, "depthwise_conv2d_NCHWc_int8")[1]
    if kernel_size is None:
        raise ValueError("depthwise_conv2d_NCHWc_int8: the 4-D (VNNI) kernel needs kernel_size")
    kh2, kw = _pair(kernel_size)
    sh, sw = _pair(strides)
    dh, dw = _pair(dilation)
    if kh2 != kh or not uses_dot(cb, kw, dw, "vnni"):
        raise ValueError(f"depthwise_conv2d_NCHWc_int8: the 4-D kernel needs 16-channel blocks, "
                         f"a window of at most 4 columns without width dilation, got block {cb}, "
                         f"window {(kh2, kw)} (kernel rows {kh}), dilation {(dh, dw)}")
    pad_value, _, _, (pt, pl, pb, _), (oh, ow) = window_geometry(
        "depthwise_conv2d_NCHWc_int8", (h, w), (kh, kw), (sh, sw), padding, (dh, dw), pad_value)
    return _dot_compute(data, kernel, sh, dh, (pt, pl, pb, sw), kw, pad_value, oh, ow,
                        _width_tile(ow, int(tile_ow)))


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
    row = s[out].fuse(n, c, y)
    s[out].parallel(row)
    s[acc].compute_at(s[out], xo)
    _, _, _, ax_, ai = s[acc].op.axis
    ry, rx = s[acc].op.reduce_axis
    pads = [t for t in acc.op.input_tensors if t.op in s and t.op.tag == "int8_pad"]
    if pads:  # the VNNI path: the padded rows each output row reads, then vpdpbusd per row
        s[pads[0]].compute_at(s[out], row)
        s[pads[0]].vectorize(s[pads[0]].op.axis[4])
        s[acc].reorder(ry, ax_, ai, rx)
        s[acc].unroll(ry)
        s[acc].unroll(ax_)
        s[acc].tensorize(ai, _dot_intrin())
        return s
    s[acc].reorder(ry, rx, ax_, ai)
    s[acc].unroll(ry)
    s[acc].unroll(rx)
    s[acc].unroll(ax_)
    s[acc].vectorize(ai)
    return s
