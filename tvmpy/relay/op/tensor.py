"""Elementwise (unary) and broadcast (binary) operators: ``relay.add``, ``relay.exp``, the
trigonometric and bitwise ops, ...

Binary operators require equal dtypes (no implicit promotion, as in TVM) and broadcast like numpy.
"""

from __future__ import annotations

from typing import Any

from ..expr import RelayExpr, Tuple
from ..ty import TensorType, Type
from ._rel import broadcast_bool_rel, broadcast_rel, broadcast_shape, fail, identity_rel, tensor_arg
from .registry import REQUIRED, OpPattern, make_call, register_op

_UNARY = [
    "negative", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "abs", "erf", "floor", "ceil",
    "round", "sign", "sin", "cos", "copy", "log2", "trunc", "isnan", "log1p", "tan", "asin",
    "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "bitwise_not", "isinf", "isfinite",
    "nearbyint",
]  # fmt: skip
_BINARY = [
    "add", "subtract", "multiply", "divide", "power", "maximum", "minimum", "mod",
    "floor_divide", "floor_mod", "logical_and", "logical_or", "bitwise_and", "bitwise_or",
    "bitwise_xor", "left_shift", "right_shift",
]  # fmt: skip
_COMPARE = ["equal", "not_equal", "less", "less_equal", "greater", "greater_equal"]
_BOOL_UNARY = ("isnan", "isinf", "isfinite")

__all__ = _UNARY + _BINARY + _COMPARE + [
    "clip", "where", "zeros_like", "ones_like", "logical_not", "logical_xor", "stack", "zeros",
    "ones", "full", "stop_fusion",
]  # fmt: skip


def _bool_unary_rel(arg_types: list[Type], attrs: Any) -> Type:
    t = tensor_arg(arg_types[0], "the input")
    return TensorType(t.shape, "bool")


for _n in _UNARY:
    register_op(_n, _bool_unary_rel if _n in _BOOL_UNARY else identity_rel, OpPattern.ELEMWISE, 1)
for _n in _BINARY:
    register_op(_n, broadcast_rel, OpPattern.BROADCAST, 2)
for _n in _COMPARE:
    register_op(_n, broadcast_bool_rel, OpPattern.BROADCAST, 2)
register_op("logical_not", identity_rel, OpPattern.ELEMWISE, 1)
register_op("annotation.stop_fusion", identity_rel, OpPattern.OPAQUE, 1,
            description="identity that FuseOps never fuses across, then drops (TVM's)")
register_op("logical_xor", broadcast_bool_rel, OpPattern.BROADCAST, 2)
register_op("zeros_like", identity_rel, OpPattern.ELEMWISE, 1)
register_op("ones_like", identity_rel, OpPattern.ELEMWISE, 1)
register_op("clip", identity_rel, OpPattern.ELEMWISE, 1, {"a_min": 0.0, "a_max": 0.0})


def _unary(name: str):
    def f(data: RelayExpr) -> RelayExpr:
        return make_call(name, [data])

    f.__name__ = name
    f.__doc__ = f"Elementwise ``{name}``."
    return f


def _binary(name: str):
    def f(lhs: RelayExpr, rhs: RelayExpr) -> RelayExpr:
        return make_call(name, [lhs, rhs])

    f.__name__ = name
    f.__doc__ = f"Broadcasting ``{name}`` (numpy rules)."
    return f


negative = _unary("negative")
exp = _unary("exp")
log = _unary("log")
log1p = _unary("log1p")
sqrt = _unary("sqrt")
rsqrt = _unary("rsqrt")
tanh = _unary("tanh")
sigmoid = _unary("sigmoid")
abs = _unary("abs")
erf = _unary("erf")
floor = _unary("floor")
ceil = _unary("ceil")
round = _unary("round")  # noqa: A001 - nearest, halves to even (numpy, ONNX, torch.round)
nearbyint = _unary("nearbyint")
nearbyint.__doc__ = ("Elementwise round to nearest, ties to even (numpy.rint; ONNX's and the QNN "
                     "requantization's rounding); the same as ``round``, TVM's name for it.")
sign = _unary("sign")
sin = _unary("sin")
cos = _unary("cos")
copy = _unary("copy")


def stop_fusion(data: RelayExpr) -> RelayExpr:
    """TVM's ``relay.annotation.stop_fusion``: ``data`` unchanged, but FuseOps puts its producer
    and its consumers in different functions (the value is materialized as it is; e.g. an int8
    tensor that must cross between two accelerator calls as int8) and then drops the call."""
    return make_call("annotation.stop_fusion", [data])


log2 = _unary("log2")
trunc = _unary("trunc")
isnan = _unary("isnan")
isinf = _unary("isinf")
isfinite = _unary("isfinite")
tan = _unary("tan")
asin = _unary("asin")
acos = _unary("acos")
atan = _unary("atan")
sinh = _unary("sinh")
cosh = _unary("cosh")
asinh = _unary("asinh")
acosh = _unary("acosh")
atanh = _unary("atanh")
bitwise_not = _unary("bitwise_not")
logical_not = _unary("logical_not")
zeros_like = _unary("zeros_like")
ones_like = _unary("ones_like")
add = _binary("add")
subtract = _binary("subtract")
multiply = _binary("multiply")
divide = _binary("divide")
power = _binary("power")
maximum = _binary("maximum")
minimum = _binary("minimum")
mod = _binary("mod")
floor_divide = _binary("floor_divide")
floor_mod = _binary("floor_mod")
logical_and = _binary("logical_and")
logical_or = _binary("logical_or")
logical_xor = _binary("logical_xor")
bitwise_and = _binary("bitwise_and")
bitwise_or = _binary("bitwise_or")
bitwise_xor = _binary("bitwise_xor")
left_shift = _binary("left_shift")
right_shift = _binary("right_shift")
equal = _binary("equal")
not_equal = _binary("not_equal")
less = _binary("less")
less_equal = _binary("less_equal")
greater = _binary("greater")
greater_equal = _binary("greater_equal")


def clip(a: RelayExpr, a_min: float, a_max: float) -> RelayExpr:
    if a_min > a_max:
        raise ValueError(f"clip: a_min {a_min} > a_max {a_max}")
    return make_call("clip", [a], {"a_min": float(a_min), "a_max": float(a_max)})


def _where_rel(arg_types: list[Type], attrs: Any) -> Type:
    c = tensor_arg(arg_types[0], "the condition")
    x = tensor_arg(arg_types[1], "x")
    y = tensor_arg(arg_types[2], "y")
    if x.dtype != y.dtype:
        fail(f"x and y dtypes differ: {x.dtype} vs {y.dtype}")
    xy = broadcast_shape(x.shape, y.shape, ("x", "y"))
    return TensorType(broadcast_shape(c.shape, xy, ("the condition", "x and y")), x.dtype)


register_op("where", _where_rel, OpPattern.BROADCAST, 3)


def where(condition: RelayExpr, x: RelayExpr, y: RelayExpr) -> RelayExpr:
    return make_call("where", [condition, x, y])


def _stack_rel(arg_types: list[Type], attrs: Any) -> Type:
    from ..size_checks import require_same
    from ..ty import is_any
    from ._rel import normalize_axis, shape_str, tuple_arg

    tt = tuple_arg(arg_types[0], "stack's input")
    if not tt.fields:
        fail("stack of an empty tuple")
    ts = [tensor_arg(f, f"field {i}") for i, f in enumerate(tt.fields)]
    first = ts[0]
    shp = list(first.shape)
    for i, t in enumerate(ts[1:], 1):
        # an Any dimension unifies with the other fields' (checked at run time)
        same = [require_same(a, b, f"dimension {j} of field {i}", f"dimension {j} of field 0")
                for j, (a, b) in enumerate(zip(t.shape, shp))] if len(t.shape) == len(shp) else []
        if t.dtype != first.dtype or len(t.shape) != len(first.shape) or any(
                d is None for d in same):
            fail(f"stack: field {i} is {t.dtype}{shape_str(t.shape)}, field 0 is "
                 f"{first.dtype}{shape_str(first.shape)}")
        # (of two ?, field 0's stays: the checks name it)
        shp = [b if is_any(a) and is_any(b) else a for a, b in zip(same, shp)]
    ax = normalize_axis(attrs.axis, len(first.shape) + 1)
    shp.insert(ax, len(ts))
    return TensorType(shp, first.dtype)


register_op("stack", _stack_rel, OpPattern.INJECTIVE, 1, {"axis": 0})


def stack(data: Any, axis: int = 0) -> RelayExpr:
    if not isinstance(data, RelayExpr):
        data = Tuple(list(data))
    return make_call("stack", [data], {"axis": int(axis)})


def _full_rel(arg_types: list[Type], attrs: Any) -> Type:
    if arg_types:
        v = tensor_arg(arg_types[0], "fill_value")
        if v.shape != ():
            fail(f"fill_value must be a scalar, got shape {v.shape}")
    return TensorType(attrs.shape, attrs.dtype)


register_op("zeros", _full_rel, OpPattern.ELEMWISE, 0, {"shape": REQUIRED, "dtype": REQUIRED})
register_op("ones", _full_rel, OpPattern.ELEMWISE, 0, {"shape": REQUIRED, "dtype": REQUIRED})
register_op("full", _full_rel, OpPattern.ELEMWISE, 1, {"shape": REQUIRED, "dtype": REQUIRED})


def zeros(shape: Any, dtype: str = "float32") -> RelayExpr:
    return make_call("zeros", [], {"shape": tuple(shape), "dtype": dtype})


def ones(shape: Any, dtype: str = "float32") -> RelayExpr:
    return make_call("ones", [], {"shape": tuple(shape), "dtype": dtype})


def full(fill_value: RelayExpr, shape: Any, dtype: str = "float32") -> RelayExpr:
    return make_call("full", [fill_value], {"shape": tuple(shape), "dtype": dtype})
