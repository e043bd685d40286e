"""Numpy implementations of the relay operators (op attribute ``"FNumpy"``), used by the reference
interpreter (``relay.create_executor("debug")``): the written meaning of each operator, and an
oracle for graph passes (a pass must not change what the interpreter computes).

Each implementation is ``f(attrs, inputs: list[np.ndarray], out_type) -> np.ndarray | tuple``.
Heavy operators reuse the independent references in ``tvmpy.topi.testing``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .registry import register_op_attr

__all__ = ["FNUMPY", "layout_transform_np"]

FNUMPY: dict[str, Callable[..., Any]] = {}


def _reg(*names: str):
    def deco(f):
        for n in names:
            FNUMPY[n] = f
        return f

    return deco


def _ref():
    from ...topi import testing

    return testing


def _dtype(out_type: Any) -> np.dtype:
    from ...ir.dtype import to_numpy

    return to_numpy(str(out_type.dtype))  # bfloat16 / float8...: ml_dtypes' numpy types


def _simple(name: str, fn: Callable[..., Any]) -> None:
    FNUMPY[name] = lambda attrs, ins, t: np.asarray(fn(*ins)).astype(_dtype(t))


def _mod(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.fmod(a, b)  # truncated remainder (C semantics), as TVM's mod


for _n, _f in {
    "negative": np.negative, "exp": np.exp, "log": np.log, "log1p": np.log1p, "sqrt": np.sqrt,
    "rsqrt": lambda x: 1.0 / np.sqrt(x), "tanh": np.tanh, "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "abs": np.abs, "floor": np.floor, "ceil": np.ceil, "nearbyint": np.rint, "sign": np.sign,
    "round": np.round,  # half to even, as the compiled code (llvm.roundeven / rint)
    "sin": np.sin, "cos": np.cos, "copy": np.copy, "annotation.stop_fusion": np.copy, "log2": np.log2, "trunc": np.trunc,
    "isnan": np.isnan, "logical_not": np.logical_not, "zeros_like": np.zeros_like,
    "ones_like": np.ones_like, "add": np.add, "subtract": np.subtract, "multiply": np.multiply,
    "power": np.power, "maximum": np.maximum, "minimum": np.minimum, "mod": _mod,
    "logical_and": np.logical_and, "logical_or": np.logical_or, "equal": np.equal,
    "not_equal": np.not_equal, "less": np.less, "less_equal": np.less_equal,
    "greater": np.greater, "greater_equal": np.greater_equal, "where": np.where,
    "nn.relu": lambda x: np.maximum(x, 0),
}.items():  # fmt: skip
    _simple(_n, _f)

_simple("divide", lambda a, b: _ref().divide(a, b))
_simple("floor_divide", lambda a, b: _ref().floor_divide(a, b))
_simple("floor_mod", lambda a, b: _ref().floor_mod(a, b))
_simple("erf", lambda x: _ref().erf(x))


@_reg("clip")
def _clip(attrs, ins, t):
    return np.clip(ins[0], attrs.a_min, attrs.a_max).astype(_dtype(t))


@_reg("nn.leaky_relu")
def _leaky(attrs, ins, t):
    x = ins[0]
    return np.where(x > 0, x, x * attrs.alpha).astype(_dtype(t))


@_reg("nn.gelu")
def _gelu(attrs, ins, t):
    x = ins[0].astype(np.float64)
    if attrs.approximate == "tanh":
        y = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))
        return y.astype(_dtype(t))
    return _ref().gelu(ins[0]).astype(_dtype(t))


def _bshape(ndim: int, axis: int, size: int) -> list[int]:
    s = [1] * ndim
    s[axis % ndim] = size
    return s


@_reg("nn.prelu")
def _prelu(attrs, ins, t):
    x, a = ins
    a = a.reshape(_bshape(x.ndim, attrs.axis, a.shape[0]))
    return np.where(x > 0, x, x * a).astype(_dtype(t))


@_reg("nn.bias_add")
def _bias_add(attrs, ins, t):
    x, b = ins
    return (x + b.reshape(_bshape(x.ndim, attrs.axis, b.shape[0]))).astype(_dtype(t))


@_reg("nn.softmax")
def _softmax(attrs, ins, t):
    return _ref().softmax_python(ins[0], attrs.axis).astype(_dtype(t))


@_reg("nn.log_softmax")
def _log_softmax(attrs, ins, t):
    return _ref().log_softmax_python(ins[0], attrs.axis).astype(_dtype(t))


@_reg("full")
def _full(attrs, ins, t):
    return np.full(tuple(int(s) for s in t.shape), ins[0], dtype=_dtype(t))


@_reg("zeros")
def _zeros(attrs, ins, t):
    return np.zeros(tuple(int(s) for s in t.shape), dtype=_dtype(t))


@_reg("ones")
def _ones(attrs, ins, t):
    return np.ones(tuple(int(s) for s in t.shape), dtype=_dtype(t))


@_reg("stack")
def _stack(attrs, ins, t):
    return np.stack(list(ins[0]), axis=attrs.axis)


# -------------------------------------------------------------------------------------------------
# reductions
def _axes(attrs, ndim: int) -> tuple[int, ...]:
    axes = list(range(ndim)) if attrs.axis is None else [a % ndim for a in attrs.axis]
    if attrs.exclude:
        axes = [i for i in range(ndim) if i not in axes]
    return tuple(axes)


def _reducer(fn):
    def f(attrs, ins, t):
        x = ins[0]
        out = fn(x, axis=_axes(attrs, x.ndim), keepdims=attrs.keepdims)
        return np.asarray(out).astype(_dtype(t))

    return f


for _n, _f in {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min, "prod": np.prod,
               "all": np.all, "any": np.any}.items():
    FNUMPY[_n] = _reducer(_f)


def _arg(fn):
    def f(attrs, ins, t):
        x = ins[0]
        axes = _axes(attrs, x.ndim)
        keep = [i for i in range(x.ndim) if i not in axes]
        moved = np.transpose(x, keep + list(axes))
        flat = moved.reshape([x.shape[i] for i in keep] + [int(np.prod([x.shape[a] for a in axes]))])
        if flat.size == 0:  # an empty kept axis: an empty result (over an empty axis: an error)
            if flat.shape[-1] == 0:
                raise ValueError(f"arg-reduction over an empty axis of shape {x.shape}")
            return np.zeros(tuple(int(d) for d in t.shape), _dtype(t))
        idx = fn(flat, axis=-1)
        if attrs.keepdims:
            idx = idx.reshape([1 if i in axes else x.shape[i] for i in range(x.ndim)])
        return np.asarray(idx).astype(_dtype(t))

    return f


FNUMPY["argmax"] = _arg(np.argmax)
FNUMPY["argmin"] = _arg(np.argmin)


@_reg("variance")
def _variance(attrs, ins, t):
    x, m = ins
    axes = _axes(attrs, x.ndim)
    n = int(np.prod([x.shape[a] for a in axes])) if axes else 1
    sq = ((x.astype(np.float64) - m) ** 2).sum(axis=axes, keepdims=attrs.keepdims)
    return (sq / (n - 1 if attrs.unbiased else n)).astype(_dtype(t))


# -------------------------------------------------------------------------------------------------
# transforms
def _to_shape(attrs, ins, t):
    return ins[0].reshape(tuple(int(s) for s in t.shape))


for _n in ("reshape", "reshape_like", "squeeze", "expand_dims", "nn.batch_flatten"):
    FNUMPY[_n] = _to_shape


@_reg("broadcast_to")
def _broadcast_to(attrs, ins, t):
    return np.broadcast_to(ins[0], tuple(int(s) for s in t.shape)).copy()


@_reg("transpose")
def _transpose(attrs, ins, t):
    return np.transpose(ins[0], attrs.axes)


@_reg("concatenate")
def _concat(attrs, ins, t):
    return np.concatenate(list(ins[0]), axis=attrs.axis)


@_reg("split")
def _split(attrs, ins, t):
    ios = attrs.indices_or_sections
    return tuple(np.split(ins[0], ios if isinstance(ios, int) else list(ios), axis=attrs.axis))


@_reg("take")
def _take(attrs, ins, t):
    return _ref().take_ref(ins[0], ins[1].astype(np.int64), attrs.axis, attrs.mode)


@_reg("strided_slice")
def _strided_slice(attrs, ins, t):
    x = ins[0]
    axes = attrs.axes if attrs.axes is not None else list(range(len(attrs.begin)))
    strides = list(attrs.strides) if attrs.strides else [1] * len(axes)
    if len(strides) == 1:
        strides = strides * len(axes)
    return _ref().strided_slice_ref(x, attrs.begin, attrs.end, strides, axes).copy()


@_reg("cast")
def _cast(attrs, ins, t):
    return ins[0].astype(_dtype(t))


@_reg("reinterpret")
def _reinterpret(attrs, ins, t):
    return np.array(ins[0], order="C").view(_dtype(t))


def layout_transform_np(x: np.ndarray, src: str, dst: str) -> np.ndarray:
    """Any layout to any layout ("NCHW" <-> "NCHW8c" <-> "NHWC" ...) by merging then splitting."""
    from .transform import _parse_layout

    s, d = _parse_layout(src), _parse_layout(dst)
    # 1. merge every sub-axis into its primal axis: primal letters in src order
    primal = [c for c, _ in s if c.isupper()]
    order = []
    for c in primal:
        order.append(next(i for i, (cc, _) in enumerate(s) if cc == c))
        sub = [i for i, (cc, _) in enumerate(s) if cc == c.lower()]
        order.extend(sub)
    merged = np.transpose(x, order)
    sizes = {}
    shape = []
    pos = 0
    for c in primal:
        n = 2 if any(cc == c.lower() for cc, _ in s) else 1
        sizes[c] = int(np.prod(merged.shape[pos:pos + n]))
        shape.append(sizes[c])
        pos += n
    merged = merged.reshape(shape)
    # 2. permute to dst's primal order, split, permute to dst order
    dprimal = [c for c, _ in d if c.isupper()]
    merged = np.transpose(merged, [primal.index(c) for c in dprimal])
    split_shape, names = [], []
    for c in dprimal:
        f = next((ff for cc, ff in d if cc == c.lower()), None)
        if f:
            split_shape += [sizes[c] // f, f]
            names += [c, c.lower()]
        else:
            split_shape.append(sizes[c])
            names.append(c)
    split = merged.reshape(split_shape)
    return np.ascontiguousarray(np.transpose(split, [names.index(c) for c, _ in d]))


@_reg("layout_transform")
def _layout_transform(attrs, ins, t):
    return layout_transform_np(ins[0], attrs.src_layout, attrs.dst_layout)


# -------------------------------------------------------------------------------------------------
# nn
def _to_nchw(x: np.ndarray, layout: str) -> np.ndarray:
    if layout not in ("NCHW", "NHWC"):  # blocked NCHW{c}c (pooling after AlterOpLayout)
        return layout_transform_np(x, layout, "NCHW")
    return x if layout == "NCHW" else np.transpose(x, (0, 3, 1, 2))


def _from_nchw(x: np.ndarray, layout: str) -> np.ndarray:
    if layout not in ("NCHW", "NHWC"):
        return layout_transform_np(x, "NCHW", layout)
    return x if layout == "NCHW" else np.transpose(x, (0, 2, 3, 1))


def _widen(*xs: np.ndarray) -> list[np.ndarray]:
    """Integer operands accumulate in int64 (int8 x int8 -> int32 convolutions would wrap in the
    inputs' type), then the result is cast to the output type."""
    return [x.astype(np.int64) if np.issubdtype(x.dtype, np.integer) else x for x in xs]


@_reg("nn.conv2d")
def _conv2d(attrs, ins, t):
    x, w = _widen(*ins)
    w = layout_transform_np(w, attrs.kernel_layout, "OIHW")
    out = _ref().group_conv2d_nchw_python(_to_nchw(x, attrs.data_layout), w, attrs.strides,
                                           attrs.padding, attrs.dilation, attrs.groups)
    return _from_nchw(out, attrs.data_layout).astype(_dtype(t))


@_reg("nn.contrib_conv2d_NCHWc")
def _conv2d_nchwc(attrs, ins, t):
    x, w = _widen(*ins)
    o, i = w.shape[0] * w.shape[5], w.shape[1] * w.shape[4]  # OIHW{i}i{o}o -> OIHW
    w = w.transpose(0, 5, 1, 4, 2, 3).reshape(o, i, w.shape[2], w.shape[3])
    src = layout_transform_np(x, attrs.data_layout, "NCHW")
    out = _ref().group_conv2d_nchw_python(src, w, attrs.strides, attrs.padding, attrs.dilation,
                                          attrs.groups)
    return layout_transform_np(out, "NCHW", attrs.out_layout or attrs.data_layout).astype(_dtype(t))


@_reg("nn.contrib_conv2d_winograd_nchwc")
def _conv2d_winograd(attrs, ins, t):
    from ...topi.nn.winograd import winograd_nchwc_np

    x, u = ins
    return winograd_nchwc_np(x, u, attrs.padding, attrs.tile_size).astype(_dtype(t))


@_reg("nn.contrib_conv2d_winograd_without_weight_transform")
def _conv2d_winograd_pre(attrs, ins, t):
    from ...topi.nn.winograd import winograd_nchwc_np

    x, u = ins  # NCHW, [alpha, alpha, CI, CO]: the NCHWc forms with one block of all channels
    y = winograd_nchwc_np(x.transpose(0, 2, 3, 1)[:, None], u[:, :, None], attrs.padding,
                          attrs.tile_size)
    return y[:, 0].transpose(0, 3, 1, 2).astype(_dtype(t))


@_reg("nn.contrib_conv2d_winograd_weight_transform")
def _winograd_weight_transform(attrs, ins, t):
    from ...topi.nn.winograd import winograd_weight_transform_np

    return winograd_weight_transform_np(ins[0], attrs.tile_size, attrs.oc_bn).astype(_dtype(t))


@_reg("nn.conv2d_transpose")
def _conv2d_transpose(attrs, ins, t):
    x, w = ins
    dh, dw = attrs.dilation
    if (dh, dw) != (1, 1):  # the dilated kernel: zeros between the taps
        ic, ocg, kh, kw = w.shape
        wd = np.zeros((ic, ocg, (kh - 1) * dh + 1, (kw - 1) * dw + 1), w.dtype)
        wd[:, :, ::dh, ::dw] = w
        w = wd
    g = attrs.groups
    icg = x.shape[1] // g
    out = np.concatenate([_ref().conv2d_transpose_nchw_python(
        x[:, j * icg:(j + 1) * icg], w[j * icg:(j + 1) * icg], attrs.strides, attrs.padding,
        attrs.output_padding) for j in range(g)], axis=1)
    return out.astype(_dtype(t))


@_reg("nn.contrib_dense_pack")
def _dense_pack(attrs, ins, t):
    x, wp = ins  # wp[N/n, K, n] -> W[N, K]
    w = wp.transpose(0, 2, 1).reshape(wp.shape[0] * wp.shape[2], wp.shape[1])
    w = w[:attrs.units] if attrs.units is not None else w  # (a zero-padded last panel)
    return (x.astype(np.float64) @ w.astype(np.float64).T).astype(_dtype(t))


@_reg("nn.dense")
def _dense(attrs, ins, t):
    x, w = ins
    return (x.astype(np.float64) @ w.astype(np.float64).T).astype(_dtype(t))


@_reg("nn.matmul")
def _matmul(attrs, ins, t):
    a, b = (v.astype(np.float64) for v in ins)
    a = np.swapaxes(a, -1, -2) if attrs.transpose_a else a
    b = b.T if attrs.transpose_b else b
    return (a @ b).astype(_dtype(t))


@_reg("nn.batch_matmul")
def _batch_matmul(attrs, ins, t):
    a, b = (v.astype(np.float64) for v in ins)
    a = np.swapaxes(a, 1, 2) if attrs.transpose_a else a
    b = np.swapaxes(b, 1, 2) if attrs.transpose_b else b
    return np.matmul(a, b).astype(_dtype(t))


@_reg("nn.batch_norm")
def _batch_norm(attrs, ins, t):
    x, g, b, m, v = ins
    out = _ref().batch_norm_python(x, g, b, m, v, attrs.axis % x.ndim, attrs.epsilon, attrs.center,
                                   attrs.scale)
    return (out.astype(x.dtype), m.copy(), v.copy())


@_reg("nn.layer_norm")
def _layer_norm(attrs, ins, t):
    x, g, b = ins
    g = g if attrs.scale else np.ones_like(g)
    b = b if attrs.center else np.zeros_like(b)
    return _ref().layer_norm_python(x, g, b, attrs.axis, attrs.epsilon).astype(_dtype(t))


@_reg("nn.dropout")
def _dropout(attrs, ins, t):
    return (ins[0].copy(), np.ones_like(ins[0]))


def _pool(kind: str):
    def f(attrs, ins, t):
        x = _to_nchw(ins[0], attrs.layout)
        out = _ref().pool2d_python(x, attrs.pool_size, attrs.strides, attrs.dilation, attrs.padding,
                                   kind, attrs.ceil_mode, attrs.get("count_include_pad", False))
        return _from_nchw(out, attrs.layout).astype(_dtype(t))

    return f


FNUMPY["nn.max_pool2d"] = _pool("max")
FNUMPY["nn.avg_pool2d"] = _pool("avg")


def _global_pool(kind: str):
    def f(attrs, ins, t):
        x = _to_nchw(ins[0], attrs.layout)
        return _from_nchw(_ref().global_pool_python(x, kind), attrs.layout).astype(_dtype(t))

    return f


FNUMPY["nn.global_avg_pool2d"] = _global_pool("avg")
FNUMPY["nn.global_max_pool2d"] = _global_pool("max")


@_reg("nn.adaptive_avg_pool2d")
def _adaptive(attrs, ins, t):
    x = _to_nchw(ins[0], attrs.layout)
    out = _ref().adaptive_pool_python(x, attrs.output_size, "avg")
    return _from_nchw(out, attrs.layout).astype(_dtype(t))


@_reg("nn.pad")
def _pad(attrs, ins, t):
    if attrs.pad_mode == "constant":
        return np.pad(ins[0], attrs.pad_width, constant_values=attrs.pad_value)
    return np.pad(ins[0], attrs.pad_width, mode=attrs.pad_mode)


def _resize_rounding(attrs) -> str:
    """rounding_method "" means TVM's default, as topi.image.resize2d: "round" under
    align_corners, else "floor" (the ONNX frontend always passes ONNX's nearest_mode)."""
    if attrs.rounding_method:
        return attrs.rounding_method
    return "round" if attrs.coordinate_transformation_mode == "align_corners" else "floor"


@_reg("image.resize2d")
def _resize2d(attrs, ins, t):
    if attrs.method == "cubic":
        raise NotImplementedError("the reference resize2d has no cubic mode")
    out = _ref().resize2d_ref(ins[0], attrs.size, attrs.layout, attrs.method,
                              attrs.coordinate_transformation_mode,
                              _resize_rounding(attrs))
    return np.asarray(out).astype(_dtype(t))


for _n, _f in {
    "tan": np.tan, "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh,
    "cosh": np.cosh, "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh,
    "bitwise_not": np.invert, "isinf": np.isinf, "isfinite": np.isfinite,
    "bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or, "bitwise_xor": np.bitwise_xor,
    "left_shift": np.left_shift, "right_shift": np.right_shift, "logical_xor": np.logical_xor,
}.items():  # fmt: skip
    _simple(_n, _f)


@_reg("tile")
def _tile(attrs, ins, t):
    return np.tile(ins[0], attrs.reps)


@_reg("repeat")
def _repeat(attrs, ins, t):
    return np.repeat(ins[0], attrs.repeats, axis=attrs.axis)


@_reg("reverse")
def _reverse(attrs, ins, t):
    return np.flip(ins[0], axis=attrs.axis).copy()


@_reg("gather")
def _gather(attrs, ins, t):
    data, idx = ins[0], ins[1].astype(np.int64)
    axis = attrs.axis % data.ndim
    # the output has the indices' shape: data is read at the same position on the other axes
    # (np.take_along_axis would broadcast indices of size 1 there instead)
    data = data[tuple(slice(None) if k == axis else slice(0, n) for k, n in enumerate(idx.shape))]
    return np.take_along_axis(data, idx, axis=axis)


@_reg("gather_nd")
def _gather_nd(attrs, ins, t):
    data, idx = ins[0], ins[1].astype(np.int64)
    bd = attrs.batch_dims
    m = idx.shape[0]
    out_shape = tuple(int(s) for s in t.shape)
    if bd == 0:
        return data[tuple(idx[i] for i in range(m))].reshape(out_shape)
    # batch dims: the leading bd axes of indices[1:] and data run together
    res = np.empty(out_shape, dtype=data.dtype)
    for b in np.ndindex(*data.shape[:bd]):
        sub_idx = idx[(slice(None), *b)]
        res[b] = data[b][tuple(sub_idx[i] for i in range(m))]
    return res


@_reg("one_hot")
def _one_hot(attrs, ins, t):
    idx, on, off = ins
    depth = attrs.depth
    ax = attrs.axis if attrs.axis >= 0 else idx.ndim + 1 + attrs.axis
    hot = np.expand_dims(idx, ax) == np.arange(depth).reshape(
        [depth if i == ax else 1 for i in range(idx.ndim + 1)])
    return np.where(hot, on, off).astype(_dtype(t))


@_reg("arange")
def _arange(attrs, ins, t):
    n = int(t.shape[0])
    return (attrs.start + attrs.step * np.arange(n)).astype(_dtype(t))


@_reg("cumsum")
def _cumsum(attrs, ins, t):
    x = ins[0].astype(_dtype(t))
    out = np.cumsum(x.reshape(-1) if attrs.axis is None else x, axis=0 if attrs.axis is None else attrs.axis)
    if attrs.exclusive:
        out = out - (x.reshape(-1) if attrs.axis is None else x)
    return out.astype(_dtype(t))


def _norm_over(x, axes, gamma, beta, axis, eps, center, scale, t):
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=axes, keepdims=True)
    var = ((x64 - mean) ** 2).mean(axis=axes, keepdims=True)
    out = (x64 - mean) / np.sqrt(var + eps)
    bs = _bshape(x.ndim, axis, x.shape[axis])
    if scale:
        out = out * gamma.reshape(bs)
    if center:
        out = out + beta.reshape(bs)
    return out.astype(_dtype(t))


@_reg("nn.instance_norm")
def _instance_norm(attrs, ins, t):
    x, g, b = ins
    ax = attrs.axis % x.ndim
    axes = tuple(i for i in range(1, x.ndim) if i != ax)
    return _norm_over(x, axes, g, b, ax, attrs.epsilon, attrs.center, attrs.scale, t)


@_reg("nn.group_norm")
def _group_norm(attrs, ins, t):
    x, g, b = ins
    if attrs.axis % x.ndim != 1:
        raise NotImplementedError("the reference group_norm supports channel axis 1")
    n, c = x.shape[:2]
    grp = x.reshape(n, attrs.num_groups, c // attrs.num_groups, *x.shape[2:]).astype(np.float64)
    axes = tuple(range(2, grp.ndim))
    mean = grp.mean(axis=axes, keepdims=True)
    var = ((grp - mean) ** 2).mean(axis=axes, keepdims=True)
    out = ((grp - mean) / np.sqrt(var + attrs.epsilon)).reshape(x.shape)
    bs = _bshape(x.ndim, 1, c)
    if attrs.scale:
        out = out * g.reshape(bs)
    if attrs.center:
        out = out + b.reshape(bs)
    return out.astype(_dtype(t))


@_reg("nn.stride_interleave")
def _stride_interleave(attrs, ins, t):
    parts = list(ins[0])
    sh, sw = attrs.strides
    oh, ow = attrs.out_size
    n, c, qh, qw, *blk = parts[0].shape
    a = np.stack(parts).reshape(sh, sw, n, c, qh, qw, *blk)
    a = a.transpose(2, 3, 4, 0, 5, 1, *range(6, a.ndim)).reshape(n, c, qh * sh, qw * sw, *blk)
    return np.ascontiguousarray(a[:, :, :oh, :ow])


@_reg("nn.depth_to_space")
def _depth_to_space(attrs, ins, t):
    x = ins[0]
    n, c, h, w = x.shape
    b = attrs.block_size
    if attrs.mode == "DCR":
        y = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
    else:
        y = x.reshape(n, c // (b * b), b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
    return y.reshape(n, c // (b * b), h * b, w * b)


@_reg("nn.space_to_depth")
def _space_to_depth(attrs, ins, t):
    x = ins[0]
    n, c, h, w = x.shape
    b = attrs.block_size
    y = x.reshape(n, c, h // b, b, w // b, b).transpose(0, 3, 5, 1, 2, 4)
    return y.reshape(n, c * b * b, h // b, w // b)


def _conv_nd(attrs, ins, t):
    n = ins[0].ndim - 2
    p = attrs.padding
    out = _ref().conv_nd_python(ins[0], ins[1], attrs.strides, p[:n], p[n:], attrs.dilation,
                                attrs.groups)
    return out.astype(_dtype(t))


def _pool_nd(kind: str):
    def f(attrs, ins, t):
        n = ins[0].ndim - 2
        p = attrs.padding
        out = _ref().pool_nd_python(ins[0], attrs.pool_size, attrs.strides, attrs.dilation, p[:n],
                                    p[n:], kind, attrs.ceil_mode,
                                    attrs.get("count_include_pad", False))
        return out.astype(_dtype(t))

    return f


for _d in (1, 3):
    FNUMPY[f"nn.conv{_d}d"] = _conv_nd
    FNUMPY[f"nn.max_pool{_d}d"] = _pool_nd("max")
    FNUMPY[f"nn.avg_pool{_d}d"] = _pool_nd("avg")


@_reg("nn.bitpack")
def _bitpack(attrs, ins, t):
    return _ref().bitpack_python(ins[0], attrs.bits, attrs.pack_axis, attrs.bit_axis,
                                 attrs.pack_dtype)


def _bitserial_weight(w, unpacked_rank, pack_axis, bit_axis, extent):
    """An unpacked weight as is; a packed one (``nn.bitpack`` output) unpacked."""
    if w.ndim == unpacked_rank:
        return w
    return _ref().bitunpack_python(w, pack_axis, bit_axis, extent)


@_reg("nn.bitserial_dense")
def _bitserial_dense(attrs, ins, t):
    x, w = ins
    w = _bitserial_weight(w, 2, 1, 1, x.shape[1])
    return _ref().bitserial_dense_python(x, w, attrs.data_bits, attrs.weight_bits,
                                         attrs.out_dtype, attrs.unipolar)


@_reg("nn.bitserial_conv2d")
def _bitserial_conv2d(attrs, ins, t):
    x, w = ins
    nchw = attrs.data_layout == "NCHW"
    w = _bitserial_weight(w, 4, 1 if nchw else 2, 2 if nchw else 4, x.shape[1 if nchw else 3])
    fn = _ref().bitserial_conv2d_nchw_python if nchw else _ref().bitserial_conv2d_nhwc_python
    return fn(x, w, attrs.strides, attrs.padding, attrs.activation_bits, attrs.weight_bits,
              attrs.out_dtype, attrs.unipolar)


def register_all() -> None:
    for name, f in FNUMPY.items():
        try:
            register_op_attr(name, "FNumpy", f, level=1)
        except ValueError:
            pass  # an operator not registered in this build

