"""2-D pooling, NCHW: max / avg windows (padding, dilation, ceil_mode, count_include_pad)
and global pooling.

``padding`` is ``(top, left, bottom, right)`` (or an int / pair). With ``ceil_mode`` the output
size rounds up, as PyTorch/ONNX do: a last window must start inside the input or the left/top
padding; the extra cells it covers past the padding count neither as data nor as padding.
"""

from __future__ import annotations

from typing import Any

from ...te import Tensor, compute, reduce_axis
from ...te import max as te_max
from ...te import sum as te_sum
from ...tir.expr import const
from ...tir.op import floordiv, min_value
from ...tir.op import max as tmax
from ...tir.op import min as tmin
from .pad import pad
from .utils import check_rank, get_const_tuple, get_pad_tuple, pair

__all__ = ["pool2d", "global_pool", "adaptive_pool", "pool_out_size"]


def pool_out_size(size: int, k: int, s: int, d: int, lo: int, hi: int, ceil_mode: bool,
                  what: str) -> int:
    """Output extent of pooling along one axis."""
    dk = (k - 1) * d + 1
    span = size + lo + hi - dk
    if span < 0:
        raise ValueError(f"pool2d: the (dilated) window {dk} is larger than the padded input "
                         f"{size + lo + hi} along {what}")
    if not ceil_mode:
        return span // s + 1
    out = -(-span // s) + 1
    if (out - 1) * s >= size + lo:
        out -= 1
    return out


def _count(base: Any, k: int, d: int, lo: int, hi: int) -> Any:
    """How many of ``base + i*d`` (``0 <= i < k``) lie in ``[lo, hi)``."""
    i_lo = tmax(floordiv(lo - base + d - 1, d), 0)
    i_hi = tmin(floordiv(hi - 1 - base, d), k - 1)
    return tmax(i_hi - i_lo + 1, 0)


def pool2d(data: Tensor, kernel: Any, stride: Any, dilation: Any, padding: Any, pool_type: str,
           ceil_mode: bool = False, layout: str = "NCHW", count_include_pad: bool = True
           ) -> Tensor:
    """Max or average pooling over ``kernel`` windows of an NCHW tensor."""
    if layout != "NCHW":
        raise ValueError(f"pool2d: layout {layout!r} is not supported (only 'NCHW')")
    if pool_type not in ("max", "avg"):
        raise ValueError(f"pool2d: pool_type must be 'max' or 'avg', got {pool_type!r}")
    check_rank(data, 4, "pool2d", "data", "NCHW")
    n, c, h, w = get_const_tuple(data.shape, "pool2d: data shape")
    kh, kw = pair(kernel, "pool2d: kernel")
    sh, sw = pair(stride, "pool2d: stride")
    dh, dw = pair(dilation, "pool2d: dilation")
    pt, pl, pb, pr = get_pad_tuple(padding, (kh, kw))
    oh = pool_out_size(h, kh, sh, dh, pt, pb, ceil_mode, "height")
    ow = pool_out_size(w, kw, sw, dw, pl, pr, ceil_mode, "width")
    # ceil_mode: extra cells past the bottom/right padding so every window is in bounds
    eb = max(0, (oh - 1) * sh + (kh - 1) * dh + 1 - (h + pt + pb))
    er = max(0, (ow - 1) * sw + (kw - 1) * dw + 1 - (w + pl + pr))
    ry = reduce_axis((0, kh), name="ry")
    rx = reduce_axis((0, kw), name="rx")
    if pool_type == "max":
        src = data
        if pt or pl or pb + eb or pr + er:
            src = pad(data, [0, 0, pt, pl], [0, 0, pb + eb, pr + er],
                      pad_value=min_value(data.dtype), name="pad_temp")
        return compute((n, c, oh, ow), lambda b, ch, y, x: te_max(
            src[b, ch, y * sh + ry * dh, x * sw + rx * dw], axis=[ry, rx]),
            name="pool_max", tag="pool_max")
    src = data
    if pt or pl or pb + eb or pr + er:
        src = pad(data, [0, 0, pt, pl], [0, 0, pb + eb, pr + er], name="pad_temp")
    total = compute((n, c, oh, ow), lambda b, ch, y, x: te_sum(
        src[b, ch, y * sh + ry * dh, x * sw + rx * dw], axis=[ry, rx]),
        name="pool_sum", tag="pool_sum")
    if count_include_pad:
        hlo, hhi, wlo, whi = 0, h + pt + pb, 0, w + pl + pr
    else:
        hlo, hhi, wlo, whi = pt, h + pt, pl, w + pl

    def favg(b: Any, ch: Any, y: Any, x: Any) -> Any:
        cnt = _count(y * sh, kh, dh, hlo, hhi) * _count(x * sw, kw, dw, wlo, whi)
        return total[b, ch, y, x] / tmax(cnt, 1).astype(data.dtype)

    if (not eb and not er and (count_include_pad or not (pt or pl or pb or pr))):
        div = const(kh * kw, data.dtype)
        return compute((n, c, oh, ow), lambda b, ch, y, x: total[b, ch, y, x] / div,
                       name="pool_avg", tag="elemwise,pool_avg")
    return compute((n, c, oh, ow), favg, name="pool_avg", tag="elemwise,pool_avg")


def global_pool(data: Tensor, pool_type: str, layout: str = "NCHW") -> Tensor:
    """Max or average over H and W: ``[N, C, H, W]`` -> ``[N, C, 1, 1]``."""
    if layout != "NCHW":
        raise ValueError(f"global_pool: layout {layout!r} is not supported (only 'NCHW')")
    if pool_type not in ("max", "avg"):
        raise ValueError(f"global_pool: pool_type must be 'max' or 'avg', got {pool_type!r}")
    check_rank(data, 4, "global_pool", "data", "NCHW")
    n, c, h, w = data.shape
    ry = reduce_axis((0, h), name="ry")
    rx = reduce_axis((0, w), name="rx")
    if pool_type == "max":
        return compute((n, c, 1, 1), lambda b, ch, y, x: te_max(data[b, ch, ry, rx],
                                                                 axis=[ry, rx]),
                       name="global_pool_max", tag="global_pool_max")
    total = compute((n, c, 1, 1), lambda b, ch, y, x: te_sum(data[b, ch, ry, rx],
                                                              axis=[ry, rx]),
                    name="global_pool_sum", tag="global_pool_sum")
    div = (h * w).astype(data.dtype) if hasattr(h * w, "astype") else const(h * w, data.dtype)
    return compute((n, c, 1, 1), lambda b, ch, y, x: total[b, ch, y, x] / div,
                   name="global_pool_avg", tag="elemwise,global_pool_avg")


def adaptive_pool(data: Tensor, output_size: Any, pool_type: str, layout: str = "NCHW"
                  ) -> Tensor:
    """PyTorch's adaptive pooling: output cell ``i`` of ``O`` pools input rows
    ``[floor(i*H/O), ceil((i+1)*H/O))`` (likewise columns): ``[N, C, H, W] -> [N, C, OH, OW]``."""
    if layout != "NCHW":
        raise ValueError(f"adaptive_pool: layout {layout!r} is not supported (only 'NCHW')")
    if pool_type not in ("max", "avg"):
        raise ValueError(f"adaptive_pool: pool_type must be 'max' or 'avg', got {pool_type!r}")
    check_rank(data, 4, "adaptive_pool", "data", "NCHW")
    n, c, h, w = get_const_tuple(data.shape, "adaptive_pool: data shape")
    oh, ow = pair(output_size, "adaptive_pool: output_size")

    def bounds(size: int, o: int) -> tuple[int, Any, Any]:
        kmax = max(-(-((i + 1) * size) // o) - (i * size) // o for i in range(o))
        return kmax, (lambda i: floordiv(i * size, o)), (lambda i: floordiv((i + 1) * size + o - 1, o))

    kh, hs, he = bounds(h, oh)
    kw, ws, we = bounds(w, ow)
    ry = reduce_axis((0, kh), name="ry")
    rx = reduce_axis((0, kw), name="rx")

    def window(b: Any, ch: Any, y: Any, x: Any) -> tuple[Any, Any]:
        cond = (ry < he(y) - hs(y)) & (rx < we(x) - ws(x))
        return data[b, ch, tmin(hs(y) + ry, h - 1), tmin(ws(x) + rx, w - 1)], cond

    if pool_type == "max":
        def fmax(b: Any, ch: Any, y: Any, x: Any) -> Any:
            v, cond = window(b, ch, y, x)
            return te_max(v, axis=[ry, rx], where=cond)
        return compute((n, c, oh, ow), fmax, name="adaptive_pool_max", tag="adaptive_pool_max")

    def fsum(b: Any, ch: Any, y: Any, x: Any) -> Any:
        v, cond = window(b, ch, y, x)
        return te_sum(v, axis=[ry, rx], where=cond)

    total = compute((n, c, oh, ow), fsum, name="adaptive_pool_sum", tag="adaptive_pool_sum")
    return compute((n, c, oh, ow), lambda b, ch, y, x: total[b, ch, y, x] / (
        (he(y) - hs(y)) * (we(x) - ws(x))).astype(data.dtype),
        name="adaptive_pool_avg", tag="elemwise,adaptive_pool_avg")
