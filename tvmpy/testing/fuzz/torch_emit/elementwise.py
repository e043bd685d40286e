"""Torch translations of the fuzzer's ONNX nodes: elementwise operators: unary, activations, binary with broadcasting, variadic, clip, where, casts."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from ._common import (
    Fn,
    Node,
    _emit,
    _tdt,
)

# ---------------------------------------------------------------------------------------------
# elementwise


_UNARY: dict[str, Fn] = {
    "Abs": torch.abs, "Neg": torch.neg, "Relu": torch.relu, "Sigmoid": torch.sigmoid,
    "Tanh": torch.tanh, "Exp": torch.exp, "Log": torch.log, "Sqrt": torch.sqrt,
    "Reciprocal": torch.reciprocal, "Sin": torch.sin, "Cos": torch.cos, "Tan": torch.tan,
    "Asin": torch.asin, "Acos": torch.acos, "Atan": torch.atan, "Sinh": torch.sinh,
    "Cosh": torch.cosh, "Asinh": torch.asinh, "Acosh": torch.acosh, "Atanh": torch.atanh,
    "Erf": torch.erf, "Floor": torch.floor, "Ceil": torch.ceil, "Round": torch.round,
    "Sign": torch.sign, "Softplus": F.softplus, "Softsign": F.softsign, "Mish": F.mish,
    "HardSwish": F.hardswish, "Not": torch.logical_not, "BitwiseNot": torch.bitwise_not,
    "IsNaN": torch.isnan,
}


@_emit(*_UNARY)
def _unary(n: Node) -> Fn:
    f = _UNARY[n.op]
    return lambda x: f(x)


@_emit("Identity")
def _identity(n: Node) -> Fn:
    return lambda x: x


@_emit("Elu", "Celu", "LeakyRelu", "Selu", "HardSigmoid", "ThresholdedRelu", "Shrink")
def _activation(n: Node) -> Fn:
    op = n.op
    if op == "Elu":
        alpha = float(n.attr("alpha", 1.0))
        return lambda x: F.elu(x, alpha)
    if op == "Celu":
        alpha = float(n.attr("alpha", 1.0))
        return lambda x: F.celu(x, alpha)
    if op == "LeakyRelu":
        alpha = float(n.attr("alpha", 0.01))
        return lambda x: F.leaky_relu(x, alpha)
    if op == "Selu":
        alpha = float(n.attr("alpha", 1.67326319217681884765625))
        gamma = float(n.attr("gamma", 1.05070102214813232421875))
        return lambda x: gamma * F.elu(x, alpha)
    if op == "HardSigmoid":
        alpha, beta = float(n.attr("alpha", 0.2)), float(n.attr("beta", 0.5))
        return lambda x: torch.clamp(alpha * x + beta, 0.0, 1.0)
    if op == "ThresholdedRelu":
        alpha = float(n.attr("alpha", 1.0))
        return lambda x: torch.where(x > alpha, x, torch.zeros_like(x))
    lambd, bias = float(n.attr("lambd", 0.5)), float(n.attr("bias", 0.0))
    return lambda x: torch.where(x < -lambd, x + bias,
                                 torch.where(x > lambd, x - bias, torch.zeros_like(x)))


@_emit("IsInf")
def _isinf(n: Node) -> Fn:
    pos, neg = int(n.attr("detect_positive", 1)), int(n.attr("detect_negative", 1))
    if pos and neg:
        return lambda x: torch.isinf(x)
    if pos:
        return lambda x: torch.isposinf(x)
    if neg:
        return lambda x: torch.isneginf(x)
    return lambda x: torch.zeros_like(x, dtype=torch.bool)


_BINARY: dict[str, Fn] = {
    "Add": torch.add, "Sub": torch.sub, "Mul": torch.mul, "Equal": torch.eq,
    "Less": torch.lt, "Greater": torch.gt, "LessOrEqual": torch.le, "GreaterOrEqual": torch.ge,
    "And": torch.logical_and, "Or": torch.logical_or, "Xor": torch.logical_xor,
    "BitwiseAnd": torch.bitwise_and, "BitwiseOr": torch.bitwise_or,
    "BitwiseXor": torch.bitwise_xor,
}


@_emit(*_BINARY)
def _binary(n: Node) -> Fn:
    f = _BINARY[n.op]
    return lambda a, b: f(a, b)


@_emit("Div")
def _div(n: Node) -> Fn:
    if n.dtype(0).kind in "iu":  # ONNX integer division truncates toward zero
        return lambda a, b: torch.div(a, b, rounding_mode="trunc")
    return lambda a, b: torch.div(a, b)


@_emit("Mod")
def _mod(n: Node) -> Fn:
    if int(n.attr("fmod", 0)):
        return lambda a, b: torch.fmod(a, b)  # C fmod: the dividend's sign
    if n.dtype(0).kind == "f":
        raise n.refuse("Mod with fmod=0 on floats is invalid ONNX")
    return lambda a, b: torch.remainder(a, b)  # Python modulo: the divisor's sign


@_emit("Pow")
def _pow(n: Node) -> Fn:
    dt = _tdt(n.out_dtype())
    if n.dtype(0) != n.dtype(1) and n.dtype(0).kind != "f":
        raise n.refuse("integer base with a different exponent type")
    return lambda a, b: torch.pow(a, b).to(dt)


@_emit("PRelu")
def _prelu(n: Node) -> Fn:
    xs, ss = n.shape(0), n.shape(1)
    if len(xs) >= 2 and ss == (xs[1],) + (1,) * (len(xs) - 2):  # one slope per channel
        return lambda x, s: F.prelu(x, s.reshape(-1))
    return lambda x, s: torch.where(x < 0, x * s, x)


@_emit("Max", "Min", "Sum", "Mean")
def _variadic(n: Node) -> Fn:
    op, k = n.op, len(n.inputs)

    if k == 1:
        return lambda x: x.clone()
    pair = {"Max": torch.maximum, "Min": torch.minimum}.get(op, torch.add)

    def fn(*xs: torch.Tensor) -> torch.Tensor:
        acc = xs[0]
        for x in xs[1:]:
            acc = pair(acc, x)
        return acc / k if op == "Mean" else acc
    return fn


@_emit("Clip")
def _clip(n: Node) -> Fn:
    lo, hi = n.const(1), n.const(2)
    lo_v = None if lo is None else np.asarray(lo).item()
    hi_v = None if hi is None else np.asarray(hi).item()
    if lo_v is None and hi_v is None:
        return lambda x, *_: x.clone()
    return lambda x, *_: torch.clamp(x, lo_v, hi_v)


@_emit("Where")
def _where(n: Node) -> Fn:
    return lambda c, a, b: torch.where(c, a, b)


@_emit("Cast", "CastLike")
def _cast(n: Node) -> Fn:
    dt = _tdt(n.out_dtype())
    if n.op == "Cast" and n.attr("saturate", 1) != 1:
        raise n.refuse("saturate=0 (float8 casts)")
    return lambda x, *_: x.to(dt)
