"""ONNX convolutions: Conv (1-3-D), ConvTranspose (2-D with groups and dilation; 1-D through
2-D; 3-D as a convolution of the spread input), DeformConv and Col2Im.

- DeformConv (2-D): every kernel tap's bilinear sample at its offset position (zero outside,
  as GridSample with align_corners, which defines it) fetched with gather_nd, times the mask,
  then one dense per group over (input channel, tap).
- Col2Im: a constant 0/1 matrix (block position -> image pixel), one dense per (N, C)."""

from __future__ import annotations

import itertools

import numpy as np

from ...expr import RelayExpr, const
from ...op import nn, nn_nd, tensor, transform
from ..common import reshape_to
from .context import ImportContext, check_2d, dtype_of, shape_of
from .dyn_args import runtime_input
from .registry import Attrs, Inputs, Names, Output, converter


def conv_pads(ctx: ImportContext, attrs: Attrs, in_sp: list[int], k: list[int],
              strides: list[int], dil: list[int]) -> list[int]:
    """Begin and end pads of a convolution or pool (``auto_pad`` resolved, as ONNX)."""
    nd = len(k)
    auto = attrs.get("auto_pad", "NOTSET")
    if isinstance(auto, bytes):
        auto = auto.decode()
    if auto in ("NOTSET", ""):
        return list(attrs.get("pads", [0] * (2 * nd)))
    if auto == "VALID":
        return [0] * (2 * nd)
    if auto not in ("SAME_UPPER", "SAME_LOWER"):
        raise ctx.fail(f"attribute auto_pad={auto!r} is not supported")
    begin, end = [], []
    for s_in, kk, s, d in zip(in_sp, k, strides, dil):
        out = -(-s_in // s)
        total = max((out - 1) * s + (kk - 1) * d + 1 - s_in, 0)
        small, big = total // 2, total - total // 2
        begin.append(small if auto == "SAME_UPPER" else big)
        end.append(big if auto == "SAME_UPPER" else small)
    return begin + end


@converter("Conv")
def conv(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    x, w = inputs[0], inputs[1]
    xs, ws = shape_of(x), shape_of(w)
    nd = len(xs) - 2
    if nd not in (1, 2, 3):
        raise ctx.fail(f"only 1-D, 2-D and 3-D convolutions are supported, got data shape {xs}")
    k = list(attrs.get("kernel_shape", ws[2:]))
    strides = list(attrs.get("strides", [1] * nd))
    dil = list(attrs.get("dilations", [1] * nd))
    pads = conv_pads(ctx, attrs, xs[2:], k, strides, dil)
    fn = {1: nn_nd.conv1d, 2: nn.conv2d, 3: nn_nd.conv3d}[nd]
    out = fn(x, w, strides=strides, padding=pads, dilation=dil, groups=attrs.get("group", 1),
             channels=ws[0], kernel_size=k)
    if len(inputs) > 2 and inputs[2] is not None:
        out = nn.bias_add(out, inputs[2], axis=1)
    return out


@converter("ConvTranspose")
def _conv_t(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    x, w = inputs[0], inputs[1]
    xs, ws = shape_of(x), shape_of(w)
    g = attrs.get("group", 1)
    if len(xs) == 3:  # 1-D: a 2-D transposed convolution of height 1
        attrs = dict(attrs)
        for key, pad in (("strides", 1), ("dilations", 1), ("output_padding", 0)):
            if key in attrs:
                attrs[key] = [pad] + list(attrs[key])
        if "kernel_shape" in attrs:
            attrs["kernel_shape"] = [1] + list(attrs["kernel_shape"])
        if "pads" in attrs:
            attrs["pads"] = [0, attrs["pads"][0], 0, attrs["pads"][1]]
        if "output_shape" in attrs:
            attrs["output_shape"] = [1] + list(attrs["output_shape"])[-1:]
        x = reshape_to(x, (xs[0], xs[1], 1, xs[2]))
        w = reshape_to(w, (ws[0], ws[1], 1, ws[2]))
        y = _conv_t(ctx, [x, w] + list(inputs[2:]), attrs, names)
        ys = shape_of(y)
        return reshape_to(y, (ys[0], ys[1], ys[3]))
    if len(xs) == 5:
        return _conv_t_as_conv(ctx, inputs, attrs)
    check_2d(ctx, x)
    k = list(attrs.get("kernel_shape", ws[2:]))
    strides = list(attrs.get("strides", [1, 1]))
    dil = list(attrs.get("dilations", [1, 1]))
    opad = list(attrs.get("output_padding", [0, 0]))
    pads = _conv_t_pads(ctx, attrs, xs[2:], k, strides, dil, opad)
    # groups and dilation go to the op (relay.transform.ConvTransposeToConv turns it into one
    # convolution per stride phase, grouped and dilated as needed; no zero taps, no split)
    out = nn.conv2d_transpose(x, w, strides=strides, padding=pads, dilation=dil, groups=g,
                              channels=ws[1] * g, kernel_size=k, output_padding=opad)
    if len(inputs) > 2 and inputs[2] is not None:
        out = nn.bias_add(out, inputs[2], axis=1)
    return out


def _conv_t_as_conv(ctx: ImportContext, inputs: Inputs, attrs: Attrs) -> RelayExpr:
    """3-D ConvTranspose as a convolution: the input with (stride - 1) zeros between elements,
    padded by the kernel's reach minus pads, convolved with the flipped, (I, O)-swapped kernel."""
    x, w = inputs[0], inputs[1]
    xs, ws = shape_of(x), shape_of(w)
    nd = len(xs) - 2
    g = attrs.get("group", 1)
    if "output_shape" in attrs or attrs.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID"):
        raise ctx.fail("3-D ConvTranspose with output_shape or auto_pad SAME_* is not supported")
    k = list(ws[2:])
    strides = list(attrs.get("strides", [1] * nd))
    dil = list(attrs.get("dilations", [1] * nd))
    opad = list(attrs.get("output_padding", [0] * nd))
    pads = (
        [0] * (2 * nd)
        if attrs.get("auto_pad") == "VALID"
        else list(attrs.get("pads", [0] * 2 * nd))
    )
    dt = dtype_of(x)
    for d in range(nd):  # zeros between the elements along each strided axis
        s = strides[d]
        if s == 1:
            continue
        ax = 2 + d
        sh = shape_of(x)
        zshape = sh[:ax + 1] + [s - 1] + sh[ax + 1:]
        spread = transform.concatenate([transform.expand_dims(x, ax + 1),
                                        const(np.zeros(zshape, dtype=dt))], ax + 1)
        x = transform.strided_slice(
            reshape_to(spread, sh[:ax] + [sh[ax] * s] + sh[ax + 1:]),
            [0], [(sh[ax] - 1) * s + 1], axes=[ax])
    width = [[0, 0], [0, 0]]
    crop = []
    for d in range(nd):
        reach = dil[d] * (k[d] - 1)
        lo, hi = reach - pads[d], reach - pads[d + nd] + opad[d]
        width.append([max(lo, 0), max(hi, 0)])
        crop.append((max(-lo, 0), max(-hi, 0)))
    x = nn.pad(x, width)
    if any(lo or hi for lo, hi in crop):
        sh = shape_of(x)
        x = transform.strided_slice(x, [lo for lo, _ in crop],
                                    [sh[2 + d] - hi for d, (_, hi) in enumerate(crop)],
                                    axes=list(range(2, 2 + nd)))
    for d in range(nd):  # flip the kernel
        w = transform.take(w, const(np.arange(k[d] - 1, -1, -1, dtype=np.int64)), axis=2 + d)
    cin = xs[1] // g
    parts = [transform.strided_slice(w, [j * cin], [(j + 1) * cin], axes=[0]) for j in range(g)]
    perm = [1, 0] + list(range(2, 2 + nd))
    wt = transform.concatenate([transform.transpose(p, perm) for p in parts], 0)
    fn = {1: nn_nd.conv1d, 2: nn.conv2d, 3: nn_nd.conv3d}[nd]
    out = fn(x, wt, strides=[1] * nd, padding=[0] * (2 * nd), dilation=dil, groups=g,
             channels=ws[1] * g, kernel_size=k)
    if len(inputs) > 2 and inputs[2] is not None:
        out = nn.bias_add(out, inputs[2], axis=1)
    return out


def _conv_t_pads(ctx: ImportContext, attrs: Attrs, in_sp: list[int], k: list[int],
                 strides: list[int], dil: list[int], opad: list[int]) -> list[int]:
    """ConvTranspose pads; from output_shape or auto_pad SAME_* as the ONNX definition (a
    negative end pad becomes extra output_padding, updated in place)."""
    auto = attrs.get("auto_pad", "NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    if auto == "VALID":
        return [0, 0, 0, 0]
    out_sp = list(attrs["output_shape"])[-2:] if "output_shape" in attrs else None
    if out_sp is None and auto in ("SAME_UPPER", "SAME_LOWER"):
        out_sp = [d * s for d, s in zip(in_sp, strides)]
    if out_sp is None:
        if auto not in ("NOTSET", ""):
            raise ctx.fail(f"attribute auto_pad={auto!r} is not supported")
        return list(attrs.get("pads", [0, 0, 0, 0]))
    begin, end = [], []
    for j in range(2):
        total = (strides[j] * (in_sp[j] - 1) + opad[j] + (k[j] - 1) * dil[j] + 1
                 - int(out_sp[j]))
        lo, hi = (total // 2, total - total // 2) if auto == "SAME_UPPER" else \
            (total - total // 2, total // 2)
        if lo < 0:
            raise ctx.fail(f"output_shape {list(out_sp)} needs a negative leading pad")
        if hi < 0:
            opad[j] -= hi
            hi = 0
        begin.append(lo)
        end.append(hi)
    return begin + end


def _bilinear_zero(data: RelayExpr, b: RelayExpr, y: RelayExpr, x: RelayExpr, H: int, W: int,
                   dt: str) -> RelayExpr:
    """data (N, H, W, C) sampled at float pixel positions y, x (same shape S, batch index b):
    (S..., C); corners outside the image count as zero."""
    def f(v):
        return const(np.asarray(v, dtype=dt))

    y0, x0 = tensor.floor(y), tensor.floor(x)
    out = None
    for dy in (0, 1):
        for dx in (0, 1):
            yc = tensor.add(y0, f(dy)) if dy else y0
            xc = tensor.add(x0, f(dx)) if dx else x0
            wy = tensor.subtract(y, y0) if dy else tensor.subtract(f(1), tensor.subtract(y, y0))
            wx = tensor.subtract(x, x0) if dx else tensor.subtract(f(1), tensor.subtract(x, x0))
            ok = tensor.logical_and(
                tensor.logical_and(tensor.greater_equal(yc, f(0)), tensor.less(yc, f(H))),
                tensor.logical_and(tensor.greater_equal(xc, f(0)), tensor.less(xc, f(W))))
            w = tensor.multiply(tensor.multiply(wy, wx), transform.cast(ok, dt))
            yi = transform.cast(tensor.clip(yc, 0.0, H - 1.0), "int64")
            xi = transform.cast(tensor.clip(xc, 0.0, W - 1.0), "int64")
            v = transform.gather_nd(data, tensor.stack([b, yi, xi], 0))
            term = tensor.multiply(v, transform.expand_dims(w, len(shape_of(y))))
            out = term if out is None else tensor.add(out, term)
    return out


@converter("DeformConv")
def _deform_conv(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    inputs = list(inputs) + [None] * (5 - len(inputs))
    X, Wt, off, B, mask = inputs[:5]
    N, C, H, W = shape_of(X)
    OC, Cg, KH, KW = shape_of(Wt)
    _, _, OH, OW = shape_of(off)
    dt = dtype_of(X)
    g = int(attrs.get("group", 1))
    og = int(attrs.get("offset_group", 1))
    sh, sw = attrs.get("strides", [1, 1])
    dh, dw = attrs.get("dilations", [1, 1])
    pads = list(attrs.get("pads", [0, 0, 0, 0]))
    K = KH * KW
    if C != Cg * g or C % og:
        raise ctx.fail(f"channels {C}, weight {shape_of(Wt)}, group {g}, offset_group {og} "
                     "do not fit")
    o = reshape_to(off, [N, og, K, 2, OH, OW])
    m = reshape_to(mask, [N, og, K, OH, OW]) if mask is not None else None
    base_y = (np.arange(OH) * sh - pads[0])[None, :, None] + \
        (np.repeat(np.arange(KH), KW) * dh)[:, None, None]            # (K, OH, 1)
    base_x = (np.arange(OW) * sw - pads[1])[None, None, :] + \
        (np.tile(np.arange(KW), KH) * dw)[:, None, None]              # (K, 1, OW)
    data = transform.transpose(X, [0, 2, 3, 1])                        # (N, H, W, C)
    b = const(np.broadcast_to(np.arange(N).reshape(N, 1, 1, 1), (N, K, OH, OW)).astype(np.int64))
    cpg = C // og
    cols = []
    for gi in range(og):
        dy, dx = (reshape_to(transform.strided_slice(o, [gi, j], [gi + 1, j + 1],
                                                            axes=[1, 3]), [N, K, OH, OW])
                  for j in (0, 1))
        y = tensor.add(dy, const(base_y.astype(dt)))
        x = tensor.add(dx, const(base_x.astype(dt)))
        dg = transform.strided_slice(data, [gi * cpg], [(gi + 1) * cpg], axes=[3])
        v = _bilinear_zero(dg, b, y, x, H, W, dt)                      # (N, K, OH, OW, cpg)
        if m is not None:
            mg = reshape_to(transform.strided_slice(m, [gi], [gi + 1], axes=[1]),
                                   [N, K, OH, OW, 1])
            v = tensor.multiply(v, mg)
        cols.append(v)
    col = cols[0] if og == 1 else transform.concatenate(cols, 4)      # (N, K, OH, OW, C)
    col = transform.transpose(col, [0, 2, 3, 4, 1])                    # (N, OH, OW, C, K)
    outs = []
    ocg = OC // g
    for gi in range(g):
        cg = transform.strided_slice(col, [gi * Cg], [(gi + 1) * Cg], axes=[3])
        wg = transform.strided_slice(Wt, [gi * ocg], [(gi + 1) * ocg], axes=[0])
        y = nn.dense(reshape_to(cg, [N * OH * OW, Cg * K]),
                     reshape_to(wg, [ocg, Cg * K]))
        outs.append(reshape_to(y, [N, OH, OW, ocg]))
    out = outs[0] if g == 1 else transform.concatenate(outs, 3)
    out = transform.transpose(out, [0, 3, 1, 2])
    if B is not None:
        out = nn.bias_add(out, B, axis=1)
    return out


@converter("Col2Im")
def _col2im(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    x = inputs[0]
    if runtime_input(ctx, names, 1) or runtime_input(ctx, names, 2):
        from ...op.dyn import spatial

        return spatial.col2im(x, inputs[1], inputs[2], attrs.get("dilations"),
                              attrs.get("pads"), attrs.get("strides"), node=ctx.where())
    N, CK, L = shape_of(x)
    image = [int(v) for v in ctx.value(names[1], "image_shape")]
    block = [int(v) for v in ctx.value(names[2], "block_shape")]
    nd = len(image)
    dil = list(attrs.get("dilations", [1] * nd))
    strides = list(attrs.get("strides", [1] * nd))
    pads = list(attrs.get("pads", [0] * (2 * nd)))
    K = int(np.prod(block))
    if CK % K:
        raise ctx.fail(f"input channels {CK} are not a multiple of the block size {K}")
    C = CK // K
    nblk = [(image[d] + pads[d] + pads[d + nd] - (dil[d] * (block[d] - 1) + 1)) // strides[d] + 1
            for d in range(nd)]
    if int(np.prod(nblk)) != L:
        raise ctx.fail(f"{L} blocks given, image {image} / block {block} make {nblk}")
    P = int(np.prod(image))
    m = np.zeros((K * L, P))
    for k, koff in enumerate(itertools.product(*[range(b) for b in block])):
        for li, lpos in enumerate(itertools.product(*[range(b) for b in nblk])):
            pix = [lpos[d] * strides[d] - pads[d] + koff[d] * dil[d] for d in range(nd)]
            if all(0 <= p < image[d] for d, p in enumerate(pix)):
                m[k * L + li, int(np.ravel_multi_index(pix, image))] += 1
    flat = reshape_to(x, [N * C, K * L])
    y = nn.dense(flat, const(np.ascontiguousarray(m.T).astype(dtype_of(x))))
    return reshape_to(y, [N, C] + image)
