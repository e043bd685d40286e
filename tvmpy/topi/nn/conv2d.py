"""2-D convolution computes: NCHW (any stride, padding, dilation), grouped NCHW, and the
blocked NCHW{c} layout that the x86 schedule register-tiles (TVM's ``conv2d_NCHWc``).

All take ``stride``/``dilation`` as an int or a pair and ``padding`` as an int, a pair
``(h, w)``, a 4-tuple ``(top, left, bottom, right)`` or "SAME"/"VALID".
"""

from __future__ import annotations

from typing import Any

from ...te import Tensor, compute, reduce_axis
from ...te import sum as te_sum
from ..utils import get_const_tuple
from .pad import pad
from .utils import batch_const_shape, check_rank, get_pad_tuple, infer_out_dtype, pair

__all__ = ["conv2d", "conv2d_nchw", "group_conv2d_nchw", "conv2d_NCHWc", "conv_out_size",
           "conv2d_infer_layout"]


def conv_out_size(size: int, k: int, stride: int, dilation: int, pad_lo: int, pad_hi: int,
                  op: str, axis: str) -> int:
    """Output extent of a convolution/pooling window along one axis (error if < 1)."""
    dk = (k - 1) * dilation + 1
    out = (size + pad_lo + pad_hi - dk) // stride + 1
    if out < 1:
        raise ValueError(f"{op}: the (dilated) window {dk} is larger than the padded input "
                         f"{size + pad_lo + pad_hi} along {axis}")
    return out


PAD_LIKELY_W = "after"
"""Which of a convolution's width padding tests (axis 3: W of NCHW and NCHWc) are ``likely``
hints: "after" (the right edge's), "both" or "none". A hinted test lets LoopPartition split the
register tile of a schedule that inlines the padding (x86 NCHWc) into a guard-free main part
and edge copies. Without the hint LLVM peels a left edge's guarded first iteration (kernel
column 0) out of the tile itself, but keeps a right edge's guarded last column inside the one
tile loop (17 FMAs and stack spills in the loop instead of 32 FMAs): a 2x2 conv 64 -> 32 at
32x32 padded right took 271-295 us against 163-177 left, bottom or none, 256 -> 128 at 16x16
up to 1127 against 623-644 (1 thread, Zen 4; bench/pad_edge.py, bench/RESULTS.md
2026-11-30). "after" matches the left edge there; "both" measured the same as "after" (the
left edge's partition only repeats what LLVM does) and changes more kernels."""


def _prepare(op: str, data: Tensor, kernel_hw: tuple[int, int], stride: Any, padding: Any,
             dilation: Any) -> tuple[Tensor, tuple[int, int], tuple[int, int], tuple[int, int]]:
    """Pad ``data`` (NCHW or NCHWc: H, W are axes 2, 3) and return
    ``(padded, (sh, sw), (dh, dw), (OH, OW))``."""
    sh, sw = pair(stride, f"{op}: stride")
    dh, dw = pair(dilation, f"{op}: dilation")
    kh, kw = kernel_hw
    pt, pl, pb, pr = get_pad_tuple(padding, ((kh - 1) * dh + 1, (kw - 1) * dw + 1))
    h, w = get_const_tuple(data.shape[2:4], f"{op}: input spatial size", symbolic=False)
    oh = conv_out_size(h, kh, sh, dh, pt, pb, op, "height")
    ow = conv_out_size(w, kw, sw, dw, pl, pr, op, "width")
    if PAD_LIKELY_W not in ("none", "after", "both"):
        raise ValueError(f"topi.nn.conv2d.PAD_LIKELY_W must be 'none', 'after' or 'both', "
                         f"got {PAD_LIKELY_W!r}")
    if pt or pl or pb or pr:
        rest = [0] * (len(data.shape) - 4)
        data = pad(data, [0, 0, pt, pl, *rest], [0, 0, pb, pr, *rest], name="data_pad",
                   likely_before=(3,) if PAD_LIKELY_W == "both" else (),
                   likely_after=(3,) if PAD_LIKELY_W in ("both", "after") else ())
    return data, (sh, sw), (dh, dw), (oh, ow)


def _cast(x: Any, dtype: str) -> Any:
    return x if x.dtype == dtype else x.astype(dtype)


def conv2d_nchw(Input: Tensor, Filter: Tensor, stride: Any, padding: Any, dilation: Any = 1,
                out_dtype: str | None = None) -> Tensor:
    """``Input[N, C, H, W]`` * ``Filter[OC, C, KH, KW]`` -> ``[N, OC, OH, OW]`` (tag conv2d_nchw)."""
    return group_conv2d_nchw(Input, Filter, stride, padding, dilation, 1, out_dtype,
                             _op="conv2d_nchw")


def group_conv2d_nchw(Input: Tensor, Filter: Tensor, stride: Any, padding: Any, dilation: Any,
                      groups: int, out_dtype: str | None = None, _op: str = "group_conv2d_nchw"
                      ) -> Tensor:
    """Grouped convolution: ``Filter[OC, C/groups, KH, KW]``; output channel ``f`` of group
    ``f // (OC/groups)`` reads input channels ``g*C/groups ... (g+1)*C/groups - 1``."""
    check_rank(Input, 4, _op, "Input", "NCHW")
    check_rank(Filter, 4, _op, "Filter", "OIHW")
    n, c, _, _ = batch_const_shape(Input.shape, f"{_op}: Input shape")
    oc, icg, kh, kw = get_const_tuple(Filter.shape, f"{_op}: Filter shape", symbolic=False)
    if not isinstance(groups, int) or groups < 1:
        raise ValueError(f"{_op}: groups must be a positive int, got {groups!r}")
    if c % groups or oc % groups:
        raise ValueError(f"{_op}: input channels {c} and output channels {oc} must both be "
                         f"divisible by groups={groups}")
    if icg * groups != c:
        raise ValueError(f"{_op}: Filter expects {icg * groups} input channels ({icg} per group "
                         f"x {groups} groups), Input has {c}")
    out_dtype = infer_out_dtype(out_dtype, Input)
    data, (sh, sw), (dh, dw), (oh, ow) = _prepare(_op, Input, (kh, kw), stride, padding,
                                                  dilation)
    rc = reduce_axis((0, icg), name="rc")
    ry = reduce_axis((0, kh), name="ry")
    rx = reduce_axis((0, kw), name="rx")
    if groups == 1:
        def fcompute(b: Any, f: Any, y: Any, x: Any) -> Any:
            return te_sum(_cast(data[b, rc, y * sh + ry * dh, x * sw + rx * dw], out_dtype)
                          * _cast(Filter[f, rc, ry, rx], out_dtype), axis=[rc, ry, rx])
        tag = "conv2d_nchw"
    else:
        ocg = oc // groups

        def fcompute(b: Any, f: Any, y: Any, x: Any) -> Any:
            ch = (f // ocg) * icg + rc
            return te_sum(_cast(data[b, ch, y * sh + ry * dh, x * sw + rx * dw], out_dtype)
                          * _cast(Filter[f, rc, ry, rx], out_dtype), axis=[rc, ry, rx])
        tag = "group_conv2d_nchw"
    return compute((n, oc, oh, ow), fcompute, name=_op, tag=tag)


def conv2d_NCHWc(data: Tensor, kernel: Tensor, stride: Any, padding: Any, dilation: Any,
                 layout: str = "", out_layout: str = "", out_dtype: str | None = None,
                 groups: int = 1) -> Tensor:
    """Blocked convolution: ``data[N, C/ic_bn, H, W, ic_bn]`` and
    ``kernel[OC/oc_bn, C/groups/ic_bn, KH, KW, ic_bn, oc_bn]`` -> ``[N, OC/oc_bn, OH, OW, oc_bn]``.

    ``layout``/``out_layout`` ("NCHW8c", ...), when given, must agree with the block sizes.
    With ``layout="NCHW"`` the data is plain ``[N, C, H, W]`` and read in place (input channel
    ``ico * ic_bn + ici``): the input's layout transform is part of the convolution.

    ``groups > 1``: a grouped convolution whose blocks do not straddle groups (``oc_bn``
    divides the output channels of a group, ``ic_bn`` its input channels): output chunk
    ``oco`` belongs to group ``oco // (OC/groups/oc_bn)`` and reduces over that group's
    ``C/groups/ic_bn`` input chunks, the same register tile as ``groups=1`` (broadcast input
    lanes x weight vectors along the output block) with the input chunk offset by the group.
    """
    op = "conv2d_NCHWc"
    check_rank(kernel, 6, op, "kernel", "OIHWio")
    oc_chunk, kic_chunk, kh, kw, kic_bn, oc_bn = get_const_tuple(kernel.shape,
                                                                 f"{op}: kernel shape", symbolic=False)
    plain = layout == "NCHW"
    if plain:
        check_rank(data, 4, op, "data", "NCHW")
        n, channels, _, _ = batch_const_shape(data.shape, f"{op}: data shape")
        ic_bn = kic_bn
        if channels % ic_bn:
            raise ValueError(f"{op}: {channels} input channels do not split into the kernel's "
                             f"blocks of {ic_bn}")
        ic_chunk = channels // ic_bn
    else:
        check_rank(data, 5, op, "data", "NCHWc")
        n, ic_chunk, _, _, ic_bn = batch_const_shape(data.shape, f"{op}: data shape")
    if not isinstance(groups, int) or isinstance(groups, bool) or groups < 1:
        raise ValueError(f"{op}: groups must be a positive int, got {groups!r}")
    if (kic_chunk * groups, kic_bn) != (ic_chunk, ic_bn):
        per_group = f" per group x {groups} groups" if groups > 1 else ""
        raise ValueError(f"{op}: kernel expects {kic_chunk}x{kic_bn} input channels{per_group}, "
                         f"data has {ic_chunk}x{ic_bn}")
    if oc_chunk % groups:
        raise ValueError(f"{op}: {oc_chunk} output chunks of {oc_bn} channels do not split into "
                         f"{groups} groups (a block must not straddle two groups)")
    oc_per_group = oc_chunk // groups  # output chunks of one group
    for name, lay, bn in (("layout", "" if plain else layout, ic_bn),
                          ("out_layout", out_layout, oc_bn)):
        if lay and lay != f"NCHW{bn}c":
            raise ValueError(f"{op}: {name}={lay!r} does not match the block size, expected "
                             f"'NCHW{bn}c'")
    out_dtype = infer_out_dtype(out_dtype, data)
    dpad, (sh, sw), (dh, dw), (oh, ow) = _prepare(op, data, (kh, kw), stride, padding, dilation)
    ico = reduce_axis((0, kic_chunk), name="ico")
    ici = reduce_axis((0, ic_bn), name="ici")
    ry = reduce_axis((0, kh), name="ry")
    rx = reduce_axis((0, kw), name="rx")

    def pixel(b: Any, oco: Any, y: Any, x: Any) -> Any:
        chunk = ico if groups == 1 else (oco // oc_per_group) * kic_chunk + ico
        if plain:
            return dpad[b, chunk * ic_bn + ici, y, x]
        return dpad[b, chunk, y, x, ici]

    return compute(
        (n, oc_chunk, oh, ow, oc_bn),
        lambda b, oco, y, x, oci: te_sum(
            _cast(pixel(b, oco, y * sh + ry * dh, x * sw + rx * dw), out_dtype)
            * _cast(kernel[oco, ico, ry, rx, ici, oci], out_dtype),
            axis=[ico, ry, rx, ici]),
        name=op, tag="conv2d_NCHWc", attrs={"dilation": (dh, dw)})


def conv2d(input: Tensor, filter: Tensor, strides: Any, padding: Any, dilation: Any = 1,
           layout: str = "NCHW", out_dtype: str | None = None) -> Tensor:
    """Convolution by layout name (only "NCHW" here; NCHWc has its own entry point)."""
    if layout != "NCHW":
        raise ValueError(f"conv2d: layout {layout!r} is not supported, use 'NCHW' (or "
                         "conv2d_NCHWc for the blocked layout)")
    return conv2d_nchw(input, filter, strides, padding, dilation, out_dtype)


def conv2d_infer_layout(ic: int, oc: int, max_bn: int = 16) -> tuple[int, int]:
    """Block sizes for NCHW{c}: the largest divisors of ``ic`` and ``oc`` that are <= max_bn."""
    def bn(c: int) -> int:
        return max(d for d in range(1, min(c, max_bn) + 1) if c % d == 0)
    return bn(ic), bn(oc)
