"""x86 int8 NCHWc convolution: uint8 data x int8 kernel -> int32 on the 16x4 dot micro-kernel
(``int8_intrin.py``: AVX-512 VNNI ``vpdpbusd`` and its fallbacks) through tensorize.

Layouts: data ``NCHW{ic_bn}c`` (``ic_bn`` a multiple of 4), kernel
``OIHW{ic_bn/4}i16o4i``, i.e. ``[OC/16, IC/ic_bn, KH, KW, ic_bn/4, 16, 4]`` (``W[o, i, y, x]``
at ``[o // 16, i // ic_bn, y, x, (i % ic_bn) // 4, o % 16, i % 4]``: one 64-byte row holds the
4 input channels x 16 output channels of one ``vpdpbusd``), output ``NCHW16c`` int32.
AlterOpLayout packs a constant OIHW kernel at compile time (:func:`pack_kernel_int8_np`;
``relay/op/strategy/x86_int8.py``), zero-padding the channel counts.

The register tile is ``tile_ow`` output columns x ``tile_oc`` blocks of 16 channels of int32
accumulators, over the whole reduction (input chunks, window, 4-channel groups), the fused
epilogue (requantize, bias, relu) written from it. The accumulation is computed for the output
width rounded up to whole tiles (the input padded on the right to match) and cropped, so every
tile is full (tensorize needs that).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import autotvm, te
from ...te import Tensor
from ...tir import expr as E
from .dense_int8 import _ints, check_int8_dtypes, use_tensorize
from .int8_intrin import K_GROUP, LANES, dot_16x4_intrin, int8_isa

__all__ = ["pack_kernel_int8_np", "conv2d_NCHWc_int8", "schedule_conv2d_NCHWc_int8",
           "int8_ic_block", "kernel_layout_int8"]


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def int8_ic_block(ic: int) -> tuple[int, int]:
    """``(ic_bn, padded IC)``: the input channels rounded up to a multiple of 4 and the largest
    block of 16, 12, 8 or 4 channels dividing that."""
    icp = _ceil(ic, K_GROUP) * K_GROUP
    return next(b for b in (16, 12, 8, 4) if icp % b == 0), icp


def kernel_layout_int8(ic_bn: int) -> str:
    return f"OIHW{ic_bn // K_GROUP}i{LANES}o{K_GROUP}i"


def pack_kernel_int8_np(w: np.ndarray, ic_bn: int) -> np.ndarray:
    """OIHW int8 -> ``[ceil(OC/16), ICp/ic_bn, KH, KW, ic_bn/4, 16, 4]``, zero-padded (ICp: IC
    rounded up to ``ic_bn``)."""
    if w.ndim != 4 or ic_bn % K_GROUP:
        raise ValueError(f"pack_kernel_int8_np: needs an OIHW kernel and a block multiple of 4, "
                         f"got {w.shape}, {ic_bn}")
    oc, ic, kh, kw = w.shape
    ocp, icp = _ceil(oc, LANES) * LANES, _ceil(ic, ic_bn) * ic_bn
    full = np.zeros((ocp, icp, kh, kw), w.dtype)
    full[:oc, :ic] = w
    r = full.reshape(ocp // LANES, LANES, icp // ic_bn, ic_bn // K_GROUP, K_GROUP, kh, kw)
    return np.ascontiguousarray(r.transpose(0, 2, 5, 6, 3, 1, 4))


def _default_tiles(ow: int, oc_chunks: int, isa: str) -> tuple[int, int]:
    """``(tile_ow, tile_oc)``: up to 16 accumulators with VNNI (of 32 zmm registers: LLVM
    interleaves the unrolled 4-channel steps, so 28 spilled: 890 GOPS vs 2000 at 8x2 on
    64x56x56 3x3), fewer for the fallbacks (their products need temporaries; AVX2 has 16
    ymm)."""
    most = {"vnni": 16, "avx512bw": 12}.get(isa, 8)
    tile_oc = 2 if oc_chunks % 2 == 0 and isa == "vnni" else 1
    cap = max(1, most // tile_oc)
    if ow <= cap:
        return ow, tile_oc
    for r in range(cap, cap // 2 - 1, -1):
        if ow % r == 0:
            return r, tile_oc
    return _ceil(ow, _ceil(ow, cap)), tile_oc


def _define_space(cfg: Any, ow: int, oc_chunks: int, kw: int, isa: str) -> tuple[int, int]:
    d_ow, d_oc = _default_tiles(ow, oc_chunks, isa)
    cfg.define_knob("tile_ow", [d_ow] + [r for r in range(1, min(ow, 28) + 1) if r != d_ow])
    cfg.define_knob("tile_oc", [d_oc] + [c for c in (1, 2, 4) if oc_chunks % c == 0 and c != d_oc])
    cfg.define_knob("unroll_kw", [False, True] if kw > 1 else [False])
    if cfg.is_fallback:
        from ...autotvm.space import OtherOptionEntity

        cfg["tile_ow"] = OtherOptionEntity(d_ow)
        cfg["tile_oc"] = OtherOptionEntity(d_oc)
        cfg["unroll_kw"] = OtherOptionEntity(False)
    return int(cfg["tile_ow"].val), int(cfg["tile_oc"].val)


def window_geometry(op: str, hw: tuple[int, int], khw: tuple[int, int], strides: Any,
                    padding: Any, dilation: Any, pad_value: Any) -> tuple[
                        int, tuple[int, int], tuple[int, int], tuple[int, int, int, int],
                        tuple[int, int]]:
    """The checked window arithmetic of the int8 convolutions: (pad_value, strides, dilation,
    (top, left, bottom, right) padding, (OH, OW)); a pad value outside uint8 or an empty output
    raises naming ``op``."""
    pad_value = int(pad_value)
    if not 0 <= pad_value <= 255:
        raise ValueError(f"{op}: pad_value {pad_value} is not a uint8")
    (h, w), (kh, kw) = hw, khw
    sh, sw = _pair(strides)
    dh, dw = _pair(dilation)
    pt, pl, pb, pr = _pad4(padding)
    oh = (h + pt + pb - (kh - 1) * dh - 1) // sh + 1
    ow = (w + pl + pr - (kw - 1) * dw - 1) // sw + 1
    if oh <= 0 or ow <= 0:
        raise ValueError(f"{op}: empty output {oh}x{ow} for input {h}x{w}, window {kh}x{kw}")
    return pad_value, (sh, sw), (dh, dw), (pt, pl, pb, pr), (oh, ow)


def _pair(v: Any) -> tuple[int, int]:
    v = tuple(int(getattr(x, "value", x)) for x in (v if isinstance(v, (list, tuple)) else (v, v)))
    return (v[0], v[0]) if len(v) == 1 else (v[0], v[1])


def _pad4(p: Any) -> tuple[int, int, int, int]:
    p = tuple(int(getattr(x, "value", x)) for x in (p if isinstance(p, (list, tuple)) else (p,)))
    if len(p) == 1:
        return p[0], p[0], p[0], p[0]
    if len(p) == 2:
        return p[0], p[1], p[0], p[1]
    return p[0], p[1], p[2], p[3]


@autotvm.register_topi_compute("conv2d_NCHWc_int8.x86")
def conv2d_NCHWc_int8(cfg: Any, data: Tensor, kernel: Tensor, strides: Any, padding: Any,
                      dilation: Any, layout: str = "", out_layout: str = "",
                      out_dtype: str = "int32", pad_value: int = 0) -> Tensor:
    """int8 ``conv2d_NCHWc``: data ``[N, IC/ic_bn, H, W, ic_bn]`` uint8, kernel ``[OC/16,
    IC/ic_bn, KH, KW, ic_bn/4, 16, 4]`` int8 -> ``[N, OC/16, OH, OW, 16]`` int32; the spatial
    padding holds ``pad_value`` (0..255, the data's zero point; the extra right columns that
    round the width up to whole tiles hold it too and are cropped)."""
    from ...target import Target

    check_int8_dtypes("conv2d_NCHWc_int8", data, kernel, out_dtype)
    if len(data.shape) != 5 or len(kernel.shape) != 7:
        raise ValueError(f"conv2d_NCHWc_int8: needs 5-D data and a 7-D kernel, got "
                         f"{tuple(data.shape)} and {tuple(kernel.shape)}")
    n, icc, h, w, icb = _ints(data.shape, "conv2d_NCHWc_int8")
    occ, icc2, kh, kw, icf, ob, ics = _ints(kernel.shape, "conv2d_NCHWc_int8")
    if icc2 != icc or icf * ics != icb or (ob, ics) != (LANES, K_GROUP):
        raise ValueError(f"conv2d_NCHWc_int8: data {(n, icc, h, w, icb)} and kernel "
                         f"{(occ, icc2, kh, kw, icf, ob, ics)} do not match "
                         f"(kernel layout {kernel_layout_int8(icb)})")
    pad_value, (sh, sw), (dh, dw), (pt, pl, pb, pr), (oh, ow) = window_geometry(
        "conv2d_NCHWc_int8", (h, w), (kh, kw), strides, padding, dilation, pad_value)
    tile_ow, _ = _define_space(cfg, ow, occ, kw, int8_isa(Target.current()))
    owp = _ceil(ow, tile_ow) * tile_ow
    # the right padding covers the padded output width's windows
    pr2 = max(pr, (owp - 1) * sw + (kw - 1) * dw + 1 - w - pl)
    if pt or pb or pl or pr2:
        hp, wp = h + pt + pb, w + pl + pr2

        def pad(b: Any, c: Any, y: Any, x: Any, ci: Any) -> Any:
            ok = te.all(y >= pt, y < pt + h, x >= pl, x < pl + w)
            return te.if_then_else(ok, data[b, c, y - pt, x - pl, ci],
                                   E.const(pad_value, "uint8"))

        dp = te.compute((n, icc, hp, wp, icb), pad, name="data_int8_pad", tag="int8_pad")
    else:
        dp = data
    ic = te.reduce_axis((0, icc), name="ic")
    ry = te.reduce_axis((0, kh), name="ry")
    rx = te.reduce_axis((0, kw), name="rx")
    rf = te.reduce_axis((0, icf), name="icf")
    rs = te.reduce_axis((0, K_GROUP), name="ics")
    acc = te.compute(
        (n, occ, oh, owp, LANES),
        lambda b, oc, y, x, o: te.sum(
            dp[b, ic, y * sh + ry * dh, x * sw + rx * dw, rf * K_GROUP + rs].astype("int32")
            * kernel[oc, ic, ry, rx, rf, o, rs].astype("int32"), axis=[ic, ry, rx, rf, rs]),
        name="conv2d_NCHWc_int8_acc", tag="conv2d_NCHWc_int8_acc")
    cfg.add_flop(2 * n * occ * LANES * oh * ow * icc * icb * kh * kw)
    return te.compute((n, occ, oh, ow, LANES), lambda b, oc, y, x, o: acc[b, oc, y, x, o],
                      name="conv2d_NCHWc_int8", tag="conv2d_NCHWc_int8")


def schedule_nchwc_int8(s: Any, acc: Tensor, crop: Tensor, out: Tensor, tile_ow: int,
                        tile_oc: int, unroll_kw: bool) -> None:
    """The register tile (see the module docstring); parallel over (batch, channel-block
    groups, output rows); a padded input is one parallel stage first."""
    from ...target import Target

    target = Target.current()
    for t in acc.op.input_tensors:
        if t.op in s and t.op.tag == "int8_pad":
            ax = s[t].op.axis
            s[t].parallel(s[t].fuse(ax[0], ax[1], ax[2]))
            s[t].vectorize(ax[4])
    if out is not crop:
        s[crop].compute_inline()
    s[acc].set_scope("local")
    n, oc, y, x, o = s[out].op.axis
    oco, oci = s[out].split(oc, factor=tile_oc)
    xo, xi = s[out].split(x, factor=tile_ow)
    s[out].reorder(n, oco, y, xo, oci, xi, o)
    s[out].vectorize(o)
    s[out].parallel(s[out].fuse(n, oco, y))
    s[acc].compute_at(s[out], xo)
    _, aoc, _, ax_, ao = s[acc].op.axis
    ic, ry, rx, rf, rs = s[acc].op.reduce_axis
    s[acc].reorder(ic, ry, rx, rf, aoc, ax_, ao, rs)
    s[acc].unroll(aoc)
    s[acc].unroll(ax_)
    if unroll_kw:
        s[acc].unroll(rx)
    if use_tensorize(target):
        s[acc].tensorize(ao, dot_16x4_intrin(int8_isa(target)))
    else:
        s[acc].unroll(rs)
        s[acc].vectorize(ao)


@autotvm.register_topi_schedule("conv2d_NCHWc_int8.x86")
def schedule_conv2d_NCHWc_int8(cfg: Any, outs: Any) -> Any:
    """The int8 NCHWc schedule (with the elementwise ops fused after the convolution)."""
    from .dense_int8 import _find

    s, acc, crop, out = _find(outs, "conv2d_NCHWc_int8")
    occ, _, owp = _ints(acc.shape, "conv2d_NCHWc_int8")[1:4]
    tile_ow, tile_oc = int(cfg["tile_ow"].val), int(cfg["tile_oc"].val)
    if owp % tile_ow:  # (the compute padded the width to its own config's tile)
        tile_ow = 1
    if occ % tile_oc:
        tile_oc = 1
    schedule_nchwc_int8(s, acc, crop, out, tile_ow, tile_oc, bool(cfg["unroll_kw"].val))
    return s


def conv2d_nchw_int8(data: Tensor, kernel: Tensor, strides: Any, padding: Any,
                     dilation: Any) -> Tensor:
    """int8 ``conv2d`` in NCHW / OIHW (uint8 x int8 -> int32) when the layouts were not altered
    at compile time: the data and kernel are packed (channels zero-padded) inside the kernel,
    then :func:`conv2d_NCHWc_int8`, then back to NCHW."""
    check_int8_dtypes("conv2d_nchw_int8", data, kernel, "int32")
    n, ic, h, w = _ints(data.shape, "conv2d_nchw_int8")
    oc, ic2, kh, kw = _ints(kernel.shape, "conv2d_nchw_int8")
    if ic2 != ic:
        raise ValueError(f"conv2d_nchw_int8: data has {ic} channels, kernel {(oc, ic2, kh, kw)} "
                         "expects {ic2} (groups are not supported here)")
    icb, icp = int8_ic_block(ic)
    occ = _ceil(oc, LANES)

    def pack_data(b: Any, c: Any, y: Any, x: Any, ci: Any) -> Any:
        ch = c * icb + ci
        v = data[b, ch, y, x]
        return v if icp == ic else te.if_then_else(ch < ic, v, E.const(0, "uint8"))

    def pack_kernel(o: Any, c: Any, y: Any, x: Any, f: Any, ol: Any, il: Any) -> Any:
        oo, ii = o * LANES + ol, c * icb + f * K_GROUP + il
        v = kernel[oo, ii, y, x]
        if occ * LANES == oc and icp == ic:
            return v
        return te.if_then_else(te.all(oo < oc, ii < ic), v, E.const(0, "int8"))

    dpk = te.compute((n, icp // icb, h, w, icb), pack_data, name="data_int8_nchwc",
                     tag="int8_pack")
    kpk = te.compute((occ, icp // icb, kh, kw, icb // K_GROUP, LANES, K_GROUP), pack_kernel,
                     name="kernel_int8_packed", tag="int8_pack")
    out = conv2d_NCHWc_int8(dpk, kpk, strides, padding, dilation, f"NCHW{icb}c", "NCHW16c",
                            "int32")
    _, _, oh, ow, _ = _ints(out.shape, "conv2d_nchw_int8")
    return te.compute((n, oc, oh, ow), lambda b, o, y, x: out[b, o // LANES, y, x, o % LANES],
                      name="conv2d_nchw_int8", tag="injective,int8_unpack")


def schedule_conv2d_nchw_int8(outs: Any) -> Any:
    """:func:`conv2d_nchw_int8`'s schedule: the packing stages parallel at root, the NCHWc
    convolution's own schedule, the NCHW result (and the epilogue fused into it) parallel
    over rows and vectorized along them."""
    from .injective import schedule_injective_from_existing

    s = schedule_conv2d_NCHWc_int8(outs)
    seen: set[int] = set()
    stack = [t.op for t in (outs if isinstance(outs, (list, tuple)) else [outs])]
    while stack:
        op = stack.pop()
        if id(op) in seen or not hasattr(op, "input_tensors"):
            continue
        seen.add(id(op))
        if op.tag == "int8_pack" and op in s:
            ax = s[op].op.axis
            s[op].parallel(s[op].fuse(ax[0], ax[1]))
        stack.extend(t.op for t in op.input_tensors)
    for o in (outs if isinstance(outs, (list, tuple)) else [outs]):
        if len(o.shape) == 4:
            schedule_injective_from_existing(s, o)
    return s
