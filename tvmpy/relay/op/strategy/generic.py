"""Target-independent computes (``FTVMCompute``) and fallback strategies for relay operators.

Every compute has TVM's signature ``fcompute(attrs, inputs, out_type) -> [te.Tensor]``: the
call's attributes, one ``te.Tensor`` per tensor argument (tuple arguments flattened), and the
call's inferred type. The generic strategy pairs it with a schedule that is correct everywhere
(``topi.generic``: injective producers inlined, no other loop transformation).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

from .... import te, topi
from ....target import as_target, generic_func
from ....tir import op as tir_op
from ....tir.expr import Select, cast, const
from ....topi import x86 as topi_x86
from ..registry import OpPattern, get, register_compute
from . import OpStrategy, register_strategy_func
from .bitserial import BITSERIAL_COMPUTES

__all__ = ["COMPUTES", "CONV2D_COMPUTES", "conv2d_kind", "conv2d_strategy", "generic_schedule",
           "schedule_fallback", "wrap_topi_schedule", "schedule_injective", "schedule_reduce",
           "pattern_schedule", "register_default_strategy", "out_dtype_of", "norm_gamma_beta",
           "in_target"]

Compute = Callable[[Any, list, Any], list]
COMPUTES: dict[str, Compute] = {}


def _reg(name: str) -> Callable[[Compute], Compute]:
    def deco(f: Compute) -> Compute:
        COMPUTES[name] = f
        return f

    return deco


def _one(fn: Callable[..., Any]) -> Compute:
    return lambda attrs, inputs, out_type: [fn(*inputs)]


def _out_shape(out_type: Any) -> tuple:
    return tuple(out_type.shape)


# ---- elementwise -------------------------------------------------------------------------
for _n, _f in {
    "negative": topi.negative, "exp": topi.exp, "log": topi.log, "sqrt": topi.sqrt,
    "rsqrt": topi.rsqrt, "tanh": topi.tanh, "sigmoid": topi.sigmoid, "abs": topi.abs,
    "erf": topi.erf, "floor": topi.floor, "ceil": topi.ceil, "round": topi.round, "nearbyint": topi.nearbyint,
    "sign": topi.sign, "sin": topi.sin, "cos": topi.cos, "trunc": topi.trunc,
    "isnan": topi.isnan, "isinf": topi.isinf, "isfinite": topi.isfinite,
    "logical_not": topi.logical_not, "bitwise_not": topi.bitwise_not, "nn.relu": topi.relu,
    "copy": topi.identity, "annotation.stop_fusion": topi.identity,
}.items():
    COMPUTES[_n] = _one(_f)

for _n in ("tan", "asin", "acos", "atan", "sinh", "cosh", "log2", "log1p"):
    COMPUTES[_n] = (lambda f, n: lambda attrs, inputs, out_type: [
        topi.elemwise.elemwise(inputs[0], f, n)])(getattr(tir_op, _n), _n)

for _n in ("add", "subtract", "multiply", "divide", "power", "maximum", "minimum", "mod",
           "floor_divide", "floor_mod", "logical_and", "logical_or", "logical_xor",
           "bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift", "equal",
           "not_equal", "less", "less_equal", "greater", "greater_equal"):
    COMPUTES[_n] = _one(getattr(topi, _n))

COMPUTES["where"] = _one(topi.where)


@_reg("nn.dropout")
def _dropout(attrs: Any, inputs: list, out_type: Any) -> list:
    """Inference: the identity, and a mask of ones."""
    return [topi.identity(inputs[0]), topi.full_like(inputs[0], 1)]


@_reg("zeros_like")
def _zeros_like(attrs: Any, inputs: list, out_type: Any) -> list:
    return [topi.full_like(inputs[0], 0)]


@_reg("ones_like")
def _ones_like(attrs: Any, inputs: list, out_type: Any) -> list:
    return [topi.full_like(inputs[0], 1)]


@_reg("zeros")
def _zeros(attrs: Any, inputs: list, out_type: Any) -> list:
    return [topi.full(_out_shape(out_type), out_type.dtype, 0)]


@_reg("ones")
def _ones(attrs: Any, inputs: list, out_type: Any) -> list:
    return [topi.full(_out_shape(out_type), out_type.dtype, 1)]


@_reg("full")
def _full(attrs: Any, inputs: list, out_type: Any) -> list:
    fill = inputs[0]
    return [te.compute(_out_shape(out_type), lambda *i: fill[()].astype(out_type.dtype),
                       name="T_full", tag="broadcast")]


@_reg("arange")
def _arange(attrs: Any, inputs: list, out_type: Any) -> list:
    return [topi.arange(attrs.start, attrs.stop, attrs.step, attrs.dtype)]


@_reg("clip")
def _clip(attrs: Any, inputs: list, out_type: Any) -> list:
    return [topi.clip(inputs[0], attrs.a_min, attrs.a_max)]


@_reg("nn.leaky_relu")
def _leaky_relu(attrs: Any, inputs: list, out_type: Any) -> list:
    return [topi.leaky_relu(inputs[0], attrs.alpha)]


@_reg("nn.prelu")
def _prelu(attrs: Any, inputs: list, out_type: Any) -> list:
    return [topi.prelu(inputs[0], inputs[1], attrs.axis)]


@_reg("nn.gelu")
def _gelu(attrs: Any, inputs: list, out_type: Any) -> list:
    if attrs.approximate not in ("none", "", None, "tanh"):
        raise NotImplementedError(f"nn.gelu: approximate={attrs.approximate!r} has no compute")
    return [topi.gelu(inputs[0], "tanh" if attrs.approximate == "tanh" else "none")]


@_reg("cast")
def _cast(attrs: Any, inputs: list, out_type: Any) -> list:
    return [topi.cast(inputs[0], out_type.dtype)]


@_reg("reinterpret")
def _reinterpret(attrs: Any, inputs: list, out_type: Any) -> list:
    return [topi.reinterpret(inputs[0], out_type.dtype)]


@_reg("nn.bias_add")
def _bias_add(attrs: Any, inputs: list, out_type: Any) -> list:
    data, bias = inputs
    ax = attrs.axis % len(data.shape)
    return [te.compute(data.shape, lambda *i: data[i] + bias[i[ax]], name="T_bias_add",
                       tag="broadcast")]


# ---- reductions ---------------------------------------------------------------------------
def _axes(attrs: Any, ndim: int) -> Any:
    if attrs.axis is None:
        return list(range(ndim)) if attrs.exclude else None
    ax = attrs.axis if isinstance(attrs.axis, (list, tuple)) else [attrs.axis]
    ax = [a % ndim for a in ax]
    if attrs.exclude:
        return [i for i in range(ndim) if i not in ax]
    return ax


for _n in ("sum", "mean", "max", "min", "prod", "all", "any", "argmax", "argmin"):
    COMPUTES[_n] = (lambda f: lambda attrs, inputs, out_type: [
        f(inputs[0], _axes(attrs, len(inputs[0].shape)), bool(attrs.keepdims))])(
        getattr(topi, _n))


@_reg("variance")
def _variance(attrs: Any, inputs: list, out_type: Any) -> list:
    """``sum((x - mean)^2) / (N or N-1)`` over the axes (``mean`` broadcast with keepdims)."""
    data, mean = inputs
    nd = len(data.shape)
    axes = _axes(attrs, nd)
    axes = list(range(nd)) if axes is None else axes
    count = 1
    for a in axes:
        count = count * data.shape[a]
    sq = te.compute(data.shape, lambda *i: _sq_dev(data, mean, i), name="T_sqdev",
                    tag="broadcast")
    total = topi.sum(sq, axes, bool(attrs.keepdims))
    div = count - 1 if attrs.unbiased else count
    return [te.compute(total.shape, lambda *i: total[i] / cast(div, data.dtype),
                       name="T_variance", tag="elemwise")]


def _sq_dev(data: Any, mean: Any, i: tuple) -> Any:
    # mean has data's rank (keepdims) or fewer leading axes; index it with broadcasting
    off = len(data.shape) - len(mean.shape)
    idx = tuple(0 if int(getattr(mean.shape[k], "value", mean.shape[k])) == 1 else i[k + off]
                for k in range(len(mean.shape)))
    d = data[i] - mean[idx]
    return d * d


@_reg("cumsum")
def _cumsum(attrs: Any, inputs: list, out_type: Any) -> list:
    """Inclusive / exclusive prefix sum (a masked reduction: quadratic, kept for correctness)."""
    data = inputs[0]
    if attrs.axis is None:
        data = topi.reshape(data, (int(_numel(data)),), allowzero=True)
    ax = 0 if attrs.axis is None else attrs.axis % len(data.shape)
    dtype = out_type.dtype
    r = te.reduce_axis((0, data.shape[ax]), name="rk")
    zero = const(0, dtype)

    def f(*i: Any) -> Any:
        src = data[(*i[:ax], r, *i[ax + 1:])].astype(dtype)
        keep = r < i[ax] if attrs.exclusive else r <= i[ax]
        return te.sum(tir_op.if_then_else(keep, src, zero), axis=r)

    return [te.compute(data.shape, f, name="T_cumsum", tag="cumsum")]


def _numel(t: Any) -> int:
    n = 1
    for d in t.shape:
        n *= int(getattr(d, "value", d))
    return n


@_reg("one_hot")
def _one_hot(attrs: Any, inputs: list, out_type: Any) -> list:
    idx, on, off = inputs
    nd = len(idx.shape)
    ax = attrs.axis % (nd + 1)
    dtype = out_type.dtype
    depth = attrs.depth

    def f(*i: Any) -> Any:
        k = i[ax]
        j = idx[(*i[:ax], *i[ax + 1:])].astype("int64")
        j = tir_op.if_then_else(j < 0, j + depth, j)  # negative indices wrap, as topi.one_hot
        return tir_op.if_then_else(j == k.astype("int64"), on[()].astype(dtype),
                                   off[()].astype(dtype))

    return [te.compute(_out_shape(out_type), f, name="T_one_hot", tag="injective")]


@_reg("nn.stride_interleave")
def _stride_interleave(attrs: Any, inputs: list, out_type: Any) -> list:
    return [topi.nn.stride_interleave(inputs, attrs.strides, attrs.out_size)]


@_reg("nn.depth_to_space")
def _depth_to_space(attrs: Any, inputs: list, out_type: Any) -> list:
    x = inputs[0]
    b = attrs.block_size
    cout = out_type.shape[1]

    def f(n: Any, c: Any, y: Any, w: Any) -> Any:
        bi, bj = y % b, w % b
        ch = (bi * b + bj) * cout + c if attrs.mode == "DCR" else c * b * b + bi * b + bj
        return x[n, ch, y // b, w // b]

    return [te.compute(_out_shape(out_type), f, name="T_depth_to_space", tag="injective")]


@_reg("nn.space_to_depth")
def _space_to_depth(attrs: Any, inputs: list, out_type: Any) -> list:
    x = inputs[0]
    b = attrs.block_size
    cin = x.shape[1]

    def f(n: Any, c: Any, y: Any, w: Any) -> Any:
        ci, ij = c % cin, c // cin
        return x[n, ci, y * b + ij // b, w * b + ij % b]

    return [te.compute(_out_shape(out_type), f, name="T_space_to_depth", tag="injective")]


# the inverse hyperbolic functions in forms without cancellation: log(x + sqrt(x^2 + 1)) loses
# every digit for large negative x (fuzzer seed 300314: asinh(-739) off by 0.3%) and the
# relative precision of small |x|; log1p keeps both. Odd functions work on |x| and take the
# sign with a Select (if_then_else is lazy: its sides' loads masked, the math computed twice);
# beyond 2**60 the squares would overflow float32 (asinh(1e20) was nan, acosh(1e20) inf), and
# there asinh(a) = acosh(a) = log(2a) = log1p(a) + log(2) to float precision.
_BIG = 2.0 ** 60


def _log2_if_big(big: Any, dtype: str) -> Any:
    return Select(big, const(math.log(2.0), dtype), const(0.0, dtype))


def _asinh(x: Any) -> Any:
    a = tir_op.abs(x)
    # a + a^2 / (sqrt(a^2 + 1) + 1), divided through by a (no overflow of a^2; 1 / a = inf
    # for tiny a gives a + 0)
    inv = 1 / a
    big = a > _BIG
    r = tir_op.log1p(Select(big, a, a + a / (tir_op.sqrt(1 + inv * inv) + inv)))
    r = r + _log2_if_big(big, x.dtype)
    return Select(x < 0, -r, r)


def _acosh(x: Any) -> Any:
    t = x - 1
    big = x > _BIG
    return tir_op.log1p(Select(big, x, t + tir_op.sqrt(t * (x + 1)))) + _log2_if_big(big, x.dtype)


def _atanh(x: Any) -> Any:
    # on |x|: log1p(2x / (1 - x)) of a negative x near -1 is log1p near -1, 200x ill-conditioned
    a = tir_op.abs(x)
    r = tir_op.log1p(2 * a / (1 - a)) * 0.5
    return Select(x < 0, -r, r)


for _n, _f in (("asinh", _asinh), ("acosh", _acosh), ("atanh", _atanh)):
    COMPUTES[_n] = (lambda f, n: lambda attrs, inputs, out_type: [
        topi.elemwise.elemwise(inputs[0], f, n)])(_f, _n)


# ---- transforms ---------------------------------------------------------------------------
@_reg("reshape")
def _reshape(attrs: Any, inputs: list, out_type: Any) -> list:
    # the inferred type's shape is literal: a 0 there is an empty axis, not "copy"
    return [topi.reshape(inputs[0], _out_shape(out_type), allowzero=True)]


COMPUTES["reshape_like"] = _reshape
COMPUTES["nn.batch_flatten"] = _one(topi.flatten)


@_reg("transpose")
def _transpose(attrs: Any, inputs: list, out_type: Any) -> list:
    return [topi.transpose(inputs[0], attrs.axes)]


@_reg("concatenate")
def _concatenate(attrs: Any, inputs: list, out_type: Any) -> list:
    return [topi.concatenate(inputs, attrs.axis)]


@_reg("stack")
def _stack(attrs: Any, inputs: list, out_type: Any) -> list:
    return [topi.stack(inputs, attrs.axis)]


@_reg("split")
def _split(attrs: Any, inputs: list, out_type: Any) -> list:
    return list(topi.split(inputs[0], attrs.indices_or_sections, attrs.axis))


@_reg("squeeze")
def _squeeze(attrs: Any, inputs: list, out_type: Any) -> list:
    return [topi.squeeze(inputs[0], attrs.axis)]


@_reg("expand_dims")
def _expand_dims(attrs: Any, inputs: list, out_type: Any) -> list:
    return [topi.expand_dims(inputs[0], attrs.axis, attrs.num_newaxis)]


@_reg("broadcast_to")
def _broadcast_to(attrs: Any, inputs: list, out_type: Any) -> list:
    return [topi.broadcast_to(inputs[0], _out_shape(out_type))]


@_reg("strided_slice")
def _strided_slice(attrs: Any, inputs: list, out_type: Any) -> list:
    return [topi.strided_slice(inputs[0], attrs.begin, attrs.end, attrs.strides, attrs.axes)]


@_reg("take")
def _take(attrs: Any, inputs: list, out_type: Any) -> list:
    return [topi.take(inputs[0], inputs[1], attrs.axis, attrs.mode)]


@_reg("gather")
def _gather(attrs: Any, inputs: list, out_type: Any) -> list:
    return [topi.gather(inputs[0], attrs.axis, inputs[1])]


@_reg("gather_nd")
def _gather_nd(attrs: Any, inputs: list, out_type: Any) -> list:
    return [topi.gather_nd(inputs[0], inputs[1], attrs.batch_dims)]


@_reg("tile")
def _tile(attrs: Any, inputs: list, out_type: Any) -> list:
    return [topi.tile(inputs[0], attrs.reps)]


@_reg("repeat")
def _repeat(attrs: Any, inputs: list, out_type: Any) -> list:
    return [topi.repeat(inputs[0], attrs.repeats, attrs.axis)]


@_reg("reverse")
def _reverse(attrs: Any, inputs: list, out_type: Any) -> list:
    return [topi.flip(inputs[0], attrs.axis)]


@_reg("nn.pad")
def _pad(attrs: Any, inputs: list, out_type: Any) -> list:
    before = [int(p[0]) for p in attrs.pad_width]
    after = [int(p[1]) for p in attrs.pad_width]
    return [topi.nn.pad(inputs[0], before, after, attrs.pad_value, pad_mode=attrs.pad_mode)]


@_reg("layout_transform")
def _layout_transform(attrs: Any, inputs: list, out_type: Any) -> list:
    return [topi.layout_transform(inputs[0], attrs.src_layout, attrs.dst_layout)]


@_reg("image.resize2d")
def _resize2d(attrs: Any, inputs: list, out_type: Any) -> list:
    # rounding_method "" is TVM's default, resolved by topi (the interpreter agrees)
    return [topi.image.resize2d(inputs[0], None, attrs.size, attrs.layout, attrs.method,
                                attrs.coordinate_transformation_mode, attrs.rounding_method,
                                attrs.out_dtype or None)]


# ---- neural-network ops (out-elementwise-fusable / opaque) ---------------------------------
def out_dtype_of(attrs: Any, out_type: Any) -> str:
    """The call's ``out_dtype`` attribute, or (unset) its inferred output dtype."""
    return attrs.out_dtype or out_type.dtype


def conv2d_kind(attrs: Any, inputs: list) -> str:
    """"conv2d_nchw" (groups 1), "depthwise_conv2d_nchw" (one filter per channel) or
    "group_conv2d_nchw": which compute (and schedule) an NCHW/OIHW ``nn.conv2d`` takes
    (other layouts: NotImplementedError)."""
    _check_layout("nn.conv2d", attrs, "NCHW", "OIHW")
    data, kernel = inputs
    c, oc = int(data.shape[1]), int(kernel.shape[0])
    if attrs.groups == 1:
        return "conv2d_nchw"
    if attrs.groups == c and oc == c and int(kernel.shape[1]) == 1:
        return "depthwise_conv2d_nchw"
    return "group_conv2d_nchw"


def _check_layout(op: str, attrs: Any, data: str, kernel: str) -> None:
    if attrs.data_layout != data or attrs.kernel_layout != kernel:
        raise NotImplementedError(f"{op}: layout {attrs.data_layout}/{attrs.kernel_layout} has no "
                                  f"compute (expected {data}/{kernel})")


def _conv2d_nchw(attrs: Any, inputs: list, out_type: Any) -> list:
    return [topi.nn.conv2d_nchw(inputs[0], inputs[1], attrs.strides, attrs.padding,
                                attrs.dilation, out_dtype_of(attrs, out_type))]


def _depthwise_conv2d_nchw(attrs: Any, inputs: list, out_type: Any) -> list:
    return [topi.nn.depthwise_conv2d_nchw(inputs[0], inputs[1], attrs.strides, attrs.padding,
                                          attrs.dilation, out_dtype_of(attrs, out_type))]


def _group_conv2d_nchw(attrs: Any, inputs: list, out_type: Any) -> list:
    return [topi.nn.group_conv2d_nchw(inputs[0], inputs[1], attrs.strides, attrs.padding,
                                      attrs.dilation, attrs.groups, out_dtype_of(attrs, out_type))]


#: the computes of ``nn.conv2d`` (NCHW/OIHW) by kind (:func:`conv2d_kind`)
CONV2D_COMPUTES: dict[str, Compute] = {
    "conv2d_nchw": _conv2d_nchw,
    "depthwise_conv2d_nchw": _depthwise_conv2d_nchw,
    "group_conv2d_nchw": _group_conv2d_nchw,
}


@_reg("nn.conv2d")
def conv2d_compute(attrs: Any, inputs: list, out_type: Any) -> list:
    """``nn.conv2d`` (NCHW/OIHW): the compute of its kind."""
    return CONV2D_COMPUTES[conv2d_kind(attrs, inputs)](attrs, inputs, out_type)


@_reg("nn.conv2d_transpose")
def _conv2d_transpose(attrs: Any, inputs: list, out_type: Any) -> list:
    _check_layout("nn.conv2d_transpose", attrs, "NCHW", "IOHW")
    od = out_dtype_of(attrs, out_type)
    if attrs.groups == 1 and tuple(attrs.dilation) == (1, 1):
        return [topi.nn.conv2d_transpose_nchw(inputs[0], inputs[1], attrs.strides, attrs.padding,
                                              od, attrs.output_padding)]
    return [topi.nn.group_conv2d_transpose_nchw(inputs[0], inputs[1], attrs.strides,
                                                attrs.padding, od, attrs.output_padding,
                                                attrs.groups, attrs.dilation)]


@_reg("nn.conv1d")
def _conv1d(attrs: Any, inputs: list, out_type: Any) -> list:
    _check_layout("nn.conv1d", attrs, "NCW", "OIW")
    return [topi.nn.conv_nd(inputs[0], inputs[1], attrs.strides, attrs.padding, attrs.dilation,
                            attrs.groups, out_dtype_of(attrs, out_type), op="conv1d_ncw")]


@_reg("nn.conv3d")
def _conv3d(attrs: Any, inputs: list, out_type: Any) -> list:
    _check_layout("nn.conv3d", attrs, "NCDHW", "OIDHW")
    return [topi.nn.conv_nd(inputs[0], inputs[1], attrs.strides, attrs.padding, attrs.dilation,
                            attrs.groups, out_dtype_of(attrs, out_type), op="conv3d_ncdhw")]


@_reg("nn.contrib_conv2d_NCHWc")
def _conv2d_nchwc(attrs: Any, inputs: list, out_type: Any) -> list:
    data, kernel = inputs
    oc_bn = int(kernel.shape[5])
    plain = len(data.shape) == 4  # data_layout NCHW: plain data read in place
    channels = int(data.shape[1]) * (1 if plain else int(data.shape[4]))
    if attrs.groups == 1:
        out = topi.nn.conv2d_NCHWc(data, kernel, attrs.strides, attrs.padding, attrs.dilation,
                                   attrs.data_layout, f"NCHW{oc_bn}c", out_dtype_of(attrs, out_type))
    elif (not plain and attrs.groups == channels
          and int(kernel.shape[1]) == int(kernel.shape[4]) == 1
          and int(kernel.shape[0]) * oc_bn == channels and int(data.shape[4]) == oc_bn):
        # depthwise (multiplier 1): kernel OIHW1i{c}o, data and output NCHW{c}c
        out = topi.nn.depthwise_conv2d_NCHWc(data, kernel, attrs.strides, attrs.padding,
                                             attrs.dilation, attrs.data_layout,
                                             f"NCHW{oc_bn}c", out_dtype_of(attrs, out_type))
    elif (int(kernel.shape[1]) * int(kernel.shape[4]) * attrs.groups == channels
          and int(kernel.shape[0]) % attrs.groups == 0):
        # grouped, every block within one group (kernel OIHW{i}i{o}o of C/groups inputs)
        out = topi.nn.conv2d_NCHWc(data, kernel, attrs.strides, attrs.padding, attrs.dilation,
                                   attrs.data_layout, f"NCHW{oc_bn}c", out_dtype_of(attrs, out_type),
                                   groups=attrs.groups)
    else:
        raise NotImplementedError(f"nn.contrib_conv2d_NCHWc: groups={attrs.groups} has no "
                                  "compute (1, depthwise with equal in/out blocks, or blocks "
                                  "within groups)")
    want = attrs.out_layout or attrs.data_layout
    if want != f"NCHW{oc_bn}c":
        out = topi.layout_transform(out, f"NCHW{oc_bn}c", want)
    return [out]


@_reg("nn.contrib_conv2d_winograd_nchwc")
def _conv2d_winograd_nchwc(attrs: Any, inputs: list, out_type: Any) -> list:
    return [topi.nn.conv2d_winograd_nchwc(inputs[0], inputs[1], attrs.padding, attrs.tile_size,
                                          out_dtype_of(attrs, out_type))]


@_reg("nn.contrib_conv2d_winograd_without_weight_transform")
def conv2d_winograd_without_weight_transform_compute(attrs: Any, inputs: list,
                                                     out_type: Any) -> list:
    """The GPU Winograd of a weight transformed at build time (``[alpha, alpha, CI, CO]``,
    made by the GPU AlterOpLayout; ``topi.cuda.conv2d_nchw_winograd_without_weight_transform``:
    plain te, so any target computes it)."""
    from ....topi import cuda as topi_cuda

    return [topi_cuda.conv2d_nchw_winograd_without_weight_transform(
        inputs[0], inputs[1], tuple(attrs.strides), tuple(attrs.padding), tuple(attrs.dilation),
        out_dtype_of(attrs, out_type), attrs.tile_size)]


@_reg("nn.contrib_conv2d_winograd_weight_transform")
def _conv2d_winograd_weight_transform(attrs: Any, inputs: list, out_type: Any) -> list:
    return [topi.nn.conv2d_winograd_weight_transform(inputs[0], attrs.tile_size, attrs.oc_bn)]


@_reg("nn.dense")
def dense_compute(attrs: Any, inputs: list, out_type: Any) -> list:
    data, weight = inputs
    if len(data.shape) > 2:  # relay's dense takes [..., K]: a 2-D dense between reshapes
        flat = topi.reshape(data, (topi.utils.prod(data.shape[:-1]), data.shape[-1]),
                            allowzero=True)  # (sizes may be 0: empty, not "copy")
        out = topi.nn.dense(flat, weight, None, out_dtype_of(attrs, out_type))
        return [topi.reshape(out, _out_shape(out_type), allowzero=True)]
    return [topi.nn.dense(data, weight, None, out_dtype_of(attrs, out_type))]


@_reg("nn.contrib_dense_pack")
def dense_prepacked_compute(attrs: Any, inputs: list, out_type: Any) -> list:
    """``nn.contrib_dense_pack`` (made by x86's AlterOpLayout): the dense of the weight
    packed ``[N/nr, K, nr]`` at compile time (``topi.x86.dense_prepacked``)."""
    units = getattr(attrs.units, "value", attrs.units)
    return [topi_x86.dense_prepacked(inputs[0], inputs[1], attrs.out_dtype or out_type.dtype,
                                     None if units is None else int(units))]


@_reg("nn.matmul")
def _matmul(attrs: Any, inputs: list, out_type: Any) -> list:
    return [topi.nn.matmul(inputs[0], inputs[1], None, out_dtype_of(attrs, out_type),
                           attrs.transpose_a, attrs.transpose_b)]


@_reg("nn.batch_matmul")
def _batch_matmul(attrs: Any, inputs: list, out_type: Any) -> list:
    return [topi.nn.batch_matmul(inputs[0], inputs[1], None, out_dtype_of(attrs, out_type),
                                 attrs.transpose_a, attrs.transpose_b)]


def _pool(kind: str, nd: int) -> Compute:
    fn = {1: topi.nn.pool1d, 2: topi.nn.pool2d, 3: topi.nn.pool3d}[nd]

    def f(attrs: Any, inputs: list, out_type: Any) -> list:
        cip = bool(getattr(attrs, "count_include_pad", False)) if kind == "avg" else False
        return [fn(inputs[0], attrs.pool_size, attrs.strides, attrs.dilation, attrs.padding, kind,
                   attrs.ceil_mode, attrs.layout, cip)]

    return f


for _k in ("max", "avg"):
    for _d in (1, 2, 3):
        COMPUTES[f"nn.{_k}_pool{_d}d"] = _pool(_k, _d)
    COMPUTES[f"nn.global_{_k}_pool2d"] = (lambda k: lambda attrs, inputs, out_type: [
        topi.nn.global_pool(inputs[0], k, attrs.layout)])(_k)


@_reg("nn.adaptive_avg_pool2d")
def _adaptive_avg(attrs: Any, inputs: list, out_type: Any) -> list:
    return [topi.nn.adaptive_pool(inputs[0], attrs.output_size, "avg", attrs.layout)]


@_reg("nn.softmax")
def _softmax(attrs: Any, inputs: list, out_type: Any) -> list:
    return [topi.nn.softmax(inputs[0], attrs.axis)]


@_reg("nn.log_softmax")
def _log_softmax(attrs: Any, inputs: list, out_type: Any) -> list:
    return [topi.nn.log_softmax(inputs[0], attrs.axis)]


def norm_gamma_beta(attrs: Any, inputs: list) -> tuple:
    """``(gamma, beta)`` of a normalization: ones for an unused scale, None for no center."""
    gamma = inputs[1] if attrs.scale else None
    beta = inputs[2] if attrs.center else None
    if gamma is None:
        gamma = topi.full_like(inputs[1], 1)
    return gamma, beta


@_reg("nn.layer_norm")
def _layer_norm(attrs: Any, inputs: list, out_type: Any) -> list:
    gamma, beta = norm_gamma_beta(attrs, inputs)
    return [topi.nn.layer_norm(inputs[0], gamma, beta, attrs.axis, attrs.epsilon)]


@_reg("nn.instance_norm")
def _instance_norm(attrs: Any, inputs: list, out_type: Any) -> list:
    gamma, beta = norm_gamma_beta(attrs, inputs)
    return [topi.nn.instance_norm(inputs[0], gamma, beta, attrs.axis, None, attrs.epsilon)]


@_reg("nn.group_norm")
def _group_norm(attrs: Any, inputs: list, out_type: Any) -> list:
    gamma, beta = norm_gamma_beta(attrs, inputs)
    return [topi.nn.group_norm(inputs[0], gamma, beta, attrs.num_groups, attrs.axis, None,
                               attrs.epsilon)]


@_reg("nn.batch_norm")
def _batch_norm(attrs: Any, inputs: list, out_type: Any) -> list:
    out, mean, var = topi.nn.batch_norm(*inputs, attrs.axis, attrs.epsilon, attrs.center,
                                        attrs.scale)
    # the statistics pass through: copies, so that every output is a computed tensor
    return [out, topi.identity(mean), topi.identity(var)]


# ---- schedules ----------------------------------------------------------------------------
def generic_schedule(attrs: Any, outs: list, target: Any) -> Any:
    """The default schedule with injective producers inlined (correct for every op)."""
    s = te.create_schedule([t.op for t in outs])
    topi.generic.inline_injective(s, outs)
    return s


@generic_func
def schedule_fallback(attrs: Any, outs: list, target: Any) -> Any:
    """The target's always-correct schedule, used when a group's chosen schedule fails
    (``generic_schedule`` on CPUs; GPUs register one that binds threads)."""
    return generic_schedule(attrs, outs, target)


def wrap_topi_schedule(fn: Callable[[Any], Any]) -> Callable[..., Any]:
    """``topi`` schedules take ``outs``; strategies call ``schedule(attrs, outs, target)``."""
    def schedule(attrs: Any, outs: Any, target: Any) -> Any:
        return fn(outs)

    return functools.update_wrapper(schedule, fn)  # errors name ``fn``, not the wrapper


@generic_func
def schedule_injective(attrs: Any, outs: list, target: Any) -> Any:
    """The target's schedule of injective outputs (TVM's ``strategy.schedule_injective``;
    dispatched on the target by :func:`pattern_schedule`): ``topi.generic``'s here, a target
    key registers its own (``x86.py``: "cpu")."""
    return topi.generic.schedule_injective(outs)


@generic_func
def schedule_reduce(attrs: Any, outs: list, target: Any) -> Any:
    """The target's schedule of a reduction (TVM's ``strategy.schedule_reduce``)."""
    return topi.generic.schedule_reduce(outs)


def pattern_schedule(pattern: int, target: Any) -> Callable[..., Any]:
    """The target's schedule ``(attrs, outs, target) -> te.Schedule`` for an op of fusion
    pattern ``pattern`` known only by its compute, or for a fused group of injective ops: its
    injective, reduce or (other patterns) always-correct schedule."""
    if pattern <= OpPattern.INJECTIVE:
        fn = schedule_injective
    elif pattern == OpPattern.COMM_REDUCE:
        fn = schedule_reduce
    else:
        fn = schedule_fallback
    return fn.dispatch(as_target(target, default="llvm"))


def register_default_strategy(name: str) -> None:
    """The "generic" strategy of an op whose implementation no attribute or shape chooses
    (TVM's ``register_injective_schedule`` / ``register_reduce_schedule``): its compute with
    the target's schedule for its fusion pattern (:func:`pattern_schedule`), so a target
    overrides the pattern schedules, not the op. Name ``<op>.generic``, plevel 10."""
    compute = COMPUTES[name]

    def default_strategy(attrs: Any, inputs: Any, out_type: Any, target: Any) -> OpStrategy:
        s = OpStrategy()
        s.add_implementation(compute, pattern_schedule(get(name).pattern, target),
                             f"{name}.generic", 10)
        return s

    register_strategy_func(name, "generic", default_strategy)


@register_strategy_func("nn.conv2d", "generic")
def conv2d_strategy(attrs: Any, inputs: list, out_type: Any, target: Any) -> OpStrategy:
    """``nn.conv2d``: the compute of its kind (plain, depthwise or grouped) with the default
    schedule."""
    s = OpStrategy()
    s.add_implementation(CONV2D_COMPUTES[conv2d_kind(attrs, inputs)],
                         pattern_schedule(OpPattern.OUT_ELEMWISE_FUSABLE, target),
                         "nn.conv2d.generic", 10)
    return s


COMPUTES.update(BITSERIAL_COMPUTES)
for _name, _compute in COMPUTES.items():
    if get(_name).pattern <= OpPattern.COMM_REDUCE:
        register_compute(_name, _compute)  # (TVM's FTVMCompute: lowering's fallback reads it)
    if get(_name).get_attr("FTVMStrategy") is None:  # (no explicit one above)
        register_default_strategy(_name)

del _name, _compute, _n, _k, _d


def in_target(fn: Any, target: Any) -> Any:
    """``fn`` run with ``target`` as the current target: the kernels pick their instruction set
    (and tile defaults) from it, and lowering calls computes and schedules outside any."""
    import functools

    from ....target import Target, as_target

    target = None if target is None else as_target(target)

    @functools.wraps(fn)
    def run(*args: Any) -> Any:
        if target is None or Target.current() == target:
            return fn(*args)
        with target:
            return fn(*args)

    return run
