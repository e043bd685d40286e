"""Torch translations of the fuzzer's ONNX nodes: neural-network layers: convolutions, pools, matrix products, normalizations, resize."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from ._common import (
    Fn,
    Node,
    Unsupported,
    _emit,
    _norm,
    _torch_pads,
)

# ---------------------------------------------------------------------------------------------
# convolutions and pooling


def _geometry(n: Node, kernel: Sequence[int]) -> tuple[list[int], list[int], list[int]]:
    """strides, dilations and [begins..., ends...] pads (auto_pad resolved) of a conv/pool."""
    spatial = n.shape(0)[2:]
    nd = len(spatial)
    strides = [int(s) for s in n.attr("strides", [1] * nd)]
    dil = [int(d) for d in n.attr("dilations", [1] * nd)]
    auto = n.attr("auto_pad", "NOTSET")
    if auto in ("NOTSET", ""):
        pads = [int(p) for p in n.attr("pads", [0] * 2 * nd)]
    elif auto == "VALID":
        pads = [0] * 2 * nd
    elif auto in ("SAME_UPPER", "SAME_LOWER"):
        pads = [0] * 2 * nd
        for i in range(nd):
            out = -(-spatial[i] // strides[i])
            total = max(0, (out - 1) * strides[i] + (kernel[i] - 1) * dil[i] + 1 - spatial[i])
            small, big = total // 2, total - total // 2
            pads[i], pads[i + nd] = (small, big) if auto == "SAME_UPPER" else (big, small)
    else:
        raise n.refuse(f"auto_pad {auto}")
    return strides, dil, pads


@_emit("Conv")
def _conv(n: Node) -> Fn:
    ws = n.shape(1)
    nd = len(ws) - 2
    if nd not in (1, 2, 3):
        raise n.refuse(f"{nd}-D convolution")
    kernel = list(ws[2:])
    if list(n.attr("kernel_shape", kernel)) != kernel:
        raise n.refuse("kernel_shape differs from the weight's")
    strides, dil, pads = _geometry(n, kernel)
    group = int(n.attr("group", 1))
    conv = (F.conv1d, F.conv2d, F.conv3d)[nd - 1]
    auto = n.attr("auto_pad", "NOTSET")
    padding: Any
    pre: list[int] | None = None
    if auto == "VALID":
        padding = "valid"
    elif auto == "SAME_UPPER" and all(s == 1 for s in strides):
        padding = "same"  # torch's "same" puts the odd pad at the end, as SAME_UPPER does
    elif pads[:nd] == pads[nd:]:
        padding = pads[:nd]
    else:
        padding, pre = 0, _torch_pads(pads[:nd], pads[nd:])

    def fn(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None = None) -> torch.Tensor:
        if pre is not None:
            x = F.pad(x, pre)
        return conv(x, w, b, strides, padding, dil, group)
    return fn


@_emit("ConvTranspose")
def _conv_transpose(n: Node) -> Fn:
    ws = n.shape(1)
    nd = len(ws) - 2
    if nd not in (1, 2, 3):
        raise n.refuse(f"{nd}-D transposed convolution")
    if n.attr("output_shape") is not None:
        raise n.refuse("output_shape")
    if n.attr("auto_pad", "NOTSET") not in ("NOTSET", "", "VALID"):
        raise n.refuse(f"auto_pad {n.attr('auto_pad')}")
    kernel = list(ws[2:])
    if list(n.attr("kernel_shape", kernel)) != kernel:
        raise n.refuse("kernel_shape differs from the weight's")
    strides = [int(s) for s in n.attr("strides", [1] * nd)]
    dil = [int(d) for d in n.attr("dilations", [1] * nd)]
    pads = [0] * 2 * nd if n.attr("auto_pad") == "VALID" else \
        [int(p) for p in n.attr("pads", [0] * 2 * nd)]
    outpad = [int(p) for p in n.attr("output_padding", [0] * nd)]
    group = int(n.attr("group", 1))
    if any(op >= max(s, d) for op, s, d in zip(outpad, strides, dil)):
        raise n.refuse("output_padding not below the stride or dilation")
    conv = (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)[nd - 1]
    if pads[:nd] == pads[nd:]:
        return lambda x, w, b=None: conv(x, w, b, strides, pads[:nd], outpad, group, dil)
    # asymmetric: the unpadded result, cropped (pads remove rows from each end)
    crop = (Ellipsis, *(slice(pads[i], -pads[i + nd] or None) for i in range(nd)))
    return lambda x, w, b=None: conv(x, w, b, strides, 0, outpad, group, dil)[crop]


def _pool_plan(n: Node, kernel: Sequence[int]) -> tuple[list[int], list[int], list[int],
                                                         list[int], bool]:
    """strides, dilations, pads [begins..., ends...], extra end padding (ceil mode: windows
    past the padded input) and whether torch's own padding reproduces ONNX's windows."""
    xs, out = n.shape(0), n.out_shape()
    nd = len(xs) - 2
    strides, dil, pads = _geometry(n, kernel)
    extra = []
    for i in range(nd):
        eff = (kernel[i] - 1) * dil[i] + 1
        padded = xs[2 + i] + pads[i] + pads[i + nd]
        e = max(0, (out[2 + i] - 1) * strides[i] + eff - padded)
        if (padded + e - eff) // strides[i] + 1 != out[2 + i]:
            raise n.refuse("pooling windows do not match the output shape")
        extra.append(e)
    for i in range(nd):  # a window of padding only has no defined value (max: -inf or not)
        taps = np.arange(out[2 + i])[:, None] * strides[i] - pads[i] + \
            np.arange(kernel[i])[None, :] * dil[i]
        if not ((taps >= 0) & (taps < xs[2 + i])).any(axis=1).all():
            raise n.refuse("a pooling window covers only padding")
    ceil = bool(int(n.attr("ceil_mode", 0)))
    native = pads[:nd] == pads[nd:] and all(
        (k - 1) * d + 1 <= size for k, d, size in zip(kernel, dil, xs[2:])) and all(
        p <= k // 2 for p, k in zip(pads[:nd], kernel)) and all(
        _torch_pool_len(xs[2 + i], kernel[i], strides[i], pads[i], dil[i], ceil) == out[2 + i]
        for i in range(nd))
    return strides, dil, pads, extra, native


def _torch_pool_len(size: int, k: int, s: int, p: int, d: int, ceil: bool) -> int:
    eff = (k - 1) * d + 1
    num = size + 2 * p - eff
    out = (-(-num // s) if ceil else num // s) + 1
    if ceil and (out - 1) * s >= size + p:
        out -= 1  # torch: the last window starts inside the input or left padding
    return out


@_emit("MaxPool")
def _max_pool(n: Node) -> Fn:
    if len([o for o in n.outputs if o]) > 1:
        raise n.refuse("the Indices output")
    if n.dtype(0).kind != "f":
        raise n.refuse("integer max pooling")
    nd = len(n.shape(0)) - 2
    if nd not in (1, 2, 3):
        raise n.refuse(f"{nd}-D pooling")
    kernel = [int(k) for k in n.attr("kernel_shape")]
    strides, dil, pads, extra, native = _pool_plan(n, kernel)
    pool = (F.max_pool1d, F.max_pool2d, F.max_pool3d)[nd - 1]
    if native:
        ceil = bool(int(n.attr("ceil_mode", 0)))
        return lambda x: pool(x, kernel, strides, pads[:nd], dil, ceil_mode=ceil)
    tp = _torch_pads(pads[:nd], [e + x for e, x in zip(pads[nd:], extra)])
    return lambda x: pool(F.pad(x, tp, value=-math.inf), kernel, strides, 0, dil)


@_emit("AveragePool", "LpPool")
def _avg_pool(n: Node) -> Fn:
    xs = n.shape(0)
    nd = len(xs) - 2
    if nd not in (1, 2, 3):
        raise n.refuse(f"{nd}-D pooling")
    kernel = [int(k) for k in n.attr("kernel_shape")]
    strides, dil, pads, extra, native = _pool_plan(n, kernel)
    if any(d != 1 for d in dil):
        raise n.refuse("dilated average pooling")
    pool = (F.avg_pool1d, F.avg_pool2d, F.avg_pool3d)[nd - 1]
    include = bool(int(n.attr("count_include_pad", 0)))
    tp = _torch_pads(pads[:nd], [e + x for e, x in zip(pads[nd:], extra)])
    size = math.prod(kernel)
    if n.op == "LpPool":
        p = int(n.attr("p", 2))
        return lambda x: torch.pow(pool(F.pad(torch.pow(torch.abs(x), p), tp), kernel, strides)
                                   * size, 1.0 / p)
    if native:
        ceil = bool(int(n.attr("ceil_mode", 0)))
        return lambda x: pool(x, kernel, strides, pads[:nd], ceil_mode=ceil,
                              count_include_pad=include)
    # window sums over the zero-padded input, divided by the number of counted cells (the
    # input's, plus the explicit pads' with count_include_pad; never the ceil-mode overhang)
    mask = np.pad(np.ones(xs[2:], np.float64),
                  [(0 if include else pads[i], extra[i] + (0 if include else pads[i + nd]))
                   for i in range(nd)])
    if include:
        mask = np.pad(mask, [(pads[i], pads[i + nd]) for i in range(nd)], constant_values=1)
    count = _window_sums(mask, kernel, strides)
    if (count == 0).any():
        raise n.refuse("a pooling window covers no counted cell")
    n.add_const(count.astype(n.dtype(0)))
    return lambda x, cnt: pool(F.pad(x, tp), kernel, strides) * size / cnt


def _window_sums(a: np.ndarray, kernel: Sequence[int], strides: Sequence[int]) -> np.ndarray:
    from numpy.lib.stride_tricks import sliding_window_view

    w = sliding_window_view(a, tuple(kernel))
    w = w[tuple(slice(None, None, s) for s in strides)]
    return w.sum(axis=tuple(range(-len(kernel), 0)))


@_emit("GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool")
def _global_pool(n: Node) -> Fn:
    dims = list(range(2, len(n.shape(0))))
    if n.op == "GlobalAveragePool":
        return lambda x: torch.mean(x, dims, keepdim=True)
    if n.op == "GlobalMaxPool":
        return lambda x: torch.amax(x, dims, keepdim=True)
    p = int(n.attr("p", 2))
    return lambda x: torch.pow(torch.sum(torch.pow(torch.abs(x), p), dims, keepdim=True),
                               1.0 / p)


# ---------------------------------------------------------------------------------------------
# matrix products and normalization


@_emit("MatMul")
def _matmul(n: Node) -> Fn:
    return lambda a, b: torch.matmul(a, b)


@_emit("Gemm")
def _gemm(n: Node) -> Fn:
    ta, tb = int(n.attr("transA", 0)), int(n.attr("transB", 0))
    alpha, beta = float(n.attr("alpha", 1.0)), float(n.attr("beta", 1.0))
    has_c = n.has(2)
    nout = n.out_shape()[1]
    if tb and not ta and alpha == 1.0 and (not has_c or beta == 1.0 and n.shape(2) == (nout,)):
        return lambda a, w, c=None: F.linear(a, w, c)

    def fn(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor | None = None) -> torch.Tensor:
        a = a.t() if ta else a
        b = b.t() if tb else b
        if c is None:
            return torch.mm(a, b) * alpha if alpha != 1.0 else torch.mm(a, b)
        return torch.addmm(c, a, b, beta=beta, alpha=alpha)
    return fn


@_emit("Einsum")
def _einsum(n: Node) -> Fn:
    eq = n.attr("equation").replace(" ", "")
    return lambda *xs: torch.einsum(eq, *xs)


@_emit("BatchNormalization")
def _batch_norm(n: Node) -> Fn:
    if int(n.attr("training_mode", 0)) or len([o for o in n.outputs if o]) > 1:
        raise n.refuse("training mode")
    eps = float(n.attr("epsilon", 1e-5))
    return lambda x, s, b, m, v: F.batch_norm(x, m, v, s, b, False, 0.0, eps)


@_emit("InstanceNormalization")
def _instance_norm(n: Node) -> Fn:
    eps = float(n.attr("epsilon", 1e-5))
    xs = n.shape(0)
    if math.prod(xs[2:]) > 1:
        return lambda x, s, b: F.instance_norm(x, weight=s, bias=b, eps=eps)
    # torch refuses instance_norm of one spatial element: the formula
    dims, cshape = list(range(2, len(xs))), [xs[1]] + [1] * (len(xs) - 2)
    return lambda x, s, b: (x - torch.mean(x, dims, keepdim=True)) / torch.sqrt(
        torch.var(x, dims, correction=0, keepdim=True) + eps) * torch.reshape(s, cshape) \
        + torch.reshape(b, cshape)


@_emit("LayerNormalization")
def _layer_norm(n: Node) -> Fn:
    xs = n.shape(0)
    if len([o for o in n.outputs if o]) > 1:
        raise n.refuse("Mean / InvStdDev outputs")
    if int(n.attr("stash_type", 1)) != 1 and n.dtype(0) != np.float32:
        raise n.refuse("stash_type other than float32")
    axis = _norm(int(n.attr("axis", -1)), len(xs))
    norm = list(xs[axis:])
    if n.shape(1) != tuple(norm) or (n.has(2) and n.shape(2) != tuple(norm)):
        raise n.refuse("scale / bias broadcast to the normalized shape")
    eps = float(n.attr("epsilon", 1e-5))
    return lambda x, s, b=None: F.layer_norm(x, norm, s, b, eps)


@_emit("LpNormalization")
def _lp_norm(n: Node) -> Fn:
    axis = _norm(int(n.attr("axis", -1)), len(n.shape(0)))
    p = int(n.attr("p", 2))
    if p not in (1, 2):
        raise n.refuse(f"p={p}")
    return lambda x: F.normalize(x, float(p), axis, eps=0.0)


@_emit("MeanVarianceNormalization")
def _mvn(n: Node) -> Fn:
    r = len(n.shape(0))
    axes = sorted({_norm(int(a), r) for a in n.attr("axes", [0, 2, 3])})
    return lambda x: (x - torch.mean(x, axes, keepdim=True)) / torch.sqrt(
        torch.var(x, axes, correction=0, keepdim=True))


@_emit("LRN")
def _lrn(n: Node) -> Fn:
    size = int(n.attr("size"))
    if size % 2 == 0:
        raise n.refuse("even size (torch centers the window the other way)")
    alpha, beta = float(n.attr("alpha", 1e-4)), float(n.attr("beta", 0.75))
    bias = float(n.attr("bias", 1.0))
    return lambda x: F.local_response_norm(x, size, alpha, beta, bias)


@_emit("Dropout")
def _dropout(n: Node) -> Fn:
    if n.has(2):
        t = n.const(2)
        if t is None or bool(np.asarray(t).reshape(-1)[0]):
            raise n.refuse("training mode")
    if len([o for o in n.outputs if o]) > 1:
        return lambda x, *_: (x.clone(), torch.ones_like(x, dtype=torch.bool))
    return lambda x, *_: F.dropout(x, 0.5, training=False)


# ---------------------------------------------------------------------------------------------
# resize


def _resize_coords(ctm: str, out_len: int, in_len: int, scale: np.float32) -> np.ndarray:
    """ONNX's source coordinate of each output index (float32, as onnxruntime computes)."""
    x = np.arange(out_len, dtype=np.float32)
    f32 = np.float32
    if ctm == "asymmetric":
        return x / scale
    if ctm == "half_pixel":
        return (x + f32(0.5)) / scale - f32(0.5)
    if ctm == "pytorch_half_pixel":
        return (x + f32(0.5)) / scale - f32(0.5) if out_len > 1 else np.zeros(1, f32)
    if ctm == "align_corners":
        return x * f32(in_len - 1) / f32(out_len - 1) if out_len > 1 else np.zeros(1, f32)
    raise Unsupported(f"coordinate_transformation_mode {ctm}")


_NEAREST = {"floor": np.floor, "ceil": np.ceil,
            "round_prefer_floor": lambda v: np.ceil(v - np.float32(0.5)),
            "round_prefer_ceil": lambda v: np.floor(v + np.float32(0.5))}


@_emit("Resize")
def _resize(n: Node) -> Fn:
    xs, out = n.shape(0), n.out_shape()
    r = len(xs)
    if int(n.attr("antialias", 0)) or n.attr("axes") is not None or \
            n.attr("keep_aspect_ratio_policy", "stretch") != "stretch":
        raise n.refuse("antialias / axes / keep_aspect_ratio_policy")
    if int(n.attr("exclude_outside", 0)):
        raise n.refuse("exclude_outside")
    given = n.const(2) if n.has(2) else None
    scales_given = given is not None and given.size > 0
    if scales_given:  # else sizes: the scale is out / in
        scales = [np.float32(s) for s in given.reshape(-1)]
    else:
        scales = [np.float32(o) / np.float32(i) for o, i in zip(out, xs)]
    if tuple(out[:2]) != tuple(xs[:2]) or any(s != 1 for s in scales[:2]):
        raise n.refuse("resizing the batch or channel axis")
    mode = n.attr("mode", "nearest")
    ctm = n.attr("coordinate_transformation_mode", "half_pixel")
    spatial = list(range(2, r))
    if mode == "nearest":
        rnd = _NEAREST[n.attr("nearest_mode", "round_prefer_floor")]
        if (ctm, n.attr("nearest_mode", "round_prefer_floor")) == ("asymmetric", "floor") \
                and r == 4 and scales_given and all(
                float(s).is_integer() for s in scales[2:]):
            sf = [float(s) for s in scales[2:]]
            return lambda x, *_: F.interpolate(x, scale_factor=sf, mode="nearest")
        gathers = []
        for a in spatial:
            src = rnd(_resize_coords(ctm, out[a], xs[a], scales[a]))
            idx = np.clip(src, 0, xs[a] - 1).astype(np.int64)
            if out[a] != xs[a] or (idx != np.arange(xs[a])).any():
                gathers.append((a, n.add_const(idx)))

        def nearest(x: torch.Tensor, *args: Any) -> torch.Tensor:
            for a, j in gathers:
                x = torch.index_select(x, a, args[j - 1])
            return x
        return nearest
    if mode not in ("linear", "cubic") or (mode == "cubic" and r != 4) or r not in (3, 4, 5):
        raise n.refuse(f"mode {mode} on rank {r}")
    if mode == "cubic" and float(n.attr("cubic_coeff_a", -0.75)) != -0.75:
        raise n.refuse("cubic_coeff_a other than -0.75")
    torch_mode = {"cubic": "bicubic"}.get(mode, ("linear", "bilinear", "trilinear")[r - 3])
    align = {"align_corners": True, "half_pixel": False}.get(ctm)
    if ctm == "pytorch_half_pixel" and all(out[a] > 1 for a in spatial):
        align = False  # pytorch_half_pixel is half_pixel unless an output axis has length 1
    if align is None:
        if mode == "cubic":
            raise n.refuse(f"cubic with {ctm}")
        return _linear_by_gathers(n, ctm, xs, out, scales)
    if scales_given:
        sf = [float(s) for s in scales[2:]]
        return lambda x, *_: F.interpolate(x, scale_factor=sf, mode=torch_mode,
                                           align_corners=align)
    size = list(out[2:])
    return lambda x, *_: F.interpolate(x, size=size, mode=torch_mode, align_corners=align)


def _linear_by_gathers(n: Node, ctm: str, xs: Sequence[int], out: Sequence[int],
                       scales: Sequence[np.float32]) -> Fn:
    """Separable linear interpolation as two gathers and a blend per axis (coordinates clamped
    to the input, as onnxruntime does)."""
    steps = []
    for a in range(2, len(xs)):
        src = np.clip(_resize_coords(ctm, out[a], xs[a], scales[a]), 0, xs[a] - 1)
        lo = np.floor(src).astype(np.int64)
        hi = np.minimum(lo + 1, xs[a] - 1)
        w = (src - lo).astype(np.float32).reshape([-1] + [1] * (len(xs) - 1 - a))
        steps.append((a, n.add_const(lo), n.add_const(hi), n.add_const(w)))

    def fn(x: torch.Tensor, *args: Any) -> torch.Tensor:
        for a, jl, jh, jw in steps:
            lo = torch.index_select(x, a, args[jl - 1])
            hi = torch.index_select(x, a, args[jh - 1])
            x = lo + (hi - lo) * args[jw - 1]
        return x
    return fn
