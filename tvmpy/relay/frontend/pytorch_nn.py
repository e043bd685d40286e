"""PyTorch frontend converters: neural-network ATen ops (convolutions, matrix products,
normalizations, softmax, pooling, resizing, scaled dot-product attention)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..expr import RelayExpr, const
from ..op import nn, nn_nd, tensor, transform
from ..op import reduce as _red
from ..op.image import resize2d
from .pytorch_common import (
    cast_to,
    fail,
    in_dtype,
    in_shape,
    norm_axis,
    np_dtype,
    out_dtype,
    out_shape,
    reg,
    reshape_to,
    scalar,
    split_sizes,
    val,
)


# ------------------------------------------------------------------------------------------------
# convolution and matrix products
def _bias(out: RelayExpr, bias: Any) -> RelayExpr:
    return out if bias is None else nn.bias_add(out, bias, axis=1)


def _conv(c, node, x, w, bias, stride, padding, dilation, groups, transposed=False,
          output_padding=(0,)) -> RelayExpr:
    xs, ws = in_shape(node, "input"), in_shape(node, "weight")
    nd = len(xs) - 2
    rep = lambda v: [int(v)] * nd if isinstance(v, int) else [int(t) for t in v] * (  # noqa: E731
        nd if len(v) == 1 else 1)
    stride, dilation = rep(stride), rep(dilation)
    if isinstance(padding, str):
        if padding == "valid":
            pad_b = pad_e = [0] * nd
        elif padding == "same":
            tot = [d * (k - 1) for d, k in zip(dilation, ws[2:])]
            pad_b = [t // 2 for t in tot]
            pad_e = [t - t // 2 for t in tot]
        else:
            raise fail(node, f"padding={padding!r} is not supported")
    else:
        pad_b = pad_e = rep(padding)
    if nd not in (1, 2, 3) or (transposed and nd not in (1, 2)):
        raise fail(node, f"{'transposed ' if transposed else ''}convolution of data {xs} "
                          "is not supported")
    if not transposed:
        fn = {1: nn_nd.conv1d, 2: nn.conv2d, 3: nn_nd.conv3d}[nd]
        out = fn(x, w, strides=stride, padding=pad_b + pad_e, dilation=dilation,
                 groups=int(groups), channels=ws[0], kernel_size=ws[2:])
        return _bias(out, bias)
    out_pad = rep(output_padding)
    if nd == 1:  # a 2-D transposed convolution of height 1
        x = reshape_to(x, (xs[0], xs[1], 1, xs[2]))
        w = reshape_to(w, (ws[0], ws[1], 1, ws[2]))
        stride, dilation, pad_b, out_pad = ([1] + stride, [1] + dilation, [0] + pad_b,
                                            [0] + out_pad)
        ws = [ws[0], ws[1], 1, ws[2]]
    g = int(groups)
    kw = dict(strides=stride, padding=pad_b, dilation=dilation, kernel_size=ws[2:],
              output_padding=out_pad)
    if g == 1:
        out = nn.conv2d_transpose(x, w, channels=ws[1], **kw)
    else:  # one transposed convolution per group (the IOHW weight splits on its input axis)
        xg, wg = split_sizes(x, [xs[1] // g] * g, 1), split_sizes(w, [ws[0] // g] * g, 0)
        out = transform.concatenate([nn.conv2d_transpose(xi, wi, channels=ws[1], **kw)
                                     for xi, wi in zip(xg, wg)], 1)
    out = _bias(out, bias)
    return reshape_to(out, out_shape(node)) if nd == 1 else out


@reg("aten.convolution.default")
def _convolution(c, node, a):
    return _conv(c, node, a["input"], a["weight"], a["bias"], a["stride"], a["padding"],
                 a["dilation"], a["groups"], a["transposed"], a["output_padding"])


@reg("aten.conv1d.default", "aten.conv2d.default", "aten.conv3d.default",
     "aten.conv1d.padding", "aten.conv2d.padding", "aten.conv3d.padding")
def _convnd(c, node, a):
    return _conv(c, node, a["input"], a["weight"], a["bias"], a["stride"], a["padding"],
                 a["dilation"], a["groups"])


@reg("aten.conv_transpose1d.default", "aten.conv_transpose2d.input")
def _conv_transpose(c, node, a):
    return _conv(c, node, a["input"], a["weight"], a["bias"], a["stride"], a["padding"],
                 a["dilation"], a["groups"], True, a["output_padding"])


def _transposed_source(c, n: Any) -> RelayExpr | None:
    """``W`` when fx node ``n`` is ``W.t()`` / ``W.permute(1, 0)`` / ``W.transpose(0, 1)`` of a
    2-D tensor: lets ``x @ W.t()`` become ``dense(x, W)`` without a transpose."""
    if not hasattr(n, "target") or n.op != "call_function" or len(n.meta["val"].shape) != 2:
        return None
    t = str(n.target)
    ok = (t == "aten.t.default" or (t == "aten.permute.default" and list(n.args[1]) == [1, 0])
          or (t == "aten.transpose.int" and sorted(norm_axis(int(d), 2) for d in n.args[1:3]) == [0, 1]))
    return c.expr(n.args[0]) if ok else None


def _dense(c, x: RelayExpr, xs: list[int], w: RelayExpr) -> RelayExpr:
    """``x @ w.T`` for ``x`` of any rank >= 2 (flattened to 2-D around nn.dense)."""
    if len(xs) == 2:
        return nn.dense(x, w)
    y = nn.dense(reshape_to(x, (int(np.prod(xs[:-1])), xs[-1])), w)
    return y


@reg("aten.linear.default")
def _linear(c, node, a):
    xs = in_shape(node, "input")
    if len(xs) == 1:
        y = nn.dense(reshape_to(a["input"], (1, xs[0])), a["weight"])
    else:
        y = _dense(c, a["input"], xs, a["weight"])
    if a["bias"] is not None:
        y = tensor.add(y, a["bias"])
    return reshape_to(y, out_shape(node)) if len(xs) != 2 else y


def _mm_rhs(c, node, name: str) -> RelayExpr:
    """The [N, K] weight for ``dense`` from the [K, N] right operand of a matrix product."""
    src_node = node.args[[a.name for a in node.target._schema.arguments].index(name)]
    src = _transposed_source(c, src_node)
    return src if src is not None else transform.transpose(c.expr(src_node), (1, 0))


@reg("aten.mm.default")
def _mm(c, node, a):
    return nn.dense(a["self"], _mm_rhs(c, node, "mat2"))


@reg("aten.addmm.default")
def _addmm(c, node, a):
    dt = out_dtype(node)
    y = nn.dense(a["mat1"], _mm_rhs(c, node, "mat2"))
    if a["alpha"] != 1:
        y = tensor.multiply(y, scalar(a["alpha"], dt))
    b = a["self"] if a["beta"] == 1 else tensor.multiply(a["self"], scalar(a["beta"], dt))
    return tensor.add(b, y)


@reg("aten.bmm.default")
def _bmm(c, node, a):
    return nn.batch_matmul(a["self"], a["mat2"], transpose_b=False)


@reg("aten.matmul.default")
def _matmul(c, node, a):
    sa, sb = in_shape(node, "self"), in_shape(node, "other")
    return _matmul_expr(c, node, a["self"], sa, a["other"], sb)


def _matmul_expr(c, node, A, sa, B, sb) -> RelayExpr:
    """torch.matmul: 1-D operands promoted and squeezed, batch dimensions broadcast."""
    if len(sa) == 1:
        A, sa = reshape_to(A, (1, sa[0])), [1, sa[0]]
    if len(sb) == 1:
        B, sb = reshape_to(B, (sb[0], 1)), [sb[0], 1]
    M, K, N = sa[-2], sa[-1], sb[-1]
    if len(sb) == 2:
        w = _transposed_source(c, node.args[1]) if len(in_shape(node, "other")) == 2 else None
        w = w if w is not None else transform.transpose(B, (1, 0))
        out = nn.dense(reshape_to(A, (int(np.prod(sa[:-1])), K)) if len(sa) > 2 else A, w)
    else:
        batch = list(np.broadcast_shapes(tuple(sa[:-2]), tuple(sb[:-2])))
        nb = int(np.prod(batch)) if batch else 1
        if sa[:-2] != batch:
            A = transform.broadcast_to(A, batch + [M, K])
        if sb[:-2] != batch:
            B = transform.broadcast_to(B, batch + [K, N])
        out = nn.batch_matmul(reshape_to(A, (nb, M, K)), reshape_to(B, (nb, K, N)),
                              transpose_b=False)
    return reshape_to(out, out_shape(node))


# ------------------------------------------------------------------------------------------------
# normalization
def _ones_or(v: Any, n: int, dt: str, fill: float) -> RelayExpr:
    return v if v is not None else const(np.full((n,), fill, dtype=dt))


def _batch_norm(c, node, a, training: bool) -> list:
    if training:
        raise fail(node, "training=True is not supported (inference only: call model.eval())")
    if a["running_mean"] is None or a["running_var"] is None:
        raise fail(node, "batch norm without running statistics is not supported")
    ch, dt = in_shape(node, "input")[1], out_dtype(node)
    return nn.batch_norm(a["input"], _ones_or(a["weight"], ch, dt, 1.0),
                         _ones_or(a["bias"], ch, dt, 0.0), a["running_mean"], a["running_var"],
                         axis=1, epsilon=float(a["eps"]))[0]


@reg("aten.batch_norm.default")
def _bn(c, node, a):
    return _batch_norm(c, node, a, bool(a["training"]))


@reg("aten._native_batch_norm_legit_no_training.default")
def _bn_legit(c, node, a):
    return [_batch_norm(c, node, a, False)]


@reg("aten.native_batch_norm.default")
def _bn_native(c, node, a):
    return [_batch_norm(c, node, a, bool(a["training"]))]


def out_dtype_i(node: Any, k: int) -> str:
    return np_dtype(val(node)[k].dtype)


def _layer_norm(c, node, a) -> RelayExpr:
    x, s = a["input"], in_shape(node, "input")
    nshape = [int(d) for d in a["normalized_shape"]]
    k = len(nshape)
    tail = int(np.prod(nshape))
    dt = in_dtype(node, "input")
    g = _ones_or(a["weight"], tail, dt, 1.0) if a["weight"] is None or k == 1 else \
        reshape_to(a["weight"], (tail,))
    b = _ones_or(a["bias"], tail, dt, 0.0) if a["bias"] is None or k == 1 else \
        reshape_to(a["bias"], (tail,))
    if k == 1:
        return nn.layer_norm(x, g, b, axis=-1, epsilon=float(a["eps"]))
    x2 = reshape_to(x, s[:-k] + [tail])
    return reshape_to(nn.layer_norm(x2, g, b, axis=-1, epsilon=float(a["eps"])), s)


@reg("aten.layer_norm.default")
def _ln(c, node, a):
    return _layer_norm(c, node, a)


@reg("aten.native_layer_norm.default")
def _ln_native(c, node, a):
    return [_layer_norm(c, node, a)]


def _group_norm(c, node, x, w, b, groups: int, eps: float) -> RelayExpr:
    s = in_shape(node, "input")
    dt = in_dtype(node, "input")
    return nn.group_norm(x, _ones_or(w, s[1], dt, 1.0), _ones_or(b, s[1], dt, 0.0),
                            num_groups=int(groups), axis=1, epsilon=float(eps))


@reg("aten.group_norm.default")
def _gn(c, node, a):
    return _group_norm(c, node, a["input"], a["weight"], a["bias"], a["num_groups"], a["eps"])


@reg("aten.native_group_norm.default")
def _gn_native(c, node, a):
    return [_group_norm(c, node, a["input"], a["weight"], a["bias"], a["group"], a["eps"])]


@reg("aten.instance_norm.default")
def _in(c, node, a):
    if a["use_input_stats"] is False:
        raise fail(node, "use_input_stats=False is not supported")
    s = in_shape(node, "input")
    dt = in_dtype(node, "input")
    return nn.instance_norm(a["input"], _ones_or(a["weight"], s[1], dt, 1.0),
                               _ones_or(a["bias"], s[1], dt, 0.0), axis=1,
                               epsilon=float(a["eps"]))


# ------------------------------------------------------------------------------------------------
# softmax
@reg("aten.softmax.int", "aten._softmax.default")
def _softmax(c, node, a):
    x = cast_to(a["self"], in_dtype(node), out_dtype(node))
    return nn.softmax(x, int(a["dim"]))


@reg("aten._safe_softmax.default")
def _safe_softmax(c, node, a):
    """softmax that gives 0 (not NaN) on rows that are entirely -inf."""
    dt = out_dtype(node)
    x = cast_to(a["self"], in_dtype(node), dt)
    ax = int(a["dim"])
    live = _red.any(tensor.not_equal(x, scalar(-np.inf, dt)), axis=ax, keepdims=True)
    return tensor.where(live, nn.softmax(x, ax), scalar(0, dt))


@reg("aten.log_softmax.int", "aten._log_softmax.default")
def _log_softmax(c, node, a):
    x = cast_to(a["self"], in_dtype(node), out_dtype(node))
    return nn.log_softmax(x, int(a["dim"]))



# ------------------------------------------------------------------------------------------------
# pooling and resizing
def _pool_args(node, a, nd: int) -> tuple[list[int], list[int], list[int], list[int]]:
    rep = lambda v: [int(v)] * nd if isinstance(v, int) else (  # noqa: E731
        [int(v[0])] * nd if len(v) == 1 else [int(t) for t in v])
    k = rep(a["kernel_size"])
    stride = rep(a["stride"]) if a["stride"] not in (None, []) and a["stride"] != () else list(k)
    pad = rep(a["padding"])
    dil = rep(a.get("dilation", 1))
    return k, stride, pad, dil


def _fit(out: RelayExpr, relay_shape: list[int], node: Any, k: int | None = None) -> RelayExpr:
    """Crop a pooling result to torch's shape: with ceil_mode torch drops a last window that
    would start in the right padding, relay's formula keeps it."""
    want = out_shape(node) if k is None else [int(d) for d in val(node)[k].shape]
    if relay_shape == want:
        return out
    return transform.strided_slice(out, [0] * len(want), want)


def _pooled_shape(xs, k, stride, pad, dil, ceil) -> list[int]:
    out = list(xs[:2])
    for s, kk, st, p, d in zip(xs[2:], k, stride, pad, dil):
        num = s + 2 * p - (kk - 1) * d - 1
        out.append((num + st - 1) // st + 1 if ceil else num // st + 1)
    return out


def _max_pool(c, node, a, k_out: int | None):
    xs = in_shape(node)
    nd = len(xs) - 2
    if nd not in (1, 2, 3):
        raise fail(node, f"max pooling of data {xs} is not supported")
    k, stride, pad, dil = _pool_args(node, a, nd)
    ceil = bool(a["ceil_mode"])
    fn = {1: nn_nd.max_pool1d, 2: nn.max_pool2d, 3: nn_nd.max_pool3d}[nd]
    out = fn(a["self"], pool_size=k, strides=stride, dilation=dil, padding=pad + pad,
             ceil_mode=ceil)
    return _fit(out, _pooled_shape(xs, k, stride, pad, dil, ceil), node, k_out)


@reg("aten.max_pool1d.default", "aten.max_pool2d.default", "aten.max_pool3d.default")
def _maxpool(c, node, a):
    return _max_pool(c, node, a, None)


@reg("aten.max_pool2d_with_indices.default", "aten.max_pool3d_with_indices.default")
def _maxpool_idx(c, node, a):
    return [_max_pool(c, node, a, 0)]


@reg("aten.avg_pool1d.default", "aten.avg_pool2d.default", "aten.avg_pool3d.default")
def _avgpool(c, node, a):
    xs = in_shape(node)
    nd = len(xs) - 2
    if a.get("divisor_override") is not None:
        raise fail(node, "divisor_override is not supported")
    k, stride, pad, dil = _pool_args(node, a, nd)
    ceil = bool(a["ceil_mode"])
    fn = {1: nn_nd.avg_pool1d, 2: nn.avg_pool2d, 3: nn_nd.avg_pool3d}[nd]
    out = fn(a["self"], pool_size=k, strides=stride, padding=pad + pad, ceil_mode=ceil,
             count_include_pad=bool(a["count_include_pad"]))
    if ceil and _pooled_shape(xs, k, stride, pad, dil, ceil) != out_shape(node):
        raise fail(node, "ceil_mode with a dropped last window is not supported for avg_pool")
    return out


@reg("aten.adaptive_max_pool2d.default")
def _adaptive_max(c, node, a):
    xs = in_shape(node)
    if len(xs) != 4 or out_shape(node)[2:] != [1, 1]:
        raise fail(node, f"only a 1x1 output from 4-D data is supported, got {xs} -> "
                         f"{out_shape(node)}")
    return [nn.global_max_pool2d(a["self"])]


@reg("aten.adaptive_avg_pool2d.default", "aten._adaptive_avg_pool2d.default")
def _adaptive_avg(c, node, a):
    xs = in_shape(node)
    if len(xs) != 4:
        raise fail(node, f"only 4-D (NCHW) data is supported, got {xs}")
    size = out_shape(node)[2:]
    if size == [1, 1]:
        return nn.global_avg_pool2d(a["self"])
    return nn.adaptive_avg_pool2d(a["self"], size)


def _resize(c, node, x, method: str, align_corners: bool | None, scales: Any):
    xs, want = in_shape(node, "input"), out_shape(node)
    if len(xs) != 4:
        raise fail(node, f"only 4-D (NCHW) data is supported, got {xs}")
    if scales:
        for s_in, s_out, sc in zip(xs[2:], want[2:], scales):
            if sc is not None and abs(s_out - s_in * float(sc)) > 1e-5 * s_out:
                raise fail(node, f"scale_factor {list(scales)} does not give an exact size "
                                  "(torch maps by the scale, relay by the size ratio): give size")
    if method == "nearest_neighbor":
        return resize2d(x, want[2:], method=method, coordinate_transformation_mode="asymmetric",
                        rounding_method="floor")
    mode = "align_corners" if align_corners else "pytorch_half_pixel"
    return resize2d(x, want[2:], method="linear", coordinate_transformation_mode=mode)


@reg("aten.upsample_nearest2d.vec")
def _up_nearest_vec(c, node, a):
    return _resize(c, node, a["input"], "nearest_neighbor", None, a["scale_factors"])


@reg("aten.upsample_nearest2d.default")
def _up_nearest(c, node, a):
    return _resize(c, node, a["self"] if "self" in a else a["input"], "nearest_neighbor", None,
                   [a.get("scales_h"), a.get("scales_w")])


@reg("aten.upsample_bilinear2d.vec")
def _up_bilinear_vec(c, node, a):
    return _resize(c, node, a["input"], "linear", bool(a["align_corners"]), a["scale_factors"])


@reg("aten.upsample_bilinear2d.default")
def _up_bilinear(c, node, a):
    return _resize(c, node, a["self"] if "self" in a else a["input"], "linear",
                   bool(a["align_corners"]), [a.get("scales_h"), a.get("scales_w")])


# ------------------------------------------------------------------------------------------------
# attention
@reg("aten.scaled_dot_product_attention.default")
def _sdpa(c, node, a):
    """softmax(q @ k^T * scale + mask) @ v, over the flattened leading (batch, head) axes."""
    qs, ks, vs = (in_shape(node, n) for n in ("query", "key", "value"))
    if a.get("dropout_p", 0.0):
        raise fail(node, "dropout_p > 0 is not supported (inference only)")
    if a.get("enable_gqa") and qs[:-2] != ks[:-2]:
        raise fail(node, "grouped-query attention (enable_gqa) is not supported")
    dt = out_dtype(node)
    L, E, S, Ev = qs[-2], qs[-1], ks[-2], vs[-1]
    batch = list(np.broadcast_shapes(tuple(qs[:-2]), tuple(ks[:-2]), tuple(vs[:-2])))
    nb = int(np.prod(batch)) if batch else 1

    def flat(x, s, tail):
        if s[:-2] != batch:
            x = transform.broadcast_to(x, batch + tail)
        return reshape_to(x, [nb] + tail)

    q, k, v = flat(a["query"], qs, [L, E]), flat(a["key"], ks, [S, E]), flat(a["value"], vs, [S, Ev])
    scale = a.get("scale")
    scale = 1.0 / math.sqrt(E) if scale is None else float(scale)
    scores = tensor.multiply(nn.batch_matmul(q, k), scalar(scale, dt))
    scores = reshape_to(scores, batch + [L, S])
    mask = a.get("attn_mask")
    if a.get("is_causal"):
        if mask is not None:
            raise fail(node, "is_causal together with attn_mask is not supported")
        tri = np.where(np.tril(np.ones((L, S), dtype=bool)), 0.0, -np.inf).astype(dt)
        scores = tensor.add(scores, const(tri))
    elif mask is not None:
        if in_dtype(node, "attn_mask") == "bool":
            scores = tensor.where(mask, scores, scalar(-np.inf, dt))
        else:
            scores = tensor.add(scores, cast_to(mask, in_dtype(node, "attn_mask"), dt))
    p = reshape_to(nn.softmax(scores, -1), [nb, L, S])
    out = nn.batch_matmul(p, v, transpose_b=False)
    return reshape_to(out, out_shape(node))
