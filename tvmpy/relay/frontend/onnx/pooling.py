"""ONNX pooling: Max/Average/Lp pooling (1-3-D), the global pools, MaxPool's Indices output,
MaxUnpool and RoiAlign.

- MaxPool with its Indices output (2-D): the windows gathered through a constant index table,
  the max and its first position (argmax), flattened as ONNX (row- or column-major).
- MaxUnpool: the values scattered to their flat indices (a one-hot mask, summed).
- RoiAlign (sampling_ratio > 0): the bilinear samples of every bin fetched with gather_nd,
  averaged (or the ONNX max of weighted corners), as the ONNX definition."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ...expr import RelayExpr, const
from ...op import nn, nn_nd, tensor, transform
from ...op import reduce as _red
from ..common import reshape_to
from .context import ImportContext, dtype_of, scalar_like, shape_of
from .conv import conv_pads
from .dyn_args import runtime_input
from .registry import Attrs, Converter, Inputs, Names, Output, converter, register


def _pool_args(ctx: ImportContext, x, attrs: Attrs):
    xs = shape_of(x)
    nd = len(xs) - 2
    if nd not in (1, 2, 3):
        raise ctx.fail(f"only 1-D, 2-D and 3-D pooling is supported, got data shape {xs}")
    k = list(attrs["kernel_shape"])
    strides = list(attrs.get("strides", [1] * nd))
    dil = list(attrs.get("dilations", [1] * nd))
    pads = conv_pads(ctx, attrs, xs[2:], k, strides, dil)
    return nd, dict(pool_size=k, strides=strides, dilation=dil, padding=pads,
                    ceil_mode=bool(attrs.get("ceil_mode", 0)))


@converter("MaxPool")
def _maxpool(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    if len(ctx.node.output) > 1 and ctx.node.output[1]:
        return _maxpool_with_indices(ctx, inputs[0], attrs)
    nd, kw = _pool_args(ctx, inputs[0], attrs)
    return {1: nn_nd.max_pool1d, 2: nn.max_pool2d, 3: nn_nd.max_pool3d}[nd](inputs[0], **kw)


@converter("AveragePool")
def _avgpool(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    nd, kw = _pool_args(ctx, inputs[0], attrs)
    fn = {1: nn_nd.avg_pool1d, 2: nn.avg_pool2d, 3: nn_nd.avg_pool3d}[nd]
    return fn(inputs[0], count_include_pad=bool(attrs.get("count_include_pad", 0)), **kw)


def _global_pool(pool2d: Callable[[RelayExpr], RelayExpr], reduce: Callable[..., RelayExpr]
                 ) -> Converter:
    """4-D data: the 2-D global pool (layout passes know it); 3-D and 5-D: a keepdims
    reduction over the spatial axes."""
    def convert(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
        x = inputs[0]
        rank = len(shape_of(x))
        if rank == 4:
            return pool2d(x)
        if rank < 3:
            raise ctx.fail(f"needs data of rank >= 3 (N, C, spatial...), got shape {shape_of(x)}")
        return reduce(x, axis=list(range(2, rank)), keepdims=True)
    return convert


register("GlobalAveragePool", _global_pool(nn.global_avg_pool2d, _red.mean))
register("GlobalMaxPool", _global_pool(nn.global_max_pool2d, _red.max))


@converter("LpPool")
def _lppool(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    x = inputs[0]
    p = attrs.get("p", 2)
    nd, kw = _pool_args(ctx, x, attrs)
    fn = {1: nn_nd.avg_pool1d, 2: nn.avg_pool2d, 3: nn_nd.avg_pool3d}[nd]
    xp = tensor.power(tensor.abs(x), scalar_like(p, x))
    mean = fn(xp, count_include_pad=True, **kw)
    total = tensor.multiply(mean, scalar_like(int(np.prod(kw["pool_size"])), x))
    return tensor.power(total, scalar_like(1.0 / p, x))


@converter("GlobalLpPool")
def _global_lppool(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    x = inputs[0]
    p = attrs.get("p", 2)
    axes = list(range(2, len(shape_of(x))))
    total = _red.sum(tensor.power(tensor.abs(x), scalar_like(p, x)), axis=axes, keepdims=True)
    return tensor.power(total, scalar_like(1.0 / p, x))


def _maxpool_with_indices(ctx: ImportContext, x: RelayExpr, attrs: Attrs) -> list[RelayExpr]:
    """[values, indices] of a 2-D MaxPool (ONNX's Indices: flat over the whole tensor)."""
    s = shape_of(x)
    if len(s) != 4:
        raise ctx.fail(f"the Indices output is supported for 2-D pooling only, got shape {s}")
    N, C, H, W = s
    k = list(attrs["kernel_shape"])
    st = list(attrs.get("strides", [1, 1]))
    dil = list(attrs.get("dilations", [1, 1]))
    pads = conv_pads(ctx, attrs, [H, W], k, st, dil)
    outs = []
    for d, size in enumerate((H, W)):
        span = size + pads[d] + pads[d + 2] - ((k[d] - 1) * dil[d] + 1)
        o = (-(-span // st[d]) if attrs.get("ceil_mode", 0) else span // st[d]) + 1
        if attrs.get("ceil_mode", 0) and (o - 1) * st[d] >= size + pads[d]:
            o -= 1
        outs.append(o)
    OH, OW = outs
    oy, ox, ky, kx = np.meshgrid(np.arange(OH), np.arange(OW), np.arange(k[0]), np.arange(k[1]),
                                 indexing="ij")
    yy = (oy * st[0] - pads[0] + ky * dil[0]).reshape(OH * OW, -1)
    xx = (ox * st[1] - pads[1] + kx * dil[1]).reshape(OH * OW, -1)
    valid = (yy >= 0) & (yy < H) & (xx >= 0) & (xx < W)
    row = np.where(valid, yy * W + xx, 0).astype(np.int64)
    col = np.where(valid, xx * H + yy, 0).astype(np.int64)
    K = row.shape[1]
    flat = reshape_to(x, [N, C, H * W])
    win = reshape_to(transform.take(flat, const(row.reshape(-1)), axis=2),
                            [N, C, OH * OW, K])
    dt = dtype_of(x)
    low = np.finfo(dt).min if np.dtype(dt).kind == "f" else np.iinfo(dt).min
    win = tensor.where(const(valid), win, const(np.asarray(-np.inf if np.dtype(dt).kind == "f"
                                                           else low, dtype=dt)))
    vals = reshape_to(_red.max(win, axis=[3]), [N, C, OH, OW])
    arg = transform.expand_dims(transform.cast(_red.argmax(win, axis=[3]), "int64"), 3)
    table = col if attrs.get("storage_order", 0) else row
    pos = transform.gather(transform.broadcast_to(const(table), [N, C, OH * OW, K]), 3, arg)
    base = const((np.arange(N * C, dtype=np.int64) * H * W).reshape(N, C, 1, 1))
    idx = reshape_to(tensor.add(pos, base), [N, C, OH, OW])
    return [vals, idx]


@converter("MaxUnpool")
def _max_unpool(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    x, idx = inputs[0], inputs[1]
    s = shape_of(x)
    nd = len(s) - 2
    k = list(attrs["kernel_shape"])
    strides = list(attrs.get("strides", [1] * nd))
    pads = list(attrs.get("pads", [0] * (2 * nd)))
    default = s[:2] + [(s[2 + d] - 1) * strides[d] + k[d] - pads[d] - pads[d + nd]
                       for d in range(nd)]
    if runtime_input(ctx, names, 2):  # the output shape known at run time
        from ...op.dyn import spatial

        return spatial.max_unpool(x, idx, inputs[2], default, node=ctx.where())
    out = (
        [int(v) for v in ctx.value(names[2], "output_shape")]
        if len(inputs) > 2 and inputs[2] is not None
        else default
    )
    P = int(np.prod(out))
    q = int(np.prod(s))
    flat_i = reshape_to(transform.cast(idx, "int64"), [q, 1])
    if out != default:  # indices address the default shape: same coordinates in the output
        rest, new = flat_i, None
        for d in range(len(out) - 1, -1, -1):
            coord = tensor.floor_mod(rest, const(np.int64(default[d])))
            rest = tensor.floor_divide(rest, const(np.int64(default[d])))
            term = tensor.multiply(coord, const(np.int64(np.prod(out[d + 1:]))))
            new = term if new is None else tensor.add(new, term)
        flat_i = new
    mask = tensor.equal(flat_i, const(np.arange(P, dtype=np.int64).reshape(1, P)))
    vals = reshape_to(x, [q, 1])
    y = _red.sum(tensor.where(mask, vals, const(np.zeros((), dtype_of(x)))), axis=[0])
    return reshape_to(y, out)


@converter("RoiAlign")
def _roi_align(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    X, rois, bidx = inputs
    N, C, H, W = shape_of(X)
    R = shape_of(rois)[0]
    dt = dtype_of(X)
    ratio = int(attrs.get("sampling_ratio", 0))
    if ratio <= 0:
        raise ctx.fail("sampling_ratio=0 (adaptive: a data-dependent sample count) is not "
                     "supported; give sampling_ratio > 0")
    PH, PW = int(attrs.get("output_height", 1)), int(attrs.get("output_width", 1))
    scale = float(attrs.get("spatial_scale", 1.0))
    half = attrs.get("coordinate_transformation_mode", "half_pixel") == "half_pixel"
    mode = attrs.get("mode", "avg")

    def f(v):
        return const(np.asarray(v, dtype=dt))

    def col(k):  # rois[:, k] as (R, 1)
        return transform.strided_slice(rois, [k], [k + 1], axes=[1])

    off = 0.5 if half else 0.0
    start = [tensor.subtract(tensor.multiply(col(k), f(scale)), f(off)) for k in range(4)]
    x0, y0, x1, y1 = start
    size_w, size_h = tensor.subtract(x1, x0), tensor.subtract(y1, y0)
    if not half:
        size_w, size_h = tensor.maximum(size_w, f(1.0)), tensor.maximum(size_h, f(1.0))

    def axis_coords(lo, size, P, limit):
        """Sample coordinates (R, P*ratio) along one axis, clamped as the definition, with
        the low/high neighbour and the low weight, and the out-of-range mask."""
        frac = ((np.arange(P)[:, None] + (np.arange(ratio)[None, :] + 0.5) / ratio)
                .reshape(1, -1) / P)
        v = tensor.add(lo, tensor.multiply(size, f(frac)))
        out = tensor.logical_or(tensor.less(v, f(-1.0)), tensor.greater(v, f(float(limit))))
        v = tensor.maximum(v, f(0.0))
        low = tensor.floor(v)
        edge = tensor.greater_equal(low, f(limit - 1.0))
        low = tensor.where(edge, f(limit - 1.0), low)
        v = tensor.where(edge, low, v)
        high = tensor.where(edge, low, tensor.add(low, f(1.0)))
        return low, high, tensor.subtract(v, low), out

    ylo, yhi, ly, yout = axis_coords(y0, size_h, PH, H)
    xlo, xhi, lx, xout = axis_coords(x0, size_w, PW, W)
    e3 = lambda t: transform.expand_dims(t, 2)  # noqa: E731  (R, Py) -> (R, Py, 1)
    e2 = lambda t: transform.expand_dims(t, 1)  # noqa: E731  (R, Px) -> (R, 1, Px)
    keep = transform.cast(tensor.logical_not(tensor.logical_or(e3(yout), e2(xout))), dt)
    one = f(1.0)
    wy = [tensor.subtract(one, ly), ly]
    wx = [tensor.subtract(one, lx), lx]
    data = transform.transpose(X, [0, 2, 3, 1])                       # (N, H, W, C)
    shape3 = [R, PH * ratio, PW * ratio]
    b = transform.broadcast_to(reshape_to(transform.cast(bidx, "int64"), [R, 1, 1]),
                               shape3)
    terms = []
    for yi, yv in enumerate((ylo, yhi)):
        for xi, xv in enumerate((xlo, xhi)):
            idx = tensor.stack([b, transform.broadcast_to(transform.cast(e3(yv), "int64"), shape3),
                                transform.broadcast_to(transform.cast(e2(xv), "int64"), shape3)],
                               0)
            w = tensor.multiply(tensor.multiply(e3(wy[yi]), e2(wx[xi])), keep)
            v = transform.gather_nd(data, idx)                             # (R, Py, Px, C)
            terms.append(tensor.multiply(v, transform.expand_dims(w, 3)))
    grid = [R, PH, ratio, PW, ratio, C]
    if mode == "avg":
        tot = tensor.add(tensor.add(terms[0], terms[1]), tensor.add(terms[2], terms[3]))
        out = tensor.divide(_red.sum(reshape_to(tot, grid), axis=[2, 4]),
                            f(float(ratio * ratio)))
    elif mode == "max":
        m = tensor.maximum(tensor.maximum(terms[0], terms[1]), tensor.maximum(terms[2], terms[3]))
        out = _red.max(reshape_to(m, grid), axis=[2, 4])
    else:
        raise ctx.fail(f"mode={mode!r} is not supported (avg, max)")
    return transform.transpose(out, [0, 3, 1, 2])
