"""Pooling (1-D NCW, 2-D NCHW, 3-D NCDHW): max / avg windows (padding, dilation, ceil_mode, count_include_pad)
and global pooling.

``padding`` is ``(top, left, bottom, right)`` (or an int / pair). With ``ceil_mode`` the output
size rounds up, as PyTorch/ONNX do: a last window must start inside the input or the left/top
padding; the extra cells it covers past the padding count neither as data nor as padding.
"""

from __future__ import annotations

import math
from typing import Any

from ...te import Tensor, compute, reduce_axis
from ...te import max as te_max
from ...te import sum as te_sum
from ...tir.data_layout import block_of
from ...tir.expr import const
from ...tir.op import floordiv, min_value
from ...tir.op import max as tmax
from ...tir.op import min as tmin
from ..utils import get_const_tuple
from .pad import pad
from .utils import batch_const_shape, check_rank, get_pad_tuple, pair

__all__ = ["pool1d", "pool2d", "pool3d", "global_pool", "adaptive_pool", "pool_out_size"]


def pool_out_size(size: int, k: int, s: int, d: int, lo: int, hi: int, ceil_mode: bool,
                  what: str, op: str = "pool2d") -> int:
    """Output extent of pooling along one axis."""
    dk = (k - 1) * d + 1
    span = size + lo + hi - dk
    if span < 0:
        raise ValueError(f"{op}: the (dilated) window {dk} is larger than the padded input "
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


def _pool_nd(data: Tensor, kernel: Any, stride: Any, dilation: Any, before: list[int],
             after: list[int], pool_type: str, ceil_mode: bool, count_include_pad: bool,
             op: str, block: int = 0, separable: bool = False) -> Tensor:
    """Pooling over the ``len(kernel)`` spatial axes of an ``[N, C, *spatial]`` tensor (with
    ``block``: ``[N, C/block, *spatial, block]``, the NCHW{c} layout). ``separable``: see
    :func:`_reduce_separable`."""
    if pool_type not in ("max", "avg"):
        raise ValueError(f"{op}: pool_type must be 'max' or 'avg', got {pool_type!r}")
    nsp = len(kernel)
    tail = 1 if block else 0
    layout = "NC" + "DHW"[3 - nsp:] + (f"{block}c" if block else "")
    check_rank(data, 2 + nsp + tail, op, "data", layout)
    shape = batch_const_shape(data.shape, f"{op}: data shape")
    if block and shape[-1] != block:
        raise ValueError(f"{op}: layout {layout} but the data's last axis is {shape[-1]}")
    sizes = shape[2:2 + nsp]
    names = ("depth", "height", "width")[3 - nsp:]
    outs = [pool_out_size(sizes[i], kernel[i], stride[i], dilation[i], before[i], after[i],
                          ceil_mode, names[i], op) for i in range(nsp)]
    # ceil_mode: extra cells past the end padding so every window is in bounds
    extra = [max(0, (outs[i] - 1) * stride[i] + (kernel[i] - 1) * dilation[i] + 1
                 - (sizes[i] + before[i] + after[i])) for i in range(nsp)]
    rs = [reduce_axis((0, kernel[i]), name=f"r{names[i][0]}") for i in range(nsp)]
    src = data
    if any(before) or any(a + e for a, e in zip(after, extra)):
        pad_value = min_value(data.dtype) if pool_type == "max" else 0.0
        src = pad(data, [0, 0, *before, *[0] * tail],
                  [0, 0, *(a + e for a, e in zip(after, extra)), *[0] * tail],
                  pad_value=pad_value, name="pad_temp")
    out_shape = (*shape[:2], *outs, *shape[2 + nsp:])

    def window(idx: tuple) -> Any:
        b, ch, *sp = idx
        rest = tuple(sp[nsp:])
        return src[(b, ch, *(sp[i] * stride[i] + rs[i] * dilation[i] for i in range(nsp)),
                    *rest)]

    reducer = te_max if pool_type == "max" else te_sum
    name = "pool_max" if pool_type == "max" else "pool_sum"
    if separable and nsp >= 2 and math.prod(kernel[:-1]) > 1 and kernel[-1] > 1:
        result = _reduce_separable(src, out_shape, kernel, stride, dilation, rs, reducer, name)
    else:
        result = compute(out_shape, lambda *i: reducer(window(i), axis=rs), name=name, tag=name)
    if pool_type == "max":
        return result
    total = result
    if count_include_pad:
        bounds = [(0, sizes[i] + before[i] + after[i]) for i in range(nsp)]
    else:
        bounds = [(before[i], sizes[i] + before[i]) for i in range(nsp)]
    if not any(extra) and (count_include_pad or not (any(before) or any(after))):
        div = const(math.prod(kernel), data.dtype)
        return compute(out_shape, lambda *i: total[i] / div, name="pool_avg",
                       tag="elemwise,pool_avg")

    def favg(*idx: Any) -> Any:
        cnt = None
        for i in range(nsp):
            ci = _count(idx[2 + i] * stride[i], kernel[i], dilation[i], *bounds[i])
            cnt = ci if cnt is None else cnt * ci
        return total[idx] / tmax(cnt, 1).astype(data.dtype)

    return compute(out_shape, favg, name="pool_avg", tag="elemwise,pool_avg")


def _reduce_separable(src: Tensor, out_shape: tuple, kernel: list[int], stride: list[int],
                      dilation: list[int], rs: list, reducer: Any, name: str) -> Tensor:
    """The window reduction in two stages: ``pool_rows`` reduces the window along every spatial
    axis but the last (for each padded input column the kernel can reach), then ``name``
    reduces ``kernel[-1]`` columns of it. Max and sum are separable, so the result is the same
    (a sum in another order); the first stage reads contiguous input rows, and the strided
    reads of the second are ``kernel[-1]`` per output instead of ``prod(kernel)``."""
    nsp = len(kernel)
    width = (out_shape[1 + nsp] - 1) * stride[-1] + (kernel[-1] - 1) * dilation[-1] + 1
    rows_shape = (*out_shape[:1 + nsp], width, *out_shape[2 + nsp:])

    def frows(*idx: Any) -> Any:
        b, ch, *sp = idx
        lead = (sp[i] * stride[i] + rs[i] * dilation[i] for i in range(nsp - 1))
        return reducer(src[(b, ch, *lead, *sp[nsp - 1:])], axis=rs[:-1])

    rows = compute(rows_shape, frows, name="pool_rows", tag="pool_rows")

    def fcols(*idx: Any) -> Any:
        b, ch, *sp = idx
        x = sp[nsp - 1] * stride[-1] + rs[-1] * dilation[-1]
        return reducer(rows[(b, ch, *sp[:nsp - 1], x, *sp[nsp:])], axis=[rs[-1]])

    return compute(out_shape, fcols, name=name, tag=name)


def _tuple(v: Any, n: int, what: str) -> list[int]:
    vals = list(v) if isinstance(v, (list, tuple)) else [v] * n
    if len(vals) != n:
        raise ValueError(f"{what} must be an int or {n} values, got {v!r}")
    out = [get_const_tuple([x], what, symbolic=False)[0] for x in vals]
    if min(out) < 1:
        raise ValueError(f"{what} must be >= 1, got {v!r}")
    return out


def _pads(padding: Any, n: int, op: str) -> tuple[list[int], list[int]]:
    """An int, ``n`` values (both sides) or ``2n`` values (all befores, then all afters)."""
    vals = list(padding) if isinstance(padding, (list, tuple)) else [padding] * n
    vals = [get_const_tuple([x], f"{op}: padding", symbolic=False)[0] for x in vals]
    if len(vals) == n:
        vals = vals + vals
    if len(vals) != 2 * n or min(vals) < 0:
        raise ValueError(f"{op}: padding must be >= 0 with 1, {n} or {2 * n} values, got "
                         f"{padding!r}")
    return vals[:n], vals[n:]


def _block_of(layout: str, base: str, op: str) -> int:
    """0 for ``base`` ("NCHW"), ``c`` for ``base + "{c}c"`` (the blocked layout)."""
    if layout == base:
        return 0
    block = block_of(layout, base)
    if block is None or block < 1:
        raise ValueError(f"{op}: layout {layout!r} is not supported ({base!r} or "
                         f"{base + '<c>c'!r})")
    return block


def pool2d(data: Tensor, kernel: Any, stride: Any, dilation: Any, padding: Any, pool_type: str,
           ceil_mode: bool = False, layout: str = "NCHW", count_include_pad: bool = True,
           separable: bool = False) -> Tensor:
    """Max or average pooling over ``kernel`` windows of an NCHW (or NCHW{c}) tensor;
    ``padding`` ``(top, left, bottom, right)``, a pair or an int. ``separable``: reduce the
    window's rows first (a ``pool_rows`` stage), then its columns; CPU schedules want it for
    the plain layout (contiguous row reads, fewer strided ones)."""
    block = _block_of(layout, "NCHW", "pool2d")
    kh, kw = pair(kernel, "pool2d: kernel")
    pt, pl, pb, pr = get_pad_tuple(padding, (kh, kw))
    return _pool_nd(data, [kh, kw], list(pair(stride, "pool2d: stride")),
                    list(pair(dilation, "pool2d: dilation")), [pt, pl], [pb, pr], pool_type,
                    ceil_mode, count_include_pad, "pool2d", block, separable)


def pool1d(data: Tensor, kernel: Any, stride: Any, dilation: Any, padding: Any, pool_type: str,
           ceil_mode: bool = False, layout: str = "NCW", count_include_pad: bool = True
           ) -> Tensor:
    """1-D pooling of ``[N, C, W]``; ``padding`` an int or ``(before, after)``."""
    if layout != "NCW":
        raise ValueError(f"pool1d: layout {layout!r} is not supported (only 'NCW')")
    k = _tuple(kernel, 1, "pool1d: kernel")
    pads = list(padding) if isinstance(padding, (list, tuple)) else [padding, padding]
    if len(pads) == 1:
        pads = pads * 2
    before, after = _pads(pads, 1, "pool1d")
    return _pool_nd(data, k, _tuple(stride, 1, "pool1d: stride"),
                    _tuple(dilation, 1, "pool1d: dilation"), before, after, pool_type,
                    ceil_mode, count_include_pad, "pool1d")


def pool3d(data: Tensor, kernel: Any, stride: Any, dilation: Any, padding: Any, pool_type: str,
           ceil_mode: bool = False, layout: str = "NCDHW", count_include_pad: bool = True,
           separable: bool = False) -> Tensor:
    """3-D pooling of ``[N, C, D, H, W]``; ``padding`` an int, 3 values or 6
    ``(front, top, left, back, bottom, right)``; ``separable`` as in :func:`pool2d`."""
    if layout != "NCDHW":
        raise ValueError(f"pool3d: layout {layout!r} is not supported (only 'NCDHW')")
    before, after = _pads(padding, 3, "pool3d")
    return _pool_nd(data, _tuple(kernel, 3, "pool3d: kernel"), _tuple(stride, 3, "pool3d: stride"),
                    _tuple(dilation, 3, "pool3d: dilation"), before, after, pool_type,
                    ceil_mode, count_include_pad, "pool3d", separable=separable)


def global_pool(data: Tensor, pool_type: str, layout: str = "NCHW") -> Tensor:
    """Max or average over H and W: ``[N, C, H, W]`` -> ``[N, C, 1, 1]`` (NCHW{c}:
    ``[N, C/c, H, W, c]`` -> ``[N, C/c, 1, 1, c]``)."""
    block = _block_of(layout, "NCHW", "global_pool")
    if pool_type not in ("max", "avg"):
        raise ValueError(f"global_pool: pool_type must be 'max' or 'avg', got {pool_type!r}")
    check_rank(data, 5 if block else 4, "global_pool", "data", layout)
    n, c, h, w = data.shape[:4]
    tail = tuple(data.shape[4:])
    ry = reduce_axis((0, h), name="ry")
    rx = reduce_axis((0, w), name="rx")
    oshape = (n, c, 1, 1, *tail)
    if pool_type == "max":
        return compute(oshape, lambda *i: te_max(data[(i[0], i[1], ry, rx, *i[4:])],
                                                 axis=[ry, rx]),
                       name="global_pool_max", tag="global_pool_max")
    total = compute(oshape, lambda *i: te_sum(data[(i[0], i[1], ry, rx, *i[4:])],
                                              axis=[ry, rx]),
                    name="global_pool_sum", tag="global_pool_sum")
    div = (h * w).astype(data.dtype) if hasattr(h * w, "astype") else const(h * w, data.dtype)
    return compute(oshape, lambda *i: total[i] / div,
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
    n, c, h, w = batch_const_shape(data.shape, "adaptive_pool: data shape")
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
