"""Numpy references of the nn operators (convolutions, dense, pooling, normalization, softmax)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["conv2d_nchw_python", "group_conv2d_nchw_python", "depthwise_conv2d_nchw_python",
           "conv2d_transpose_nchw_python", "conv2d_NCHWc_python", "conv_nd_python",
           "conv_transpose_nd_python", "dense_python",
           "matmul_python", "batch_matmul_python", "pool2d_python", "pool_nd_python",
           "global_pool_python", "adaptive_pool_python",
           "batch_norm_python", "layer_norm_python", "instance_norm_python",
           "group_norm_python", "lrn_python", "dilate_python", "softmax_python", "log_softmax_python",
           "nchw_to_nchwc", "nchwc_to_nchw", "oihw_to_kcrsck"]


def _pair(v: Any) -> tuple[int, int]:
    return (int(v[0]), int(v[1])) if isinstance(v, (list, tuple)) else (int(v), int(v))


def _pad4(padding: Any, kh: int, kw: int) -> tuple[int, int, int, int]:
    if isinstance(padding, str):
        if padding.upper() == "VALID":
            return 0, 0, 0, 0
        ph, pw = kh - 1, kw - 1
        return ph // 2, pw // 2, ph - ph // 2, pw - pw // 2
    if isinstance(padding, (list, tuple)):
        if len(padding) == 2:
            return padding[0], padding[1], padding[0], padding[1]
        return tuple(padding)  # type: ignore[return-value]
    return padding, padding, padding, padding


def group_conv2d_nchw_python(a: np.ndarray, w: np.ndarray, stride: Any, padding: Any,
                             dilation: Any = 1, groups: int = 1) -> np.ndarray:
    """Direct convolution by a sum of shifted slices (float64 accumulation)."""
    n, c, h, wd = a.shape
    oc, icg, kh, kw = w.shape
    sh, sw = _pair(stride)
    dh, dw = _pair(dilation)
    pt, pl, pb, pr = _pad4(padding, (kh - 1) * dh + 1, (kw - 1) * dw + 1)
    ap = np.pad(a.astype(np.float64), ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    oh = (h + pt + pb - (kh - 1) * dh - 1) // sh + 1
    ow = (wd + pl + pr - (kw - 1) * dw - 1) // sw + 1
    out = np.zeros((n, oc, oh, ow))
    ocg = oc // groups
    for g in range(groups):
        ag = ap[:, g * icg:(g + 1) * icg]
        wg = w[g * ocg:(g + 1) * ocg].astype(np.float64)
        for y in range(kh):
            for x in range(kw):
                sl = ag[:, :, y * dh:y * dh + (oh - 1) * sh + 1:sh, x * dw:x * dw + (ow - 1) * sw + 1:sw]
                out[:, g * ocg:(g + 1) * ocg] += np.einsum("nchw,oc->nohw", sl, wg[:, :, y, x])
    return out.astype(a.dtype)


def conv2d_nchw_python(a: np.ndarray, w: np.ndarray, stride: Any, padding: Any,
                       dilation: Any = 1) -> np.ndarray:
    return group_conv2d_nchw_python(a, w, stride, padding, dilation, 1)


def depthwise_conv2d_nchw_python(a: np.ndarray, w: np.ndarray, stride: Any, padding: Any,
                                 dilation: Any = 1) -> np.ndarray:
    """``w[C, M, KH, KW]``: output channel ``c*M + m`` convolves input channel ``c``."""
    c, m, kh, kw = w.shape
    return group_conv2d_nchw_python(a, w.reshape(c * m, 1, kh, kw), stride, padding, dilation,
                                    groups=c)


def conv2d_transpose_nchw_python(a: np.ndarray, w: np.ndarray, stride: Any, padding: Any,
                                 output_padding: Any = 0) -> np.ndarray:
    """Scatter form: every input pixel adds ``a * w`` into the (uncropped) output window."""
    n, c, h, wd = a.shape
    _, oc, kh, kw = w.shape
    sh, sw = _pair(stride)
    oph, opw = _pair(output_padding) if output_padding else (0, 0)
    pt, pl, pb, pr = _pad4(padding, kh, kw)
    full = np.zeros((n, oc, (h - 1) * sh + kh + oph, (wd - 1) * sw + kw + opw))
    a64, w64 = a.astype(np.float64), w.astype(np.float64)
    for y in range(h):
        for x in range(wd):
            full[:, :, y * sh:y * sh + kh, x * sw:x * sw + kw] += np.einsum(
                "nc,cokl->nokl", a64[:, :, y, x], w64)
    oh = (h - 1) * sh + kh - pt - pb + oph
    ow = (wd - 1) * sw + kw - pl - pr + opw
    return full[:, :, pt:pt + oh, pl:pl + ow].astype(a.dtype)


def conv_nd_python(a: np.ndarray, w: np.ndarray, strides: Any, before: Any, after: Any,
                   dilation: Any, groups: int = 1) -> np.ndarray:
    """Grouped, dilated convolution over any number of spatial axes (sum of shifted slices)."""
    import itertools

    nsp = a.ndim - 2
    n, c = a.shape[:2]
    oc, icg, *ks = w.shape
    ap = np.pad(a.astype(np.float64), [(0, 0), (0, 0), *zip(before, after)])
    outs = [(ap.shape[2 + i] - (ks[i] - 1) * dilation[i] - 1) // strides[i] + 1
            for i in range(nsp)]
    out = np.zeros((n, oc, *outs))
    ocg = oc // groups
    for g in range(groups):
        ag = ap[:, g * icg:(g + 1) * icg]
        wg = w[g * ocg:(g + 1) * ocg].astype(np.float64)
        for off in itertools.product(*(range(k) for k in ks)):
            sl = ag[(slice(None), slice(None), *(
                slice(off[i] * dilation[i], off[i] * dilation[i] + (outs[i] - 1) * strides[i] + 1,
                      strides[i]) for i in range(nsp)))]
            out[:, g * ocg:(g + 1) * ocg] += np.einsum("nc...,oc->no...", sl,
                                                       wg[(slice(None), slice(None), *off)])
    return out.astype(a.dtype)


def conv_transpose_nd_python(a: np.ndarray, w: np.ndarray, strides: Any, before: Any,
                             after: Any, output_padding: Any, groups: int = 1,
                             dilation: Any = None) -> np.ndarray:
    """Scatter form over any number of spatial axes: each input position adds
    ``a * w`` (kernel taps ``dilation`` apart) into the uncropped output, then crop."""
    import itertools

    nsp = a.ndim - 2
    n, c, *sizes = a.shape
    _, ocg, *ks = w.shape
    dil = dilation or [1] * nsp
    full_sz = [(sizes[i] - 1) * strides[i] + (ks[i] - 1) * dil[i] + 1 + output_padding[i]
               for i in range(nsp)]
    full = np.zeros((n, ocg * groups, *full_sz))
    icg = c // groups
    a64, w64 = a.astype(np.float64), w.astype(np.float64)
    for g in range(groups):
        for pos in itertools.product(*(range(s) for s in sizes)):
            for off in itertools.product(*(range(k) for k in ks)):
                o = tuple(pos[i] * strides[i] + off[i] * dil[i] for i in range(nsp))
                full[(slice(None), slice(g * ocg, (g + 1) * ocg), *o)] += (
                    a64[(slice(None), slice(g * icg, (g + 1) * icg), *pos)]
                    @ w64[(slice(g * icg, (g + 1) * icg), slice(None), *off)])
    crop = tuple(slice(before[i], full_sz[i] - after[i]) for i in range(nsp))
    return full[(slice(None), slice(None), *crop)].astype(a.dtype)


def nchw_to_nchwc(a: np.ndarray, bn: int) -> np.ndarray:
    n, c, h, w = a.shape
    return np.ascontiguousarray(a.reshape(n, c // bn, bn, h, w).transpose(0, 1, 3, 4, 2))


def nchwc_to_nchw(a: np.ndarray) -> np.ndarray:
    n, cc, h, w, bn = a.shape
    return np.ascontiguousarray(a.transpose(0, 1, 4, 2, 3).reshape(n, cc * bn, h, w))


def oihw_to_kcrsck(w: np.ndarray, ic_bn: int, oc_bn: int) -> np.ndarray:
    """OIHW -> [O/oc_bn, I/ic_bn, H, W, ic_bn, oc_bn]."""
    o, i, kh, kw = w.shape
    return np.ascontiguousarray(
        w.reshape(o // oc_bn, oc_bn, i // ic_bn, ic_bn, kh, kw).transpose(0, 2, 4, 5, 3, 1))


def conv2d_NCHWc_python(a: np.ndarray, w: np.ndarray, stride: Any, padding: Any,
                        dilation: Any = 1) -> np.ndarray:
    """Blocked data/kernel in, blocked out (through the NCHW reference)."""
    oc_bn = w.shape[5]
    o, ic, kh, kw = w.shape[0] * oc_bn, w.shape[1] * w.shape[4], w.shape[2], w.shape[3]
    w_oihw = w.transpose(0, 5, 1, 4, 2, 3).reshape(o, ic, kh, kw)
    out = conv2d_nchw_python(nchwc_to_nchw(a), w_oihw, stride, padding, dilation)
    return nchw_to_nchwc(out, oc_bn)


def dense_python(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    out = x.astype(np.float64) @ w.astype(np.float64).T
    if bias is not None:
        out = out + bias
    return out.astype(x.dtype)


def matmul_python(a: np.ndarray, b: np.ndarray, bias: np.ndarray | None = None,
                  transpose_a: bool = False, transpose_b: bool = False) -> np.ndarray:
    a64 = a.astype(np.float64).T if transpose_a else a.astype(np.float64)
    b64 = b.astype(np.float64).T if transpose_b else b.astype(np.float64)
    out = a64 @ b64
    if bias is not None:
        out = out + bias
    return out.astype(a.dtype)


def batch_matmul_python(a: np.ndarray, b: np.ndarray, transpose_a: bool = False,
                        transpose_b: bool = True) -> np.ndarray:
    a64 = a.astype(np.float64).transpose(0, 2, 1) if transpose_a else a.astype(np.float64)
    b64 = b.astype(np.float64).transpose(0, 2, 1) if transpose_b else b.astype(np.float64)
    return np.matmul(a64, b64).astype(a.dtype)


def pool2d_python(a: np.ndarray, kernel: Any, stride: Any, dilation: Any, padding: Any,
                  pool_type: str, ceil_mode: bool = False,
                  count_include_pad: bool = True) -> np.ndarray:
    """NCHW pooling by explicit windows; padding (top, left, bottom, right)."""
    n, c, h, w = a.shape
    kh, kw = _pair(kernel)
    sh, sw = _pair(stride)
    dh, dw = _pair(dilation)
    pt, pl, pb, pr = _pad4(padding, kh, kw)

    def osize(size: int, k: int, s: int, d: int, lo: int, hi: int) -> int:
        dk = (k - 1) * d + 1
        if ceil_mode:
            o = math.ceil((size + lo + hi - dk) / s) + 1
            if (o - 1) * s >= size + lo:  # the last window must start inside input or left pad
                o -= 1
            return o
        return (size + lo + hi - dk) // s + 1

    oh, ow = osize(h, kh, sh, dh, pt, pb), osize(w, kw, sw, dw, pl, pr)
    out = np.zeros((n, c, oh, ow), dtype=np.float64)
    a64 = a.astype(np.float64)
    for y in range(oh):
        for x in range(ow):
            ys = [y * sh - pt + i * dh for i in range(kh)]
            xs = [x * sw - pl + j * dw for j in range(kw)]
            yv = [v for v in ys if 0 <= v < h]
            xv = [v for v in xs if 0 <= v < w]
            win = a64[:, :, yv][:, :, :, xv]
            if pool_type == "max":  # a window on padding only: -inf (the padding's value)
                out[:, :, y, x] = win.max(axis=(2, 3)) if win.size else -np.inf
            else:
                if count_include_pad:
                    # the window clipped to the padded extent (as TVM / ONNX count it)
                    ny = sum(1 for v in ys if -pt <= v < h + pb)
                    nx = sum(1 for v in xs if -pl <= v < w + pr)
                    cnt = ny * nx
                else:
                    cnt = len(yv) * len(xv)
                out[:, :, y, x] = win.sum(axis=(2, 3)) / max(cnt, 1)
    return out.astype(a.dtype)


def pool_nd_python(a: np.ndarray, kernel: Any, stride: Any, dilation: Any, before: Any,
                   after: Any, pool_type: str, ceil_mode: bool = False,
                   count_include_pad: bool = True) -> np.ndarray:
    """Pooling over every axis after the first two (any number of spatial axes)."""
    import itertools

    nsp = a.ndim - 2
    sizes = a.shape[2:]

    def osize(i: int) -> int:
        dk = (kernel[i] - 1) * dilation[i] + 1
        span = sizes[i] + before[i] + after[i] - dk
        if not ceil_mode:
            return span // stride[i] + 1
        o = math.ceil(span / stride[i]) + 1
        return o - 1 if (o - 1) * stride[i] >= sizes[i] + before[i] else o

    outs = [osize(i) for i in range(nsp)]
    out = np.zeros((*a.shape[:2], *outs))
    a64 = a.astype(np.float64)
    for pos in itertools.product(*(range(o) for o in outs)):
        coords = [[pos[i] * stride[i] - before[i] + j * dilation[i] for j in range(kernel[i])]
                  for i in range(nsp)]
        valid = [[v for v in c if 0 <= v < sizes[i]] for i, c in enumerate(coords)]
        win = a64[(slice(None), slice(None), *np.ix_(*valid))]
        if pool_type == "max":
            out[(slice(None), slice(None), *pos)] = win.reshape(*a.shape[:2], -1).max(-1)
            continue
        if count_include_pad:
            cnt = math.prod(sum(1 for v in c if -before[i] <= v < sizes[i] + after[i])
                            for i, c in enumerate(coords))
        else:
            cnt = math.prod(len(v) for v in valid)
        out[(slice(None), slice(None), *pos)] = win.reshape(*a.shape[:2], -1).sum(-1) / cnt
    return out.astype(a.dtype)


def global_pool_python(a: np.ndarray, pool_type: str) -> np.ndarray:
    f = np.max if pool_type == "max" else np.mean
    return f(a.astype(np.float64), axis=(2, 3), keepdims=True).astype(a.dtype)


def adaptive_pool_python(a: np.ndarray, output_size: Any, pool_type: str) -> np.ndarray:
    n, c, h, w = a.shape
    oh, ow = _pair(output_size)
    out = np.zeros((n, c, oh, ow))
    for y in range(oh):
        for x in range(ow):
            win = a[:, :, (y * h) // oh:-(-((y + 1) * h) // oh),
                    (x * w) // ow:-(-((x + 1) * w) // ow)].astype(np.float64)
            out[:, :, y, x] = win.max(axis=(2, 3)) if pool_type == "max" else win.mean(axis=(2, 3))
    return out.astype(a.dtype)


def batch_norm_python(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, mean: np.ndarray,
                      var: np.ndarray, axis: int = 1, epsilon: float = 1e-5,
                      center: bool = True, scale: bool = True) -> np.ndarray:
    shape = [1] * x.ndim
    shape[axis] = x.shape[axis]
    out = (x.astype(np.float64) - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + epsilon)
    if scale:
        out = out * gamma.reshape(shape)
    if center:
        out = out + beta.reshape(shape)
    return out.astype(x.dtype)


def layer_norm_python(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray | None, axis: Any,
                      epsilon: float = 1e-5) -> np.ndarray:
    axes = tuple(a % x.ndim for a in (axis if isinstance(axis, (list, tuple)) else [axis]))
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=axes, keepdims=True)
    var = ((x64 - mean) ** 2).mean(axis=axes, keepdims=True)
    shape = [x.shape[i] if i in axes else 1 for i in range(x.ndim)]
    out = (x64 - mean) / np.sqrt(var + epsilon) * gamma.reshape(shape)
    if beta is not None:
        out = out + beta.reshape(shape)
    return out.astype(x.dtype)


def instance_norm_python(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray | None,
                         epsilon: float = 1e-5) -> np.ndarray:
    """[N, C, spatial...]: statistics per (n, c) over the spatial axes."""
    axes = tuple(range(2, x.ndim))
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=axes, keepdims=True)
    var = x64.var(axis=axes, keepdims=True)
    shape = (1, -1) + (1,) * (x.ndim - 2)
    out = (x64 - mean) / np.sqrt(var + epsilon) * gamma.reshape(shape)
    if beta is not None:
        out = out + beta.reshape(shape)
    return out.astype(x.dtype)


def group_norm_python(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray | None,
                      num_groups: int, epsilon: float = 1e-5) -> np.ndarray:
    n, c = x.shape[:2]
    g = x.astype(np.float64).reshape(n, num_groups, -1)
    norm = (g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + epsilon)
    shape = (1, -1) + (1,) * (x.ndim - 2)
    out = norm.reshape(x.shape) * gamma.reshape(shape)
    if beta is not None:
        out = out + beta.reshape(shape)
    return out.astype(x.dtype)


def lrn_python(x: np.ndarray, size: int, axis: int = 1, alpha: float = 1e-4,
               beta: float = 0.75, bias: float = 2.0) -> np.ndarray:
    x64 = np.moveaxis(x.astype(np.float64), axis, 0)
    sq = np.zeros_like(x64)
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
    for c in range(x64.shape[0]):
        sq[c] = (x64[max(0, c - lo):c + hi + 1] ** 2).sum(axis=0)
    out = x64 / (bias + alpha / size * sq) ** beta
    return np.moveaxis(out, 0, axis).astype(x.dtype)


def dilate_python(x: np.ndarray, strides: Any, dilation_value: float = 0.0) -> np.ndarray:
    out = np.full([(n - 1) * s + 1 for n, s in zip(x.shape, strides)], dilation_value, x.dtype)
    out[tuple(slice(None, None, s) for s in strides)] = x
    return out


def softmax_python(x: np.ndarray, axis: int = -1) -> np.ndarray:
    if x.size == 0:
        return x.copy()
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=axis, keepdims=True))
    return (e / e.sum(axis=axis, keepdims=True)).astype(x.dtype)


def log_softmax_python(x: np.ndarray, axis: int = -1) -> np.ndarray:
    if x.size == 0:
        return x.copy()
    x64 = x.astype(np.float64)
    m = x64 - x64.max(axis=axis, keepdims=True)
    return (m - np.log(np.exp(m).sum(axis=axis, keepdims=True))).astype(x.dtype)
