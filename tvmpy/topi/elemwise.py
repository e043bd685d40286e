"""Elementwise unary operators: one ``te.compute`` each, tagged ``elemwise`` (fusable into any
neighbour). Float math goes through TIR intrinsics (``exp``, ``erf``, ...), so each backend
picks its own implementation; integer inputs are accepted where the math is exact."""

from __future__ import annotations

import math
from typing import Any

from .. import te
from ..arith import can_prove
from ..ir import dtype as dt
from ..tir import op as tir_op
from ..tir.expr import Select, cast, const
from . import tag
from .utils import normalize_axis

__all__ = [
    "identity", "negative", "abs", "exp", "log", "sqrt", "rsqrt", "sigmoid", "tanh", "erf", "floor",
    "ceil", "round", "nearbyint", "trunc", "sign", "relu", "leaky_relu", "prelu", "clip", "gelu", "hard_sigmoid",
    "hard_swish", "logical_not", "bitwise_not", "isnan", "isinf", "isfinite", "sin", "cos",
    "softplus", "reciprocal", "elemwise", "elemwise_sum",
]


def _check_tensor(x: Any, op: str) -> te.Tensor:
    if not isinstance(x, te.Tensor):
        raise TypeError(f"topi.{op}: expected a te.Tensor, got {type(x).__name__} {x!r}")
    return x


def elemwise(x: te.Tensor, f: Any, name: str) -> te.Tensor:
    """``out[i...] = f(x[i...])`` as a tagged elementwise compute."""
    _check_tensor(x, name)
    return te.compute(x.shape, lambda *i: f(x(*i)), name=name, tag=tag.ELEMWISE)


def _float_only(name: str, fn: Any) -> Any:
    def op(x: te.Tensor) -> te.Tensor:
        _check_tensor(x, name)
        if not (dt.is_float(x.dtype) or dt.is_low_float(x.dtype)):
            raise TypeError(f"topi.{name}: needs a float tensor, got {x.name} of dtype {x.dtype} "
                            f"(cast it first with topi.cast)")
        return elemwise(x, fn, name)

    op.__name__ = name
    op.__doc__ = f"Elementwise ``{name}`` of a float tensor."
    return op


exp = _float_only("exp", tir_op.exp)
log = _float_only("log", tir_op.log)
sqrt = _float_only("sqrt", tir_op.sqrt)
rsqrt = _float_only("rsqrt", tir_op.rsqrt)
sigmoid = _float_only("sigmoid", tir_op.sigmoid)
tanh = _float_only("tanh", tir_op.tanh)
erf = _float_only("erf", tir_op.erf)
sin = _float_only("sin", tir_op.sin)
cos = _float_only("cos", tir_op.cos)
isnan = _float_only("isnan", tir_op.isnan)
isinf = _float_only("isinf", tir_op.isinf)
isfinite = _float_only("isfinite", tir_op.isfinite)


def _float_or_identity(name: str, fn: Any) -> Any:
    """floor/ceil/round/trunc: the identity on integers (as numpy)."""

    def op(x: te.Tensor) -> te.Tensor:
        _check_tensor(x, name)
        if not (dt.is_float(x.dtype) or dt.is_low_float(x.dtype)):
            return elemwise(x, lambda v: v, name)
        return elemwise(x, fn, name)

    op.__name__ = name
    op.__doc__ = f"Elementwise ``{name}`` (identity on integer tensors)."
    return op


floor = _float_or_identity("floor", tir_op.floor)
ceil = _float_or_identity("ceil", tir_op.ceil)
round = _float_or_identity("round", tir_op.round)  # noqa: A001 - half to even, as numpy/ONNX
trunc = _float_or_identity("trunc", tir_op.trunc)
nearbyint = _float_or_identity("nearbyint", tir_op.nearbyint)  # ties to even


def elemwise_sum(xs: Any) -> te.Tensor:
    """TVM's ``topi.elemwise_sum(xs)``: the element-wise sum of tensors of one shape and dtype."""
    if isinstance(xs, te.Tensor) or not isinstance(xs, (list, tuple)) or not xs:
        raise TypeError(f"topi.elemwise_sum: expected a non-empty list of te.Tensors, got {xs!r}")
    for x in xs:
        _check_tensor(x, "elemwise_sum")
    first = xs[0]
    for x in xs[1:]:
        same = len(x.shape) == len(first.shape) and all(
            can_prove(a == b) for a, b in zip(x.shape, first.shape))
        if not same or x.dtype != first.dtype:
            raise ValueError(f"topi.elemwise_sum: every input needs the shape and dtype of the "
                             f"first, {list(first.shape)} {first.dtype}; got {list(x.shape)} "
                             f"{x.dtype}")

    def body(*i: Any) -> Any:
        out = xs[0](*i)
        for x in xs[1:]:
            out = out + x(*i)
        return out

    return te.compute(first.shape, body, name="elemwise_sum", tag=tag.ELEMWISE)


def identity(x: te.Tensor) -> te.Tensor:
    return elemwise(x, lambda v: v, "identity")


def negative(x: te.Tensor) -> te.Tensor:
    _check_tensor(x, "negative")
    if dt.is_bool(x.dtype):
        raise TypeError(f"topi.negative: not defined on bool tensor {x.name}")
    return elemwise(x, lambda v: const(0, x.dtype) - v, "negative")


def abs(x: te.Tensor) -> te.Tensor:  # noqa: A001
    return elemwise(x, tir_op.abs, "abs")


def sign(x: te.Tensor) -> te.Tensor:
    """-1, 0 or 1 (0 for NaN-free zero), in the input's dtype."""
    _check_tensor(x, "sign")
    d = x.dtype
    if dt.is_bool(d):
        return identity(x)

    def f(v: Any) -> Any:
        return Select(v > const(0, d), const(1, d), Select(v < const(0, d), const(-1, d), const(0, d)))

    return elemwise(x, f, "sign")


def reciprocal(x: te.Tensor) -> te.Tensor:
    _check_tensor(x, "reciprocal")
    return elemwise(x, lambda v: const(1, x.dtype) / v, "reciprocal")


def relu(x: te.Tensor) -> te.Tensor:
    """``max(x, 0)``."""
    _check_tensor(x, "relu")
    return elemwise(x, lambda v: tir_op.max(v, const(0, x.dtype)), "relu")


def leaky_relu(x: te.Tensor, alpha: float = 0.01) -> te.Tensor:
    """``x if x > 0 else alpha * x``."""
    _check_tensor(x, "leaky_relu")
    if not (dt.is_float(x.dtype) or dt.is_low_float(x.dtype)):
        raise TypeError(f"topi.leaky_relu: needs a float tensor, got {x.dtype}")
    a = const(float(alpha), x.dtype)
    return elemwise(x, lambda v: Select(v > const(0, x.dtype), v, v * a), "leaky_relu")


def prelu(x: te.Tensor, slope: te.Tensor, axis: int = 1) -> te.Tensor:
    """``x if x > 0 else slope[c] * x`` with ``c`` the index along ``axis`` (1-D ``slope``)."""
    _check_tensor(x, "prelu")
    _check_tensor(slope, "prelu")
    ax = normalize_axis(axis, x.ndim, "prelu")
    if slope.ndim != 1:
        raise ValueError(f"topi.prelu: slope must be 1-D, got shape {slope.shape}")
    from ..arith import can_prove

    if not can_prove(slope.shape[0] == x.shape[ax]):
        raise ValueError(f"topi.prelu: slope has {slope.shape[0]} entries but axis {axis} of the "
                         f"input has size {x.shape[ax]}")

    def f(*i: Any) -> Any:
        v = x(*i)
        return Select(v > const(0, x.dtype), v, v * slope[i[ax]])

    return te.compute(x.shape, f, name="prelu", tag=tag.BROADCAST)


def clip(x: te.Tensor, a_min: Any, a_max: Any) -> te.Tensor:
    """``min(max(x, a_min), a_max)``; bounds are Python numbers (or scalar expressions)."""
    _check_tensor(x, "clip")
    d = x.dtype
    if isinstance(a_min, (int, float)) and isinstance(a_max, (int, float)) and a_min > a_max:
        raise ValueError(f"topi.clip: a_min={a_min} is greater than a_max={a_max}")

    def bound(b: Any) -> Any:
        if isinstance(b, float) and not dt.is_float(d):
            b = math.floor(b) if b >= 0 else math.ceil(b)
        if isinstance(b, (int, float)):
            info_lo, info_hi = tir_op.min_value(d), tir_op.max_value(d)
            if not dt.is_float(d):
                b = max(int(info_lo.value), min(int(info_hi.value), int(b)))
            return const(b, d)
        return cast(b, d)

    lo, hi = bound(a_min), bound(a_max)
    return elemwise(x, lambda v: tir_op.min(tir_op.max(v, lo), hi), "clip")


def gelu(x: te.Tensor, approximate: str = "none") -> te.Tensor:
    """``0.5 * x * (1 + erf(x / sqrt(2)))`` (the exact, erf form), or with
    ``approximate="tanh"``: ``0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x**3)))``."""
    _check_tensor(x, "gelu")
    if not (dt.is_float(x.dtype) or dt.is_low_float(x.dtype)):
        raise TypeError(f"topi.gelu: needs a float tensor, got {x.dtype}")
    if approximate not in ("none", "tanh"):
        raise ValueError(f"topi.gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    d = x.dtype

    def f(v: Any) -> Any:
        if approximate == "tanh":
            inner = const(math.sqrt(2 / math.pi), d) * (v + const(0.044715, d) * v * v * v)
            return const(0.5, d) * v * (const(1.0, d) + tir_op.tanh(inner))
        return const(0.5, d) * v * (const(1.0, d) + tir_op.erf(v * const(1 / math.sqrt(2), d)))

    return elemwise(x, f, "gelu")


def hard_sigmoid(x: te.Tensor, alpha: float = 0.2, beta: float = 0.5) -> te.Tensor:
    """``clip(alpha * x + beta, 0, 1)`` (ONNX HardSigmoid)."""
    _check_tensor(x, "hard_sigmoid")
    d = x.dtype

    def f(v: Any) -> Any:
        return tir_op.min(tir_op.max(v * const(alpha, d) + const(beta, d), const(0, d)), const(1, d))

    return elemwise(x, f, "hard_sigmoid")


def hard_swish(x: te.Tensor) -> te.Tensor:
    """``x * relu6(x + 3) / 6``."""
    _check_tensor(x, "hard_swish")
    if not (dt.is_float(x.dtype) or dt.is_low_float(x.dtype)):
        raise TypeError(f"topi.hard_swish: needs a float tensor, got {x.dtype}")
    d = x.dtype

    def f(v: Any) -> Any:
        r6 = tir_op.min(tir_op.max(v + const(3, d), const(0, d)), const(6, d))
        return v * r6 * const(1 / 6, d)

    return elemwise(x, f, "hard_swish")


def softplus(x: te.Tensor) -> te.Tensor:
    """``log(1 + exp(x))``, computed stably as ``max(x, 0) + log1p(exp(-|x|))``."""
    _check_tensor(x, "softplus")
    d = x.dtype

    def f(v: Any) -> Any:
        return tir_op.max(v, const(0, d)) + tir_op.log1p(tir_op.exp(-tir_op.abs(v)))

    return _float_only("softplus", f)(x)


def logical_not(x: te.Tensor) -> te.Tensor:
    """``not x`` (nonzero is true); the result is bool."""
    _check_tensor(x, "logical_not")
    if dt.is_bool(x.dtype):
        return elemwise(x, lambda v: ~v, "logical_not")
    return elemwise(x, lambda v: v == const(0, x.dtype), "logical_not")


def bitwise_not(x: te.Tensor) -> te.Tensor:
    _check_tensor(x, "bitwise_not")
    if not dt.is_integer(x.dtype) or dt.is_bool(x.dtype):
        raise TypeError(f"topi.bitwise_not: needs an integer tensor, got {x.dtype}")
    return elemwise(x, tir_op.bitwise_not, "bitwise_not")
