"""ONNX activations with parameters (LeakyRelu, Elu, Selu, Gelu, ...) and the softmax family
(Softmax, LogSoftmax, Hardmax) with its pre-opset-13 flattening."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ...expr import RelayExpr, const
from ...op import nn, tensor, transform
from ...op import reduce as _red
from ..common import reshape_to, softplus
from .context import ImportContext, dtype_of, scalar_like, shape_of
from .registry import (
    Attrs,
    Converter,
    Inputs,
    Names,
    Output,
    converter,
    register,
)


@converter("LeakyRelu")
def _leaky(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    return nn.leaky_relu(inputs[0], attrs.get("alpha", 0.01))


@converter("PRelu")
def _prelu(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    x, s = inputs
    return tensor.where(tensor.less(x, scalar_like(0, x)), tensor.multiply(x, s), x)


@converter("Elu")
def _elu(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    x = inputs[0]
    neg = tensor.multiply(scalar_like(attrs.get("alpha", 1.0), x),
                          tensor.subtract(tensor.exp(x), scalar_like(1, x)))
    return tensor.where(tensor.less(x, scalar_like(0, x)), neg, x)


@converter("Selu")
def _selu(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    x = inputs[0]
    al, ga = (
        attrs.get("alpha", 1.67326319217681884765625),
        attrs.get("gamma", 1.05070102214813232421875),
    )
    neg = tensor.multiply(scalar_like(al, x), tensor.subtract(tensor.exp(x), scalar_like(1, x)))
    return tensor.multiply(
        scalar_like(ga, x), tensor.where(tensor.less(x, scalar_like(0, x)), neg, x)
    )


@converter("Celu")
def _celu(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    x = inputs[0]
    al = attrs.get("alpha", 1.0)
    neg = tensor.multiply(scalar_like(al, x), tensor.subtract(
        tensor.exp(tensor.divide(x, scalar_like(al, x))), scalar_like(1, x)))
    return tensor.add(nn.relu(x), tensor.minimum(scalar_like(0, x), neg))


@converter("Softplus")
def _softplus(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    return softplus(inputs[0], dtype_of(inputs[0]))


@converter("Softsign")
def _softsign(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    return tensor.divide(inputs[0], tensor.add(tensor.abs(inputs[0]), scalar_like(1, inputs[0])))


@converter("HardSigmoid")
def _hsig(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    x = inputs[0]
    y = tensor.add(
        tensor.multiply(x, scalar_like(attrs.get("alpha", 0.2), x)),
        scalar_like(attrs.get("beta", 0.5), x),
    )
    return tensor.clip(y, 0.0, 1.0)


@converter("HardSwish")
def _hswish(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    x = inputs[0]
    y = tensor.clip(
        tensor.add(tensor.multiply(x, scalar_like(1 / 6, x)), scalar_like(0.5, x)), 0.0, 1.0
    )
    return tensor.multiply(x, y)


@converter("Gelu")
def _gelu(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    # tanh: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    if attrs.get("approximate", "none") == "tanh":
        x = inputs[0]
        inner = tensor.multiply(
            scalar_like(math.sqrt(2 / math.pi), x),
            tensor.add(
                x,
                tensor.multiply(
                    scalar_like(0.044715, x), tensor.multiply(x, tensor.multiply(x, x))
                ),
            ),
        )
        return tensor.multiply(tensor.multiply(scalar_like(0.5, x), x),
                               tensor.add(scalar_like(1, x), tensor.tanh(inner)))
    return nn.gelu(inputs[0], attrs.get("approximate", "none"))


@converter("ThresholdedRelu")
def _thr_relu(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    x = inputs[0]
    return tensor.where(
        tensor.greater(x, scalar_like(attrs.get("alpha", 1.0), x)), x, scalar_like(0, x)
    )


@converter("Shrink")
def _shrink(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    x = inputs[0]
    lam, bias = attrs.get("lambd", 0.5), attrs.get("bias", 0.0)
    hi = tensor.where(
        tensor.greater(x, scalar_like(lam, x)),
        tensor.subtract(x, scalar_like(bias, x)),
        scalar_like(0, x),
    )
    return tensor.where(
        tensor.less(x, scalar_like(-lam, x)), tensor.add(x, scalar_like(bias, x)), hi
    )


@converter("Swish")
def _swish(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    x = inputs[0]
    return tensor.multiply(
        x, tensor.sigmoid(tensor.multiply(x, scalar_like(attrs.get("alpha", 1.0), x)))
    )


def _softmax(fn: Callable[[RelayExpr, int], RelayExpr]) -> Converter:
    def convert(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
        x = inputs[0]
        s = shape_of(x)
        if ctx.opset >= 13:
            return fn(x, attrs.get("axis", -1))
        ax = attrs.get("axis", 1) % len(s)
        if ax == len(s) - 1:
            return fn(x, -1)
        flat = reshape_to(x, (int(np.prod(s[:ax])), int(np.prod(s[ax:]))))
        return reshape_to(fn(flat, -1), s)
    return convert


def _softmax_half_steps(x: RelayExpr, axis: int) -> RelayExpr:
    """float16 softmax as ONNX defines it (its function body: ReduceMax, Sub, Exp, ReduceSum,
    Div, each in the input type) and as onnx's reference and numpy compute it: every step
    rounded to float16 (exp and the sum evaluated in float32, as numpy does), not one float32
    softmax rounded once (which differs by an ulp on some elements)."""
    def f16(e: RelayExpr) -> RelayExpr:
        return transform.cast(e, "float16")

    def f32(e: RelayExpr) -> RelayExpr:
        return transform.cast(e, "float32")

    d = tensor.subtract(x, _red.max(x, axis=axis, keepdims=True))
    e = f16(tensor.exp(f32(d)))
    return tensor.divide(e, f16(_red.sum(f32(e), axis=axis, keepdims=True)))


def _softmax_any(x: RelayExpr, axis: int) -> RelayExpr:
    if dtype_of(x) == "float16":
        return _softmax_half_steps(x, axis)
    return nn.softmax(x, axis)


register("Softmax", _softmax(_softmax_any))
register("LogSoftmax", _softmax(nn.log_softmax))


def _hardmax_axis(x: RelayExpr, ax: int) -> RelayExpr:
    s = shape_of(x)
    idx = _red.argmax(x, axis=[ax], keepdims=False)
    return transform.one_hot(idx, scalar_like(1, x), scalar_like(0, x), s[ax], ax, dtype_of(x))


@converter("Hardmax")
def _hardmax(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    x = inputs[0]
    s = shape_of(x)
    if 0 in s:  # an empty input: an empty output (its arg-max over an empty axis is undefined)
        return const(np.zeros(s, dtype=dtype_of(x)))
    if ctx.opset >= 13:
        return _hardmax_axis(x, attrs.get("axis", -1) % len(s))
    ax = attrs.get("axis", 1) % len(s)  # before opset 13: over the input flattened to 2-D at axis
    flat = reshape_to(x, (int(np.prod(s[:ax])), int(np.prod(s[ax:]))))
    return reshape_to(_hardmax_axis(flat, 1), s)
