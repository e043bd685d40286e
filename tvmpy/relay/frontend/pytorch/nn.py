"""PyTorch frontend converters: neural-network ATen ops (convolutions, matrix products,
normalizations, softmax, pooling, resizing, scaled dot-product attention)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from ...expr import RelayExpr, const
from ...op import nn, nn_nd, tensor, transform
from ...op import reduce as _red
from ...op.image import resize2d
from .common import (
    Args,
    ConvertContext,
    Output,
    broadcast_dims,
    cast_to,
    converter,
    dim,
    fail,
    in_dtype,
    in_shape,
    norm_axis,
    out_dtype,
    out_shape,
    prod_dims,
    reshape_to,
    scalar,
    val,
)

if TYPE_CHECKING:
    from torch.fx import Node


# ------------------------------------------------------------------------------------------------
# convolution and matrix products
def _bias(out: RelayExpr, bias: Any) -> RelayExpr:
    return out if bias is None else nn.bias_add(out, bias, axis=1)


def _conv(ctx: ConvertContext, node: Node, x, w, bias, stride, padding, dilation, groups,
          transposed=False, output_padding=(0,)) -> RelayExpr:
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
    # groups go to the op (relay.transform.ConvTransposeToConv makes grouped convolutions)
    out = nn.conv2d_transpose(x, w, channels=ws[1] * g, groups=g, **kw)
    out = _bias(out, bias)
    return reshape_to(out, out_shape(node)) if nd == 1 else out


@converter("aten.convolution.default", "aten._convolution.default")  # the latter: traced convs
def _convolution(ctx: ConvertContext, node: Node, args: Args) -> Output:
    return _conv(
        ctx,
        node,
        args["input"],
        args["weight"],
        args["bias"],
        args["stride"],
        args["padding"],
        args["dilation"],
        args["groups"],
        args["transposed"],
        args["output_padding"],
    )


@converter("aten.conv1d.default", "aten.conv2d.default", "aten.conv3d.default",
           "aten.conv1d.padding", "aten.conv2d.padding", "aten.conv3d.padding")
def _convnd(ctx: ConvertContext, node: Node, args: Args) -> Output:
    return _conv(
        ctx,
        node,
        args["input"],
        args["weight"],
        args["bias"],
        args["stride"],
        args["padding"],
        args["dilation"],
        args["groups"],
    )


@converter("aten.conv_transpose1d.default", "aten.conv_transpose2d.input")
def _conv_transpose(ctx: ConvertContext, node: Node, args: Args) -> Output:
    return _conv(
        ctx,
        node,
        args["input"],
        args["weight"],
        args["bias"],
        args["stride"],
        args["padding"],
        args["dilation"],
        args["groups"],
        True,
        args["output_padding"],
    )


def _transposed_source(ctx: ConvertContext, n: Any) -> RelayExpr | None:
    """``W`` when fx node ``n`` is ``W.t()`` / ``W.permute(1, 0)`` / ``W.transpose(0, 1)`` of a
    2-D tensor: lets ``x @ W.t()`` become ``dense(x, W)`` without a transpose."""
    if not hasattr(n, "target") or n.op != "call_function" or len(n.meta["val"].shape) != 2:
        return None
    t = str(n.target)
    ok = (
        t == "aten.t.default"
        or (t == "aten.permute.default" and list(n.args[1]) == [1, 0])
        or (
            t == "aten.transpose.int"
            and sorted(norm_axis(int(d), 2) for d in n.args[1:3]) == [0, 1]
        )
    )
    return ctx.expr(n.args[0]) if ok else None


def _dense(ctx: ConvertContext, x: RelayExpr, xs: list[int], w: RelayExpr) -> RelayExpr:
    """``x @ w.T`` for ``x`` of any rank >= 2 (flattened to 2-D around nn.dense)."""
    if len(xs) == 2:
        return nn.dense(x, w)
    y = nn.dense(reshape_to(x, (prod_dims(xs[:-1]), xs[-1])), w)
    return y


@converter("aten.linear.default")
def _linear(ctx: ConvertContext, node: Node, args: Args) -> Output:
    xs = in_shape(node, "input")
    if len(xs) == 1:
        y = nn.dense(reshape_to(args["input"], (1, xs[0])), args["weight"])
    else:
        y = _dense(ctx, args["input"], xs, args["weight"])
    if args["bias"] is not None:
        y = tensor.add(y, args["bias"])
    return reshape_to(y, out_shape(node)) if len(xs) != 2 else y


def _mm_rhs(ctx: ConvertContext, node: Node, name: str) -> RelayExpr:
    """The [N, K] weight for ``dense`` from the [K, N] right operand of a matrix product."""
    src_node = node.args[[a.name for a in node.target._schema.arguments].index(name)]
    src = _transposed_source(ctx, src_node)
    return src if src is not None else transform.transpose(ctx.expr(src_node), (1, 0))


@converter("aten.mm.default")
def _mm(ctx: ConvertContext, node: Node, args: Args) -> Output:
    return nn.dense(args["self"], _mm_rhs(ctx, node, "mat2"))


@converter("aten.addmm.default")
def _addmm(ctx: ConvertContext, node: Node, args: Args) -> Output:
    dt = out_dtype(node)
    y = nn.dense(args["mat1"], _mm_rhs(ctx, node, "mat2"))
    if args["alpha"] != 1:
        y = tensor.multiply(y, scalar(args["alpha"], dt))
    b = (
        args["self"]
        if args["beta"] == 1
        else tensor.multiply(args["self"], scalar(args["beta"], dt))
    )
    return tensor.add(b, y)


@converter("aten.bmm.default")
def _bmm(ctx: ConvertContext, node: Node, args: Args) -> Output:
    return nn.batch_matmul(args["self"], args["mat2"], transpose_b=False)


@converter("aten.matmul.default")
def _matmul(ctx: ConvertContext, node: Node, args: Args) -> Output:
    sa, sb = in_shape(node, "self"), in_shape(node, "other")
    return _matmul_expr(ctx, node, args["self"], sa, args["other"], sb)


def _matmul_expr(ctx: ConvertContext, node: Node, A, sa, B, sb) -> RelayExpr:
    """torch.matmul: 1-D operands promoted and squeezed, batch dimensions broadcast."""
    if len(sa) == 1:
        A, sa = reshape_to(A, (1, sa[0])), [1, sa[0]]
    if len(sb) == 1:
        B, sb = reshape_to(B, (sb[0], 1)), [sb[0], 1]
    M, K, N = sa[-2], sa[-1], sb[-1]
    if len(sb) == 2:
        w = _transposed_source(ctx, node.args[1]) if len(in_shape(node, "other")) == 2 else None
        w = w if w is not None else transform.transpose(B, (1, 0))
        out = nn.dense(reshape_to(A, (prod_dims(sa[:-1]), K)) if len(sa) > 2 else A, w)
    else:
        batch = broadcast_dims(sa[:-2], sb[:-2])
        nb = prod_dims(batch)
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


def _batch_norm(ctx: ConvertContext, node: Node, args: Args, training: bool) -> list:
    if training:
        raise fail(node, "training=True is not supported (inference only: call model.eval())")
    if args["running_mean"] is None or args["running_var"] is None:
        raise fail(node, "batch norm without running statistics is not supported")
    ch, dt = in_shape(node, "input")[1], out_dtype(node)
    return nn.batch_norm(
        args["input"],
        _ones_or(args["weight"], ch, dt, 1.0),
        _ones_or(args["bias"], ch, dt, 0.0),
        args["running_mean"],
        args["running_var"],
        axis=1,
        epsilon=float(args["eps"]),
    )[0]


@converter("aten.batch_norm.default")
def _bn(ctx: ConvertContext, node: Node, args: Args) -> Output:
    return _batch_norm(ctx, node, args, bool(args["training"]))


@converter("aten._native_batch_norm_legit_no_training.default")
def _bn_legit(ctx: ConvertContext, node: Node, args: Args) -> Output:
    return [_batch_norm(ctx, node, args, False)]


@converter("aten.native_batch_norm.default")
def _bn_native(ctx: ConvertContext, node: Node, args: Args) -> Output:
    return [_batch_norm(ctx, node, args, bool(args["training"]))]


def _layer_norm(ctx: ConvertContext, node: Node, args: Args) -> RelayExpr:
    x, s = args["input"], in_shape(node, "input")
    nshape = [int(d) for d in args["normalized_shape"]]
    k = len(nshape)
    tail = int(np.prod(nshape))
    dt = in_dtype(node, "input")
    g = _ones_or(args["weight"], tail, dt, 1.0) if args["weight"] is None or k == 1 else \
        reshape_to(args["weight"], (tail,))
    b = _ones_or(args["bias"], tail, dt, 0.0) if args["bias"] is None or k == 1 else \
        reshape_to(args["bias"], (tail,))
    if k == 1:
        return nn.layer_norm(x, g, b, axis=-1, epsilon=float(args["eps"]))
    x2 = reshape_to(x, s[:-k] + [tail])
    return reshape_to(nn.layer_norm(x2, g, b, axis=-1, epsilon=float(args["eps"])), s)


@converter("aten.layer_norm.default")
def _ln(ctx: ConvertContext, node: Node, args: Args) -> Output:
    return _layer_norm(ctx, node, args)


@converter("aten.native_layer_norm.default")
def _ln_native(ctx: ConvertContext, node: Node, args: Args) -> Output:
    return [_layer_norm(ctx, node, args)]


def _group_norm(ctx: ConvertContext, node: Node, x, w, b, groups: int, eps: float) -> RelayExpr:
    s = in_shape(node, "input")
    dt = in_dtype(node, "input")
    return nn.group_norm(x, _ones_or(w, s[1], dt, 1.0), _ones_or(b, s[1], dt, 0.0),
                            num_groups=int(groups), axis=1, epsilon=float(eps))


@converter("aten.group_norm.default")
def _gn(ctx: ConvertContext, node: Node, args: Args) -> Output:
    return _group_norm(
        ctx, node, args["input"], args["weight"], args["bias"], args["num_groups"], args["eps"]
    )


@converter("aten.native_group_norm.default")
def _gn_native(ctx: ConvertContext, node: Node, args: Args) -> Output:
    return [
        _group_norm(
            ctx, node, args["input"], args["weight"], args["bias"], args["group"], args["eps"]
        )
    ]


@converter("aten.instance_norm.default")
def _in(ctx: ConvertContext, node: Node, args: Args) -> Output:
    if args["use_input_stats"] is False:
        raise fail(node, "use_input_stats=False is not supported")
    s = in_shape(node, "input")
    dt = in_dtype(node, "input")
    return nn.instance_norm(args["input"], _ones_or(args["weight"], s[1], dt, 1.0),
                               _ones_or(args["bias"], s[1], dt, 0.0), axis=1,
                               epsilon=float(args["eps"]))


# ------------------------------------------------------------------------------------------------
# softmax
@converter("aten.softmax.int", "aten._softmax.default")
def _softmax(ctx: ConvertContext, node: Node, args: Args) -> Output:
    x = cast_to(args["self"], in_dtype(node), out_dtype(node))
    return nn.softmax(x, int(args["dim"]))


@converter("aten._safe_softmax.default")
def _safe_softmax(ctx: ConvertContext, node: Node, args: Args) -> Output:
    """softmax that gives 0 (not NaN) on rows that are entirely -inf."""
    dt = out_dtype(node)
    x = cast_to(args["self"], in_dtype(node), dt)
    ax = int(args["dim"])
    live = _red.any(tensor.not_equal(x, scalar(-np.inf, dt)), axis=ax, keepdims=True)
    return tensor.where(live, nn.softmax(x, ax), scalar(0, dt))


@converter("aten.log_softmax.int", "aten._log_softmax.default")
def _log_softmax(ctx: ConvertContext, node: Node, args: Args) -> Output:
    x = cast_to(args["self"], in_dtype(node), out_dtype(node))
    return nn.log_softmax(x, int(args["dim"]))



# ------------------------------------------------------------------------------------------------
# pooling and resizing
def _pool_args(node: Node, args: Args, nd: int
               ) -> tuple[list[int], list[int], list[int], list[int]]:
    rep = lambda v: [int(v)] * nd if isinstance(v, int) else (  # noqa: E731
        [int(v[0])] * nd if len(v) == 1 else [int(t) for t in v])
    k = rep(args["kernel_size"])
    stride = (
        rep(args["stride"])
        if args["stride"] not in (None, []) and args["stride"] != ()
        else list(k)
    )
    pad = rep(args["padding"])
    dil = rep(args.get("dilation", 1))
    return k, stride, pad, dil


def _fit(out: RelayExpr, relay_shape: list[int], node: Any, k: int | None = None) -> RelayExpr:
    """Crop a pooling result to torch's shape: with ceil_mode torch drops a last window that
    would start in the right padding, relay's formula keeps it."""
    want = out_shape(node) if k is None else [dim(d) for d in val(node)[k].shape]
    if relay_shape == want:
        return out
    return transform.strided_slice(out, [0] * len(want), want)


def _pooled_shape(xs, k, stride, pad, dil, ceil) -> list[int]:
    out = list(xs[:2])
    for s, kk, st, p, d in zip(xs[2:], k, stride, pad, dil):
        num = s + 2 * p - (kk - 1) * d - 1
        out.append((num + st - 1) // st + 1 if ceil else num // st + 1)
    return out


def _max_pool(ctx: ConvertContext, node: Node, args: Args, k_out: int | None):
    xs = in_shape(node)
    nd = len(xs) - 2
    if nd not in (1, 2, 3):
        raise fail(node, f"max pooling of data {xs} is not supported")
    k, stride, pad, dil = _pool_args(node, args, nd)
    ceil = bool(args["ceil_mode"])
    fn = {1: nn_nd.max_pool1d, 2: nn.max_pool2d, 3: nn_nd.max_pool3d}[nd]
    out = fn(args["self"], pool_size=k, strides=stride, dilation=dil, padding=pad + pad,
             ceil_mode=ceil)
    return _fit(out, _pooled_shape(xs, k, stride, pad, dil, ceil), node, k_out)


@converter("aten.max_pool1d.default", "aten.max_pool2d.default", "aten.max_pool3d.default")
def _maxpool(ctx: ConvertContext, node: Node, args: Args) -> Output:
    return _max_pool(ctx, node, args, None)


@converter("aten.max_pool2d_with_indices.default", "aten.max_pool3d_with_indices.default")
def _maxpool_idx(ctx: ConvertContext, node: Node, args: Args) -> Output:
    return [_max_pool(ctx, node, args, 0)]


@converter("aten.avg_pool1d.default", "aten.avg_pool2d.default", "aten.avg_pool3d.default")
def _avgpool(ctx: ConvertContext, node: Node, args: Args) -> Output:
    xs = in_shape(node)
    nd = len(xs) - 2
    if args.get("divisor_override") is not None:
        raise fail(node, "divisor_override is not supported")
    k, stride, pad, dil = _pool_args(node, args, nd)
    ceil = bool(args["ceil_mode"])
    fn = {1: nn_nd.avg_pool1d, 2: nn.avg_pool2d, 3: nn_nd.avg_pool3d}[nd]
    out = fn(args["self"], pool_size=k, strides=stride, padding=pad + pad, ceil_mode=ceil,
             count_include_pad=bool(args["count_include_pad"]))
    if ceil and _pooled_shape(xs, k, stride, pad, dil, ceil) != out_shape(node):
        raise fail(node, "ceil_mode with a dropped last window is not supported for avg_pool")
    return out


@converter("aten.adaptive_max_pool2d.default")
def _adaptive_max(ctx: ConvertContext, node: Node, args: Args) -> Output:
    xs = in_shape(node)
    if len(xs) != 4 or out_shape(node)[2:] != [1, 1]:
        raise fail(node, f"only a 1x1 output from 4-D data is supported, got {xs} -> "
                         f"{out_shape(node)}")
    return [nn.global_max_pool2d(args["self"])]


@converter("aten.adaptive_avg_pool2d.default", "aten._adaptive_avg_pool2d.default")
def _adaptive_avg(ctx: ConvertContext, node: Node, args: Args) -> Output:
    xs = in_shape(node)
    if len(xs) != 4:
        raise fail(node, f"only 4-D (NCHW) data is supported, got {xs}")
    size = out_shape(node)[2:]
    if size == [1, 1]:
        return nn.global_avg_pool2d(args["self"])
    return nn.adaptive_avg_pool2d(args["self"], size)


def _resize(ctx: ConvertContext, node: Node, x, method: str, align_corners: bool | None,
            scales: Any):
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
    # align_corners=False is half_pixel: torch clamps a negative source coordinate to 0, which
    # linear resizing's clamped neighbours equal; not pytorch_half_pixel, which samples row 0
    # for an output axis of length 1 where torch samples the middle
    mode = "align_corners" if align_corners else "half_pixel"
    return resize2d(x, want[2:], method="linear", coordinate_transformation_mode=mode)


@converter("aten.upsample_nearest2d.vec")
def _up_nearest_vec(ctx: ConvertContext, node: Node, args: Args) -> Output:
    return _resize(ctx, node, args["input"], "nearest_neighbor", None, args["scale_factors"])


@converter("aten.upsample_nearest2d.default")
def _up_nearest(ctx: ConvertContext, node: Node, args: Args) -> Output:
    return _resize(
        ctx,
        node,
        args["self"] if "self" in args else args["input"],
        "nearest_neighbor",
        None,
        [args.get("scales_h"), args.get("scales_w")],
    )


@converter("aten.upsample_bilinear2d.vec")
def _up_bilinear_vec(ctx: ConvertContext, node: Node, args: Args) -> Output:
    return _resize(
        ctx, node, args["input"], "linear", bool(args["align_corners"]), args["scale_factors"]
    )


@converter("aten.upsample_bilinear2d.default")
def _up_bilinear(ctx: ConvertContext, node: Node, args: Args) -> Output:
    return _resize(ctx, node, args["self"] if "self" in args else args["input"], "linear",
                   bool(args["align_corners"]), [args.get("scales_h"), args.get("scales_w")])


# ------------------------------------------------------------------------------------------------
# attention
@converter("aten.scaled_dot_product_attention.default")
def _sdpa(ctx: ConvertContext, node: Node, args: Args) -> Output:
    """softmax(q @ k^T * scale + mask) @ v, over the flattened leading (batch, head) axes."""
    qs, ks, vs = (in_shape(node, n) for n in ("query", "key", "value"))
    if args.get("dropout_p", 0.0):
        raise fail(node, "dropout_p > 0 is not supported (inference only)")
    if args.get("enable_gqa") and qs[:-2] != ks[:-2]:
        raise fail(node, "grouped-query attention (enable_gqa) is not supported")
    dt = out_dtype(node)
    L, E, S, Ev = qs[-2], qs[-1], ks[-2], vs[-1]
    batch = broadcast_dims(qs[:-2], ks[:-2], vs[:-2])
    nb = prod_dims(batch)

    def flat(x, s, tail):
        if s[:-2] != batch:
            x = transform.broadcast_to(x, batch + tail)
        return reshape_to(x, [nb] + tail)

    q, k, v = (
        flat(args["query"], qs, [L, E]),
        flat(args["key"], ks, [S, E]),
        flat(args["value"], vs, [S, Ev]),
    )
    scale = args.get("scale")
    scale = 1.0 / math.sqrt(E) if scale is None else float(scale)
    scores = tensor.multiply(nn.batch_matmul(q, k), scalar(scale, dt))
    scores = reshape_to(scores, batch + [L, S])
    mask = args.get("attn_mask")
    if args.get("is_causal"):
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
