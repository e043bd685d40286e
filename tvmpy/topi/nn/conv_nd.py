"""Convolutions over any number of spatial axes, with groups and dilation: the 1-D and 3-D
entry points (``conv1d_ncw``, ``conv3d_ncdhw``, grouped variants) and transposed convolutions
(``conv1d_transpose_ncw``, ``group_conv2d_transpose_nchw``, ``conv3d_transpose_ncdhw``), as the
ONNX ``Conv``/``ConvTranspose`` operators need them. Layout ``[N, C, *spatial]``; forward
kernels ``[OC, C/groups, *k]``, transposed kernels ``[C, OC/groups, *k]``.

Padding: an int, one value per spatial axis (both sides), or ``2 * nsp`` values (all befores,
then all afters, the ONNX ``pads`` order).
"""

from __future__ import annotations

from typing import Any

from ...te import Tensor, compute, reduce_axis
from ...te import sum as te_sum
from ...tir import all as tir_all
from ...tir.expr import const
from ...tir.op import if_then_else
from ..utils import get_const_int, get_const_tuple
from .conv2d import _cast
from .pad import pad
from .utils import batch_const_shape, check_rank, infer_out_dtype

__all__ = ["conv_nd", "conv_transpose_nd", "conv1d_ncw", "group_conv1d_ncw", "conv3d_ncdhw",
           "conv1d_transpose_ncw", "group_conv2d_transpose_nchw", "conv3d_transpose_ncdhw"]

_LAYOUT = {1: "NCW", 2: "NCHW", 3: "NCDHW"}


def _vals(v: Any, n: int, what: str, lo: int = 1) -> list[int]:
    vals = list(v) if isinstance(v, (list, tuple)) else [v] * n
    if len(vals) != n:
        raise ValueError(f"{what} must be an int or {n} values, got {v!r}")
    out = [get_const_int(x, what) for x in vals]
    if min(out) < lo:
        raise ValueError(f"{what} must be >= {lo}, got {v!r}")
    return out


def _pads(padding: Any, n: int, op: str) -> tuple[list[int], list[int]]:
    if isinstance(padding, str):
        raise ValueError(f"{op}: give explicit padding values (the frontend resolves auto_pad)")
    vals = list(padding) if isinstance(padding, (list, tuple)) else [padding] * n
    vals = [get_const_int(x, f"{op}: padding") for x in vals]
    if len(vals) == n:
        vals = vals + vals
    if len(vals) != 2 * n or min(vals) < 0:
        raise ValueError(f"{op}: padding must be >= 0 with 1, {n} or {2 * n} values, got "
                         f"{padding!r}")
    return vals[:n], vals[n:]


def _check(op: str, data: Tensor, kernel: Tensor, nsp: int, groups: int
           ) -> tuple[tuple[int, ...], tuple[int, ...]]:
    check_rank(data, 2 + nsp, op, "data", _LAYOUT[nsp])
    check_rank(kernel, 2 + nsp, op, "kernel")
    if not isinstance(groups, int) or groups < 1:
        raise ValueError(f"{op}: groups must be a positive int, got {groups!r}")
    return (batch_const_shape(data.shape, f"{op}: data shape"),
            get_const_tuple(kernel.shape, f"{op}: kernel shape", symbolic=False))


def conv_nd(data: Tensor, kernel: Tensor, strides: Any, padding: Any, dilation: Any,
            groups: int = 1, out_dtype: str | None = None, op: str = "conv_nd") -> Tensor:
    """Grouped, dilated convolution over the trailing ``kernel.ndim - 2`` axes."""
    nsp = len(kernel.shape) - 2
    if nsp < 1:
        raise ValueError(f"{op}: kernel must have at least 3 dimensions, got {len(kernel.shape)}")
    dshape, kshape = _check(op, data, kernel, nsp, groups)
    n, c, *sizes = dshape
    oc, icg, *ks = kshape
    if c % groups or oc % groups:
        raise ValueError(f"{op}: input channels {c} and output channels {oc} must both be "
                         f"divisible by groups={groups}")
    if icg * groups != c:
        raise ValueError(f"{op}: kernel expects {icg * groups} input channels ({icg} per group "
                         f"x {groups} groups), data has {c}")
    st = _vals(strides, nsp, f"{op}: strides")
    dil = _vals(dilation, nsp, f"{op}: dilation")
    before, after = _pads(padding, nsp, op)
    outs = []
    for i in range(nsp):
        dk = (ks[i] - 1) * dil[i] + 1
        o = (sizes[i] + before[i] + after[i] - dk) // st[i] + 1
        if o < 1:
            raise ValueError(f"{op}: the (dilated) window {dk} is larger than the padded input "
                             f"{sizes[i] + before[i] + after[i]} along spatial axis {i}")
        outs.append(o)
    src = pad(data, [0, 0, *before], [0, 0, *after], name="data_pad") if any(
        before + after) else data
    out_dtype = infer_out_dtype(out_dtype, data)
    rc = reduce_axis((0, icg), name="rc")
    rk = [reduce_axis((0, k), name=f"r{i}") for i, k in enumerate(ks)]
    ocg = oc // groups

    def f(*idx_: Any) -> Any:
        b, fo, *o = idx_
        ch = rc if groups == 1 else (fo // ocg) * icg + rc
        idx = (b, ch, *(o[i] * st[i] + rk[i] * dil[i] for i in range(nsp)))
        return te_sum(_cast(src[idx], out_dtype) * _cast(kernel[(fo, rc, *rk)], out_dtype),
                      axis=[rc, *rk])

    return compute((n, oc, *outs), f, name=op, tag="conv_nd")


def conv_transpose_nd(data: Tensor, kernel: Tensor, strides: Any, padding: Any,
                      output_padding: Any = 0, groups: int = 1, dilation: Any = 1,
                      out_dtype: str | None = None, op: str = "conv_transpose_nd") -> Tensor:
    """Grouped, dilated transposed convolution: the input dilated by the stride and padded by
    ``dilation * (k - 1) - pad`` (one stage), convolved with the flipped kernel at stride 1.
    Output extent ``(n - 1) * s + dilation * (k - 1) + 1 - pad_before - pad_after + opad``."""
    nsp = len(kernel.shape) - 2
    if nsp < 1:
        raise ValueError(f"{op}: kernel must have at least 3 dimensions, got {len(kernel.shape)}")
    dshape, kshape = _check(op, data, kernel, nsp, groups)
    n, c, *sizes = dshape
    kc, ocg, *ks = kshape
    if kc != c:
        raise ValueError(f"{op}: kernel has {kc} input channels, data has {c}")
    if c % groups:
        raise ValueError(f"{op}: input channels {c} must be divisible by groups={groups}")
    st = _vals(strides, nsp, f"{op}: strides")
    dil = _vals(dilation, nsp, f"{op}: dilation")
    opad = _vals(output_padding, nsp, f"{op}: output_padding", lo=0)
    before, after = _pads(padding, nsp, op)
    if any(opad[i] >= max(st[i], dil[i]) for i in range(nsp)):
        raise ValueError(f"{op}: output_padding {opad} must be smaller than the stride {st} "
                         f"or the dilation {dil}")
    bb = [dil[i] * (ks[i] - 1) - before[i] for i in range(nsp)]
    ba = [dil[i] * (ks[i] - 1) - after[i] + opad[i] for i in range(nsp)]
    if min(bb + ba) < 0:
        raise ValueError(f"{op}: padding {before + after} exceeds dilation * (kernel - 1)")
    dsz = [(sizes[i] - 1) * st[i] + 1 for i in range(nsp)]
    zero = const(0, data.dtype)

    def fpad(*idx_: Any) -> Any:
        b, ch, *p = idx_
        conds, src = [], []
        for i in range(nsp):
            q = p[i] - bb[i]
            conds += [q >= 0, q < dsz[i]]
            if st[i] > 1:
                conds.append(q % st[i] == 0)
            src.append(q // st[i] if st[i] > 1 else q)
        return if_then_else(tir_all(*conds), data[(b, ch, *src)], zero)

    padded = compute((n, c, *(dsz[i] + bb[i] + ba[i] for i in range(nsp))), fpad,
                     name="data_pad", tag="injective,pad")
    outs = [dsz[i] + bb[i] + ba[i] - dil[i] * (ks[i] - 1) for i in range(nsp)]
    if min(outs) < 1:
        raise ValueError(f"{op}: output would be empty ({outs})")
    icg = c // groups
    out_dtype = infer_out_dtype(out_dtype, data)
    rc = reduce_axis((0, icg), name="rc")
    rk = [reduce_axis((0, k), name=f"r{i}") for i, k in enumerate(ks)]

    def f(*idx_: Any) -> Any:
        b, fo, *o = idx_
        g = fo // ocg if groups > 1 else 0
        ch = g * icg + rc if groups > 1 else rc
        idx = (b, ch, *(o[i] + rk[i] * dil[i] for i in range(nsp)))
        kidx = (ch, fo % ocg if groups > 1 else fo, *(ks[i] - 1 - rk[i] for i in range(nsp)))
        return te_sum(_cast(padded[idx], out_dtype) * _cast(kernel[kidx], out_dtype),
                      axis=[rc, *rk])

    return compute((n, ocg * groups, *outs), f, name=op, tag="conv_nd")


def conv1d_ncw(data: Tensor, kernel: Tensor, strides: Any = 1, padding: Any = 0,
               dilation: Any = 1, out_dtype: str | None = None) -> Tensor:
    """1-D convolution, ``[N, C, W]`` * ``[OC, C, K]``."""
    return conv_nd(data, kernel, strides, padding, dilation, 1, out_dtype, "conv1d_ncw")


def group_conv1d_ncw(data: Tensor, kernel: Tensor, strides: Any = 1, padding: Any = 0,
                     dilation: Any = 1, groups: int = 1, out_dtype: str | None = None) -> Tensor:
    """Grouped 1-D convolution."""
    return conv_nd(data, kernel, strides, padding, dilation, groups, out_dtype,
                   "group_conv1d_ncw")


def conv3d_ncdhw(Input: Tensor, Filter: Tensor, stride: Any, padding: Any, dilation: Any,
                 groups: int = 1, out_dtype: str | None = None) -> Tensor:
    """3-D convolution, ``[N, C, D, H, W]`` * ``[OC, C/groups, KD, KH, KW]``."""
    return conv_nd(Input, Filter, stride, padding, dilation, groups, out_dtype, "conv3d_ncdhw")


def conv1d_transpose_ncw(data: Tensor, kernel: Tensor, stride: Any, padding: Any,
                         out_dtype: str | None = None, output_padding: Any = 0) -> Tensor:
    """Transposed 1-D convolution, kernel ``[C, OC, K]``."""
    return conv_transpose_nd(data, kernel, stride, padding, output_padding, 1, 1, out_dtype,
                             "conv1d_transpose_ncw")


def group_conv2d_transpose_nchw(data: Tensor, kernel: Tensor, stride: Any, padding: Any,
                                out_dtype: str | None = None, output_padding: Any = 0,
                                groups: int = 1, dilation: Any = 1) -> Tensor:
    """Grouped (and dilated) transposed 2-D convolution, kernel ``[C, OC/groups, KH, KW]``;
    ``padding`` an int, ``(h, w)`` or ``(top, left, bottom, right)``."""
    return conv_transpose_nd(data, kernel, stride, padding, output_padding, groups, dilation,
                             out_dtype, "group_conv2d_transpose_nchw")


def conv3d_transpose_ncdhw(data: Tensor, kernel: Tensor, strides: Any, padding: Any,
                           out_dtype: str | None = None, output_padding: Any = 0) -> Tensor:
    """Transposed 3-D convolution, kernel ``[C, OC, KD, KH, KW]``."""
    return conv_transpose_nd(data, kernel, strides, padding, output_padding, 1, 1, out_dtype,
                             "conv3d_transpose_ncdhw")
