"""Smaller ONNX operators built from relay ops over static shapes.

- ReverseSequence: a gather along the time axis with per-batch reversed positions.
- Col2Im: a constant 0/1 matrix (block position -> image pixel), one dense per (N, C).
- MaxUnpool: the values scattered to their flat indices (a one-hot mask, summed).
- Det: the Leibniz formula (n <= 4), an exact sum of signed products.
- TensorScatter: the updates written at ``write_indices`` (+ position, modulo the cache for
  ``circular``) along the sequence axis, as ScatterElements.
- MaxPool with its Indices output (2-D): the windows gathered through a constant index table,
  the max and its first position (argmax), flattened as ONNX (row- or column-major).
- RoiAlign (sampling_ratio > 0): the bilinear samples of every bin fetched with gather_nd,
  averaged (or the ONNX max of weighted corners), as the ONNX definition.
- DeformConv (2-D): every kernel tap's bilinear sample at its offset position (zero outside,
  as GridSample with align_corners, which defines it) fetched with gather_nd, times the mask,
  then one dense per group over (input channel, tap).
- TfIdfVectorizer (integer pools): each pool n-gram's count is a sum over start positions of
  the AND of shifted equality tests, for every skip distance (unigrams once).
"""

from __future__ import annotations

import itertools

import numpy as np

from ..expr import RelayExpr, const
from ..op import nn, tensor, transform
from ..op import reduce as _red
from ..type_infer import infer_type
from .common import reshape_to
from .onnx_index import _scatter_elements

__all__ = ["CONVERTERS"]


def _shape(e: RelayExpr) -> list[int]:
    return [int(d) for d in infer_type(e).checked_type.shape]


def _dtype(e: RelayExpr) -> str:
    return str(infer_type(e).checked_type.dtype)


def _bshape(r: int, axis: int, size: int) -> list[int]:
    s = [1] * r
    s[axis] = size
    return s


def _reverse_sequence(c, i, a, n):
    x, lens = i
    s = _shape(x)
    r = len(s)
    bax, tax = int(a.get("batch_axis", 1)) % r, int(a.get("time_axis", 0)) % r
    T = s[tax]
    L = reshape_to(transform.cast(lens, "int64"), _bshape(r, bax, s[bax]))
    t = const(np.arange(T, dtype=np.int64).reshape(_bshape(r, tax, T)))
    one = const(np.int64(1))
    src = tensor.where(tensor.less(t, L), tensor.subtract(tensor.subtract(L, one), t), t)
    src = transform.broadcast_to(src, s)
    return transform.gather(x, tax, src)


def _col2im(c, i, a, n):
    x = i[0]
    N, CK, L = _shape(x)
    image = [int(v) for v in c.value(n[1], "image_shape")]
    block = [int(v) for v in c.value(n[2], "block_shape")]
    nd = len(image)
    dil = list(a.get("dilations", [1] * nd))
    strides = list(a.get("strides", [1] * nd))
    pads = list(a.get("pads", [0] * (2 * nd)))
    K = int(np.prod(block))
    if CK % K:
        raise c.fail(f"input channels {CK} are not a multiple of the block size {K}")
    C = CK // K
    nblk = [(image[d] + pads[d] + pads[d + nd] - (dil[d] * (block[d] - 1) + 1)) // strides[d] + 1
            for d in range(nd)]
    if int(np.prod(nblk)) != L:
        raise c.fail(f"{L} blocks given, image {image} / block {block} make {nblk}")
    P = int(np.prod(image))
    m = np.zeros((K * L, P))
    for k, koff in enumerate(itertools.product(*[range(b) for b in block])):
        for li, lpos in enumerate(itertools.product(*[range(b) for b in nblk])):
            pix = [lpos[d] * strides[d] - pads[d] + koff[d] * dil[d] for d in range(nd)]
            if all(0 <= p < image[d] for d, p in enumerate(pix)):
                m[k * L + li, int(np.ravel_multi_index(pix, image))] += 1
    flat = reshape_to(x, [N * C, K * L])
    y = nn.dense(flat, const(np.ascontiguousarray(m.T).astype(_dtype(x))))
    return reshape_to(y, [N, C] + image)


def _max_unpool(c, i, a, n):
    x, idx = i[0], i[1]
    s = _shape(x)
    nd = len(s) - 2
    k = list(a["kernel_shape"])
    strides = list(a.get("strides", [1] * nd))
    pads = list(a.get("pads", [0] * (2 * nd)))
    default = s[:2] + [(s[2 + d] - 1) * strides[d] + k[d] - pads[d] - pads[d + nd]
                       for d in range(nd)]
    out = [int(v) for v in c.value(n[2], "output_shape")] if len(i) > 2 and i[2] is not None \
        else default
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
    y = _red.sum(tensor.where(mask, vals, const(np.zeros((), _dtype(x)))), axis=[0])
    return reshape_to(y, out)


def _det(c, i, a, n):
    x = i[0]
    s = _shape(x)
    m = s[-1]
    if len(s) < 2 or s[-2] != m:
        raise c.fail(f"expected square matrices (..., n, n), got {s}")
    if m > 4:
        raise c.fail(f"determinants of {m}x{m} matrices are not supported (n <= 4)")
    r = len(s)

    def entry(row: int, col: int) -> RelayExpr:
        e = transform.strided_slice(x, [row, col], [row + 1, col + 1], axes=[r - 2, r - 1])
        return reshape_to(e, s[:-2])

    total = None
    for perm in itertools.permutations(range(m)):
        inv = sum(1 for p, q in itertools.combinations(perm, 2) if p > q)
        term = None
        for row, col in enumerate(perm):
            e = entry(row, col)
            term = e if term is None else tensor.multiply(term, e)
        if total is None:
            total = term if inv % 2 == 0 else tensor.negative(term)
        else:
            total = tensor.add(total, term) if inv % 2 == 0 else tensor.subtract(total, term)
    return total


def _tensor_scatter(c, i, a, n):
    cache, upd = i[0], i[1]
    write = i[2] if len(i) > 2 else None
    cs, us = _shape(cache), _shape(upd)
    r = len(cs)
    axis = int(a.get("axis", -2)) % r
    S, U = cs[axis], us[axis]
    pos = const(np.arange(U, dtype=np.int64).reshape(_bshape(r, axis, U)))
    if write is not None:
        w = reshape_to(transform.cast(write, "int64"), _bshape(r, 0, cs[0]))
        pos = tensor.add(pos, w)
    if a.get("mode", "linear") == "circular":
        pos = tensor.floor_mod(pos, const(np.int64(S)))
    idx = transform.broadcast_to(pos, us)
    return _scatter_elements(c, [cache, idx, upd], {"axis": axis}, n)


def _tfidf(c, i, a, n):
    x = i[0]
    s = _shape(x)
    if len(s) not in (1, 2):
        raise c.fail(f"input must be [C] or [B, C], got {s}")
    if "pool_int64s" not in a:
        raise c.fail("only pool_int64s is supported (no strings)")
    pool = [int(v) for v in a["pool_int64s"]]
    counts = [int(v) for v in a["ngram_counts"]]
    indexes = [int(v) for v in a["ngram_indexes"]]
    lo, hi, skip = int(a["min_gram_length"]), int(a["max_gram_length"]), int(a["max_skip_count"])
    mode = a["mode"]
    weights = list(a.get("weights", []))
    size = max(indexes) + 1
    C = s[-1]
    ax = len(s) - 1
    grams: list[tuple[list[int], int]] = []  # (n-gram, output index) in id order
    gid = 0
    for k, start in enumerate(counts):
        end = counts[k + 1] if k + 1 < len(counts) else len(pool)
        for j in range(start, end, k + 1):
            if lo <= k + 1 <= hi:
                grams.append((pool[j:j + k + 1], indexes[gid]))
            gid += 1
    per_out: dict[int, RelayExpr] = {}
    for gram, o in grams:
        k = len(gram)
        total = None
        for d in (range(1, 2) if k == 1 else range(1, skip + 2)):
            span = (k - 1) * d
            if span >= C:
                continue
            hit = None
            for j, g in enumerate(gram):
                part = transform.strided_slice(x, [j * d], [C - span + j * d], axes=[ax])
                eq = tensor.equal(part, const(np.asarray(g, dtype=_dtype(x))))
                hit = eq if hit is None else tensor.logical_and(hit, eq)
            cnt = _red.sum(transform.cast(hit, "float32"), axis=[ax])
            total = cnt if total is None else tensor.add(total, cnt)
        if total is not None:
            per_out[o] = total if o not in per_out else tensor.add(per_out[o], total)
    zero = const(np.zeros(s[:-1], dtype=np.float32))
    y = tensor.stack([per_out.get(o, zero) for o in range(size)], ax)
    if mode == "TF":
        return y
    w = const(np.asarray(weights if weights else [1.0] * size, dtype=np.float32))
    if mode == "IDF":
        return tensor.where(tensor.greater(y, const(np.float32(0))), transform.broadcast_to(
            w, s[:-1] + [size]), const(np.zeros(s[:-1] + [size], np.float32)))
    if mode == "TFIDF":
        return tensor.multiply(y, w)
    raise c.fail(f"mode={mode!r} is not supported (TF, IDF, TFIDF)")


def maxpool_with_indices(c, x: RelayExpr, a: dict) -> list[RelayExpr]:
    """[values, indices] of a 2-D MaxPool (ONNX's Indices: flat over the whole tensor)."""
    s = _shape(x)
    if len(s) != 4:
        raise c.fail(f"the Indices output is supported for 2-D pooling only, got shape {s}")
    N, C, H, W = s
    k = list(a["kernel_shape"])
    st = list(a.get("strides", [1, 1]))
    dil = list(a.get("dilations", [1, 1]))
    from .onnx import _conv_pads

    pads = _conv_pads(c, a, [H, W], k, st, dil)
    outs = []
    for d, size in enumerate((H, W)):
        span = size + pads[d] + pads[d + 2] - ((k[d] - 1) * dil[d] + 1)
        o = (-(-span // st[d]) if a.get("ceil_mode", 0) else span // st[d]) + 1
        if a.get("ceil_mode", 0) and (o - 1) * st[d] >= size + pads[d]:
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
    dt = _dtype(x)
    low = np.finfo(dt).min if np.dtype(dt).kind == "f" else np.iinfo(dt).min
    win = tensor.where(const(valid), win, const(np.asarray(-np.inf if np.dtype(dt).kind == "f"
                                                           else low, dtype=dt)))
    vals = reshape_to(_red.max(win, axis=[3]), [N, C, OH, OW])
    arg = transform.expand_dims(transform.cast(_red.argmax(win, axis=[3]), "int64"), 3)
    table = col if a.get("storage_order", 0) else row
    pos = transform.gather(transform.broadcast_to(const(table), [N, C, OH * OW, K]), 3, arg)
    base = const((np.arange(N * C, dtype=np.int64) * H * W).reshape(N, C, 1, 1))
    idx = reshape_to(tensor.add(pos, base), [N, C, OH, OW])
    return [vals, idx]


def _roi_align(c, i, a, n):
    X, rois, bidx = i
    N, C, H, W = _shape(X)
    R = _shape(rois)[0]
    dt = _dtype(X)
    ratio = int(a.get("sampling_ratio", 0))
    if ratio <= 0:
        raise c.fail("sampling_ratio=0 (adaptive: a data-dependent sample count) is not "
                     "supported; give sampling_ratio > 0")
    PH, PW = int(a.get("output_height", 1)), int(a.get("output_width", 1))
    scale = float(a.get("spatial_scale", 1.0))
    half = a.get("coordinate_transformation_mode", "half_pixel") == "half_pixel"
    mode = a.get("mode", "avg")

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
        raise c.fail(f"mode={mode!r} is not supported (avg, max)")
    return transform.transpose(out, [0, 3, 1, 2])


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
            term = tensor.multiply(v, transform.expand_dims(w, len(_shape(y))))
            out = term if out is None else tensor.add(out, term)
    return out


def _deform_conv(c, i, a, n):
    i = list(i) + [None] * (5 - len(i))
    X, Wt, off, B, mask = i[:5]
    N, C, H, W = _shape(X)
    OC, Cg, KH, KW = _shape(Wt)
    _, _, OH, OW = _shape(off)
    dt = _dtype(X)
    g = int(a.get("group", 1))
    og = int(a.get("offset_group", 1))
    sh, sw = a.get("strides", [1, 1])
    dh, dw = a.get("dilations", [1, 1])
    pads = list(a.get("pads", [0, 0, 0, 0]))
    K = KH * KW
    if C != Cg * g or C % og:
        raise c.fail(f"channels {C}, weight {_shape(Wt)}, group {g}, offset_group {og} "
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


def _bitcast(c, i, a, n):
    """Between integer (or bool) types of one width the bits are the two's-complement value
    modulo 2**bits: a cast. Float <-> integer reinterpretation has no relay op here."""
    from onnx import helper

    src = np.dtype(_dtype(i[0]))
    dst = np.dtype(helper.tensor_dtype_to_np_dtype(int(a["to"])))
    ints = all(d.kind in "iub" for d in (src, dst))
    if src.itemsize != dst.itemsize or not ints:
        raise c.fail(f"BitCast from {src} to {dst} is not supported (only between integer "
                     "types of one width)")
    return transform.cast(i[0], str(dst))


CONVERTERS = {
    "BitCast": _bitcast,
    "DeformConv": _deform_conv,
    "RoiAlign": _roi_align,
    "TfIdfVectorizer": _tfidf,
    "ReverseSequence": _reverse_sequence, "Col2Im": _col2im, "MaxUnpool": _max_unpool,
    "Det": _det, "TensorScatter": _tensor_scatter,
}
