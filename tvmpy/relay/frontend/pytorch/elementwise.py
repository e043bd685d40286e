"""PyTorch frontend converters: elementwise ATen ops (activations, arithmetic with torch's type
promotion, comparisons, where/masked_fill, dtype conversions, tensors shaped like an input)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ...expr import RelayExpr, const
from ...op import nn, tensor
from ..common import softplus
from .common import (
    Args,
    ConvertContext,
    Converter,
    Output,
    cast_to,
    converter,
    fail,
    in_dtype,
    in_meta,
    np_dtype,
    out_dtype,
    out_shape,
    register,
    scalar,
)

if TYPE_CHECKING:
    from torch.fx import Node


# ------------------------------------------------------------------------------------------------
# elementwise
def _unary(names: tuple[str, ...], fn: Callable[[RelayExpr], RelayExpr]) -> None:
    def convert(ctx: ConvertContext, node: Node, args: Args) -> Output:
        return fn(args["self"])
    for name in names:
        register(name, convert)


for _names, _fn in [
        (("aten.relu.default",), nn.relu), (("aten.sigmoid.default",), tensor.sigmoid),
        (("aten.tanh.default",), tensor.tanh), (("aten.exp.default",), tensor.exp),
        (("aten.log.default",), tensor.log), (("aten.sqrt.default",), tensor.sqrt),
        (("aten.rsqrt.default",), tensor.rsqrt), (("aten.abs.default",), tensor.abs),
        (("aten.neg.default",), tensor.negative), (("aten.erf.default",), tensor.erf),
        (("aten.floor.default",), tensor.floor), (("aten.ceil.default",), tensor.ceil),
        (("aten.sin.default",), tensor.sin), (("aten.cos.default",), tensor.cos),
        (("aten.sign.default",), tensor.sign), (("aten.trunc.default",), tensor.trunc),
        (("aten.logical_not.default",), tensor.logical_not),
        (("aten.log2.default",), tensor.log2)]:
    _unary(_names, _fn)


def _float_in(ctx: ConvertContext, node: Node, args: Args, name="self") -> tuple[RelayExpr, str]:
    """The input cast to the node's (floating) output dtype, as torch's int -> float ops do."""
    dt = out_dtype(node)
    return cast_to(args[name], in_dtype(node, name), dt), dt


@converter("aten.reciprocal.default")
def _recip(ctx: ConvertContext, node: Node, args: Args) -> Output:
    x, dt = _float_in(ctx, node, args)
    return tensor.divide(scalar(1, dt), x)


@converter("aten.exp2.default")
def _exp2(ctx: ConvertContext, node: Node, args: Args) -> Output:
    x, dt = _float_in(ctx, node, args)
    return tensor.power(scalar(2, dt), x)


def _round_half_even(x: RelayExpr, dt: str) -> RelayExpr:
    """torch.round: halves to even, as relay's ``round``."""
    return tensor.round(x)


@converter("aten.round.default", "aten.round.decimals")
def _round(ctx: ConvertContext, node: Node, args: Args) -> Output:
    dt = out_dtype(node)
    if not dt.startswith("float"):
        return args["self"]
    k = int(args.get("decimals", 0))
    if k == 0:
        return _round_half_even(args["self"], dt)
    s = scalar(10.0 ** k, dt)
    return tensor.divide(_round_half_even(tensor.multiply(args["self"], s), dt), s)


def _float_unary(fn: Callable[[RelayExpr], RelayExpr]) -> Callable:
    return lambda ctx, node, args: fn(_float_in(ctx, node, args)[0])


for _name, _fn in [("tan", tensor.tan), ("asin", tensor.asin), ("acos", tensor.acos),
                   ("atan", tensor.atan), ("sinh", tensor.sinh), ("cosh", tensor.cosh),
                   ("asinh", tensor.asinh), ("acosh", tensor.acosh), ("atanh", tensor.atanh)]:
    register(f"aten.{_name}.default", _float_unary(_fn))


@converter("aten.isnan.default", "aten.isinf.default")
def _isnan_isinf(ctx: ConvertContext, node: Node, args: Args) -> Output:
    x = args["self"]
    if not in_dtype(node).startswith("float"):
        return tensor.not_equal(x, x)  # integers are never NaN nor infinite
    return tensor.isnan(x) if "isnan" in str(node.target) else tensor.isinf(x)


@converter("aten.log1p.default")
def _log1p(ctx: ConvertContext, node: Node, args: Args) -> Output:
    x, dt = _float_in(ctx, node, args)
    return tensor.log(tensor.add(x, scalar(1, dt)))


@converter("aten.expm1.default")
def _expm1(ctx: ConvertContext, node: Node, args: Args) -> Output:
    x, dt = _float_in(ctx, node, args)
    return tensor.subtract(tensor.exp(x), scalar(1, dt))


@converter("aten.hardtanh.default", "aten.relu6.default")
def _hardtanh(ctx: ConvertContext, node: Node, args: Args) -> Output:
    return tensor.clip(
        args["self"], float(args.get("min_val", 0.0)), float(args.get("max_val", 6.0))
    )


@converter("aten.leaky_relu.default")
def _leaky(ctx: ConvertContext, node: Node, args: Args) -> Output:
    return nn.leaky_relu(args["self"], float(args["negative_slope"]))


@converter("aten.gelu.default")
def _gelu(ctx: ConvertContext, node: Node, args: Args) -> Output:
    if args["approximate"] not in ("none", "tanh"):
        raise fail(node, f"approximate={args['approximate']!r} is not supported (none, tanh)")
    return nn.gelu(args["self"], args["approximate"])


@converter("aten.silu.default")
def _silu(ctx: ConvertContext, node: Node, args: Args) -> Output:
    return tensor.multiply(args["self"], tensor.sigmoid(args["self"]))


def _hsig(x: RelayExpr, dt: str) -> RelayExpr:
    return tensor.clip(tensor.add(tensor.divide(x, scalar(6, dt)), scalar(0.5, dt)), 0.0, 1.0)


@converter("aten.hardsigmoid.default")
def _hardsigmoid(ctx: ConvertContext, node: Node, args: Args) -> Output:
    return _hsig(args["self"], out_dtype(node))


@converter("aten.hardswish.default")
def _hardswish(ctx: ConvertContext, node: Node, args: Args) -> Output:
    return tensor.multiply(args["self"], _hsig(args["self"], out_dtype(node)))


@converter("aten.elu.default")
def _elu(ctx: ConvertContext, node: Node, args: Args) -> Output:
    x, dt = args["self"], out_dtype(node)
    alpha, scale, iscale = (float(args[k]) for k in ("alpha", "scale", "input_scale"))
    em1 = tensor.subtract(tensor.exp(tensor.multiply(x, scalar(iscale, dt))), scalar(1, dt))
    neg = tensor.multiply(em1, scalar(alpha, dt))
    y = tensor.where(tensor.greater(x, scalar(0, dt)), x, neg)
    return y if scale == 1.0 else tensor.multiply(y, scalar(scale, dt))


def _softplus_expr(x: RelayExpr, dt: str, beta: float, threshold: float) -> RelayExpr:
    bx = x if beta == 1.0 else tensor.multiply(x, scalar(beta, dt))
    soft = softplus(bx, dt)  # stable: exp(bx) overflows float16 from bx = 11 on
    if beta != 1.0:
        soft = tensor.divide(soft, scalar(beta, dt))
    return tensor.where(tensor.greater(bx, scalar(threshold, dt)), x, soft)


@converter("aten.softplus.default")
def _softplus(ctx: ConvertContext, node: Node, args: Args) -> Output:
    return _softplus_expr(
        args["self"], out_dtype(node), float(args["beta"]), float(args["threshold"])
    )


@converter("aten.mish.default")
def _mish(ctx: ConvertContext, node: Node, args: Args) -> Output:
    x = args["self"]
    return tensor.multiply(x, tensor.tanh(_softplus_expr(x, out_dtype(node), 1.0, 20.0)))


@converter("aten.clamp.default", "aten.clamp_min.default", "aten.clamp_max.default",
           "aten.clamp.Tensor", "aten.clamp_min.Tensor", "aten.clamp_max.Tensor")
def _clamp(ctx: ConvertContext, node: Node, args: Args) -> Output:
    x, dt = args["self"], out_dtype(node)
    x = cast_to(x, in_dtype(node), dt)
    lo = args.get("min")
    hi = args.get("max")
    if not isinstance(lo, RelayExpr) and not isinstance(hi, RelayExpr) and dt.startswith("float"):
        return tensor.clip(x, -math.inf if lo is None else float(lo),
                           math.inf if hi is None else float(hi))
    for v, fn in ((lo, tensor.maximum), (hi, tensor.minimum)):
        if v is not None:
            x = fn(x, v if isinstance(v, RelayExpr) else scalar(v, dt))
    return x


# ------------------------------------------------------------------------------------------------
# binary arithmetic and comparisons
def _common_dtype(node: Any, names: tuple[str, ...]) -> str:
    """torch's result type of the named operands (tensor metas or Python scalars)."""
    import torch

    vals = []
    for nm in names:
        v = in_meta(node, nm)
        if isinstance(v, torch.Tensor):
            vals.append(torch.empty((1,) * min(v.dim(), 1), dtype=v.dtype))
        else:
            vals.append(v)
    dt = vals[0] if len(vals) == 1 else torch.result_type(*vals)
    return np_dtype(dt.dtype if isinstance(dt, torch.Tensor) else dt)


def _operand(node: Node, args: Args, name: str, dt: str) -> RelayExpr:
    v = args[name]
    if isinstance(v, RelayExpr):
        return cast_to(v, in_dtype(node, name), dt)
    return scalar(v, dt)


def _binary(fn: Callable, compare: bool = False, lhs: str = "self", rhs: str = "other"):
    def f(ctx: ConvertContext, node: Node, args: Args) -> Output:
        dt = _common_dtype(node, (lhs, rhs)) if compare else out_dtype(node)
        return fn(_operand(node, args, lhs, dt), _operand(node, args, rhs, dt))
    return f


for _op, _fn in [("mul", tensor.multiply), ("remainder", tensor.floor_mod),
                 ("fmod", tensor.mod), ("floor_divide", tensor.floor_divide)]:
    register(f"aten.{_op}.Tensor", _binary(_fn))
    register(f"aten.{_op}.Scalar", _binary(_fn))
register("aten.floor_divide.default", _binary(tensor.floor_divide))
register("aten.maximum.default", _binary(tensor.maximum))
register("aten.minimum.default", _binary(tensor.minimum))
register("aten.pow.Tensor_Tensor", _binary(tensor.power, lhs="self", rhs="exponent"))
register("aten.pow.Scalar", _binary(tensor.power, lhs="self", rhs="exponent"))
for _op, _fn in [("eq", tensor.equal), ("ne", tensor.not_equal), ("lt", tensor.less),
                 ("le", tensor.less_equal), ("gt", tensor.greater), ("ge", tensor.greater_equal)]:
    register(f"aten.{_op}.Tensor", _binary(_fn, compare=True))
    register(f"aten.{_op}.Scalar", _binary(_fn, compare=True))
def _logical(fn: Callable[[RelayExpr, RelayExpr], RelayExpr]) -> Converter:
    def convert(ctx: ConvertContext, node: Node, args: Args) -> Output:
        return fn(cast_to(args["self"], in_dtype(node), "bool"),
                  cast_to(args["other"], in_dtype(node, "other"), "bool"))
    return convert


for _op, _fn in [("logical_and", tensor.logical_and), ("logical_or", tensor.logical_or),
                 ("logical_xor", tensor.logical_xor)]:
    register(f"aten.{_op}.default", _logical(_fn))
for _op, _fn in [("bitwise_and", tensor.bitwise_and), ("bitwise_or", tensor.bitwise_or),
                 ("bitwise_xor", tensor.bitwise_xor)]:
    register(f"aten.{_op}.Tensor", _binary(_fn))
    register(f"aten.{_op}.Scalar", _binary(_fn))


@converter("aten.bitwise_not.default")
def _bitwise_not(ctx: ConvertContext, node: Node, args: Args) -> Output:
    if out_dtype(node) == "bool":
        return tensor.logical_not(args["self"])
    return tensor.bitwise_not(args["self"])


def _alpha_scaled(node: Node, args: Args, dt) -> RelayExpr:
    y = _operand(node, args, "other", dt)
    alpha = args.get("alpha", 1)
    return y if alpha == 1 else tensor.multiply(y, scalar(alpha, dt))


@converter("aten.add.Tensor", "aten.add.Scalar")
def _add(ctx: ConvertContext, node: Node, args: Args) -> Output:
    dt = out_dtype(node)
    return tensor.add(_operand(node, args, "self", dt), _alpha_scaled(node, args, dt))


@converter("aten.sub.Tensor", "aten.sub.Scalar")
def _sub(ctx: ConvertContext, node: Node, args: Args) -> Output:
    dt = out_dtype(node)
    return tensor.subtract(_operand(node, args, "self", dt), _alpha_scaled(node, args, dt))


@converter("aten.rsub.Tensor", "aten.rsub.Scalar")
def _rsub(ctx: ConvertContext, node: Node, args: Args) -> Output:
    dt = out_dtype(node)
    return tensor.subtract(_alpha_scaled(node, args, dt), _operand(node, args, "self", dt))


@converter("aten.div.Tensor", "aten.div.Scalar", "aten.div.Tensor_mode", "aten.div.Scalar_mode")
def _div(ctx: ConvertContext, node: Node, args: Args) -> Output:
    dt = out_dtype(node)
    mode = args.get("rounding_mode")
    if mode == "floor" and not dt.startswith("float"):
        return tensor.floor_divide(
            _operand(node, args, "self", dt), _operand(node, args, "other", dt)
        )
    if mode == "trunc" and not dt.startswith("float"):
        return tensor.divide(_operand(node, args, "self", dt), _operand(node, args, "other", dt))
    q = tensor.divide(_operand(node, args, "self", dt), _operand(node, args, "other", dt))
    return {None: q, "floor": tensor.floor, "trunc": tensor.trunc}[mode](q) if mode else q


@converter("aten.pow.Tensor_Scalar")
def _pow_scalar(ctx: ConvertContext, node: Node, args: Args) -> Output:
    dt = out_dtype(node)
    x = _operand(node, args, "self", dt)
    e = args["exponent"]
    if e == 1:
        return x
    if e == 2:
        return tensor.multiply(x, x)
    if e == 0.5 and dt.startswith("float"):
        return tensor.sqrt(x)
    return tensor.power(x, scalar(e, dt))


@converter("aten.where.self", "aten.where.ScalarOther", "aten.where.ScalarSelf",
           "aten.where.Scalar")
def _where(ctx: ConvertContext, node: Node, args: Args) -> Output:
    dt = out_dtype(node)
    cond = cast_to(args["condition"], in_dtype(node, "condition"), "bool")
    return tensor.where(cond, _operand(node, args, "self", dt), _operand(node, args, "other", dt))


@converter("aten.masked_fill.Scalar", "aten.masked_fill.Tensor")
def _masked_fill(ctx: ConvertContext, node: Node, args: Args) -> Output:
    dt = out_dtype(node)
    mask = cast_to(args["mask"], in_dtype(node, "mask"), "bool")
    return tensor.where(mask, _operand(node, args, "value", dt), _operand(node, args, "self", dt))


# ------------------------------------------------------------------------------------------------
# dtype conversions and constants shaped like a tensor
@converter("aten._to_copy.default", "aten.to.dtype", "aten.to.dtype_layout", "aten.to.device",
           "aten.to.other", "aten.type_as.default", "aten._assert_tensor_metadata.default")
def _to(ctx: ConvertContext, node: Node, args: Args) -> Output:
    if str(node.target) == "aten._assert_tensor_metadata.default":
        return None
    return cast_to(args["self"], in_dtype(node), out_dtype(node))


@converter("aten.zeros_like.default", "aten.ones_like.default", "aten.full_like.default",
           "aten.empty_like.default",
           # a size argument not known at import (a symbolic batch or sequence: nn.LSTM's
           # zero initial states); with static sizes these are folded to constants
           "aten.full.default", "aten.zeros.default", "aten.ones.default")
def _full_like(ctx: ConvertContext, node: Node, args: Args) -> Output:
    fill = {"aten.zeros_like.default": 0, "aten.ones_like.default": 1,
            "aten.empty_like.default": 0, "aten.zeros.default": 0,
            "aten.ones.default": 1}.get(str(node.target), args.get("fill_value"))
    shape, dt = out_shape(node), out_dtype(node)
    if not all(isinstance(d, int) for d in shape):  # symbolic dims: filled at run time
        return tensor.full(scalar(fill, dt), shape, dt)
    return const(np.full(shape, fill, dtype=dt))
