"""PyTorch frontend converters: elementwise ATen ops (activations, arithmetic with torch's type
promotion, comparisons, where/masked_fill, dtype conversions, tensors shaped like an input)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..expr import RelayExpr, const
from ..op import nn, tensor
from .common import softplus
from .pytorch_common import (
    CONVERTERS,
    cast_to,
    fail,
    in_dtype,
    in_meta,
    np_dtype,
    out_dtype,
    out_shape,
    reg,
    scalar,
)


# ------------------------------------------------------------------------------------------------
# elementwise
def _unary(names: tuple[str, ...], fn: Callable[[RelayExpr], RelayExpr]) -> None:
    CONVERTERS.update({n: (lambda c, node, a: fn(a["self"])) for n in names})


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


def _float_in(c, node, a, name="self") -> tuple[RelayExpr, str]:
    """The input cast to the node's (floating) output dtype, as torch's int -> float ops do."""
    dt = out_dtype(node)
    return cast_to(a[name], in_dtype(node, name), dt), dt


@reg("aten.reciprocal.default")
def _recip(c, node, a):
    x, dt = _float_in(c, node, a)
    return tensor.divide(scalar(1, dt), x)


@reg("aten.exp2.default")
def _exp2(c, node, a):
    x, dt = _float_in(c, node, a)
    return tensor.power(scalar(2, dt), x)


def _round_half_even(x: RelayExpr, dt: str) -> RelayExpr:
    """torch.round: halves to even (relay's round goes half away from zero)."""
    f = tensor.floor(x)
    d = tensor.subtract(x, f)
    half = tensor.add(f, tensor.floor_mod(f, scalar(2, dt)))
    up = tensor.add(f, scalar(1, dt))
    return tensor.where(tensor.greater(d, scalar(0.5, dt)), up,
                        tensor.where(tensor.less(d, scalar(0.5, dt)), f, half))


@reg("aten.round.default", "aten.round.decimals")
def _round(c, node, a):
    dt = out_dtype(node)
    if not dt.startswith("float"):
        return a["self"]
    k = int(a.get("decimals", 0))
    if k == 0:
        return _round_half_even(a["self"], dt)
    s = scalar(10.0 ** k, dt)
    return tensor.divide(_round_half_even(tensor.multiply(a["self"], s), dt), s)


def _float_unary(fn: Callable[[RelayExpr], RelayExpr]) -> Callable:
    return lambda c, node, a: fn(_float_in(c, node, a)[0])


for _name, _fn in [("tan", tensor.tan), ("asin", tensor.asin), ("acos", tensor.acos),
                   ("atan", tensor.atan), ("sinh", tensor.sinh), ("cosh", tensor.cosh),
                   ("asinh", tensor.asinh), ("acosh", tensor.acosh), ("atanh", tensor.atanh)]:
    CONVERTERS[f"aten.{_name}.default"] = _float_unary(_fn)


@reg("aten.isnan.default", "aten.isinf.default")
def _isnan_isinf(c, node, a):
    x = a["self"]
    if not in_dtype(node).startswith("float"):
        return tensor.not_equal(x, x)  # integers are never NaN nor infinite
    return tensor.isnan(x) if "isnan" in str(node.target) else tensor.isinf(x)


@reg("aten.log1p.default")
def _log1p(c, node, a):
    x, dt = _float_in(c, node, a)
    return tensor.log(tensor.add(x, scalar(1, dt)))


@reg("aten.expm1.default")
def _expm1(c, node, a):
    x, dt = _float_in(c, node, a)
    return tensor.subtract(tensor.exp(x), scalar(1, dt))


@reg("aten.hardtanh.default", "aten.relu6.default")
def _hardtanh(c, node, a):
    return tensor.clip(a["self"], float(a.get("min_val", 0.0)), float(a.get("max_val", 6.0)))


@reg("aten.leaky_relu.default")
def _leaky(c, node, a):
    return nn.leaky_relu(a["self"], float(a["negative_slope"]))


@reg("aten.gelu.default")
def _gelu(c, node, a):
    if a["approximate"] not in ("none", "tanh"):
        raise fail(node, f"approximate={a['approximate']!r} is not supported (none, tanh)")
    return nn.gelu(a["self"], a["approximate"])


@reg("aten.silu.default")
def _silu(c, node, a):
    return tensor.multiply(a["self"], tensor.sigmoid(a["self"]))


def _hsig(x: RelayExpr, dt: str) -> RelayExpr:
    return tensor.clip(tensor.add(tensor.divide(x, scalar(6, dt)), scalar(0.5, dt)), 0.0, 1.0)


@reg("aten.hardsigmoid.default")
def _hardsigmoid(c, node, a):
    return _hsig(a["self"], out_dtype(node))


@reg("aten.hardswish.default")
def _hardswish(c, node, a):
    return tensor.multiply(a["self"], _hsig(a["self"], out_dtype(node)))


@reg("aten.elu.default")
def _elu(c, node, a):
    x, dt = a["self"], out_dtype(node)
    alpha, scale, iscale = (float(a[k]) for k in ("alpha", "scale", "input_scale"))
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


@reg("aten.softplus.default")
def _softplus(c, node, a):
    return _softplus_expr(a["self"], out_dtype(node), float(a["beta"]), float(a["threshold"]))


@reg("aten.mish.default")
def _mish(c, node, a):
    x = a["self"]
    return tensor.multiply(x, tensor.tanh(_softplus_expr(x, out_dtype(node), 1.0, 20.0)))


@reg("aten.clamp.default", "aten.clamp_min.default", "aten.clamp_max.default",
     "aten.clamp.Tensor", "aten.clamp_min.Tensor", "aten.clamp_max.Tensor")
def _clamp(c, node, a):
    x, dt = a["self"], out_dtype(node)
    x = cast_to(x, in_dtype(node), dt)
    lo = a.get("min")
    hi = a.get("max")
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


def _operand(node: Any, a: dict, name: str, dt: str) -> RelayExpr:
    v = a[name]
    if isinstance(v, RelayExpr):
        return cast_to(v, in_dtype(node, name), dt)
    return scalar(v, dt)


def _binary(fn: Callable, compare: bool = False, lhs: str = "self", rhs: str = "other"):
    def f(c, node, a):
        dt = _common_dtype(node, (lhs, rhs)) if compare else out_dtype(node)
        return fn(_operand(node, a, lhs, dt), _operand(node, a, rhs, dt))
    return f


for _op, _fn in [("mul", tensor.multiply), ("remainder", tensor.floor_mod),
                 ("fmod", tensor.mod), ("floor_divide", tensor.floor_divide)]:
    CONVERTERS[f"aten.{_op}.Tensor"] = _binary(_fn)
    CONVERTERS[f"aten.{_op}.Scalar"] = _binary(_fn)
CONVERTERS["aten.floor_divide.default"] = _binary(tensor.floor_divide)
CONVERTERS["aten.maximum.default"] = _binary(tensor.maximum)
CONVERTERS["aten.minimum.default"] = _binary(tensor.minimum)
CONVERTERS["aten.pow.Tensor_Tensor"] = _binary(tensor.power, lhs="self", rhs="exponent")
CONVERTERS["aten.pow.Scalar"] = _binary(tensor.power, lhs="self", rhs="exponent")
for _op, _fn in [("eq", tensor.equal), ("ne", tensor.not_equal), ("lt", tensor.less),
                 ("le", tensor.less_equal), ("gt", tensor.greater), ("ge", tensor.greater_equal)]:
    CONVERTERS[f"aten.{_op}.Tensor"] = _binary(_fn, compare=True)
    CONVERTERS[f"aten.{_op}.Scalar"] = _binary(_fn, compare=True)
for _op, _fn in [("logical_and", tensor.logical_and), ("logical_or", tensor.logical_or),
                 ("logical_xor", tensor.logical_xor)]:
    CONVERTERS[f"aten.{_op}.default"] = (lambda fn: lambda c, node, a: fn(
        cast_to(a["self"], in_dtype(node), "bool"),
        cast_to(a["other"], in_dtype(node, "other"), "bool")))(_fn)
for _op, _fn in [("bitwise_and", tensor.bitwise_and), ("bitwise_or", tensor.bitwise_or),
                 ("bitwise_xor", tensor.bitwise_xor)]:
    CONVERTERS[f"aten.{_op}.Tensor"] = _binary(_fn)
    CONVERTERS[f"aten.{_op}.Scalar"] = _binary(_fn)


@reg("aten.bitwise_not.default")
def _bitwise_not(c, node, a):
    if out_dtype(node) == "bool":
        return tensor.logical_not(a["self"])
    return tensor.bitwise_not(a["self"])


def _alpha_scaled(node, a, dt) -> RelayExpr:
    y = _operand(node, a, "other", dt)
    alpha = a.get("alpha", 1)
    return y if alpha == 1 else tensor.multiply(y, scalar(alpha, dt))


@reg("aten.add.Tensor", "aten.add.Scalar")
def _add(c, node, a):
    dt = out_dtype(node)
    return tensor.add(_operand(node, a, "self", dt), _alpha_scaled(node, a, dt))


@reg("aten.sub.Tensor", "aten.sub.Scalar")
def _sub(c, node, a):
    dt = out_dtype(node)
    return tensor.subtract(_operand(node, a, "self", dt), _alpha_scaled(node, a, dt))


@reg("aten.rsub.Tensor", "aten.rsub.Scalar")
def _rsub(c, node, a):
    dt = out_dtype(node)
    return tensor.subtract(_alpha_scaled(node, a, dt), _operand(node, a, "self", dt))


@reg("aten.div.Tensor", "aten.div.Scalar", "aten.div.Tensor_mode", "aten.div.Scalar_mode")
def _div(c, node, a):
    dt = out_dtype(node)
    mode = a.get("rounding_mode")
    if mode == "floor" and not dt.startswith("float"):
        return tensor.floor_divide(_operand(node, a, "self", dt), _operand(node, a, "other", dt))
    if mode == "trunc" and not dt.startswith("float"):
        return tensor.divide(_operand(node, a, "self", dt), _operand(node, a, "other", dt))
    q = tensor.divide(_operand(node, a, "self", dt), _operand(node, a, "other", dt))
    return {None: q, "floor": tensor.floor, "trunc": tensor.trunc}[mode](q) if mode else q


@reg("aten.pow.Tensor_Scalar")
def _pow_scalar(c, node, a):
    dt = out_dtype(node)
    x = _operand(node, a, "self", dt)
    e = a["exponent"]
    if e == 1:
        return x
    if e == 2:
        return tensor.multiply(x, x)
    if e == 0.5 and dt.startswith("float"):
        return tensor.sqrt(x)
    return tensor.power(x, scalar(e, dt))


@reg("aten.where.self", "aten.where.ScalarOther", "aten.where.ScalarSelf", "aten.where.Scalar")
def _where(c, node, a):
    dt = out_dtype(node)
    cond = cast_to(a["condition"], in_dtype(node, "condition"), "bool")
    return tensor.where(cond, _operand(node, a, "self", dt), _operand(node, a, "other", dt))


@reg("aten.masked_fill.Scalar", "aten.masked_fill.Tensor")
def _masked_fill(c, node, a):
    dt = out_dtype(node)
    mask = cast_to(a["mask"], in_dtype(node, "mask"), "bool")
    return tensor.where(mask, _operand(node, a, "value", dt), _operand(node, a, "self", dt))


# ------------------------------------------------------------------------------------------------
# dtype conversions and constants shaped like a tensor
@reg("aten._to_copy.default", "aten.to.dtype", "aten.to.dtype_layout", "aten.to.device",
     "aten.to.other", "aten.type_as.default", "aten._assert_tensor_metadata.default")
def _to(c, node, a):
    if str(node.target) == "aten._assert_tensor_metadata.default":
        return None
    return cast_to(a["self"], in_dtype(node), out_dtype(node))


@reg("aten.zeros_like.default", "aten.ones_like.default", "aten.full_like.default",
     "aten.empty_like.default")
def _full_like(c, node, a):
    fill = {"aten.zeros_like.default": 0, "aten.ones_like.default": 1,
            "aten.empty_like.default": 0}.get(str(node.target), a.get("fill_value"))
    return const(np.full(out_shape(node), fill, dtype=out_dtype(node)))
